"""Device arrays behave as numba-cuda's where ported code can tell (``d.T`` is a view, as on the
GPU, where device arrays are CuPy's: a deliberate difference), an in-place operation leaves a mapped, managed or
device array what it is, a record array prints, ``copy_to_host(ary)`` / ``copy_to_device(ary)``
check shapes and dtypes as ``check_array_compatibility`` does, bogus streams are refused as a
launch refuses them and a ``stream=`` given is the array's ``.stream``, a float shape is refused
by name, and the simulated device has the driver's common attributes.  The GPU's classes are
checked without a GPU over a CuPy stand-in made of NumPy arrays."""

import ctypes
import types

import numpy as np
import pytest

from gpureplace import arch, cuda
from gpureplace.config import settings
from gpureplace.errors import LaunchError
from gpureplace.hostapi import arrays, memory

REC = np.dtype([("x", np.float64), ("n", np.int32)], align=True)
BAD_STREAM = (r"stream must be a CuPy or PyTorch stream, an object with __cuda_stream__, an int "
              r"handle or None, got 'x'")


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


@cuda.jit("void(float32[:, ::1], float32[:, ::1])")
def copy_c(src, dst):
    i, j = cuda.grid(2)
    if i < src.shape[0] and j < src.shape[1]:
        dst[i, j] = src[i, j]


@cuda.jit
def zero_all(x):
    i, j = cuda.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        x[i, j] = 0


@cuda.jit
def through_views(a):
    a.T[1, 0] = 7                  # a.T, a.transpose() and np.transpose(a): views on the device
    a.transpose()[2, 0] = 8
    np.transpose(a)[0, 1] = 9


