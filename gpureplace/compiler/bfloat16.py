"""bfloat16: the Numba type, its LLVM type and its NumPy dtype.

bfloat16 has float32's 8 exponent bits and 7 fraction bits.  On the device it is LLVM's own
``bfloat``: NVPTX selects the native instructions where the architecture has them (``add.rn.bf16``,
``mul.rn.bf16``, ``fma.rn.bf16``, ``max.bf16``, ``cvt.rn.bf16.f32``, ``cvt.rn.bf16.f64``,
``setp.lt.bf16`` on sm_90; ``fma.rn.bf16 a, 1.0, b`` for an addition on sm_80) and computes in
float32 where it does not (a division: ``div.rn.f32`` rounded once, the correctly rounded result).

Typing follows numba-cuda's: bfloat16 op bfloat16 stays bfloat16 (``intrinsics/bf16.py``); with
any other number the operation computes in the wider type (float32 with a float32 or a float16,
float64 with a float64 or an integer wider than 8 bits).  A bfloat16 converts to float32 and
float64 exactly (a promotion); everything else converts to it with rounding (to nearest even),
except 8-bit integers and booleans, which it holds exactly.

On the host a bfloat16 is ``ml_dtypes.bfloat16`` (the dtype of CuPy's and JAX's bfloat16 arrays,
PyTorch's ``torch.bfloat16`` is converted to it).  ml_dtypes is imported only where a bfloat16
value reaches the host side -- never by ``import gpureplace`` nor by a compile (its import takes
about a second): ``register_dtype()`` connects its dtype to this type once it is loaded.
"""

from __future__ import annotations

import math
import struct
import sys

from llvmlite import ir
from numba.core import types
from numba.core.typeconv import Conversion

__all__ = ["BFloat16", "bfloat16", "BFloatType", "bits_of", "round_bits", "value_of",
           "register_dtype", "host_dtype", "is_bfloat16_dtype"]


def bits_of(value) -> int:
    """The bfloat16 bits of ``value`` (a Python float or int), rounded once to nearest even --
    also from a float64, where rounding to float32 first could round twice."""
    return round_bits(float(value))


def round_bits(value, mode: str = "rn") -> int:
    """The bfloat16 bits of ``value`` (a float, an int or a ``Fraction``, taken exactly) rounded
    once in ``mode``: "rn" to nearest even, "rz" toward zero, "rd" down, "ru" up.  An overflow
    gives infinity where the mode rounds away from zero, else the largest finite value."""
    from fractions import Fraction        # (imports decimal: ~40 ms that import gpureplace spares)
    if isinstance(value, float):
        if math.isnan(value):
            return 0xFFC0 if math.copysign(1.0, value) < 0 else 0x7FC0
        negative = math.copysign(1.0, value) < 0
        if math.isinf(value):
            return (0x8000 if negative else 0) | 0x7F80
    else:
        negative = value < 0
    sign = 0x8000 if negative else 0
    a = abs(Fraction(value))
    if a == 0:
        return sign
    e = a.numerator.bit_length() - a.denominator.bit_length()    # 2**e <= a < 2**(e + 2)
    if Fraction(2) ** e > a:
        e -= 1
    quantum = Fraction(2) ** (max(e, -126) - 7)     # 8 significant bits; subnormals below
    q = a / quantum
    n = q.numerator // q.denominator
    rest = q - n
    if rest:
        if mode == "rn":
            n += rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1)
        elif mode == ("rd" if negative else "ru"):
            n += 1
        elif mode not in ("rz", "rd", "ru"):
            raise ValueError(f"rounding mode {mode!r}: 'rn', 'rz', 'rd' or 'ru'")
    rounded = n * quantum
    if rounded >= 2 ** 128:
        away = mode == "rn" or mode == ("rd" if negative else "ru")
        return sign | (0x7F80 if away else 0x7F7F)
    return sign | (struct.unpack("<I", struct.pack("<f", float(rounded)))[0] >> 16)


def value_of(bits: int) -> float:
    """The value of bfloat16 ``bits`` as a Python float (exact)."""
    return struct.unpack("<f", struct.pack("<I", (int(bits) & 0xFFFF) << 16))[0]


class BFloatType(ir.types._BaseFloatType):
    """LLVM's ``bfloat`` (llvmlite has no type for it)."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self):
        return "bfloat"

    def format_constant(self, value):
        return f"0xR{bits_of(value):04X}"


BFloatType._create_instance()


class BFloat16(types.Float):
    """The Numba type of a bfloat16 value (``cuda.bf16.bfloat16``)."""

    def __init__(self):
        types.Number.__init__(self, "bfloat16")
        self.bitwidth = 16

    def cast_python_value(self, value):
        """``bfloat16(3.14)`` on the host: an ``ml_dtypes.bfloat16``."""
        import ml_dtypes
        register_dtype()
        if not isinstance(value, (int, float, complex)) and hasattr(value, "__float__") and \
                not hasattr(value, "dtype"):
            value = float(value)             # an 8-bit float (exact in float64)
        return ml_dtypes.bfloat16(value)

    def can_convert_to(self, typingctx, other):
        if isinstance(other, types.Float) and other.bitwidth >= 32:
            return Conversion.promote          # exact: same exponent range, more fraction bits
        if isinstance(other, types.Complex):
            return Conversion.safe
        if isinstance(other, (types.Float, types.Integer, types.Boolean)):
            return Conversion.unsafe
        return None

    def can_convert_from(self, typingctx, other):
        if isinstance(other, types.Boolean) or (isinstance(other, types.Integer)
                                                and other.bitwidth == 8):
            return Conversion.safe             # every int8 / uint8 is a bfloat16
        if isinstance(other, (types.Float, types.Integer)):
            return Conversion.unsafe
        return None

    def unify(self, typingctx, other):
        if isinstance(other, types.Float):
            return other if other.bitwidth >= 32 else types.float32
        if isinstance(other, types.Boolean) or (isinstance(other, types.Integer)
                                                and other.bitwidth == 8):
            return self
        if isinstance(other, types.Integer):
            return types.float64
        return None


bfloat16 = BFloat16()


def is_bfloat16_dtype(dt) -> bool:
    """Whether the NumPy dtype ``dt`` is ml_dtypes' bfloat16 (told without importing it)."""
    return dt.kind == "V" and dt.name == "bfloat16" and dt.itemsize == 2


_registered = False


def register_dtype():
    """Connect ``ml_dtypes.bfloat16`` (once it is imported) with the Numba type: arrays and
    scalars of that dtype are typed ``bfloat16``, and ``bfloat16``'s dtype is it.  Cheap when
    ml_dtypes is not loaded: nobody can hold a bfloat16 array then."""
    global _registered
    if _registered:
        return True
    ml_dtypes = sys.modules.get("ml_dtypes")
    if ml_dtypes is None:
        return False
    import numpy as np
    from numba.np import numpy_support
    numpy_support.FROM_DTYPE[np.dtype(ml_dtypes.bfloat16)] = bfloat16
    _registered = True
    return True


def host_dtype():
    """NumPy's dtype for bfloat16 (imports ml_dtypes)."""
    try:
        import ml_dtypes
    except ImportError:
        raise ImportError("bfloat16 arrays on the host need the ml_dtypes package "
                          "(pip install ml_dtypes)") from None
    register_dtype()
    import numpy as np
    return np.dtype(ml_dtypes.bfloat16)
