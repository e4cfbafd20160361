"""Cooperative groups in the simulator: ``cuda.cg.this_grid()`` and its ``sync()``."""

from __future__ import annotations

import types as pytypes

from ...compiler.intrinsics import cg


def table(launch):
    """The cooperative-group stubs of ``launch``: ``{id(stub): value}``."""
    tls = launch.tls
    out = {}

    class GridGroup:
        """``cuda.cg.this_grid()``: ``sync()`` is a barrier across every block (they run at once
        in the simulator's grid mode)."""

        __slots__ = ()

        def sync(self):
            t = tls.t
            barrier = launch.grid_barrier
            if barrier is None:
                raise RuntimeError("cuda.cg.this_grid().sync() reached outside the simulator's "
                                   "grid mode (the grid group came from code the simulator did "
                                   "not see before the launch)")
            t.block.barrier(t, None, True, before_release=barrier.arrive)

    the_grid = GridGroup()

    def this_grid():
        return the_grid

    out[id(cg.this_grid)] = this_grid
    out[id(cg.cg)] = pytypes.SimpleNamespace(this_grid=this_grid)
    return out
