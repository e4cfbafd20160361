"""8-bit floats in device code: ``fp8_e4m3(x)``, ``fp8_e5m2(x)``, ``fp8_e8m0(x)`` and their
conversions (``float32(v)``, ``int32(v)``...), and ``cuda.fp8``'s raw conversions
(``cvt_float_to_fp8(x, saturation_t.SATFINITE, fp8_interpretation_t.E4M3)``...), as numba-cuda
offers them from CUDA's ``cuda_fp8.h``.

Each conversion is one of ``compiler/fp8.py``'s integer functions compiled into the caller (a
few dozen integer instructions, the same on every architecture; the simulator runs the same
functions), around the float's bits: float16 and bfloat16 widen to float32 exactly first, and an
8-bit float goes to any other type through its exact float32 value (to an integer: truncated,
saturated, NaN 0 -- ``llvm.fptosi.sat``).
"""

from __future__ import annotations

import collections

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.asnumbatype import as_numba_type
from numba.core.typing.templates import AbstractTemplate, Registry, signature

from .. import fp8 as F
from ..bfloat16 import BFloat16, BFloatType
from .stubs import IntrinsicArgumentError, Namespace, NamespaceType, Stub

__all__ = ["fp8"]

typing = Registry()
lowering = LoweringRegistry()

_I8, _I16, _I32, _I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
_F32, _F64 = ir.FloatType(), ir.DoubleType()
_KIND = {"e4m3": 0, "e5m2": 1, "e8m0": 2}

for _t in F.TYPES.values():
    as_numba_type.register(_t, _t)           # isinstance(v, fp8_e4m3)


def _call(context, builder, pyfunc, argtys, args, restype=types.int64):
    return context.compile_internal(builder, pyfunc, signature(restype, *argtys), args)


def _i64(builder, value):
    return builder.zext(value, _I64) if value.type.width < 64 else value


def _encode(context, builder, x, e8m0, e5m2, sat, round_up):
    """The fp8 byte of the float32 or float64 value ``x``: E8M0 (``e8m0``, a Python bool) or, by
    the i64 ``e5m2`` flag, E5M2 / E4M3; ``sat`` and ``round_up`` are i64 flags too (``e5m2``
    matters to E4M3/E5M2 only, ``round_up`` to E8M0 only)."""
    if x.type == _F64:
        bits, fn = builder.bitcast(x, _I64), (F.f64_to_e8m0 if e8m0 else F.f64_to_fp8)
    else:
        bits, fn = _i64(builder, builder.bitcast(x, _I32)), (F.f32_to_e8m0 if e8m0 else
                                                               F.f32_to_fp8)
    args = [bits, sat, round_up] if e8m0 else [bits, e5m2, sat]
    return builder.trunc(_call(context, builder, fn, (types.int64,) * 3, args), _I8)


def _construct(context, builder, x, kind):
    """CUDA's constructor of ``kind`` from a float32 / float64 value: SATFINITE, to nearest
    even (E8M0 rounding up)."""
    return _encode(context, builder, x, kind == "e8m0", _I64(int(kind == "e5m2")), _I64(1),
                   _I64(1))


def _to_f32(context, builder, code, kind):
    res = _call(context, builder, F.fp8_to_f32, (types.int64, types.int64),
                [builder.zext(code, _I64), _I64(_KIND[kind])])
    return builder.bitcast(builder.trunc(res, _I32), _F32)


# ---------------------------------------------------------------------------------------------
# Casts: the constructors (SATFINITE, to nearest even; E8M0 rounds up) and the conversions

