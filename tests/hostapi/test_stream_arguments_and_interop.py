"""Stream arguments across the host API, and streams of other libraries.

* Every ``stream=`` of the host API is checked as ``to_device`` checks it (a LaunchError naming
  the API), and the views ``split`` / ``ravel`` / ``cuda.mapped`` make are bound to the stream
  given, as numba-cuda's are.
* ``cuda.mapped`` takes only ``stream`` as keyword, and ``cuda.mapped`` / ``cuda.pinned`` only
  NumPy arrays (a list would be a temporary copy).
* The CUDA stream protocol (``__cuda_stream__() -> (0, handle)``, cuda.core's and numba-cuda's
  streams): gpureplace's ``Stream`` speaks it, and the host API accepts objects that speak it;
  A foreign handle becomes CuPy 14's ``Stream.from_external`` (run on the H200 with the default
  streams' handles too); an older CuPy's ``ExternalStream`` only where ``from_external`` is
  missing, without its deprecation warning.
* ``elapsed_time`` of an event that cannot time is numba-cuda's driver error (CudaDriverError,
  still a RuntimeError).

The GPU paths run with CuPy replaced by stand-ins (no GPU is needed).
"""

import types

import numpy as np
import pytest

from gpureplace import LaunchError, cuda, probe
from gpureplace.config import settings
from gpureplace.errors import CudaDriverError
from gpureplace.hostapi import arrays, memory
from gpureplace.hostapi import streams as hstreams
from gpureplace.runtime import streams as rstreams


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


class ProtoStream:
    """A stream of another library speaking the CUDA stream protocol (as cuda.core's)."""

    def __init__(self, handle, version=0):
        self.handle, self.version = handle, version

    def __cuda_stream__(self):
        return (self.version, self.handle)


# --- CuPy stand-ins --------------------------------------------------------------------------

class FakeStream:
    """cupy.cuda.Stream, with CuPy 14's ``from_external``."""

    def __init__(self, ptr=0, non_blocking=False):
        self.ptr = ptr
        self.foreign = None

    @classmethod
    def from_external(cls, obj):
        version, ptr = obj.__cuda_stream__()
        assert version == 0 and type(ptr) is int
        out = cls(ptr)
        out.foreign = obj
        return out

    def synchronize(self):
        pass


class OldFakeStream:
    """cupy.cuda.Stream of CuPy < 14: no ``from_external``."""

    def __init__(self, ptr=0):
        self.ptr = ptr


class FakeExternalStream:
    def __init__(self, ptr):
        self.ptr = ptr


class CUDARuntimeError(RuntimeError):
    pass


class FakeEvent:
    def __init__(self, disable_timing=False):
        self.timing, self.recorded, self.stream = not disable_timing, False, None

    def record(self, stream=None):
        self.recorded, self.stream = True, stream


def get_elapsed_time(start, end):
    if not (start.timing and end.timing and start.recorded and end.recorded):
        raise CUDARuntimeError("cudaErrorInvalidResourceHandle: invalid resource handle")
    return 1.5


class FakeCupyArray(np.ndarray):
    """cupy.ndarray over host memory: ``cupy.ndarray(shape, dtype, memptr, strides)``."""

    def __new__(cls, shape, dtype=float, memptr=None, strides=None):
        if memptr is None:
            return np.ndarray.__new__(cls, shape, dtype)
        return np.ndarray.__new__(cls, shape, dtype, buffer=memptr.mem.owner, strides=strides)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "version": 3,
                "data": (self.ctypes.data, False), "strides": None, "stream": None}


class FakeRuntime:
    def __init__(self):
        self.calls = []

    def hostRegister(self, ptr, size, flags):  # noqa: N802 - CuPy's names
        self.calls.append(("register", ptr))

    def hostUnregister(self, ptr):  # noqa: N802
        self.calls.append(("unregister", ptr))

    def deviceSynchronize(self):  # noqa: N802
        self.calls.append(("sync",))


def fake_cupy(stream_class=FakeStream):
    cuda_ns = types.SimpleNamespace(
        Stream=stream_class, ExternalStream=FakeExternalStream, Event=FakeEvent,
        get_elapsed_time=get_elapsed_time, runtime=FakeRuntime(),
        get_current_stream=lambda: stream_class(0),
        UnownedMemory=lambda ptr, size, owner: types.SimpleNamespace(ptr=ptr, owner=owner),
        MemoryPointer=lambda mem, offset: types.SimpleNamespace(mem=mem, offset=offset))
    return types.SimpleNamespace(cuda=cuda_ns, ndarray=FakeCupyArray)


