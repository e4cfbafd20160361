"""Shared and local arrays start as a GPU's do, with whatever the memory held -- here 0xFF bytes
(every float a NaN, every signed integer -1), not zeros: a kernel that reads an element before
any thread wrote it (an accumulator never set to 0, a neighbour read without syncthreads())
worked in the simulator, whose zeros hid the bug, and computed with garbage on the GPU."""

import numpy as np
from numba import float32, int32

from gpureplace import cuda


@cuda.jit
def sums_without_zeroing(x, out):
    acc = cuda.shared.array(1, float32)
    cuda.syncthreads()
    cuda.atomic.add(acc, 0, x[cuda.threadIdx.x])
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        out[0] = acc[0]


@cuda.jit
def sums_after_zeroing(x, out):
    acc = cuda.shared.array(1, float32)
    if cuda.threadIdx.x == 0:
        acc[0] = 0
    cuda.syncthreads()
    cuda.atomic.add(acc, 0, x[cuda.threadIdx.x])
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        out[0] = acc[0]


@cuda.jit
def locals_and_dynamic(out_f, out_i, out_d):
    f = cuda.local.array(2, float32)
    i = cuda.local.array(2, int32)
    d = cuda.shared.array(0, int32)
    out_f[0] = f[1]
    out_i[0] = i[1]
    out_d[0] = d[0]


def test_an_accumulator_never_set_to_zero_shows_as_nan():
    x = np.ones(32, np.float32)
    out = np.zeros(1, np.float32)
    sums_without_zeroing[1, 32](x, out)
    assert np.isnan(out[0])
    sums_after_zeroing[1, 32](x, out)
    assert out[0] == 32.0


def test_local_arrays_and_dynamic_shared_memory_start_unwritten():
    f, i, d = np.zeros(1, np.float32), np.zeros(1, np.int32), np.zeros(1, np.int32)
    locals_and_dynamic[1, 1, 0, 16](f, i, d)
    assert np.isnan(f[0]) and i[0] == -1 and d[0] == -1
