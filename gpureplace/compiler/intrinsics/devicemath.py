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

from .stubs import Stub

typing = Registry()
lowering = LoweringRegistry()


class MathStub(Stub):
    def __init__(self, name, f64, f32, fast32=None, nargs=1, result="float"):
        super().__init__(name, f"device {name}: libdevice {f32} / {f64}", namespace="devicemath")
        self.name = name
        self.f64, self.f32, self.fast32 = f64, f32, fast32
        self.nargs = nargs
        self.result = result      # "float" | "int" (math.floor...) | "bool" (isnan...)

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
for _n in ("atan2 hypot fmod copysign fmin fmax remainder".split()):
    _stub(_n, nargs=2)
_stub("abs", base="fabs")


def _float_of(args):
    """The float type a call computes in: float32 only when every argument is float32 or an int."""
    if any(not isinstance(a, (types.Integer, types.Float, types.Boolean)) for a in args):
        return None
    if any(a == types.float64 for a in args):
        return types.float64
    if any(a == types.float32 for a in args):
        return types.float32
    return types.float64      # ints: Python semantics, computed in double


def _make_template(stub):
    class _Template(AbstractTemplate):
        key = stub

        def generic(self, args, kws):
            if kws or len(args) != stub.nargs:
                return None
            if stub.name == "abs" and isinstance(args[0], (types.Integer, types.Boolean)):
                return signature(args[0], args[0])
            fty = _float_of(args)
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


def _make_lowering(stub):
    def impl(context, builder, sig, args):
        if stub.name == "abs" and isinstance(sig.args[0], types.Integer):
            x = args[0]
            neg = builder.neg(x)
            return builder.select(builder.icmp_signed("<", x, x.type(0)), neg, x)
        fty = sig.args[0]
        sym = stub.symbol(fty, bool(getattr(context, "fastmath", False)))
        if stub.result == "bool":
            fn = _declare(builder, sym, fty, 1, ret=ir.IntType(32))
            res = builder.call(fn, args)
            return builder.icmp_signed("!=", res, ir.IntType(32)(0))
        fn = _declare(builder, sym, fty, stub.nargs)
        res = builder.call(fn, args)
        if stub.result == "int":
            return builder.fptosi(res, ir.IntType(64))
        return res
    return impl


for _s in STUBS.values():
    typing.register_global(_s, types.Function(_make_template(_s)))
    _impl = _make_lowering(_s)
    for _fty in (types.float32, types.float64):
        _sig_args = [_fty] * _s.nargs
        lowering.lower(_s, *_sig_args)(_impl)
    if _s.name == "abs":
        lowering.lower(_s, types.Integer)(_impl)

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
    fn = _declare(builder, STUBS["pow"].symbol(fty, bool(getattr(context, "fastmath", False))),
                  fty, 2)
    return builder.call(fn, [args[0], y])


for _fty in (types.float32, types.float64):
    lowering.lower(math.pow, _fty, types.Integer)(_powi_lowering)


# ---------------------------------------------------------------------------------------------
# The built-in table: host callable -> stub, for the root context.

def builtin_table():
    s = STUBS
    table = {
        abs: s["abs"], builtins.pow: s["pow"],
        np.absolute: s["abs"], np.fabs: s["fabs"],
        np.arcsin: s["asin"], np.arccos: s["acos"], np.arctan: s["atan"],
        np.arcsinh: s["asinh"], np.arccosh: s["acosh"], np.arctanh: s["atanh"],
        np.power: s["pow"], np.arctan2: s["atan2"], np.floor: s["floor_float"],
        np.ceil: s["ceil_float"], np.trunc: s["trunc_float"], np.rint: s["rint"],
        np.fmin: s["fmin"], np.fmax: s["fmax"],
    }
    for name in ("sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh exp expm1 log "
                 "log2 log10 log1p sqrt erf erfc lgamma gamma fabs floor ceil trunc isnan isinf "
                 "isfinite pow atan2 hypot fmod copysign remainder exp2").split():
        if hasattr(math, name):
            table[getattr(math, name)] = s[name]
    if hasattr(math, "cbrt"):
        table[math.cbrt] = s["cbrt"]
    for name in ("sin cos tan sinh cosh tanh exp exp2 expm1 log log2 log10 log1p sqrt cbrt "
                 "hypot fmod copysign isnan isinf isfinite").split():
        table[getattr(np, name)] = s[name]
    return table
