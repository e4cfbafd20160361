"""Helpers in the kernel language: undecorated functions (here and in another module,
tests/helpers_mod.py) and device functions with keyword and default arguments.

Part of the Python subset of the kernel language, as Numba supports it.  Each feature has a kernel
below; CPU tests compile it (``kernel.compile(sig)``), assemble the PTX with ptxas and check the
PTX where it proves something; GPU tests (``@pytest.mark.gpu``) launch the same kernels on CuPy
arrays and compare with NumPy or with the plain Python semantics of the same code.  Shared helpers:
tests/lang_support.py.
"""


import numpy as np
import pytest

import helpers_mod
from gpureplace import cuda
from gpureplace.errors import CompileError
from lang_support import THREADS, _body, _compile, _cp, _grid, _line_of


# =============================================================================================
# Helpers: undecorated functions (here and in another module), device functions with keyword
# and default arguments


def scale_add(v, s=2.0):
    return v * s + helpers_mod.poly(v)


@cuda.jit(device=True)
def lerp(a, b, t=0.25):
    return a + (b - a) * t


@cuda.jit(device=True)
def lerp_twice(a, b, t):
    return lerp(lerp(a, b, t=t), b)


@cuda.jit
def helper_calls(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[0, i] = scale_add(x[i])
        out[1, i] = scale_add(x[i], s=0.5)
        out[2, i] = lerp(x[i], y[i])
        out[3, i] = lerp(a=x[i], b=y[i], t=0.75)
        out[4, i] = lerp(x[i], t=0.5, b=y[i])
        out[5, i] = lerp_twice(x[i], y[i], 0.5)
        out[6, i] = helpers_mod.clamp(x[i])
        out[7, i] = helpers_mod.clamp(x[i], hi=0.5)
        out[8, i] = helpers_mod.norm2(x[i], y[i])


def _helper_reference(x, y):
    lp = lerp.py_func
    rows = []
    for a, b in zip(x.tolist(), y.tolist()):
        rows.append([scale_add(a), scale_add(a, s=0.5), lp(a, b), lp(a=a, b=b, t=0.75),
                     lp(a, t=0.5, b=b), lp(lp(a, b, t=0.5), b),
                     helpers_mod.clamp(a), helpers_mod.clamp(a, hi=0.5),
                     helpers_mod.norm2(a, b)])
    return np.array(rows).T


def test_helpers_compile_and_are_device_functions():
    spec = _compile(helper_calls, "void(float64[::1], float64[::1], float64[:, ::1])")
    names = {cf.pyfunc.__qualname__ for cf in spec.compiled.closure()}
    assert {"scale_add", "poly", "_square", "lerp", "lerp_twice", "clamp",
            "norm2"} <= names
    modules = {cf.pyfunc.__module__ for cf in spec.compiled.closure()}
    assert "helpers_mod" in modules
    assert ".f32" not in _body(spec.ptx)


def test_helper_float32_keeps_float32():
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = lerp(x[i], np.float32(1.0), np.float32(0.5)) + helpers_mod.clamp(
                x[i], np.float32(0.0), np.float32(1.0))

    spec = _compile(k, "void(float32[::1], float32[::1])")
    assert ".f64" not in _body(spec.ptx)


@pytest.mark.gpu
def test_helpers_gpu():
    cp = _cp()
    rng = np.random.default_rng(12)
    x = rng.uniform(-1, 2, 300)
    y = rng.uniform(-1, 2, 300)
    out = cp.zeros((9, 300))
    helper_calls[_grid(300), THREADS](cp.asarray(x), cp.asarray(y), out)
    np.testing.assert_allclose(out.get(), _helper_reference(x, y), rtol=1e-14, atol=1e-15)


def test_device_function_bad_keyword_is_a_clear_error():
    def bad_kw(x):
        x[0] = lerp(x[0], x[1], w=3.0)

    with pytest.raises(CompileError) as info:
        cuda.jit(bad_kw).compile("void(float64[::1])")
    assert info.value.function.endswith("bad_kw")
    assert info.value.lineno == _line_of(bad_kw, "lerp(")


def test_device_function_missing_argument_is_a_clear_error():
    def missing(x):
        x[0] = lerp(x[0])

    with pytest.raises(CompileError) as info:
        cuda.jit(missing).compile("void(float64[::1])")
    assert info.value.function.endswith("missing")
    assert info.value.lineno == _line_of(missing, "lerp(")
