"""``cuda.const.array_like(arr)``: a global NumPy array's values, copied at compile time into a
``.const`` (``addrspace(4)``) global.  The typing context only sees types, so a rewrite before type
inference hands the array's value to the call as a hidden second argument (the original argument
stays, so redefinition tracking still sees the global)."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
from llvmlite import ir
from numba.core import cgutils, ir as nir, types
from numba.core.datamodel import models, register_default
from numba.core.errors import TypingError
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.rewrites import Rewrite, register_rewrite
from numba.core.typing.templates import CallableTemplate, Registry, signature
from numba.core.typing.typeof import typeof_impl
from numba.np import numpy_support

from . import usage
from .memory import DTYPE_KINDS, build_array, element_layout, format_bytes
from .stubs import Namespace, Stub, register_namespace

__all__ = ["const"]

ADDRSPACE_CONST = 4
_CMEM_PREFIX = "_gpureplace_cmem"
_ids = itertools.count()

typing = Registry()
lowering = LoweringRegistry()

const = Namespace("const", array_like=Stub(
    "array_like", "const.array_like(arr): the global NumPy array arr, copied into constant "
                  "memory at compile time (read-only on the device)", namespace="cuda.const"))

register_namespace(typing, const)


# ---------------------------------------------------------------------------------------------
# const.array_like


class ConstSource:
    """A NumPy array's values, frozen at compile time (the hidden argument of array_like)."""

    __slots__ = ("array", "digest")

    def __init__(self, array):
        # (a copy, C-ordered; np.ascontiguousarray would make a 0-d array 1-d)
        self.array = np.array(array, order="C")
        h = hashlib.sha1(self.array.tobytes())
        h.update(str((self.array.dtype.str, self.array.dtype.descr, self.array.shape)).encode())
        self.digest = h.hexdigest()[:16]


class ConstSourceType(types.Dummy):
    def __init__(self, source):
        self.source = source
        a = source.array
        super().__init__(f"const_source({a.dtype}, {a.shape}, {source.digest})")


register_default(ConstSourceType)(models.OpaqueModel)


def _typeof_const_source(val, c):
    return ConstSourceType(val)


typeof_impl.register(ConstSource)(_typeof_const_source)


@lowering.lower_constant(ConstSourceType)
def _lower_const_source(context, builder, ty, pyval):
    return context.get_dummy_value()


class _ConstArrayLikeTemplate(CallableTemplate):
    key = const.array_like

    def generic(self):
        def typer(ndarray, _frozen=None):
            if _frozen is None or isinstance(_frozen, types.Omitted):
                if isinstance(ndarray, types.Array):
                    raise TypingError(
                        "cuda.const.array_like(arr): arr must be a NumPy array held in a global "
                        "or closure variable, so that its values can be copied into constant "
                        "memory at compile time; a kernel argument or a local array cannot be")
                raise TypingError(f"cuda.const.array_like(arr): arr must be a global NumPy "
                                  f"array, got {ndarray}")
            if not isinstance(_frozen, ConstSourceType):
                raise TypingError("cuda.const.array_like() takes one argument, the array")
            a = _frozen.source.array
            eltype = numpy_support.from_dtype(a.dtype)
            if not isinstance(eltype, DTYPE_KINDS):
                raise TypingError(f"cuda.const.array_like(arr): arrays of {a.dtype} cannot be "
                                  f"placed in constant memory")
            from ...arch import CONST_BYTES
            if a.nbytes > CONST_BYTES:
                raise TypingError(
                    f"cuda.const.array_like(arr) of {a.size:,} {a.dtype}, "
                    f"{format_bytes(a.nbytes)}, is more than the {format_bytes(CONST_BYTES)} "
                    f"of constant memory a kernel's module can have; pass the array as a "
                    f"kernel argument instead")
            return signature(types.Array(eltype, a.ndim, "C", readonly=True), ndarray, _frozen)
        return typer