@lowering.lower_cast(types.Number, F.FP8)
@lowering.lower_cast(types.Boolean, F.FP8)
def _to_fp8(context, builder, fromty, toty, val):
    kind = toty.kind
    if isinstance(fromty, F.FP8):
        return _construct(context, builder, _to_f32(context, builder, val, fromty.kind), kind)
    if isinstance(fromty, types.Float):
        # (float16 and bfloat16 widen to float32 exactly)
        f = val if fromty.bitwidth in (32, 64) else builder.fpext(val, _F32)
        return _construct(context, builder, f, kind)
    if isinstance(fromty, types.Boolean):
        fromty, val = types.uint8, builder.zext(val, _I8)
    if isinstance(fromty, types.Integer):
        if kind == "e8m0" and not (fromty.bitwidth == 64 and not fromty.signed):
            if fromty.bitwidth == 64:
                wide = val
            else:
                wide = builder.sext(val, _I64) if fromty.signed else builder.zext(val, _I64)
            res = _call(context, builder, F.int_to_e8m0, (types.int64,), [wide])
            return builder.trunc(res, _I8)
        if kind == "e8m0":                            # uint64: through float64
            return _construct(context, builder, builder.uitofp(val, _F64), kind)
        f32 = builder.sitofp(val, _F32) if fromty.signed else builder.uitofp(val, _F32)
        return _construct(context, builder, f32, kind)
    raise NotImplementedError(f"{fromty} -> {toty}")


@lowering.lower_cast(F.FP8, types.Float)
@lowering.lower_cast(F.FP8, types.Integer)
@lowering.lower_cast(F.FP8, types.Boolean)
def _from_fp8(context, builder, fromty, toty, val):
    f32 = _to_f32(context, builder, val, fromty.kind)
    if isinstance(toty, types.Boolean):
        return builder.fcmp_unordered("!=", f32, ir.Constant(_F32, 0.0))
    if isinstance(toty, types.Integer):
        name = f"llvm.fpto{'s' if toty.signed else 'u'}i.sat.i{toty.bitwidth}.f32"
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(toty.bitwidth), [_F32]), name)
        return builder.call(fn, [f32])
    if isinstance(toty, BFloat16):
        return builder.fptrunc(f32, BFloatType())
    if toty.bitwidth == 64:
        return builder.fpext(f32, _F64)
    if toty.bitwidth == 16:
        return builder.fptrunc(f32, ir.HalfType())
    return f32


@lowering.lower_cast(F.FP8, F.FP8)
def _fp8_to_fp8(context, builder, fromty, toty, val):
    return _to_fp8(context, builder, fromty, toty, val)


# ---------------------------------------------------------------------------------------------
# cuda.fp8's raw conversions (on storage bytes, as cuda_fp8.h's __nv_cvt_* functions)

#: CUDA's __nv_bfloat16_raw: the bits of a bfloat16 (``raw.x``)
BFloat16Raw = collections.namedtuple("bfloat16_raw", ["x"])
bfloat16_raw = types.NamedUniTuple(types.uint16, 1, BFloat16Raw)

_ENUM = (types.Integer, types.IntEnumMember, types.Boolean)


def _check(name, args, kinds):
    if len(args) != len(kinds):
        raise IntrinsicArgumentError(f"cuda.fp8.{name}(): takes {len(kinds)} arguments, got "
                                     f"{len(args)}")
    for a, (what, ok) in zip(args, kinds):
        if not isinstance(types.unliteral(a), ok):
            raise IntrinsicArgumentError(f"cuda.fp8.{name}(): {what} must be "
                                         f"{_WHAT[ok]}, got {a}")


_WHAT = {_ENUM: "an integer or an enum member (saturation_t, fp8_interpretation_t, "
                "cudaRoundMode)",
         (types.Number,): "a number", (types.Integer,): "an integer (a storage byte)",
         (types.NamedUniTuple,): "a bfloat16_raw"}

_NUMBER, _RAW = (types.Number,), (types.NamedUniTuple,)


def _conversion(x_kind, x_type, mode):
    """A raw conversion's entry: x, saturate and ``mode`` (the format, or the rounding)."""
    return ((("x", x_kind), ("saturate", _ENUM), (mode, _ENUM)), types.uint8,
            (x_type, types.int64, types.int64))


