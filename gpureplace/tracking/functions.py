"""Python functions changed in place: the code compiled code was built from, and whether it still is.

A function object can change without any name being rebound: IPython's ``%autoreload 2`` (and
code written by hand) assigns a new ``__code__``, ``__defaults__`` or ``__kwdefaults__`` to the
existing object, so that every reference to it -- a kernel's global, a name imported into the
notebook -- sees the new definition.  Identity then says nothing: each Python function that
compiled code was built from is remembered with those three objects as they were when it was
compiled (``note_compiled``), and

- ``changed_since_compiled(cf)`` answers for one compiled function (tracking/deps.py's check,
  and so the launch's revalidation, the front end's cache and the relink);
- ``check()`` answers for every such function at once, for the cell hook (tracking/bindings.py):
  two identity comparisons a function (code, defaults), in C loops, as the hook compares
  bindings.

A part that is another object is compared by content before it counts as a change (the
fingerprint of code and defaults): autoreload gives every function of a reloaded module a new
code object, and those whose text did not change (or only moved) must recompile nothing.
"""

from __future__ import annotations

import threading
import weakref
from operator import attrgetter, is_

from .fingerprint import function_parts_fingerprint, positions_fingerprint

_CODE = attrgetter("__code__")
_DEFAULTS = attrgetter("__defaults__")

_lock = threading.Lock()
#: compiled function (CompiledFunction, or a disk-loaded kernel's records) -> the _Parts of its
#: Python function when it was compiled
_compiled = weakref.WeakKeyDictionary()
#: id(function) -> (function, _Parts last seen by the cell hook)
_watched = {}
_bulk = None        # _watched as the cell hook compares it (None: to be rebuilt)


class _Parts:
    """A function's code, defaults and keyword defaults (the objects), and, once asked, the
    fingerprint of their content."""

    __slots__ = ("code", "defaults", "kwdefaults", "_fp", "lines")

    def __init__(self, fn, lines=False):
        self.code, self.defaults, self.kwdefaults = \
            fn.__code__, fn.__defaults__, fn.__kwdefaults__
        self._fp = False
        self.lines = lines       # compiled with line information: where the code is matters

    def same_objects(self, fn):
        return (fn.__code__ is self.code and fn.__defaults__ is self.defaults
                and fn.__kwdefaults__ is self.kwdefaults)

    def fingerprint(self):
        if self._fp is False:
            self._fp = function_parts_fingerprint(self.code, self.defaults, self.kwdefaults)
        return self._fp

    def same_meaning(self, fn):
        """Whether ``fn`` has these objects, or others with the same content (and, for code
        compiled with line information, at the same place in its file)."""
        if self.same_objects(fn):
            return True
        mine = self.fingerprint()
        if mine is None or mine != _Parts(fn).fingerprint():
            return False
        return not self.lines or fn.__code__ is self.code or \
            positions_fingerprint(fn.__code__) == positions_fingerprint(self.code)


def python_function(cf):
    """The Python function ``cf`` compiled (a plain function), or None."""
    fn = getattr(cf, "pyfunc", None)
    return fn if hasattr(fn, "__code__") and hasattr(fn, "__defaults__") else None


def note_compiled(cf):
    """Remember what ``cf``'s Python function is made of now, when its code has just been built
    (or, for a disk-loaded kernel, found to be this function's)."""
    fn = python_function(cf)
    if fn is None:
        return
    lines = has_lines(cf)
    with _lock:
        _compiled[cf] = _Parts(fn, lines)
        _watch(fn, lines)


def _watch(fn, lines):
    """Watch ``fn`` (with ``_lock`` held), noting ``lines`` on a watch that had none."""
    global _bulk
    seen = _watched.get(id(fn))
    if seen is None or seen[0] is not fn or (lines and not seen[1].lines):
        _watched[id(fn)] = (fn, _Parts(fn, lines))
        _bulk = None


def watch(fn, replacing=None):
    """Watch ``fn`` as a function compiled code was built from: a binding found bound to it in
    place of such a function (``replacing``) with the same meaning -- a reload's equal copy --
    is what that code now calls, so a later change of ``fn`` in place (autoreload's new
    ``__code__``) is one.  Returns whether ``fn`` is at another place in its file than
    ``replacing`` while code with line information was compiled from ``replacing``."""
    if not (hasattr(fn, "__code__") and hasattr(fn, "__defaults__")):
        return False
    with _lock:
        old = _watched.get(id(replacing)) if replacing is not None else None
        lines = old is not None and old[0] is replacing and old[1].lines
        _watch(fn, lines)
    return lines and moved(replacing, fn)


def moved(old, new):
    """Whether functions ``old`` and ``new`` (of the same meaning) are at different places."""
    return old.__code__ is not new.__code__ and \
        positions_fingerprint(old.__code__) != positions_fingerprint(new.__code__)


def has_lines(cf):
    """Whether ``cf``'s code names source lines (compiled with lineinfo or debug)."""
    return lines_in(getattr(cf, "options", None))


def lines_in(options):
    """Whether code compiled with ``options`` names source lines (``.loc``: lineinfo, debug)."""
    return bool(getattr(options, "lineinfo", False) or getattr(options, "debug", False))


def changed_since_compiled(cf):
    """Whether ``cf``'s Python function now has other code, defaults or keyword defaults than
    it was compiled from (another object of the same content is not a change, and is
    remembered: the next call compares identities again)."""
    parts = _compiled.get(cf)
    if parts is None:
        return False
    fn = cf.pyfunc
    if parts.same_objects(fn):
        return False
    if parts.same_meaning(fn):
        with _lock:
            _compiled[cf] = _Parts(fn, parts.lines)
        return False
    return True


def _build_bulk():
    return ([fn for fn, _ in _watched.values()], [p.code for _, p in _watched.values()],
            [p.defaults for _, p in _watched.values()])


def check():
    """The watched functions whose code, defaults or keyword defaults mean something else than
    at the last check (or at their compile); each is reported once."""
    global _bulk
    with _lock:
        bulk = _bulk
        if bulk is None:
            bulk = _bulk = _build_bulk()
        fns, codes, defaults = bulk
        # (by identity: equality would call a code object's deep comparison at every cell once
        # autoreload gave it an equal copy, and (1,) == (1.0,) while those defaults mean other
        # types.  Keyword defaults are not compared here: a device function has no keyword-only
        # parameters -- the front end refuses them -- and code given some is new code.)
        if all(map(is_, map(_CODE, fns), codes)) and all(map(is_, map(_DEFAULTS, fns), defaults)):
            return []
        changed = []
        for key, (fn, parts) in list(_watched.items()):
            if parts.same_objects(fn):
                continue
            if not parts.same_meaning(fn):
                changed.append(fn)
            _watched[key] = (fn, _Parts(fn, parts.lines))
        _bulk = None
        return changed


def retain(cfs, bound=()):
    """Stop watching every function that is neither the Python function of one of the compiled
    functions ``cfs`` (those still in use) nor among ``bound`` (the values tracked bindings
    hold: a reload's copy bound in place of one): no code in use was built from it."""
    global _bulk
    keep = {id(fn) for fn in map(python_function, cfs) if fn is not None}
    keep.update(id(v) for v in bound)
    with _lock:
        for key in [k for k in _watched if k not in keep]:
            del _watched[key]
            _bulk = None


def clear():
    global _bulk
    with _lock:
        _compiled.clear()
        _watched.clear()
        _bulk = None
