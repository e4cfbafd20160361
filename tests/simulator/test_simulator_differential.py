"""Differential test on the GPU host: the simulator and the device agree on the corpus kernels."""

import numpy as np
import pytest

from gpureplace import cuda, simulator
from gpureplace.config import settings
from corpus import (TPB, active_masks, block_sum, histogram,  # the simulator's own corpus
                    int_promotion, int_promotion_args, round_digits, split_masks, warp_sum)

pytestmark = [pytest.mark.gpu, pytest.mark.gpu_only]


def scale(v):
    return 2.0 * v


@cuda.jit
def saxpy_helper(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = scale(a) * x[i] + y[i]


@cuda.jit
def stencil(a, out):
    i, j = cuda.grid(2)
    if 0 < i < a.shape[0] - 1 and 0 < j < a.shape[1] - 1:
        out[i, j] = a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1] - 4 * a[i, j]


def _cases():
    rng = np.random.default_rng(7)
    x32 = rng.random(1024, dtype=np.float32)
    return [
        (saxpy_helper, 4, 256, lambda: (np.float32(1.5), x32, x32[::-1].copy(),
                                       np.zeros(1024, np.float32)), 1e-6),
        (block_sum, 1024 // TPB, TPB, lambda: (x32, np.zeros(1024 // TPB, np.float32)), 1e-5),
        (histogram, 4, 256, lambda: (rng.integers(0, 1000, 1024).astype(np.int32),
                                     np.zeros(17, np.int32)), 0),
        (warp_sum, 4, 256, lambda: (np.arange(1024, dtype=np.int64), np.zeros(32, np.int64)), 0),
        (stencil, (4, 4), (16, 16), lambda: (rng.random((64, 64)), np.zeros((64, 64))), 1e-12),
        (int_promotion, 1, 32, int_promotion_args, 0),
        (active_masks, 1, 64, lambda: (np.zeros(64, np.uint32), 20), 0),
        (split_masks, 1, 32, lambda: (np.zeros(32, np.uint32),), 0),
        (round_digits, 1, 8, lambda: (
            np.array([3.4e38, 2.675, 123.456, -0.5, 2.5, 1.005, np.inf], np.float32),
            np.array([1.7976931348623157e308, 2.675, 123.456, -0.5, 2.5, 1.005, -np.inf]),
            np.array([300, 2, -1, 0, 0, 2, 3], np.int64), np.zeros(7, np.float32),
            np.zeros(7)), 0),
    ]


@pytest.mark.parametrize("case", range(9))
def test_simulator_agrees_with_the_device(case, monkeypatch):
    import cupy as cp
    kernel, grid, block, make, rtol = _cases()[case]
    host = make()
    device_args = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in host]
    monkeypatch.setattr(settings, "backend", "gpu")
    kernel[grid, block](*device_args)
    cp.cuda.runtime.deviceSynchronize()
    sim_args = [a.copy() if isinstance(a, np.ndarray) else a for a in host]
    simulator.run(kernel, grid, block, *sim_args)
    for d, s in zip(device_args, sim_args):
        if isinstance(s, np.ndarray):
            np.testing.assert_allclose(cp.asnumpy(d), s, rtol=rtol)
