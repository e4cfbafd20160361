"""Errors name the Python function, its file and line, and the call chain; nothing is launched."""

import math
import os

import numpy as np
import pytest

from gpureplace import CompileError, LaunchError, cuda


def leaf(v):
    return os.getcwd() + v          # a host-only call two levels down


def middle(v):
    return leaf(v) * 2


@cuda.jit
def calls_host_only(out):
    out[0] = middle(out[0])


def test_unsupported_call_names_function_line_and_chain():
    with pytest.raises(CompileError) as info:
        calls_host_only.compile("void(float32[:])")
    err = info.value
    assert err.function == "leaf"
    assert err.filename == __file__
    assert err.lineno == leaf.__code__.co_firstlineno + 1
    assert err.chain == ("calls_host_only", "middle", "leaf")
    text = str(err)
    assert "calls_host_only -> middle -> leaf" in text
    assert "getcwd" in text
    # the front end's full message stays available
    assert err.detail
    # short: no pipeline dump
    assert "Failed in" not in text and len(text.splitlines()) <= 4


def test_error_render_for_ipython_is_short():
    with pytest.raises(CompileError) as info:
        calls_host_only.compile("void(float32[:])")
    lines = info.value._render_traceback_()
    assert len(lines) == 1 and lines[0].startswith("CompileError: in leaf")


@cuda.jit
def typo(out):
    out[0] = undefined_name_xyz + 1   # noqa: F821


def test_undefined_global_is_named():
    with pytest.raises(CompileError) as info:
        typo.compile("void(float32[:])")
    assert "undefined_name_xyz" in str(info.value)
    assert info.value.lineno == typo.py_func.__code__.co_firstlineno + 2


@cuda.jit
def two_args(x, y):
    pass


def test_wrong_argument_count_names_the_missing_argument():
    with pytest.raises(LaunchError, match=r"missing argument\(s\) 'y'"):
        two_args[1, 32](np.zeros(3, np.float32))
    with pytest.raises(LaunchError, match="takes 2 argument"):
        two_args[1, 32](1, 2, 3)


def test_host_numpy_array_is_refused_by_name_when_the_setting_says_so(monkeypatch):
    from gpureplace.config import settings
    from gpureplace import probe
    monkeypatch.setattr(settings, "backend", "gpu")
    monkeypatch.setattr(settings, "_host_arrays", "error")     # the default copies it
    monkeypatch.setattr(probe, "available", lambda: True)  # without one, that comes first
    with pytest.raises(LaunchError, match=r"argument 0 \('x'\) is a host NumPy array"):
        two_args[1, 32](np.zeros(3, np.float32), 1.0)


@pytest.mark.parametrize("config, message", [
    ((0, 32), "grid dimension x is 0"),
    ((-1, 32), "grid dimension x is -1"),
    ((1, 2048), "block dimension x is 2048, over the device limit"),
    ((1, (32, 64)), "2048 threads, over the limit of 1024"),
    ((1, (1, 1, 65)), "block dimension z is 65"),
    ((1.5, 32), "grid must be an int or a tuple"),
    ((1,), "launch configuration must be"),
    ((1, 32, None, -5), "dynamic shared memory must be a non-negative int"),
])
def test_bad_launch_configurations_are_refused(config, message):
    with pytest.raises(LaunchError, match=message.replace("(", r"\(")):
        two_args[config]


def test_device_function_cannot_be_launched_or_called_on_host():
    @cuda.jit(device=True)
    def dev(x):
        return x

    with pytest.raises(TypeError, match="device function"):
        dev[1, 1]
    with pytest.raises(RuntimeError, match="call it from a kernel"):
        dev(1.0)


def test_unknown_jit_option_is_refused():
    with pytest.raises(TypeError, match="unsupported option"):
        cuda.jit(bogus=True)(lambda: None)


def test_launch_without_a_gpu_on_the_gpu_backend_says_so(monkeypatch):
    from gpureplace.config import settings
    from gpureplace.errors import NoDeviceError
    from gpureplace import probe
    monkeypatch.setattr(settings, "backend", "gpu")
    monkeypatch.setattr(probe, "available", lambda: False)

    @cuda.jit
    def k(x):
        x[0] = 1.0

    with pytest.raises(NoDeviceError, match="no CUDA GPU was found"):
        k[1, 1](1.0)


def test_a_math_function_without_device_implementation_is_named():
    import math

    from gpureplace import cuda

    @cuda.jit
    def k(x):
        x[0] = math.factorial(3) + x[0]

    with pytest.raises(CompileError) as err:
        k.compile("void(float64[::1])")
    msg = str(err.value)
    assert "math.factorial has no device implementation" in msg and "Context.override" in msg
    assert err.value.lineno == k.py_func.__code__.co_firstlineno + 2


@cuda.jit
def _inner_kernel(x):
    x[0] = 7


@cuda.jit
def _launches_a_kernel(x):
    _inner_kernel[1, 1](x)


@cuda.jit
def _stores_a_tuple(x):
    x[0] = (1, 2)


@cuda.jit
def _adds_a_tuple(x):
    x[0] = x[0] + (1, 2)


@cuda.jit
def _inverts_a_float(x):
    x[0] = ~x[0]


