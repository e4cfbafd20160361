"""The kernel language on the host: what each ``gpureplace.cuda`` stub means in a simulated launch.

``language(launch)`` returns ``{id(stub): simulated value}`` for every stub and namespace of the
kernel language; the values read the running thread's indices from ``launch.tls``.  Each module
here gives the meaning of one group of stubs, as ``compiler/intrinsics/`` compiles them
(``table(launch)``: its part of the language); ``language`` puts the parts together.
``overloads`` runs the implementations of Numba-style overloads (``extending.overload``,
``overload_method``) as simulated device code.
"""

from __future__ import annotations

from ...compiler.intrinsics import cg as _cg
from ...compiler.intrinsics import sync as _sync
from ...compiler.intrinsics import warp as _warp
from . import (atomics, bits, cachehints, cg, constmem, fp16, indexing, memory, sync, vectors,
               warp)
from .printing import device_format
from .vectors import SimVector, SimVectorArray

#: The groups of the language, in the order their parts are put together.
GROUPS = (indexing, sync, cg, memory, constmem, atomics, warp, bits, fp16, vectors, cachehints)


def language(launch):
    """The simulated kernel language of ``launch``: ``{id(stub): value}``."""
    out = {}
    for group in GROUPS:
        out.update(group.table(launch))
    return out


#: Names whose use means the threads of a block must run concurrently.
SYNC_NAMES = frozenset([
    "syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp",
    "shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "ballot_sync", "all_sync",
    "any_sync", "eq_sync", "match_any_sync", "match_all_sync", "activemask"])

#: stubs whose use makes a launch run every block at once (the simulator's grid mode)
GRID_STUBS = frozenset((id(_cg.this_grid),))
SYNC_STUBS = frozenset(id(getattr(mod, n)) for mod in (_sync, _warp) for n in SYNC_NAMES
                       if hasattr(mod, n))

__all__ = ["language", "GROUPS", "SYNC_NAMES", "GRID_STUBS", "SYNC_STUBS", "device_format",
           "SimVector", "SimVectorArray"]
