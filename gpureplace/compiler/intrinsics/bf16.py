"""bfloat16 in device code: its arithmetic, and ``cuda.bf16`` (numba-cuda's ``numba.cuda.bf16``).

The type itself is ``compiler/bfloat16.py``.  Here:

* **Operators**: bfloat16 op bfloat16 stays bfloat16 (``+ - * /``, the comparisons, unary
  ``- +``, the augmented assignments); Numba's own lowering of float operations is generic over
  the LLVM type, so ``fadd bfloat`` reaches NVPTX, which selects ``add.rn.bf16`` (sm_90) or
  ``fma.rn.bf16`` (sm_80).  Like float16 (and CUDA C's ``__nv_bfloat16`` operators), bfloat16
  operations are never contracted into an FMA: each keeps its rounding.  Conversions to and from
  float16 go through float32 (exact, then one rounding); ``float(x)`` stays a bfloat16 and
  ``int(x)`` truncates, as for float16.
* **cuda.bf16**: numba-cuda's names (CUDA C's without the underscores, and the NumPy-style
  aliases ``float32_to_bfloat16_rz``, ``bfloat16_to_int16_rn`` ...), each taking bfloat16
  arguments (other real numbers are converted at the call, rounding to nearest even).

  - ``hadd``/``hsub``/``hmul`` and their ``_rn`` forms are the same operation here (none is
    contracted); ``hdiv`` is the correctly rounded quotient (float32 ``div.rn``, rounded once);
    ``*_sat`` clamp the result to [0, 1] (a NaN to 0), ``hfma_relu`` gives 0 for a negative
    result; ``hmax``/``hmin`` ignore a NaN operand, ``hmax_nan``/``hmin_nan`` return it.
  - Comparisons ``heq`` ... ``hlt`` are ordered (False with a NaN, ``hne`` too), ``hequ`` ...
    ``hltu`` unordered (True with a NaN); ``hisnan`` is a bool, ``hisinf`` an int32 (1 for +inf,
    -1 for -inf, else 0, as CUDA C's ``__hisinf``).
  - Conversions with a rounding mode are exact to it: ``_rn`` to nearest even, ``_rz`` toward
    zero, ``_rd`` down, ``_ru`` up.  From an integer: the integer rounded to float32 in that
    mode, then to bfloat16 in that mode (two roundings in one direction are one rounding).  To an
    integer: the value rounded to an integral one in that mode, then saturated to the integer's
    range (NaN gives 0), as PTX's ``cvt`` does.
  - ``htrunc`` ... ``hrint`` round to an integral bfloat16; ``hsqrt``, ``hrsqrt``, ``hrcp`` and
    the transcendental functions compute in float32 and round once (``hsqrt`` and ``hrcp`` are
    then correctly rounded); ``htanh_approx`` is the hardware's ``tanh.approx.f32`` (sm_75 on).
"""

from __future__ import annotations

import builtins
import operator

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.asnumbatype import as_numba_type
from numba.core.typing.templates import AbstractTemplate, Registry, signature

from ..bfloat16 import BFloat16, BFloatType, bfloat16
from .requirements import arch_at_least, ptx_at_least
from .stubs import Namespace, NamespaceType, register_table

__all__ = ["bf16"]

typing = Registry()
lowering = LoweringRegistry()

_BF, _F32 = BFloatType(), ir.FloatType()
_I = {8: ir.IntType(8), 16: ir.IntType(16), 32: ir.IntType(32), 64: ir.IntType(64)}


def _is_bf16(ty):
    return isinstance(types.unliteral(ty), BFloat16)


def _exact_in_bf16(ty):
    """bfloat16, or a type every value of which is a bfloat16 (bool, int8, uint8)."""
    ty = types.unliteral(ty)
    return isinstance(ty, (BFloat16, types.Boolean)) or (isinstance(ty, types.Integer)
                                                         and ty.bitwidth == 8)


# ---------------------------------------------------------------------------------------------
# Operators on bfloat16 values

