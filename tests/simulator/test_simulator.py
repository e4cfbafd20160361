"""The CPU simulator: kernels run on the host with the device's semantics, compared with NumPy.

These run everywhere (no GPU): they are what CI runs of the kernel language.
"""

import math
import time

import numba
import numpy as np
import pytest
from numba import float32

import gpureplace
from gpureplace import CompileError, Context, cuda, default_context, libdevice, simulator
from corpus import (TABLE, TPB, WEIGHTS, active_masks, add_2d, block_sum,  # the shared corpus
                    histogram, int_promotion, int_promotion_args, local_reverse, lookup,
                    round_digits, sin_kernel, split_masks, warp_sum)

TILE = 16
TILE_PADDED = TILE + 1


# ---------------------------------------------------------------------------------------------
# Kernels


def axpy_helper(a, x, y):          # undecorated: simulated (and compiled) as a device function
    return a * x + y


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = axpy_helper(a, x[i], y[i])


@cuda.jit
def transpose(a, out):
    tile = cuda.shared.array((TILE, TILE_PADDED), dtype=np.float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    if row < a.shape[0] and col < a.shape[1]:
        tile[ty, tx] = a[row, col]
    cuda.syncthreads()
    orow = cuda.blockIdx.x * TILE + ty
    ocol = cuda.blockIdx.y * TILE + tx
    if orow < out.shape[0] and ocol < out.shape[1]:
        out[orow, ocol] = tile[tx, ty]


@cuda.jit
def dyn_reverse(x, out, sizes):
    buf = cuda.shared.array(0, float32)
    alias = cuda.shared.array(0, dtype=np.int32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    i = cuda.grid(1)
    buf[t] = x[i]
    cuda.syncthreads()
    out[i] = buf[n - 1 - t]
    if t == 0:
        sizes[cuda.blockIdx.x, 0] = buf.size
        sizes[cuda.blockIdx.x, 1] = alias.size


@cuda.jit
def printer(x):
    i = cuda.grid(1)
    if i < 2:
        print("thread", i, x[i], i == 0, (i, 2.5))


def _rand(n, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).random(n).astype(dtype)


# ---------------------------------------------------------------------------------------------
# The corpus


def test_saxpy_with_an_undecorated_helper():
    x, y = _rand(1000), _rand(1000, seed=1)
    out = np.zeros_like(x)
    simulator.run(saxpy, 4, 256, np.float32(2.5), x, y, out)
    np.testing.assert_array_equal(out, np.float32(2.5) * x + y)


def test_block_reduction_with_shared_memory_and_syncthreads():
    x = _rand(1000)
    out = np.zeros(8, np.float32)
    simulator.run(block_sum, 8, TPB, x, out)
    ref = np.add.reduceat(np.pad(x, (0, 24)), np.arange(0, 1024, TPB))
    np.testing.assert_allclose(out, ref, rtol=1e-5)


def test_atomics_histogram():
    x = np.random.default_rng(2).integers(0, 1000, 5000).astype(np.int32)
    bins = np.zeros(16, np.int32)
    simulator.run(histogram, 20, 256, x, bins)
    np.testing.assert_array_equal(bins, np.bincount(x % 16, minlength=16))


def test_atomics_under_threads_are_atomic():
    @cuda.jit
    def count(out):
        cuda.syncthreads()                     # forces concurrent threads
        for _ in range(20):
            cuda.atomic.add(out, 0, 1)
        old = cuda.atomic.max(out, 1, cuda.threadIdx.x)   # noqa: F841 (a result kept)
        cuda.atomic.cas(out, 2, 0, 7)

    out = np.zeros(3, np.int64)
    simulator.run(count, 2, 64, out)
    assert out.tolist() == [2 * 64 * 20, 63, 7]


def test_warp_shuffle_reduction():
    x = np.arange(256, dtype=np.float64)
    out = np.zeros(8)
    simulator.run(warp_sum, 2, 128, x, out)
    np.testing.assert_array_equal(out, x.reshape(8, 32).sum(axis=1))


def test_warp_votes_and_matches():
    @cuda.jit
    def votes(x, out):
        i = cuda.grid(1)
        lane = cuda.laneid
        b = cuda.ballot_sync(0xFFFFFFFF, x[i] > 0)
        a = cuda.all_sync(0xFFFFFFFF, x[i] >= 0)
        m = cuda.match_any_sync(0xFFFFFFFF, x[i] % 2)
        x2 = cuda.shfl_xor_sync(0xFFFFFFFF, x[i], 1)
        if lane == 0:
            out[0] = b
            out[1] = a
        out[2 + i] = m
        out[34 + i] = x2

    x = np.array([1, 0] * 16, dtype=np.int32)
    out = np.zeros(66, np.int64)
    simulator.run(votes, 1, 32, x, out)
    even = sum(1 << k for k in range(0, 32, 2))
    assert out[0] == np.int32(np.uint32(even).view(np.int32)) and out[1] == 1
    odd_lanes = sum(1 << k for k in range(1, 32, 2))
    assert out[2] == np.uint32(even).view(np.int32)
    assert out[3] == np.uint32(odd_lanes).view(np.int32)
    np.testing.assert_array_equal(out[34:], x.reshape(16, 2)[:, ::-1].ravel())


def test_2d_indexing_and_a_2d_shared_tile():
    a = _rand(40 * 50).reshape(40, 50)
    b = _rand(40 * 50, seed=3).reshape(40, 50)
    out = np.zeros_like(a)
    simulator.run(add_2d, (3, 4), (16, 16), a, b, out)
    np.testing.assert_array_equal(out, a + b)
    t = np.zeros((50, 40), np.float32)
    simulator.run(transpose, (4, 3), (TILE, TILE), a, t)
    np.testing.assert_array_equal(t, a.T)


def test_local_arrays():
    x = np.random.default_rng(4).integers(0, 100, 64).astype(np.int64)
    out = np.zeros_like(x)
    simulator.run(local_reverse, 1, 8, x, out)
    np.testing.assert_array_equal(out, x.reshape(8, 8)[:, ::-1].ravel())


def test_const_arrays():
    idx = np.arange(20, dtype=np.int64)
    out = np.zeros(20)
    simulator.run(lookup, 1, 32, idx, out)
    np.testing.assert_array_equal(out, TABLE[idx % 10] + WEIGHTS[idx % 2, idx % 3])


def test_dynamic_shared_memory_sized_at_launch():
    x = _rand(256)
    out = np.zeros_like(x)
    sizes = np.zeros((2, 2), np.int64)
    simulator.run(dyn_reverse, 2, 128, x, out, sizes, shared=128 * 4)
    np.testing.assert_array_equal(out, x.reshape(2, 128)[:, ::-1].ravel())
    assert sizes.tolist() == [[128, 128], [128, 128]]


def test_print_formats_like_the_device(capsys):
    simulator.run(printer, 1, 4, np.array([1.5, -2.0]))
    lines = sorted(capsys.readouterr().out.splitlines())
    assert lines == ["thread 0 1.500000 True (0, 2.500000)",
                     "thread 1 -2.000000 False (1, 2.500000)"]


def test_syncthreads_reductions_and_early_exit():
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i >= x.size:
            return                              # exited threads leave the barrier
        c = cuda.syncthreads_count(x[i] > 0)
        a = cuda.syncthreads_and(x[i] > -1)
        o = cuda.syncthreads_or(x[i] > 100)
        if cuda.threadIdx.x == 0:
            out[0], out[1], out[2] = c, a, o

    x = np.array([1, 0, 5, 7, 0, 2], np.int32)
    out = np.zeros(3, np.int32)
    simulator.run(k, 1, 32, x, out)
    assert out.tolist() == [4, 1, 0]


def test_bits_and_fma():
    @cuda.jit
    def k(x, out, f):
        out[0] = cuda.popc(x[0])
        out[1] = cuda.clz(x[0])
        out[2] = cuda.ffs(x[0])
        out[3] = cuda.brev(np.uint32(1))
        f[0] = cuda.fma(f[1], f[2], f[3])

    x = np.array([0b10110000], np.int32)
    out = np.zeros(4, np.int64)
    f = np.array([0, 3, 4, 5], np.float32)
    simulator.run(k, 1, 1, x, out, f)
    assert out.tolist() == [3, 24, 5, 1 << 31]
    assert f[0] == 17


def test_libdevice_functions_in_the_simulator():
    @cuda.jit
    def k(x, out):
        out[0] = libdevice.sinf(x[0])
        out[1] = libdevice.hypotf(x[0], x[1])

    x = np.array([0.5, 2.0], np.float32)
    out = np.zeros(2, np.float32)
    simulator.run(k, 1, 1, x, out)
    np.testing.assert_allclose(out, [np.sin(0.5), np.hypot(0.5, 2.0)], rtol=1e-6)

    @cuda.jit
    def j0(x, out):
        out[0] = libdevice.j0f(x[0])

    simulator.run(j0, 1, 1, x, out)                      # (every libdevice name has one now)
    assert abs(out[0] - 0.93846981) < 1e-6                # J0(0.5)


# ---------------------------------------------------------------------------------------------
# Contextual dispatch and redefinition


def test_an_override_in_a_context_applies_in_the_simulator():
    ctx = Context("sim-test", parent=default_context)

    @ctx.override(math.sin)
    def doubled(x):
        return 2.0 * math.sin(x)               # the next layer down: the built-in sin

    x = _rand(64, np.float64)
    out = np.zeros_like(x)
    simulator.run(sin_kernel.with_context(ctx), 1, 64, out, x)
    np.testing.assert_allclose(out, 2.0 * np.sin(x))
    simulator.run(sin_kernel, 1, 64, out, x)  # the default context: the built-in sin
    np.testing.assert_allclose(out, np.sin(x))


def test_typed_overrides_apply_only_to_matching_types():
    ctx = Context("sim-typed", parent=default_context)
    ctx.override(math.sin, lambda x: x * np.float32(7.0), types=(numba.float32,))
    k = sin_kernel.with_context(ctx)
    x32 = np.array([1.0, 2.0], np.float32)
    out32 = np.zeros_like(x32)
    simulator.run(k, 1, 2, out32, x32)
    np.testing.assert_array_equal(out32, x32 * 7)
    x64 = x32.astype(np.float64)
    out64 = np.zeros_like(x64)
    simulator.run(k, 1, 2, out64, x64)
    np.testing.assert_allclose(out64, np.sin(x64))


def test_overrides_apply_inside_helpers_and_device_functions():
    ctx = Context("sim-chain", parent=default_context)

    def inner(v):
        return math.cos(v)

    @cuda.jit(device=True)
    def outer(v):
        return inner(v) + 1.0

    @cuda.jit
    def k(out, x):
        out[0] = outer(x[0])

    ctx.override(math.cos, lambda v: v * 11.0)
    out = np.zeros(1)
    simulator.run(k.with_context(ctx), 1, 1, out, np.array([2.0]))
    assert out[0] == 23.0


def _redefinable(v):
    return v + 1.0


@cuda.jit
def uses_redefinable(out):
    out[0] = _redefinable(out[0])


def test_a_redefined_helper_is_picked_up_at_the_next_launch():
    global _redefinable
    out = np.zeros(1)
    simulator.run(uses_redefinable, 1, 1, out)
    assert out[0] == 1.0
    saved = _redefinable
    try:
        def _redefinable(v):               # noqa: F811  (what re-running a cell does)
            return v + 100.0
        gpureplace.refresh()
        simulator.run(uses_redefinable, 1, 1, out)
        assert out[0] == 101.0
    finally:
        _redefinable = saved


# ---------------------------------------------------------------------------------------------
# Debuggability, types, speed


def test_out_of_bounds_index_names_thread_block_line_and_index():
    @cuda.jit
    def oob(x):
        i = cuda.grid(1)
        x[i] = 1.0                              # no bounds test

    with pytest.raises(IndexError) as info:
        simulator.run(oob, 2, 40, np.zeros(64))
    msg = str(info.value)
    line = oob.py_func.__code__.co_firstlineno + 3
    assert "index 64 is out of bounds for axis 0 with size 64" in msg
    assert "threadIdx=(24, 0, 0)" in msg and "blockIdx=(1, 0, 0)" in msg
    assert f"{__file__}:{line}" in msg and "in oob" in msg


def test_out_of_bounds_in_a_threaded_block():
    @cuda.jit
    def oob(x):
        buf = cuda.shared.array(8, float32)
        buf[cuda.threadIdx.x] = 1.0
        cuda.syncthreads()

    with pytest.raises(IndexError, match=r"index 8 .*threadIdx=\(8, 0, 0\)"):
        simulator.run(oob, 1, 16, np.zeros(1))


def test_float32_stays_float32():
    @cuda.jit
    def k(x, out, kinds):
        y = x[0] * float32(3.0) + x[0]
        out[0] = y
        kinds[0] = 1 if y.dtype == np.float32 else 0     # the simulator's view of the type

    x = np.array([0.1], np.float32)
    out = np.zeros(1, np.float32)
    kinds = np.zeros(1, np.int32)
    simulator.run(k, 1, 1, x, out, kinds, compile=False)
    assert out[0] == np.float32(0.1) * np.float32(3.0) + np.float32(0.1)
    assert kinds[0] == 1


def test_python_float_literals_are_float64_as_on_the_device():
    @cuda.jit
    def k(x, out):
        out[0] = x[0] * 0.1                  # float32 * float64 -> float64, then stored

    x = np.array([3.0], np.float32)
    out = np.zeros(1, np.float64)
    simulator.run(k, 1, 1, x, out)
    assert out[0] == 3.0 * 0.1


def test_int32_wraps():
    @cuda.jit
    def k(x, out):
        out[0] = x[0] + 1
        out[1] = x[1] * 2

    x = np.array([2**31 - 1, 2**30 + 5], np.int32)
    out = np.zeros(2, np.int32)
    simulator.run(k, 1, 1, x, out)
    assert out.tolist() == [-2**31, np.int32(np.int64(2**31 + 10) - 2**32)]


def test_small_integers_widen_as_numba_types_them():
    args = int_promotion_args()
    simulator.run(int_promotion, 1, 32, *args)
    _, _, avg, _, prod, _, _, mixed, shifted, neg = args
    assert avg.tolist() == [150, 255, 15]
    assert prod.tolist() == [10**10, 9, 46341**2]
    assert mixed.tolist() == [-4, 7, 2**63 - 1]
    assert shifted.tolist() == [1600, 4080, 160]
    assert neg.tolist() == [156, 1, 246]
    # the element type stays visible to intrinsics and stores still wrap
    @cuda.jit
    def k(x, out, bits):
        out[0] = x[0] + x[0]
        bits[0] = cuda.popc(x[0])
        bits[1] = cuda.clz(x[0])
    out, bits = np.zeros(1, np.uint8), np.zeros(2, np.int32)
    simulator.run(k, 1, 1, np.array([200], np.uint8), out, bits)
    assert out[0] == 144 and bits.tolist() == [3, 0]


def test_activemask_is_the_same_for_every_lane_that_calls_it_together():
    out = np.zeros(64, np.uint32)
    simulator.run(active_masks, 1, 64, out, 64)
    assert set(out.tolist()) == {0xFFFFFFFF}
    out[:] = 0
    # lanes 20..31 of the first warp skip the call and wait at the barrier; the second warp is
    # out of range entirely
    simulator.run(active_masks, 1, 64, out, 20)
    assert out[:20].tolist() == [0xFFFFF] * 20 and not out[20:].any()


def test_activemask_on_each_side_of_a_branch_names_that_side():
    out = np.zeros(32, np.uint32)
    simulator.run(split_masks, 1, 32, out)
    assert set(out[::2].tolist()) == {0x55555555} and set(out[1::2].tolist()) == {0xAAAAAAAA}


def test_deadlock_is_reported():
    @cuda.jit
    def k(x):
        if cuda.threadIdx.x < 4:
            cuda.syncwarp(0xFFFFFFFF)           # waits for lanes that wait at the barrier
        else:
            cuda.syncthreads()
        x[0] = 1

    with pytest.raises(simulator.KernelDeadlock, match="deadlock"):
        simulator.run(k, 1, 32, np.zeros(1), compile=False)


def test_threads_that_returned_count_as_arrived_at_a_grid_sync():
    """numba-cuda's pattern: threads past the end return before ``this_grid().sync()``, which
    the rest of their block reaches (the GPU runs it: the block's bar.sync counts exited
    threads, and thread (0, 0, 0) arrives for the block)."""
    @cuda.jit
    def rotate(x, out):
        i = cuda.grid(1)
        if i >= x.size:
            return
        g = cuda.cg.this_grid()
        x[i] = i
        g.sync()
        v = x[(i + 1) % x.size]
        if i % 3 == 1 and cuda.threadIdx.x != 0:
            return                               # some leave between the two syncs
        g.sync()
        out[i] = v + x[(i + 2) % x.size]

    for n in (200, 193, 255):
        x, out = np.zeros(n, np.int64), np.full(n, -1, np.int64)
        simulator.run(rotate, 4, 64, x, out)
        i = np.arange(n)
        left = (i % 3 == 1) & (i % 64 != 0)
        expected = np.where(left, -1, (i + 1) % n + (i + 2) % n)
        np.testing.assert_array_equal(out, expected)

    # a block whose threads all return while the others wait hangs the GPU
    with pytest.raises(simulator.KernelDeadlock, match=r"blockIdx=\(3, 0, 0\) finished"):
        simulator.run(rotate, 4, 64, np.zeros(150, np.int64), np.zeros(150, np.int64))


def test_thread_0_returning_between_grid_syncs_is_a_deadlock_naming_it():
    """Thread (0, 0, 0) is the one that arrives at the grid's counter for its block: a block
    whose thread (0, 0, 0) returned never arrives at the next grid sync, and the GPU hangs
    (the simulator counted it as arrived and ran on)."""
    @cuda.jit
    def k(a):
        i = cuda.grid(1)
        g = cuda.cg.this_grid()
        a[i] = 1
        g.sync()
        if i == 64:                              # thread (0, 0, 0) of block 1
            return
        g.sync()
        a[i] += a[(i + 1) % a.size]

    spec = k.compile("void(int64[:])")
    assert spec.cooperative and spec.ptx.count("atom.global.add") == 2   # (both syncs kept)
    a = np.zeros(128, np.int64)
    with pytest.raises(simulator.KernelDeadlock,
                       match=r"threadIdx=\(0, 0, 0\) of block blockIdx=\(1, 0, 0\) returned "
                             r"before cuda.cg.this_grid\(\).sync\(\) in k at .*:\d+.*the GPU "
                             r"hangs"):
        simulator.run(k, 2, 64, a)


def test_compile_errors_are_reported_before_simulating():
    @cuda.jit
    def bad(x):
        x[0] = [1, 2][0] + undefined_name      # noqa: F821

    with pytest.raises(CompileError):
        simulator.run(bad, 1, 1, np.zeros(1))


def test_host_launch_errors():
    with pytest.raises(gpureplace.LaunchError, match="missing"):
        simulator.run(saxpy, 1, 1, 1.0)
    with pytest.raises(gpureplace.LaunchError, match="block"):
        simulator.run(saxpy, 1, 2048, np.float32(1), np.zeros(1, np.float32),
                      np.zeros(1, np.float32), np.zeros(1, np.float32))


def test_a_launch_with_something_that_is_no_stream_is_refused_as_on_the_gpu(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    args = (np.float32(1), np.ones(1, np.float32), np.ones(1, np.float32),
            np.zeros(1, np.float32))
    with pytest.raises(gpureplace.LaunchError, match="stream must be .* got 'notastream'"):
        saxpy[1, 1, "notastream"](*args)
    saxpy[1, 1, cuda.stream()](*args)
    saxpy[1, 1, 0](*args)
    assert args[3].tolist() == [2.0]


def test_elementwise_2_16_threads_in_seconds():
    n = 1 << 16
    x, y = _rand(n), _rand(n, seed=5)
    out = np.zeros_like(x)
    start = time.perf_counter()
    simulator.run(saxpy, n // 256, 256, np.float32(3.0), x, y, out)
    assert time.perf_counter() - start < 60
    np.testing.assert_array_equal(out, np.float32(3.0) * x + y)


def test_a_barrier_the_scan_cannot_see_reruns_the_launch_with_threads():
    @cuda.jit
    def k(x, out):
        t = cuda.threadIdx.x
        x[t] += 1.0                              # must not be applied twice by the rerun
        getattr(cuda, "sync" + "threads")()      # hidden from the static scan
        out[t] = x[(t + 1) % x.size]

    x = np.arange(8, dtype=np.float64)
    out = np.zeros(8)
    simulator.run(k, 1, 8, x, out, compile=False)
    np.testing.assert_array_equal(x, np.arange(8) + 1.0)
    np.testing.assert_array_equal(out, np.roll(np.arange(8) + 1.0, -1))


# -- the simulator as the launch backend -----------------------------------------------------------

def test_launch_syntax_runs_in_the_simulator_without_a_gpu(monkeypatch, capsys):
    import numpy as np

    from gpureplace import cuda
    from gpureplace.config import settings
    from gpureplace import probe
    monkeypatch.setattr(probe, "available", lambda: False)
    monkeypatch.setattr(settings, "backend", "auto")
    monkeypatch.setattr(settings, "_noticed", False)

    @cuda.jit
    def twice(out, x):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = 2 * x[i]

    x = np.arange(100, dtype=np.float32)
    out = np.zeros_like(x)
    twice[4, 32](out, x)
    np.testing.assert_array_equal(out, 2 * x)
    twice[4, 32](out, x)
    err = capsys.readouterr().err
    assert err.count("kernels run in the CPU simulator") == 1          # said once


def test_backend_setting_is_checked(monkeypatch):
    import pytest

    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "quantum")
    with pytest.raises(ValueError, match="backend must be one of"):
        settings.launch_backend()


def test_prepared_launch_runs_and_follows_redefinitions(monkeypatch):
    import numpy as np

    import gpureplace
    from gpureplace import cuda
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    ns = {"cuda": cuda}
    exec("def f(v):\n    return v + 1\n"
         "@cuda.jit\ndef k(out):\n    i = cuda.grid(1)\n    if i < out.size:\n"
         "        out[i] = f(out[i])\n", ns)
    out = cuda.to_device(np.zeros(64, dtype=np.int64))
    run = ns["k"][2, 32].prepare(out)
    run()
    run()
    assert out.copy_to_host().tolist() == [2] * 64
    exec("def f(v):\n    return v + 10\n", ns)
    gpureplace.refresh()
    run()
    assert out.copy_to_host().tolist() == [12] * 64


def test_round_with_digits_is_numba_cudas_including_overflow():
    # the device runs Numba's own round(x, n) on float64 (a float32 argument converted to float64
    # and the result back, as numba-cuda computes it); Numba on the CPU, in float64, is the
    # reference
    from numba import njit
    x32 = np.array([3.4e38, 2.675, 123.456, -0.5, 2.5, 1.005, np.inf], np.float32)
    x64 = np.array([1.7976931348623157e308, 2.675, 123.456, -0.5, 2.5, 1.005, -np.inf])
    n = np.array([300, 2, -1, 0, 0, 2, 3], np.int64)
    out32, out64 = np.zeros(7, np.float32), np.zeros(7)
    simulator.run(round_digits, 1, 8, x32, x64, n, out32, out64)
    ref = njit(lambda x, d: round(x, d))
    assert out32.tolist() == [float(np.float32(ref(np.float64(a), b))) for a, b in zip(x32, n)]
    assert out32[1] == np.float32(2.67)      # float32(2.675) is 2.67499995: Numba's CPU gives 2.68
    assert out64.tolist() == [ref(a, b) for a, b in zip(x64, n)]
    assert out32[0] == x32[0] and out64[0] == x64[0]          # overflow leaves x as it is


SIM_RATE = 0.5


def _sim_helper(v):
    return v + 1.0


def test_the_simulator_runs_what_the_gpu_runs_until_gpureplace_is_told_of_a_change(monkeypatch):
    """A global, a closure variable and a helper bound again in a script that has not called
    ``gpureplace.refresh()``: the GPU runs the code it compiled, so the simulator reads what
    that compile read; after refresh() both run the new code."""
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    global SIM_RATE, _sim_helper
    scale = 3.0

    @cuda.jit
    def k(out):
        out[0] = SIM_RATE * scale + _sim_helper(0.0)

    out = np.zeros(1)
    k[1, 1](out)
    assert out[0] == 0.5 * 3.0 + 1.0
    old_rate, old_helper = SIM_RATE, _sim_helper
    try:
        SIM_RATE = 0.25
        scale = 5.0                              # noqa: F841  (read by k as a closure variable)

        def _sim_helper(v):                      # noqa: F811
            return v + 10.0

        k[1, 1](out)
        assert out[0] == 0.5 * 3.0 + 1.0        # what the compiled kernel holds
        gpureplace.refresh()
        k[1, 1](out)
        assert out[0] == 0.25 * 5.0 + 10.0
    finally:
        SIM_RATE, _sim_helper = old_rate, old_helper
        gpureplace.refresh()


def test_a_failed_launch_leaves_host_arrays_as_they_were(monkeypatch):
    """On the GPU a host array is copied back only after the kernel succeeded; the simulator,
    which runs on it in place, puts it back when the launch fails."""
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")

    @cuda.jit
    def k(x, idx):
        i = cuda.grid(1)
        x[i] = -1.0
        if i == 5:
            x[idx] = 2.0

    h = np.arange(8.0)
    with pytest.raises(IndexError):
        k[1, 8](h, 100)
    assert h.tolist() == list(range(8))
    k[1, 8](h, 3)
    assert h.tolist() == [-1.0, -1.0, -1.0, 2.0, -1.0, -1.0, -1.0, -1.0]
