"""Device math: the built-in table that maps math, NumPy ufuncs and builtins to libdevice.

Each entry is a ``MathStub`` with an f32 and an f64 libdevice symbol (and an f32 fast variant used
when fast math is on).  The built-in context maps ``math.sin`` and ``np.sin`` to the stub ``sin``;
the stub's lowering is also registered under the ``math`` function itself, because parts of Numba's
own lowering (``**`` on floats, ``round(x, n)``) ask the target for ``math.pow`` and friends.
"""

from __future__ import annotations

import builtins
import math

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import AbstractTemplate, Registry, signature

from ..bfloat16 import BFloatType, bfloat16
from .requirements import arch_at_least, ptx_at_least
from .stubs import Stub

typing = Registry()
lowering = LoweringRegistry()


class MathStub(Stub):
    def __init__(self, name, f64, f32, fast32=None, nargs=1, result="float", ufunc=False):
        super().__init__(f"ufunc_{name}" if ufunc else name,
                         f"device {name}: libdevice {f32} / {f64}", namespace="devicemath")
        self.name = name
        self.f64, self.f32, self.fast32 = f64, f32, fast32
        self.nargs = nargs
        self.result = result      # "float" | "int" (math.floor...) | "bool" (isnan...)
        self.ufunc = ufunc        # NumPy's function's typing of mixed arguments (_ufunc_float_of)

    def symbol(self, fty, fastmath):
        if fty == types.float32:
            return self.fast32 if (fastmath and self.fast32) else self.f32
        return self.f64


STUBS = {}


def _stub(name, base=None, nargs=1, result="float", fast=False, f32=None, f64=None):
    base = base or name
    s = MathStub(name, f64 or f"__nv_{base}", f32 or f"__nv_{base}f",
                 f"__nv_fast_{base}f" if fast else None, nargs, result)
    STUBS[name] = s
    return s


for _n in ("acos asin atan sinh cosh tanh asinh acosh atanh expm1 log1p sqrt cbrt erf erfc "
           "lgamma fabs rint").split():
    _stub(_n)
for _n in ("sin cos tan exp log log2 log10 exp10".split()):
    _stub(_n, fast=True)
_stub("exp2")
_stub("gamma", base="tgamma")
for _n in ("floor ceil trunc".split()):
    _stub(_n, result="int")
    _stub(f"{_n}_float", base=_n)
_stub("isnan", result="bool", f64="__nv_isnand", f32="__nv_isnanf")
_stub("isinf", result="bool", f64="__nv_isinfd", f32="__nv_isinff")
_stub("isfinite", result="bool", f64="__nv_isfinited", f32="__nv_finitef")
_stub("pow", nargs=2, fast=True)
for _n in ("atan2 hypot fmod copysign fmin fmax remainder nextafter".split()):
    _stub(_n, nargs=2)
# np.power, np.arctan2 ... (and the builtin pow): a float32 with an integer of any width stays
# float32, as Numba types NumPy's functions of scalars; math.* has numba-cuda's rule
for _n in ("pow atan2 hypot fmod copysign nextafter".split()):
    _base = STUBS[_n]
    STUBS[f"ufunc_{_n}"] = MathStub(_n, _base.f64, _base.f32, _base.fast32, 2, ufunc=True)
_stub("abs", base="fabs")


#: Integers numba-cuda's math templates take with a float32 in float32 (Numba converts them to
#: float32 no worse than to float64: bool, and the integers float32 holds exactly but uint16,
#: which its table ranks otherwise); a wider one makes the call float64 (``math.atan2(y32,
#: n32)`` and a literal's int64 alike).  ``math.pow``'s exponent also takes uint16 and int32
#: (numba-cuda declares pow(float32, int32)).
_WITH_FLOAT32 = frozenset({types.boolean, types.int8, types.uint8, types.int16})
_EXPONENT_WITH_FLOAT32 = _WITH_FLOAT32 | {types.uint16, types.int32}


