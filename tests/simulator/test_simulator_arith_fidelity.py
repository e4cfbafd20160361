"""The simulator computes arithmetic as the compiled code does, at the edges too: ``cmath`` and the
complex ufuncs return inf / nan where CPython's ``cmath`` raises (Numba's ``cmathimpl``),
``complex ** complex`` is the device's ``numba_cpow`` (CPython's ``_Py_c_pow``) and complex
division CPython's algorithm, not NumPy's; ``round`` of an integer goes through a float; integer
powers follow Numba's ``int_power`` (the float cutoff above 0x10000, the OverflowError of an
INT64_MIN exponent, negative literal exponents); and ``INT64_MIN // -1`` is 0.  Expected values
come from ``numba.njit`` of the same code on the CPU (which shares the compiler's lowering), of
the device's own implementation (``compiler/runtime_helpers.complex_pow``,
``ufunc_scalars.complex_table``), or from the PTX where the CPU's conversions differ."""

import cmath
import math
import warnings

import numpy as np
import pytest
from numba import njit

from gpureplace import cuda, simulator
from gpureplace.compiler.runtime_helpers import complex_pow
from gpureplace.simulator.raises import KernelRaisedWarning
from gpureplace.simulator.hostcalls import NumbaCompiledCall

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_REALS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan, 1e30, 800.0, -800.0]
SPECIAL = [complex(a, b) for a in _REALS for b in _REALS]


def _same(got, want):
    """Equal bit for bit, NaN equal to NaN (each part of a complex number)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if got.dtype.kind == "c":
        return _same(got.real, want.real) & _same(got.imag, want.imag)
    if got.dtype.kind == "f":
        return (np.isnan(got) & np.isnan(want)) | (
            (got == want) & (np.signbit(got) == np.signbit(want)))
    return got == want


def _assert_same(got, want, inputs):
    ok = _same(got, want)
    bad = np.nonzero(~ok)[0]
    assert not len(bad), [(inputs[i], got[i], want[i]) for i in bad[:5]]


def _run(kernel, *args):
    """``kernel`` simulated with one thread per element of the first argument."""
    n = len(args[0])
    simulator.run(kernel, (n + 127) // 128, 128, *args)


# ---------------------------------------------------------------------------------------------
# cmath: Numba's cmathimpl (what the compiler installs), never CPython's exceptions

_CMATH = ["exp", "log", "log10", "sqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
          "cosh", "tanh", "asinh", "acosh", "atanh"]


@cuda.jit
def _cmath_each(out, z, which):
    i = cuda.grid(1)
    if i < z.size:
        w = which[0]
        if w == 0:
            out[i] = cmath.exp(z[i])
        elif w == 1:
            out[i] = cmath.log(z[i])
        elif w == 2:
            out[i] = cmath.log10(z[i])
        elif w == 3:
            out[i] = cmath.sqrt(z[i])
        elif w == 4:
            out[i] = cmath.sin(z[i])
        elif w == 5:
            out[i] = cmath.cos(z[i])
        elif w == 6:
            out[i] = cmath.tan(z[i])
        elif w == 7:
            out[i] = cmath.asin(z[i])
        elif w == 8:
            out[i] = cmath.acos(z[i])
        elif w == 9:
            out[i] = cmath.atan(z[i])
        elif w == 10:
            out[i] = cmath.sinh(z[i])
        elif w == 11:
            out[i] = cmath.cosh(z[i])
        elif w == 12:
            out[i] = cmath.tanh(z[i])
        elif w == 13:
            out[i] = cmath.asinh(z[i])
        elif w == 14:
            out[i] = cmath.acosh(z[i])
        else:
            out[i] = cmath.atanh(z[i])


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("name", _CMATH)
def test_cmath_gives_numbas_special_values(name, dtype):
    """cmath.log(0j) is -inf+0j and cmath.exp(800+0j) inf on the device (CPython raises
    ValueError / OverflowError, which ended the simulated launch); cmath.asin(nanj) is nan+nanj
    there (CPython: nanj).  A complex64 computes in float32, as Numba's complex64 version."""
    fn = getattr(cmath, name)
    ref = njit(lambda v: fn(v))
    z = np.array(SPECIAL, dtype)
    out = np.zeros(z.size, dtype)
    _run(_cmath_each, out, z, np.array([_CMATH.index(name)]))
    want = np.array([ref(v) for v in z], dtype)
    _assert_same(out, want, z)