def _op_template(op, result):
    class _BFloat16Op(AbstractTemplate):
        key = op

        def generic(self, args, kws):
            if not kws and any(_is_bf16(a) for a in args) and all(map(_exact_in_bf16, args)):
                return signature(result or bfloat16, *([bfloat16] * len(args)))
            return None

    _BFloat16Op.__name__ = f"BFloat16_{getattr(op, '__name__', op)}"
    return _BFloat16Op


for _op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.iadd,
            operator.isub, operator.imul, operator.itruediv, operator.neg, operator.pos,
            builtins.float):
    typing.register_global(_op, types.Function(_op_template(_op, None)))
for _op in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge):
    typing.register_global(_op, types.Function(_op_template(_op, types.boolean)))
typing.register_global(builtins.int, types.Function(_op_template(builtins.int, types.int64)))


# isinstance(x, bfloat16): Numba's isinstance asks as_numba_type what the class means
as_numba_type.register(bfloat16, bfloat16)


@lowering.lower(builtins.float, bfloat16)
def _float_of(context, builder, sig, args):
    return args[0]


@lowering.lower(builtins.int, bfloat16)
def _int_of(context, builder, sig, args):
    return builder.fptosi(args[0], _I[64])


def _div(context, builder, sig, args):
    # IEEE division (x / 0 -> inf or NaN); Numba's generic float division tests for zero first
    # with a helper that only knows float and double.
    return builder.fdiv(*args)


for _op in (operator.truediv, operator.itruediv):
    lowering.lower(_op, bfloat16, bfloat16)(_div)


@lowering.lower_cast(bfloat16, types.float16)
def _to_half(context, builder, fromty, toty, val):
    return builder.fptrunc(builder.fpext(val, _F32), ir.HalfType())


@lowering.lower_cast(types.float16, bfloat16)
def _from_half(context, builder, fromty, toty, val):
    return builder.fptrunc(builder.fpext(val, _F32), _BF)


# ---------------------------------------------------------------------------------------------
# LLVM helpers

def _llvm(builder, name, ret, *args):
    fn = cgutils.get_or_insert_function(builder.module,
                                        ir.FunctionType(ret, [a.type for a in args]), name)
    return builder.call(fn, args)


def _unary(name):
    return lambda b, x: _llvm(b, f"{name}.bf16", _BF, x)


def _binary(name):
    return lambda b, x, y: _llvm(b, f"{name}.bf16", _BF, x, y)


def _clamp01(builder, x):
    # maxnum(NaN, 0) is 0: a NaN saturates to 0
    zero, one = ir.Constant(_BF, 0.0), ir.Constant(_BF, 1.0)
    return _llvm(builder, "llvm.minnum.bf16", _BF, _llvm(builder, "llvm.maxnum.bf16", _BF, x, zero),
                 one)


def _saturated(lower):
    return lambda b, *args: _clamp01(b, lower(b, *args))


def _fma(b, x, y, z):
    return _llvm(b, "llvm.fma.bf16", _BF, x, y, z)


def _fma_relu(b, x, y, z):
    r = _fma(b, x, y, z)
    return b.select(b.fcmp_ordered("<", r, ir.Constant(_BF, 0.0)), ir.Constant(_BF, 0.0), r)


def _hisinf(b, x):
    i32 = _I[32]
    pos = b.fcmp_ordered("==", x, ir.Constant(_BF, float("inf")))
    neg = b.fcmp_ordered("==", x, ir.Constant(_BF, float("-inf")))
    return b.select(pos, i32(1), b.select(neg, i32(-1), i32(0)))


def _in_float32(compute):
    """compute(builder, x) on x widened to float32 (exact), rounded once back to bfloat16."""
    return lambda b, x: b.fptrunc(compute(b, b.fpext(x, _F32)), _BF)


def _sqrt32(b, x):            # llvm.sqrt is IEEE sqrt.rn on NVPTX
    return _llvm(b, "llvm.sqrt.f32", _F32, x)


def _libdevice32(symbol):
    return _in_float32(lambda b, x: _llvm(b, symbol, _F32, x))


