"""Letting go of compiled code nothing uses any more.

A notebook redefines helpers, kernels and global arrays all day.  The old definitions' compiled
code used to stay: the front end's cache (keyed by the old function), the target contexts'
table of user functions, the device-function types made for the old helper, the tracked
bindings with the values they saw (an old 8-MiB array and its snapshot), the namespaces of
exec'd code, the functions watched for in-place changes.  Memory grew with every redefinition
and the after-cell check slowed down with it.

``collect()`` works out what is still in use -- the compiled functions reachable from the
specialisations and loaded entries of every live ``cuda.jit`` function (and the front ends
compiled from a live function's own code, kept for a relink) -- and drops the rest from each of
those places.  The IPython extension calls it after a cell that changed something (the world
moved or a kernel was defined), ``gpureplace.refresh()`` too.  It skips its turn while a compile
runs in another thread (a background round): the next call does it.

Not yet let go: a kernel defined *and compiled* in a namespace dict of its own (``exec(src,
ns)``) that is then dropped.  The places above hold its function, whose globals are the
namespace, which holds the kernel: "live" by that alone, so nothing is dropped (the namespace's
arrays included).  Kernels of modules and notebook cells are not affected (their namespaces
live anyway); neither is a kernel only defined there.
"""

from __future__ import annotations

from ..compiler import frontend
from ..tracking import bindings, functions
from .definitions import live_functions


def in_use():
    """(compiled functions in use, ids of the live ``cuda.jit`` functions' Python functions)."""
    roots, bodies = [], set()
    fns = live_functions()
    _lives[0] = len(fns)
    for fn in fns:
        bodies.add(id(fn.py_func))
        for spec in list(fn._specs.values()):
            roots.append(spec if fn.device else getattr(spec, "compiled", None))
        for entry in list(fn._launch_cache.values()):
            spec = getattr(entry, "spec", None)
            roots.append(getattr(spec, "compiled", None))
    return frontend.closures([root for root in roots if root is not None]), bodies


#: Specialisations made (compiled or loaded) between two collections outside IPython: a script
#: sweeping parameters makes kernels and drops them without a cell hook to collect after it.
EVERY = 16
_made = [0]
_lives = [0]          # live cuda.jit functions at the last collection


def collect():
    """Forget the compiled code, tracked bindings and watched functions no live ``cuda.jit``
    function uses; returns False when a compile running meanwhile made it wait for the next
    call."""
    live, bodies = in_use()
    if not frontend.retain(live, bodies):
        return False
    live = live + frontend.cached()           # (a live function's own front ends, kept)
    bindings.retain(live)
    functions.retain(live, bindings.tracked_values())
    _made[0] = 0
    return True


def specialised():
    """A specialisation was made: every ``EVERY``-th, collect."""
    _made[0] += 1
    if _made[0] >= EVERY:
        collect()


def some_died():
    """Whether fewer ``cuda.jit`` functions live than at the last collection (a cell deleted
    kernels, ``%reset``): the IPython extension collects after such a cell too."""
    return len(live_functions()) < _lives[0]
