"""The simulator's warp operations, atomics and scheduling, as the compiled PTX behaves on a
Volta or later GPU: activemask per inlined call site, spin-waits that other threads end
(independent thread scheduling), match.sync on bit patterns, shfl.sync's 5-bit operand,
atom.global.add.f32's flush of subnormals, float indices of atomics, deadlock reports, keyword
arguments of warp intrinsics, and Numba-style overloads whose implementation uses the kernel
language."""

import re
import time

import numpy as np
import pytest
from numba import float32

from gpureplace import cuda
from gpureplace.config import settings
from gpureplace.errors import CompileError
from gpureplace.simulator import KernelDeadlock, blocks, runner

FULL = 0xFFFFFFFF


@pytest.fixture(autouse=True)
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


# ---------------------------------------------------------------------------------------------
# activemask in a device function called from both sides of a branch


def agg_inc(ctr, idx):
    """Warp-aggregated atomic increment (CUDA's atomicAggInc): one atomic per converged group."""
    mask = cuda.activemask()
    leader = cuda.ffs(mask) - 1
    res = 0
    if cuda.laneid == leader:
        res = cuda.atomic.add(ctr, idx, cuda.popc(mask))
    res = cuda.shfl_sync(mask, res, leader)
    return res + cuda.popc(mask & cuda.lanemask_lt())


@cuda.jit
def agg_both_sides(ctr, slot):
    if cuda.laneid < 8:
        slot[cuda.laneid] = agg_inc(ctr, 0)
    else:
        slot[cuda.laneid] = agg_inc(ctr, 1)


def mask_helper():
    return cuda.activemask()


def mask_twice_removed():
    return mask_helper()


@cuda.jit
def masks_via_helpers(masks):
    lane = cuda.laneid
    if lane < 8:
        masks[lane] = mask_twice_removed()
    else:
        masks[lane] = mask_twice_removed()


def test_activemask_in_a_helper_is_per_call_site():
    # the GPU's code inlines the helper at each call: one activemask instruction per side
    ptx = masks_via_helpers.compile("void(int64[:])").ptx
    assert ptx.count("activemask.b32") == 2
    masks = np.zeros(32, np.int64)
    masks_via_helpers[1, 32](masks)
    assert list(masks[:8]) == [0xFF] * 8
    assert list(masks[8:]) == [0xFFFFFF00] * 24


def test_warp_aggregated_increment_from_both_sides():
    ctr = np.zeros(2, np.int32)
    slot = np.zeros(32, np.int64)
    agg_both_sides[1, 32](ctr, slot)
    assert list(ctr) == [8, 24]
    assert sorted(slot[:8]) == list(range(8)) and sorted(slot[8:]) == list(range(24))


def shfl_helper(v):
    return cuda.shfl_sync(FULL, v, 0)


@cuda.jit
def shfl_both_sides(out):
    lane = cuda.laneid
    if lane < 8:
        out[lane] = shfl_helper(lane + 100)
    else:
        out[lane] = shfl_helper(lane + 200)


def test_shfl_from_two_call_sites_meets_as_on_volta():
    # shfl.sync waits for the lanes of its mask that execute a shfl.sync of the same mode and
    # mask, the same instruction or not (only sm_6x needs the same one, converged): the two
    # sides meet, and lane 0's value reaches every lane
    out = np.zeros(32, np.int64)
    shfl_both_sides[1, 32](out)
    assert list(out) == [100] * 32


# ---------------------------------------------------------------------------------------------
# spin-waits: the other threads run meanwhile (independent thread scheduling)


@cuda.jit
def flag_in_warp(flag, out):
    t = cuda.threadIdx.x
    if t == 31:
        out[0] = 42
        cuda.threadfence()
        cuda.atomic.exch(flag, 0, 1)
    elif t == 0:
        while cuda.atomic.add(flag, 0, 0) == 0:
            cuda.nanosleep(100)
        out[1] = out[0]


