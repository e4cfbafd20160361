"""Device functions that return arrays: Numba refuses, without its runtime, every returned array
but an argument itself; a view of an argument (``def row(a, i): return a[i]``) is memory the
caller passed in, and Numba's ``carray`` / ``farray`` view a pointer.  Those are typed with the
check off (``typed_passes``: Numba's typed pipeline with its type inference between two passes
of ours); anything else keeps Numba's refusal, which ``diagnostics`` words for the user."""

from __future__ import annotations

from numba.core.compiler import DefaultPassBuilder
from numba.core.compiler_machinery import FunctionPass, register_pass
from numba.core.typed_passes import NopythonTypeInference


#: Numba's implementations that return an array made from a pointer argument (a view: nothing
#: is allocated), which Numba's type inference refuses without its runtime: (module, qualname
#: prefix).  ``numba.carray(ptr, shape)`` / ``numba.farray`` in device code.
_VIEW_RETURNING = (("numba.np.arrayobj", "impl_carray.<locals>."),
                   ("numba.np.arrayobj", "impl_farray.<locals>."))


class _ReturnsViews:
    """A target context that lets Numba's type inference accept a returned array other than an
    argument (its check is skipped when Numba's runtime is on): only for the functions
    ``ViewsReturned`` picks."""

    enable_nrt = True

    def __init__(self, targetctx):
        self._targetctx = targetctx

    def __getattr__(self, name):
        return getattr(self._targetctx, name)


def _returns_views(func):
    where = (getattr(func, "__module__", None), getattr(func, "__qualname__", ""))
    return any(where[0] == module and where[1].startswith(prefix)
               for module, prefix in _VIEW_RETURNING)


#: Array methods whose result is a view of the array (no copy: nothing to allocate).
_VIEW_METHODS = frozenset({"reshape", "view", "transpose", "swapaxes"})


def returns_argument_views(func_ir):
    """Whether every value ``func_ir`` returns is one of its arguments or a view of one
    (indexing, slicing, ``.T``, ``.reshape`` / ``.view`` / ``.transpose`` / ``.swapaxes``, through
    any chain of those): then a returned array is memory the caller passed in, which a device
    function may return (``def row(a, i): return a[i]``) although Numba refuses every array
    return but an argument itself without its runtime.  A value that loops back on itself
    (``a = a[1:]`` in a loop) is a view if what enters the loop is; anything else is not."""
    from numba.core import ir as nir
    defs = {}
    returned = []
    for block in func_ir.blocks.values():
        for inst in block.body:
            if isinstance(inst, nir.Assign):
                defs.setdefault(inst.target.name, []).append(inst.value)
            elif isinstance(inst, nir.Return):
                returned.append(inst.value.name)
    known = {}

    def derived(name):
        if name not in known:
            # (met again inside its own definitions: a loop, whose entry decides; a wrong
            # guess only stands where the answer is already no)
            known[name] = True
            values = defs.get(name)
            known[name] = bool(values) and all(map(value_derived, values))
        return known[name]

    def value_derived(value):
        if isinstance(value, nir.Arg):
            return True
        if isinstance(value, nir.Var):
            return derived(value.name)
        if not isinstance(value, nir.Expr):
            return False
        if value.op in ("cast", "getitem", "static_getitem"):
            return derived(value.value.name)
        if value.op == "getattr":
            return value.attr == "T" and derived(value.value.name)
        if value.op == "phi":
            return all(derived(v.name) for v in value.incoming_values)
        if value.op == "call":
            methods = defs.get(value.func.name, ())
            return len(methods) == 1 and isinstance(methods[0], nir.Expr) and \
                methods[0].op == "getattr" and methods[0].attr in _VIEW_METHODS and \
                derived(methods[0].value.name)
        return False

    try:
        return bool(returned) and all(map(derived, returned))
    except RecursionError:                  # (a chain of thousands of assignments)
        return False


@register_pass(mutates_CFG=False, analysis_only=True)
class ViewsReturned(FunctionPass):
    """Before Numba's type inference: a function of ``_VIEW_RETURNING``, or one that returns
    only views of its arguments (``returns_argument_views``), is typed with ``_ReturnsViews``
    (``ViewsReturnedDone`` puts the target context back right after)."""

    _name = "gpureplace_views_returned"

    def __init__(self):
        FunctionPass.__init__(self)

    def run_pass(self, state):
        if _returns_views(state.func_id.func) or returns_argument_views(state.func_ir):
            state.targetctx = _ReturnsViews(state.targetctx)
        return False


@register_pass(mutates_CFG=False, analysis_only=True)
class ViewsReturnedDone(FunctionPass):
    _name = "gpureplace_views_returned_done"

    def __init__(self):
        FunctionPass.__init__(self)

    def run_pass(self, state):
        if isinstance(state.targetctx, _ReturnsViews):
            state.targetctx = state.targetctx._targetctx
        return False


def typed_passes(state):
    """Numba's typed pipeline, with Numba's type inference between ``ViewsReturned`` and
    ``ViewsReturnedDone``."""
    passes = []
    for cls, what in DefaultPassBuilder.define_typed_pipeline(state).passes:
        if cls is NopythonTypeInference:
            passes += [(ViewsReturned, "array views returned"), (cls, what),
                       (ViewsReturnedDone, "array views returned: done")]
        else:
            passes.append((cls, what))
    return passes
