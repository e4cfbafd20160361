"""Which ``cuda.jit`` function stands under each name now: every live gpureplace function, in
order of creation, and the latest definition of each (module, qualified name) -- a re-run cell
or a reloaded module defines a name again.  Recompile ahead (ahead.py) prepares the newest
first and skips what was replaced; graphs and prepared launches follow a kernel redefined
under its name (``current_definition``)."""

from __future__ import annotations

import itertools
import threading
import weakref

from ..config import launch_setting_listeners
from ..errors import LaunchError
from ..tracking import world

_definitions = {}              # (module, qualname) -> weakref to the latest definition
_live = weakref.WeakSet()      # every GPUFunction (the IPython extension reports on them)
_births = itertools.count()
_last_birth = [-1]


_live_lock = threading.RLock()  # (a WeakSet listed while another thread adds to it raises)


def register(fn):
    """Record a new gpureplace function; returns its creation number."""
    with _live_lock:
        _live.add(fn)
    _last_birth[0] = born = next(_births)
    return born


def latest_birth():
    """The creation number of the newest ``cuda.jit`` function (-1 before the first)."""
    return _last_birth[0]


def live_functions():
    with _live_lock:
        return list(_live)


def _forget_configurations():
    """``settings.low_occupancy_warnings`` changed: each configuration is checked (and warned
    about) again at its next use."""
    for fn in live_functions():
        fn._configs.clear()


launch_setting_listeners.append(_forget_configurations)


def superseded(fn):
    """Whether a later ``cuda.jit`` of the same name replaced ``fn`` (or the function ``fn`` is
    a variant of): code nobody can reach under that name, though the object may live on."""
    while fn._parent is not None:
        fn = fn._parent
    py_func = fn.py_func
    ref = _definitions.get((py_func.__module__, py_func.__qualname__))
    return ref is not None and ref() is not fn


def current_definition(fn):
    """The kernel that stands under ``fn``'s name now: ``fn``, or the later ``cuda.jit`` of the
    same name that replaced it (a re-run cell), which graphs and prepared launches made from
    ``fn`` follow.  A replacement of another number of parameters cannot be followed: an error
    says so.  (Variants -- ``with_context``, ``specialize`` -- stay as they are.)"""
    if fn._parent is not None or fn.device:
        return fn
    py_func = fn.py_func
    ref = _definitions.get((py_func.__module__, py_func.__qualname__))
    now = ref() if ref is not None else None
    if now is None or now is fn or now.device:
        return fn
    if now._nparams != fn._nparams:
        raise LaunchError(f"{fn.__qualname__} was redefined with {now._nparams} parameter(s) "
                          f"(it had {fn._nparams}) since this launch was prepared or captured: "
                          f"prepare or capture it again with the new arguments")
    return now


def note_definition(fn):
    """A ``cuda.jit`` of a name defined before (a re-run cell, a reloaded module) moves the world:
    code compiled against the old definition is revalidated at its next launch.  A kernel that
    replaces a kernel of as many parameters takes the argument types and devices the old one
    was launched with as hints (jit/ahead.py compiles it for them while the user types)."""
    py_func = fn.py_func
    key = (py_func.__module__, py_func.__qualname__)
    if key in _definitions:
        world.bump()
        old = _definitions[key]()
        if old is not None and not old.device and not fn.device and \
                old._nparams == fn._nparams:
            fn._ahead_hints = tuple(old._launch_cache) or old._ahead_hints
    _definitions[key] = weakref.ref(fn)
