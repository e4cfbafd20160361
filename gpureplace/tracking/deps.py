"""Staleness, decided in one place: whether compiled code still matches the current bindings.

A compiled function stays valid while every global it read still has the same fingerprint (or is
the very same object) and, for arrays, the contents it was compiled against; every callable it
resolved through its context resolves to the same override (or still to none); and every device
function it calls is itself valid.  Everything that reuses compiled code asks here: a launch's
in-memory check (``revalidate``), the relink of a function whose callees alone changed
(``read_changed``, ``resolution_changed``), the disk cache when it loads a kernel recorded in
another process (``read_changed`` on its records), and the IPython extension's summary of what a
cell's changes invalidate (``dependents``).
"""

from __future__ import annotations

import builtins
import sys
import types

from ..errors import CompileError, is_library_file
from . import functions, world
from .fingerprint import fingerprint
from .names import qualified_name
from .stats import counters

MISSING = object()
#: The value of a record read back from disk: never the current object, so only its fingerprint
#: decides (``read_changed``).
UNSEEN = object()


class Stale:
    """Why a compiled function no longer matches the current bindings."""

    def __init__(self, cf, what, read=None, deleted=False):
        self.cf = cf
        self.what = what
        self.read = read
        self.deleted = deleted

    def __str__(self):
        return f"{self.cf.qualname}: {self.what}"


def current_value(cf, rec):
    """The value that the name of ``rec`` has now, seen from ``cf``'s function, or MISSING."""
    if rec.kind == "global":
        g = cf.pyfunc.__globals__
        if rec.name in g:
            return g[rec.name]
        b = g.get("__builtins__", builtins)
        b = b if isinstance(b, dict) else vars(b)
        return b.get(rec.name, MISSING)
    if rec.kind == "attr":
        return getattr(rec.owner, rec.attr, MISSING)
    if rec.kind == "freevar":
        code = cf.pyfunc.__code__
        try:
            cell = cf.pyfunc.__closure__[code.co_freevars.index(rec.name)]
            return cell.cell_contents
        except (ValueError, IndexError, TypeError):
            return MISSING
    return MISSING


#: id(function) -> (function, world age): host functions whose device meaning given through
#: Numba's registry (a ``numba.extending.overload`` of them) was defined again at that age
#: (``overloads_redefined``); code compiled before then that read them is stale.
_redefined_overloads = {}


def overloads_redefined(functions):
    """Record that the Numba ``@overload`` of each of ``functions`` was defined again (a cell
    run again): the world moves, and code compiled before that read one of them is stale."""
    if not functions:
        return
    age = world.bump()
    for fn in functions:
        _redefined_overloads[id(fn)] = (fn, age)


def read_changed(cf, rec):
    """None when the binding ``rec`` recorded (seen from ``cf``'s function) still means what it
    meant; else a ``Stale`` saying how it changed."""
    now = current_value(cf, rec)
    if _redefined_overloads:
        redefined = _redefined_overloads.get(id(now))
        if redefined is not None and redefined[0] is now and \
                getattr(cf, "born", -1) < redefined[1]:      # (-1: records from disk)
            return Stale(cf, f"the overload of {rec.name!r} (line {rec.lineno}) was defined "
                             f"again", rec)
    if now is rec.value:
        if rec.snapshot is None or rec.snapshot.same_as(now):
            return None
        return Stale(cf, f"{rec.name!r} (line {rec.lineno}) was changed in place", rec)
    if now is MISSING:
        return Stale(cf, f"{rec.name!r} (line {rec.lineno}) is no longer defined", rec, True)
    if isinstance(now, types.ModuleType) and isinstance(rec.value, types.ModuleType):
        # (a module fingerprints by its name: this one was imported again, and what the code
        # read of the old one says nothing of it)
        return Stale(cf, f"{rec.name!r} (line {rec.lineno}) is module {now.__name__} imported "
                         f"again", rec)
    if rec.fingerprint is None or fingerprint(now) != rec.fingerprint or (
            rec.snapshot is not None and not rec.snapshot.same_as(now)):
        return Stale(cf, f"{rec.name!r} (line {rec.lineno}) was redefined", rec)
    if isinstance(now, types.FunctionType) and isinstance(rec.value, types.FunctionType) and \
            functions.has_lines(cf) and functions.moved(rec.value, now):
        return Stale(cf, f"{rec.name!r} (line {rec.lineno}) moved in its file (the code names "
                         f"its lines)", rec)
    return None


def check(cf, age=None, _seen=None):
    """None when ``cf`` and everything it calls are still valid, else a ``Stale``."""
    age = world.age if age is None else age
    if cf.checked_age == age:
        return None
    seen = _seen if _seen is not None else set()
    if id(cf) in seen:
        return None
    seen.add(id(cf))
    if functions.changed_since_compiled(cf):
        return Stale(cf, f"{cf.pyfunc.__qualname__} was changed in place (its code or defaults "
                         f"replaced)")
    for rec in cf.global_reads:
        stale = read_changed(cf, rec)
        if stale is not None:
            return stale
    ctx_fp = getattr(cf, "context_fp", None)
    if ctx_fp is not None:
        if cf.context.fingerprint() != ctx_fp:
            return Stale(cf, f"the overrides of context {cf.context.name!r} changed")
    for res in cf.resolutions:
        if resolution_changed(cf, res):
            return Stale(cf, f"the override of {qualified_name(res.host)} in context "
                             f"{cf.context.name!r} changed")
    for callee in cf.callees:
        stale = check(callee, age, seen)
        if stale is not None:
            return stale
    cf.checked_age = age
    return None


