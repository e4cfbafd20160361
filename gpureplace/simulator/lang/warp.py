"""Warp operations in the simulator: shuffles, votes, ``match_any_sync`` / ``match_all_sync``,
``activemask`` and ``lanemask_lt``."""

from __future__ import annotations

import sys

import numpy as np

from ...compiler.intrinsics import warp
from ..arrays import wrap_int
from .values import U32, value_of


def table(launch):
    """The warp stubs of ``launch``: ``{id(stub): value}``."""
    tls = launch.tls
    out = {}

    def _shuffle(stub, source):
        what = f"cuda.{stub.__name__}"

        def compute(g):
            res = {}
            for lane, (value, arg) in g.payload.items():
                src = source(lane, int(arg))
                res[lane] = g.payload[src][0] if src is not None and src in g.payload else value
            return res

        def shfl(mask, value, arg):
            t = tls.t
            return t.block.warp_op(t, stub.__name__, mask, (value_of(value), arg), compute,
                                   what)
        shfl.__name__ = stub.__name__
        return shfl

    out[id(warp.shfl_sync)] = _shuffle(warp.shfl_sync, lambda lane, src: src & 31)
    out[id(warp.shfl_up_sync)] = _shuffle(
        warp.shfl_up_sync, lambda lane, d: lane - d if lane - d >= 0 else None)
    out[id(warp.shfl_down_sync)] = _shuffle(
        warp.shfl_down_sync, lambda lane, d: lane + d if lane + d < 32 else None)
    out[id(warp.shfl_xor_sync)] = _shuffle(warp.shfl_xor_sync, lambda lane, m: (lane ^ m) & 31)

    def _vote(stub, reduce):
        what = f"cuda.{stub.__name__}"

        def compute(g):
            r = reduce(g)
            return dict.fromkeys(g.payload, r)

        def vote(mask, predicate):
            t = tls.t
            return t.block.warp_op(t, stub.__name__, mask, bool(predicate), compute, what)
        vote.__name__ = stub.__name__
        return vote

    def _ballot(g):
        bits_ = 0
        for lane, p in g.payload.items():
            if p:
                bits_ |= 1 << lane
        return wrap_int(bits_, np.dtype(np.int32))

    out[id(warp.ballot_sync)] = _vote(warp.ballot_sync, _ballot)
    out[id(warp.all_sync)] = _vote(warp.all_sync, lambda g: all(g.payload.values()))
    out[id(warp.any_sync)] = _vote(warp.any_sync, lambda g: any(g.payload.values()))
    out[id(warp.eq_sync)] = _vote(warp.eq_sync, lambda g: len(set(g.payload.values())) <= 1)

    def _match_any(g):
        res = {}
        for lane, v in g.payload.items():
            m = 0
            for other, w in g.payload.items():
                if w == v:
                    m |= 1 << other
            res[lane] = wrap_int(m, np.dtype(np.int32))
        return res

    def _match_all(g):
        vals = list(g.payload.values())
        same = all(v == vals[0] for v in vals)
        r = (wrap_int(g.arrived, np.dtype(np.int32)), True) if same else (np.int32(0), False)
        return dict.fromkeys(g.payload, r)

    def match_any_sync(mask, value):
        t = tls.t
        return t.block.warp_op(t, "match_any_sync", mask, value_of(value), _match_any,
                               "cuda.match_any_sync")

    def match_all_sync(mask, value):
        t = tls.t
        return t.block.warp_op(t, "match_all_sync", mask, value_of(value), _match_all,
                               "cuda.match_all_sync")

    def activemask():
        t = tls.t
        caller = sys._getframe(1)             # the call site: each side of a branch is its own
        return wrap_int(t.block.active_lanes(t, (caller.f_code, caller.f_lasti)), U32)

    def lanemask_lt():
        return wrap_int((1 << tls.t.lane) - 1, U32)

    out[id(warp.match_any_sync)] = match_any_sync
    out[id(warp.match_all_sync)] = match_all_sync
    out[id(warp.activemask)] = activemask
    out[id(warp.lanemask_lt)] = lanemask_lt
    return out
