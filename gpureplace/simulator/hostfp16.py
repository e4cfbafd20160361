"""``cuda.fp16`` in the simulator: each function computed as ``compiler/intrinsics/fp16.py``
compiles it, on NumPy float16 values.

The 30 functions ``cuda.fp16`` had before CUDA C's names came (``hadd`` ... ``hexp10``, ``heq``
... ``hlt``) keep their meaning in ``hostmath.FP16``; the rest are here.  Every rounding is exact: the directed conversions (``__float2half_rz``,
``__ll2half_ru`` ...) round the exact value once in their mode, as PTX's ``cvt.<mode>.f16``;
the conversions to integers round to an integral value in their mode and saturate, a NaN giving
0, or 0x8000000000000000 for the 64-bit integers (cuda_fp16.h's values); ``_sat`` clamps the
rounded result to [+0.0, 1.0] (NaN to +0.0), ``__hfma_relu`` gives +0.0 for a result <= 0.
``htanh`` is the correctly rounded float32 tanh rounded to half (the device rounds libdevice's
``tanhf``, within 2 float32 ulp of it); ``htanh_approx`` the same here, where the device's
``tanh.approx.f16`` (sm_75 and newer) is an approximation that may be an ulp or two away.
``atomicAdd`` (a ``CPointer(float16)`` pointer argument) adds under the launch's atomic lock.
"""

from __future__ import annotations

import math

import numpy as np
from numba.core import types as nbtypes

from ..compiler.intrinsics import fp16 as compiled
from . import hostbf16, hostmath
from .arrays import cvt_rzi, wrap_int

_F16, _F32, _F64 = np.float16, np.float32, np.float64
_NAN16 = _F16("nan")


def _arg(name, value, want):
    """An argument converted at the call, as the device's signature converts it."""
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if hostbf16.is_bfloat16(value):
        value = _F32(float(value))                       # (exact)
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"cuda.fp16.{name}() needs {want} (or real number) arguments, got "
                        f"{type(value).__name__} {value!r}")
    dt = np.dtype(want)
    if dt.kind == "f":
        if isinstance(value, np.floating) and value.dtype == dt:
            return value
        with np.errstate(over="ignore"):                  # rounded once, as fptrunc / sitofp
            return dt.type(int(value) if isinstance(value, (int, np.integer)) else
                           float(value))
    if isinstance(value, (float, np.floating)):
        return cvt_rzi(value, dt)                         # a float given for an integer
    return wrap_int(int(value), dt)                       # an integer wraps (a C conversion)


def round_half(value, mode="rn"):
    """``value`` (a float, an int or a ``Fraction``, taken exactly) as a float16 rounded once
    in ``mode``: "rn" to nearest even, "rz" toward zero, "rd" down, "ru" up.  An overflow gives
    infinity where the mode rounds away from zero, else the largest finite half (65504), as
    PTX's cvt does."""
    if isinstance(value, float) and not math.isfinite(value):
        return _F16(value)
    if mode not in _MODES:
        raise ValueError(f"rounding mode {mode!r}: 'rn', 'rz', 'rd' or 'ru'")
    with np.errstate(over="ignore"):
        # a neighbour of the value (float() of an int or Fraction is within 2**-53 of it)
        h = _F16(float(value) if abs(value) < 2 ** 1000 else math.copysign(1e300, value))
    if float(h) == value:                 # exact (Python compares floats, ints, Fractions so)
        return h
    if float(h) < value:
        lo, hi = h, np.nextafter(h, _F16(np.inf))
    else:
        lo, hi = np.nextafter(h, _F16(-np.inf)), h
    if mode == "rd" or (mode == "rz" and value > 0):
        return lo
    if mode == "ru" or mode == "rz":
        return hi
    mid = (_exact(lo) + _exact(hi)) / 2
    if value != mid:
        return lo if value < mid else hi
    return lo if int(np.asarray(lo).view(np.uint16)) % 2 == 0 else hi


_MODES = ("rn", "rz", "rd", "ru")
_BEYOND = 65536          # where the next half after 65504 would be (the overflow's midpoint)


def _exact(h):
    """The exact value of the finite-or-infinite half ``h``; an infinity counts as 2**16 (so
    that the midpoint between it and 65504 is IEEE's overflow threshold, 65520)."""
    from fractions import Fraction
    v = float(h)
    return Fraction(math.copysign(_BEYOND, v)) if math.isinf(v) else Fraction(v)


def _f(x):
    return float(x)


def _half(fn):
    """fn on the exact float64 values, the result rounded once to half."""
    def impl(*args):
        with np.errstate(all="ignore"):
            return round_half(float(fn(*(_F64(a) for a in args))))
    return impl


def _in_float32(fn):
    """A float32 function of the device: correctly rounded to float32, then rounded to half."""
    def impl(x):
        with np.errstate(all="ignore"):
            return _F16(_F32(fn(_F64(x))))
    return impl


def _saturate(h):
    v = _f(h)
    return _F16(1.0) if v >= 1.0 else h if v > 0.0 else _F16(0.0)   # NaN, -0.0: +0.0


def _fma(a, b, c):
    """a * b + c rounded once (the exact value; an exact zero gets IEEE's sign)."""
    x, y, z = _f(a), _f(b), _f(c)
    with np.errstate(all="ignore"):
        r = _F64(x) * _F64(y) + _F64(z)           # (the product is exact in float64)
    if r == 0 or not math.isfinite(r):       # an exact zero (IEEE's sign), inf or NaN operands
        return _F16(r)
    return round_half(_exact_sum(x, y, z))


def _exact_sum(x, y, z):
    from fractions import Fraction
    return Fraction(x) * Fraction(y) + Fraction(z)


