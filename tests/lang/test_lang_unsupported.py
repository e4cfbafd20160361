"""What the kernel language cannot do says so, naming the function and line: lists, dicts, array
allocation, unknown globals, float16 mixed with complex.

Part of the Python subset of the kernel language, as Numba supports it.  Each feature has a kernel
below; CPU tests compile it (``kernel.compile(sig)``), assemble the PTX with ptxas and check the
PTX where it proves something; GPU tests (``@pytest.mark.gpu``) launch the same kernels on CuPy
arrays and compare with NumPy or with the plain Python semantics of the same code.  Shared helpers:
tests/lang_support.py.
"""

import math

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.errors import CompileError
from lang_support import _line_of


# =============================================================================================
# What cannot work says so, naming the function and line


def _compile_error(pyfunc, sig):
    with pytest.raises(CompileError) as info:
        cuda.jit(pyfunc).compile(sig)
    return info.value


def test_list_is_a_clear_error():
    def uses_list(x):
        a = [1, 2, 3]
        x[0] = a[1]

    err = _compile_error(uses_list, "void(int64[::1])")
    assert "lists are not supported in device code" in str(err)
    assert err.function.endswith("uses_list")
    assert err.lineno in (_line_of(uses_list, "a = ["), _line_of(uses_list, "a[1]"))


def test_list_passed_to_len_is_a_clear_error():
    def list_len(x):
        x[0] = len([x[0], x[1]])

    err = _compile_error(list_len, "void(int64[::1])")
    assert "lists are not supported in device code" in str(err)
    assert err.lineno == _line_of(list_len, "len([")


def test_dict_is_a_clear_error():
    def uses_dict(x):
        d = {1: 2}
        x[0] = d[1]

    err = _compile_error(uses_dict, "void(int64[::1])")
    assert "dicts are not supported in device code" in str(err)
    assert err.function.endswith("uses_dict")
    assert err.lineno in (_line_of(uses_dict, "d = {"), _line_of(uses_dict, "d[1]"))


def test_array_allocation_is_a_clear_error():
    def allocates(x):
        tmp = np.zeros(3)
        x[0] = tmp[1]

    err = _compile_error(allocates, "void(float64[::1])")
    assert "np.zeros() allocates a new array" in str(err)
    assert err.function.endswith("allocates")
    assert err.lineno == _line_of(allocates, "np.zeros")


class _NotDeviceCode:
    def __call__(self, v):
        return v


_opaque = _NotDeviceCode()


def test_unknown_global_is_a_clear_error():
    def calls_object(x):
        x[0] = _opaque(x[0])

    err = _compile_error(calls_object, "void(float64[::1])")
    assert err.function.endswith("calls_object")
    assert err.lineno == _line_of(calls_object, "_opaque(")
    assert "_NotDeviceCode" in str(err)


def test_float16_mixed_with_complex_is_a_clear_error():
    def bad_half(x, out):
        out[0] = math.sin(x[0] * 1j)

    err = _compile_error(bad_half, "void(float16[::1], complex64[::1])")
    assert err.function.endswith("bad_half")
    assert err.lineno == _line_of(bad_half, "math.sin")
