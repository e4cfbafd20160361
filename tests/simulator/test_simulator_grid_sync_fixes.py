"""The simulator's grid mode (``cuda.cg.this_grid().sync()``): an error in one thread ends the
launch instead of leaving the other blocks waiting at the grid barrier; grid mode follows the
compiled kernel's ``cooperative`` flag (a sync through an overload or register_jitable, a grid
group without sync, a sync the compiler removed); a grid group passed to a device function
declared with ``types.grid_group``; the cooperative limit counts a block's shared memory."""

import threading
import warnings

import numpy as np
import pytest

from conftest import python_process
from gpureplace import LaunchError, cuda, simulator
from gpureplace.config import settings
from gpureplace.cuda import types
from gpureplace.simulator import runner


@pytest.fixture(autouse=True)
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


def _finishes(fn, timeout=60):
    """``fn()`` in a daemon thread: what it returned or raised, or a failure if it hangs."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:            # noqa: BLE001 (checked by the test)
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "the launch hangs"
    return box


# ---------------------------------------------------------------------------------------------
# 1. an error in one thread stops the whole grid


@cuda.jit
def oob_before_sync(a, bad):
    i = cuda.grid(1)
    if i == bad:
        a[100] = 1                               # out of bounds
    cuda.cg.this_grid().sync()
    a[i] = 2


@pytest.mark.parametrize("bad", [5, 0])       # in the last block, or in the first
def test_an_index_error_before_a_grid_sync_ends_the_launch(bad):
    a = np.zeros(8)
    box = _finishes(lambda: oob_before_sync[2, 4](a, bad))
    exc = box.get("error")
    assert isinstance(exc, IndexError), box
    message = str(exc)
    assert "index 100" in message and "oob_before_sync" in message
    assert f"threadIdx=({bad % 4}, 0, 0)" in message and \
        f"blockIdx=({bad // 4}, 0, 0)" in message
    assert not a.any()                           # host arrays as they were


# ---------------------------------------------------------------------------------------------
# 2. a grid sync the source scan cannot see


def test_grid_sync_through_an_overload_or_register_jitable():
    # (in a process of its own: an overload is registered for the whole process)
    out = python_process("""
import numpy as np
from numba.extending import register_jitable
from gpureplace import cuda, simulator
from gpureplace.cuda import extending

def grid_barrier():
    pass

@extending.overload(grid_barrier)
def _ol():
    def impl():
        cuda.cg.this_grid().sync()
    return impl

@register_jitable
def grid_barrier2():
    cuda.cg.this_grid().sync()

@cuda.jit
def k1(a, out):
    i = cuda.grid(1)
    a[i] = i + 1
    grid_barrier()
    out[i] = a[(i + 4) % 8]

@cuda.jit
def k2(a, out):
    i = cuda.grid(1)
    a[i] = i + 1
    grid_barrier2()
    out[i] = a[(i + 4) % 8]

for k in (k1, k2):
    assert k.compile("void(int64[:], int64[:])").cooperative
    for compile_ in (None, False):           # compiled: spec.cooperative; not: a rerun
        a, out = np.zeros(8, np.int64), np.zeros(8, np.int64)
        simulator.run(k, 2, 4, a, out, compile=compile_)
        print(out.tolist())