@cuda.jit
def flag_no_sleep(flag, out):
    t = cuda.threadIdx.x
    if t == 31:
        out[0] = 42
        cuda.threadfence_block()
        cuda.atomic.exch(flag, 0, 1)
    elif t == 0:
        while cuda.atomic.add(flag, 0, 0) == 0:
            pass
        out[1] = out[0]


@cuda.jit
def flag_fence_read(flag, out):
    t = cuda.threadIdx.x
    if t == 63:
        out[0] = 7
        cuda.threadfence()
        flag[0] = 1
    elif t == 0:
        while flag[0] == 0:
            cuda.threadfence()
        out[1] = out[0]


@pytest.mark.parametrize("kernel,nthreads,expected", [
    (flag_in_warp, 32, 42), (flag_no_sleep, 32, 42), (flag_fence_read, 64, 7)])
def test_spin_wait_within_a_block_ends(kernel, nthreads, expected):
    flag = np.zeros(1, np.int32)
    out = np.zeros(2, np.int32)
    t0 = time.monotonic()
    kernel[1, nthreads](flag, out)
    assert list(out) == [expected, expected]
    assert time.monotonic() - t0 < 30


@cuda.jit
def reverse_turns(turn, order):
    # thread i waits for its turn, n - 1 - i: each one waits for a thread after it
    i = cuda.threadIdx.x
    n = cuda.blockDim.x
    while cuda.atomic.add(turn, 0, 0) != n - 1 - i:
        pass
    order[n - 1 - i] = i
    cuda.atomic.add(turn, 0, 1)


@cuda.jit
def spin_lock_counter(lock, count):
    # every thread takes the lock in turn, the first holding it until the last has tried
    done = False
    while not done:
        if cuda.atomic.cas(lock, 0, 0, 1) == 0:
            if count[0] == 0:
                while cuda.atomic.add(count, 1, 0) < cuda.blockDim.x - 1:
                    pass
            count[0] = count[0] + 1
            cuda.threadfence()
            cuda.atomic.exch(lock, 0, 0)
            done = True
        elif cuda.threadIdx.x != 0:
            cuda.atomic.add(count, 1, 1)       # (once per try: the first waits for these)


def test_threads_waiting_for_later_threads_take_turns():
    order = np.zeros(32, np.int64)
    reverse_turns[1, 32](np.zeros(1, np.int32), order)
    assert list(order) == list(range(31, -1, -1))


def test_spin_lock_serialises_the_threads():
    lock = np.zeros(1, np.int32)
    count = np.zeros(2, np.int64)
    spin_lock_counter[1, 64](lock, count)
    assert count[0] == 64 and lock[0] == 0


@cuda.jit
def waits_for_later_block(flag, out):
    b = cuda.blockIdx.x
    if cuda.threadIdx.x == 0:
        if b == 1:
            out[0] = 7
            cuda.threadfence()
            cuda.atomic.exch(flag, 0, 1)
        else:
            while cuda.atomic.add(flag, 0, 0) == 0:
                cuda.nanosleep(100)
            out[1] = out[0]


def test_block_waiting_for_a_later_block_ends():
    flag = np.zeros(1, np.int32)
    out = np.zeros(2, np.int32)
    waits_for_later_block[2, 1](flag, out)
    assert list(out) == [7, 7]
    flag[:] = 0
    out[:] = 0
    waits_for_later_block[2, 32](flag, out)
    assert list(out) == [7, 7]


@cuda.jit
def waits_while_others_wait_at_a_barrier(flag, out):
    if cuda.threadIdx.x == 0:
        while cuda.atomic.add(flag, 0, 0) == 0:
            cuda.nanosleep(100)
        out[0] = 1
    cuda.syncthreads()


