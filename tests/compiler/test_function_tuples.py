"""A global tuple of functions called through (``FUNCS[1](x)``) is refused for what it is: the
error names the global, the functions it holds and the index, and says what works instead
(calling the function by its name, a global of its own, a branch on a number)."""

import collections
import math

import numpy as np
import pytest

from gpureplace import CompileError, cuda

SIG = "void(float64[:])"


def fa(v):
    return v + 1.0


def fb(v):
    return v + 2.0


@cuda.jit(device=True)
def fc(v):
    return v * 3.0


FUNCS = (fa, fb)
MIXED = (1.0, fc, math.sqrt)
FB = FUNCS[1]
OPS = collections.namedtuple("OPS", "f g")(fa, lambda v: v + 21.0)
OP = OPS.g


@cuda.jit
def through_tuple(x):
    x[0] = FUNCS[1](x[0])


@cuda.jit
def through_mixed_tuple(x, i):
    x[0] = MIXED[i](x[0])


@cuda.jit
def through_own_global(x):
    x[0] = FB(x[0])


@cuda.jit
def through_named_field(x):
    x[0] = OPS.g(x[0])


@cuda.jit
def through_own_global_lambda(x):
    x[0] = OP(x[0])


def _error(kernel, sig, launch):
    with pytest.raises(CompileError) as info:
        if launch:                                 # the first launch (the simulator here)
            kernel[1, 1](np.zeros(1), *([1] if "int64" in sig else []))
        else:
            kernel.compile(sig)
    err = info.value
    assert err.lineno == kernel.py_func.__code__.co_firstlineno + 2      # the kernel's line
    assert err.filename == __file__ and err.function == kernel.__name__
    return err.reason


@pytest.mark.parametrize("launch", [False, True])
def test_a_tuple_of_functions_is_said_for_what_it_is(launch):
    reason = _error(through_tuple, SIG, launch)
    assert reason.startswith(
        "FUNCS is a tuple of functions (fa, fb): device code cannot take a function out of a "
        "tuple (FUNCS[1](...)); call the function by its name (fb(...)), bind it to a global of "
        "its own (FB = FUNCS[1]) and call that, or choose by a number: if which == 0: ... "
        "elif which == 1: ..."), reason
    assert "Python class tuple" not in reason


@pytest.mark.parametrize("launch", [False, True])
def test_a_tuple_holding_functions_and_an_index_not_known_names_the_first_function(launch):
    reason = _error(through_mixed_tuple, "void(float64[:], int64)", launch)
    assert reason.startswith("MIXED is a tuple holding functions (fc, sqrt): "), reason
    assert "(MIXED[1](...)); call the function by its name (fc(...))" in reason, reason


def test_what_the_message_suggests_works():
    x = np.zeros(1)
    through_own_global[1, 1](x)
    assert x[0] == 2.0


def test_a_named_tuples_lambda_is_named_as_written_and_the_suggestion_is_python():
    reason = _error(through_named_field, SIG, False)
    # the field as the user wrote it; a lambda has no name to call it by, and <lambda> is no
    # name to bind
    assert "(OPS.g(...)); bind it to a global of its own (OP = OPS.g) and call that" in reason, \
        reason
    assert "<LAMBDA>" not in reason and "(<lambda>(...))" not in reason
    x = np.zeros(1)
    through_own_global_lambda[1, 1](x)            # what it suggests works
    assert x[0] == 21.0