def _tanh_approx(b, x):
    if arch_at_least(75) and ptx_at_least(70):
        return b.asm(ir.FunctionType(_F32, [_F32]), "tanh.approx.f32 $0, $1;", "=f,f", [x],
                     side_effect=False)
    return _llvm(b, "__nv_tanhf", _F32, x)


# Rounding modes: _rn to nearest even, _rz toward zero, _rd down, _ru up.
_ROUND_TO_INTEGRAL = {"rn": "llvm.roundeven.f32", "rz": "llvm.trunc.f32",
                      "rd": "llvm.floor.f32", "ru": "llvm.ceil.f32"}
_NVVM_MODE = {"rn": "rn", "rz": "rz", "rd": "rm", "ru": "rp"}


def _f32_to_bf16(mode):
    """float32 -> bfloat16 rounded in ``mode``: LLVM's fptrunc for "rn" (cvt.rn.bf16.f32);
    the directed modes on the bits (a bfloat16 is a float32's upper half): truncate, and step
    one unit away from zero when the lower half is not zero and the direction asks."""
    def lower(b, x):
        if mode == "rn":
            return b.fptrunc(x, _BF)
        i32, i16 = _I[32], _I[16]
        bits = b.bitcast(x, i32)
        t = b.trunc(b.lshr(bits, i32(16)), i16)
        inexact = b.icmp_unsigned("!=", b.and_(bits, i32(0xFFFF)), i32(0))
        negative = b.icmp_signed("<", bits, i32(0))
        if mode == "ru":
            t = b.add(t, b.zext(b.and_(inexact, b.not_(negative)), i16))
        elif mode == "rd":
            t = b.add(t, b.zext(b.and_(inexact, negative), i16))
        quiet = b.or_(b.trunc(b.lshr(bits, i32(16)), i16), i16(0x40))
        t = b.select(b.fcmp_unordered("uno", x, x), quiet, t)
        return b.bitcast(t, _BF)
    return lower


def _int_to_bf16(bits, signed, mode):
    """An integer -> bfloat16 in ``mode``: 16-bit integers are exact in float32; wider ones are
    rounded to float32 in the same mode first (PTX's cvt.<mode>.f32.<int>)."""
    to_bf16 = _f32_to_bf16(mode)

    def lower(b, x):
        if mode == "rn":
            return b.sitofp(x, _BF) if signed else b.uitofp(x, _BF)
        if bits <= 16:
            f = b.sitofp(x, _F32) if signed else b.uitofp(x, _F32)
        else:
            name = {32: "i2f", 64: "ll2f"}[bits]
            name = name if signed else "u" + name
            f = _llvm(b, f"llvm.nvvm.{name}.{_NVVM_MODE[mode]}", _F32, x)
        return to_bf16(b, f)
    return lower


def _bf16_to_int(bits, signed, mode):
    """bfloat16 -> an integer: rounded to an integral value in ``mode`` (exact in float32),
    then converted with saturation (NaN gives 0), as PTX's cvt.<mode>i.<int>.bf16."""
    def lower(b, x):
        f = _llvm(b, _ROUND_TO_INTEGRAL[mode], _F32, b.fpext(x, _F32))
        name = f"llvm.fpto{'s' if signed else 'u'}i.sat.i{bits}.f32"
        return _llvm(b, name, _I[bits], f)
    return lower


# ---------------------------------------------------------------------------------------------
# cuda.bf16

_B, _BOOL, _I32 = bfloat16, types.boolean, types.int32
_INTS = {"char": (types.int8, 8, True), "uchar": (types.uint8, 8, False),
         "short": (types.int16, 16, True), "ushort": (types.uint16, 16, False),
         "int": (types.int32, 32, True), "uint": (types.uint32, 32, False),
         "ll": (types.int64, 64, True), "ull": (types.uint64, 64, False)}

#: name -> (argument types, result type, lowering(builder, *args), doc)
_FUNCS = {}


def _def(name, argtypes, result, lower, doc):
    _FUNCS[name] = (tuple(argtypes), result, lower, doc)


