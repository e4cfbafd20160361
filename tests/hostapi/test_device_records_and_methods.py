"""numba-cuda's ``DeviceRecord`` for an element of a record device array (a view kernels take by
reference), the ``DeviceNDArray`` methods ``getitem``, ``setitem``, ``squeeze``, ``as_cuda_arg``,
foreign device arrays (``__cuda_array_interface__``, DLPack) given to simulated launches, and
``as_cuda_array`` refusing host arrays in the simulator as on the GPU.  The GPU class is checked
without a GPU over a CuPy stand-in made of NumPy arrays."""

import ctypes
import types

import numpy as np
import pytest

from gpureplace import cuda, probe
from gpureplace.config import settings
from gpureplace.errors import LaunchError
from gpureplace.hostapi import arrays
from gpureplace.runtime import arguments

REC = np.dtype([("a", np.int32), ("b", np.float64)], align=True)


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


@cuda.jit
def set_rec(rec):
    rec.a = 5
    rec.b = 2.5


@cuda.jit
def first_to_minus_one(x):
    x[0] = -1


def _record_array():
    host = np.zeros(3, REC)
    host["a"] = [1, 2, 3]
    return cuda.to_device(host)


# -- records, in the simulator ----------------------------------------------------------------

def test_an_element_of_a_record_device_array_is_a_device_record_view(simulated):
    d_recs = _record_array()
    r = d_recs[1]
    assert hasattr(r, "copy_to_host") and r.shape == () and r.dtype == REC
    assert r["a"] == 2 and d_recs[-1]["a"] == 3
    set_rec[1, 1](d_recs[1])                      # by reference: the array changes
    host = d_recs.copy_to_host()
    assert host["a"].tolist() == [1, 5, 3] and host["b"].tolist() == [0, 2.5, 0]
    assert [rec["a"] for rec in d_recs] == [1, 5, 3]
    assert all(hasattr(rec, "copy_to_host") for rec in d_recs)
    r["b"] = 7.0                                  # a field set on the host reaches the array
    assert d_recs.copy_to_host()["b"][1] == 7.0
    r.setitem("a", 9, stream=cuda.stream())
    assert r.getitem("a") == 9 and d_recs.copy_to_host()["a"][1] == 9
    grid = cuda.to_device(np.zeros((2, 2), REC))
    set_rec[1, 1](grid[1, 0])
    assert grid.copy_to_host()["a"].tolist() == [[0, 0], [5, 0]]
    s = cuda.stream()
    assert d_recs.bind(s)[0].stream is s and d_recs.getitem(0, stream=s).stream is s
    with pytest.raises(KeyError, match="no field 'c'"):
        r["c"] = 1


# -- the methods, in the simulator ------------------------------------------------------------

def test_getitem_setitem_squeeze_and_as_cuda_arg(simulated):
    d = cuda.to_device(np.zeros((1, 4, 1), np.float32))
    s = cuda.stream()
    d.setitem((0, 1, 0), 3.0, stream=s)
    assert d.getitem((0, 1, 0), stream=s) == 3.0
    d.setitem((0, slice(2, 4), 0), np.array([5, 6], np.float32))
    d.setitem((0, 0), cuda.to_device(np.array([4], np.float32)))
    row = d.getitem((0, slice(None), 0), stream=s)
    assert row.stream is s and row.tolist() == [4, 3, 5, 6]
    _check_squeeze(d, s)
    mem = d.as_cuda_arg()
    assert (mem.ptr, mem.size) == (d.gpu_data.ptr, d.gpu_data.size) == (d.ctypes.data, 16)


