"""Bit manipulation and arithmetic intrinsics: ``cuda.popc``, ``brev``, ``clz``, ``ffs``, ``fma``,
``cbrt``, ``selp``, and the half-precision helpers of ``cuda.fp16``.

Signatures follow numba-cuda: ``popc`` and ``clz`` return the argument's type, ``brev`` works on
uint32/uint64 (narrower integers are widened to uint32, 64-bit ones are uint64), ``ffs`` returns
a uint32 1-based position (0 for 0, as CUDA's ``__ffs``), ``fma`` / ``cbrt`` are float32 or
float64.  LLVM's own intrinsics (ctpop, ctlz, cttz, bitreverse, fma) are selected by NVPTX as
``popc``, ``clz``, ``brev``, ``fma.rn``; ``cbrt`` is libdevice's.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import AbstractTemplate, AttributeTemplate, Registry, signature

from .stubs import IntrinsicArgumentError, Namespace, NamespaceType, Stub

__all__ = ["popc", "brev", "clz", "ffs", "fma", "cbrt", "selp", "fp16"]

typing = Registry()
lowering = LoweringRegistry()

popc = Stub("popc", "popc(x): number of set bits of the integer x (same type as x)")
brev = Stub("brev", "brev(x): bits of x in reverse order (uint32 or uint64)")
clz = Stub("clz", "clz(x): number of leading zero bits of the integer x (same type as x)")
ffs = Stub("ffs", "ffs(x): 1-based position of the least significant set bit of x, 0 if x == 0 "
                  "(uint32)")
fma = Stub("fma", "fma(a, b, c): a * b + c rounded once (float32 or float64)")
cbrt = Stub("cbrt", "cbrt(x): cube root (float32 or float64)")
selp = Stub("selp", "selp(pred, a, b): a if pred else b, without a branch")


def _fail(fname, msg):
    raise IntrinsicArgumentError(f"cuda.{fname}(): {msg}")


def _one_arg(fname, args, kws, what):
    if kws or len(args) != 1:
        _fail(fname, f"takes 1 argument ({what}), got {len(args) + len(kws)}")
    return types.unliteral(args[0])


def _int_arg(fname, args, kws):
    x = _one_arg(fname, args, kws, "an integer")
    if isinstance(x, types.Boolean) or not isinstance(x, types.Integer):
        _fail(fname, f"needs an integer argument, got {x}")
    return x


def _float_of(fname, args):
    """float32 when every argument is float32 (or an integer), else float64 -- as math.* does."""
    for a in args:
        if isinstance(a, types.Boolean) or not isinstance(a, (types.Integer, types.Float)):
            _fail(fname, f"needs float arguments, got {a}")
    if any(types.unliteral(a) == types.float64 for a in args):
        return types.float64
    if any(types.unliteral(a) in (types.float32, types.float16) for a in args):
        return types.float32
    return types.float64


class _PopcTemplate(AbstractTemplate):
    key = popc

    def generic(self, args, kws):
        x = _int_arg("popc", args, kws)
        return signature(x, x)


class _ClzTemplate(AbstractTemplate):
    key = clz

    def generic(self, args, kws):
        x = _int_arg("clz", args, kws)
        return signature(x, x)


class _BrevTemplate(AbstractTemplate):
    key = brev

    def generic(self, args, kws):
        x = _int_arg("brev", args, kws)
        ty = types.uint64 if x.bitwidth == 64 else types.uint32
        return signature(ty, ty)


class _FfsTemplate(AbstractTemplate):
    key = ffs

    def generic(self, args, kws):
        x = _int_arg("ffs", args, kws)
        return signature(types.uint32, x)


class _FmaTemplate(AbstractTemplate):
    key = fma

    def generic(self, args, kws):
        if kws or len(args) != 3:
            _fail("fma", f"takes 3 arguments (a, b, c), got {len(args) + len(kws)}")
        fty = _float_of("fma", args)
        return signature(fty, fty, fty, fty)


class _CbrtTemplate(AbstractTemplate):
    key = cbrt

    def generic(self, args, kws):
        x = _one_arg("cbrt", args, kws, "a float")
        fty = _float_of("cbrt", [x])
        return signature(fty, fty)


class _SelpTemplate(AbstractTemplate):
    key = selp

    def generic(self, args, kws):
        if kws or len(args) != 3:
            _fail("selp", f"takes 3 arguments (pred, a, b), got {len(args) + len(kws)}")
        pred, a, b = (types.unliteral(t) for t in args)
        if not isinstance(pred, (types.Boolean, types.Integer, types.Float)):
            _fail("selp", f"the predicate must be a boolean or a number, got {pred}")
        for t in (a, b):
            if not isinstance(t, (types.Integer, types.Float, types.Boolean)):
                _fail("selp", f"a and b must be numbers, got {t}")
        ty = a if a == b else self.context.unify_types(a, b)
        if ty is None or not isinstance(ty, (types.Integer, types.Float, types.Boolean)):
            _fail("selp", f"a and b have no common type ({a}, {b})")
        return signature(ty, types.boolean, ty, ty)


for _stub, _tmpl in ((popc, _PopcTemplate), (clz, _ClzTemplate), (brev, _BrevTemplate),
                     (ffs, _FfsTemplate), (fma, _FmaTemplate), (cbrt, _CbrtTemplate),
                     (selp, _SelpTemplate)):
    typing.register_global(_stub, types.Function(_tmpl))


@lowering.lower(popc, types.Integer)
def _lower_popc(context, builder, sig, args):
    return builder.ctpop(args[0])


@lowering.lower(clz, types.Integer)
def _lower_clz(context, builder, sig, args):
    return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))     # clz(0) == bit width


@lowering.lower(brev, types.Integer)
def _lower_brev(context, builder, sig, args):
    return builder.bitreverse(args[0])


@lowering.lower(ffs, types.Integer)
def _lower_ffs(context, builder, sig, args):
    x = args[0]
    tz = builder.cttz(x, ir.Constant(ir.IntType(1), 1))      # poison for 0: selected away below
    pos = builder.add(tz, ir.Constant(x.type, 1))
    i32 = ir.IntType(32)
    if x.type.width > 32:
        pos = builder.trunc(pos, i32)
    elif x.type.width < 32:
        pos = builder.zext(pos, i32)
    is_zero = builder.icmp_unsigned("==", x, ir.Constant(x.type, 0))
    return builder.select(is_zero, ir.Constant(ir.IntType(32), 0), pos)


@lowering.lower(fma, types.Float, types.Float, types.Float)
def _lower_fma(context, builder, sig, args):
    return builder.fma(*args)


@lowering.lower(cbrt, types.Float)
def _lower_cbrt(context, builder, sig, args):
    lty = args[0].type
    name = "__nv_cbrtf" if sig.args[0] == types.float32 else "__nv_cbrt"
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(lty, [lty]), name)
    return builder.call(fn, args)


@lowering.lower(selp, types.boolean, types.Any, types.Any)
def _lower_selp(context, builder, sig, args):
    pred, a, b = args
    return builder.select(pred, a, b)


# ---------------------------------------------------------------------------------------------
# cuda.fp16: numba-cuda's half-precision helpers.  Every one takes float16 arguments only.
#
# * Arithmetic, hmax/hmin, rounding to an integral value and the comparisons are LLVM ``half``
#   operations: NVPTX selects the .f16 forms (add.rn.f16, max.f16, cvt.rpi.f16.f16,
#   setp.lt.f16...).  The comparisons are ordered, as numba-cuda's ``setp.<op>.f16``: with a NaN
#   operand all six are False, ``hne`` included.
# * The square roots, the reciprocal and the transcendental functions compute in float32 and round
#   once back to half (cvt.f32.f16 ... cvt.rn.f16.f32).  numba-cuda links cuda_fp16.h for these,
#   whose float32 ``.approx`` instructions plus fix-ups for the inputs they would misround aim at
#   the correctly rounded half result.  Here hsqrt, hrcp and hrsqrt use IEEE float32 sqrt.rn and
#   div.rn (a float32 square root or quotient of halves rounded to half *is* the correctly
#   rounded half result); hsin ... hexp10 use libdevice's float32 functions (within 2 ulp of
#   float32 over the whole range), which rounded to half give the correctly rounded result except
#   within ~2^-22 (relative) of a rounding midpoint: numba-cuda's results, and NumPy's float16
#   ufuncs', within half-precision rounding.  (Measured on an H200 over all 65536 halves: at most
#   4 results per function differ from numba-cuda's, each by 1 ulp; hsqrt, hrsqrt, hrcp, the
#   rounding functions and the comparisons are identical.)  No ``.approx.f16`` instruction (sm_75+
#   only) is used, so the PTX is the same for every architecture.

_HALF, _FLOAT = ir.HalfType(), ir.FloatType()


def _on_half(method):
    """An IRBuilder operation on the half operands (fadd, fneg, fma...)."""
    return lambda builder, args: getattr(builder, method)(*args)


def _half_intrinsic(name):
    """LLVM's ``name.f16`` intrinsic (llvm.fabs, llvm.ceil...)."""
    def lower(builder, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_HALF, [_HALF] * len(args)), f"{name}.f16")
        return builder.call(fn, args)
    return lower