for _n, _m, _w in (("hadd", "fadd", "a + b"), ("hsub", "fsub", "a - b"),
                   ("hmul", "fmul", "a * b")):
    _lower = (lambda m: lambda b, x, y: getattr(b, m)(x, y))(_m)
    _def(_n, (_B, _B), _B, _lower, f"{_n}(a, b): {_w} in bfloat16")
    _def(f"{_n}_rn", (_B, _B), _B, _lower, f"{_n}_rn(a, b): {_w} in bfloat16, never contracted")
    _def(f"{_n}_sat", (_B, _B), _B, _saturated(_lower),
         f"{_n}_sat(a, b): {_w} in bfloat16, clamped to [0, 1] (NaN to 0)")
_def("hdiv", (_B, _B), _B, lambda b, x, y: b.fdiv(x, y), "hdiv(a, b): a / b in bfloat16")
_def("hneg", (_B,), _B, lambda b, x: b.fneg(x), "hneg(a): -a")
_def("habs", (_B,), _B, _unary("llvm.fabs"), "habs(a): |a|")
_def("hfma", (_B, _B, _B), _B, _fma, "hfma(a, b, c): a * b + c rounded once")
_def("hfma_sat", (_B, _B, _B), _B, _saturated(_fma),
     "hfma_sat(a, b, c): a * b + c rounded once, clamped to [0, 1] (NaN to 0)")
_def("hfma_relu", (_B, _B, _B), _B, _fma_relu,
     "hfma_relu(a, b, c): a * b + c rounded once, 0 where negative")
_def("hmax", (_B, _B), _B, _binary("llvm.maxnum"), "hmax(a, b): the larger (ignores a NaN)")
_def("hmin", (_B, _B), _B, _binary("llvm.minnum"), "hmin(a, b): the smaller (ignores a NaN)")
_def("hmax_nan", (_B, _B), _B, _binary("llvm.maximum"), "hmax_nan(a, b): the larger, NaN if "
     "either is NaN")
_def("hmin_nan", (_B, _B), _B, _binary("llvm.minimum"), "hmin_nan(a, b): the smaller, NaN if "
     "either is NaN")
for _n, _op in (("heq", "=="), ("hne", "!="), ("hge", ">="), ("hgt", ">"), ("hle", "<="),
                ("hlt", "<")):
    _def(_n, (_B, _B), _BOOL, (lambda op: lambda b, x, y: b.fcmp_ordered(op, x, y))(_op),
         f"{_n}(a, b): a {_op} b (False if either is NaN)")
    _def(f"{_n}u", (_B, _B), _BOOL, (lambda op: lambda b, x, y: b.fcmp_unordered(op, x, y))(_op),
         f"{_n}u(a, b): a {_op} b, or either is NaN")
_def("hisnan", (_B,), _BOOL, lambda b, x: b.fcmp_unordered("uno", x, x), "hisnan(a): a is NaN")
_def("hisinf", (_B,), _I32, _hisinf, "hisinf(a): 1 for +inf, -1 for -inf, else 0 (int32)")

for _n in ("trunc", "ceil", "floor", "rint"):
    _def(f"h{_n}", (_B,), _B, _unary(f"llvm.{_n}"), f"h{_n}(a): a rounded to an integral value")
_def("hsqrt", (_B,), _B, _in_float32(_sqrt32), "hsqrt(a): square root of a")
_def("hrsqrt", (_B,), _B, _in_float32(lambda b, x: b.fdiv(ir.Constant(_F32, 1.0), _sqrt32(b, x))),
     "hrsqrt(a): 1 / sqrt(a)")
_def("hrcp", (_B,), _B, _in_float32(lambda b, x: b.fdiv(ir.Constant(_F32, 1.0), x)),
     "hrcp(a): 1 / a")
for _n in ("sin", "cos", "tanh", "log", "log2", "log10", "exp", "exp2", "exp10"):
    _def(f"h{_n}", (_B,), _B, _libdevice32(f"__nv_{_n}f"),
         f"h{_n}(a): {_n} of a (float32, rounded once to bfloat16)")
