"""Barriers and fences in the simulator: ``syncthreads`` (and its count / and / or forms),
``syncwarp``, the thread fences and ``nanosleep``."""

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

    def fence():
        pass

    def nanosleep(ns):
        if not isinstance(ns, (int, np.integer)) or isinstance(ns, bool):
            raise TypeError(f"cuda.nanosleep(ns): ns must be an integer number of nanoseconds, "
                            f"got {ns!r}")
        # the device may sleep anywhere from 0 to 2 * ns: a thread here does not sleep at all

    for stub, fn in ((sync.syncthreads, syncthreads), (sync.syncthreads_count, syncthreads_count),
                     (sync.syncthreads_and, syncthreads_and),
                     (sync.syncthreads_or, syncthreads_or), (sync.syncwarp, syncwarp),
                     (sync.threadfence, fence), (sync.threadfence_block, fence),
                     (sync.threadfence_system, fence), (sync.nanosleep, nanosleep)):
        out[id(stub)] = fn
    return out