def test_spin_that_nobody_ends_is_a_clear_error():
    flag = np.zeros(1, np.int32)
    out = np.zeros(1, np.int32)
    t0 = time.monotonic()
    with pytest.raises(KernelDeadlock) as info:
        waits_while_others_wait_at_a_barrier[1, 32](flag, out)
    msg = str(info.value)
    assert "threadIdx=(0, 0, 0)" in msg and "spins without end" in msg
    first = waits_while_others_wait_at_a_barrier.py_func.__code__.co_firstlineno  # @cuda.jit
    assert re.search(rf"test_simulator_warp_fidelity\.py:({first + 3}|{first + 4})\b", msg), msg
    assert "cuda.atomic.add" in msg and "cuda.nanosleep" in msg
    assert "syncthreads (31 thread(s) arrived)" in msg
    assert time.monotonic() - t0 < 10


@cuda.jit
def never_set(flag, out):
    if cuda.threadIdx.x == 0 and cuda.blockIdx.x == 0:
        while cuda.atomic.cas(flag, 0, 1, 2) != 5:
            pass
        out[0] = 1


@cuda.jit
def every_block_waits(flag, out):
    if cuda.threadIdx.x == 0:
        while cuda.atomic.cas(flag, 0, 1, 2) != 5:
            pass
        out[0] = 1


def test_spin_across_blocks_too_large_to_run_at_once(monkeypatch):
    monkeypatch.setattr(runner, "GRID_MODE_MAX_THREADS", 4)
    with pytest.raises(KernelDeadlock, match=r"blockIdx=\(0, 0, 0\) spins without end.*"
                                             r"one after another.*more than 4 threads"):
        never_set[3, 2](np.zeros(1, np.int32), np.zeros(1, np.int32))


def test_spin_with_every_other_block_finished():
    t0 = time.monotonic()
    with pytest.raises(KernelDeadlock, match=r"cuda\.atomic\.cas.*other blocks have finished"):
        never_set[3, 2](np.zeros(1, np.int32), np.zeros(1, np.int32))
    assert time.monotonic() - t0 < 10


def test_spin_in_grid_mode_ends_after_a_quiet_timeout(monkeypatch):
    monkeypatch.setattr(blocks, "GRID_SPIN_TIMEOUT_S", 0.3)
    out = np.zeros(1, np.int32)
    with pytest.raises(KernelDeadlock, match=r"cuda\.atomic\.cas.*for 0\.3 s"):
        every_block_waits[3, 2](np.zeros(1, np.int32), out)
    assert out[0] == 0


@cuda.jit
def activemask_beside_spinner(flag, masks, spinner):
    lane = cuda.laneid
    if lane == spinner:
        while cuda.atomic.add(flag, 0, 0) == 0:
            pass
        masks[lane] = 1
    else:
        masks[lane] = cuda.activemask()
        if lane == 31 - spinner:
            cuda.atomic.exch(flag, 0, 1)


@pytest.mark.parametrize("spinner", [0, 31])
def test_activemask_does_not_wait_for_a_spinning_lane(spinner):
    # (lane 0 spins before the others reach activemask; lane 31, after they wait there)
    masks = np.zeros(32, np.int64)
    activemask_beside_spinner[1, 32](np.zeros(1, np.int32), masks, spinner)
    assert masks[spinner] == 1
    assert set(np.delete(masks, spinner)) == {FULL & ~(1 << spinner)}


@cuda.jit
def max_of(x, m):
    i = cuda.grid(1)
    while i < x.size:
        cuda.atomic.max(m, 0, x[i])          # mostly leaves m as it is: not a spin-wait
        i += cuda.gridsize(1)
    cuda.syncthreads()


@cuda.jit
def histogram16(x, h):
    i = cuda.grid(1)
    while i < x.size:
        cuda.atomic.add(h, x[i] % 16, 1)
        i += cuda.gridsize(1)