def _float_of(args, name=None):
    """The float type a call of math function ``name`` computes in, as numba-cuda types it:
    float64 with a float64; float16 (bfloat16) only when every argument is float16 (bfloat16):
    computed in float32, rounded back, as numba-cuda's half-precision math does; with a float32,
    float32 unless an integer argument is wider than ``_WITH_FLOAT32`` (``_ufunc_float_of`` is
    NumPy's functions' rule)."""
    if any(not isinstance(a, (types.Integer, types.Float, types.Boolean)) for a in args):
        return None
    if args and all(a == types.float16 for a in args):
        return types.float16
    if args and all(a == bfloat16 for a in args):
        return bfloat16                       # likewise for bfloat16
    if any(a == types.float64 for a in args):
        return types.float64
    if any(a == types.float32 for a in args):
        for i, a in enumerate(args):
            if isinstance(a, (types.Integer, types.Boolean)):
                held = _EXPONENT_WITH_FLOAT32 if (name == "pow" and i == 1) else _WITH_FLOAT32
                if types.unliteral(a) not in held:
                    return types.float64
        return types.float32
    return types.float64      # ints, and float16 mixed with ints: computed in double


def _ufunc_float_of(args):
    """NumPy's functions (and ``pow``) on scalars, as Numba types them: float32 when every
    argument is float32 or an integer of any width."""
    fty = _float_of(args)
    if fty == types.float64 and any(a == types.float32 for a in args) and \
            not any(a == types.float64 for a in args):
        return types.float32
    return fty


def _make_template(stub):
    class _Template(AbstractTemplate):
        key = stub

        def generic(self, args, kws):
            if kws or len(args) != stub.nargs:
                return None
            if stub.name == "abs" and isinstance(args[0], types.Boolean):
                return signature(types.int64, types.int64)      # abs(True) == 1, as in Python
            if stub.name == "abs" and isinstance(args[0], types.Integer):
                return signature(args[0], args[0])
            if stub.name == "abs" and isinstance(args[0], types.Complex):
                return signature(args[0].underlying_float, args[0])
            if stub.name == "pow" and any(isinstance(a, types.Complex) for a in args):
                # pow(z, w) / np.power: Numba's complex power (compiler/runtime_helpers.py)
                import operator
                return self.context.resolve_function_type(operator.pow, args, {})
            fty = _ufunc_float_of(args) if stub.ufunc else _float_of(args, stub.name)
            if fty is None:
                return None
            ret = {"float": fty, "int": types.int64, "bool": types.boolean}[stub.result]
            return signature(ret, *([fty] * stub.nargs))

    _Template.__name__ = f"DeviceMath_{stub.__name__}"
    return _Template


def _declare(builder, name, fty, nargs, ret=None):
    lty = ir.FloatType() if fty == types.float32 else ir.DoubleType()
    fnty = ir.FunctionType(ret or lty, [lty] * nargs)
    return cgutils.get_or_insert_function(builder.module, fnty, name)


def _fastmath(context):
    """Fast math of the function being lowered (its compile options; the target context is shared
    by every option set of one dispatch context)."""
    from .. import frontend
    cf = frontend.current_compiled()
    if cf is not None:
        return bool(cf.options.fastmath)
    return bool(getattr(context, "fastmath", False))


def _sqrt(builder, x, fty, fastmath):
    # Not libdevice's __nv_sqrtf: it picks sqrt.rn or sqrt.approx with
    # __nvvm_reflect("__CUDA_PREC_SQRT"), which LLVM's NVVMReflect pass does not know (folds to
    # 0, i.e. approximate).  llvm.sqrt is IEEE sqrt.rn on NVPTX; fast math asks for the
    # approximation explicitly, as numba-cuda's fastmath does.
    if fastmath and fty == types.float32:
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.FloatType(), [ir.FloatType()]),
            "llvm.nvvm.sqrt.approx.ftz.f")
        return builder.call(fn, [x])
    return builder.call(builder.module.declare_intrinsic("llvm.sqrt", [x.type]), [x])


