"""Constant memory in the simulator: ``cuda.const.array_like``, a read-only copy of a global
array made once per launch."""

from __future__ import annotations

import types as pytypes

import numpy as np

from ...compiler.intrinsics.constmem import const
from ..arrays import SimArray


def table(launch):
    """The constant-memory stubs of ``launch``: ``{id(stub): value}``."""
    out = {}
    consts = {}

    def const_array_like(ndarray):
        src = ndarray._a if isinstance(ndarray, SimArray) else ndarray
        if not isinstance(src, np.ndarray):
            raise TypeError(f"cuda.const.array_like(arr): arr must be a global NumPy array, got "
                            f"{type(ndarray).__name__}")
        hit = consts.get(id(src))
        if hit is None:
            copy = np.array(src, copy=True)
            copy.flags.writeable = False
            hit = consts[id(src)] = (src, SimArray(copy, launch, writable=False))
        return hit[1]

    out[id(const)] = pytypes.SimpleNamespace(array_like=const_array_like)
    out[id(const.array_like)] = const_array_like
    return out
