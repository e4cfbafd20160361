"""bfloat16 in the simulator: values are ``ml_dtypes.bfloat16`` scalars (NumPy's bfloat16, whose
arithmetic rounds once to nearest even, as the device's), and ``cuda.bf16``'s functions computed
as ``compiler/intrinsics/bf16.py`` compiles them.

Every rounding here is exact (``compiler.bfloat16.round_bits`` rounds the exact value once):
the directed conversions, ``hfma`` (the exact ``a * b + c``), integers.  The float32 functions
(``hsqrt``, ``hlog`` ...) are computed correctly rounded in float32, then rounded to bfloat16,
as the device rounds libdevice's float32 results; ``htanh_approx`` is the exact tanh here
(the device's ``tanh.approx.f32`` is within 2^-10.7, below bfloat16's resolution, but may round
to the neighbouring value).
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np

from ..compiler.bfloat16 import register_dtype, round_bits
from ..compiler.intrinsics import bf16 as compiled
from .arrays import saturated_int

_F32 = np.float32
_state = {}


def bfloat16_type():
    """``ml_dtypes.bfloat16`` (imported on first use: a kernel computes in bfloat16)."""
    t = _state.get("type")
    if t is None:
        import ml_dtypes
        register_dtype()
        t = _state["type"] = ml_dtypes.bfloat16
    return t


def loaded_type():
    """``ml_dtypes.bfloat16`` if it is imported, else None (no bfloat16 value can exist)."""
    t = _state.get("type")
    if t is None and "ml_dtypes" in sys.modules:
        t = bfloat16_type()
    return t


def is_bfloat16(value) -> bool:
    t = loaded_type()
    return t is not None and type(value) is t


def is_bfloat16_type(t) -> bool:
    return t is not None and t is loaded_type()


def from_bits(bits):
    return np.array(int(bits) & 0xFFFF, dtype=np.uint16).view(bfloat16_type())[()]


def bits(value) -> int:
    return int(np.asarray(value, dtype=bfloat16_type()).view(np.uint16))


def rounded(value, mode="rn"):
    """``value`` (exact: float, int or Fraction) as a bfloat16 rounded once in ``mode``."""
    if isinstance(value, (float, np.floating)) and math.isnan(value):
        return bfloat16_type()(float("nan"))
    return from_bits(round_bits(value if isinstance(value, (int, Fraction)) else float(value),
                                mode))


def _arg(name, value, want):
    """An argument converted at the call, as the device's signature converts it."""
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if not isinstance(value, (int, float, np.integer, np.floating)) and not is_bfloat16(value):
        raise TypeError(f"cuda.bf16.{name}() needs {want} (or real number) arguments, got "
                        f"{type(value).__name__} {value!r}")
    if want == "bfloat16":
        return value if is_bfloat16(value) else rounded(
            int(value) if isinstance(value, (int, np.integer)) else float(value))
    if want in ("float32", "float64"):
        return np.dtype(want).type(value)
    info = np.iinfo(want)          # an integer argument wraps as a C conversion does
    v = int(value) & ((1 << info.bits) - 1)
    return np.dtype(want).type(v - (1 << info.bits) if info.min < 0 and v > info.max else v)


def _f(x):
    return float(x)


def _in_float32(fn):
    """fn on the float32 value, correctly rounded to float32, then rounded to bfloat16."""
    return lambda x: rounded(_F32(fn(np.float64(_f(x)))))


def _saturate(x):
    """Clamped to [+0.0, 1.0] as compiled: ``min.bf16(max.bf16(x, +0.0), 1.0)``, where max
    takes +0.0 over -0.0 (PTX ISA) and a NaN operand gives the other one."""
    v = _f(x)
    return rounded(0.0 if math.isnan(v) or v <= 0.0 else min(v, 1.0))


def _exact(x):
    return Fraction(_f(x))


def _fma(a, b, c):
    """a * b + c rounded once, as ``fma.rn.bf16``."""
    x, y, z = _f(a), _f(b), _f(c)
    if any(math.isnan(v) or math.isinf(v) for v in (x, y, z)):
        return rounded(x * y + z)
    exact = _exact(a) * _exact(b) + _exact(c)
    if exact == 0:
        # a Fraction has no sign: IEEE's exact zero is -0.0 where the product and c are both
        # -0.0 (else +0.0, rounding to nearest), as float64 computes it (the product of two
        # bfloat16 values, and a sum that is zero, are exact there)
        return rounded(x * y + z)
    return rounded(exact)


def _relu(x):
    return rounded(0.0) if _f(x) < 0 else x


def _max(nan_wins, pick):
    def impl(a, b):
        x, y = _f(a), _f(b)
        if math.isnan(x) or math.isnan(y):
            if nan_wins:
                return rounded(float("nan"))
            return b if math.isnan(x) else a
        return a if pick(x, y) else b
    return impl


def _cmp(op, unordered):
    def impl(a, b):
        x, y = _f(a), _f(b)
        if math.isnan(x) or math.isnan(y):
            return unordered
        return op(x, y)
    return impl


def _hisinf(a):
    x = _f(a)
    return np.int32(1 if x == math.inf else -1 if x == -math.inf else 0)


