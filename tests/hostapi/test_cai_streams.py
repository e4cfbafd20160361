"""The CUDA Array Interface's streams (version 3): an array made on a stream names it in its
``__cuda_array_interface__``; a consumer (a launch, ``as_cuda_array``) waits for the stream a
foreign array names before using the data, unless ``settings.cuda_array_interface_sync`` is off.

CPU tests drive the launch's argument code with a stand-in for CuPy's ``Stream.from_external`` that
records what is waited for; the GPU tests use real streams.
"""

import types

import numpy as np
import pytest

from gpureplace import cuda, probe
from gpureplace.config import settings
from gpureplace.runtime import arguments, streams
from gpureplace.hostapi.arrays import interface_stream


class _Foreign:
    """A device array of another library: only its interface."""

    def __init__(self, stream=None, mask=None, ptr=0x7F0000):
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (ptr, False),
                                         "strides": None, "version": 3, "stream": stream}
        if mask is not None:
            self.__cuda_array_interface__["mask"] = mask


@pytest.fixture
def waits(monkeypatch):
    """The streams waited for (their handles), through a stand-in CuPy."""
    seen = []

    class Stream:
        def __init__(self, ptr):
            self.ptr = ptr

        @classmethod
        def from_external(cls, obj):          # CuPy 14's, over the CUDA stream protocol
            version, ptr = obj.__cuda_stream__()
            return cls(ptr)

        def synchronize(self):
            seen.append(self.ptr)

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(Stream=Stream))
    monkeypatch.setattr(probe, "cupy_module", lambda: fake)
    monkeypatch.setattr(settings, "cuda_array_interface_sync", True)
    return seen


def test_a_launch_waits_for_the_stream_a_foreign_array_names(waits):
    key, values = arguments.value_key(_Foreign(stream=0x1234))
    assert key[0] == "array" and values[0] == 0x7F0000
    assert waits == [0x1234]
    arguments.value_key(_Foreign(stream=None))           # names none: nothing to wait for
    assert waits == [0x1234]
    arguments.value_key(_Foreign(stream=1))              # the legacy default stream
    assert waits == [0x1234, 1]


def test_the_wait_can_be_turned_off(waits, monkeypatch):
    monkeypatch.setattr(settings, "cuda_array_interface_sync", False)
    arguments.value_key(_Foreign(stream=0x1234))
    assert waits == []


def test_a_bad_stream_entry_or_a_mask_is_refused_by_name(waits):
    with pytest.raises(arguments.ArgumentError, match=r"^has an interface that names no "
                                                      r"stream: .*\['stream'\] must be None or "
                                                      r"a stream handle"):
        arguments.value_key(_Foreign(stream=0))
    with pytest.raises(ValueError, match="got 'x'"):
        arguments.value_key(_Foreign(stream="x"))
    with pytest.raises(arguments.ArgumentError, match="masked arrays are not supported"):
        arguments.value_key(_Foreign(mask=_Foreign()))
    assert waits == []


def test_wait_returns_the_named_stream_as_an_external_stream(waits):
    s = streams.wait_for_interface_stream({"stream": 0x99}, sync=False)
    assert isinstance(s, cuda.cudadrv.driver.Stream) and s.external and s.ptr == 0x99
    assert waits == []
    assert streams.wait_for_interface_stream({"stream": None}) is None


def test_the_stream_entry_an_array_of_a_stream_gives():
    assert interface_stream(0) is None and interface_stream(None) is None
    assert interface_stream(types.SimpleNamespace(ptr=0xABC)) == 0xABC
    assert interface_stream(types.SimpleNamespace(ptr=0)) == 1     # the legacy default stream


def test_settings_and_the_extension_trait(monkeypatch):
    monkeypatch.setenv("GPUREPLACE_CAI_SYNC", "0")
    from gpureplace.config import Settings
    assert Settings().cuda_array_interface_sync is False
    monkeypatch.setenv("GPUREPLACE_CAI_SYNC", "1")
    assert Settings().cuda_array_interface_sync is True


# ---------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.gpu_only
def test_arrays_name_their_stream_and_consumers_wait_on_the_gpu(monkeypatch):
    s = cuda.stream()
    d = cuda.device_array(10, stream=s)
    assert d.stream is s and d.__cuda_array_interface__["stream"] == s.ptr
    assert d[2:].stream is s                              # a view keeps it
    assert cuda.device_array(10).__cuda_array_interface__["stream"] is None
    h = cuda.to_device(np.arange(10.0), stream=s)
    assert h.__cuda_array_interface__["stream"] == s.ptr
    m = cuda.mapped_array(4, stream=s)
    assert m.__cuda_array_interface__["stream"] == s.ptr

    calls = []
    real = streams.Stream.synchronize
    monkeypatch.setattr(streams.Stream, "synchronize",
                        lambda self: (calls.append(self.ptr), real(self)))
    foreign = _Foreign(stream=s.ptr, ptr=h.data.ptr)
    foreign.__cuda_array_interface__.update(shape=(10,), typestr="<f8")
    imported = cuda.as_cuda_array(foreign)
    assert calls == [s.ptr] and imported.stream.external and imported.stream.ptr == s.ptr
    np.testing.assert_equal(imported.copy_to_host(), np.arange(10.0))

    @cuda.jit
    def twice(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] *= 2
    twice[1, 32](foreign)
    assert calls == [s.ptr, s.ptr]
    np.testing.assert_equal(h.copy_to_host(), 2 * np.arange(10.0))
    monkeypatch.setattr(settings, "cuda_array_interface_sync", False)
    twice[1, 32](foreign)
    assert calls == [s.ptr, s.ptr]
    with pytest.raises(NotImplementedError, match="Masked arrays are not supported"):
        cuda.from_cuda_array_interface(dict(foreign.__cuda_array_interface__, mask=d))
