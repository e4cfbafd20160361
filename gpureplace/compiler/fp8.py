"""The 8-bit float types of CUDA's ``cuda_fp8.h`` (numba-cuda's ``fp8_e4m3``, ``fp8_e5m2``,
``fp8_e8m0``): the Numba types, and their conversions as pure integer functions that the compiler
builds into device code (``intrinsics/fp8.py``) and the simulator runs as they are.

* **E4M3** (4 exponent bits, bias 7, 3 fraction bits): largest 448, no infinity, NaN 0x7F/0xFF.
* **E5M2** (5 exponent bits, bias 15, 2 fraction bits: float16's upper byte): largest 57344,
  infinities 0x7C/0xFC, NaN 0x7F.
* **E8M0** (8 exponent bits, bias 127, no sign, no fraction): the powers of two 2^-127 ... 2^127,
  NaN 0xFF.

Conversions follow CUDA's: from a floating value (float16, bfloat16 and float32 widened exactly
to float32, float64 directly) to E4M3/E5M2 round once to nearest even; the constructors saturate
to the largest finite value (``SATFINITE``), where ``NOSAT`` gives infinity (E5M2) or NaN (E4M3);
integers convert through float32, as CUDA's constructors do.  To E8M0 the magnitude rounds up to
a power of two (``cudaRoundPosInf``, the constructors') or down (``cudaRoundZero``).  From an
8-bit float to an integer: truncation toward zero, saturated to the integer's range, NaN 0.
"""

from __future__ import annotations

import enum

from numba.core import types

__all__ = ["FP8", "fp8_e4m3", "fp8_e5m2", "fp8_e8m0", "saturation_t", "fp8_interpretation_t"]


class saturation_t(enum.IntEnum):  # noqa: N801 - CUDA's (and numba-cuda's) name
    """``__nv_saturation_t``: what an out-of-range value becomes."""
    NOSAT = 0            # infinity (E5M2) or NaN (E4M3, E8M0)
    SATFINITE = 1        # the largest finite value of that sign


class fp8_interpretation_t(enum.IntEnum):  # noqa: N801
    """``__nv_fp8_interpretation_t``: which 8-bit format a raw byte holds."""
    E4M3 = 0
    E5M2 = 1


#: cudaRoundMode's values (cuda.bindings.runtime.cudaRoundMode)
ROUND_ZERO, ROUND_POS_INF = 1, 2


class FP8(types.Number):
    """An 8-bit float type of device code (its value is the byte's 8 bits)."""

    def __init__(self, name, kind):
        super().__init__(name)
        self.kind = kind            # "e4m3" | "e5m2" | "e8m0"
        self.bitwidth = 8
        self.__name__ = name        # (numba-cuda's types have one; tests print it)

    def cast_python_value(self, value):
        """``fp8_e4m3(1.5)`` on the host (or in the simulator): an ``FP8Value``."""
        return FP8Value(self, from_value(self.kind, value))

    def can_convert_to(self, typingctx, other):
        return None                 # conversions are explicit, as CUDA's operators are

    def can_convert_from(self, typingctx, other):
        return None


fp8_e4m3 = FP8("fp8_e4m3", "e4m3")
fp8_e5m2 = FP8("fp8_e5m2", "e5m2")
fp8_e8m0 = FP8("fp8_e8m0", "e8m0")
TYPES = {"e4m3": fp8_e4m3, "e5m2": fp8_e5m2, "e8m0": fp8_e8m0}


class FP8Value:
    """An 8-bit float on the host: its type and its byte (``.x``, as CUDA's ``__x``)."""

    __slots__ = ("type", "x")

    def __init__(self, type_, x):
        self.type, self.x = type_, int(x) & 0xFF

    def __float__(self):
        return float_of(self.type.kind, self.x)

    def __int__(self):
        f = float(self)
        return 0 if f != f else int(max(min(f, 2.0 ** 63), -(2.0 ** 63)))

    def __bool__(self):
        return float(self) != 0.0

    def __repr__(self):
        return f"{self.type.name}({float(self)!r})"