@pytest.fixture
def fake_gpu(monkeypatch):
    """The host API's GPU paths, on CuPy stand-ins."""
    fake = fake_cupy()
    for mod in (hstreams, arrays, memory):
        monkeypatch.setattr(mod, "cupy", lambda: fake)
    for mod in (hstreams, memory):
        monkeypatch.setattr(mod, "simulated", lambda: False)
    monkeypatch.setattr(arrays, "_DeviceNDArray", None)      # built again on the stand-in
    monkeypatch.setattr(probe, "libcuda", lambda: None)
    return fake


def gpu_array(n=6):
    return np.arange(n, dtype=np.float32).view(FakeCupyArray).view(
        type=arrays.device_array_class())


# --- stream arguments are checked, by name -----------------------------------------------------

@pytest.mark.parametrize("bad", ["x", 1.5])
def test_split_ravel_and_mapped_refuse_a_stream_that_is_none_naming_the_api(simulated, bad):
    d = cuda.to_device(np.zeros(4, np.float32))
    with pytest.raises(LaunchError, match=r"^split: stream must be"):
        d.split(2, stream=bad)
    with pytest.raises(LaunchError, match=r"^ravel: stream must be"):
        d.ravel(stream=bad)
    with pytest.raises(LaunchError, match=r"^mapped: stream must be"):
        with cuda.mapped(np.zeros(2), stream=bad):
            pass


def test_the_device_to_host_copies_refuse_a_bad_stream_by_name(simulated):
    d = cuda.to_device(np.arange(4, dtype=np.float32))
    out = np.zeros(4, np.float32)
    with pytest.raises(LaunchError, match=r"^device_to_host: stream must be"):
        cuda.driver.device_to_host(out, d, out.nbytes, stream="x")
    with pytest.raises(LaunchError, match=r"^host_to_device: stream must be"):
        cuda.driver.host_to_device(d, out, out.nbytes, stream="x")
    assert not out.any()


def test_the_device_array_methods_on_the_gpu_refuse_a_bad_stream_by_name(fake_gpu):
    d = gpu_array()
    for what, call in [("bind", lambda: d.bind("x")),
                       ("getitem", lambda: d.getitem(slice(1, 3), stream="x")),
                       ("setitem", lambda: d.setitem(0, 1.0, stream="x")),
                       ("squeeze", lambda: d.squeeze(stream="x")),
                       ("copy_to_host", lambda: d.copy_to_host(stream="x")),
                       ("copy_to_device", lambda: d.copy_to_device(np.zeros(6, np.float32),
                                                                   stream="x")),
                       ("split", lambda: d.split(2, stream="x")),
                       ("ravel", lambda: d.ravel(stream="x"))]:
        with pytest.raises(LaunchError, match=rf"^{what}: stream must be"):
            call()
    assert d.stream == 0


def test_events_on_the_gpu_refuse_a_bad_stream_by_name(fake_gpu):
    e = cuda.event()
    with pytest.raises(LaunchError, match=r"^Event.record: stream must be"):
        e.record("x")
    with pytest.raises(LaunchError, match=r"^Event.wait: stream must be"):
        e.wait(1.5)
    assert not e.cupy.recorded


# --- the views split / ravel / mapped make are bound to the stream -----------------------------

def test_split_and_ravel_bind_their_views_to_the_stream_given(simulated):
    s, s2 = cuda.stream(), cuda.stream()
    d = cuda.to_device(np.arange(5, dtype=np.float32))
    pieces = d.split(2, stream=s)
    assert [p.stream is s for p in pieces] == [True, True, True]
    assert [p.copy_to_host().tolist() for p in pieces] == [[0, 1], [2, 3], [4]]
    assert d.ravel(stream=s).stream is s
    assert d.stream == 0                               # the array itself stays as it was
    bound = d.bind(s2)                                 # without a stream: the array's
    assert all(p.stream is s2 for p in bound.split(2)) and bound.ravel().stream is s2
    assert all(p.stream is s for p in bound.split(2, stream=s))


