"""The bindings compiled code depends on, and the cheap check a cell hook runs after each cell.

Every global a compiled function read is *tracked*: (namespace dict, name) -> (value seen,
fingerprint, snapshot of the arrays in it); so is every closure cell it read.  ``check()`` looks
only at tracked bindings -- cost proportional to what kernels depend on, not to the size of the
namespace -- comparing identity first, the fingerprint only when the object differs, and the
contents of arrays always (an array changes in place: ``G[1] = 7``; see tracking/contents.py).
Any real change moves the world, so the next launch of each kernel revalidates its own records
(and recompiles exactly what changed).  A function changed in place (``%autoreload 2`` gives it
new code, bound to no new name) is found by tracking/functions.py, which watches every function
compiled code was built from the same way: identities in C loops, content only when one differs.
"""

from __future__ import annotations

import builtins
import threading
from itertools import repeat
from operator import is_, itemgetter
from types import FunctionType, ModuleType

from . import functions, world
from .contents import snapshot as take_snapshot
from .fingerprint import fingerprint

_MISSING = object()
_lock = threading.Lock()
_tracked = {}       # id(namespace dict) -> (namespace dict, {name: [value, fingerprint, snapshot]})
_cells = {}         # id(closure cell) -> (cell, function name, variable, [value, fp, snapshot])
_views = {}         # id(namespace dict) -> its _View (dropped whenever an entry may change)


class _View:
    """A namespace's tracked bindings as ``check`` reads them in bulk: the names bound in the
    namespace with no arrays to compare (``plain``) and the values seen for them, fetched by one
    ``itemgetter`` and compared by identity in C loops -- under a twentieth of a microsecond per
    binding (``map(ns.get, ...)`` took twice that in a large namespace, a Python loop eight
    times); the rest (arrays, names found in builtins) one at a time."""

    __slots__ = ("names", "plain", "seen", "others", "fetch")

    def __init__(self, ns, names):
        self.names = names                  # (whose view this is: ids of dicts are reused)
        self.plain, self.seen, self.others = [], [], []
        for name, entry in names.items():
            if entry[2] is None and name in ns:
                self.plain.append(name)
                self.seen.append(entry[0])
            else:
                self.others.append(name)
        # itemgetter of one name gives the value itself, not a 1-tuple; a dict subclass may
        # have a __missing__ that a lookup by [] would run (and which could insert the name).
        self.fetch = (itemgetter(*self.plain) if len(self.plain) > 1 and type(ns) is dict
                      else None)

    def unchanged(self, ns):
        """Whether every plain name is still bound to the object seen."""
        if self.fetch is None:
            return all(map(is_, map(ns.get, self.plain, repeat(_MISSING)), self.seen))
        try:
            current = self.fetch(ns)
        except KeyError:                    # a name deleted: the caller looks at each name
            return False
        return all(map(is_, current, self.seen))


class Change(tuple):
    """(namespace name, name, how: "redefined", "deleted", "changed in place", "imported
    again" or "moved"), with the namespace dict as ``.namespace`` (None for a closure variable)
    and, for a function whose code was changed in place, the function as ``.function``."""

    def __new__(cls, ns_name, name, how, namespace, function=None):
        self = super().__new__(cls, (ns_name, name, how))
        self.namespace = namespace
        self.function = function
        return self


_pending = []       # changes a compile found while tracking (reported by the next check)
#: Whether something reads ``check()``'s answers after each cell (the IPython extension, while
#: loaded): only then are the changes a compile found kept for it to report.  Elsewhere nothing
#: would take them, and each holds its namespace.
reporting = False


def track(namespace, name, value, fp, snap=None):
    """Track ``namespace[name]`` as compiled code read it: ``value``, its fingerprint and the
    snapshot of its arrays.  A binding already tracked with another meaning (a cell redefined a
    helper and, before its end, compiled code reading the new one) moves the world now: the
    code compiled against the old meaning is stale, and the end-of-cell check, which compares
    with what is tracked, would no longer see the change."""
    with _lock:
        entry = _tracked.get(id(namespace))
        if entry is None or entry[0] is not namespace:
            entry = _tracked[id(namespace)] = (namespace, {})
        old = entry[1].get(name)
        entry[1][name] = [value, fp, snap]
        _views.pop(id(namespace), None)
    if old is not None:
        _note_replaced(old, value, namespace.get("__name__", "?"), name, namespace)


def _note_replaced(old, value, ns_name, name, namespace):
    """Move the world if ``value`` does not mean what the tracked entry ``old`` saw."""
    if old[0] is value and old[2] is None:
        return                                  # the common case: read again, unchanged
    how = _compare(old, value)
    if how is not None:
        if reporting:
            with _lock:
                _pending.append(Change(ns_name, name, how, namespace))
        world.bump()


def _places(cf):
    """Where each binding compiled function ``cf`` read lives: ``(namespace dict, name, rec)``
    for a global or a module attribute, ``(closure cell, None, rec)`` for a closure variable."""
    pyfunc = getattr(cf, "pyfunc", None)
    for rec in getattr(cf, "global_reads", ()):
        if rec.kind == "global" and pyfunc is not None:
            yield pyfunc.__globals__, rec.name, rec
        elif rec.kind == "attr" and rec.owner is not None:
            yield vars(rec.owner), rec.attr, rec
        elif rec.kind == "freevar" and pyfunc is not None:
            try:
                yield pyfunc.__closure__[pyfunc.__code__.co_freevars.index(rec.name)], None, rec
            except (ValueError, IndexError, TypeError):
                pass