_def("htanh_approx", (_B,), _B, _in_float32(_tanh_approx),
     "htanh_approx(a): the hardware's approximate tanh (tanh.approx.f32), rounded to bfloat16")

# conversions
_def("bfloat162float", (_B,), types.float32, lambda b, x: b.fpext(x, _F32),
     "bfloat162float(a): a as a float32 (exact)")
_def("float2bfloat16", (types.float32,), _B, _f32_to_bf16("rn"),
     "float2bfloat16(x): a float32 rounded to nearest even")
_def("double2bfloat16", (types.float64,), _B, lambda b, x: b.fptrunc(x, _BF),
     "double2bfloat16(x): a float64 rounded once to nearest even")
for _mode in ("rn", "rz", "rd", "ru"):
    _def(f"float2bfloat16_{_mode}", (types.float32,), _B, _f32_to_bf16(_mode),
         f"float2bfloat16_{_mode}(x): a float32 rounded ({_mode})")
for _cname, (_ity, _bits, _signed) in _INTS.items():
    _modes = ("rz",) if _bits == 8 else ("rn", "rz", "rd", "ru")
    for _mode in _modes:
        _def(f"bfloat162{_cname}_{_mode}", (_B,), _ity, _bf16_to_int(_bits, _signed, _mode),
             f"bfloat162{_cname}_{_mode}(a): a rounded ({_mode}) to {_ity}, saturated")
        if _bits > 8:
            _def(f"{_cname}2bfloat16_{_mode}", (_ity,), _B, _int_to_bf16(_bits, _signed, _mode),
                 f"{_cname}2bfloat16_{_mode}(i): an {_ity} rounded ({_mode}) to bfloat16")
for _cname, _ity in (("short", types.int16), ("ushort", types.uint16)):
    _def(f"bfloat16_as_{_cname}", (_B,), _ity, lambda b, x: b.bitcast(x, _I[16]),
         f"bfloat16_as_{_cname}(a): the bits of a as an {_ity}")
    _def(f"{_cname}_as_bfloat16", (_ity,), _B, lambda b, x: b.bitcast(x, _BF),
         f"{_cname}_as_bfloat16(i): the bfloat16 whose bits are i")

#: numba-cuda's NumPy-style names -> the CUDA C-style name above
ALIASES = {"float32_to_bfloat16": "float2bfloat16", "float64_to_bfloat16": "double2bfloat16",
           "bfloat16_to_float32": "bfloat162float",
           "bfloat16_to_int8_rz": "bfloat162char_rz", "bfloat16_to_uint8_rz": "bfloat162uchar_rz",
           "bfloat16_as_int16": "bfloat16_as_short", "bfloat16_as_uint16": "bfloat16_as_ushort",
           "int16_as_bfloat16": "short_as_bfloat16", "uint16_as_bfloat16": "ushort_as_bfloat16"}
for _mode in ("rn", "rz", "rd", "ru"):
    ALIASES[f"float32_to_bfloat16_{_mode}"] = f"float2bfloat16_{_mode}"
    for _cname, (_ity, _bits, _signed) in _INTS.items():
        if _bits > 8:
            ALIASES[f"{_ity}_to_bfloat16_{_mode}"] = f"{_cname}2bfloat16_{_mode}"
            ALIASES[f"bfloat16_to_{_ity}_{_mode}"] = f"bfloat162{_cname}_{_mode}"

#: name -> stub; name -> (argument types, result type)
STUBS, SIGNATURES = register_table("bf16", _FUNCS, typing, lowering)

#: ``cuda.bf16`` (also importable as the module ``gpureplace.cuda.bf16``): the type, numba-cuda's
#: C-style names and its NumPy-style aliases
bf16 = Namespace("bf16", bfloat16=bfloat16, nv_bfloat16=bfloat16, **STUBS,
                 **{alias: STUBS[name] for alias, name in ALIASES.items()})
typing.register_global(bf16, NamespaceType(bf16))
