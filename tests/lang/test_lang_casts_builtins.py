"""Casts, the builtins min / max / abs, powers, // and %, and a type as the first kernel argument.

Part of the Python subset of the kernel language, as Numba supports it.  Each feature has a kernel
below; CPU tests compile it (``kernel.compile(sig)``), assemble the PTX with ptxas and check the
PTX where it proves something; GPU tests (``@pytest.mark.gpu``) launch the same kernels on CuPy
arrays and compare with NumPy or with the plain Python semantics of the same code.  Shared helpers:
tests/lang_support.py.
"""

import re

import numpy as np
import pytest
from numba import types, typeof

from gpureplace import cuda
from lang_support import THREADS, _body, _calls, _compile, _cp, _grid, _ir


# =============================================================================================
# Casts, builtins min / max / abs, powers, // and %


@cuda.jit
def casts(x, out_i, out_f):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out_i[0, i] = int(v)
        out_i[1, i] = np.int32(v)
        out_i[2, i] = np.int16(int(v) % 1000)
        out_i[3, i] = np.uint8(abs(int(v)) % 200)
        out_i[4, i] = int(np.float32(v))
        out_f[0, i] = np.float32(v)
        out_f[1, i] = float(int(v))
        out_f[2, i] = float(np.float32(v) * np.float32(3))
        out_f[3, i] = np.float64(np.int16(int(v)))
        out_f[4, i] = float(i)


def test_casts_compile():
    spec = _compile(casts, "void(float64[::1], int64[:, ::1], float64[:, ::1])")
    body = _body(spec.ptx)
    assert "cvt.rn.f32.f64" in body             # np.float32(v)
    assert "cvt.rzi.s64.f64" in body            # int(v) truncates toward zero


@pytest.mark.gpu
def test_casts_gpu():
    cp = _cp()
    x = np.random.default_rng(9).uniform(-900, 900, 300)
    out_i = cp.zeros((5, 300), dtype=np.int64)
    out_f = cp.zeros((5, 300))
    casts[_grid(300), THREADS](cp.asarray(x), out_i, out_f)
    t = np.trunc(x).astype(np.int64)
    ref_i = np.stack([t, x.astype(np.int32), np.mod(t, 1000).astype(np.int16),
                      (np.abs(t) % 200).astype(np.uint8), x.astype(np.float32).astype(np.int64)])
    f32 = x.astype(np.float32)
    ref_f = np.stack([f32.astype(np.float64), t.astype(np.float64),
                      (f32 * np.float32(3)).astype(np.float64), t.astype(np.int16).astype(float),
                      np.arange(300, dtype=np.float64)])
    np.testing.assert_array_equal(out_i.get(), ref_i)
    np.testing.assert_array_equal(out_f.get(), ref_f)


@cuda.jit
def builtins_minmax(xi, xf, out_i, out_f):
    i = cuda.grid(1)
    if i < xi.size:
        a = xi[i]
        f = xf[i]
        out_i[0, i] = min(a, 3)
        out_i[1, i] = max(a, -2, 7 - a)
        out_i[2, i] = abs(a)
        out_f[0, i] = min(f, 0.25)
        out_f[1, i] = max(f, np.float32(a))
        out_f[2, i] = abs(f)
        out_f[3, i] = min(a, f)


def test_builtins_compile():
    _compile(builtins_minmax, "void(int64[::1], float64[::1], int64[:, ::1], float64[:, ::1])")
    _compile(builtins_minmax, "void(int8[::1], float32[::1], int32[:, ::1], float32[:, ::1])")


@pytest.mark.gpu
def test_builtins_gpu():
    cp = _cp()
    rng = np.random.default_rng(10)
    xi = rng.integers(-10, 10, 300)
    xf = rng.normal(size=300)
    out_i = cp.zeros((3, 300), dtype=np.int64)
    out_f = cp.zeros((4, 300))
    builtins_minmax[_grid(300), THREADS](cp.asarray(xi), cp.asarray(xf), out_i, out_f)
    ref_i = np.stack([np.minimum(xi, 3), np.maximum(np.maximum(xi, -2), 7 - xi), np.abs(xi)])
    ref_f = np.stack([np.minimum(xf, 0.25), np.maximum(xf, xi), np.abs(xf), np.minimum(xi, xf)])
    np.testing.assert_array_equal(out_i.get(), ref_i)
    np.testing.assert_array_equal(out_f.get(), ref_f)


