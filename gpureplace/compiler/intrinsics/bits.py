"""Bit manipulation and arithmetic intrinsics: ``cuda.popc``, ``brev``, ``clz``, ``ffs``, ``fma``,
``cbrt``, ``selp`` (``cuda.fp16``'s half-precision functions are ``fp16.py``).

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

from .stubs import IntrinsicArgumentError, Stub

__all__ = ["popc", "brev", "clz", "ffs", "fma", "cbrt", "selp"]

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
    """float32 when every argument is float32 (or float16, or an integer numba-cuda converts to
    float32 with it: devicemath._WITH_FLOAT32), else float64 -- as math.* does."""
    from .devicemath import _WITH_FLOAT32
    for a in args:
        if isinstance(a, types.Boolean) or not isinstance(a, (types.Integer, types.Float)):
            _fail(fname, f"needs float arguments, got {a}")
    if any(types.unliteral(a) == types.float64 for a in args):
        return types.float64
    if any(types.unliteral(a) in (types.float32, types.float16) for a in args):
        if any(isinstance(a, types.Integer) and types.unliteral(a) not in _WITH_FLOAT32
               for a in args):
            return types.float64
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