def test_cmath_of_complex64_stays_complex64():
    """Numba boxes a complex64 result as a Python complex; the simulated value is the call's
    Numba type again (complex64), computed in float32."""
    call = NumbaCompiledCall(cmath.exp)
    got = call(np.complex64(0.3 + 0.7j))
    assert type(got) is np.complex64
    assert got == np.complex64(njit(lambda v: cmath.exp(v))(np.complex64(0.3 + 0.7j)))
    assert type(call(np.float32(1.5))) is np.complex64        # (Numba: float32 -> complex64)
    assert type(call(np.float64(1.5))) is np.complex128
    assert type(NumbaCompiledCall(cmath.isnan)(np.complex64(1j))) is bool
    r, phi = NumbaCompiledCall(cmath.polar)(np.complex128(-1 + 0j))
    assert (type(r), type(phi)) == (np.float64, np.float64) and phi == math.pi


def test_cmath_log_with_base_one_raises_on_the_device():
    """cmath.log(z, 1) divides by log(1) = 0: Numba's complex division raises
    ZeroDivisionError, which stops the thread (the simulator's launch goes on)."""
    @cuda.jit
    def k(out, z):
        out[0] = 5 + 0j
        out[0] = cmath.log(z[0], 1.0)

    out = np.zeros(1, np.complex128)
    with pytest.warns(KernelRaisedWarning, match=r"ZeroDivisionError\('complex division by zero'"):
        simulator.run(k, 1, 1, out, np.array([2 + 1j]))
    assert out[0] == 5


@pytest.mark.parametrize("ufunc", [np.exp, np.log, np.log10, np.log2, np.sqrt, np.sin, np.cos,
                                   np.tan, np.sinh, np.cosh, np.tanh, np.arctan, np.arctanh,
                                   np.arcsin, np.arccos])
def test_numpy_ufuncs_of_complex_numbers_as_compiled(ufunc):
    """np.exp(800+0j) and the other complex ufuncs are gpureplace's cmath-based device
    implementations (ufunc_scalars.complex_table), compiled: their cmath calls are Numba's."""
    from numba.core import types

    from gpureplace.compiler.intrinsics.ufunc_scalars import complex_table
    ref = njit(complex_table()[ufunc][(types.complex128,)])

    @cuda.jit
    def k(out, z):
        i = cuda.grid(1)
        if i < z.size:
            out[i] = ufunc(z[i])

    z = np.array(SPECIAL, np.complex128)
    out = np.zeros(z.size, np.complex128)
    _run(k, out, z)
    _assert_same(out, np.array([ref(v) for v in z]), z)


def test_numpy_functions_of_complex_numbers_keep_the_imaginary_part():
    """np.angle / np.imag of a complex number: the simulator converted the argument to the
    result's float type first (np.angle(1j) was 0)."""
    @cuda.jit
    def k(out, z):
        i = cuda.grid(1)
        if i < z.size:
            out[0, i] = np.angle(z[i])
            out[1, i] = np.imag(z[i])
            out[2, i] = np.real(z[i])

    for dtype in (np.complex128, np.complex64):
        z = np.array([1j, -0.5j, 1 + 1j, -2 - 3j], dtype)
        out = np.zeros((3, z.size))
        simulator.run(k, 1, z.size, out, z)
        want = np.array([[njit(f)(v) for v in z] for f in
                         (lambda v: np.angle(v), lambda v: np.imag(v), lambda v: np.real(v))])
        _assert_same(out.ravel(), want.ravel().astype(np.float64), np.tile(z, 3))


# ---------------------------------------------------------------------------------------------
# complex ** and complex /

def _device_pow(a, b, dtype):
    """The compiled complex power (Numba's complex_power_impl): an exponent of exactly 2 is
    a * a in the operands' type, any other numba_cpow, which gpureplace links as
    runtime_helpers.complex_pow (in double precision for complex64 too)."""
    if b == 2:
        return dtype(_square(dtype(a)))
    return dtype(_cpow(complex(a), complex(b)))


_square = njit(lambda z: z * z)
_cpow = njit(complex_pow)