def _check_squeeze(d, s):
    assert d.squeeze().shape == (4,) and d.squeeze().stream == 0
    assert d.squeeze(stream=s).stream is s and d.bind(s).squeeze().stream is s
    assert d.squeeze(0, 0).shape == (4, 1)
    assert d.squeeze(axis=(0, 2)).shape == d.squeeze(axis=(-1, 0)).shape == (4,)
    assert d.squeeze(axis=()).shape == (1, 4, 1)
    with pytest.raises(ValueError, match="size not equal to one"):
        d.squeeze(axis=1)
    with pytest.raises(ValueError):                 # NumPy's AxisError
        d.squeeze(axis=3)
    with pytest.raises(TypeError, match="axis must be"):
        d.squeeze(axis=[0])
    view = d.squeeze()
    view[1] = 8.0                                   # a view of the same memory
    assert d.copy_to_host()[0, 1, 0] == 8.0


# -- foreign device arrays given to simulated launches ------------------------------------------

class Foreign:                       # another library's view, through the interface
    def __init__(self, desc):
        self.__cuda_array_interface__ = desc


class DL:                            # a DLPack producer
    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_simulated_launches_take_foreign_views_of_simulated_memory(simulated):
    d = cuda.to_device(np.zeros(4, np.float32))
    first_to_minus_one[1, 1](Foreign(d.__cuda_array_interface__))
    assert d.copy_to_host().tolist() == [-1, 0, 0, 0]
    first_to_minus_one[1, 1](DL(d[2:]))
    assert d.copy_to_host().tolist() == [-1, 0, -1, 0]


def test_simulated_launches_refuse_other_foreign_arrays_by_argument(simulated, monkeypatch):
    monkeypatch.setattr(probe, "cupy_module", lambda: None)
    host = np.zeros(4, np.float32)
    with pytest.raises(LaunchError, match=r"argument 0 \('x'\) is a device array \(Foreign\)"
                                          r".* not in a simulated device array"):
        first_to_minus_one[1, 1](Foreign(arrays.array_interface(host, host.ctypes.data)))
    with pytest.raises(LaunchError, match=r"argument 0 \('x'\) is a DLPack array \(DL\).*"
                                          r"to_device"):
        first_to_minus_one[1, 1](DL(host))
    d = cuda.to_device(np.zeros(4, np.float32))
    with pytest.raises(LaunchError, match=r"argument 0 \('x'\) is a masked array"):
        first_to_minus_one[1, 1](Foreign(dict(d.__cuda_array_interface__, mask=object())))
    assert host.tolist() == [0, 0, 0, 0] and d.copy_to_host().tolist() == [0, 0, 0, 0]


def test_as_cuda_array_refuses_host_arrays_in_the_simulator_as_on_the_gpu(simulated):
    with pytest.raises(TypeError, match="ndarray is not a device array .* use to_device"):
        cuda.as_cuda_array(np.zeros(3))
    d = cuda.to_device(np.arange(3.0))
    assert cuda.as_cuda_array(d).tolist() == [0, 1, 2]
    v = cuda.as_cuda_array(d[1:].view(np.ndarray))      # a view of simulated device memory
    v[0] = 9
    assert d.copy_to_host().tolist() == [0, 9, 2]
    assert cuda.is_cuda_array(cuda.as_cuda_array(cuda.mapped_array(3)))
    vadd = cuda.vectorize(["float64(float64, float64)"])(lambda x, y: x + y)
    assert hasattr(vadd(d, d), "copy_to_host")         # (gpureplace's own callers still work)


# -- the GPU's DeviceNDArray, over a CuPy stand-in ----------------------------------------------

class _Memory:
    def __init__(self, arr):
        self.ptr = arr.ctypes.data

    def copy_to_host(self, dst, size):
        ctypes.memmove(dst, self.ptr, size)

    def copy_from_host(self, src, size):
        ctypes.memmove(self.ptr, src, size)


class _FakeCupyArray(np.ndarray):
    """Device memory, as far as the DeviceNDArray class looks at it."""

    def __getitem__(self, key):
        out = super().__getitem__(key)
        if isinstance(out, np.generic):           # CuPy: an element is a 0-d view
            out = super().__getitem__((*(key if isinstance(key, tuple) else (key,)), ...))
        return out

    def get(self, stream=None):
        return np.array(self, copy=True)

    @property
    def data(self):
        return _Memory(self)

    @property
    def __cuda_array_interface__(self):
        return arrays.array_interface(self, self.ctypes.data)


