"""``cuda.cg.this_grid().sync()``: a barrier across every block of a launch (cooperative launch on
the GPU, grid mode in the simulator)."""

import numpy as np
import pytest

from conftest import assemble
from gpureplace import LaunchError, cuda, simulator
from gpureplace.simulator.blocks import KernelDeadlock


@cuda.jit
def reverse_twice(x, out):
    g = cuda.cg.this_grid()
    i = cuda.grid(1)
    if i < x.size:
        x[i] = i
    g.sync()                                   # every block's writes are visible after this
    if i < x.size:
        out[i] = x[x.size - 1 - i]
    g.sync()
    if i < x.size:
        x[i] = 2 * out[i]


def helper_sync():
    cuda.cg.this_grid().sync()


@cuda.jit
def via_helper(counter, seen):
    i = cuda.grid(1)
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(counter, 0, 1)
    helper_sync()
    if i == 0:
        seen[0] = counter[0]


def test_the_barrier_is_a_global_counter_and_atomics():
    spec = reverse_twice.compile("void(int32[::1], int32[::1])")
    ptx = spec.ptx
    assert ".global .align 4 .u32 __gpureplace_grid_barrier" in ptx
    assert ptx.count("atom.global.add.u32") == 2 and "bar.sync" in ptx
    assemble(ptx)
    helper = via_helper.compile("void(int32[::1], int32[::1])")
    assert helper.ptx.count(".global .align 4 .u32 __gpureplace_grid_barrier") == 1
    assemble(helper.ptx)
    plain = cuda.jit(lambda x: None).compile("void(int32[::1])")
    assert "__gpureplace_grid_barrier" not in plain.ptx


def _check(x, out):
    n = x.size
    np.testing.assert_array_equal(out, np.arange(n)[::-1])
    np.testing.assert_array_equal(x, 2 * np.arange(n)[::-1])


def test_blocks_wait_for_each_other_in_the_simulator():
    x, out = np.zeros(300, np.int32), np.zeros(300, np.int32)
    simulator.run(reverse_twice, 5, 64, x, out)
    _check(x, out)
    counter, seen = np.zeros(1, np.int32), np.zeros(1, np.int32)
    simulator.run(via_helper, 6, 32, counter, seen)
    assert seen[0] == 6                        # every block counted before block 0 read


def test_a_block_that_never_arrives_is_a_deadlock_in_the_simulator():
    @cuda.jit
    def bad(x):
        if cuda.blockIdx.x == 1:
            return
        cuda.cg.this_grid().sync()
        x[cuda.grid(1)] = 1
    with pytest.raises(KernelDeadlock, match=r"blockIdx=\(1, 0, 0\)"):
        simulator.run(bad, 3, 32, np.zeros(96, np.int32))


@pytest.mark.gpu
def test_blocks_wait_for_each_other_on_the_gpu():
    import cupy as cp
    n = 20 * 256                       # 20 blocks (few enough for the simulator too)
    x, out = cp.zeros(n, cp.int32), cp.zeros(n, cp.int32)
    reverse_twice[(n + 255) // 256, 256](x, out)
    _check(cp.asnumpy(x), cp.asnumpy(out))
    reverse_twice[(n + 255) // 256, 256].prepare(x, out)()        # prepared: cooperative too
    _check(cp.asnumpy(x), cp.asnumpy(out))


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_a_grid_too_large_to_be_resident_is_refused_by_name():
    import cupy as cp
    sig = "void(int32[::1], int32[::1])"
    spec = reverse_twice.compile(sig)
    limit = spec.max_cooperative_grid_blocks(256)
    assert limit >= cp.cuda.Device().attributes["MultiProcessorCount"]
    x = cp.zeros(4, cp.int32)
    with pytest.raises(LaunchError, match=f"at most {limit} blocks"):
        reverse_twice[limit + 1, 256](x, x)
