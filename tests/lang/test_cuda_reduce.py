"""``cuda.reduce`` (numba-cuda's reduction with a binary function): results against NumPy, the
size / init / res arguments, and kernels that follow the function each reduce was built from."""

import numpy as np
import pytest

from conftest import assemble
from gpureplace import cuda
from gpureplace.config import settings


def add(a, b):
    return a + b


sum_reduce = cuda.reduce(add)


@cuda.reduce
def max_reduce(a, b):
    return max(a, b)


def test_the_reduction_kernel_assembles():
    spec = sum_reduce._reduce_blocks.compile("void(float32[::1], int64, float32[::1])")
    assemble(spec.ptx)
    assert "bar.sync" in spec.ptx or "barrier.sync" in spec.ptx


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 1500])
def test_sum_and_max_match_numpy(simulated, n):
    x = np.random.default_rng(n).integers(-50, 50, n).astype(np.int32)
    assert sum_reduce(x) == x.sum()
    assert max_reduce(x, init=-1000) == (x.max() if n else -1000)
    assert sum_reduce(x, init=7) == x.sum() + 7


def test_size_res_and_errors(simulated):
    x = np.arange(600, dtype=np.float64)
    assert sum_reduce(x, size=10) == 45.0
    res = cuda.device_array(1, np.float64)
    assert sum_reduce(x, res=res) is None and res.copy_to_host()[0] == x.sum()
    assert sum_reduce(x, size=601) == x.sum()        # (a slice's stop, as numba-cuda's)
    with pytest.raises(TypeError, match="size"):
        sum_reduce(x, size=2.0)
    with pytest.raises(ValueError, match="res"):
        sum_reduce(x, res=np.zeros(1, np.int32))
    with pytest.raises(ValueError, match="1-D"):
        sum_reduce(np.zeros((2, 2)))
    with pytest.raises(TypeError, match="binary function"):
        cuda.reduce(3)


def test_each_function_gets_its_own_kernels(simulated):
    ns = {}
    exec("def combine(a, b):\n    return a + b", ns)
    r = cuda.reduce(ns["combine"])
    x = np.arange(10, dtype=np.int64)
    assert r(x) == 45
    exec("def combine(a, b):\n    return a * b", ns)      # same name, same kernel source
    assert cuda.reduce(ns["combine"])(x[1:6], init=1) == 120          # init is folded in too


@pytest.mark.gpu
def test_reduce_on_the_gpu():
    import cupy as cp
    x = np.random.default_rng(3).random(1_000_003).astype(np.float64)
    d = cuda.to_device(x)
    assert abs(sum_reduce(d) - x.sum()) < 1e-6 * x.size
    assert max_reduce(d) == x.max()
    assert abs(sum_reduce(x) - x.sum()) < 1e-6 * x.size             # a host array is copied
    res = cp.zeros(1, cp.float64)
    assert sum_reduce(d, size=1000, res=res) is None
    assert abs(float(res[0]) - x[:1000].sum()) < 1e-9
    assert sum_reduce(cp.zeros(0, cp.float64), init=2.5) == 2.5
