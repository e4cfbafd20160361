"""What no device array can take is refused alike by the simulator and the GPU: ``to_device``
of None or of Python objects (TypeError naming what was given), and ``copy_to_device`` of
another dtype (numba-cuda's TypeError('incompatible dtype'): a copy never converts)."""

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.config import settings


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


@pytest.mark.parametrize("backend", ["simulator", "gpu"], ids=["sim", "gpu-backend"])
def test_to_device_refuses_none_and_python_objects(backend, monkeypatch):
    monkeypatch.setattr(settings, "backend", backend)   # (refused before any device is asked)
    with pytest.raises(TypeError, match=r"to_device: expected an array .*got None"):
        cuda.to_device(None)
    with pytest.raises(TypeError, match=r"to_device: cannot copy a ndarray of dtype object"):
        cuda.to_device(np.array(["a", 1], dtype=object))
    with pytest.raises(TypeError, match=r"cannot copy a list of dtype object"):
        cuda.to_device([None, 1])


def test_copy_to_device_refuses_another_dtype_in_the_simulator(sim):
    d = cuda.to_device(np.zeros(3, np.int32))
    with pytest.raises(TypeError, match=r"incompatible dtype: int32 vs. float64"):
        d.copy_to_device(np.array([1.9, -2.7, 3e10]))
    assert d.copy_to_host().tolist() == [0, 0, 0]             # nothing written
    with pytest.raises(TypeError, match=r"incompatible dtype: int32 vs. int64"):
        d.copy_to_device(cuda.to_device(np.ones(3, np.int64)))
    d.copy_to_device(np.array([1, 2, 3], np.int32))
    assert d.copy_to_host().tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="shape"):
        d.copy_to_device(np.zeros(4, np.int32))
    x = cuda.to_device(np.zeros(2))
    cuda.to_device(np.array([5.0, 6.0]), to=x)
    with pytest.raises(TypeError, match="incompatible dtype: float64 vs. float32"):
        cuda.to_device(np.ones(2, np.float32), to=x)
    assert x.copy_to_host().tolist() == [5.0, 6.0]


def test_the_rule_both_backends_share():
    from gpureplace.hostapi.arrays import copy_source
    target = np.zeros((2, 2), np.float32)
    assert copy_source(target, np.ones((2, 2), np.float32)).dtype == np.float32
    with pytest.raises(TypeError, match=r"incompatible dtype: float32 vs. int64"):
        copy_source(target, [[1, 2], [3, 4]])               # NumPy's dtype for the list
    with pytest.raises(ValueError, match=r"shape \(4,\) does not match"):
        copy_source(target, np.zeros(4, np.float32))


@pytest.mark.gpu
def test_copy_to_device_refuses_another_dtype_on_the_device():
    d = cuda.to_device(np.zeros(3, np.int32))
    with pytest.raises(TypeError, match=r"incompatible dtype: int32 vs. float64"):
        d.copy_to_device(np.array([1.9, -2.7, 3e10]))
    with pytest.raises(TypeError, match=r"incompatible dtype: int32 vs. int64"):
        d.copy_to_device(cuda.to_device(np.ones(3, np.int64)))
    assert d.copy_to_host().tolist() == [0, 0, 0]
    with pytest.raises(TypeError, match="got None"):
        cuda.to_device(None)