_POW_CASES = [(1j, 3), (0j, 0.5 + 2j), (0j, complex(np.nan, 0)), (1j, 0.5), (1e200 + 0j, 3),
              (complex(np.inf, 0), 0.5), (2 + 1j, 2), (complex(np.inf, 1), 2), (-8 + 0j, 1 / 3),
              (0j, -1 + 0j), (1.5 - 2j, -2.5 + 0.25j), (0j, 0j)]


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_complex_power_is_the_devices(dtype):
    """1j ** 3 is -1.8e-16-1j on the device (CPython's algorithm; NumPy's exact power gives
    -1j), 0j ** (0.5+2j) nan+nanj (NumPy: 0j), 0j ** (nan+0j) 0j (NumPy: nan); and an overflow
    inside the power is inf, not Python's OverflowError (math.pow of 1e200 ** 3)."""
    @cuda.jit
    def k(out, a, b):
        i = cuda.grid(1)
        if i < a.size:
            out[0, i] = a[i] ** b[i]
            w = a[i]
            w **= b[i]                    # (an augmented assignment to a name)
            out[1, i] = w
            out[2, i] = a[i]
            out[2, i] **= b[i]            # (and to an element)
            out[3, i] = np.power(a[i], b[i])
            out[4, i] = pow(a[i], b[i])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)       # (1e200 is inf in complex64)
        a = np.array([c[0] for c in _POW_CASES], dtype)
        b = np.array([c[1] for c in _POW_CASES], dtype)
        out = np.zeros((5, a.size), dtype)
        simulator.run(k, 1, a.size, out, a, b)
        want = np.array([_device_pow(x, y, dtype) for x, y in zip(a, b)], dtype)
    for row in out:
        _assert_same(row, want, list(zip(a, b)))