def test_loops_of_atomics_are_no_spin_wait(monkeypatch):
    x = np.zeros(20000, np.int64)
    x[123] = 9
    m = np.zeros(1, np.int64)
    max_of[2, 64](x, m)
    assert m[0] == 9
    # a kernel without barriers still runs its threads one after another
    monkeypatch.setattr(runner, "_run_threaded", None)
    h = np.zeros(16, np.int64)
    histogram16[2, 32](np.arange(1000, dtype=np.int64), h)
    assert h.sum() == 1000


# ---------------------------------------------------------------------------------------------
# match_any_sync / match_all_sync compare bit patterns


@cuda.jit
def matches(vals, many, mall, mallp):
    i = cuda.threadIdx.x
    many[i] = cuda.match_any_sync(FULL, vals[i])
    m, p = cuda.match_all_sync(FULL, vals[i])
    mall[i] = m
    mallp[i] = p


@pytest.mark.parametrize("dtype,bits", [(np.float32, "b32"), (np.float64, "b64")])
def test_match_compares_float_bits(dtype, bits):
    sig = f"void({np.dtype(dtype).name}[:], int64[:], int64[:], int64[:])"
    assert f"match.any.sync.{bits}" in matches.compile(sig).ptx
    out = [np.zeros(32, np.int64) for _ in range(3)]
    matches[1, 32](np.full(32, np.nan, dtype), *out)
    assert [int(o[0]) & FULL for o in out] == [FULL, FULL, 1]
    zeros = np.zeros(32, dtype)
    zeros[16:] = -0.0
    matches[1, 32](zeros, *out)
    assert int(out[0][0]) & FULL == 0xFFFF and int(out[0][31]) & FULL == 0xFFFF0000
    assert out[1][0] == 0 and out[2][0] == 0


# ---------------------------------------------------------------------------------------------
# atom.global.add.f32 flushes subnormals; shared memory keeps them


@cuda.jit
def add_sub_f32(a, v, old, shared_out):
    old[0] = cuda.atomic.add(a, 0, v)
    old[1] = cuda.atomic.sub(a, 1, v)
    s = cuda.shared.array(2, float32)
    s[0] = 0
    s[1] = 0
    cuda.atomic.add(s, 0, v)
    cuda.atomic.sub(s, 1, v)
    shared_out[0] = s[0]
    shared_out[1] = s[1]


def test_atomic_add_f32_flushes_subnormals_on_global_memory_only():
    ptx = add_sub_f32.compile("void(float32[:], float32, float32[:], float32[:])").ptx
    assert "atom.global.add.f32" in ptx and "atom.shared.add.f32" in ptx
    assert "noftz" not in ptx
    a = np.array([1e-40, 0.0], np.float32)
    old = np.zeros(2, np.float32)
    shared_out = np.zeros(2, np.float32)
    add_sub_f32[1, 1](a, np.float32(1e-40), old, shared_out)
    assert list(a) == [0.0, 0.0]                    # inputs and result flushed
    assert old[0] == np.float32(1e-40)              # the value read, as it was
    assert list(shared_out) == [np.float32(1e-40), -np.float32(1e-40)]
    a = np.array([-2e-38, 1.0], np.float32)         # a normal sum is kept, a subnormal one not
    add_sub_f32[1, 1](a, np.float32(1.5e-38), old, shared_out)
    assert a[0] == 0.0 and np.signbit(a[0]) and a[1] == np.float32(1.0) - np.float32(1.5e-38)


# ---------------------------------------------------------------------------------------------
# shfl.sync uses the low 5 bits of its lane operand


@cuda.jit
def shuffled(out, d):
    i = cuda.laneid
    out[0, i] = cuda.shfl_up_sync(FULL, i, d)
    out[1, i] = cuda.shfl_down_sync(FULL, i, d)
    out[2, i] = cuda.shfl_sync(FULL, i, d)
    out[3, i] = cuda.shfl_xor_sync(FULL, i, d)


