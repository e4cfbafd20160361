"""``gpureplace.libdevice.X``: direct calls to libdevice's ``__nv_X``, every function of it.

Functions with only scalar parameters are typed as Numba external functions with the exact
signature read from the bitcode.  The few that write through pointers (``sincos``, ``frexp``,
``modf``, ``remquo``...) return a tuple instead, as in numba-cuda.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import ConcreteTemplate, Registry, signature

typing = Registry()
lowering = LoweringRegistry()

_LLVM_TO_NUMBA = {"float": types.float32, "double": types.float64, "i32": types.int32,
                  "i64": types.int64, "i16": types.int16, "i8": types.int8, "void": types.void}
#: Pointer out-parameters' element types where they differ from the float type of the function.
_INT_OUT = {"frexp", "frexpf", "remquo", "remquof"}


class LibdeviceStub:
    """Host-side stand-in for ``__nv_<name>``."""

    def __init__(self, name, ret, args):
        self.__name__ = name
        self.__qualname__ = f"libdevice.{name}"
        self.__module__ = "gpureplace.libdevice"
        self.symbol = f"__nv_{name}"
        self.llvm_ret, self.llvm_args = ret, args
        self._type = None

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"libdevice.{self.__name__}() can only be called in device code")

    def __repr__(self):
        return f"<libdevice function {self.symbol}>"

    def numba_type(self):
        if self._type is None:
            self._type = _make_type(self)
        return self._type


def _make_type(stub):
    ret = _LLVM_TO_NUMBA[stub.llvm_ret]
    ins, outs = [], []
    fty = None
    for a in stub.llvm_args:
        if a == "ptr":
            outs.append(a)
        else:
            ins.append(_LLVM_TO_NUMBA[a])
            if fty is None and ins[-1] in (types.float32, types.float64):
                fty = ins[-1]
    if not outs:
        return types.ExternalFunction(stub.symbol, signature(ret, *ins))
    out_tys = [types.int32 if stub.__name__ in _INT_OUT else fty for _ in outs]
    results = ([] if ret is types.void else [ret]) + out_tys
    restype = types.Tuple(results) if len(results) > 1 else results[0]
    sig = signature(restype, *ins)

    class _Template(ConcreteTemplate):
        key = stub
        cases = [sig]

    def impl(context, builder, sig, args):
        slots = [cgutils.alloca_once(builder, context.get_value_type(t)) for t in out_tys]
        lltys = [context.get_value_type(t) for t in sig.args]
        fnty = ir.FunctionType(context.get_value_type(ret) if ret is not types.void
                               else ir.VoidType(), lltys + [s.type for s in slots])
        fn = cgutils.get_or_insert_function(builder.module, fnty, stub.symbol)
        res = builder.call(fn, list(args) + slots)
        vals = ([] if ret is types.void else [res]) + [builder.load(s) for s in slots]
        if len(vals) == 1:
            return vals[0]
        return context.make_tuple(builder, sig.return_type, vals)

    lowering.lower(stub, *sig.args)(impl)
    return types.Function(_Template)


_stubs = {}


def get(name):
    """The stub of libdevice function ``name`` (without the ``__nv_`` prefix)."""
    stub = _stubs.get(name)
    if stub is None:
        from ..libdevice_link import function_table
        entry = function_table().get(f"__nv_{name}")
        if entry is None:
            from ...errors import close_names
            raise AttributeError(f"libdevice has no function __nv_{name}"
                                 f"{close_names(name, names())}")
        stub = _stubs[name] = LibdeviceStub(name, *entry)
    return stub


def names():
    from ..libdevice_link import function_table
    return sorted(n[len("__nv_"):] for n in function_table())