""", GPUREPLACE_BACKEND="simulator")
    assert out.strip().splitlines()[-4:] == ["[5, 6, 7, 8, 1, 2, 3, 4]"] * 4


def test_a_grid_sync_the_source_shows_runs_in_grid_mode_without_a_compile():
    @cuda.jit
    def k(a, out):
        i = cuda.grid(1)
        a[i] = i + 1
        cuda.cg.this_grid().sync()
        out[i] = a[(i + 4) % 8]

    out = np.zeros(8, np.int64)
    simulator.run(k, 2, 4, np.zeros(8, np.int64), out, compile=False)
    np.testing.assert_array_equal(out, [5, 6, 7, 8, 1, 2, 3, 4])


# ---------------------------------------------------------------------------------------------
# 3. a device function declared to take a grid group


def test_a_device_function_declared_with_grid_group():
    @cuda.jit(types.void(types.grid_group), device=True)
    def syncit(g):
        g.sync()

    @cuda.jit
    def k(a, out):
        i = cuda.grid(1)
        a[i] = i + 1
        syncit(cuda.cg.this_grid())
        out[i] = a[(i + 4) % 8]

    assert k.compile("void(float64[:], float64[:])").cooperative
    out = np.zeros(8)
    k[2, 4](np.zeros(8), out)
    np.testing.assert_array_equal(out, [5, 6, 7, 8, 1, 2, 3, 4])


# ---------------------------------------------------------------------------------------------
# 4 and 5. grid mode as the compiled code has it


def test_a_grid_group_without_sync_is_no_cooperative_launch(monkeypatch):
    """The compiled kernel has no grid barrier: any grid runs, not only what grid mode can
    run at once (a smaller limit here, so that the test stays small)."""
    monkeypatch.setattr(runner, "GRID_MODE_MAX_THREADS", 64)

    @cuda.jit
    def k(a):
        g = cuda.cg.this_grid()                  # noqa: F841 (never synced)
        i = cuda.grid(1)
        if i < a.size:
            a[i] = 1

    assert not k.compile("void(float32[:])").cooperative
    a = np.zeros(4 * 32, np.float32)
    k[4, 32](a)
    assert a.sum() == a.size


@cuda.jit
def thread0_leaves(a, out):
    i = cuda.grid(1)
    if cuda.threadIdx.x == 0:
        return
    a[i] = i
    cuda.cg.this_grid().sync()
    out[i] = a[(i + 4) % a.size]


def test_a_sync_the_compiler_removed_is_the_blocks_barrier_with_a_warning():
    """Thread (0, 0, 0), which arrives for its block, never reaches the sync: the compiled code
    has only the block's bar.sync, and the GPU launches it normally (no grid barrier).  The
    simulator runs that code -- the blocks one after another, each waiting for itself only --
    and warns; it does not wait for the other blocks as a grid barrier would."""
    spec = thread0_leaves.compile("void(int64[:], int64[:])")
    assert not spec.cooperative and "__gpureplace_grid_barrier" not in spec.ptx
    a, out = np.zeros(8, np.int64), np.zeros(8, np.int64)
    with pytest.warns(runner.GridSyncWarning, match=r"thread0_leaves.*not a grid barrier.*"
                                                    r"thread \(0, 0, 0\)"):
        thread0_leaves[2, 4](a, out)
    # block 0 read block 1's elements before block 1 ran (a grid barrier: [0 5 6 7 0 1 2 3])
    np.testing.assert_array_equal(out, [0, 0, 0, 0, 0, 1, 2, 3])
    np.testing.assert_array_equal(a, [0, 1, 2, 3, 0, 5, 6, 7])


def test_a_kernel_that_syncs_raises_no_grid_sync_warning():
    @cuda.jit
    def k(a):
        cuda.cg.this_grid().sync()
        a[cuda.grid(1)] = 1

    a = np.zeros(8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", runner.GridSyncWarning)
        k[2, 4](a)
    assert a.sum() == 8


# ---------------------------------------------------------------------------------------------
# 6. the cooperative limit counts shared memory


@cuda.jit
def dynamic_synced(out):
    sh = cuda.shared.array(0, np.float32)
    sh[cuda.threadIdx.x] = cuda.blockIdx.x
    cuda.cg.this_grid().sync()
    out[cuda.blockIdx.x] = sh[cuda.threadIdx.x]


@cuda.jit
def static_synced(out):
    sh = cuda.shared.array(10240, np.float32)   # 40 KiB
    sh[cuda.threadIdx.x] = cuda.blockIdx.x
    cuda.cg.this_grid().sync()
    out[cuda.blockIdx.x] = sh[cuda.threadIdx.x]


def test_the_cooperative_limit_counts_a_blocks_shared_memory():
    spec = dynamic_synced.compile("void(float32[:])")
    # the simulated device: 1 multiprocessor of 228 KiB, 1 KiB of it reserved per block
    assert spec.max_cooperative_grid_blocks(32, 200 * 1024) == 1
    assert spec.max_cooperative_grid_blocks(32, 1024) == 228 * 1024 // 2048
    assert spec.max_cooperative_grid_blocks(32) == 512          # the thread cap alone
    assert spec.max_cooperative_grid_blocks(1024, 1024) == 16   # the thread cap is lower
    out = np.zeros(2, np.float32)
    dynamic_synced[1, 32, 0, 200 * 1024](out)
    with pytest.raises(LaunchError, match=r"at most 1 blocks of 32 threads.*got 2"):
        dynamic_synced[2, 32, 0, 200 * 1024](out)

    spec = static_synced.compile("void(float32[:])")
    limit = spec.max_cooperative_grid_blocks(1)
    assert limit == 228 * 1024 // (40 * 1024 + 1024) == 5
    out = np.zeros(limit + 1, np.float32)
    static_synced[limit, 1](out)
    np.testing.assert_array_equal(out[:limit], np.arange(limit))
    with pytest.raises(LaunchError, match=f"at most {limit} blocks"):
        static_synced[limit + 1, 1](out)


def test_a_negative_dynamic_shared_size_is_refused():
    spec = dynamic_synced.compile("void(float32[:])")
    for bad in (-1, 1.5, "8"):
        with pytest.raises(ValueError, match=r"max_cooperative_grid_blocks\(\): dynamic shared "
                                             r"memory must be a non-negative int"):
            spec.max_cooperative_grid_blocks(32, bad)
    assert spec.max_cooperative_grid_blocks(32, np.int64(0)) == 512
