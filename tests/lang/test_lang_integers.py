"""Integers in the kernel language: int8 .. uint64 arithmetic (signed and unsigned division and
shifts) and ``int.bit_count()``.

Part of the Python subset of the kernel language, as Numba supports it.  Each feature has a kernel
below; CPU tests compile it (``kernel.compile(sig)``), assemble the PTX with ptxas and check the
PTX where it proves something; GPU tests (``@pytest.mark.gpu``) launch the same kernels on CuPy
arrays and compare with NumPy or with the plain Python semantics of the same code.  Shared helpers:
tests/lang_support.py.
"""


import numpy as np
import pytest
from numba import types, typeof

from gpureplace import cuda
from lang_support import THREADS, _body, _compile, _cp, _grid


# =============================================================================================
# Integers: int8..int64, uint8..uint64

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@cuda.jit
def int_ops(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        out[0, i] = a + b
        out[1, i] = a - b
        out[2, i] = a * b
        out[3, i] = a // b
        out[4, i] = a % b
        out[5, i] = (a & b) | (a ^ b)
        out[6, i] = a << 2
        out[7, i] = a >> 1
        out[8, i] = -a if a < b else a


def _int_inputs(dtype, n=300):
    rng = np.random.default_rng(1)
    dt = np.dtype(dtype)
    if dt.kind == "i":
        x = rng.integers(-100, 101, n)
        y = rng.choice(np.r_[-7:0, 1:8], n)
    else:
        x = rng.integers(0, 201, n)
        y = rng.integers(1, 8, n)
    return x.astype(dt), y.astype(dt)


def _int_reference(x, y):
    two, one = x.dtype.type(2), x.dtype.type(1)
    return np.stack([x + y, x - y, x * y, x // y, x % y, (x & y) | (x ^ y),
                     np.left_shift(x, two), np.right_shift(x, one), np.where(x < y, -x, x)])


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_arithmetic_compiles(dtype):
    ty = getattr(types, dtype)
    spec = _compile(int_ops, (ty[::1], ty[::1], ty[:, ::1]))
    assert ".f32" not in spec.ptx and ".f64" not in spec.ptx


def test_int64_division_is_signed_and_uint64_unsigned():
    s = _body(_compile(int_ops, (types.int64[::1],) * 2 + (types.int64[:, ::1],)).ptx)
    assert "div.s64" in s and "shr.s64" in s      # (% is computed from the quotient)
    u = _body(_compile(int_ops, (types.uint64[::1],) * 2 + (types.uint64[:, ::1],)).ptx)
    assert "div.u64" in u and "shr.u64" in u
    assert "div.s64" not in u


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_arithmetic_gpu(dtype):
    cp = _cp()
    x, y = _int_inputs(dtype)
    out = cp.zeros((9, x.size), dtype=dtype)
    int_ops[_grid(x.size), THREADS](cp.asarray(x), cp.asarray(y), out)
    np.testing.assert_array_equal(out.get(), _int_reference(x, y))


# =============================================================================================
# int.bit_count()


@cuda.jit
def bit_counts(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i].bit_count()


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.uint64])
def test_int_bit_count(dtype):
    from gpureplace import simulator
    info = np.iinfo(dtype)
    x = np.array([0, 1, 7, info.max, info.min, info.max // 3], dtype)
    out = np.zeros(x.size, np.int64)
    simulator.run(bit_counts, 1, 8, x, out)
    assert out.tolist() == [int(v).bit_count() for v in x.tolist()]
    spec = _compile(bit_counts, (typeof(x), types.int64[::1]))
    assert "popc.b" in spec.ptx


@pytest.mark.gpu
def test_int_bit_count_gpu():
    cp = _cp()
    x = np.array([0, 1, -7, 2**31 - 1, -2**31], np.int32)
    out = cp.zeros(x.size, cp.int64)
    bit_counts[1, 8](cp.asarray(x), out)
    assert out.get().tolist() == [int(v).bit_count() for v in x.tolist()]