#: the narrow float types, computed in float32: Numba type -> LLVM type
_NARROW = {types.float16: ir.HalfType(), bfloat16: BFloatType()}


def _make_lowering(stub):
    def impl(context, builder, sig, args):
        fastmath = _fastmath(context)
        argty = sig.args[0]
        if stub.name == "abs" and isinstance(argty, types.Integer):
            x = args[0]
            if not argty.signed:
                return x
            neg = builder.neg(x)
            return builder.select(builder.icmp_signed("<", x, x.type(0)), neg, x)
        if stub.name == "pow" and isinstance(sig.return_type, types.Complex):
            import operator
            return context.get_function(operator.pow, sig)(builder, args)
        if stub.name == "abs" and isinstance(argty, types.Complex):
            # |z| = hypot(re, im): no overflow for large parts, as CPython and Numba compute it
            fty = argty.underlying_float
            z = context.make_complex(builder, argty, value=args[0])
            fn = _declare(builder, STUBS["hypot"].symbol(fty, fastmath), fty, 2)
            return builder.call(fn, [z.real, z.imag])
        narrow = _NARROW.get(argty)      # float16 / bfloat16: its LLVM type
        if stub.name == "abs" and narrow is not None:
            # exact in half precision: the sign bit cleared (abs.f16 / abs.bf16, as numba-cuda)
            return builder.call(builder.module.declare_intrinsic("llvm.fabs", [narrow]), args)
        fty = argty if narrow is None else types.float32
        if narrow is not None:          # compute in float32, round the result back
            args = [builder.fpext(a, ir.FloatType()) for a in args]
        sym = stub.symbol(fty, fastmath)
        if stub.name == "tanh" and fastmath and fty == types.float32 and arch_at_least(75) \
                and ptx_at_least(70):
            # the hardware's tanh.approx.f32 (sm_75 on, PTX ISA 7.0 on; else libdevice's), as
            # numba-cuda's fast math uses it.  In assembly: LLVM rewrites its intrinsic to
            # llvm.tanh, which it selects only with afn.
            res = builder.asm(ir.FunctionType(ir.FloatType(), [ir.FloatType()]),
                              "tanh.approx.f32 $0, $1;", "=f,f", args, side_effect=False)
            return builder.fptrunc(res, narrow) if narrow is not None else res
        if stub.name == "sqrt":
            res = _sqrt(builder, args[0], fty, fastmath)
            return builder.fptrunc(res, narrow) if narrow is not None else res
        if stub.result == "bool":
            fn = _declare(builder, sym, fty, 1, ret=ir.IntType(32))
            res = builder.call(fn, args)
            return builder.icmp_signed("!=", res, ir.IntType(32)(0))
        fn = _declare(builder, sym, fty, stub.nargs)
        res = builder.call(fn, args)
        # The signature decides: math.floor(x) is an int in Python, but Numba's own lowering
        # (float // float) asks for a float -> float floor.
        if isinstance(sig.return_type, types.Integer):
            return context.cast(builder, res, fty, sig.return_type)
        if sig.return_type in _NARROW:
            return builder.fptrunc(res, _NARROW[sig.return_type])
        return res
    return impl


for _s in STUBS.values():
    typing.register_global(_s, types.Function(_make_template(_s)))
    _impl = _make_lowering(_s)
    for _fty in (types.float16, bfloat16, types.float32, types.float64):
        _sig_args = [_fty] * _s.nargs
        lowering.lower(_s, *_sig_args)(_impl)
    if _s.name == "abs":
        lowering.lower(_s, types.Integer)(_impl)
        lowering.lower(_s, types.Complex)(_impl)
    if _s.name == "pow":
        lowering.lower(_s, types.Complex, types.Complex)(_impl)


# ---------------------------------------------------------------------------------------------
# frexp, modf (libdevice writes one result through a pointer: a tuple here, as in Python and
# numba-cuda), ldexp (an int32 exponent), degrees and radians (a multiplication).

