"""Complex numbers in the kernel language: complex64 stays single precision, Python complex
scalars, and ``complex ** complex`` through the device cpow.

Part of the Python subset of the kernel language, as Numba supports it.  Each feature has a kernel
below; CPU tests compile it (``kernel.compile(sig)``), assemble the PTX with ptxas and check the
PTX where it proves something; GPU tests (``@pytest.mark.gpu``) launch the same kernels on CuPy
arrays and compare with NumPy or with the plain Python semantics of the same code.  Shared helpers:
tests/lang_support.py.
"""

import math

import numpy as np
import pytest
from numba import types

from conftest import assemble
from gpureplace import cuda
from lang_support import THREADS, _body, _calls, _compile, _cp, _grid, _ir


# =============================================================================================
# Complex numbers


@cuda.jit
def complex_ops(x, y, s, out, mag):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        out[0, i] = a * b
        out[1, i] = a / b
        out[2, i] = a + b.conjugate() - s
        out[3, i] = a * a.real - b * b.imag
        mag[i] = abs(a)


C64_SIG = (types.complex64[::1], types.complex64[::1], types.complex64, types.complex64[:, ::1],
           types.float32[::1])
C128_SIG = (types.complex128[::1], types.complex128[::1], types.complex128,
            types.complex128[:, ::1], types.float64[::1])


def test_complex64_stays_single_precision():
    spec = _compile(complex_ops, C64_SIG)
    assert ".f64" not in _body(spec.ptx)
    assert _calls(_ir(spec), "__nv_hypotf")


def test_complex128_compiles():
    spec = _compile(complex_ops, C128_SIG)
    assert _calls(_ir(spec), "__nv_hypot")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,rtol", [("complex64", 1e-5), ("complex128", 1e-12)])
def test_complex_gpu(dtype, rtol):
    cp = _cp()
    rng = np.random.default_rng(5)
    x = (rng.normal(size=300) + 1j * rng.normal(size=300)).astype(dtype)
    y = (rng.normal(size=300) + 1j * rng.normal(size=300) + 0.5).astype(dtype)
    s = np.dtype(dtype).type(1.25 - 0.5j)
    out = cp.zeros((4, 300), dtype=dtype)
    mag = cp.zeros(300, dtype=x.real.dtype)
    complex_ops[_grid(300), THREADS](cp.asarray(x), cp.asarray(y), s, out, mag)
    ref = np.stack([x * y, x / y, x + np.conj(y) - s, x * x.real - y * y.imag])
    np.testing.assert_allclose(out.get(), ref, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(mag.get(), np.abs(x), rtol=rtol)


@pytest.mark.gpu
def test_python_complex_scalar_argument_gpu():
    cp = _cp()
    x = cp.asarray(np.array([1 + 2j, 3 - 1j]))
    out = cp.zeros((4, 2), dtype=np.complex128)
    mag = cp.zeros(2, dtype=np.float64)
    complex_ops[1, 32](x, x, 2 + 3j, out, mag)       # a Python complex is complex128
    xh = x.get()
    np.testing.assert_allclose(out.get()[2], xh + np.conj(xh) - (2 + 3j))


# =============================================================================================
# Complex powers


@cuda.jit
def complex_powers(r, x, y):
    i = cuda.grid(1)
    if i < r.shape[0]:
        r[i, 0] = x[i] ** y[i]
        r[i, 1] = pow(x[i], y[i])
        r[i, 2] = np.power(x[i], y[i])
        z = x[i]
        z **= y[i]
        r[i, 3] = z
        r[i, 4] = x[i] ** 2                      # Numba squares instead of calling cpow


_CPOW_CASES = [(1 + 2j, 2 + 0j), (0.5 - 1j, 1.5 + 0.5j), (0j, 2 + 0j), (3j, -1 + 1j),
               (-2 + 0j, 0.5 + 0j), (1e-3 + 1e3j, 0.25 - 2j), (2 + 2j, 0j), (0j, 0j)]


def test_complex_power_links_the_device_cpow():
    """``complex ** complex`` lowers to Numba's C helper numba_cpow (numba_cpowf for complex64);
    the device version (runtime_helpers.py) is CPython's algorithm, linked in."""
    for ty in (types.complex128, types.complex64):
        spec = _compile(complex_powers, (ty[:, ::1], ty[::1], ty[::1]))
        assemble(spec.ptx)
        assert "numba_cpow" not in spec.ptx.replace("// .globl", "")   # linked and inlined
    from gpureplace.compiler.runtime_helpers import complex_pow as cpow
    for a, b in _CPOW_CASES:
        want = a ** b
        got = cpow(a, b)
        assert abs(got - want) <= 1e-12 * max(1.0, abs(want)), (a, b)
    assert all(math.isnan(v) for v in (cpow(0j, -1 + 0j).real, cpow(0j, 1j).imag))


@pytest.mark.gpu
def test_complex_power_gpu():
    cp = _cp()
    x = np.array([a for a, _ in _CPOW_CASES])
    y = np.array([b for _, b in _CPOW_CASES])
    for dt, tol in ((np.complex128, 1e-12), (np.complex64, 1e-5)):
        r = cp.zeros((len(x), 5), dt)
        complex_powers[1, 32](r, cp.asarray(x.astype(dt)), cp.asarray(y.astype(dt)))
        got = cp.asnumpy(r)
        want = np.array([complex(a) ** complex(b) for a, b in zip(x.astype(dt), y.astype(dt))])
        for col in range(4):
            np.testing.assert_allclose(got[:, col], want.astype(dt), rtol=tol, atol=tol)
        np.testing.assert_allclose(got[:, 4], (x.astype(dt) ** 2), rtol=tol, atol=tol)