def test_split_and_ravel_bind_their_views_on_the_gpu(fake_gpu):
    s = cuda.stream()
    d = gpu_array(5)
    pieces = d.split(2, stream=s)
    assert [p.stream is s for p in pieces] == [True, True, True]
    assert d.ravel(stream=s).stream is s and d.stream == 0
    assert all(p.stream is s for p in d.bind(s).split(3))


def test_mapped_binds_its_views_to_the_stream(simulated):
    s = cuda.stream()
    a, b = np.zeros(3), np.ones(2)
    with cuda.mapped(a, stream=s) as m:
        assert m.stream is s
        m[1] = 5.0
    assert a[1] == 5.0                                 # the same memory
    with cuda.mapped(a, b, stream=s) as ms:
        assert [x.stream is s for x in ms] == [True, True]
    with cuda.mapped(a) as m:
        assert m.stream == 0
    with cuda.mapped() as none:
        assert none == []


def test_mapped_binds_its_views_on_the_gpu(fake_gpu):
    s = cuda.stream()
    a = np.zeros(3)
    with cuda.mapped(a, stream=s) as m:
        assert m.stream is s and isinstance(m, arrays.device_array_class())
        np.ndarray.__setitem__(m, Ellipsis, 2.0)        # (over the host array's memory)
    assert (a == 2.0).all()
    kinds = [c[0] for c in fake_gpu.cuda.runtime.calls]
    assert kinds == ["register", "sync", "unregister"]


# --- mapped's keywords and arguments -------------------------------------------------------------

def test_mapped_takes_only_stream_as_keyword(simulated):
    s = cuda.stream()
    with pytest.raises(TypeError, match=r"only accepts 'stream' as keyword, got 'strem'"):
        cuda.mapped(np.zeros(3), strem=s)
    with pytest.raises(TypeError, match=r"got 'portable', 'strem'"):
        cuda.mapped(np.zeros(3), stream=s, strem=s, portable=True)


@pytest.mark.parametrize("api", ["mapped", "pinned"])
def test_mapped_and_pinned_refuse_what_is_not_a_numpy_array_by_name(simulated, api):
    fn = getattr(cuda, api)
    with pytest.raises(TypeError, match=rf"cuda.{api}\(\*arylist\): arylist\[0\] must be a "
                                        rf"NumPy array .*got a list"):
        with fn([1, 2]):
            pass
    with pytest.raises(TypeError, match=r"arylist\[1\] .*got a tuple"):
        with fn(np.zeros(2), (1, 2)):
            pass
    with fn(np.zeros(2), np.ones(3)):                  # NumPy arrays are taken
        pass


def test_mapped_and_pinned_refuse_a_list_on_the_gpu_before_registering_anything(fake_gpu):
    for fn in (cuda.mapped, cuda.pinned):
        with pytest.raises(TypeError, match=r"arylist\[1\] must be a NumPy array"):
            with fn(np.zeros(2), [1.0]):
                pass
    assert fake_gpu.cuda.runtime.calls == []


# --- the CUDA stream protocol ----------------------------------------------------------------------

def test_gpureplaces_stream_speaks_the_cuda_stream_protocol():
    s = rstreams.Stream(FakeStream(0x1234))
    assert s.__cuda_stream__() == (0, 0x1234)
    assert type(s.__cuda_stream__()[1]) is int
    assert rstreams.Stream(FakeStream(0)).__cuda_stream__() == (0, 0)   # the default stream
    assert rstreams.protocol_handle(s) == 0x1234


def test_protocol_streams_are_taken_by_the_host_api(simulated):
    p = ProtoStream(0x1234)
    assert hstreams.checked_stream(p, "to_device") is p
    d = cuda.to_device(np.zeros(3), stream=p)
    assert d.stream is p
    cuda.event().record(p)
    assert d.split(2, stream=p)[0].stream is p
    with cuda.mapped(np.zeros(2), stream=p) as m:
        assert m.stream is p
    assert rstreams.protocol_handle(ProtoStream(np.int64(7))) == 7


@pytest.mark.parametrize("answer", [(1, 0x1234), (0, "x"), (0, 1.5), (0, True), (0x1234,), 5])
def test_a_protocol_answer_other_than_version_0_and_an_int_is_refused_by_name(simulated,
                                                                              answer):
    p = types.SimpleNamespace(__cuda_stream__=lambda: answer)
    with pytest.raises(LaunchError, match=r"^to_device: stream .* __cuda_stream__\(\) must "
                                          r"return \(0, handle\)"):
        cuda.to_device(np.zeros(3), stream=p)


