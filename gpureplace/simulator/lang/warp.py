"""Warp operations in the simulator: shuffles, votes, ``match_any_sync`` / ``match_all_sync``,
``activemask`` and ``lanemask_lt``."""

from __future__ import annotations

import sys

import numpy as np

from ...compiler.intrinsics import warp
from ..arrays import wrap_int
from .values import U32, value_of


def _match_bits(value):
    """What ``match.sync`` compares: the compiler bitcasts a float to an integer of its width
    (``match.any.sync.b32`` / ``b64``), so a NaN matches a NaN of the same bits and 0.0 does not
    match -0.0; integers compare as they are."""
    value = value_of(value)
    if isinstance(value, np.floating):
        return int(value.view(f"u{value.itemsize}"))
    if isinstance(value, float):
        return int(np.float64(value).view(np.uint64))
    return value


def table(launch):
    """The warp stubs of ``launch``: ``{id(stub): value}``."""
    tls = launch.tls
    out = {}

    def _shuffle(stub, source):
        what = f"cuda.{stub.__name__}"
        third = warp.SHUFFLE_OPERANDS[stub]

        def compute(g):
            res = {}
            for lane, (value, arg) in g.payload.items():
                # shfl.sync reads b[4:0] only (PTX ISA: "bval[4:0] = b[4:0]"): the operand as
                # the 5 low bits of the int32 it is compiled to
                src = source(lane, int(arg) & 31)
                res[lane] = g.payload[src][0] if src is not None and src in g.payload else value
            return res

        def shfl(mask, value, *operand, **named):
            # (numba-cuda's shuffles take their operands by keyword too: mask, value, and
            # src_lane / delta / lane_mask; the compile checked the names)
            arg = operand[0] if operand else named[third]
            t = tls.t
            return t.block.warp_op(t, stub.__name__, mask, (value_of(value), arg), compute,
                                   what)
        shfl.__name__ = stub.__name__
        return shfl

    # The source lane j of each mode, as shfl.sync's pseudo-code in the PTX ISA computes it from
    # bval = b[4:0] and the c operand the compiler gives (compiler/intrinsics/warp.py
    # ``shuffle32``: 0 for up, 0x1f otherwise, so maxLane is 0 for up and 31 otherwise, minLane
    # 0): idx j = bval; up j = lane - bval, valid if j >= 0; down j = lane + bval, valid if
    # j <= 31; bfly j = lane ^ bval.  An invalid j (and a lane that did not take part) gives the
    # lane its own value.
    out[id(warp.shfl_sync)] = _shuffle(warp.shfl_sync, lambda lane, b: b)
    out[id(warp.shfl_up_sync)] = _shuffle(
        warp.shfl_up_sync, lambda lane, b: lane - b if lane - b >= 0 else None)
    out[id(warp.shfl_down_sync)] = _shuffle(
        warp.shfl_down_sync, lambda lane, b: lane + b if lane + b <= 31 else None)
    out[id(warp.shfl_xor_sync)] = _shuffle(warp.shfl_xor_sync, lambda lane, b: lane ^ b)

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
        return t.block.warp_op(t, "match_any_sync", mask, _match_bits(value), _match_any,
                               "cuda.match_any_sync")

    def match_all_sync(mask, value):
        t = tls.t
        return t.block.warp_op(t, "match_all_sync", mask, _match_bits(value), _match_all,
                               "cuda.match_all_sync")

    from ..resolve import SimGlobals          # (loaded by now: the resolver builds this table)

    def activemask():
        # The call site: each side of a branch is its own; and so is each call of a device
        # function that calls it, which the GPU's code inlines per call site (one activemask
        # instruction each): the whole chain of the kernel's frames that lead here.
        t = tls.t
        site = []
        f = sys._getframe(1)
        while f is not None:
            if f.f_globals.__class__ is SimGlobals:
                site.append((f.f_code, f.f_lasti))
            f = f.f_back
        return wrap_int(t.block.active_lanes(t, tuple(site)), U32)

    def lanemask_lt():
        return wrap_int((1 << tls.t.lane) - 1, U32)

    out[id(warp.match_any_sync)] = match_any_sync
    out[id(warp.match_all_sync)] = match_all_sync
    out[id(warp.activemask)] = activemask
    out[id(warp.lanemask_lt)] = lanemask_lt
    return out