def _to_int(dtype, mode):
    """To an integer: rounded to an integral value in ``mode``, then saturated (NaN 0)."""
    rnd = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[mode]
    return lambda a: saturated_int(float(rnd(_f(a))), dtype)


def _from_int(mode):
    return lambda i: rounded(int(i), mode)


def _from_float32(mode):
    return lambda x: rounded(float(x), mode)


def _as_bits(dtype):
    return lambda a: np.array(bits(a), dtype=np.uint16).view(dtype)[()]


def _exactly(op):
    """op on the float64 values, rounded once to bfloat16: +, -, * and / of bfloat16 values
    rounded to float64 first and to bfloat16 then give the correctly rounded result (53 bits
    >= 2 * 8 + 2), as the device's add.rn.bf16 ... or div.rn.f32 + cvt.rn.bf16.f32."""
    def impl(a, b):
        with np.errstate(all="ignore"):
            return rounded(op(np.float64(_f(a)), np.float64(_f(b))))
    return impl


_IMPL = {
    "hadd": _exactly(np.add), "hsub": _exactly(np.subtract), "hmul": _exactly(np.multiply),
    "hdiv": _exactly(np.divide),
    "hneg": lambda a: from_bits(bits(a) ^ 0x8000),
    "habs": lambda a: from_bits(bits(a) & 0x7FFF),
    "hfma": _fma,
    "hfma_relu": lambda a, b, c: _relu(_fma(a, b, c)),
    "hmax": _max(False, lambda x, y: x >= y), "hmin": _max(False, lambda x, y: x <= y),
    "hmax_nan": _max(True, lambda x, y: x >= y), "hmin_nan": _max(True, lambda x, y: x <= y),
    "hisnan": lambda a: math.isnan(_f(a)), "hisinf": _hisinf,
    "htrunc": lambda a: rounded(np.trunc(_f(a))), "hceil": lambda a: rounded(np.ceil(_f(a))),
    "hfloor": lambda a: rounded(np.floor(_f(a))), "hrint": lambda a: rounded(np.rint(_f(a))),
    "hsqrt": _in_float32(np.sqrt), "hrsqrt": _in_float32(lambda x: 1.0 / np.sqrt(_F32(x))),
    "hrcp": _in_float32(lambda x: 1.0 / x),
    "hsin": _in_float32(np.sin), "hcos": _in_float32(np.cos), "htanh": _in_float32(np.tanh),
    "htanh_approx": _in_float32(np.tanh), "hlog": _in_float32(np.log),
    "hlog2": _in_float32(np.log2), "hlog10": _in_float32(np.log10),
    "hexp": _in_float32(np.exp), "hexp2": _in_float32(np.exp2),
    "hexp10": _in_float32(lambda x: np.power(10.0, x)),
    "bfloat162float": lambda a: _F32(_f(a)),
    "float2bfloat16": _from_float32("rn"), "double2bfloat16": lambda x: rounded(float(x)),
    "bfloat16_as_short": _as_bits(np.int16), "bfloat16_as_ushort": _as_bits(np.uint16),
    "short_as_bfloat16": lambda i: from_bits(int(i) & 0xFFFF),
    "ushort_as_bfloat16": lambda i: from_bits(int(i)),
}


for _n in ("hadd", "hsub", "hmul"):
    _IMPL[f"{_n}_rn"] = _IMPL[_n]
    _IMPL[f"{_n}_sat"] = (lambda f: lambda a, b: _saturate(f(a, b)))(_IMPL[_n])
_IMPL["hfma_sat"] = lambda a, b, c: _saturate(_fma(a, b, c))
for _n, _op in (("heq", lambda x, y: x == y), ("hne", lambda x, y: x != y),
                ("hge", lambda x, y: x >= y), ("hgt", lambda x, y: x > y),
                ("hle", lambda x, y: x <= y), ("hlt", lambda x, y: x < y)):
    _IMPL[_n] = _cmp(_op, False)
    _IMPL[f"{_n}u"] = _cmp(_op, True)
for _mode in ("rn", "rz", "rd", "ru"):
    _IMPL[f"float2bfloat16_{_mode}"] = _from_float32(_mode)
for _name in compiled.STUBS:
    for _cname in ("char", "uchar", "short", "ushort", "int", "uint", "ll", "ull"):
        for _mode in ("rn", "rz", "rd", "ru"):
            if _name == f"bfloat162{_cname}_{_mode}":
                _IMPL[_name] = _to_int(np.dtype(compiled.SIGNATURES[_name][1].name), _mode)
            elif _name == f"{_cname}2bfloat16_{_mode}":
                _IMPL[_name] = _from_int(_mode)


def _wrapped(name, fn):
    argtypes = [str(t) for t in compiled.SIGNATURES[name][0]]

    def impl(*args):
        if len(args) != len(argtypes):
            raise TypeError(f"cuda.bf16.{name}() takes {len(argtypes)} argument(s), got "
                            f"{len(args)}")
        return fn(*(_arg(name, a, want) for a, want in zip(args, argtypes)))
    impl.__name__ = name
    return impl


#: stub name -> host implementation (with the call's argument conversions)
BF16 = {name: _wrapped(name, _IMPL[name]) for name in compiled.STUBS}
