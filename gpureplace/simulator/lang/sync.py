"""Barriers and fences in the simulator: ``syncthreads`` (and its count / and / or forms),
``syncwarp``, the thread fences and ``nanosleep``.

A fence or a ``nanosleep`` is where a spin-wait loop waits for another thread (``while flag[0] ==
0: cuda.threadfence()``; a back-off with ``nanosleep``): the thread hands over there
(``blocks.Block.spin``), as the other threads of a Volta or later GPU run meanwhile.
"""

from __future__ import annotations

import numpy as np

from ...compiler.intrinsics import sync
from ..arrays import wrap_int
from .values import I32


def table(launch):
    """The barrier and fence stubs of ``launch``: ``{id(stub): value}``."""
    tls = launch.tls
    out = {}

    def syncthreads():
        t = tls.t
        t.block.barrier(t, None, False)

    def syncthreads_count(predicate):
        t = tls.t
        return wrap_int(t.block.barrier(t, "count", bool(predicate)), I32)

    def syncthreads_and(predicate):
        t = tls.t
        return wrap_int(t.block.barrier(t, "and", bool(predicate)), I32)

    def syncthreads_or(predicate):
        t = tls.t
        return wrap_int(t.block.barrier(t, "or", bool(predicate)), I32)

    def syncwarp(mask=0xFFFFFFFF):
        t = tls.t
        t.block.warp_op(t, "syncwarp", mask, None, lambda g: dict.fromkeys(g.payload),
                        "cuda.syncwarp")

    def _fence(what):
        def fence():
            t = tls.t
            t.block.spin(t, what)
        fence.__name__ = what.rpartition(".")[2]
        return fence

    def nanosleep(ns):
        if not isinstance(ns, (int, np.integer)) or isinstance(ns, bool):
            raise TypeError(f"cuda.nanosleep(ns): ns must be an integer number of nanoseconds, "
                            f"got {ns!r}")
        # the device may sleep anywhere from 0 to 2 * ns: a thread here does not sleep, it lets
        # the others run
        t = tls.t
        t.block.spin(t, "cuda.nanosleep")

    for stub, fn in ((sync.syncthreads, syncthreads), (sync.syncthreads_count, syncthreads_count),
                     (sync.syncthreads_and, syncthreads_and),
                     (sync.syncthreads_or, syncthreads_or), (sync.syncwarp, syncwarp),
                     (sync.threadfence, _fence("cuda.threadfence")),
                     (sync.threadfence_block, _fence("cuda.threadfence_block")),
                     (sync.threadfence_system, _fence("cuda.threadfence_system")),
                     (sync.nanosleep, nanosleep)):
        out[id(stub)] = fn
    return out
