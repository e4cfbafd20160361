"""A process forked after its parent initialised CUDA cannot use CUDA: the host API says so with
numba-cuda's error (``cuda.cudadrv.error.CudaDriverError``, "CUDA initialized before forking")
instead of CuPy's initialisation errors."""

import functools

import pytest

from gpureplace import cuda, probe
from gpureplace.hostapi import arrays


def test_a_child_forked_after_cuda_was_initialised_is_told(monkeypatch):
    @functools.lru_cache(maxsize=None)
    def device_count():
        return 1
    device_count()                                  # the parent asked CUDA for its devices
    monkeypatch.setattr(probe, "device_count", device_count)
    monkeypatch.setattr(probe, "forked_after_cuda", False)
    monkeypatch.setattr(probe, "cuda_used", False)
    monkeypatch.setattr(arrays, "simulated", lambda: False)
    probe._after_fork_in_child()
    assert probe.forked_after_cuda
    with pytest.raises(cuda.cudadrv.error.CudaDriverError,
                       match="CUDA initialized before forking.*'spawn'"):
        cuda.device_array(3)


def test_a_child_of_a_parent_that_never_used_cuda_is_not(monkeypatch):
    @functools.lru_cache(maxsize=None)
    def device_count():
        return 1
    monkeypatch.setattr(probe, "device_count", device_count)   # never called: not initialised
    monkeypatch.setattr(probe, "forked_after_cuda", False)
    monkeypatch.setattr(probe, "cuda_used", False)
    probe._after_fork_in_child()
    assert not probe.forked_after_cuda
    probe.cuda_used = True                     # ... but a kernel was loaded, or CuPy used
    probe._after_fork_in_child()
    assert probe.forked_after_cuda


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_fork_after_cuda_on_the_gpu():
    import concurrent.futures
    import multiprocessing as mp
    import numpy as np
    cuda.current_context()
    with concurrent.futures.ProcessPoolExecutor(mp_context=mp.get_context("fork")) as exe:
        future = exe.submit(cuda.to_device, np.arange(1))
    with pytest.raises(cuda.cudadrv.error.CudaDriverError, match="before forking"):
        future.result()
