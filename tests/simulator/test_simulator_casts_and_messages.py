"""The simulator's float -> int casts and stores, and the texts of the errors Numba's compiled code
raises itself (a zero divisor under ``debug=True``, ``0 ** -n``, a reshape to another size).

Expected values come from the compiled code, not from the simulator: a cast (``np.int8(x)``) and
a float stored into an integer array are LLVM's ``fptosi`` / ``fptoui``, PTX's ``cvt.rzi``
(``cvt.rzi.s16`` / ``u16`` and a truncation for 8-bit results), saturating, with the NaN results
an H200 gives (``hostmath.cvt_rzi``'s rules: the sign bit alone for a 64-bit result and for any
result from a float64, 0 for a 32- or 16-bit one from a float32); the messages are Numba's
(numba/cpython/numbers.py, numba/np/arrayobj.py's ``normalize_reshape_value``)."""

import inspect
import math
import re
import warnings

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.simulator.raises import KernelRaisedWarning

INF, NAN = math.inf, math.nan
I64_MIN, I64_MAX, I32_MIN, I32_MAX = -2**63, 2**63 - 1, -2**31, 2**31 - 1


@pytest.fixture(autouse=True)
def simulator(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")


def _prefix(func, text):
    """numba-cuda's prefix of a debug kernel's exception, thread 0 of block 0."""
    lines, first = inspect.getsourcelines(func)
    line = first + next(k for k, src in enumerate(lines) if text in src)
    return (f"In function '{func.__name__}', file {inspect.getsourcefile(func)}, line {line}, "
            f"tid=[0, 0, 0] ctaid=[0, 0, 0]: ")


# ---------------------------------------------------------------------------------------------
# float -> int: casts and stores saturate as cvt.rzi

def _casts(x, i8, u8, i16, u16, i32, u32, i64, u64):
    i = cuda.grid(1)
    if i < x.size:
        i8[i, 0] = np.int8(x[i])
        i8[i, 1] = x[i]
        u8[i, 0] = np.uint8(x[i])
        u8[i, 1] = x[i]
        i16[i, 0] = np.int16(x[i])
        i16[i, 1] = x[i]
        u16[i, 0] = np.uint16(x[i])
        u16[i, 1] = x[i]
        i32[i, 0] = np.int32(x[i])
        i32[i, 1] = x[i]
        u32[i, 0] = np.uint32(x[i])
        u32[i, 1] = x[i]
        i64[i, 0] = np.int64(x[i])
        i64[i, 1] = x[i]
        u64[i, 0] = np.uint64(x[i])
        u64[i, 1] = x[i]


_TYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
_VALUES = [NAN, INF, -INF, 300.7, -1.5, 70000.5, 1e30, -1e30]
#: value -> (int8, uint8, int16, uint16, int32, uint32, int64, uint64): the 8-bit results are the
#: low bytes of the saturated 16-bit conversion (int8(inf): 32767 -> 0xff -> -1)
_FROM_F64 = {
    NAN: (0, 0, -2**15, 2**15, I32_MIN, 2**31, I64_MIN, 2**63),
    INF: (-1, 255, 2**15 - 1, 2**16 - 1, I32_MAX, 2**32 - 1, I64_MAX, 2**64 - 1),
    -INF: (0, 0, -2**15, 0, I32_MIN, 0, I64_MIN, 0),
    300.7: (44, 44, 300, 300, 300, 300, 300, 300),
    -1.5: (-1, 0, -1, 0, -1, 0, -1, 0),
    70000.5: (-1, 255, 2**15 - 1, 2**16 - 1, 70000, 70000, 70000, 70000),
    1e30: (-1, 255, 2**15 - 1, 2**16 - 1, I32_MAX, 2**32 - 1, I64_MAX, 2**64 - 1),
    -1e30: (0, 0, -2**15, 0, I32_MIN, 0, I64_MIN, 0),
}
#: from a float32 a NaN gives 0 below 64 bits
_FROM_F32 = dict(_FROM_F64, **{"nan": (0, 0, 0, 0, 0, 0, I64_MIN, 2**63)})


@pytest.mark.parametrize("ftype", [np.float64, np.float32])
def test_float_to_int_casts_and_stores_saturate_as_cvt_rzi(ftype):
    with np.errstate(over="ignore"):
        x = np.array(_VALUES, ftype)
    outs = [np.full((len(_VALUES), 2), 7, t) for t in _TYPES]
    cuda.jit(_casts)[1, len(_VALUES)](x, *outs)
    table = _FROM_F32 if ftype is np.float32 else _FROM_F64
    for row, v in enumerate(_VALUES):
        want = table["nan" if v != v and ftype is np.float32 else v]
        for out, t, w in zip(outs, _TYPES, want):
            got = out[row].tolist()
            assert got == [w, w], (ftype.__name__, v, t.__name__, got, w)


# ---------------------------------------------------------------------------------------------
# debug=True: Numba's own messages for a zero divisor and 0 ** -n

def _ifloordiv(a, b, out):
    out[0] = a[0] // b[0]


def _imod(a, b, out):
    out[0] = a[0] % b[0]


def _itruediv(a, b, out):
    out[0] = a[0] / b[0]


def _idivmod(a, b, out):
    q, r = divmod(a[0], b[0])
    out[0] = q + r


_DIVISIONS = [
    (_ifloordiv, "a[0] // b[0]", np.int64, "integer division by zero"),
    (_imod, "a[0] % b[0]", np.int64, "integer modulo by zero"),
    (_idivmod, "divmod(a[0], b[0])", np.int64, "integer divmod by zero"),
    (_itruediv, "a[0] / b[0]", np.int64, "division by zero"),
    (_ifloordiv, "a[0] // b[0]", np.float64, "division by zero"),
    (_imod, "a[0] % b[0]", np.float64, "modulo by zero"),
    (_idivmod, "divmod(a[0], b[0])", np.float64, "modulo by zero"),
    (_itruediv, "a[0] / b[0]", np.float64, "division by zero"),
    (_itruediv, "a[0] / b[0]", np.complex128, "complex division by zero"),
]


@pytest.mark.parametrize("func, text, dtype, message", _DIVISIONS,
                         ids=[f"{f.__name__}-{np.dtype(d).name}" for f, _, d, _ in _DIVISIONS])
def test_zero_divisor_raises_numbas_message_under_debug(func, text, dtype, message):
    a, b = np.array([3], dtype), np.array([0], dtype)
    out = np.zeros(1, np.complex128 if dtype is np.complex128 else np.float64)
    with pytest.raises(ZeroDivisionError, match=re.escape(_prefix(func, text) + message) + "$"):
        cuda.jit(debug=True, opt=False)(func)[1, 1](a, b, out)


def test_complex_division_by_zero_raises_without_debug_too():
    # Numba's complex division (CPython's algorithm) raises whatever the error model
    out = np.full(1, 5 + 0j)
    with pytest.warns(KernelRaisedWarning, match=r"ZeroDivisionError\('complex division by zero'"):
        cuda.jit(_itruediv)[1, 1](np.array([1 + 1j]), np.array([0j]), out)
    assert out.tolist() == [5 + 0j]                 # the thread stopped before its store


def _ipow(a, b, out):
    out[0] = a[0] ** b[0]


def _ipow_literal(a, b, out):
    out[0] = a[0] ** -2


@pytest.mark.parametrize("func, text", [(_ipow, "a[0] ** b[0]"), (_ipow_literal, "a[0] ** -2")])
def test_zero_to_a_negative_integer_power(func, text):
    a, b = np.array([0]), np.array([-2])
    out = np.zeros(1, np.int64)
    msg = _prefix(func, text) + "0 cannot be raised to a negative power"
    with pytest.raises(ZeroDivisionError, match=re.escape(msg) + "$"):
        cuda.jit(debug=True, opt=False)(func)[1, 1](a, b, out)
    # without debug (the numpy error model): INT64_MIN, no exception
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cuda.jit(func)[1, 1](a, b, out)
    assert out.tolist() == [I64_MIN]


@pytest.mark.parametrize("debug", [False, True])
@pytest.mark.parametrize("base, exp, want", [(2, -1, 0), (-3, -2, 0), (1, -5, 1), (-1, -3, -1),
                                             (-1, -2, 1)])
def test_negative_integer_power_as_int_power(base, exp, want, debug):
    out = np.zeros(1, np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cuda.jit(debug=debug, opt=False)(_ipow)[1, 1](np.array([base]), np.array([exp]), out)
    assert out.tolist() == [want]


# ---------------------------------------------------------------------------------------------
# reshape: Numba's checks

def _reshape_to(a, n, out):
    b = a.reshape(n[0])
    out[0] = b[0] + 1


def _reshape_inferred(a, out):
    b = a.reshape(2, -1)
    out[0] = b.shape[1]
    out[1] = b[1, 2]


def _reshape_two_unknown(a, out):
    b = a.reshape(-1, -1)
    out[0] = b[0, 0]


def test_reshape_to_another_size_stops_the_thread():
    a, out = np.arange(6.0), np.full(1, 9.0)
    with pytest.warns(KernelRaisedWarning,
                      match=re.escape("ValueError('total size of new array must be unchanged')")):
        cuda.jit(_reshape_to)[1, 1](a, np.array([5]), out)
    assert out.tolist() == [9.0]
    cuda.jit(_reshape_to)[1, 1](a, np.array([6]), out)
    assert out.tolist() == [1.0]


def test_reshape_to_another_size_raises_under_debug():
    msg = _prefix(_reshape_to, "a.reshape(n[0])") + "total size of new array must be unchanged"
    with pytest.raises(ValueError, match=re.escape(msg) + "$"):
        cuda.jit(debug=True, opt=False)(_reshape_to)[1, 1](np.arange(6.0), np.array([4]),
                                                            np.zeros(1))


def test_reshape_infers_one_dimension_and_refuses_two():
    out = np.zeros(2)
    cuda.jit(_reshape_inferred)[1, 1](np.arange(6.0), out)
    assert out.tolist() == [3.0, 5.0]
    msg = _prefix(_reshape_two_unknown, "a.reshape(-1, -1)") + "multiple negative shape values"
    with pytest.raises(ValueError, match=re.escape(msg) + "$"):
        cuda.jit(debug=True, opt=False)(_reshape_two_unknown)[1, 1](np.arange(6.0), out)
