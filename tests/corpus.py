"""Kernels that more than one test file runs, written once here.

- The kernel-language corpus: a block reduction in shared memory, a local array, constant arrays,
  a 2-D grid, ``math.sin`` (for contexts), atomics, a warp shuffle, integer promotion,
  ``cuda.activemask`` and ``round(x, n)``.  The simulator runs them against NumPy
  (simulator/test_simulator.py) and against the device (simulator/test_simulator_differential.py);
  the compiler and GPU tests of the same features use the same kernels
  (lang/test_lang_sync_memory.py, jit/test_gpu_runtime.py, dispatch/test_contexts.py).
- ``bench_codegen()``: the benchmark's own module (bench/codegen.py, its kernels from
  bench/codegen_kernels.py), for tests that check its kernels as the benchmark runs them.
"""

import functools
import importlib.util
import math
import os
import textwrap
import types

import numba
import numpy as np
from numba import float32

from gpureplace import cuda

TPB = 128                 # threads per block of the reduction
TABLE = np.arange(10, dtype=np.float64) * 1.5 + 0.25
WEIGHTS = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.cache
def bench_codegen():
    """bench/codegen.py, loaded once by path (bench/ is a folder of scripts, not a package)."""
    path = os.path.join(REPO, "bench", "codegen.py")
    spec = importlib.util.spec_from_file_location("gpureplace_bench_codegen", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------
# Shared memory, local and constant arrays


@cuda.jit
def block_sum(x, out):
    """Tree reduction of each block's TPB elements in shared memory."""
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]


@cuda.jit
def local_reverse(x, out):
    """Each thread reverses its 8 consecutive elements through a per-thread local array."""
    scratch = cuda.local.array(8, numba.int64)
    i = cuda.grid(1)
    if (i + 1) * 8 <= x.size:
        for k in range(8):
            scratch[(k + x[i * 8]) % 8] = x[i * 8 + k]      # data-dependent index: stays in memory
        for k in range(8):
            out[i * 8 + k] = scratch[(7 - k + x[i * 8]) % 8]


@cuda.jit
def lookup(idx, out):
    table = cuda.const.array_like(TABLE)
    w = cuda.const.array_like(WEIGHTS)
    i = cuda.grid(1)
    if i < idx.size:
        j = idx[i]
        out[i] = table[j % table.size] + w[j % 2, j % 3]


# ---------------------------------------------------------------------------------------------
# Grids, math, atomics and warps


@cuda.jit
def add_2d(a, b, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = a[i, j] + b[i, j]


@cuda.jit
def sin_kernel(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = math.sin(x[i])


@cuda.jit
def histogram(x, bins):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(bins, x[i] % bins.size, 1)


@cuda.jit
def warp_sum(x, out):
    i = cuda.grid(1)
    v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        out[i // 32] = v


# ---------------------------------------------------------------------------------------------
# Integer promotion, active masks, round(x, n)


@cuda.jit
def int_promotion(u8a, u8b, avg, i32a, prod, u64, i64, mixed, shifted, neg):
    i = cuda.grid(1)
    if i < avg.size:
        avg[i] = (u8a[i] + u8b[i]) // 2          # uint8 + uint8 is a uint64, as Numba types it
        prod[i] = i32a[i] * i32a[i]               # int32 * int32 is an int64
        mixed[i] = u64[i] + i64[i]                # uint64 + int64 is an int64 (NumPy: float64)
        shifted[i] = u8a[i] << 4                  # the left operand's signedness, 64 bits
        neg[i] = -u8a[i]                          # negated in 8 bits, then a uint64 (Numba)


def int_promotion_args():
    return (np.array([100, 255, 10], np.uint8), np.array([200, 255, 20], np.uint8),
            np.zeros(3, np.uint8), np.array([100000, -3, 46341], np.int32), np.zeros(3, np.int64),
            np.array([1, 2, 2**63], np.uint64), np.array([-5, 5, -1], np.int64),
            np.zeros(3, np.int64), np.zeros(3, np.uint64), np.zeros(3, np.uint64))


@cuda.jit
def active_masks(out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = cuda.activemask()
    cuda.syncthreads()


@cuda.jit
def split_masks(out):
    i = cuda.grid(1)
    if i % 2 == 0:
        out[i] = cuda.activemask()
    else:
        out[i] = cuda.activemask()


@cuda.jit
def round_digits(x32, x64, n, out32, out64):
    i = cuda.grid(1)
    if i < x32.size:
        out32[i] = round(x32[i], n[i])
        out64[i] = round(x64[i], n[i])


# ---------------------------------------------------------------------------------------------
# A notebook cell, for the tests that ship its kernels to other processes

NOTEBOOK_CELL = '''
import math
from gpureplace import cuda

@cuda.jit(device=True)
def bump(v):
    return v + 1.0

def helper(v):
    return v * 2.0

@cuda.jit
def uses_helper(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = helper(bump(x[i]))

@cuda.jit
def bump_only(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = bump(x[i])
'''


def notebook(source=NOTEBOOK_CELL):
    """A namespace as a notebook cell makes one: its functions pickle by value (their module
    cannot be imported by name), as a notebook's do."""
    mod = types.ModuleType("a_notebook_cell")
    exec(compile(textwrap.dedent(source), "<notebook cell>", "exec"), mod.__dict__)
    return mod.__dict__