typing.register_global(const.array_like, types.Function(_ConstArrayLikeTemplate))


@lowering.lower(const.array_like, types.Any, ConstSourceType)
def _lower_const_array_like(context, builder, sig, args):
    source = sig.args[1].source
    a = source.array
    arytype = sig.return_type
    _, itemsize, align = element_layout(context, arytype.dtype)
    data = bytearray(a.tobytes()) or bytearray(1)     # no zero-sized globals
    init = cgutils.create_constant_array(ir.IntType(8), data)
    name = f"{_CMEM_PREFIX}_{source.digest}"
    gv = builder.module.globals.get(name)
    if gv is None:
        gv = ir.GlobalVariable(builder.module, init.type, name, addrspace=ADDRSPACE_CONST)
        gv.linkage = "internal"
        gv.global_constant = True
        gv.initializer = init
        gv.align = max(align, 4)
    usage.note(context, usage.CONST, f"cuda.const.array_like of {a.size:,} {a.dtype}", a.nbytes,
               name)
    return build_array(context, builder, arytype, gv, a.shape, itemsize)


_MISSING = object()


def _global_value(func_ir, var, depth=0):
    """The value of ``var`` if it is a global/closure value or an attribute chain on one."""
    if depth > 8:
        return _MISSING
    try:
        defn = func_ir.get_definition(var)
    except Exception:           # not single-assigned, unknown name...: not a constant
        return _MISSING
    if isinstance(defn, (nir.Global, nir.FreeVar)):
        return defn.value
    if isinstance(defn, nir.Expr) and defn.op == "getattr":
        base = _global_value(func_ir, defn.value, depth + 1)
        if base is _MISSING:
            return _MISSING
        try:
            return getattr(base, defn.attr, _MISSING)
        except Exception:       # a host stand-in that refuses attribute reads (cuda.threadIdx)
            return _MISSING
    return _MISSING


def _may_be_array_like(func_ir, var):
    """Cheap pre-check, since this rewrite sees every call Numba compiles (CPU ones too)."""
    try:
        defn = func_ir.get_definition(var)
    except Exception:
        return False
    if isinstance(defn, nir.Expr) and defn.op == "getattr":
        return defn.attr == "array_like"
    return isinstance(defn, (nir.Global, nir.FreeVar)) and defn.value is const.array_like


@register_rewrite("before-inference")
class _FreezeConstArrayLike(Rewrite):
    """``const.array_like(arr)`` -> ``const.array_like(arr, <arr's values>)`` for a constant arr."""

    def match(self, func_ir, block, typemap, calltypes):
        self._block = block
        self._hits = {}
        for inst in block.find_insts(nir.Assign):
            expr = inst.value
            if not (isinstance(expr, nir.Expr) and expr.op == "call"):
                continue
            if len(expr.args) + len(expr.kws) != 1 or expr.vararg is not None:
                continue
            if not _may_be_array_like(func_ir, expr.func):
                continue
            if _global_value(func_ir, expr.func) is not const.array_like:
                continue
            arg = expr.args[0] if expr.args else dict(expr.kws).get("ndarray")
            if arg is None:
                continue
            value = _global_value(func_ir, arg)
            if isinstance(value, np.ndarray):
                self._hits[id(inst)] = (arg, value)
        return bool(self._hits)

    def apply(self):
        new = self._block.copy()
        new.clear()
        for inst in self._block.body:
            hit = self._hits.get(id(inst))
            if hit is not None:
                arg, value = hit
                loc = inst.loc
                frozen = nir.Var(inst.target.scope, f"$const_array_like_{next(_ids)}", loc)
                new.append(nir.Assign(nir.Const(ConstSource(value), loc, use_literal_type=False),
                                      frozen, loc))
                call = inst.value
                inst = nir.Assign(nir.Expr.call(call.func, [arg, frozen], (), loc), inst.target,
                                  loc)
            new.append(inst)
        return new