def _ptx_semantics(d):
    b = d & 31                                   # bval = b[4:0]; c: 0 for up, 0x1f otherwise
    lanes = range(32)
    return np.array([[lane - b if lane - b >= 0 else lane for lane in lanes],
                     [lane + b if lane + b <= 31 else lane for lane in lanes],
                     [b for _ in lanes], [lane ^ b for lane in lanes]])


@pytest.mark.parametrize("d", [33, -1, 64 + 5, -30, 1 << 40])
def test_shuffle_operand_is_five_bits(d):
    out = np.zeros((4, 32), np.int64)
    shuffled[1, 32](out, d)
    assert (out == _ptx_semantics(d)).all()
    if d == -1:                                  # shfl_down by 31: lane 0 from lane 31 only
        assert out[1, 0] == 31 and list(out[1, 1:]) == list(range(1, 32))


# ---------------------------------------------------------------------------------------------
# a float in an atomic's tuple index


@cuda.jit
def float_index_add(a2, scale):
    i = cuda.threadIdx.x
    cuda.atomic.add(a2, (i, i * scale), 5)


def test_float_in_atomic_tuple_index_truncates():
    assert "cvt.rzi.s64.f64" in float_index_add.compile("void(int64[:, :], float64)").ptx
    a2 = np.zeros((2, 3), np.int64)
    float_index_add[1, 2](a2, 1.0)
    assert a2.tolist() == [[5, 0, 0], [0, 5, 0]]
    a2[:] = 0
    float_index_add[1, 2](a2, 1.9)                 # 0.0 -> 0, 1.9 -> 1 (toward zero)
    assert a2.tolist() == [[5, 0, 0], [0, 5, 0]]


# ---------------------------------------------------------------------------------------------
# deadlock report


@cuda.jit
def one_at_barrier(out):
    i = cuda.threadIdx.x
    if i == 31:
        cuda.syncthreads()
    else:
        out[i] = cuda.shfl_sync(FULL, i, 0)


def test_deadlock_counts_the_threads_at_syncthreads():
    with pytest.raises(KernelDeadlock) as info:
        one_at_barrier[1, 32](np.zeros(32, np.int64))
    assert "syncthreads (1 thread(s) arrived)" in str(info.value)
    assert "31 lane(s) arrived" in str(info.value)


# ---------------------------------------------------------------------------------------------
# keyword arguments of warp intrinsics


@cuda.jit
def shuffle_by_keyword(a):
    lane = cuda.laneid
    a[lane] = cuda.shfl_sync(FULL, lane * 10, src_lane=1)
    a[32 + lane] = cuda.shfl_down_sync(value=lane, delta=2, mask=FULL)


def test_shuffles_take_numba_cuda_keywords():
    a = np.zeros(64, np.int32)
    shuffle_by_keyword[1, 32](a)
    assert list(a[:4]) == [10] * 4
    assert list(a[32:35]) == [2, 3, 4] and a[63] == 31


def _compile_error(src):
    ns = {}
    exec(f"def f(a):\n    a[0] = {src}\n", {"cuda": cuda, "FULL": FULL}, ns)
    with pytest.raises(CompileError) as info:
        cuda.jit(ns["f"]).compile("void(int32[:])")
    return str(info.value).splitlines()[0]


def test_keyword_errors_say_what_is_wrong():
    msg = _compile_error("cuda.ballot_sync(FULL, predicate=True)")
    assert "takes no keyword arguments: pass mask, predicate by position" in msg
    assert "got 2" not in msg
    assert "has no parameter 'lane'; it takes (mask, value, src_lane)" in \
        _compile_error("cuda.shfl_sync(FULL, 1, lane=2)")
    assert "multiple values for argument 'src_lane'" in \
        _compile_error("cuda.shfl_sync(FULL, 1, 2, src_lane=2)")
    assert "takes 3 arguments (mask, value, src_lane), got 2" in \
        _compile_error("cuda.shfl_sync(FULL, 1)")