@pytest.fixture
def gpu_classes(monkeypatch):
    fake = types.SimpleNamespace(ndarray=_FakeCupyArray,
                                 asarray=lambda a: np.array(a).view(_FakeCupyArray))
    monkeypatch.setattr(arrays, "cupy", lambda: fake)
    monkeypatch.setattr(arrays, "_DeviceNDArray", None)
    monkeypatch.setattr(arrays, "_DeviceRecord", None)
    monkeypatch.setattr(arguments, "register_handler", lambda cls, handler: None)
    return arrays.device_array_class(), arrays.device_record_class()


def _on_fake_gpu(host, cls):
    return np.array(host).view(_FakeCupyArray).view(type=cls)


def test_the_gpu_class_gives_a_device_record_view_for_an_element(gpu_classes):
    nd, record = gpu_classes
    host = np.zeros(3, REC)
    host["a"] = [1, 2, 3]
    d = _on_fake_gpu(host, nd)
    r = d[1]
    assert isinstance(r, record) and r.shape == () and r["a"] == 2
    r.view(type=np.ndarray)["a"] = 5              # (a kernel's write) lands in the array
    assert d.copy_to_host()["a"].tolist() == [1, 5, 3]
    r["b"] = 4.5                                  # a field set from the host
    assert d.copy_to_host()["b"].tolist() == [0, 4.5, 0]
    assert [rec["a"] for rec in d] == [1, 5, 3]
    s = types.SimpleNamespace(simulated=True, ptr=7, synchronize=lambda: None)
    assert d.bind(s)[2].stream is s and d.getitem(0, stream=s).stream is s
    plain = _on_fake_gpu(np.arange(3.0), nd)
    assert type(plain[1]) is np.float64 and plain[1] == 1.0     # elements: host values


def test_the_gpu_class_has_getitem_setitem_squeeze_and_as_cuda_arg(gpu_classes):
    nd, _ = gpu_classes
    d = _on_fake_gpu(np.zeros((1, 4, 1), np.float32), nd)
    s = types.SimpleNamespace(simulated=True, ptr=7, synchronize=lambda: None)
    d.setitem((0, 1, 0), 3.0, stream=s)
    d.setitem((0, slice(2, 4), 0), np.array([5, 6], np.float32))
    d[0, 0] = [4]
    assert d.getitem((0, 1, 0), stream=s) == 3.0
    row = d.getitem((0, slice(None), 0), stream=s)
    assert isinstance(row, nd) and row.stream is s
    assert row.copy_to_host().tolist() == [4, 3, 5, 6]
    _check_squeeze(d, s)
    assert isinstance(d.squeeze(), nd)
    mem = d.as_cuda_arg()
    assert (mem.ptr, mem.size) == (d.ctypes.data, 16)


# -- on the GPU ---------------------------------------------------------------------------------

@pytest.mark.gpu
def test_records_and_methods_on_the_gpu():
    d_recs = _record_array()
    r = d_recs[1]
    assert isinstance(r, cuda.devicearray.DeviceNDArray) and r["a"] == 2
    set_rec[1, 1](d_recs[1])
    assert d_recs.copy_to_host()["a"].tolist() == [1, 5, 3]
    d = cuda.to_device(np.zeros((1, 4, 1), np.float32))
    s = cuda.stream()
    d.setitem((0, 1, 0), 3.0, stream=s)
    d.setitem((0, slice(2, 4), 0), np.array([5, 6], np.float32))
    s.synchronize()
    assert d.getitem((0, 1, 0), stream=s) == 3.0
    _check_squeeze(d, s)
    assert d.as_cuda_arg().ptr == d.gpu_data.ptr