def _special(name, result, nargs=1):
    s = MathStub(name, f"__nv_{name}", f"__nv_{name}f", None, nargs, result)
    STUBS[name] = s
    return s


def _special_float(args):
    fty = _float_of(args[:1])
    return types.float32 if fty == types.float16 else fty


class _FrexpTemplate(AbstractTemplate):
    key = _special("frexp", "tuple")

    def generic(self, args, kws):
        fty = None if kws or len(args) != 1 else _special_float(args)
        return fty and signature(types.Tuple((fty, types.int32)), fty)


class _ModfTemplate(AbstractTemplate):
    key = _special("modf", "tuple")

    def generic(self, args, kws):
        fty = None if kws or len(args) != 1 else _special_float(args)
        return fty and signature(types.UniTuple(fty, 2), fty)


class _LdexpTemplate(AbstractTemplate):
    key = _special("ldexp", "float", nargs=2)

    def generic(self, args, kws):
        if kws or len(args) != 2 or not isinstance(args[1], (types.Integer, types.Boolean)):
            return None
        fty = _special_float(args)
        return fty and signature(fty, fty, types.int32)


def _angle_template(name):
    class _Angle(AbstractTemplate):
        key = _special(name, "float")

        def generic(self, args, kws):
            fty = None if kws or len(args) != 1 else _special_float(args)
            return fty and signature(fty, fty)
    _Angle.__name__ = f"DeviceMath_{name}"
    return _Angle


def _pointer_out(name, out_type):
    def impl(context, builder, sig, args):
        fty = sig.args[0]
        lty = args[0].type
        out_lty = context.get_value_type(out_type(fty))
        slot = cgutils.alloca_once(builder, out_lty)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(lty, [lty, out_lty.as_pointer()]),
            STUBS[name].symbol(fty, False))
        first = builder.call(fn, [args[0], slot])
        second = builder.load(slot)
        # Python's order: frexp -> (mantissa, exponent), modf -> (fraction, integer part)
        return context.make_tuple(builder, sig.return_type, [first, second])
    return impl


def _ldexp(context, builder, sig, args):
    fty = sig.args[0]
    lty = args[0].type
    fn = cgutils.get_or_insert_function(builder.module,
                                        ir.FunctionType(lty, [lty, ir.IntType(32)]),
                                        STUBS["ldexp"].symbol(fty, False))
    return builder.call(fn, args)


def _angle(factor):
    def impl(context, builder, sig, args):
        fty = sig.args[0]
        scale = (np.float32 if fty == types.float32 else np.float64)(factor)
        return builder.fmul(args[0], args[0].type(float(scale)))
    return impl


for _fty in (types.float32, types.float64):
    lowering.lower(_FrexpTemplate.key, _fty)(
        _pointer_out("frexp", lambda f: types.int32))
    lowering.lower(_ModfTemplate.key, _fty)(_pointer_out("modf", lambda f: f))
    lowering.lower(_LdexpTemplate.key, _fty, types.int32)(_ldexp)
typing.register_global(_FrexpTemplate.key, types.Function(_FrexpTemplate))
typing.register_global(_ModfTemplate.key, types.Function(_ModfTemplate))
typing.register_global(_LdexpTemplate.key, types.Function(_LdexpTemplate))
for _name, _factor in (("degrees", 180.0 / math.pi), ("radians", math.pi / 180.0)):
    _t = _angle_template(_name)
    typing.register_global(_t.key, types.Function(_t))
    for _fty in (types.float32, types.float64):
        lowering.lower(_t.key, _fty)(_angle(_factor))