# ---------------------------------------------------------------------------------------------
# Pure integer conversions (no Python-only features: the compiler compiles these)

def bit_length(x):
    """The number of bits of the non-negative int64 ``x``."""
    n = 0
    if x >= 4294967296:
        x >>= 32
        n += 32
    if x >= 65536:
        x >>= 16
        n += 16
    if x >= 256:
        x >>= 8
        n += 8
    if x >= 16:
        x >>= 4
        n += 4
    if x >= 4:
        x >>= 2
        n += 2
    if x >= 2:
        x >>= 1
        n += 1
    if x >= 1:
        n += 1
    return n


def encode(sign, mag, scale, special, e5m2, sat):
    """The E4M3 (``e5m2`` 0) or E5M2 (1) byte of ``(-1)**sign * mag * 2**scale`` (``special``:
    0 finite, 1 infinity, 2 NaN), rounded to nearest even; out of range: the largest finite
    value (``sat`` 1) or infinity / NaN (0)."""
    mbits = 2 if e5m2 else 3
    bias = 15 if e5m2 else 7
    max_code = 0x7B if e5m2 else 0x7E
    over_code = 0x7C if e5m2 else 0x7F
    if special == 2:
        return 0x7F
    if special == 1:
        return (sign << 7) | (max_code if sat else over_code)
    if mag == 0:
        return sign << 7
    p = bit_length(mag) - 1 + scale                  # 2**p <= |value| < 2**(p + 1)
    emin = 1 - bias
    q = (p if p > emin else emin) - mbits            # the quantum's exponent
    shift = q - scale
    if shift <= 0:
        n = mag << (-shift)
    elif shift > 60:
        n = 0                                        # below half the smallest subnormal
    else:
        n = mag >> shift
        rest = mag - (n << shift)
        half = 1 << (shift - 1)
        if rest > half or (rest == half and (n & 1) == 1):
            n += 1
    if n >= (2 << mbits):                            # rounded up into the next binade
        n >>= 1
        q += 1
    if n >= (1 << mbits):
        code = ((q + mbits + bias) << mbits) | (n - (1 << mbits))
    else:
        code = n                                     # subnormal (or zero)
    if code > max_code:
        return (sign << 7) | (max_code if sat else over_code)
    return (sign << 7) | code


def encode_e8m0(mag, scale, special, sat, round_up):
    """The E8M0 byte of ``mag * 2**scale`` (its magnitude: E8M0 has no sign) rounded to a power
    of two, up (``round_up``) or down; below 2**-127: 2**-127; out of range: 2**127 (``sat``)
    or NaN."""
    if special == 2:
        return 0xFF
    if special == 1:
        return 0xFE if sat else 0xFF
    if mag == 0:
        return 0
    p = bit_length(mag) - 1 + scale
    if round_up and mag != (1 << (bit_length(mag) - 1)):
        p += 1                                       # not a power of two: the next one up
    e = p + 127
    if e < 0:
        return 0
    if e > 254:
        return 0xFE if sat else 0xFF
    return e


def split_f32(bits):
    """float32 bits -> (sign, mag, scale, special): the value is (-1)**sign * mag * 2**scale."""
    sign = (bits >> 31) & 1
    e = (bits >> 23) & 0xFF
    f = bits & 0x7FFFFF
    if e == 0xFF:
        return sign, 0, 0, (2 if f != 0 else 1)
    if e == 0:
        return sign, f, -149, 0
    return sign, f | 0x800000, e - 150, 0


def split_f64(bits):
    sign = (bits >> 63) & 1
    e = (bits >> 52) & 0x7FF
    f = bits & 0xFFFFFFFFFFFFF
    if e == 0x7FF:
        return sign, 0, 0, (2 if f != 0 else 1)
    if e == 0:
        return sign, f, -1074, 0
    return sign, f | 0x10000000000000, e - 1075, 0


def f32_to_fp8(bits, e5m2, sat):
    sign, mag, scale, special = split_f32(bits)
    return encode(sign, mag, scale, special, e5m2, sat)