def _compare(op):
    return lambda builder, args: builder.fcmp_ordered(op, *args)


def _in_float32(compute):
    """compute(builder, x) on the operand widened to float32, rounded once back to half."""
    def lower(builder, args):
        return builder.fptrunc(compute(builder, builder.fpext(args[0], _FLOAT)), _HALF)
    return lower


def _libdevice32(symbol):
    def compute(builder, x):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_FLOAT, [_FLOAT]), symbol)
        return builder.call(fn, [x])
    return _in_float32(compute)


def _sqrt32(builder, x):       # llvm.sqrt is IEEE sqrt.rn.f32 on NVPTX
    return builder.call(builder.module.declare_intrinsic("llvm.sqrt", [x.type]), [x])


_H, _B = types.float16, types.boolean

#: name -> (number of float16 arguments, result type, lowering(builder, args), doc)
_FP16 = {
    "hadd": (2, _H, _on_half("fadd"), "hadd(a, b): a + b in float16"),
    "hsub": (2, _H, _on_half("fsub"), "hsub(a, b): a - b in float16"),
    "hmul": (2, _H, _on_half("fmul"), "hmul(a, b): a * b in float16"),
    "hdiv": (2, _H, _on_half("fdiv"), "hdiv(a, b): a / b in float16"),
    "hmax": (2, _H, _half_intrinsic("llvm.maxnum"), "hmax(a, b): the larger of a and b in float16"),
    "hmin": (2, _H, _half_intrinsic("llvm.minnum"),
             "hmin(a, b): the smaller of a and b in float16"),
    "hneg": (1, _H, _on_half("fneg"), "hneg(a): -a in float16"),
    "habs": (1, _H, _half_intrinsic("llvm.fabs"), "habs(a): |a| in float16"),
    "hfma": (3, _H, _on_half("fma"), "hfma(a, b, c): a * b + c rounded once, in float16"),
    "hceil": (1, _H, _half_intrinsic("llvm.ceil"), "hceil(a): the smallest integer >= a (float16)"),
    "hfloor": (1, _H, _half_intrinsic("llvm.floor"),
               "hfloor(a): the largest integer <= a (float16)"),
    "htrunc": (1, _H, _half_intrinsic("llvm.trunc"), "htrunc(a): a rounded toward zero (float16)"),
    "hrint": (1, _H, _half_intrinsic("llvm.rint"),
              "hrint(a): a rounded to the nearest integer, ties to even (float16)"),
    "hsqrt": (1, _H, _in_float32(_sqrt32), "hsqrt(a): square root of a in float16"),
    "hrsqrt": (1, _H, _in_float32(lambda b, x: b.fdiv(_FLOAT(1.0), _sqrt32(b, x))),
               "hrsqrt(a): 1 / sqrt(a) in float16 (float32, rounded to half)"),
    "hrcp": (1, _H, _in_float32(lambda b, x: b.fdiv(_FLOAT(1.0), x)),
             "hrcp(a): 1 / a in float16"),
}
for _name, _what in (("sin", "sine"), ("cos", "cosine"), ("log", "natural logarithm"),
                     ("log2", "base-2 logarithm"), ("log10", "base-10 logarithm"),
                     ("exp", "e ** a"), ("exp2", "2 ** a"), ("exp10", "10 ** a")):
    _FP16[f"h{_name}"] = (1, _H, _libdevice32(f"__nv_{_name}f"),
                          f"h{_name}(a): {_what} of a in float16 (float32, rounded to half)")