def track_compiled(cf):
    """Track the globals, module attributes and closure variables that compiled function ``cf``
    read, and the code, defaults and keyword defaults of its own Python function."""
    functions.note_compiled(cf)
    for where, name, rec in _places(cf):
        if name is not None:
            track(where, name, rec.value, rec.fingerprint, rec.snapshot)
        else:
            with _lock:
                held = _cells.get(id(where))
                _cells[id(where)] = (where, cf.pyfunc.__qualname__, rec.name,
                                     [rec.value, rec.fingerprint, rec.snapshot])
            if held is not None and held[0] is where:
                _note_replaced(held[3], rec.value, f"closure of {held[1]}", rec.name, None)


def _compare(entry, cur):
    """None if ``cur`` means what ``entry`` saw; else how it changed.  Brings ``entry`` up to
    date either way (a new object of the same meaning is remembered: fast next time)."""
    value, fp, snap = entry
    if cur is value:
        if snap is None or snap.same_as(cur):
            return None
        entry[2] = take_snapshot(cur)
        return "changed in place"
    entry[0] = cur
    if cur is _MISSING:
        entry[1], entry[2] = None, None
        return "deleted"
    if isinstance(value, ModuleType) and isinstance(cur, ModuleType):
        # a module imported again (``del sys.modules[name]; import name``): same name, other
        # attributes -- what compiled code read of the old one says nothing of the new one
        entry[1], entry[2] = fingerprint(cur), None
        return "imported again"
    try:
        new_fp = fingerprint(cur)
        same = new_fp is not None and new_fp == fp and (snap is None or snap.same_as(cur))
        if not same:
            entry[1], entry[2] = new_fp, take_snapshot(cur)
        elif isinstance(cur, FunctionType) and functions.watch(cur, value):
            # (what the code calls now, so its in-place changes count; moved, where code with
            # line information names its lines)
            return "moved"
    except Exception:
        # (a user's object that fails being looked at: taken as redefined, and compared by
        # identity from now on; the other bindings are still checked)
        entry[1], entry[2] = None, None
        return "redefined"
    return None if same else "redefined"


def check():
    """Compare tracked bindings with their current values; move the world if any changed.

    Returns the changed bindings as ``(namespace name, name, how)``.
    """
    bdict = vars(builtins)
    with _lock:
        changed, _pending[:] = list(_pending), []
        for key, (ns, names) in _tracked.items():
            view = _views.get(key)
            if view is None or view.names is not names:
                view = _views[key] = _View(ns, names)
            if view.unchanged(ns):
                todo = view.others                 # the common case, kept cheap
            else:
                todo = names
                del _views[key]
            for name in todo:
                entry = names[name]
                cur = ns.get(name, _MISSING)
                if cur is _MISSING:
                    cur = bdict.get(name, _MISSING)
                if cur is entry[0] and entry[2] is None:
                    continue
                how = _compare(entry, cur)
                if how is not None:
                    changed.append(Change(ns.get("__name__", "?"), name, how, ns))
                    _views.pop(key, None)
        for cell, owner, name, entry in _cells.values():
            try:
                cur = cell.cell_contents
            except ValueError:
                cur = _MISSING
            if cur is entry[0] and entry[2] is None:
                continue
            how = _compare(entry, cur)
            if how is not None:
                changed.append(Change(f"closure of {owner}", name, how, None))
    for fn in functions.check():
        changed.append(Change(fn.__module__, fn.__qualname__, "changed in place",
                              fn.__globals__, fn))
    if changed:
        world.bump()
    return changed


def retain(cfs):
    """Forget every tracked binding and closure cell that none of the compiled functions
    ``cfs`` (those still in use: tracking/../jit/collect.py) read: the code that read them is
    gone, and the values held (an old array and its snapshot, a dropped namespace) go with it."""
    needed, cells = {}, set()
    for cf in cfs:
        for where, name, _ in _places(cf):
            if name is not None:
                needed.setdefault(id(where), set()).add(name)
            else:
                cells.add(id(where))
    with _lock:
        for key in list(_tracked):
            names = needed.get(key)
            entries = _tracked[key][1]
            if not names:
                del _tracked[key]
                _views.pop(key, None)
                continue
            for name in [n for n in entries if n not in names]:
                del entries[name]
                _views.pop(key, None)
        for key in [k for k in _cells if k not in cells]:
            del _cells[key]


def tracked_values():
    """The values the tracked bindings and cells hold now (functions bound in place of those
    compiled code was built from among them: tracking/functions.py keeps watching those)."""
    with _lock:
        out = [entry[0] for _, names in _tracked.values() for entry in names.values()]
        out += [entry[0] for _, _, _, entry in _cells.values()]
    return out


def clear():
    with _lock:
        _pending.clear()
        _tracked.clear()
        _cells.clear()
        _views.clear()
    functions.clear()