def test_complex_to_an_integer_power_is_a_complex_power():
    """z ** 3 and z ** n (an int) convert the exponent to complex128 and call numba_cpow, as
    Numba types ``complex ** int``: (complex128, complex128)."""
    @cuda.jit
    def k(out, z, n):
        i = cuda.grid(1)
        if i < z.size:
            out[0, i] = z[i] ** 3
            out[1, i] = z[i] ** n[i]
            out[2, i] = z[i] ** -1

    z = np.array([1j, -1j, 0.5j, 2 + 3j, complex(0, np.inf)], np.complex64)
    out = np.zeros((3, z.size), np.complex128)
    simulator.run(k, 1, z.size, out, z, np.full(z.size, 3))
    for row, e in zip(out, (3, 3, -1)):
        want = np.array([_device_pow(complex(v), e, np.complex128) for v in z])
        _assert_same(row, want, z)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_complex_division_is_cpythons_algorithm(dtype):
    """Numba divides complex numbers with CPython's algorithm (in the operands' type); NumPy's
    (Smith's, through a reciprocal) differs in the last bit for about a third of random
    operands.  np.divide is the operator too, and /= on an element."""
    @cuda.jit
    def k(out, a, b):
        i = cuda.grid(1)
        if i < a.size:
            out[0, i] = a[i] / b[i]
            out[1, i] = np.divide(a[i], b[i])
            out[2, i] = a[i]
            out[2, i] /= b[i]

    rng = np.random.default_rng(3)
    n = 200
    a = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    b = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    finite = [complex(x, y) for x in (1.0, -2.5, 1e30, np.inf, np.nan) for y in (0.0, 3.0,
                                                                               -np.inf)]
    a = np.concatenate([a, np.array(finite * len(finite), dtype)])
    b = np.concatenate([b, np.array([f for f in finite for _ in finite], dtype)])
    out = np.zeros((3, a.size), dtype)
    simulator.run(k, (a.size + 127) // 128, 128, out, a, b)
    ref = njit(lambda x, y: x / y)
    want = np.array([ref(x, y) for x, y in zip(a, b)], dtype)
    for row in out:
        _assert_same(row, want, list(zip(a, b)))


# ---------------------------------------------------------------------------------------------
# round() of an integer

@cuda.jit
def _round_each(out, a):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = round(a[i])


@pytest.mark.parametrize("dtype,values", [
    (np.int64, [2**62 - 1, INT64_MAX, INT64_MIN, -(2**53) - 1, 7]),
    (np.uint64, [2**64 - 1, 2**63, 2**62 - 1, 5]),
    (np.int32, [2**31 - 1, -(2**31)]), (np.int16, [-32768, 32767]), (np.uint8, [255]),
    (np.bool_, [True, False])])
def test_round_of_an_integer_goes_through_a_float(dtype, values):
    """numba-cuda types round() for float32 and float64 only: an integer is converted to one
    (cvt.rn.f64.s64 / .u64) and rounded back with cvt.rzi.s64.f64, which saturates:
    round(2**62 - 1) is 2**62 and round(uint64(2**64 - 1)) INT64_MAX (the simulator returned
    the integer unchanged, and -1 for the uint64)."""
    a = np.array(values, dtype)
    out = np.zeros(a.size, np.int64)
    simulator.run(_round_each, 1, a.size, out, a)
    want = [min(max(int(np.float64(v)), INT64_MIN), INT64_MAX) for v in values]
    assert out.tolist() == want
    sig = f"void(int64[::1], {'boolean' if dtype is np.bool_ else np.dtype(dtype).name}[::1])"
    body = _round_each.compile(sig).ptx.split(".entry")[1]
    if np.dtype(dtype).itemsize == 8:       # (narrower integers are exact: folded away)
        assert "cvt.rzi.s64.f64" in body and "cvt.rn.f64" in body


def test_round_of_an_integer_with_digits_is_a_float_of_numbas_type():
    """round(int16, 1) is a float32 and round(int32, 1) a float64 (Numba's typing: the integer
    converted to the float type that holds it); the simulator returned a Python int."""
    @cuda.jit
    def k(out, a16, a32):
        out[0] = round(a16[0], 1) * np.float32(0.1)
        out[1] = round(a32[0], -1) * np.float32(0.1)

    def ref(a16, a32):
        return round(a16, 1) * np.float32(0.1), round(a32, -1) * np.float32(0.1)

    a16, a32 = np.array([3], np.int16), np.array([2**31 - 1], np.int32)
    out = np.zeros(2)
    simulator.run(k, 1, 1, out, a16, a32)
    want = njit(ref)(a16[0], a32[0])
    assert out.tolist() == [float(w) for w in want]
    assert out[0] == np.float32(np.float32(3) * np.float32(0.1))


# ---------------------------------------------------------------------------------------------
# integer powers: Numba's int_power

@cuda.jit
def _power_each(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] ** b[i]


def test_integer_power_above_the_cutoff_goes_through_pow():
    """An exponent above 0x10000 is math.pow(a, float(b)) converted back with cvt.rzi.s64.f64
    (saturated; njit on x86 would give INT64_MIN for +inf): 3 ** 70000 is INT64_MAX, not the
    power wrapped modulo 2**64."""
    cases = [(3, 70000, INT64_MAX), (2, 1 << 40, INT64_MAX), (-3, 70001, INT64_MIN),
             (-3, 70002, INT64_MAX), (-1, 70001, -1), (-1, (1 << 60) + 1, 1), (1, 1 << 62, 1),
             (0, 70000, 0), (2, 65536, 0), (3, 5, 243), (-1, -(1 << 60) - 1, 1),
             (-1, -70001, -1), (1, -(1 << 62), 1), (2, -70000, 0)]
    a, b = (np.array([c[k] for c in cases], np.int64) for k in (0, 1))
    out = np.zeros(a.size, np.int64)
    simulator.run(_power_each, 1, a.size, out, a, b)
    assert out.tolist() == [c[2] for c in cases]
    body = _power_each.compile("void(int64[::1], int64[::1], int64[::1])").ptx
    assert "65537" in body and "cvt.rzi.s64.f64" in body
    # unsigned: the same through uint64, saturated to UINT64_MAX
    ua, ub = np.array([3, 2, 7], np.uint64), np.array([70000, 1 << 63, 3], np.uint64)
    uout = np.zeros(3, np.uint64)
    simulator.run(_power_each, 1, 3, uout, ua, ub)
    assert uout.tolist() == [2**64 - 1, 2**64 - 1, 343]


def test_integer_power_to_int64_min_raises_overflow():
    """Numba's int_power negates the exponent and raises OverflowError when that overflows
    (INT64_MIN): the device thread stops without storing, under debug=True it is raised."""
    a = np.array([3, 0, 2], np.int64)
    b = np.array([INT64_MIN, INT64_MIN, 3], np.int64)
    out = np.full(3, 12345, np.int64)
    with pytest.warns(KernelRaisedWarning, match=r"2 threads raised OverflowError"):
        simulator.run(_power_each, 1, 3, out, a, b)
    assert out.tolist() == [12345, 12345, 8]

    @cuda.jit(debug=True)
    def k(out, a, b):
        out[0] = a[0] ** b[0]                # (0 ** INT64_MIN: OverflowError first)

    with pytest.raises(OverflowError):
        simulator.run(k, 1, 1, np.zeros(1, np.int64), np.zeros(1, np.int64),
                      np.array([INT64_MIN]))

    @cuda.jit
    def kf(out, x, b):
        out[0] = x[0] ** b[0]

    with pytest.warns(KernelRaisedWarning, match=r"OverflowError"):
        simulator.run(kf, 1, 1, np.zeros(1), np.array([1.5]), np.array([INT64_MIN]))


def test_float32_power_above_the_cutoff_is_powf():
    """float32 ** int is gpureplace's own lowering (devicemath._make_float_int_power): beyond
    0x10000, powf(x, float32(n)), the exponent rounded to float32 first (2**24 + 1 is even
    there: (-1) ** (2**24 + 1) is 1)."""
    ref = njit(lambda v, e: math.pow(v, np.float32(e)))        # (what that lowering calls)
    x = np.array([-1.0, 1.0001, 0.9999, -1.00001, 2.0], np.float32)
    n = np.array([2**24 + 1, 70001, 100003, 70001, -70000], np.int64)
    out = np.zeros(x.size, np.float32)
    simulator.run(_power_each, 1, x.size, out, x, n)
    _assert_same(out, np.array([ref(v, e) for v, e in zip(x, n)], np.float32), list(zip(x, n)))
    assert out[0] == 1.0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_debug_float_zero_to_a_negative_power_raises(dtype):
    """0.0 ** -2 inverts 0.0 with ``1.0 / r``: under Python's error model (debug=True) that
    division raises ZeroDivisionError, as njit(error_model="python") does; otherwise inf."""
    @cuda.jit(debug=True)
    def k(out, x):
        out[0] = x[0] ** -2

    with pytest.raises(ZeroDivisionError, match="division by zero"):
        simulator.run(k, 1, 1, np.zeros(1, dtype), np.zeros(1, dtype))
    with pytest.raises(ZeroDivisionError):
        njit(error_model="python")(lambda v: v ** -2)(dtype(0))
    out = np.zeros(1, dtype)
    simulator.run(_power_each, 1, 1, out, np.zeros(1, dtype), np.array([-2]))
    assert out[0] == np.inf


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.int32, np.int8])
def test_negative_literal_exponent_is_int_power(dtype):
    """int ** -2 is Numba's int_power (the literal is typed as an int64): 0 unless a is -1, 0 or
    1 -- never the inverse of a wrapped a * a ((2**63 - 1) ** -2 gave 1 and (2**62) ** -2
    INT64_MIN)."""
    @cuda.jit
    def k(out, a):
        i = cuda.grid(1)
        if i < a.size:
            out[0, i] = a[i] ** -2
            out[1, i] = a[i] ** -3
            out[2, i] = a[i] ** -1

    info = np.iinfo(dtype)
    vals = sorted({0, 1, 2, 3, int(info.max), int(info.max) // 2 + 1, 1 << (info.bits // 2)} |
                  ({-1, -2, int(info.min), int(info.min) + 1} if info.min else set()))
    a = np.array([v for v in vals if info.min <= v <= info.max], dtype)
    out = np.zeros((3, a.size), np.int64)
    simulator.run(k, 1, a.size, out, a)
    refs = [njit(error_model="numpy")(f) for f in
            (lambda v: v ** -2, lambda v: v ** -3, lambda v: v ** -1)]
    for row, ref in zip(out, refs):
        assert row.tolist() == [int(ref(v)) for v in a], a


# ---------------------------------------------------------------------------------------------
# INT64_MIN // -1

def test_int64_min_floor_divided_by_minus_one_is_zero():
    """Numba's int_divmod_signed tests for INT64_MIN // -1 (the one quotient that overflows) and
    gives 0, with remainder 0; the simulator gave INT64_MIN.  A uint64 of 2**63 with an int64
    is typed int64 and divides as INT64_MIN; an int32's minimum is promoted to int64 first."""
    @cuda.jit
    def k(out, a, b):
        i = cuda.grid(1)
        if i < a.size:
            out[0, i] = a[i] // b[i]
            out[1, i] = a[i] % b[i]
            q, r = divmod(a[i], b[i])
            out[2, i] = q
            out[3, i] = r
            x = a[i]
            x //= b[i]
            out[4, i] = x

    def ref(a, b):
        q, r = divmod(a, b)
        return a // b, a % b, q, r, a // b

    for a, b in ((np.array([INT64_MIN, INT64_MIN, 7], np.int64), np.array([-1, 1, -1])),
                 (np.array([2**63, 5], np.uint64), np.array([-1, -1], np.int64)),
                 (np.array([-(2**31)], np.int32), np.array([-1], np.int32)),
                 (np.array([-128], np.int8), np.array([-1], np.int8))):
        out = np.full((5, a.size), 99, np.int64)
        simulator.run(k, 1, a.size, out, a, b)
        nj = njit(error_model="numpy")(ref)
        want = [[int(v) for v in nj(x, y)] for x, y in zip(a, b)]   # (divmod of uint64 and
        assert out.T.tolist() == want, (a, b)                         # int64: in float64)
    assert "-9223372036854775808" in k.compile(
        "void(int64[:, ::1], int64[::1], int64[::1])").ptx