for _name, _op in (("heq", "=="), ("hne", "!="), ("hge", ">="), ("hgt", ">"), ("hle", "<="),
                   ("hlt", "<")):
    _FP16[_name] = (2, _B, _compare(_op),
                    f"{_name}(a, b): a {_op} b for float16 values (False if either is NaN)")

_fp16_stubs = {name: Stub(name, entry[3], namespace="cuda.fp16") for name, entry in _FP16.items()}
fp16 = Namespace("fp16", **_fp16_stubs)
typing.register_global(fp16, NamespaceType(fp16))


def _fp16_template(name, nargs, result):
    class Fp16Template(AbstractTemplate):
        key = _fp16_stubs[name]

        def generic(self, args, kws):
            if kws or len(args) != nargs:
                _fail(f"fp16.{name}", f"takes {nargs} float16 argument(s), got "
                                      f"{len(args) + len(kws)}")
            for a in args:
                # other real numbers convert to float16 at the call, as numba-cuda's do
                if not isinstance(types.unliteral(a), (types.Float, types.Integer,
                                                       types.Boolean)):
                    _fail(f"fp16.{name}", f"needs float16 (or real number) arguments, got {a}")
            return signature(result, *([types.float16] * nargs))

    Fp16Template.__name__ = f"Fp16_{name}"
    return Fp16Template


