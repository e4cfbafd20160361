"""The bindings compiled code depends on, and the cheap check a cell hook runs after each cell.

Every global a compiled function read is *tracked*: (namespace dict, name) -> (value seen,
fingerprint).  ``check()`` looks only at tracked bindings -- cost proportional to what kernels
depend on, not to the size of the namespace -- comparing identity first and the fingerprint only
when the object differs.  Any real change moves the world, so the next launch of each kernel
revalidates its own records (and recompiles exactly what changed).
"""

from __future__ import annotations

import builtins
import threading

from . import world
from .fingerprint import fingerprint

_MISSING = object()
_lock = threading.Lock()
_tracked = {}       # id(namespace dict) -> (namespace dict, {name: [value, fingerprint]})


class Change(tuple):
    """(namespace name, name, "redefined" | "deleted"), with the namespace dict as ``.namespace``."""

    def __new__(cls, ns_name, name, how, namespace):
        self = super().__new__(cls, (ns_name, name, how))
        self.namespace = namespace
        return self


def track(namespace, name, value, fp):
    with _lock:
        entry = _tracked.get(id(namespace))
        if entry is None or entry[0] is not namespace:
            entry = _tracked[id(namespace)] = (namespace, {})
        entry[1][name] = [value, fp]


def track_compiled(cf):
    """Track the globals and module attributes that compiled function ``cf`` read."""
    for rec in cf.global_reads:
        if rec.kind == "global":
            track(cf.pyfunc.__globals__, rec.name, rec.value, rec.fingerprint)
        elif rec.kind == "attr" and rec.owner is not None:
            track(vars(rec.owner), rec.attr, rec.value, rec.fingerprint)


def check():
    """Compare tracked bindings with their current values; move the world if any changed.

    Returns the changed bindings as ``(namespace name, name, "redefined" | "deleted")``.
    """
    changed = []
    bdict = vars(builtins)
    with _lock:
        for ns, names in _tracked.values():
            for name, entry in names.items():
                cur = ns.get(name, _MISSING)
                if cur is _MISSING:
                    cur = bdict.get(name, _MISSING)
                if cur is entry[0]:
                    continue
                fp = None if cur is _MISSING else fingerprint(cur)
                if cur is _MISSING or fp is None or fp != entry[1]:
                    changed.append(Change(ns.get("__name__", "?"), name,
                                          "deleted" if cur is _MISSING else "redefined", ns))
                    entry[1] = fp
                entry[0] = cur           # same meaning, new object: remember it (fast next time)
    if changed:
        world.bump()
    return changed


def clear():
    with _lock:
        _tracked.clear()