# Numba's own lowering of ``**``, ``round(x, n)``, ``//`` on floats asks for these keys.
for _key, _name in ((math.pow, "pow"), (math.floor, "floor"), (math.ceil, "ceil"),
                    (math.fmod, "fmod"), (math.exp, "exp"), (math.log, "log"),
                    (math.sqrt, "sqrt"), (math.fabs, "fabs"), (math.trunc, "trunc"),
                    (math.isnan, "isnan"), (math.isinf, "isinf"), (math.copysign, "copysign")):
    _impl = _make_lowering(STUBS[_name])
    for _fty in (types.float32, types.float64):
        lowering.lower(_key, *([_fty] * STUBS[_name].nargs))(_impl)


def _powi_lowering(context, builder, sig, args):
    # float ** int: convert the exponent and use pow (libdevice's powi is slower and rarer).
    fty = sig.args[0]
    y = context.cast(builder, args[1], sig.args[1], fty)
    fn = _declare(builder, STUBS["pow"].symbol(fty, _fastmath(context)), fty, 2)
    return builder.call(fn, [args[0], y])


for _fty in (types.float32, types.float64):
    lowering.lower(math.pow, _fty, types.Integer)(_powi_lowering)


# ---------------------------------------------------------------------------------------------
# The built-in table: host callable -> stub, for the root context.

def builtin_table():
    s = STUBS
    table = {
        abs: s["abs"], builtins.pow: s["ufunc_pow"],
        np.absolute: s["abs"], np.fabs: s["fabs"],
        np.arcsin: s["asin"], np.arccos: s["acos"], np.arctan: s["atan"],
        np.arcsinh: s["asinh"], np.arccosh: s["acosh"], np.arctanh: s["atanh"],
        np.power: s["ufunc_pow"], np.arctan2: s["ufunc_atan2"], np.floor: s["floor_float"],
        np.ceil: s["ceil_float"], np.trunc: s["trunc_float"], np.rint: s["rint"],
        np.fmin: s["fmin"], np.fmax: s["fmax"],
    }
    for name in ("sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh exp expm1 log "
                 "log2 log10 log1p sqrt erf erfc lgamma gamma fabs floor ceil trunc isnan isinf "
                 "isfinite pow atan2 hypot fmod copysign remainder exp2 nextafter").split():
        if hasattr(math, name):
            table[getattr(math, name)] = s[name]
    if hasattr(math, "cbrt"):
        table[math.cbrt] = s["cbrt"]
    for name in ("frexp", "modf", "ldexp", "degrees", "radians"):
        table[getattr(math, name)] = s[name]
    table.update({np.degrees: s["degrees"], np.rad2deg: s["degrees"],
                  np.radians: s["radians"], np.deg2rad: s["radians"]})
    for name in ("sin cos tan sinh cosh tanh exp exp2 expm1 log log2 log10 log1p sqrt cbrt "
                 "isnan isinf isfinite").split():
        table[getattr(np, name)] = s[name]
    for name in ("hypot fmod copysign nextafter").split():
        table[getattr(np, name)] = s[f"ufunc_{name}"]
    table.update({np.frexp: s["frexp"], np.modf: s["modf"], np.ldexp: s["ldexp"]})
    from .ufunc_scalars import table as operator_ufuncs
    table.update(operator_ufuncs())
    return table


# ---------------------------------------------------------------------------------------------
# float16 arithmetic stays in half precision (numba-cuda's rule): float16 op float16 -> float16,
# and so does float16 op a value that converts to float16 safely (an int8 or a bool, as Numba's
# conversion rules have it; numba-cuda's _fp16_binary_operator asks the same): the operand is
# converted.  Numba's generic typing would widen both to float32; the lowering (fadd, fcmp... on
# ``half``) is Numba's own, generic over float types.

_SAFE_TO_HALF = (types.float16, types.int8, types.boolean)


def _half_template(op, result, mixed=False):
    class _Half(AbstractTemplate):
        key = op

        def generic(self, args, kws):
            if kws or not args:
                return None
            if all(a == types.float16 for a in args):
                return signature(result or types.float16, *args)
            if mixed and len(args) == 2 and types.float16 in args and \
                    all(a in _SAFE_TO_HALF for a in args):
                return signature(result or types.float16, types.float16, types.float16)
            return None

    _Half.__name__ = f"Half_{getattr(op, '__name__', op)}"
    return _Half


