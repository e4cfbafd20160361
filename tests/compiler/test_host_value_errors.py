"""Globals device code cannot read, said for what they are: a class's attribute or
staticmethod, an object of a Python class, a global dict; and an IntEnum member where a float is
wanted (Numba converts IntEnum members to integers only, on the CPU as well).  Each error names
the kernel's line and what to write instead."""

import enum
import functools

import numpy as np
import pytest

from gpureplace import CompileError, cuda

SIG = "void(float32[:])"


class Params:
    scale = 2.0

    @staticmethod
    def helper(v):
        return v * 2.0

    @classmethod
    def make(cls, v):
        return v

    def method(self, v):
        return v


PARAMS = Params()
TABLE = {0: 1.0, 1: 2.0}


class Color(enum.IntEnum):
    RED = 1
    GREEN = 2


@cuda.jit
def reads_class_attribute(x):
    i = cuda.grid(1)
    x[i] *= Params.scale


@cuda.jit
def calls_staticmethod(x):
    i = cuda.grid(1)
    x[i] = Params.helper(x[i])


@cuda.jit
def calls_classmethod(x):
    i = cuda.grid(1)
    x[i] = Params.make(x[i])


@cuda.jit
def makes_an_object(x):
    i = cuda.grid(1)
    x[i] = Params().scale


@cuda.jit
def reads_object_attribute(x):
    i = cuda.grid(1)
    x[i] = PARAMS.scale


@cuda.jit
def calls_object_method(x):
    i = cuda.grid(1)
    x[i] = PARAMS.method(x[i])


@cuda.jit
def reads_global_dict(x):
    i = cuda.grid(1)
    x[i] = TABLE[1]


@cuda.jit
def stores_int_enum_in_floats(x):
    i = cuda.grid(1)
    x[i] = Color.GREEN


@cuda.jit
def multiplies_int_enum_by_float(x):
    i = cuda.grid(1)
    x[i] = x[i] * Color.RED


def _plus_one(v):
    return v + 1.0


FUNC_LIST = [_plus_one, _plus_one]
PARTIAL = functools.partial(_plus_one)


@cuda.jit
def calls_through_a_list(x):
    i = cuda.grid(1)
    x[i] = FUNC_LIST[0](x[i])


@cuda.jit
def calls_a_partial(x):
    i = cuda.grid(1)
    x[i] = PARTIAL(x[i])


@cuda.jit
def raises_a_formatted_message(x):
    i = cuda.grid(1)
    if i > 8:
        raise ValueError("bad %d" % i)


@cuda.jit
def stores_int_enum_value(x):
    i = cuda.grid(1)
    x[i] = Color.GREEN.value


def _error(kernel, launch=False):
    with pytest.raises(CompileError) as info:
        if launch:                                 # the first launch (the simulator here)
            kernel[1, 4](np.zeros(4, np.float32))
        else:
            kernel.compile(SIG)
    err = info.value
    assert err.lineno == kernel.py_func.__code__.co_firstlineno + 3      # the kernel's line
    assert err.filename == __file__ and err.function == kernel.__name__
    assert "is a host function" not in err.reason
    return err.reason


@pytest.mark.parametrize("launch", [False, True])
@pytest.mark.parametrize("kernel, expected", [
    (reads_class_attribute,
     "Params.scale reads an attribute of the class Params: reading the attributes of Python "
     "classes or their objects is not supported in device code; bind the value to a module "
     "global (SCALE = Params.scale) and read that, or pass it to the kernel as an argument"),
    (calls_staticmethod,
     "Params.helper(...) calls a staticmethod of the class Params: calling the methods of "
     "Python classes or reading their attributes is not supported in device code; make helper "
     "a module-level function (kernels compile the plain functions they call) or a "
     "cuda.jit(device=True) function, and call it as helper(...)"),
    (calls_classmethod, "Params.make(...) calls a classmethod of the class Params: "),
    (makes_an_object, "Params is a Python class: device code cannot make or use Python "
                      "objects; pass the numbers, tuples or arrays the kernel needs"),
    (reads_object_attribute,
     "PARAMS.scale reads an attribute of PARAMS, an object of the Python class Params: "
     "reading the attributes of Python classes or their objects is not supported in device "
     "code; bind the value to a module global (SCALE = PARAMS.scale)"),
    (calls_object_method, "PARAMS.method(...) calls a method of PARAMS, an object of the "
                          "Python class Params: "),
    (reads_global_dict,
     "TABLE is a global dict, which device code cannot read (dicts are host objects); use a "
     "tuple or a global NumPy array indexed by the key (keys 0 to n-1), a module-level "
     "constant for each entry, or a device array passed as an argument"),
    (stores_int_enum_in_floats,
     "Color.GREEN (a member of the IntEnum Color) cannot be converted to float32 in device "
     "code: Numba converts IntEnum members to integer types only; use its integer value, "
     "Color.GREEN.value"),
    (multiplies_int_enum_by_float,
     "Color.RED (a member of the IntEnum Color) cannot be converted to float64 in device "
     "code"),
    (calls_through_a_list,
     "FUNC_LIST is a list of functions (_plus_one, _plus_one): device code cannot take a "
     "function out of a list (FUNC_LIST[0](...)); call the function by its name"),
    (calls_a_partial,
     "PARTIAL is functools.partial(_plus_one, ...), which device code cannot call (a partial "
     "is a host object); call _plus_one with the bound arguments written out"),
])
def test_a_global_device_code_cannot_read_is_said_for_what_it_is(kernel, expected, launch):
    assert _error(kernel, launch).startswith(expected)


def test_an_int_enum_value_converts():
    x = np.zeros(4, np.float32)
    stores_int_enum_value[1, 4](x)
    assert x.tolist() == [2.0] * 4


def test_numba_on_the_cpu_refuses_an_int_enum_member_as_a_float_too():
    """(Why gpureplace refuses it rather than converts: Numba has no such conversion.)"""
    import numba

    @numba.njit
    def store(out):
        out[0] = Color.GREEN

    with pytest.raises(Exception, match="Cannot cast IntEnum"):
        store(np.zeros(1, np.float32))


@pytest.mark.parametrize("launch", [False, True])
def test_a_formatted_raise_message_is_said_as_such(launch):
    with pytest.raises(CompileError) as info:
        if launch:
            raises_a_formatted_message[1, 4](np.zeros(4, np.float32))
        else:
            raises_a_formatted_message.compile(SIG)
    err = info.value
    assert err.lineno == raises_a_formatted_message.py_func.__code__.co_firstlineno + 4
    assert err.reason.startswith("formatting a string with % is not supported in device code")