def f64_to_fp8(bits, e5m2, sat):
    sign, mag, scale, special = split_f64(bits)
    return encode(sign, mag, scale, special, e5m2, sat)


def f32_to_e8m0(bits, sat, round_up):
    sign, mag, scale, special = split_f32(bits)
    return encode_e8m0(mag, scale, special, sat, round_up)


def f64_to_e8m0(bits, sat, round_up):
    sign, mag, scale, special = split_f64(bits)
    return encode_e8m0(mag, scale, special, sat, round_up)


def int_to_e8m0(value):
    """An integer's magnitude rounded up to a power of two (CUDA's integer constructors)."""
    mag = -value if value < 0 else value
    return encode_e8m0(mag, 0, 0, 1, 1)


def fp8_to_f32(code, kind):
    """The float32 bits of an 8-bit float byte (exact); ``kind`` 0 E4M3, 1 E5M2, 2 E8M0."""
    if kind == 2:
        if code == 0xFF:
            return 0x7FC00000
        if code == 0:
            return 0x00400000                        # 2**-127: a float32 subnormal
        return code << 23
    mbits = 2 if kind == 1 else 3
    bias = 15 if kind == 1 else 7
    emask = 31 if kind == 1 else 15
    sign = (code >> 7) & 1
    e = (code >> mbits) & emask
    m = code & ((1 << mbits) - 1)
    if kind == 1 and e == 31:
        return (sign << 31) | (0x7F800000 if m == 0 else 0x7FC00000)
    if kind == 0 and e == 15 and m == 7:
        return (sign << 31) | 0x7FC00000
    if e == 0:
        if m == 0:
            return sign << 31
        p = bit_length(m) - 1                        # normalise the subnormal
        return (sign << 31) | ((p + 1 - bias - mbits + 127) << 23) | \
            ((m - (1 << p)) << (23 - p))
    return (sign << 31) | ((e - bias + 127) << 23) | (m << (23 - mbits))


def bf16_to_e8m0(bits, sat, round_up):
    """CUDA's ``__nv_cvt_bfloat16raw_to_e8m0``: the exponent field of the bfloat16 ``bits``
    (its magnitude), one up when rounding up and the fraction is not zero."""
    res = (bits >> 7) & 0xFF
    mag = bits & 0x7FFF
    if round_up and (bits & 0x7F) != 0 and mag > 0x40 and mag < 0x7F80:
        res += 1
    if sat and mag <= 0x7F80 and res == 0xFF:
        res = 0xFE
    return res


def e8m0_to_bf16(code):
    """CUDA's ``__nv_cvt_e8m0_to_bf16raw``: the bfloat16 bits of 2**(code - 127), NaN 0x7FFF."""
    if code == 0xFF:
        return 0x7FFF
    if code == 0:
        return 0x0040
    return code << 7


# ---------------------------------------------------------------------------------------------
# Host helpers (the simulator's)

_KIND = {"e4m3": 0, "e5m2": 1, "e8m0": 2}


def float_of(kind, code):
    import struct
    return struct.unpack("<f", struct.pack("<I", fp8_to_f32(code, _KIND[kind])))[0]


def _f64_bits(x):
    import struct
    return struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def from_value(kind, value):
    """The byte CUDA's constructor gives ``value`` (a Python or NumPy number, or an FP8Value)."""
    import numpy as np
    if isinstance(value, FP8Value):
        value = float(value)
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if isinstance(value, (int, np.integer)):
        v = int(value)
        if kind == "e8m0":
            return int_to_e8m0(v)
        value = np.float32(v)                       # through float32, as CUDA's constructors
    if isinstance(value, np.float64) or type(value) is float:
        bits = _f64_bits(value)
        return f64_to_e8m0(bits, 1, 1) if kind == "e8m0" else \
            f64_to_fp8(bits, _KIND[kind] == 1, 1)
    f32 = np.float32(value)                         # float16, bfloat16, float32: exact
    bits = int(np.asarray(f32).view(np.uint32))
    return f32_to_e8m0(bits, 1, 1) if kind == "e8m0" else f32_to_fp8(bits, _KIND[kind] == 1, 1)