@cuda.jit
def add_one(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


@cuda.jit
def take(x):
    pass


# -- 1. np.asarray of a simulated device array --------------------------------------------------

@pytest.mark.xfail(strict=True, reason="a simulated device array is an ndarray subclass: NumPy "
                                       "never asks it for __array__, so np.asarray is a view")
def test_asarray_is_a_host_copy_as_in_numba_cuda(sim):
    d = cuda.to_device(np.zeros(4, np.float32))
    snapshot = np.asarray(d)
    add_one[1, 4](d)
    assert snapshot.tolist() == [0, 0, 0, 0]


# -- 2. transpose -------------------------------------------------------------------------------

def test_T_is_a_view_on_the_host_as_on_the_gpu(sim):
    """A deliberate difference from numba-cuda, whose ``DeviceNDArray.T`` is a C-contiguous
    copy: device arrays here are CuPy's on the GPU, whose ``.T`` is a view, and the simulator
    agrees with the GPU (README, "Differences from numba-cuda").  A kernel declared for
    C-contiguous arrays refuses the view by name."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    d = cuda.to_device(a)
    t = d.T
    assert t.shape == (3, 2) and not t.is_c_contiguous()
    zero_all[1, (4, 4)](t)
    assert not d.copy_to_host().any()
    with pytest.raises(Exception, match=r"copy_c"):
        copy_c[1, (4, 4)](cuda.to_device(a).T, cuda.device_array((3, 2), np.float32))


def test_in_kernels_T_and_transpose_are_views(sim):
    d = cuda.to_device(np.zeros((2, 3)))
    through_views[1, 1](d)
    assert d.copy_to_host().tolist() == [[0, 7, 8], [9, 0, 0]]


# -- 3. in-place operations on mapped, managed and device arrays ----------------------------------

@pytest.mark.parametrize("make", [cuda.mapped_array, cuda.managed_array, cuda.device_array])
def test_in_place_operations_keep_the_array_what_it_is(sim, make):
    m = make(4, np.float32)
    kind = type(m)
    m[...] = 0
    m += 1
    np.add(m, 1, out=m)
    np.multiply(np.ones(4, np.float32), m, out=m)
    m[1:] += 1
    m[:2] *= 2
    assert type(m) is kind and cuda.is_cuda_array(m) and type(m[1:]) is kind
    add_one[1, 4](m)
    assert m.copy_to_host().tolist() == [5, 7, 4, 4]
    assert type(m + 1) is np.ndarray and type(np.sin(m)) is np.ndarray   # new results: host
    assert type(m.sum()) is np.float32


@pytest.mark.parametrize("cls", [memory.MappedNDArray, memory.ManagedNDArray])
def test_the_gpu_mapped_classes_stay_themselves_in_place(sim, cls):
    m = np.zeros(4, np.float32).view(cls)
    m += 1
    np.add(m, 1, out=m)
    m[2:] -= 1
    assert type(m) is cls and cuda.is_cuda_array(m)
    assert m.copy_to_host().tolist() == [2, 2, 1, 1]
    assert type(m * 2) is np.ndarray and type(m.sum()) is np.float32
    col = np.zeros((1, 4), np.float32)
    assert m.copy_to_host(col) is col and col.tolist() == [[2, 2, 1, 1]]
    with pytest.raises(TypeError, match=r"incompatible dtype: float32 vs. float64"):
        m.copy_to_host(np.zeros(4))
    with pytest.raises(LaunchError, match=f"^copy_to_host: {BAD_STREAM}$"):
        m.copy_to_host(stream="x")


# -- 4. record arrays print ---------------------------------------------------------------------

def test_record_device_arrays_print(sim):
    host = np.zeros((2, 2), REC)
    host["x"] = [[1.5, 2], [3, 4]]
    d = cuda.to_device(host)
    assert str(d) == str(host)
    assert repr(d) == "SimDeviceNDArray" + repr(host)[len("array"):].replace(
        "\n      ", "\n" + " " * len("SimDeviceNDArray("))
    assert "(1.5, 0)" in repr(d[0]) and str(d[1]) == str(host[1])
    assert repr(cuda.to_device(np.arange(3.0))) == "SimDeviceNDArray([0., 1., 2.])"


# -- 5. copy_to_host(ary) / copy_to_device(ary): numba-cuda's check_array_compatibility ----------

def _check_copies(col, wide):
    """``col``: a (4, 1) float32 device array of 0 1 2 3; ``wide``: a (2, 3) one."""
    host = np.full(4, -1, np.float32)
    assert col.copy_to_host(host) is host and host.tolist() == [0, 1, 2, 3]
    row = np.zeros((1, 4, 1), np.float32)
    col.copy_to_host(row)
    assert row.ravel().tolist() == [0, 1, 2, 3]
    col.copy_to_device(np.array([5, 6, 7, 8], np.float32))
    assert col.copy_to_host().ravel().tolist() == [5, 6, 7, 8]
    col.copy_to_device(np.array([[[1, 2, 3, 4]]], np.float32))
    assert col.copy_to_host().ravel().tolist() == [1, 2, 3, 4]
    with pytest.raises(TypeError, match=r"incompatible dtype: float32 vs. float64"):
        col.copy_to_host(np.zeros((4, 1)))
    with pytest.raises(TypeError, match=r"incompatible dtype: float32 vs. float64"):
        col.copy_to_device(np.zeros(4))
    with pytest.raises(ValueError, match=r"incompatible shape: copy_to_host\(ary\): ary's shape "
                                         r"\(2, 2\) does not match the device array's \(4, 1\)"):
        col.copy_to_host(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match=r"incompatible shape: copy_to_device"):
        col.copy_to_device(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match=r"copy_to_host\(ary\): ary must be a NumPy array, "
                                        r"got list"):
        col.copy_to_host([0, 0, 0, 0])
    with pytest.raises(ValueError, match="incompatible shape"):
        col.copy_to_host(np.zeros(0, np.float32))       # (an empty ary is still checked)
    before = wide.copy_to_host()
    other_layout = np.zeros((2, 3, 1), order="F")
    assert wide.copy_to_host(other_layout) is other_layout
    np.testing.assert_array_equal(other_layout[..., 0], before)
    wide.copy_to_device(np.zeros(0))                     # empty: nothing, whatever its dtype
    wide.copy_to_device(np.zeros((0, 5), np.int8))
    np.testing.assert_array_equal(wide.copy_to_host(), before)


def test_copies_check_shapes_and_dtypes_as_numba_cuda(sim):
    col = cuda.to_device(np.arange(4, dtype=np.float32).reshape(4, 1))
    _check_copies(col, cuda.to_device(np.arange(6.0).reshape(2, 3)))
    col.copy_to_device(cuda.to_device(np.array([9, 8, 7, 6], np.float32)))   # device to device
    assert col.copy_to_host().ravel().tolist() == [9, 8, 7, 6]
    with pytest.raises(TypeError, match=r"incompatible dtype: float32 vs. int32"):
        col.copy_to_device(cuda.to_device(np.zeros(4, np.int32)))
    cuda.to_device(np.array([[1], [2], [3], [4]], np.float32), to=col)
    assert col.copy_to_host().ravel().tolist() == [1, 2, 3, 4]


class _Memory:
    def __init__(self, arr):
        self.ptr = arr.ctypes.data

    def copy_to_host(self, dst, size):
        ctypes.memmove(dst, self.ptr, size)

    def copy_from_host(self, src, size):
        ctypes.memmove(self.ptr, src, size)


class _FakeCupyArray(np.ndarray):
    """Device memory, as far as the DeviceNDArray class looks at it."""

    def get(self, stream=None):
        return np.array(self, copy=True)

    @property
    def data(self):
        return _Memory(self)

    @property
    def __cuda_array_interface__(self):
        return arrays.array_interface(self, self.ctypes.data)


@pytest.fixture
def gpu_class(monkeypatch):
    fake = types.SimpleNamespace(ndarray=_FakeCupyArray,
                                 asarray=lambda a: np.array(a).view(_FakeCupyArray),
                                 copyto=np.copyto)
    monkeypatch.setattr(arrays, "cupy", lambda: fake)
    monkeypatch.setattr(arrays, "_DeviceNDArray", None)
    return arrays.device_array_class()


def test_the_gpu_class_checks_copies_as_numba_cuda(gpu_class):
    def on_fake_gpu(host):
        return np.array(host).view(_FakeCupyArray).view(type=gpu_class)

    col = on_fake_gpu(np.arange(4, dtype=np.float32).reshape(4, 1))
    _check_copies(col, on_fake_gpu(np.arange(6.0).reshape(2, 3)))
    col.copy_to_device(on_fake_gpu(np.array([[4, 3, 2, 1]], np.float32)))   # device to device
    assert col.copy_to_host().ravel().tolist() == [4, 3, 2, 1]
    with pytest.raises(TypeError, match=r"incompatible dtype: float32 vs. int32"):
        col.copy_to_device(on_fake_gpu(np.zeros(4, np.int32)))
    col.copy_to_device(on_fake_gpu(np.zeros(0, np.int32)))                  # empty: nothing
    assert col.copy_to_host().ravel().tolist() == [4, 3, 2, 1]


@pytest.mark.gpu
def test_copies_check_shapes_and_dtypes_on_the_gpu():
    col = cuda.to_device(np.arange(4, dtype=np.float32).reshape(4, 1))
    _check_copies(col, cuda.to_device(np.arange(6.0).reshape(2, 3)))


# -- 6. streams ---------------------------------------------------------------------------------

def test_bogus_streams_are_refused_as_a_launch_refuses_them(sim):
    d = cuda.to_device(np.zeros(4, np.float32))
    with pytest.raises(LaunchError, match=BAD_STREAM):
        take[1, 1, "x"](d)
    calls = [("to_device", lambda: cuda.to_device(np.zeros(2), stream="x")),
             ("device_array", lambda: cuda.device_array(2, stream="x")),
             ("device_array", lambda: cuda.device_array_like(d, stream="x")),
             ("mapped_array", lambda: cuda.mapped_array(2, stream="x")),
             ("managed_array", lambda: cuda.managed_array(2, stream="x")),
             ("copy_to_host", lambda: d.copy_to_host(stream="x")),
             ("copy_to_device", lambda: d.copy_to_device(np.zeros(4, np.float32), stream="x")),
             ("bind", lambda: d.bind("x")),
             ("getitem", lambda: d.getitem(0, stream="x")),
             ("setitem", lambda: d.setitem(0, 1.0, stream="x")),
             ("squeeze", lambda: d.squeeze(stream="x")),
             ("Event.record", lambda: cuda.event().record("x"))]
    for what, call in calls:
        with pytest.raises(LaunchError, match=f"^{what}: {BAD_STREAM}$"):
            call()
    assert d.copy_to_host(stream=0).tolist() == [0, 0, 0, 0]
    d.copy_to_host(stream=cuda.stream())
    d.copy_to_host(stream=None)


def test_bogus_streams_are_refused_on_the_gpu_backend_too(monkeypatch):
    monkeypatch.setattr(settings, "backend", "gpu")      # (refused before any device is asked)
    with pytest.raises(LaunchError, match=f"^device_array: {BAD_STREAM}$"):
        cuda.device_array(2, stream="x")
    with pytest.raises(LaunchError, match=f"^to_device: {BAD_STREAM}$"):
        cuda.to_device(np.zeros(2), stream="x")


def test_arrays_made_with_a_stream_report_it(sim):
    s = cuda.stream()
    made = [cuda.device_array(3, stream=s), cuda.device_array((2, 2), strides=(8, 16), stream=s),
            cuda.device_array_like(np.zeros(3), stream=s), cuda.to_device(np.zeros(3), stream=s),
            cuda.to_device(np.zeros((), REC)[()], stream=s), cuda.mapped_array(3, stream=s),
            cuda.managed_array(3, stream=s)]
    for d in made:
        assert d.stream is s
    assert made[0][1:].stream is s                        # views keep it
    assert cuda.device_array(3).stream == 0 and cuda.to_device(np.zeros(3)).stream == 0
    assert cuda.device_array(3, stream=cuda.external_stream(7)).stream.ptr == 7


# -- 7. shapes ----------------------------------------------------------------------------------

def test_a_shape_that_is_not_integers_is_refused_by_name(sim):
    for shape, what in ((3.0, r"got 3.0 \(a float\)"), (np.float64(2), r"got (np.float64\()?2.0"),
                        ((3, 2.0), r"got \(3, 2.0\) \(an element is 2.0 \(a float\)\)"),
                        ("3", r"got '3' \(a str\)"), (None, r"got None")):
        with pytest.raises(TypeError, match=r"^device_array\(shape\): shape must be an integer "
                                            r"or tuple of integers, " + what):
            cuda.device_array(shape)
    for make in (cuda.pinned_array, cuda.mapped_array, cuda.managed_array):
        with pytest.raises(TypeError, match=rf"^{make.__name__}\(shape\): shape must be"):
            make(2.5)
    assert cuda.device_array(np.int64(3)).shape == (3,)
    assert cuda.device_array(np.array([2, 3])).shape == (2, 3)
    assert cuda.device_array([2, np.int32(1)]).shape == (2, 1)


# -- 8. the simulated device's attributes ---------------------------------------------------------

def test_the_simulated_device_has_the_common_attributes(sim):
    dev = cuda.get_current_device()
    assert dev.uuid == "GPU-00000000-0000-0000-0000-000000000000"    # numba-cuda simulator's
    assert (dev.COMPUTE_CAPABILITY_MAJOR, dev.COMPUTE_CAPABILITY_MINOR) == dev.compute_capability
    assert dev.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN == arch.shared_opt_in_bytes("sm_90") == 232448
    assert dev.MAX_SHARED_MEMORY_PER_BLOCK == arch.STATIC_SHARED_BYTES
    assert dev.TOTAL_CONSTANT_MEMORY == arch.CONST_BYTES
    assert dev.MAX_THREADS_PER_MULTIPROCESSOR == dev.MAX_THREADS_PER_MULTI_PROCESSOR == 2048
    assert dev.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR == 228 * 1024
    assert dev.MAX_REGISTERS_PER_BLOCK == dev.MAX_REGISTERS_PER_MULTIPROCESSOR == 65536
    assert dev.L2_CACHE_SIZE == 50 * 1024 * 1024 and dev.MULTIPROCESSOR_COUNT == 1
    assert dev.CONCURRENT_KERNELS == dev.UNIFIED_ADDRESSING == dev.COOPERATIVE_LAUNCH == 1
    assert dev.get_device_identity() == {"pci_domain_id": 0, "pci_bus_id": 0,
                                         "pci_device_id": 0}
    assert cuda.select_device(0) == dev == cuda.gpus[0] and len({dev, cuda.gpus[0]}) == 1
    with pytest.raises(AttributeError, match=r"no attribute 'MAX_THREADS_PER_SM' .*did you "
                                             r"mean MAX_THREADS_PER_BLOCK"):
        dev.MAX_THREADS_PER_SM
    with pytest.raises(AttributeError, match=r"no attribute 'warp_size' .*upper case"):
        dev.warp_size
    assert not hasattr(dev, "__array_interface__") and not hasattr(dev, "NOT_AN_ATTRIBUTE")
