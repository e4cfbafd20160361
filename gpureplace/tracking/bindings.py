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

A cell that changes something costs what changed, not what is tracked: each namespace's bulk view
(``_View``) is kept up to date name by name -- by ``track`` and by the check itself, which compares
only the names whose identity differs -- never rebuilt over every tracked name; and ``retain``
(the collection's part here, jit/collect.py) counts the readers of each binding, so that it looks
only at the compiled functions that came or went since its last call and at the bindings tracked
since (``_readers``, ``_needed``, ``_fresh``).
"""

from __future__ import annotations

import builtins
import threading
import weakref
from itertools import compress, repeat
from operator import is_not, itemgetter
from types import FunctionType, ModuleType

from . import functions, world
from .contents import snapshot as take_snapshot
from .fingerprint import fingerprint

_MISSING = object()
_STALE = object()   # a _View's fetch while its plain names changed (made again when next used)
_lock = threading.Lock()
_tracked = {}       # id(namespace dict) -> (namespace dict, {name: [value, fingerprint, snapshot]})
_cells = {}         # id(closure cell) -> (cell, function name, variable, [value, fp, snapshot])
_views = {}         # id(namespace dict) -> its _View (kept up to date with every entry)
#: What ``retain`` knows of the compiled functions it was last given: id(cf) -> (cf, its
#: records, its Python function's code, the bindings it reads: (id(namespace), name) or
#: (id(cell), None)); ``_needed``: how many of them read each binding; ``_fresh``: the bindings
#: tracked since (each looked at by the next ``retain``: still read, or forgotten).
_readers = {}
_needed = {}
_fresh = set()
#: The compiled function that tracked each binding of ``_fresh`` (weakly), and the bindings a
#: ``retain`` left for the next: read by none it was given while the compiled function that
#: tracked them lived on -- a compile another thread finished just after the live code was
#: listed (jit/collect.py), whose code the next call is given
_trackers = {}
_waiting = set()
#: The functions tracked bindings hold: id -> [function, how many entries hold it] (what
#: tracking/functions.py keeps watching besides compiled code's own functions: ``retain``'s
#: ``bound``).  Only functions: tracking/functions.py watches nothing else.
_functions = {}
#: Moves whenever something the collection looks at changed here: a binding tracked, or a
#: function no tracked binding (or closure variable) holds any more (``activity()``).
_activity = [0]


class _View:
    """A namespace's tracked bindings as ``check`` reads them in bulk: the names bound in the
    namespace with no arrays to compare (``plain``) and the values seen for them, fetched by one
    ``itemgetter`` and compared by identity in C loops -- under a twentieth of a microsecond per
    binding (``map(ns.get, ...)`` took twice that in a large namespace, a Python loop eight
    times); the rest (arrays, names found in builtins) one at a time (``others``).

    It is kept up to date one name at a time (``place``, ``discard``): a cell that changes one
    name, or a compile that tracks a hundred, costs those names, not the namespace's thousands
    of tracked ones.  ``plain`` is in no order (a name leaves it by swapping the last one into
    its place); ``rank`` orders what a check reports as the entries are ordered."""

    __slots__ = ("names", "plain", "seen", "pos", "others", "rank", "next_rank", "fetch")

    def __init__(self, ns, names):
        self.names = names                  # (whose view this is: ids of dicts are reused)
        self.plain, self.seen, self.pos, self.others, self.rank = [], [], {}, {}, {}
        for i, (name, entry) in enumerate(names.items()):
            self.rank[name] = i
            if entry[2] is None and name in ns:
                self.pos[name] = len(self.plain)
                self.plain.append(name)
                self.seen.append(entry[0])
            else:
                self.others[name] = None
        self.next_rank = len(names)
        self.fetch = _STALE

    def place(self, ns, name, entry):
        """Bring ``name`` up to date with its ``entry``: plain, seen bound to ``entry``'s value,
        while it holds no arrays and is bound in ``ns``; else looked at one at a time."""
        if name not in self.rank:
            self.rank[name] = self.next_rank
            self.next_rank += 1
        i = self.pos.get(name)
        if entry[2] is None and name in ns:
            if i is not None:
                self.seen[i] = entry[0]
                return
            self.others.pop(name, None)
            self.pos[name] = len(self.plain)
            self.plain.append(name)
            self.seen.append(entry[0])
            self.fetch = _STALE
        else:
            if i is not None:
                self._unplain(name, i)
            self.others[name] = None

    def discard(self, name):
        i = self.pos.get(name)
        if i is not None:
            self._unplain(name, i)
        self.others.pop(name, None)
        self.rank.pop(name, None)

    def _unplain(self, name, i):
        last = len(self.plain) - 1
        if i != last:
            moved = self.plain[i] = self.plain[last]
            self.seen[i] = self.seen[last]
            self.pos[moved] = i
        self.plain.pop()
        self.seen.pop()
        del self.pos[name]
        self.fetch = _STALE

    def differing(self, ns):
        """The plain names no longer bound to the object seen, each with what it is bound to now
        (``_MISSING``: deleted); [] in the common case, found in C loops either way."""
        fetch = self.fetch
        if fetch is _STALE:
            # itemgetter of one name gives the value itself, not a 1-tuple; a dict subclass
            # may have a __missing__ that a lookup by [] would run (and which could insert the
            # name).
            fetch = self.fetch = (itemgetter(*self.plain) if len(self.plain) > 1 and
                                  type(ns) is dict else None)
        if fetch is None:
            current = list(map(ns.get, self.plain, repeat(_MISSING)))
        else:
            try:
                current = fetch(ns)
            except KeyError:                # a name deleted
                current = list(map(ns.get, self.plain, repeat(_MISSING)))
        if not any(map(is_not, current, self.seen)):
            return []
        return [(name, ns.get(name, _MISSING))
                for name in compress(self.plain, map(is_not, current, self.seen))]


def _hold(value):
    """A tracked entry now holds ``value`` (with ``_lock`` held)."""
    if isinstance(value, FunctionType):
        held = _functions.get(id(value))
        if held is None:
            _functions[id(value)] = [value, 1]
        else:
            held[1] += 1


def _release(value):
    """A tracked entry no longer holds ``value`` (with ``_lock`` held).  A function no entry
    holds any more may be a watched one that nothing else keeps (a reload's copy, bound over):
    the next collection walks (a function newly held only keeps more)."""
    if isinstance(value, FunctionType):
        held = _functions.get(id(value))
        if held is not None:
            held[1] -= 1
            if held[1] <= 0:
                del _functions[id(value)]
                _activity[0] += 1


def _update(entry, cur):
    """``_compare``, keeping ``_functions`` true to what ``entry`` holds after it."""
    before = entry[0]
    try:
        return _compare(entry, cur)
    finally:
        if entry[0] is not before:
            _release(before)
            _hold(entry[0])


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
    key = id(namespace)
    with _lock:
        entry = _tracked.get(key)
        if entry is None or entry[0] is not namespace:
            entry = _tracked[key] = (namespace, {})
        names = entry[1]
        old = names.get(name)
        new = names[name] = [value, fp, snap]
        if old is not None:
            _release(old[0])
        _hold(value)
        _fresh.add((key, name))
        _activity[0] += 1
        view = _views.get(key)
        if view is not None and view.names is names:
            view.place(namespace, name, new)
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
    tracker = weakref.ref(cf)
    for where, name, rec in _places(cf):
        if name is not None:
            track(where, name, rec.value, rec.fingerprint, rec.snapshot)
            with _lock:
                _trackers[(id(where), name)] = tracker
        else:
            with _lock:
                held = _cells.get(id(where))
                _cells[id(where)] = (where, cf.pyfunc.__qualname__, rec.name,
                                     [rec.value, rec.fingerprint, rec.snapshot])
                if held is not None:
                    _release(held[3][0])
                _hold(rec.value)
                _fresh.add((id(where), None))
                _trackers[(id(where), None)] = tracker
                _activity[0] += 1
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

    Returns the changed bindings as ``(namespace name, name, how)``.  Each namespace's plain
    names are compared by identity in C loops; only those that differ, and the others (arrays,
    names found in builtins), are looked at one at a time, and the view is brought up to date
    for those alone.
    """
    bdict = vars(builtins)
    with _lock:
        changed, _pending[:] = list(_pending), []
        for key, (ns, names) in _tracked.items():
            view = _views.get(key)
            if view is None or view.names is not names:
                view = _views[key] = _View(ns, names)
            found = view.differing(ns)
            for name in view.others:
                entry = names[name]
                cur = ns.get(name, _MISSING)
                if cur is _MISSING:
                    cur = bdict.get(name, _MISSING)
                if cur is entry[0] and entry[2] is None:
                    continue
                found.append((name, cur))
            if not found:
                continue                            # the common case, kept cheap
            if len(found) > 1:                      # (reported in the entries' order)
                rank = view.rank
                found.sort(key=lambda item: rank[item[0]])
            ns_name = ns.get("__name__", "?")
            for name, cur in found:
                if cur is _MISSING:
                    cur = bdict.get(name, _MISSING)
                entry = names[name]
                how = _update(entry, cur)
                view.place(ns, name, entry)
                if how is not None:
                    changed.append(Change(ns_name, name, how, ns))
        for cell, owner, name, entry in _cells.values():
            try:
                cur = cell.cell_contents
            except ValueError:
                cur = _MISSING
            if cur is entry[0] and entry[2] is None:
                continue
            how = _update(entry, cur)
            if how is not None:
                changed.append(Change(f"closure of {owner}", name, how, None))
    for fn in functions.check():
        changed.append(Change(fn.__module__, fn.__qualname__, "changed in place",
                              fn.__globals__, fn))
    if changed:
        world.bump()
    return changed


def _reads(cf):
    """The bindings compiled function ``cf`` reads, as ``retain`` counts them."""
    return tuple((id(where), name) for where, name, _ in _places(cf))


def retain(cfs):
    """Forget every tracked binding and closure cell that none of the compiled functions
    ``cfs`` (those still in use: tracking/../jit/collect.py) read: the code that read them is
    gone, and the values held (an old array and its snapshot, a dropped namespace) go with it.

    The readers of each binding are counted from one call to the next: a call looks at the
    records of the compiled functions that came (or whose records changed) since the last, the
    bindings of those that went, and the bindings tracked since -- not at every binding every
    compiled function reads.  (The compiled functions given are held until the next call, which
    a collection makes anyway while they are in use.)"""
    current = {id(cf): cf for cf in cfs}
    with _lock:
        waited = set(_waiting)
        _waiting.clear()
        trackers = dict(_trackers)
        _trackers.clear()
        candidates = set(_fresh) | waited
        _fresh.clear()
        for key in [k for k in _readers if k not in current]:
            _unread(_readers.pop(key)[3], candidates)
        for key, cf in current.items():
            held = _readers.get(key)
            records = getattr(cf, "global_reads", ())
            pyfunc = getattr(cf, "pyfunc", None)
            code = getattr(pyfunc, "__code__", None)
            if held is not None and held[0] is cf and held[1] is records and held[2] is code:
                continue
            reads = _reads(cf)
            for read in reads:
                _needed[read] = _needed.get(read, 0) + 1
            if held is not None:
                _unread(held[3], candidates)
            _readers[key] = (cf, records, code, reads)
        for read in candidates:
            if read in _needed:
                continue
            ref = trackers.get(read)
            tracker = ref() if ref is not None else None
            if tracker is not None and id(tracker) not in current and read not in waited:
                _waiting.add(read)            # (its compile's code: given to the next call)
                _activity[0] += 1             # (which the next collection then walks for)
                continue
            _forget(read)


def _unread(reads, candidates):
    for read in reads:
        left = _needed[read] - 1
        if left:
            _needed[read] = left
        else:
            del _needed[read]
            candidates.add(read)


def _forget(read):
    """Stop tracking one binding (``(id(namespace), name)``) or closure cell (``(id(cell),
    None)``), with ``_lock`` held."""
    key, name = read
    if name is None:
        held = _cells.pop(key, None)
        if held is not None:
            _release(held[3][0])
        return
    tracked = _tracked.get(key)
    if tracked is None:
        return
    names = tracked[1]
    entry = names.pop(name, None)
    if entry is None:
        return
    _release(entry[0])
    if not names:
        del _tracked[key]
        _views.pop(key, None)
        return
    view = _views.get(key)
    if view is not None and view.names is names:
        view.discard(name)


def bound_functions():
    """The functions tracked bindings and cells hold now (tracking/functions.py keeps watching
    those among the functions bound in place of those compiled code was built from): what
    ``tracked_values()`` holds that tracking/functions.py can watch, without a walk over every
    tracked binding."""
    with _lock:
        return [held[0] for held in _functions.values()]


def activity():
    """A number that moves whenever a binding is tracked, or a function is no longer held by
    any tracked binding or closure variable: what ``retain`` and the watched functions'
    collection could act on (jit/collect.py skips a walk while nothing moved it, nor anything
    else)."""
    return _activity[0]


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
        _readers.clear()
        _needed.clear()
        _fresh.clear()
        _trackers.clear()
        _waiting.clear()
        _functions.clear()
        _activity[0] += 1
    functions.clear()