def revalidate(record, cf, name):
    """The in-memory check of a launch: None when ``cf`` (the compiled code of ``record``, a
    specialisation) still matches the current bindings -- ``record.world`` is then stamped with
    the world age, so the next launch skips this -- else the ``Stale`` that says why.  A
    dependency that was deleted raises the error the launch of ``name`` shows."""
    counters["revalidations"] += 1
    age = world.age
    stale = check(cf, age)
    if stale is None:
        record.world = age
        return None
    if stale.deleted:
        raise stale_error(name, stale)
    return stale


def changed_in_place(cf):
    """Whether ``cf``'s Python function, or that of a function it calls directly, was changed in
    place since it was compiled (its code, defaults or keyword defaults replaced, as
    ``%autoreload 2`` does).  A relink must then not keep ``cf``'s lowered code: it was built
    from the old code, or typed its calls with the callee's old defaults, and the objects it
    would compare are the same before and after."""
    return functions.changed_since_compiled(cf) or any(
        functions.changed_since_compiled(c) for c in cf.callees)


def reads_binding(cf, change):
    """Whether ``cf`` or a function it calls read the binding ``change`` (a ``bindings.Change``),
    or, for a function changed in place, compiled it."""
    fn = getattr(change, "function", None)
    for each in cf.closure():
        if fn is not None and each.pyfunc is fn:
            return True
        for rec in each.global_reads:
            if rec.kind == "global" and rec.name == change[1] and \
                    each.pyfunc.__globals__ is change.namespace:
                return True
            if rec.kind == "attr" and rec.attr == change[1] and rec.owner is not None and \
                    vars(rec.owner) is change.namespace:
                return True
    return False


def dependents(functions, changed):
    """Names of ``functions`` (``cuda.jit`` functions: ``.compiled_functions()``) whose compiled
    code read one of the ``changed`` bindings (``bindings.check()``'s answer)."""
    hits = set()
    for fn in functions:
        if any(reads_binding(cf, change) for cf in fn.compiled_functions() for change in changed):
            hits.add(fn.__qualname__)
    return sorted(hits)


def overload_dependents(functions, redefined):
    """Names of ``functions`` (as ``dependents``) whose compiled code read one of the host
    functions ``redefined`` (their Numba ``@overload`` defined again)."""
    ids = {id(fn) for fn in redefined}
    return sorted({fn.__qualname__ for fn in functions if ids and any(
        id(rec.value) in ids for cf in fn.compiled_functions() for each in cf.closure()
        for rec in each.global_reads)})


def resolution_changed(cf, res, host=None):
    """Whether ``host`` (default: the callable ``res`` recorded) now resolves in ``cf``'s context
    to other candidates than ``res`` found.  Resolutions made with the host masked (inside its own
    override) are not looked up again."""
    if res.start is False:
        return False
    return cf.context.candidates(res.host if host is None else host,
                                 start=res.start) != res.candidates


def stale_error(kernel_name, stale):
    """The error a launch raises when a dependency was deleted."""
    rec = stale.read
    return CompileError(
        f"{rec.name!r}, used by {stale.cf.qualname} at line {rec.lineno}, is no longer defined; "
        f"define it again (or change the code that uses it) before launching {kernel_name}",
        function=stale.cf.pyfunc.__qualname__, filename=stale.cf.pyfunc.__code__.co_filename,
        lineno=rec.lineno,
        chain=tuple(dict.fromkeys((kernel_name, stale.cf.pyfunc.__qualname__))))


def describe(cf):
    """``{"functions": [...], "globals": [...], "overrides": [...]}`` for ``cf`` and its callees.

    Each global says whether it is ``library``: a builtin, a module, or an attribute of a module
    of the standard library or an installed package (``math.sin``, ``cuda.grid``) -- names a
    notebook does not redefine, which ``%cuda_deps`` leaves out.  The user's own globals and the
    attributes of the user's modules are not."""
    functions, globals_, overrides = [], [], []
    for each in cf.closure():
        functions.append(each.qualname)
        for rec in each.global_reads:
            stale = read_changed(each, rec)
            globals_.append({"function": each.qualname, "kind": rec.kind,
                             "namespace": rec.namespace, "name": rec.name, "line": rec.lineno,
                             "changed": stale is not None,
                             "deleted": stale is not None and stale.deleted,
                             "library": _is_library(each, rec)})
        for host, ovr in each.overrides_used:
            overrides.append({"function": each.qualname, "host": qualified_name(host),
                              "context": ovr.context.name,
                              "impl": qualified_name(ovr.impl)})
    return {"functions": functions, "globals": globals_, "overrides": overrides}


def _is_library(cf, rec):
    """Whether the binding ``rec`` (read by ``cf``) is one only library code provides."""
    if rec.kind == "attr":
        owner = rec.owner if rec.owner is not None else sys.modules.get(rec.namespace)
        return owner is not None and _library_module(owner)
    value = current_value(cf, rec)
    if isinstance(value, types.ModuleType):
        return True                     # ``math``, ``cuda``, ``np``: what a module binds
    return rec.kind == "global" and value is not MISSING and \
        rec.name not in cf.pyfunc.__globals__      # found among the builtins


def _library_module(module):
    """A module of the standard library, of an installed package or of gpureplace itself."""
    name = getattr(module, "__name__", "") or ""
    if name == "__main__":
        return False
    if name.split(".")[0] in sys.stdlib_module_names or name.split(".")[0] == "gpureplace":
        return True
    path = getattr(module, "__file__", None)
    return not path or is_library_file(path)       # (no file: built into the interpreter)
