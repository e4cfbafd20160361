"""Host implementations of device math: the built-in layer (``math.sin`` -> device ``sin``),
``cuda.libdevice.*`` and the bit / arithmetic intrinsics (``popc``, ``brev``, ``fma``...).

Types follow the device: a call computes in float32 when every argument is float32 (or an
integer that numba-cuda's typing converts to float32: ``devicemath._float_of``), in float64
otherwise, and returns that type; integer intrinsics keep their widths.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from . import hostbf16
from .arrays import cvt_rzi, wrap_int
from .libdevice_host import IMPLS as _LIBDEVICE_HOST

_F16, _F32, _F64 = np.float16, np.float32, np.float64


def _kind(a):
    """The device type class of a scalar: 'f16' | 'bf16' | 'f32' | 'f64' | 'int' | None."""
    if isinstance(a, (bool, np.bool_)):
        return "int"
    if isinstance(a, np.floating):
        return {2: "f16", 4: "f32"}.get(a.dtype.itemsize, "f64")
    if hostbf16.is_bfloat16(a):
        return "bf16"
    if isinstance(a, float):
        return "f64"
    if isinstance(a, (int, np.integer)):
        return "int"
    return None


#: integers that leave a call with a float32 in float32 (devicemath._WITH_FLOAT32 ...)
_WITH_F32 = frozenset(map(np.dtype, (np.bool_, np.int8, np.uint8, np.int16)))
_EXPONENT_WITH_F32 = _WITH_F32 | {np.dtype(np.uint16), np.dtype(np.int32)}


def _int_dtype(a):
    if isinstance(a, (bool, np.bool_)):
        return np.dtype(np.bool_)
    return a.dtype if isinstance(a, np.integer) else np.dtype(np.int64)   # (a Python int)


def float_type(args, what, ufunc=False):
    """The float type a math call computes in (devicemath's rule: ``_float_of``, or
    ``_ufunc_float_of`` for NumPy's functions)."""
    kinds = [_kind(a) for a in args]
    if None in kinds:
        bad = args[kinds.index(None)]
        raise TypeError(f"{what}() in device code needs numbers, got {type(bad).__name__} "
                        f"{bad!r}")
    if kinds and all(k == "f16" for k in kinds):
        return _F16
    if kinds and all(k == "bf16" for k in kinds):
        return hostbf16.bfloat16_type()
    if "f64" in kinds:
        return _F64
    if "f32" in kinds:
        if not ufunc:
            for i, (a, k) in enumerate(zip(args, kinds)):
                held = _EXPONENT_WITH_F32 if (what == "pow" and i == 1) else _WITH_F32
                if k == "int" and _int_dtype(a) not in held:
                    return _F64
        return _F32
    return _F64


def host_pow(x, y):
    """C's pow (libdevice's), always through NumPy's array loop: its scalar power takes sqrt
    for an exponent of 0.5, which gives NaN for -inf (pow: +inf) and -0.0 for -0.0 (pow: +0.0),
    and for float32 it may round differently from the loop (one ulp, depending on the NumPy
    build), so ``x ** y``, ``math.pow`` and ``np.power`` would not agree with one another."""
    return np.power(np.array([x]), np.array([y]))[0]


def _exact_fma(a, b, c):
    """a * b + c rounded once (float64), through exact rationals where all are finite.  An
    infinite ``c`` with a finite product is that infinity (the product never overflows in an
    fma), and an exact result beyond the largest double rounds to an infinity of its sign."""
    if math.isfinite(a) and math.isfinite(b):
        if math.isinf(c):
            return c
        if math.isfinite(c):
            exact = Fraction(a) * Fraction(b) + Fraction(c)
            if exact == 0:
                return a * b + c              # keeps the sign of zero
            try:
                return float(exact)
            except OverflowError:
                return math.inf if exact > 0 else -math.inf
    return a * b + c


def _via_f64(fn):
    """A math-module function applied in float64 and rounded to the argument's type."""
    def impl(*args):
        t = type(args[0])
        return t(fn(*(float(a) for a in args)))
    return impl


def _safe(fn):
    """A math-module function whose domain errors (Python's ValueError) are NaN, as in C."""
    def impl(*args):
        try:
            return fn(*args)
        except ValueError:
            return math.nan
    return impl


def _tgamma(x):
    """C's tgamma (libdevice's): +-inf at +-0 and where the result overflows, NaN at the negative
    integers and -inf; Python's math.gamma raises in each of these cases."""
    try:
        return math.gamma(x)
    except ValueError:                        # a pole: +-0 gives an infinity, the rest NaN
        return math.copysign(math.inf, x) if x == 0 else math.nan
    except OverflowError:                     # too large: the sign of Gamma(x)
        if x > 0:
            return math.inf
        return -math.inf if math.floor(x) % 2 else math.inf


def _lgamma(x):
    """C's lgamma (libdevice's): +inf at the poles (0 and the negative integers) and where the
    result overflows, where Python's math.lgamma raises.  Between 0 and 16 computed to 50
    digits (math.lgamma is ~20 ulps off near its roots 1 and 2, where libdevice's is within 4)."""
    if 0.0 < x < 16.0 and x not in (1.0, 2.0):
        return _lgamma_precise(float(x))
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf


#: B(2k) / (2k (2k - 1)), the coefficients of Stirling's series for lgamma
_STIRLING = [(1, 12), (-1, 360), (1, 1260), (-1, 1680), (1, 1188), (-691, 360360), (1, 156),
             (-3617, 122400), (43867, 244188), (-174611, 125400), (77683, 5796),
             (-236364091, 1506960)]


def _lgamma_precise(x):
    """lgamma(x) for 0 < x < 16, correctly rounded but in rare ties: the argument shifted past
    30 (lgamma(x) = lgamma(x + n) - log(x (x + 1) ... (x + n - 1))), then Stirling's series,
    in 50-digit decimals."""
    import decimal
    from decimal import Decimal
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        d = Decimal(x)
        n = 31 - int(x)
        product = Decimal(1)
        for k in range(n):
            product *= d + k
        z = d + n
        total = (z - Decimal("0.5")) * z.ln() - z + (2 * Decimal(
            "3.14159265358979323846264338327950288419716939937510582097494")).ln() / 2
        power = z
        for num, den in _STIRLING:
            total += Decimal(num) / (Decimal(den) * power)
            power *= z * z
        return float(total - product.ln())


def _ldexp(x, e):
    """ldexp in float64: an overflow is an infinity of x's sign, as in C (Python raises)."""
    try:
        return math.ldexp(float(x), int(e))
    except OverflowError:
        return math.copysign(math.inf, float(x))


def _round_away(x):
    """C's round: half away from zero, exact for every float (adding 0.5 first would round
    0.49999999999999994 up, and large odd values to the next even)."""
    t = np.trunc(x)
    if np.abs(x - t) >= x.dtype.type(0.5):         # x - t is exact
        t = t + np.copysign(x.dtype.type(1), x)
    return t


def _fdim(x, y):
    """C's fdim: x - y where x > y, else +0 (fdim(inf, inf) is +0, not inf - inf); NaN in,
    NaN out."""
    if np.isnan(x) or np.isnan(y):
        return x + y
    return x - y if x > y else x.dtype.type(0)


def _fmax(a, b):
    """The device's max: a NaN operand gives the other one, and +0 is above -0 (measured on the
    H200: fmax(-0.0, 0.0) and fmax(0.0, -0.0) are +0; NumPy keeps the first)."""
    r = np.fmax(a, b)
    if r == 0 and a == 0 and b == 0:
        return r.dtype.type(-0.0 if np.signbit(a) and np.signbit(b) else 0.0)
    return r


def _fmin(a, b):
    """The device's min: a NaN operand gives the other one, and -0 is below +0."""
    r = np.fmin(a, b)
    if r == 0 and a == 0 and b == 0:
        return r.dtype.type(-0.0 if np.signbit(a) or np.signbit(b) else 0.0)
    return r


def _pi_parts(x):
    """x (finite) as 2 * k + n / 2 + f with |f| <= 1/4: (n mod 4, f), exactly."""
    r = np.fmod(x, x.dtype.type(2))                # exact
    n = np.rint(r * x.dtype.type(2))               # exact: r * 2 fits
    f = r - n * x.dtype.type(0.5)                  # exact
    return int(n) % 4, float(f)


def _sinpi(x):
    """sin(pi x) with the argument reduced exactly: 0 at the integers (sin(x * pi) is not, as
    x * pi is rounded), NaN at the infinities."""
    if not np.isfinite(x):
        return x.dtype.type(np.nan)
    n, f = _pi_parts(x)
    v = (math.sin(math.pi * f), math.cos(math.pi * f), -math.sin(math.pi * f),
         -math.cos(math.pi * f))[n]
    if v == 0:
        v = math.copysign(0.0, float(x))           # sinpi(+-n) = +-0 (+-0 keeps its sign)
    return x.dtype.type(v)


def _cospi(x):
    """cos(pi x) with the argument reduced exactly: +0 at the halves, NaN at the infinities."""
    if not np.isfinite(x):
        return x.dtype.type(np.nan)
    n, f = _pi_parts(x)
    v = (math.cos(math.pi * f), -math.sin(math.pi * f), -math.cos(math.pi * f),
         math.sin(math.pi * f))[n]
    return x.dtype.type(0.0 if v == 0 else v)


def _ilogb(x):
    """libdevice's ilogb: INT_MIN for 0 and NaN, INT_MAX for the infinities."""
    x = float(x)
    if x == 0 or x != x:
        return -(1 << 31)
    if math.isinf(x):
        return (1 << 31) - 1
    return math.frexp(x)[1] - 1


#: base name -> implementation over NumPy float scalars of one type (result in that type)
BASE = {
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "atan2": np.arctan2, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "exp": np.exp,
    "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x), "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
    "cbrt": np.cbrt, "rsqrt": lambda x: x.dtype.type(1) / np.sqrt(x), "pow": host_pow,
    "powi": lambda x, n: host_pow(x, x.dtype.type(n)),
    "hypot": np.hypot, "fmod": np.fmod, "copysign": np.copysign, "fabs": np.fabs,
    "abs": np.fabs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
    "nearbyint": np.rint, "round": _round_away, "fmin": _fmin, "fmax": _fmax,
    "fdim": _fdim,
    "remainder": _via_f64(_safe(math.remainder)), "erf": _via_f64(math.erf),
    "erfc": _via_f64(math.erfc), "lgamma": _via_f64(_lgamma),
    "tgamma": _via_f64(_tgamma), "gamma": _via_f64(_tgamma),
    "sinpi": _sinpi, "cospi": _cospi,
    "floor_float": np.floor, "ceil_float": np.ceil, "trunc_float": np.trunc,
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
    "ldexp": lambda x, e: x.dtype.type(_ldexp(x, e)),
    "nextafter": np.nextafter,
    "degrees": lambda x: x * x.dtype.type(180.0 / math.pi),
    "radians": lambda x: x * x.dtype.type(math.pi / 180.0),
}


class HostMath:
    """The host meaning of a device math stub (``devicemath.MathStub``)."""

    def __init__(self, stub):
        self.stub = stub
        self.name = stub.name
        self.__name__ = stub.name
        self.__qualname__ = f"devicemath.{stub.name}"
        self._impl = BASE.get(stub.name)
        if self._impl is None:
            raise NotImplementedError(f"the simulator has no host implementation of device "
                                      f"math function {stub.name!r}")

    def __call__(self, *args):
        stub = self.stub
        if len(args) != stub.nargs:
            raise TypeError(f"{stub.name}() takes {stub.nargs} argument(s), got {len(args)}")
        if stub.name == "abs":
            a = args[0]
            if isinstance(a, (bool, np.bool_)):
                return wrap_int(int(a), np.dtype(np.int64))
            if type(a) is int:
                return wrap_int(abs(a), np.dtype(np.int64))
            if isinstance(a, np.integer):
                return abs(a) if not isinstance(a, np.signedinteger) else \
                    wrap_int(abs(int(a)), a.dtype)
            if isinstance(a, (complex, np.complexfloating)):
                return type(a.real)(abs(a)) if isinstance(a, np.complexfloating) \
                    else _F64(abs(a))
        if stub.name == "pow" and any(isinstance(a, (complex, np.complexfloating))
                                      for a in args):
            # complex power: the device's algorithm (CPython's), in the wider complex type
            from ..compiler.runtime_helpers import complex_pow
            narrow = all(isinstance(a, (np.complex64, np.float32, np.float16)) for a in args)
            r = complex_pow(complex(args[0]), complex(args[1]))
            return np.complex64(r) if narrow else np.complex128(r)
        fty = float_type(args, stub.name, stub.ufunc)
        ctype = _F32 if fty is _F16 or hostbf16.is_bfloat16_type(fty) else fty
        cargs = [ctype(a) for a in args]
        r = self._impl(*cargs)
        if stub.result == "tuple":
            return r
        if stub.name in _NO_HALF_RESULT:
            fty = ctype
        if stub.result == "bool":
            return bool(r)
        if stub.result == "int":            # math.floor(x): cvt.rzi.s64, saturated
            return cvt_rzi(r, np.dtype(np.int64))
        return fty(r)

    def __repr__(self):
        return f"<simulated device math {self.name}>"


# ---------------------------------------------------------------------------------------------
# libdevice

_LL = {"float": _F32, "double": _F64, "i32": np.int32, "i64": np.int64, "i16": np.int16,
       "i8": np.int8}


def _bits(x, width):
    return int(x) & ((1 << width) - 1)


def _popc(x, width):
    return bin(_bits(x, width)).count("1")


def _clz(x, width):
    v = _bits(x, width)
    return width - v.bit_length()


def _ffs(x, width):
    v = _bits(x, width)
    return (v & -v).bit_length()


def _brev(x, width):
    v = _bits(x, width)
    return int(f"{v:0{width}b}"[::-1], 2)


def _u(x, width):
    return _bits(x, width)


def _frexp(x):
    m, e = math.frexp(float(x))
    return type(x)(m), wrap_int(e, np.dtype(np.int32))


def _modf(x):
    f, i = math.modf(float(x))
    return type(x)(f), type(x)(i)


BASE.update(frexp=_frexp, modf=_modf)
#: computed in float32 for float16 arguments, with a float32 result (as compiled)
_NO_HALF_RESULT = frozenset(("frexp", "modf", "ldexp", "degrees", "radians"))


#: libdevice names (without __nv_) with an implementation over arguments already converted to
#: the declared types; results are converted to the declared return type.
_SPECIAL = {
    "popc": lambda x: _popc(x, 32), "popcll": lambda x: _popc(x, 64),
    "clz": lambda x: _clz(x, 32), "clzll": lambda x: _clz(x, 64),
    "ffs": lambda x: _ffs(x, 32), "ffsll": lambda x: _ffs(x, 64),
    "brev": lambda x: _brev(x, 32), "brevll": lambda x: _brev(x, 64),
    "abs": lambda x: abs(int(x)), "llabs": lambda x: abs(int(x)),
    "min": lambda a, b: min(int(a), int(b)), "max": lambda a, b: max(int(a), int(b)),
    "llmin": lambda a, b: min(int(a), int(b)), "llmax": lambda a, b: max(int(a), int(b)),
    "umin": lambda a, b: min(_u(a, 32), _u(b, 32)), "umax": lambda a, b: max(_u(a, 32), _u(b, 32)),
    "ullmin": lambda a, b: min(_u(a, 64), _u(b, 64)),
    "ullmax": lambda a, b: max(_u(a, 64), _u(b, 64)),
    "mulhi": lambda a, b: (int(a) * int(b)) >> 32,
    "umulhi": lambda a, b: (_u(a, 32) * _u(b, 32)) >> 32,
    "mul64hi": lambda a, b: (int(a) * int(b)) >> 64,
    "umul64hi": lambda a, b: (_u(a, 64) * _u(b, 64)) >> 64,
    "isnanf": lambda x: int(math.isnan(x)), "isnand": lambda x: int(math.isnan(x)),
    "isinff": lambda x: int(math.isinf(x)), "isinfd": lambda x: int(math.isinf(x)),
    "finitef": lambda x: int(math.isfinite(x)), "isfinited": lambda x: int(math.isfinite(x)),
    "signbitf": lambda x: int(math.copysign(1.0, x) < 0),
    "signbitd": lambda x: int(math.copysign(1.0, x) < 0),
    "fmaf": lambda a, b, c: _F32(_F64(a) * _F64(b) + _F64(c)),
    "fma": lambda a, b, c: _exact_fma(float(a), float(b), float(c)),
    "fdividef": lambda a, b: np.divide(a, b), "fast_fdividef": lambda a, b: np.divide(a, b),
    "saturatef": lambda x: min(max(x, _F32(0)), _F32(1)) + _F32(0) if x == x else _F32(0),
    "float_as_int": lambda x: np.frombuffer(_F32(x).tobytes(), np.int32)[0],
    "int_as_float": lambda x: np.frombuffer(np.int32(x).tobytes(), _F32)[0],
    "double_as_longlong": lambda x: np.frombuffer(_F64(x).tobytes(), np.int64)[0],
    "longlong_as_double": lambda x: np.frombuffer(np.int64(x).tobytes(), _F64)[0],
    "sincosf": lambda x: (np.sin(x), np.cos(x)), "sincos": lambda x: (np.sin(x), np.cos(x)),
    "fast_sincosf": lambda x: (np.sin(x), np.cos(x)),
    "sincospif": lambda x: (_sinpi(x), _cospi(x)), "sincospi": lambda x: (_sinpi(x), _cospi(x)),
    "frexpf": _frexp, "frexp": _frexp, "modff": _modf, "modf": _modf,
    "ldexpf": lambda x, e: _F32(_ldexp(x, e)), "ldexp": lambda x, e: _F64(_ldexp(x, e)),
    "ilogbf": _ilogb, "ilogb": _ilogb,
}


def _libdevice_impl(name):
    """(implementation, return converter or None) for ``__nv_<name>``, or None if unknown."""
    if name in _SPECIAL:
        return _SPECIAL[name]
    base = name
    if base.startswith("fast_"):
        base = base[5:]
    for candidate in (base, base[:-1] if base.endswith("f") else None):
        if candidate and candidate in BASE:
            return BASE[candidate]
    return _LIBDEVICE_HOST.get(name)            # rounding modes, conversions, special functions


class HostLibdevice:
    """The host meaning of ``libdevice.<name>``: arguments converted to libdevice's declared
    types, computed, converted back."""

    def __init__(self, stub):
        self.name = stub.__name__
        self.__name__ = stub.__name__
        self.__qualname__ = f"libdevice.{stub.__name__}"
        self.ret = stub.llvm_ret
        self.args = [a for a in stub.llvm_args if a != "ptr"]
        self.outs = len(stub.llvm_args) - len(self.args)
        self._impl = _libdevice_impl(self.name)

    def __call__(self, *args):
        if self._impl is None:
            raise NotImplementedError(
                f"cuda.libdevice.{self.name} (__nv_{self.name}) has no host implementation in "
                f"the simulator; run this kernel on a GPU, or override "
                f"libdevice.{self.name} in a Context with a Python version")
        if len(args) != len(self.args):
            raise TypeError(f"libdevice.{self.name}() takes {len(self.args)} argument(s), "
                            f"got {len(args)}")
        cargs = []
        for a, t in zip(args, self.args):
            ty = _LL[t]
            cargs.append(wrap_int(a, np.dtype(ty)) if np.dtype(ty).kind == "i"
                         else ty(a))
        r = self._impl(*cargs)
        if self.outs:
            return tuple(r) if isinstance(r, tuple) else r
        ty = _LL.get(self.ret)
        if ty is None:
            return None
        if np.dtype(ty).kind == "i":
            return wrap_int(r, np.dtype(ty))
        return ty(r)

    def __repr__(self):
        return f"<simulated libdevice.{self.name}>"


# ---------------------------------------------------------------------------------------------
# cuda.popc / brev / clz / ffs / fma / cbrt / selp / fp16

def _width(x):
    if isinstance(x, (bool, np.bool_)):
        return 8, False
    if isinstance(x, np.integer):
        return x.dtype.itemsize * 8, x.dtype.kind == "i"
    if isinstance(x, int):
        return 64, True
    raise TypeError(f"needs an integer argument, got {type(x).__name__} {x!r}")


def _int_result(value, width, signed):
    return wrap_int(value, np.dtype(f"{'i' if signed else 'u'}{width // 8}"))


def popc(x):
    w, s = _width(x)
    return _int_result(_popc(x, w), w, s)


def clz(x):
    w, s = _width(x)
    return _int_result(_clz(x, w), w, s)


def brev(x):
    w, _ = _width(x)
    w = 64 if w == 64 else 32
    return _int_result(_brev(x, w), w, False)


def ffs(x):
    w, _ = _width(x)
    return wrap_int(_ffs(x, w), np.dtype(np.uint32))


def fma(a, b, c):
    fty = float_type((a, b, c), "cuda.fma")
    if fty is _F64:
        return _F64(_exact_fma(float(a), float(b), float(c)))
    return fty(_F64(a) * _F64(b) + _F64(c))      # exact product of float32s, one rounding to f32


def cbrt(x):
    fty = float_type((x,), "cuda.cbrt")
    return fty(np.cbrt(fty(x)))


def selp(pred, a, b):
    return a if pred else b


def _half_args(name, args):
    """The arguments of cuda.fp16.<name> as float16 values held in float32 (exact): other
    numbers are rounded to float16 first, as the device's call converts them; anything else is
    an error, as on the device."""
    out = []
    for a in args:
        if not isinstance(a, (_F16, int, float, bool, np.integer, np.floating, np.bool_)):
            raise TypeError(f"cuda.fp16.{name}() needs float16 (or real number) arguments, got "
                            f"{type(a).__name__} {a!r}")
        out.append(_F32(a if isinstance(a, _F16) else _F16(a)))
    return out


def _f32(fn):
    """A float32 function of the device (libdevice, sqrt.rn, div.rn): computed in float64 and
    rounded once to float32, as a correctly rounded float32 function would give it."""
    return lambda *args: _F32(fn(*(_F64(a) for a in args)))


def _nan_ignoring(pick):
    """fmax / fmin as the device's max.f16 / min.f16: a NaN operand gives the other one -- also a
    signalling NaN, which C's fmaxf would turn into a NaN."""
    return lambda a, b: b if np.isnan(a) else a if np.isnan(b) else pick(a, b)


# name -> function of float32 operands (exact widenings of the float16 arguments); the result is
# rounded to float16, as the device rounds its float32 result (bits.py says which is which).
_FP16_MATH = {
    "hadd": lambda a, b: a + b, "hsub": lambda a, b: a - b,
    "hmul": lambda a, b: a * b, "hdiv": lambda a, b: a / b,
    "hmax": _nan_ignoring(np.fmax), "hmin": _nan_ignoring(np.fmin),
    "hneg": lambda a: -a, "habs": abs,
    "hfma": lambda a, b, c: _F64(a) * _F64(b) + _F64(c),      # exact product, one rounding
    "hceil": np.ceil, "hfloor": np.floor, "htrunc": np.trunc, "hrint": np.rint,
    "hsqrt": _f32(np.sqrt), "hrsqrt": lambda a: _F32(1) / _f32(np.sqrt)(a),
    "hrcp": lambda a: _F32(1) / a,
    "hsin": _f32(np.sin), "hcos": _f32(np.cos), "hlog": _f32(np.log),
    "hlog2": _f32(np.log2), "hlog10": _f32(np.log10), "hexp": _f32(np.exp),
    "hexp2": _f32(np.exp2), "hexp10": _f32(lambda a: np.power(_F64(10), a)),
}
# Ordered comparisons (the device's setp.<op>.f16): False when either operand is NaN, hne too.
_FP16_CMP = {
    "heq": lambda a, b: a == b, "hne": lambda a, b: a < b or a > b,
    "hge": lambda a, b: a >= b, "hgt": lambda a, b: a > b,
    "hle": lambda a, b: a <= b, "hlt": lambda a, b: a < b,
}


def _half(name, fn):
    def impl(*args):
        return _F16(fn(*_half_args(name, args)))
    return impl


def _half_cmp(name, fn):
    def impl(a, b):
        return bool(fn(*_half_args(name, (a, b))))
    return impl


FP16 = {**{name: _half(name, fn) for name, fn in _FP16_MATH.items()},
        **{name: _half_cmp(name, fn) for name, fn in _FP16_CMP.items()}}
