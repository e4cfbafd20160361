"""The relink: a function whose only change is a redefined (or stale) callee returning the same
type keeps its typed and lowered code; the callee compiles again and the call is renamed.  This is
what makes a recompile after redefining a helper cost the helper, not every caller above it."""

from __future__ import annotations

import inspect

from ..errors import CompileError
from ..tracking import bindings, deps
from ..tracking.fingerprint import fingerprint
from ..tracking.stats import counters
from . import resolve
from .callables import DeviceCallable
from .compiled import CompiledFunction
from .records import GlobalRead
from .target import compilers


def relink(hit, compile_device):
    """Reuse the lowered code of a stale function whose only changes are in what it calls.

    When a callee was redefined (a plain Python function bound to the same name, resolving
    through the context as before) or went stale itself, and the callee compiles again to the
    same return type, the caller's typed and lowered code is unchanged but for the callee's symbol:
    recompile the callees, rename the calls, keep the rest.  This is what makes a recompile after
    redefining a helper cost the helper, not every caller above it.  Returns the new
    CompiledFunction, or None when anything else changed (then the caller compiles afresh).
    """
    if hit.library is None or getattr(hit, "context_fp", None) is not None:
        return None
    if deps.changed_in_place(hit):
        return None                       # built from code (or callee defaults) since replaced
    if any(deps.resolution_changed(hit, res) for res in hit.resolutions):
        return None
    replaced, reads = {}, []
    for rec in hit.global_reads:
        if deps.read_changed(hit, rec) is None:
            reads.append(rec)
            continue
        now = deps.current_value(hit, rec)
        old_py, new_py = device_pyfunc(rec.value), device_pyfunc(now)
        if old_py is None or new_py is None or \
                not any(c.pyfunc is old_py for c in hit.callees):
            return None                   # a constant, a module, a kernel...: retype
        if inspect.signature(new_py) != inspect.signature(old_py):
            return None                   # the call folds its arguments (defaults) anew
        if _declared(rec.value) != _declared(now):
            return None                   # the call converts its arguments to other types
        for res in hit.resolutions:
            if res.host is rec.value and (res.start is False or
                                          deps.resolution_changed(hit, res, now)):
                return None               # the new function would resolve differently
        replaced[id(old_py)] = (rec.value, now, new_py)
        reads.append(GlobalRead(rec.kind, rec.namespace, rec.name, now, rec.lineno, rec.owner,
                                fingerprint(now)))
    callees, renames = [], {}
    for c in hit.callees:
        old_new = replaced.get(id(c.pyfunc))
        if old_new is None and deps.check(c) is None:
            callees.append(c)
            continue
        new_py = c.pyfunc if old_new is None else old_new[2]
        try:
            n = compile_device(new_py, c.context, c.mask, c.argtypes, c.options,
                               c.declared_restype)
        except CompileError:
            return None                   # the full compile reports it, in the caller's terms
        if n.restype != c.restype:
            return None                   # the caller's typing depends on it: retype
        if getattr(n, "written_params", {}).keys() != getattr(c, "written_params", {}).keys():
            return None                   # what the caller may pass it: checked anew
        if n.mangled_name != c.mangled_name:
            renames[c.mangled_name] = n.mangled_name
        callees.append(n)
    cf = CompiledFunction(hit.pyfunc, hit.context, hit.argtypes, hit.options)
    for attr in ("restype", "fndesc", "library", "type_annotation", "overrides_used",
                 "bad_calls", "mask", "constant_range_trips", "born"):
        setattr(cf, attr, getattr(hit, attr))
    cf.written_params = getattr(hit, "written_params", {})
    cf.global_reads = reads
    cf.callees = callees
    hosts = {id(old): new for old, new, _ in replaced.values()}
    cf.resolutions = [resolve.Resolution(hosts.get(id(r.host), r.host), r.start, r.candidates,
                                         r.line) for r in hit.resolutions]
    cf._ir_texts = [_rename_symbols(text, renames) for text in hit.ir_texts()]
    _, targetctx = compilers(cf.context)
    targetctx.insert_user_function(cf, cf.fndesc, [cf.library])
    bindings.track_compiled(cf)
    counters["relinks"] += 1
    return cf


def _declared(value):
    """The signatures a ``cuda.jit("sig", device=True)`` function declares (its callers
    convert their arguments to them), with their return types."""
    if not isinstance(value, DeviceCallable):
        return None
    return (tuple(str(s) for s in value.declared_signatures),
            sorted((str(k), str(r)) for k, r in value.declared_returns.items()))


def device_pyfunc(value):
    """The Python function a callable compiles from when device code calls it (resolve.py): a
    plain function, a ``cuda.jit`` function's, a Numba CPU dispatcher's; else None."""
    import inspect
    if inspect.isfunction(value):
        return value
    if isinstance(value, DeviceCallable):
        return value.py_func
    try:
        py = getattr(value, "py_func", None)
        if inspect.isfunction(py) and hasattr(value, "targetoptions"):
            return py
    except Exception:              # (a user's object whose __getattr__ raises KeyError...)
        pass
    return None


def _rename_symbols(text, renames):
    import re
    for old, new in renames.items():
        text = re.sub(r'@("?)' + re.escape(old) + r'(?![-\w$.])', lambda m: f"@{m.group(1)}{new}",
                      text)
    return text