@cuda.jit
def float_minmax(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        out[0, i] = max(a[i], b[i])
        out[1, i] = min(a[i], b[i])
        out[2, i] = max(b[i], a[i])


_NAN_A = np.array([np.nan, 1.0, 2.5, -1.0, np.nan, -0.0])
_NAN_B = np.array([1.0, np.nan, 2.0, -0.5, np.nan, -3.0], dtype=np.float32)
# numba-cuda's meaning of max / min of two floats: one max.f64 / min.f64, a NaN operand ignored
_NAN_REF = np.stack([np.fmax(_NAN_A, _NAN_B), np.fmin(_NAN_A, _NAN_B), np.fmax(_NAN_B, _NAN_A)])


@pytest.mark.parametrize("fty, inst", [("float64", "f64"), ("float32", "f32")])
def test_float_max_and_min_are_one_instruction_each(fty, inst):
    ptx = _body(_compile(float_minmax, f"void({fty}[::1], float32[::1], {fty}[:, ::1])").ptx)
    assert ptx.count(f"max.{inst}") == 2 and ptx.count(f"min.{inst}") == 1, ptx
    # integers keep Numba's compare-and-select
    ints = _body(_compile(builtins_minmax, "void(int64[::1], float64[::1], int64[:, ::1], "
                                           "float64[:, ::1])").ptx)
    assert "max.s64" in ints or "selp.b64" in ints


def test_float_max_and_min_ignore_nan_on_the_simulator(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    a, b = cuda.to_device(_NAN_A), cuda.to_device(_NAN_B)
    out = cuda.device_array((3, _NAN_A.size))
    float_minmax[1, 32](a, b, out)
    np.testing.assert_array_equal(out.copy_to_host(), _NAN_REF)
    # more than two arguments, or integers: Python's (and Numba's) compare-and-keep
    out_i = cuda.device_array((3, 4), dtype=np.int64)
    out_f = cuda.device_array((4, 4))
    xi, xf = np.array([-5, 0, 4, 9]), np.array([0.5, np.nan, -2.0, 3.0])
    builtins_minmax[1, 32](cuda.to_device(xi), cuda.to_device(xf), out_i, out_f)
    assert out_i.copy_to_host()[1].tolist() == [12, 7, 4, 9]


@pytest.mark.gpu
def test_float_max_and_min_ignore_nan_gpu():
    cp = _cp()
    out = cp.zeros((3, _NAN_A.size))
    float_minmax[1, 32](cp.asarray(_NAN_A), cp.asarray(_NAN_B), out)
    np.testing.assert_array_equal(out.get(), _NAN_REF)


@cuda.jit
def powers(xi, xf, out_i, out_f):
    i = cuda.grid(1)
    if i < xi.size:
        a = xi[i]
        f = xf[i]
        out_i[0, i] = a ** 2
        out_i[1, i] = a ** (i % 4)
        out_i[2, i] = 3 ** (i % 5)
        out_f[0, i] = f ** 2.5
        out_f[1, i] = f ** -1
        out_f[2, i] = f ** (i % 3)
        out_f[3, i] = 2.0 ** f
        out_f[4, i] = a // 3 + a % 3 + f // 0.5 + f % 0.5


def test_powers_compile():
    spec = _compile(powers, "void(int64[::1], float64[::1], int64[:, ::1], float64[:, ::1])")
    assert _calls(_ir(spec), "__nv_pow")


@pytest.mark.gpu
def test_powers_gpu():
    cp = _cp()
    rng = np.random.default_rng(11)
    n = 300
    xi = rng.integers(-9, 10, n)
    xf = rng.integers(1, 40, n) * 0.5 + 0.2       # positive, away from multiples of 0.5
    out_i = cp.zeros((3, n), dtype=np.int64)
    out_f = cp.zeros((5, n))
    powers[_grid(n), THREADS](cp.asarray(xi), cp.asarray(xf), out_i, out_f)
    idx = np.arange(n)
    ref_i = np.stack([xi ** 2, xi ** (idx % 4), 3 ** (idx % 5)])
    ref_f = np.stack([xf ** 2.5, 1 / xf, xf ** (idx % 3), 2.0 ** xf,
                      xi // 3 + xi % 3 + np.floor_divide(xf, 0.5) + np.mod(xf, 0.5)])
    np.testing.assert_array_equal(out_i.get(), ref_i)
    np.testing.assert_allclose(out_f.get(), ref_f, rtol=1e-13)


# =============================================================================================
# A type as the first kernel argument


@cuda.jit
def from_type(T, out):
    out[0] = T(3.7)
    out[1] = T(-2.5)


def test_type_argument_compiles():
    assert typeof(np.int64) == types.NumberClass(types.int64)
    _compile(from_type, (typeof(np.int64), types.int64[::1]))
    spec = _compile(from_type, (typeof(np.float32), types.float32[::1]))
    assert ".f64" not in _body(spec.ptx)
    # types take no kernel parameter: only the contiguous array's pointer and length
    assert len(re.findall(r"from_type_param_\d+,?\n", spec.ptx)) == 2


@pytest.mark.gpu
@pytest.mark.parametrize("T,expect", [(np.int64, [3, -2]), (np.float32, [3.7, -2.5]),
                                      (np.int32, [3, -2]), (np.float64, [3.7, -2.5])])
def test_type_argument_gpu(T, expect):
    cp = _cp()
    out = cp.zeros(2, dtype=T)
    from_type[1, 1](T, out)
    np.testing.assert_array_equal(out.get(), np.array(expect, dtype=T))