def _fp16_lowering(lower):
    return lambda context, builder, sig, args: lower(builder, args)


for _name, (_n, _result, _lower, _) in _FP16.items():
    typing.register_global(_fp16_stubs[_name], types.Function(_fp16_template(_name, _n, _result)))
    lowering.lower(_fp16_stubs[_name], *([types.float16] * _n))(_fp16_lowering(_lower))


# ---------------------------------------------------------------------------------------------
# int.bit_count() (Python 3.10+): set bits of |x|, as an int64 -- numba-cuda offers it too

class _BitCountTemplate(AbstractTemplate):
    key = "Integer.bit_count"

    def generic(self, args, kws):
        if args or kws:
            _fail("int.bit_count", "takes no arguments")
        return signature(types.int64, recvr=self.this)


@typing.register_attr
class _IntegerAttrs(AttributeTemplate):
    key = types.Integer

    def resolve_bit_count(self, ty):
        return types.BoundFunction(_BitCountTemplate, ty)


@lowering.lower("Integer.bit_count", types.Integer)
def _lower_bit_count(context, builder, sig, args):
    ty = sig.args[0]
    x = args[0]
    if ty.signed:
        x = builder.select(builder.icmp_signed("<", x, x.type(0)), builder.neg(x), x)
    count = builder.call(builder.module.declare_intrinsic("llvm.ctpop", [x.type]), [x])
    return context.cast(builder, count, types.Integer.from_bitwidth(x.type.width, False),
                        types.int64)