def _register_half():
    import operator
    binary = (operator.add, operator.sub, operator.mul, operator.truediv,
              operator.iadd, operator.isub, operator.imul, operator.itruediv)
    compare = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)
    for op in binary:
        typing.register_global(op, types.Function(_half_template(op, None, mixed=True)))
    for op in compare:
        typing.register_global(op, types.Function(_half_template(op, types.boolean, True)))
    for op in (operator.neg, operator.pos):
        typing.register_global(op, types.Function(_half_template(op, None)))


_register_half()
# float(h) stays a float16 as numba-cuda types it (float(x) of a float32 is a float32 too);
# int(h) truncates to an int64.  Numba's own templates know no float16.
typing.register_global(builtins.float, types.Function(_half_template(builtins.float, None)))
typing.register_global(builtins.int, types.Function(_half_template(builtins.int, types.int64)))


@lowering.lower(builtins.float, types.float16)
def _half_float(context, builder, sig, args):
    return args[0]


@lowering.lower(builtins.int, types.float16)
def _half_int(context, builder, sig, args):
    return builder.fptosi(args[0], ir.IntType(64))


def _half_div(context, builder, sig, args):
    # IEEE division (x / 0 -> inf / nan, as NumPy and numba-cuda give); Numba's generic float
    # division first tests for zero with a helper that only knows float and double.
    return builder.fdiv(*args)


for _op in ("truediv", "itruediv"):
    import operator as _operator
    lowering.lower(getattr(_operator, _op), types.float16, types.float16)(_half_div)


# ---------------------------------------------------------------------------------------------
# float32 ** integer stays float32.  Numba's generic version computes the rare paths (negative
# and huge exponents) in double, which drags f64 instructions into float32 kernels.

def _make_float_int_power(fty, signed):
    one = fty(1)

    def by_squaring(x, e):
        r = one
        while e != 0:
            if e & 1:
                r *= x
            e >>= 1
            x *= x
        return r

    def power_signed(a, b):
        x = fty(a)
        if b > 0x10000 or b < -0x10000:     # as Numba: huge exponents through pow (and the
            return math.pow(x, fty(b))      # most negative, whose negation stays negative)
        e = -b if b < 0 else b
        r = by_squaring(x, e)
        if b < 0:
            return one / r
        return r

    def power_unsigned(a, b):
        x = fty(a)
        if b > 0x10000:
            return math.pow(x, fty(b))
        return by_squaring(x, b)

    return power_signed if signed else power_unsigned


def _float_int_power_lowering(context, builder, sig, args):
    fty = sig.return_type
    impl = _make_float_int_power(np.float32 if fty == types.float32 else np.float64,
                                 sig.args[1].signed)
    return context.compile_internal(builder, impl, sig, args)


def _register_float32_powi():
    import operator
    for ity in types.integer_domain:
        for op in (operator.pow, operator.ipow, builtins.pow):
            lowering.lower(op, types.float32, ity)(_float_int_power_lowering)


_register_float32_powi()


@lowering.lower(builtins.round, types.float32, types.Integer)
def _round_float32_to_digits(context, builder, sig, args):
    """``round(x, n)`` of a float32 as numba-cuda computes it: CPython's algorithm on the value
    in float64, rounded to float32 once at the end.  (Numba's CPU version rounds the scaled value
    to float32 before rounding it to an integer, so ``round(float32(2.675), 2)`` gives 2.68
    there, while the float32 nearest 2.675 is 2.67499995 and numba-cuda gives 2.67.)"""
    x64 = context.cast(builder, args[0], types.float32, types.float64)
    sig64 = signature(types.float64, types.float64, sig.args[1])
    res = context.get_function(builtins.round, sig64)(builder, [x64, args[1]])
    return context.cast(builder, res, types.float64, types.float32)
