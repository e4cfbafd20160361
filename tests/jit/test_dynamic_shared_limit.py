"""Dynamic shared memory over what a block can have on the device is refused by the launch,
naming the kernel, the bytes asked and the limit, on both backends (before: the simulator ran
it, the GPU answered a bare CUDA_ERROR_INVALID_VALUE); with the static shared arrays of the
specialisation counted where the driver says their size."""

import types

import numpy as np
import pytest

from gpureplace import LaunchError, cuda, probe
from gpureplace.config import settings

from test_launch_path import FakeLoaded, fake_gpu  # noqa: F401 - the fixture


def _kernel():
    @cuda.jit
    def dsm(o):
        s = cuda.shared.array(0, np.float32)
        s[0] = 1
        o[0] = s[0]
    return dsm


def _device_out():
    from test_binder import ndarray
    return ndarray((1,), np.float32, ptr=0x5000)


def test_the_simulator_refuses_more_than_an_sm_90_block_has(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    o, dsm = np.zeros(1, np.float32), _kernel()
    with pytest.raises(LaunchError, match=r"dsm\[1, 1, 0, 1000000000\]: 1,000,000,000 bytes of "
                                          r"dynamic shared memory is more than the 232,448 "
                                          r"bytes \(227 KiB\) a block can have on sm_90"):
        dsm[1, 1, 0, 10**9](o)
    assert o[0] == 0
    dsm[1, 1, 0, 227 * 1024](o)                       # the limit itself: runs
    assert o[0] == 1


def test_the_gpu_path_refuses_by_the_current_devices_architecture(fake_gpu, monkeypatch):  # noqa: F811
    o, dsm = _device_out(), _kernel()
    with pytest.raises(LaunchError, match=r"dsm\[1, 1, 0, 1000000000\]: .* 232,448 bytes "
                                          r"\(227 KiB\) a block can have on sm_90"):
        dsm[1, 1, 0, 10**9](o)
    dsm[1, 1, 0, 100_000](o)
    assert fake_gpu[0].calls[-1][2] == 100_000
    monkeypatch.setattr(probe, "arch_of", lambda d: "sm_75")     # 64 KiB there
    with pytest.raises(LaunchError, match=r"100,001 bytes .* 65,536 bytes \(64 KiB\) a block "
                                          r"can have on sm_75"):
        dsm[1, 1, 0, 100_001](o)                      # (another configuration: checked anew)
    assert len(fake_gpu[0].calls) == 1


def test_static_shared_arrays_count_where_the_driver_says_their_size(fake_gpu, monkeypatch):  # noqa: F811
    driver = types.SimpleNamespace(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES=1,
                                   funcGetAttribute=lambda attr, fn: 40_000)
    monkeypatch.setattr(probe, "cupy_module",
                        lambda: types.SimpleNamespace(cuda=types.SimpleNamespace(driver=driver)))
    o, dsm = _device_out(), _kernel()
    dsm[1, 1, 0, 150_000](o)                          # 190,000 in all: fits
    with pytest.raises(LaunchError, match=r"200,000 bytes of dynamic shared memory with 40,000 "
                                          r"bytes of static shared arrays is more than the "
                                          r"232,448 bytes"):
        dsm[1, 1, 0, 200_000](o)
    assert len(fake_gpu[0].calls) == 1


@pytest.mark.gpu
def test_too_much_dynamic_shared_memory_on_the_device():
    o, dsm = cuda.to_device(np.zeros(1, np.float32)), _kernel()
    with pytest.raises(LaunchError, match=r"bytes of dynamic shared memory is more than"):
        dsm[1, 1, 0, 10**9](o)
    dsm[1, 1, 0, 64 * 1024](o)
    assert o.copy_to_host()[0] == 1
