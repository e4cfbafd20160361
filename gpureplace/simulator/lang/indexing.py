"""Thread indexing in the simulator: ``threadIdx``, ``blockIdx``, ``blockDim``, ``gridDim``,
``grid``, ``gridsize``, ``warpsize`` and ``laneid``."""

from __future__ import annotations

import numpy as np

from ...compiler.intrinsics import indexing
from ..arrays import wrap_int
from .values import I32


class Dim3Like:
    """threadIdx / blockIdx / blockDim / gridDim in the simulator (print shows (x, y, z))."""
    __slots__ = ()


class _Dim3(Dim3Like):
    __slots__ = ("x", "y", "z")

    def __init__(self, dims):
        self.x, self.y, self.z = dims

    def __repr__(self):
        return f"dim3({self.x}, {self.y}, {self.z})"


def table(launch):
    """The indexing stubs of ``launch``: ``{id(stub): value}`` (``laneid`` goes to
    ``launch.dynamic``, read afresh by each thread)."""
    tls = launch.tls
    bdim, gdim = launch.block, launch.grid
    out = {}

    # Indices are device integers, as typed: threadIdx / blockIdx / blockDim / gridDim, laneid
    # and warpsize int32, grid / gridsize int64 (a Python int would not wrap, and would be
    # "weak" next to a float32)
    i32 = type(wrap_int(0, I32))
    i64 = type(wrap_int(0, np.dtype(np.int64)))
    tids = {}                                   # index tuple -> its device int32 values

    def dev3(t):
        hit = tids.get(t)
        if hit is None:
            hit = tids[t] = tuple(i32(v) for v in t)
        return hit

    class ThreadIdx(Dim3Like):
        __slots__ = ()
        x = property(lambda self: dev3(tls.t.tid)[0])
        y = property(lambda self: dev3(tls.t.tid)[1])
        z = property(lambda self: dev3(tls.t.tid)[2])

    class BlockIdx(Dim3Like):
        __slots__ = ()
        x = property(lambda self: dev3(tls.t.bid)[0])
        y = property(lambda self: dev3(tls.t.bid)[1])
        z = property(lambda self: dev3(tls.t.bid)[2])

    out[id(indexing.threadIdx)] = ThreadIdx()
    out[id(indexing.blockIdx)] = BlockIdx()
    out[id(indexing.blockDim)] = _Dim3(dev3(bdim))
    out[id(indexing.gridDim)] = _Dim3(dev3(gdim))
    bx, by, bz = bdim
    gx, gy, gz = gdim

    def grid(ndim):
        t = tls.t
        tid, bid = t.tid, t.bid
        if ndim == 1:
            return i64(bid[0] * bx + tid[0])
        if ndim == 2:
            return (i64(bid[0] * bx + tid[0]), i64(bid[1] * by + tid[1]))
        if ndim == 3:
            return (i64(bid[0] * bx + tid[0]), i64(bid[1] * by + tid[1]),
                    i64(bid[2] * bz + tid[2]))
        raise ValueError(f"cuda.grid(ndim): ndim must be 1, 2 or 3, got {ndim!r}")

    def gridsize(ndim):
        if ndim == 1:
            return i64(bx * gx)
        if ndim == 2:
            return (i64(bx * gx), i64(by * gy))
        if ndim == 3:
            return (i64(bx * gx), i64(by * gy), i64(bz * gz))
        raise ValueError(f"cuda.gridsize(ndim): ndim must be 1, 2 or 3, got {ndim!r}")

    out[id(indexing.grid)] = grid
    out[id(indexing.gridsize)] = gridsize
    out[id(indexing.warpsize)] = i32(32)
    # laneid is read per thread: the resolver asks ``launch.dynamic`` for it at each read
    launch.dynamic[id(indexing.laneid)] = lambda: i32(tls.t.lane)
    return out