@cuda.jit
def _sin_of_an_array(x):
    x[0] = math.sin(x)


@pytest.mark.parametrize("kernel,message", [
    (_launches_a_kernel, r"_inner_kernel\[\.\.\.\] launches a kernel from device code, which is "
                         r"not supported .*call _inner_kernel\(\.\.\.\) instead"),
    (_stores_a_tuple, r"cannot store Tuple\(Literal\[int\]\(1\), Literal\[int\]\(2\)\) into "
                      r"array\(float64, 1d, C\) at index"),
    (_adds_a_tuple, r"operator \+ is not defined for float64 and Tuple"),
    (_inverts_a_float, r"unary operator ~ is not defined for float64"),
    (_sin_of_an_array, r"sin\(\) has no implementation for argument types "
                       r"\(array\(float64, 1d, C\)\)"),
])
def test_no_implementation_errors_say_which_operation_and_types(kernel, message):
    """Numba's "No implementation of function ... found for signature:" followed by a blank line
    used to be cut before the signature, leaving the types out."""
    with pytest.raises(CompileError, match=message) as info:
        kernel.compile("void(float64[::1])")
    assert info.value.lineno == kernel.py_func.__code__.co_firstlineno + 2


def test_a_kernel_called_from_a_kernel_runs_as_a_device_function():
    @cuda.jit
    def outer(x):
        _inner_kernel(x)

    outer.compile("void(float64[::1])")


def test_numba_cuda_jit_options_are_taken_or_refused_as_numba_cuda_does():
    def body(x):
        x[0] = 1.0

    for options in ({"device": True, "forceinline": True}, {"device": True, "inline": "always"},
                    {"boundscheck": False}, {"boundscheck": None}, {"extensions": []},
                    {"nopython": True}):
        cuda.jit(**options)(body).compile("void(float64[::1])")
    with pytest.raises(NotImplementedError, match="boundscheck=True.*simulator"):
        cuda.jit(boundscheck=True)(body)
    with pytest.raises(TypeError, match="extensions"):
        cuda.jit(extensions=[object()])(body)
    with pytest.raises(TypeError, match="no object mode"):
        cuda.jit(nopython=False)(body)


def _even(n):
    return True if n == 0 else _odd(n - 1)


def _odd(n):
    return False if n == 0 else _even(n - 1)


@cuda.jit
def _recurses(x):
    x[0] = _even(5)


@cuda.jit
def _tries(x):
    try:
        x[0] = 1
    except Exception:
        x[0] = 2


@cuda.jit
def _prints_an_fstring(x):
    print(f"value {x[0]}")


def test_recursion_try_and_fstrings_are_named_at_their_line():
    with pytest.raises(CompileError, match=r"mutually recursive device functions are not "
                                           r"supported \(_(odd|even) calls _(even|odd).*loop"
                       ) as info:
        _recurses.compile("void(float64[::1])")
    caller = {"_even": _even, "_odd": _odd}[info.value.function]
    assert info.value.lineno == caller.__code__.co_firstlineno + 1
    assert info.value.chain[0] == "_recurses"
    with pytest.raises(CompileError, match="try/except is not supported in device code") as info:
        _tries.compile("void(float64[::1])")
    assert info.value.lineno in range(_tries.py_func.__code__.co_firstlineno + 1,
                                      _tries.py_func.__code__.co_firstlineno + 6)
    with pytest.raises(CompileError, match=r"f-strings are not supported in device code.*"
                                           r"print\(\"value\", x\[i\]\)") as info:
        _prints_an_fstring.compile("void(float64[::1])")
    assert info.value.lineno == _prints_an_fstring.py_func.__code__.co_firstlineno + 2


def _reads_a_missing_module_attribute(x):
    y = x[0]
    x[1] = y + math.sin(1.0)
    x[2] = math.no_such_function(1.0)


def test_a_missing_module_attribute_is_reported_at_the_line_that_reads_it():
    with pytest.raises(CompileError, match="module 'math' has no attribute "
                                           "'no_such_function'") as info:
        cuda.jit(_reads_a_missing_module_attribute).compile("void(float32[::1])")
    first = _reads_a_missing_module_attribute.__code__.co_firstlineno
    assert info.value.lineno == first + 3


def _add(x, y):
    return x + y


def test_a_bare_assertion_inside_numba_names_the_line_and_where_it_failed():
    """An exception with no message from one of Numba's typing templates (functools.reduce over
    a tuple reaches an ``assert`` in Numba's parfors) gives a message with the user's line and
    the place in Numba, not an IndexError from gpureplace's message handling."""
    import functools

    @cuda.jit
    def reduces(out, a):
        out[0] = 1.0
        out[1] = functools.reduce(_add, (a, a, a), np.float32(0.0))

    with pytest.raises(CompileError) as info:
        reduces.compile("void(float32[::1], float32)")
    err = info.value
    assert err.function.endswith("reduces") and err.filename == __file__
    assert err.lineno == reduces.py_func.__code__.co_firstlineno + 3      # (@cuda.jit first)
    assert "Numba's compiler failed with a bare AssertionError (numba/" in err.reason
    assert "not supported in device code" in err.reason
