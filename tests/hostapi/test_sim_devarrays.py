"""numba-cuda's ``DeviceNDArray`` members on the simulator's device arrays: ``bind``,
``device_ctypes_pointer``, and a ``__cuda_array_interface__`` that ``from_cuda_array_interface``
takes back."""

import ctypes
import types

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.config import settings
from gpureplace.hostapi import arrays


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


def test_bind_gives_a_view_bound_to_the_stream(simulated):
    d = cuda.to_device(np.arange(10.0))
    s = cuda.stream()
    bound = d.bind(s)
    assert isinstance(bound, cuda.devicearray.DeviceNDArray)
    assert bound.stream is s and d.stream == 0
    assert bound[2:].stream is s                      # a view keeps the stream
    assert d.bind().stream == 0
    bound[3] = 42.0
    assert d[3] == 42.0                               # the same memory
    np.testing.assert_array_equal(bound.copy_to_host(), d.copy_to_host())


def test_device_ctypes_pointer_is_the_address_of_the_elements(simulated):
    d = cuda.to_device(np.arange(10.0))
    ptr = d.device_ctypes_pointer
    assert isinstance(ptr, ctypes.c_void_p)
    assert ptr.value == d.__cuda_array_interface__["data"][0] == d.ctypes.data
    assert d[4:].device_ctypes_pointer.value == ptr.value + 4 * 8


def test_an_interface_round_trips_into_a_view_of_the_same_memory(simulated):
    d = cuda.to_device(np.arange(12.0))
    again = cuda.from_cuda_array_interface(d.__cuda_array_interface__, owner=d)
    assert isinstance(again, cuda.devicearray.DeviceNDArray)
    assert again.device_ctypes_pointer.value == d.device_ctypes_pointer.value
    again[0] = -1.0
    assert d[0] == -1.0

    strided = d.reshape(3, 4)[:, 1::2]                # a strided view, described by strides
    view = cuda.from_cuda_array_interface(strided.__cuda_array_interface__, owner=d)
    np.testing.assert_array_equal(view.copy_to_host(), strided.copy_to_host())

    @cuda.jit
    def double(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = 2 * x[i]

    double[1, 32](again)                              # kernels write through it
    np.testing.assert_array_equal(d.copy_to_host(), 2 * np.r_[-1.0, 1:12])

    rec = cuda.to_device(np.zeros(3, np.dtype([("a", "<i4"), ("b", "<f8")], align=True)))
    assert cuda.from_cuda_array_interface(rec.__cuda_array_interface__,
                                          owner=rec).dtype == rec.dtype
    empty = cuda.from_cuda_array_interface({"shape": (0,), "typestr": "<f4",
                                            "data": (0, False), "version": 3})
    assert empty.shape == (0,) and empty.dtype == np.float32


def test_an_interface_the_simulator_cannot_read_is_refused(simulated):
    d = cuda.to_device(np.arange(4.0))
    past_the_end = dict(d.__cuda_array_interface__, data=(d.ctypes.data + 8, False))
    with pytest.raises(TypeError, match="not all in one simulated device array"):
        cuda.from_cuda_array_interface(past_the_end, owner=d)
    masked = dict(d.__cuda_array_interface__, mask=object())
    with pytest.raises(NotImplementedError, match="Masked"):
        cuda.from_cuda_array_interface(masked, owner=d)


class _CupyArray(np.ndarray):
    """Stands in for ``cupy.ndarray``, whose subclass the GPU's ``DeviceNDArray`` is."""

    @property
    def __cuda_array_interface__(self):
        return arrays.array_interface(self, self.ctypes.data)


def test_the_gpu_classes_bind_keeps_the_stream_in_the_interface(monkeypatch):
    monkeypatch.setattr(arrays, "cupy", lambda: types.SimpleNamespace(ndarray=_CupyArray))
    monkeypatch.setattr(arrays, "_DeviceNDArray", None)
    d = np.arange(6.0).view(arrays.device_array_class())
    stream = types.SimpleNamespace(ptr=1234)
    bound = d.bind(stream)
    assert type(bound) is type(d) and bound.stream is stream and d.stream == 0
    assert bound.__cuda_array_interface__["stream"] == 1234
    assert d.__cuda_array_interface__["stream"] is None
    assert bound.bind(0).stream == 0


@pytest.mark.gpu
def test_bind_on_the_device():
    d = cuda.to_device(np.arange(8.0))
    s = cuda.stream()
    bound = d.bind(s)
    assert bound.stream is s and d.stream == 0
    np.testing.assert_array_equal(bound.copy_to_host(), np.arange(8.0))
