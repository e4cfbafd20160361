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

It walks only when something may have become unreachable since its last walk: a specialisation
was made (one may have replaced another), a compile, disk load, relink or revalidation was
counted, a ``cuda.jit`` function that held compiled code, or a Context such code was compiled
in, died (a weak reference says so), a binding was tracked, or a function is no longer held by
any tracked binding (``bindings.activity()``).  A cell that only rebinds a global, or defines a
kernel in place of one never launched, has nothing to let go: the call costs a few comparisons,
not a walk over every compiled function.  The walk itself costs the compiled functions (about a
millisecond for a hundred kernels), not the bindings they read: bindings.retain counts readers
from one walk to the next.  Whatever became unreachable goes at the first call after it, as
before, so what a long session holds stays bounded by what it uses.

Not yet let go: a kernel defined *and compiled* in a namespace dict of its own (``exec(src,
ns)``) that is then dropped.  The places above hold its function, whose globals are the
namespace, which holds the kernel: "live" by that alone, so nothing is dropped (the namespace's
arrays included).  Kernels of modules and notebook cells are not affected (their namespaces
live anyway); neither is a kernel only defined there.
"""

from __future__ import annotations

import weakref

from ..compiler import frontend
from ..tracking import bindings, functions
from ..tracking.stats import counters
from .definitions import live_functions


def in_use():
    """(compiled functions in use, ids of the live ``cuda.jit`` functions' Python functions)."""
    live, bodies, _ = _in_use()
    return live, bodies


def _in_use():
    """``in_use()``, and the live ``cuda.jit`` functions that hold compiled code."""
    roots, bodies, holders = [], set(), []
    fns = live_functions()
    _lives[0] = len(fns)
    for fn in fns:
        bodies.add(id(fn.py_func))
        held = len(roots)
        for spec in list(fn._specs.values()):
            roots.append(spec if fn.device else getattr(spec, "compiled", None))
        for entry in list(fn._launch_cache.values()):
            spec = getattr(entry, "spec", None)
            roots.append(getattr(spec, "compiled", None))
        if len(roots) > held:
            holders.append(fn)
    return frontend.closures([root for root in roots if root is not None]), bodies, holders


#: Specialisations made (compiled or loaded) between two collections outside IPython: a script
#: sweeping parameters makes kernels and drops them without a cell hook to collect after it.
EVERY = 16
_made = [0]
_lives = [0]          # live cuda.jit functions at the last collection
#: What might have become unreachable since the last walk: a cuda.jit function it found holding
#: compiled code (specialisations, loaded entries, front ends cached from its body), or a
#: Context such code was compiled in, died (``_died``, set by the weak references in
#: ``_holders`` and ``_contexts``); or the counters and ``bindings.activity()`` moved from
#: ``_mark`` (None: walk).
_died = [False]
_holders = {}
_contexts = {}        # id -> weak reference of each Context code in use was compiled in
_mark = [None]
#: The counters that move when compiled code is made, loaded, replaced or dropped
#: (tracking/stats.py): every one but the memory hits, which only reuse.
_COUNTED = ("kernel_compiles", "device_compiles", "disk_hits", "invalidations", "relinks",
            "revalidations")


def _signals():
    return tuple(counters[name] for name in _COUNTED) + (bindings.activity(),)


def _holder_died(_ref):
    _died[0] = True


def collect():
    """Forget the compiled code, tracked bindings and watched functions no live ``cuda.jit``
    function uses; returns False when a compile running meanwhile made it wait for the next
    call.  Nothing to do (nothing could have become unreachable since the last walk: see the
    module's description) costs a few comparisons."""
    mark = _signals()
    made = _made[0]
    if not made and not _died[0] and mark == _mark[0]:
        _lives[0] = len(live_functions())
        return True
    _died[0] = False              # (a holder dying from now on: the next call walks)
    live, bodies, holders = _in_use()
    if not frontend.retain(live, bodies):
        _died[0] = True           # (owed: the next call walks)
        return False
    cached = frontend.cached()
    live = live + cached          # (a live function's own front ends, kept)
    bindings.retain(live)
    functions.retain(live, bindings.bound_functions())
    # (a function whose body has front ends cached holds them: frontend.retain keeps them for
    # its sake alone)
    bodies_cached = {id(getattr(cf, "pyfunc", None)) for cf in cached}
    holding = {id(fn): fn for fn in holders}
    for fn in live_functions():
        if id(fn.py_func) in bodies_cached:
            holding[id(fn)] = fn
    _holders.clear()
    _holders.update((key, weakref.ref(fn, _holder_died)) for key, fn in holding.items())
    # (a Context that code in use was compiled in: when it goes, the typing and target
    # contexts made for it are let go by the next walk -- frontend.retain)
    for cf in live:
        context = getattr(cf, "context", None)
        held = _contexts.get(id(context))
        if context is not None and (held is None or held() is not context):
            try:
                _contexts[id(context)] = weakref.ref(context, _holder_died)
            except TypeError:
                pass
    for key in [key for key, ref in _contexts.items() if ref() is None]:
        del _contexts[key]
    _made[0] -= made
    _mark[0] = mark
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