# name -> (argument descriptions, result, argument types to convert to)
_CVT = {
    "cvt_float_to_fp8": _conversion(_NUMBER, types.float32, "fp8_interpretation"),
    "cvt_double_to_fp8": _conversion(_NUMBER, types.float64, "fp8_interpretation"),
    "cvt_bfloat16raw_to_fp8": _conversion(_RAW, bfloat16_raw, "fp8_interpretation"),
    "cvt_float_to_e8m0": _conversion(_NUMBER, types.float32, "rounding"),
    "cvt_double_to_e8m0": _conversion(_NUMBER, types.float64, "rounding"),
    "cvt_bfloat16raw_to_e8m0": _conversion(_RAW, bfloat16_raw, "rounding"),
    "cvt_e8m0_to_bf16raw": ((("x", (types.Integer,)),), bfloat16_raw, (types.uint8,)),
}

STUBS = {name: Stub(name, f"cuda.fp8.{name}: CUDA's __nv_{name}", namespace="cuda.fp8")
         for name in _CVT}


def _template(name):
    kinds, result, argtys = _CVT[name]

    class _Cvt(AbstractTemplate):
        key = STUBS[name]

        def generic(self, args, kws):
            if kws:
                raise IntrinsicArgumentError(f"cuda.fp8.{name}(): takes no keyword arguments")
            _check(name, args, kinds)
            return signature(result, *argtys)
    _Cvt.__name__ = f"Fp8_{name}"
    return _Cvt


def _raw_bits(builder, raw):
    return builder.extract_value(raw, 0)


def _cvt_lowering(name):
    def impl(context, builder, sig, args):
        x, rest = args[0], [_i64(builder, a) for a in args[1:]]
        if name == "cvt_e8m0_to_bf16raw":
            bits = _call(context, builder, F.e8m0_to_bf16, (types.int64,),
                         [builder.zext(x, _I64)])
            return context.make_tuple(builder, bfloat16_raw, [builder.trunc(bits, _I16)])
        sat = builder.zext(builder.icmp_signed("!=", rest[0], _I64(0)), _I64)
        e8m0 = name.endswith("_to_e8m0")
        if name == "cvt_bfloat16raw_to_e8m0":
            # CUDA's own rule on the bfloat16 bits (its exponent field), not a rounding of x
            up = builder.zext(builder.icmp_signed("==", rest[1], _I64(F.ROUND_POS_INF)), _I64)
            res = _call(context, builder, F.bf16_to_e8m0, (types.int64,) * 3,
                        [builder.zext(_raw_bits(builder, x), _I64), sat, up])
            return builder.trunc(res, _I8)
        if name == "cvt_bfloat16raw_to_fp8":
            x = builder.fpext(builder.bitcast(_raw_bits(builder, x), BFloatType()), _F32)
        # the third argument: the rounding (E8M0) or the format (1: E5M2)
        flag = builder.zext(builder.icmp_signed(
            "==", rest[1], _I64(F.ROUND_POS_INF if e8m0 else 1)), _I64)
        return _encode(context, builder, x, e8m0, flag, sat, flag)
    return impl


for _name, (_, _result, _argtys) in _CVT.items():
    typing.register_global(STUBS[_name], types.Function(_template(_name)))
    lowering.lower(STUBS[_name], *_argtys)(_cvt_lowering(_name))

#: ``cuda.fp8`` (also the module ``gpureplace.cuda.fp8``): the types, the enums, the raw
#: conversions
fp8 = Namespace("fp8", fp8_e4m3=F.fp8_e4m3, fp8_e5m2=F.fp8_e5m2, fp8_e8m0=F.fp8_e8m0,
                saturation_t=F.saturation_t, fp8_interpretation_t=F.fp8_interpretation_t,
                bfloat16_raw=bfloat16_raw, **STUBS)
typing.register_global(fp8, NamespaceType(fp8))
