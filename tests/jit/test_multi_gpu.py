"""Several GPUs in one process, for real (issues 18 and 19).

The first tests run on any GPU host: they put the launch paths in their several-GPU mode (as a
process that sees two GPUs runs them) on the one GPU there is.  The others need two GPUs
(nvidia-h200-x2) and skip with fewer.  tests/jit/test_multi_device.py runs the same scenarios on
the CPU with a stand-in driver.
"""

import gc
import weakref

import numpy as np
import pytest

import gpureplace
from gpureplace import cuda, probe
from gpureplace.runtime import placement
from gpureplace.runtime.arguments import ArgumentError

pytestmark = [pytest.mark.gpu, pytest.mark.gpu_only]


def _gpu_count():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


two_gpus = pytest.mark.skipif(_gpu_count() < 2, reason="needs two GPUs (nvidia-h200-x2)")


def _namespace():
    ns = {"cuda": cuda}
    exec("def scale(v):\n    return v * 2.0\n"
         "@cuda.jit\ndef k(x, a):\n    i = cuda.grid(1)\n    if i < x.size:\n"
         "        x[i] = scale(a) * x[i]\n", ns)
    return ns


class _Elsewhere:
    """A CUDA array interface over a CuPy array, which the test says is on device 1."""

    def __init__(self, a):
        self.base = a
        self.__cuda_array_interface__ = a.__cuda_array_interface__


@pytest.fixture
def several_gpu_mode(monkeypatch):
    monkeypatch.setattr(placement, "multi_gpu", lambda: True)


def test_argument_on_another_device_is_refused_before_anything_runs(several_gpu_mode,
                                                                  monkeypatch):
    import cupy as cp
    k = _namespace()["k"]
    x = cp.ones(1000, cp.float32)
    elsewhere = _Elsewhere(cp.ones(1000, cp.float32))
    real = placement._pointer_device
    monkeypatch.setattr(placement, "_pointer_device",
                        lambda ptr: 1 if ptr == elsewhere.base.data.ptr else real(ptr))
    for _ in range(3):                  # general path, then the fast path with device checks
        k[8, 128](x, 1.0)
    np.testing.assert_array_equal(x.get(), np.full(1000, 8.0, np.float32))
    with pytest.raises(ArgumentError, match=r"argument 0 \('x'\) is on device 1, but the "
                                            r"launch is on device 0"):
        k[8, 128](elsewhere, 1.0)
    np.testing.assert_array_equal(elsewhere.base.get(), np.ones(1000, np.float32))
    k[8, 128](x, 0.5)
    np.testing.assert_array_equal(x.get(), np.full(1000, 8.0, np.float32))
    run = k[8, 128].prepare(x, 0.25)    # prepared launches remember their device
    assert run.device_id == 0
    run()
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(x.get(), np.full(1000, 4.0, np.float32))


@two_gpus
def test_one_compile_two_module_loads():
    import cupy as cp
    k = _namespace()["k"]
    before = gpureplace.stats()["kernel_compiles"]
    results = []
    for dev in (0, 1, 0, 1):
        with cp.cuda.Device(dev):
            x = cp.ones(1000, cp.float32)
            k[8, 128](x, float(dev + 1))
            results.append(float(x[999].get()))
    assert results == [2.0, 4.0, 2.0, 4.0]
    assert gpureplace.stats()["kernel_compiles"] - before == 1
    assert sorted(d for (_, d) in k._launch_cache) == [0, 1]


@two_gpus
def test_array_on_the_other_device_is_refused_by_name():
    import cupy as cp
    k = _namespace()["k"]
    with cp.cuda.Device(1):
        x1 = cp.ones(1000, cp.float32)
    with cp.cuda.Device(0):
        x0 = cp.ones(1000, cp.float32)
        k[8, 128](x0, 1.0)
        for _ in range(2):               # general path, then the fast path
            with pytest.raises(ArgumentError, match=r"argument 0 \('x'\) is on device 1"):
                k[8, 128](x1, 1.0)
    np.testing.assert_array_equal(x1.get(), np.ones(1000, np.float32))


@two_gpus
def test_a_redefinition_unloads_the_old_module_on_both_devices():
    import cupy as cp
    ns = _namespace()
    k = ns["k"]
    for dev in (0, 1):
        with cp.cuda.Device(dev):
            k[8, 128](cp.ones(1000, cp.float32), 1.0)
    old = [weakref.ref(e) for e in k._launch_cache.values()]
    exec("def scale(v):\n    return v * 3.0\n", ns)
    gpureplace.refresh()
    with cp.cuda.Device(0):
        x = cp.ones(1000, cp.float32)
        k[8, 128](x, 1.0)
        assert float(x[0].get()) == 3.0
    k._drop_fast_launch()
    gc.collect()
    assert all(r() is None for r in old)
    assert [d for (_, d) in k._launch_cache] == [0]
    with cp.cuda.Device(1):
        x = cp.ones(1000, cp.float32)
        k[8, 128](x, 1.0)
        assert float(x[0].get()) == 3.0


@two_gpus
def test_prepared_launches_and_graphs_on_device_1():
    import cupy as cp
    k = _namespace()["k"]
    with cp.cuda.Device(1):
        x = cp.ones(1000, cp.float32)
        run = k[8, 128].prepare(x, 1.0)
        g = gpureplace.graph(lambda: k[8, 128](x, 1.0))
    with cp.cuda.Device(0):
        assert probe.current_device() == 0
        run()                                        # runs on device 1
        g()
    with cp.cuda.Device(1):
        cp.cuda.runtime.deviceSynchronize()
        assert float(x[0].get()) == 4.0
    assert run.device_id == 1
