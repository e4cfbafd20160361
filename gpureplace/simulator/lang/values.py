"""Device values shared by the groups of the simulated language: the int32 / uint32 dtypes, and
a value as the device carries it through a warp operation or a vector constructor."""

from __future__ import annotations

import numpy as np

from ..arrays import wrap_int

U32, I32 = np.dtype(np.uint32), np.dtype(np.int32)


def value_of(v):
    """A shuffled / matched value as the device carries it (booleans become int32)."""
    if isinstance(v, (bool, np.bool_)):
        return wrap_int(1 if v else 0, I32)
    return v