def test_the_interface_of_an_array_names_its_protocol_streams_handle():
    assert arrays.interface_stream(ProtoStream(0x55)) == 0x55
    assert arrays.interface_stream(rstreams.Stream(FakeStream(0x66))) == 0x66
    assert arrays.interface_stream(types.SimpleNamespace(cuda_stream=0x77)) == 0x77   # PyTorch's


def test_cupys_stream_for_a_protocol_stream_on_the_gpu(fake_gpu):
    p = ProtoStream(0x77)
    s = hstreams.cupy_stream(p)
    assert isinstance(s, FakeStream) and s.ptr == 0x77 and s.foreign.__cuda_stream__() == (0, 0x77)
    e = cuda.event()
    e.record(p)
    assert e.cupy.stream.ptr == 0x77
    own = cuda.stream()
    assert hstreams.cupy_stream(own) is own.cupy


# --- Stream.from_external; an older CuPy's ExternalStream, its deprecation silenced -------------

class WarningExternalStream(FakeExternalStream):
    def __init__(self, ptr):
        import warnings
        warnings.warn("ExternalStream is deprecated. Use Stream.from_external() instead",
                      DeprecationWarning, stacklevel=2)
        super().__init__(ptr)


def test_external_streams_are_from_external_else_external_stream_without_its_warning():
    import warnings
    cp = fake_cupy()
    cp.cuda.ExternalStream = WarningExternalStream
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = rstreams.external_cupy_stream(cp, 0x99)
    # CuPy 14 has both: Stream.from_external over the protocol
    assert isinstance(s, FakeStream) and s.foreign.__cuda_stream__() == (0, 0x99)
    # a CuPy without from_external: its ExternalStream, the warning (if any) silenced
    cp = fake_cupy(OldFakeStream)
    cp.cuda.ExternalStream = WarningExternalStream
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = rstreams.external_cupy_stream(cp, 0x98)
    assert isinstance(s, WarningExternalStream) and s.ptr == 0x98


@pytest.mark.parametrize("stream_class", [FakeStream, OldFakeStream])
def test_the_stream_an_interface_names_and_external_streams(monkeypatch, fake_gpu, stream_class):
    fake = fake_cupy(stream_class)
    monkeypatch.setattr(probe, "cupy_module", lambda: fake)
    monkeypatch.setattr(hstreams, "cupy", lambda: fake)
    expected = FakeStream if stream_class is FakeStream else FakeExternalStream
    s = rstreams.wait_for_interface_stream({"stream": 0x42}, sync=False)
    assert isinstance(s.cupy, expected) and s.ptr == 0x42 and s.external
    e = cuda.external_stream(0x43)
    assert isinstance(e.cupy, expected) and e.ptr == 0x43 and e.external
    assert isinstance(hstreams.cupy_stream(0x44), expected)


# --- elapsed_time --------------------------------------------------------------------------------

def test_elapsed_time_of_an_event_that_cannot_time_is_a_driver_error(fake_gpu):
    start, end = cuda.event(timing=False), cuda.event()
    start.record()
    end.record()
    with pytest.raises(CudaDriverError, match="timing=True") as info:
        cuda.event_elapsed_time(start, end)
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(CudaDriverError, match="timing=True"):
        end.elapsed_time(start)


def test_elapsed_time_of_an_unrecorded_event_is_a_driver_error(fake_gpu):
    start, end = cuda.event(), cuda.event()
    start.record()
    with pytest.raises(CudaDriverError, match="invalid resource handle.*recorded") as info:
        start.elapsed_time(end)
    assert isinstance(info.value.__cause__, CUDARuntimeError)
    end.record()
    assert start.elapsed_time(end) == 1.5


def test_a_launch_takes_a_stream_of_the_cuda_stream_protocol():
    """``k[grid, block, s]`` with ``s`` speaking the CUDA stream protocol (cuda.core's streams):
    its handle is the launch's stream, as numba-cuda takes it."""
    from gpureplace.runtime.launch import stream_ptr

    class Foreign:
        def __cuda_stream__(self):
            return (0, 0x1234)

    @cuda.jit
    def bump(x):
        x[cuda.grid(1)] += 1

    assert stream_ptr(Foreign()) == 0x1234
    x = np.zeros(32)
    bump[1, 32, Foreign()](x)
    assert x.sum() == 32
