"""Cooperative groups in the simulator: ``cuda.cg.this_grid()`` and its ``sync()``."""

from __future__ import annotations

import types as pytypes

from ...compiler.intrinsics import cg
from ..blocks import KernelDeadlock, NeedGrid


class SimGridGroup:
    """What every launch's simulated grid group is an instance of: a value of Numba's type
    ``grid_group`` (``valuetypes.numba_type_of``: a device function declared to take one,
    ``types.void(types.grid_group)``, is called with it)."""

    __slots__ = ()
    numba_type = cg.grid_group


def table(launch):
    """The cooperative-group stubs of ``launch``: ``{id(stub): value}``."""
    tls = launch.tls
    out = {}

    class GridGroup(SimGridGroup):
        """``cuda.cg.this_grid()``: ``sync()`` is a barrier across every block (they run at once
        in the simulator's grid mode)."""

        __slots__ = ()

        def sync(self):
            t = tls.t
            barrier = launch.grid_barrier
            if barrier is None or launch.grid_sync_compiled is False:
                if launch.grid_sync_compiled is False:
                    # The compiled kernel has no grid barrier although its source syncs: LLVM
                    # proved that thread (0, 0, 0), the one that arrives for its block, never
                    # gets here, and removed the grid-wide wait (compiler/intrinsics/cg.py), so
                    # the launch is not cooperative and each block passes a barrier of its own
                    # (bar.sync) alone.  The simulator runs what the GPU runs -- a syncthreads,
                    # blocks one after another, no wait for other blocks -- rather than a grid
                    # barrier the GPU does not have, and warns after the launch (runner.py);
                    # in grid mode too (entered for a spin-wait across blocks).
                    if launch.grid_sync_as_block is None:
                        from ..arrays import current_place
                        launch.grid_sync_as_block = current_place()
                    t.block.barrier(t, None, True)
                    return
                # a sync the launch did not expect (nothing compiled, and the source scan did
                # not see it): run the launch again with every block at once
                launch.cooperative = True
                raise NeedGrid()
            block = t.block

            def arrive():
                # The compiled barrier (compiler/intrinsics/cg.py) is the block's bar.sync, which
                # counts exited threads as arrived, then thread (0, 0, 0) alone arrives for the
                # block at the grid's counter: a block whose thread (0, 0, 0) has returned
                # never arrives, and every other block waits for it for ever.
                first = block.threads[0]
                if first.finished:
                    from ..arrays import current_place
                    raise KernelDeadlock(
                        f"grid synchronisation deadlock: thread threadIdx={first.tid} of block "
                        f"blockIdx={block.bid} returned before cuda.cg.this_grid().sync() in "
                        f"{current_place()}; that thread arrives at the grid barrier for its "
                        f"block, so the other blocks wait for it for ever (the GPU hangs). "
                        f"Let every thread reach each grid sync (skip the work, not the sync).")
                barrier.arrive()

            block.barrier(t, None, True, before_release=arrive)

    the_grid = GridGroup()

    def this_grid():
        return the_grid

    out[id(cg.this_grid)] = this_grid
    out[id(cg.cg)] = pytypes.SimpleNamespace(this_grid=this_grid)
    return out
