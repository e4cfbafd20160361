"""Floating point in the kernel language: float32 stays float32, float64 is float64, math goes to
libdevice; float16 arithmetic in half precision; sqrt correctly rounded unless fast math;
``round(x, n)`` of a float32 computed in float64.

Part of the Python subset of the kernel language, as Numba supports it.  Each feature has a kernel
below; CPU tests compile it (``kernel.compile(sig)``), assemble the PTX with ptxas and check the
PTX where it proves something; GPU tests (``@pytest.mark.gpu``) launch the same kernels on CuPy
arrays and compare with NumPy or with the plain Python semantics of the same code.  Shared helpers:
tests/lang_support.py.
"""

import math
import re

import numpy as np
import pytest
from numba import types, typeof

from gpureplace import cuda
from lang_support import (THREADS, _body, _calls, _compile, _cp, _grid, _ir,
                          _widened_to_double)


# =============================================================================================
# Floats: float32 stays float32, float64 is float64, math goes to libdevice


@cuda.jit
def float_math(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        half = x.dtype.type(0.5)
        out[0, i] = a * b + half
        out[1, i] = math.sin(a) * math.cos(b)
        out[2, i] = math.exp(a * half) - math.log(b)
        out[3, i] = math.sqrt(b) + math.atan2(a, b)
        out[4, i] = b ** x.dtype.type(2.5)
        out[5, i] = a // x.dtype.type(0.75)
        out[6, i] = a % x.dtype.type(0.75)
        out[7, i] = math.floor(a) + math.ceil(b)
        out[8, i] = min(a, b) + max(a, b, half) + abs(a)
        out[9, i] = math.hypot(a, b) + math.tanh(a) + math.erf(b) + math.fabs(a)
        out[10, i] = b ** 3 + a / b
        out[11, i] = math.log10(b) + math.log2(b) + math.exp2(half) + math.expm1(half)


def _float_inputs(dtype, n=300):
    rng = np.random.default_rng(2)
    # a // 0.75 and a % 0.75 away from the integer boundaries, so rounding cannot flip them
    a = rng.integers(-20, 20, n) * 0.75 + rng.uniform(0.1, 0.6, n)
    b = rng.uniform(0.5, 4.0, n)
    return a.astype(dtype), b.astype(dtype)


def _float_reference(x, y):
    a, b = x.astype(np.float64), y.astype(np.float64)
    half = 0.5
    return np.stack([
        a * b + half, np.sin(a) * np.cos(b), np.exp(a * half) - np.log(b),
        np.sqrt(b) + np.arctan2(a, b), b ** 2.5, np.floor_divide(a, 0.75), np.mod(a, 0.75),
        np.floor(a) + np.ceil(b), np.minimum(a, b) + np.maximum(np.maximum(a, b), half) + abs(a),
        np.hypot(a, b) + np.tanh(a) + np.vectorize(math.erf)(b) + np.abs(a),
        b ** 3 + a / b, np.log10(b) + np.log2(b) + 2 ** half + np.expm1(half)])


@cuda.jit
def float_parts(x, mant, expo, frac, whole, scaled, deg, rad):
    i = cuda.grid(1)
    if i < x.size:
        m, e = math.frexp(x[i])
        mant[i] = m
        expo[i] = e
        f, w = math.modf(x[i])
        frac[i] = f
        whole[i] = w
        scaled[i] = math.ldexp(m, e + 3)
        deg[i] = math.degrees(x[i])
        rad[i] = np.radians(x[i])


def _float_parts_args(dtype, xp=np):
    x = np.array([3.5, -0.15625, 1e10, 0.0, -7.25, 1e-3, 2.0 ** -130, 123456.789], dtype)
    return [xp.asarray(x)] + [xp.zeros(x.size, np.int32 if k == 1 else dtype) for k in range(7)]


def _check_float_parts(x, mant, expo, frac, whole, scaled, deg, rad):
    dt = x.dtype.type
    for k, v in enumerate(x.tolist()):
        m, e = math.frexp(v)
        f, w = math.modf(v)
        assert (mant[k], expo[k]) == (m, e) and (frac[k], whole[k]) == (f, w), v
        assert scaled[k] == math.ldexp(m, e + 3)
        assert deg[k] == dt(v) * dt(180 / math.pi) and rad[k] == dt(v) * dt(math.pi / 180)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_frexp_modf_ldexp_degrees_radians(dtype):
    fty = typeof(dtype(0))
    spec = _compile(float_parts, (fty[::1], fty[::1], types.int32[::1]) + (fty[::1],) * 5)
    suffix = "f" if dtype is np.float32 else ""
    assert all(_calls(_ir(spec), f"__nv_{fn}{suffix}") for fn in ("frexp", "modf", "ldexp"))
    assert _widened_to_double(_ir(spec)) == [] or dtype is np.float64
    from gpureplace import simulator
    args = _float_parts_args(dtype)
    simulator.run(float_parts, 1, 32, *args)
    _check_float_parts(*args)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_frexp_modf_ldexp_degrees_radians_gpu(dtype):
    cp = _cp()
    args = _float_parts_args(dtype, cp)
    float_parts[1, 32](*args)
    _check_float_parts(*[a.get() for a in args])


F32_SIG = (types.float32[::1], types.float32[::1], types.float32[:, ::1])
F64_SIG = (types.float64[::1], types.float64[::1], types.float64[:, ::1])


def test_float32_math_stays_float32():
    spec = _compile(float_math, F32_SIG)
    body = _body(spec.ptx)
    assert re.search(r"(mul|fma)\.rn\.f32", body)
    ir = _ir(spec)
    assert _widened_to_double(ir) == [], "float32 code must not be widened to double"
    for fn in ("__nv_sinf", "__nv_cosf", "__nv_expf", "__nv_logf", "__nv_powf", "__nv_atan2f",
               "__nv_hypotf", "__nv_tanhf", "__nv_erff", "__nv_log10f", "__nv_log2f",
               "__nv_floorf", "__nv_ceilf"):
        assert _calls(ir, fn), fn
    for fn in ("__nv_sin", "__nv_pow", "__nv_exp", "__nv_log", "__nv_floor"):
        assert not _calls(ir, fn), fn
    # libdevice is linked in and inlined: no calls left
    assert "__nv_" not in spec.ptx


@cuda.jit
def float32_arith(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        out[i] = a * b + np.float32(0.5) - a / b + b ** 3 + a ** -2 + math.sqrt(b)


def test_float32_arithmetic_has_no_f64_instructions():
    spec = _compile(float32_arith, "void(float32[::1], float32[::1], float32[::1])")
    body = _body(spec.ptx)
    assert ".f64" not in body
    assert "mul.rn.f32" in body or "fma.rn.f32" in body
    assert "sqrt.rn.f32" in body


@pytest.mark.gpu
def test_float32_arithmetic_gpu():
    cp = _cp()
    rng = np.random.default_rng(13)
    x = rng.uniform(0.5, 2, 300).astype(np.float32)
    y = rng.uniform(0.5, 2, 300).astype(np.float32)
    out = cp.zeros(300, dtype=np.float32)
    float32_arith[_grid(300), THREADS](cp.asarray(x), cp.asarray(y), out)
    a, b = x.astype(np.float64), y.astype(np.float64)
    ref = a * b + 0.5 - a / b + b ** 3 + a ** -2.0 + np.sqrt(b)
    np.testing.assert_allclose(out.get(), ref, rtol=1e-5, atol=1e-5)


def test_float64_math_uses_double_libdevice():
    spec = _compile(float_math, F64_SIG)
    assert ".f64" in _body(spec.ptx)
    ir = _ir(spec)
    assert not re.search(r"\bfloat\b", ir), "float64 code must not be narrowed to float"
    assert _calls(ir, "__nv_sin") and _calls(ir, "__nv_pow") and not _calls(ir, "__nv_sinf")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,rtol", [("float32", 2e-5), ("float64", 1e-12)])
def test_float_math_gpu(dtype, rtol):
    cp = _cp()
    x, y = _float_inputs(dtype)
    out = cp.zeros((12, x.size), dtype=dtype)
    float_math[_grid(x.size), THREADS](cp.asarray(x), cp.asarray(y), out)
    np.testing.assert_allclose(out.get(), _float_reference(x, y), rtol=rtol,
                               atol=rtol * 10)


@cuda.jit
def float32_builtins(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = max(abs(x[i]), np.float32(0.5)) + min(x[i], np.float32(1.0))


def test_float32_builtins_stay_float32():
    body = _body(_compile(float32_builtins, "void(float32[::1], float32[::1])").ptx)
    assert ".f64" not in body and "abs.f32" in body


# =============================================================================================
# float16 (arithmetic in half precision as numba-cuda does; math computed in float32)


@cuda.jit
def half_ops(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        out[0, i] = a * b
        out[1, i] = a + b - a / b
        out[2, i] = -a if a < b else b
        out[3, i] = math.sin(a)
        out[4, i] = abs(a) + np.float16(1.5)
        out[5, i] = np.float16(np.float32(a) * np.float32(2.0))
        out[6, i] = math.sqrt(abs(b))


HALF_SIG = (types.float16[::1], types.float16[::1], types.float16[:, ::1])


def test_float16_arithmetic_is_half_precision():
    spec = _compile(half_ops, HALF_SIG)
    body = _body(spec.ptx)
    assert "mul.rn.f16" in body and "setp.lt.f16" in body and "neg.f16" in body
    assert "abs.f16" in body                       # abs(b): the sign bit, no float32 round trip
    assert "cvt.f32.f16" in body and "cvt.rn.f16.f32" in body     # sin computed in float32
    ir = _ir(spec)
    assert _calls(ir, "__nv_sinf")
    assert _widened_to_double(ir) == []


def test_float16_typing():
    text = half_ops.inspect_types(HALF_SIG)
    for expr in (r"a \* b", r"a \+ b", r"a / b"):
        assert re.search(expr + r"\s+:: float16", text), expr


@pytest.mark.gpu
def test_float16_gpu():
    cp = _cp()
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, 300).astype(np.float16)
    y = rng.uniform(0.5, 2, 300).astype(np.float16)
    out = cp.zeros((7, x.size), dtype=np.float16)
    half_ops[_grid(x.size), THREADS](cp.asarray(x), cp.asarray(y), out)
    f16 = np.float16
    ref = np.stack([x * y, x + y - x / y, np.where(x < y, -x, y), np.sin(x),
                    np.abs(x) + f16(1.5), (x.astype(np.float32) * 2).astype(f16),
                    np.sqrt(np.abs(y))]).astype(np.float32)
    np.testing.assert_allclose(out.get().astype(np.float32), ref, rtol=2e-3, atol=2e-3)


# =============================================================================================
# Precision: sqrt is IEEE by default and approximate only under fast math


def _sqrt_sin(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = math.sqrt(x[i]) + math.sin(x[i])


def test_sqrt_is_correctly_rounded_by_default():
    spec = _compile(cuda.jit(_sqrt_sin), "void(float32[::1], float32[::1])")
    assert "sqrt.rn.f32" in spec.ptx and "sqrt.approx" not in spec.ptx
    assert _calls(_ir(spec), "__nv_sinf")


def test_fastmath_uses_fast_variants():
    spec = _compile(cuda.jit(_sqrt_sin, fastmath=True), "void(float32[::1], float32[::1])")
    assert "sqrt.approx" in spec.ptx
    assert _calls(_ir(spec), "__nv_fast_sinf")


# =============================================================================================
# round(x, n) of a float32


@cuda.jit
def _round_to_digits(x, out, n):
    out[0] = round(x[0], n)


def test_round_of_a_float32_to_digits_is_computed_in_float64():
    """As numba-cuda: the float32 is rounded as a float64 and converted back once (Numba's CPU
    version rounds the scaled value to float32 first: round(float32(2.675), 2) = 2.68 there,
    2.67 here and in numba-cuda)."""
    ptx = _compile(_round_to_digits, "void(float32[::1], float32[::1], int64)").ptx
    assert "cvt.rni.f64.f64" in ptx and "cvt.rni.f32.f32" not in ptx
