"""The device's ``numba_attempt_nocopy_reshape``: Numba lowers ``array.reshape`` to a call of this
C helper from its runtime, which the GPU does not have.  This is the same algorithm (NumPy's
no-copy reshape: new strides for a view, or 0 when the data would have to be copied) as a Python
function that gpureplace compiles for the device; ``compiler/pipeline.py`` links it, behind a C-ABI
entry of that name, into kernels whose code calls it."""

from __future__ import annotations

import numpy as np
from numba.core import types

from .intrinsics.memory import local

SYMBOL = "numba_attempt_nocopy_reshape"
MAX_DIMS = 32
ARGTYPES = (types.intp, types.CPointer(types.intp), types.CPointer(types.intp), types.intp,
            types.CPointer(types.intp), types.CPointer(types.intp), types.intp, types.int32)


def attempt_nocopy_reshape(nd, dims, strides, newnd, newdims, newstrides, itemsize, is_f_order):
    olddims = local.array(MAX_DIMS, np.int64)
    oldstrides = local.array(MAX_DIMS, np.int64)
    # axes of length 1 do not constrain the layout
    oldnd = 0
    for oi in range(nd):
        if dims[oi] != 1:
            olddims[oldnd] = dims[oi]
            oldstrides[oldnd] = strides[oi]
            oldnd += 1
    new_size = 1
    for ni in range(newnd):
        new_size *= newdims[ni]
    old_size = 1
    for oi in range(oldnd):
        old_size *= olddims[oi]
    if new_size != old_size or new_size == 0:
        return np.int32(0)
    # walk both shapes, matching groups of axes with equal products
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < newnd and oi < oldnd:
        np_ = newdims[ni]
        op = olddims[oi]
        while np_ != op:
            if np_ < op:
                np_ *= newdims[nj]
                nj += 1
            else:
                op *= olddims[oj]
                oj += 1
        # the old axes of the group must be contiguous with each other
        for ok in range(oi, oj - 1):
            if is_f_order:
                if oldstrides[ok + 1] != olddims[ok] * oldstrides[ok]:
                    return np.int32(0)
            elif oldstrides[ok] != olddims[ok + 1] * oldstrides[ok + 1]:
                return np.int32(0)
        # the new axes of the group get strides from the group's innermost old stride
        if is_f_order:
            newstrides[ni] = oldstrides[oi]
            for nk in range(ni + 1, nj):
                newstrides[nk] = newstrides[nk - 1] * newdims[nk - 1]
        else:
            newstrides[nj - 1] = oldstrides[oj - 1]
            nk = nj - 1
            while nk > ni:
                newstrides[nk - 1] = newstrides[nk] * newdims[nk]
                nk -= 1
        ni = nj
        nj += 1
        oi = oj
        oj += 1
    # trailing axes of length 1
    if ni >= 1:
        last = newstrides[ni - 1]
        if is_f_order:
            last *= newdims[ni - 1]
    else:
        last = itemsize
    for nk in range(ni, newnd):
        newstrides[nk] = last
    return np.int32(1)