def _relu(h):
    return _F16(0.0) if _f(h) <= 0.0 else h          # (NaN stays NaN)


def _max_nan(larger):
    def impl(a, b):
        x, y = _f(a), _f(b)
        if math.isnan(x) or math.isnan(y):
            return _NAN16
        if x == y:                    # -0.0 < +0.0 (equal otherwise: either will do)
            neg_a = math.copysign(1.0, x) < 0
            return (b if neg_a else a) if larger else (a if neg_a else b)
        return (a if x > y else b) if larger else (a if x < y else b)
    return impl


def _cmp_unordered(op):
    def impl(a, b):
        x, y = _f(a), _f(b)
        return True if math.isnan(x) or math.isnan(y) else bool(op(x, y))
    return impl


def _hisinf(a):
    x = _f(a)
    return np.int32(1 if x == math.inf else -1 if x == -math.inf else 0)


def _to_int(dtype, mode):
    """half -> integer: rounded to an integral value in ``mode``, saturated; NaN 0, or the sign
    bit alone for 64 bits (0x8000000000000000), as PTX's cvt.<mode>i.<int>.f16."""
    rnd = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[mode]
    info = np.iinfo(dtype)

    def impl(a):
        v = _f(a)
        if v != v:
            return wrap_int(1 << 63, dtype) if dtype.itemsize == 8 else dtype.type(0)
        r = float(rnd(v))
        return dtype.type(info.max if r >= info.max else info.min if r <= info.min else int(r))
    return impl


def _from_int(mode):
    return lambda i: round_half(int(i), mode)


def _from_float(mode):
    return lambda x: round_half(float(x), mode)


def _as_int(dtype):
    return lambda a: np.array(a, dtype=_F16).view(dtype)[()]


def _as_half(i):
    return np.array(int(i) & 0xFFFF, dtype=np.uint16).view(_F16)[()]


_IMPL = {
    "htanh": _in_float32(np.tanh), "htanh_approx": _in_float32(np.tanh),
    "__hfma_sat": lambda a, b, c: _saturate(_fma(a, b, c)),
    "__hfma_relu": lambda a, b, c: _relu(_fma(a, b, c)),
    "__hmax_nan": _max_nan(True), "__hmin_nan": _max_nan(False),
    "__hisnan": lambda a: math.isnan(_f(a)), "__hisinf": _hisinf,
    "__half2float": lambda a: _F32(a),
    "__float2half": _from_float("rn"), "__double2half": _from_float("rn"),
    "__half_as_short": _as_int(np.int16), "__half_as_ushort": _as_int(np.uint16),
    "__short_as_half": _as_half, "__ushort_as_half": _as_half,
}
for _n, _op in (("hadd", np.add), ("hsub", np.subtract), ("hmul", np.multiply)):
    # +, -, * of halves in float64 are exact (or beyond half's range): one rounding to half
    _IMPL[f"__{_n}_rn"] = _half(_op)
    _IMPL[f"__{_n}_sat"] = (lambda f: lambda a, b: _saturate(f(a, b)))(_half(_op))
for _n, _op in (("heq", lambda x, y: x == y), ("hne", lambda x, y: x != y),
                ("hge", lambda x, y: x >= y), ("hgt", lambda x, y: x > y),
                ("hle", lambda x, y: x <= y), ("hlt", lambda x, y: x < y)):
    _IMPL[f"__{_n}u"] = _cmp_unordered(_op)
for _mode in ("rn", "rz", "rd", "ru"):
    _IMPL[f"__float2half_{_mode}"] = _from_float(_mode)
_INT_TYPES = {getattr(nbtypes, f"{s}int{b}") for s in ("", "u") for b in (16, 32, 64)}
for _name, (_argtypes, _result) in compiled.SIGNATURES.items():
    if _name.startswith("__half2") and _name != "__half2float":
        _IMPL[_name] = _to_int(np.dtype(_result.name), _name.rsplit("_", 1)[1])
    elif "2half_" in _name and compiled.SIGNATURES[_name][0][0] in _INT_TYPES:
        _IMPL[_name] = _from_int(_name.rsplit("_", 1)[1])


def _wrapped(name, fn):
    argtypes = [str(t) for t in compiled.SIGNATURES[name][0]]

    def impl(*args):
        if len(args) != len(argtypes):
            raise TypeError(f"cuda.fp16.{name}() takes {len(argtypes)} argument(s), got "
                            f"{len(args)}")
        return fn(*(_arg(name, a, want) for a, want in zip(args, argtypes)))
    impl.__name__ = name
    return impl


def atomic_add(lock):
    """``cuda.fp16.atomicAdd(address, value)`` of a launch whose atomics hold ``lock``."""
    def atomicAdd(address, value):                      # noqa: N802 (numba-cuda's name)
        dtype = getattr(address, "dtype", None)
        if not hasattr(address, "address") or dtype != np.dtype(_F16):
            raise TypeError(f"cuda.fp16.atomicAdd(): the address must be a pointer to float16 "
                            f"(CPointer(float16)), got {type(address).__name__} {address!r}")
        val = _arg("atomicAdd", value, "float16")
        with lock:
            old = _F16(address[0])
            with np.errstate(all="ignore"):
                address[0] = round_half(float(_F64(old) + _F64(val)))
        return old
    return atomicAdd


#: stub name -> host implementation (with the call's argument conversions); atomicAdd, which
#: needs the launch, is ``atomic_add(lock)``
FP16 = {**hostmath.FP16, **{name: _wrapped(name, fn) for name, fn in _IMPL.items()}}
_missing = set(compiled.STUBS) - set(FP16) - {"atomicAdd"}
assert not _missing, f"cuda.fp16 functions without a host implementation: {sorted(_missing)}"
