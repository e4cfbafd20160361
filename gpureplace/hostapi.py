"""numba-cuda's host API on CuPy: device arrays, pinned and mapped memory, streams, events,
devices.  Offered in ``gpureplace.cuda``, so scripts written for ``numba.cuda`` port by changing
the import::

    d_x = cuda.to_device(x)                 # a DeviceNDArray: a CuPy array with numba's methods
    d_out = cuda.device_array_like(d_x)
    s = cuda.stream()
    kernel[blocks, threads, s](d_x, d_out)
    out = d_out.copy_to_host(stream=s)
    s.synchronize()

``DeviceNDArray`` is a subclass of ``cupy.ndarray``: everything CuPy does works on it, and every
CuPy array can be passed where numba-cuda takes a device array.  Streams and events wrap CuPy's
(``.cupy``).

Without a GPU (the simulator backend) the same calls work on host memory: device arrays are
NumPy arrays with the same methods (``SimDeviceNDArray``), streams and events stand-ins whose
timings come from the host clock.
"""

from __future__ import annotations

import contextlib
import ctypes
import time
from collections import namedtuple

import numpy as np

from .config import settings
from .runtime import device as _device

__all__ = ["to_device", "device_array", "device_array_like", "pinned_array",
           "pinned_array_like", "mapped_array", "mapped_array_like", "managed_array", "pinned",
           "mapped", "as_cuda_array", "from_cuda_array_interface", "is_cuda_array",
           "synchronize", "stream", "default_stream", "legacy_default_stream", "per_thread_default_stream", "external_stream", "event",
           "event_elapsed_time", "get_current_device", "select_device", "list_devices", "gpus",
           "current_context", "close", "detect", "defer_cleanup", "profile_start",
           "profile_stop", "profiling", "is_float16_supported", "devicearray", "In", "Out",
           "InOut", "as_vectors"]


from .runtime.arguments import In, InOut, Out  # noqa: E402  (numba-cuda's transfer hints)
from .runtime.arguments import VectorArray as _VectorArray  # noqa: E402


def as_vectors(array, count=4):
    """The C-contiguous device array ``array`` as a kernel sees it: an array of CUDA vector
    values of ``count`` elements along its last axis (``cuda.float32x4`` elements for float32
    data and ``count=4``).  Each element read or written is then one wide memory access, as
    with CUDA C's ``float4``: what memory-bound kernels need to reach the memory's bandwidth.

        @cuda.jit
        def saxpy4(a, x, y, out):
            i = cuda.grid(1)
            if i < out.size:
                u, v = x[i], y[i]
                out[i] = cuda.float32x4(a * u.x + v.x, a * u.y + v.y, a * u.z + v.z, a * u.w + v.w)

        saxpy4[blocks, 256](2.0, cuda.as_vectors(x), cuda.as_vectors(y), cuda.as_vectors(out))

    The last axis must be a multiple of ``count`` and the address aligned to the vector's size
    (at most 16 bytes)."""
    return _VectorArray(array, count)


def _simulated():
    return settings.launch_backend() == "simulator"


def _cp():
    cp = _device.cupy_module()
    if cp is None:
        raise RuntimeError("CuPy is not available: the GPU host API needs it (the simulator "
                           "backend works without it: GPUREPLACE_BACKEND=simulator)")
    return cp


# ---------------------------------------------------------------------------------------------
# Streams and events


class Stream:
    """A CUDA stream (numba-cuda's ``Stream``), wrapping a CuPy stream (``.cupy``).

    Launch configurations (``kernel[grid, block, stream]``), copies and events take it; ``with
    s:`` makes it CuPy's current stream; ``with s.auto_synchronize():`` also waits for it at the
    end of the block.
    """

    __slots__ = ("cupy",)

    def __init__(self, cupy_stream):
        self.cupy = cupy_stream

    @property
    def ptr(self):
        return self.cupy.ptr

    @property
    def handle(self):
        return ctypes.c_void_p(self.cupy.ptr)

    def __int__(self):
        return int(self.cupy.ptr)

    def synchronize(self):
        self.cupy.synchronize()

    def query(self):
        """True when everything queued on the stream has finished."""
        return bool(self.cupy.done)

    @contextlib.contextmanager
    def auto_synchronize(self):
        with self:
            yield self
        self.synchronize()

    def __enter__(self):
        self.cupy.__enter__()
        return self

    def __exit__(self, *exc):
        return self.cupy.__exit__(*exc)

    def __repr__(self):
        return f"<gpureplace.cuda.Stream {self.cupy.ptr:#x}>"


class SimStream:
    """A stream under the simulator: launches run at once, so there is nothing to wait for."""

    __slots__ = ("ptr",)

    def __init__(self, ptr=0):
        self.ptr = ptr

    handle = property(lambda self: ctypes.c_void_p(self.ptr))

    def __int__(self):
        return self.ptr

    def synchronize(self):
        return None

    def query(self):
        return True

    @contextlib.contextmanager
    def auto_synchronize(self):
        yield self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return "<gpureplace.cuda.Stream (simulated)>"


def _cupy_stream(stream):
    """CuPy's stream for numba-cuda's ``stream`` argument (0 or None: the current stream)."""
    if stream is None or (isinstance(stream, int) and not isinstance(stream, bool)
                          and stream == 0):
        return None
    if isinstance(stream, Stream):
        return stream.cupy
    if isinstance(stream, SimStream):
        return None
    cp = _cp()
    if isinstance(stream, cp.cuda.Stream) or isinstance(stream, cp.cuda.ExternalStream):
        return stream
    from .runtime.launch import stream_ptr
    return cp.cuda.ExternalStream(stream_ptr(stream))


def stream():
    """A new CUDA stream (ordered with the legacy default stream, as numba-cuda's)."""
    if _simulated():
        return SimStream()
    return Stream(_cp().cuda.Stream(non_blocking=False))


def default_stream():
    """The default stream (the legacy one)."""
    return legacy_default_stream()


def legacy_default_stream():
    if _simulated():
        return SimStream()
    return Stream(_cp().cuda.Stream.null)


def per_thread_default_stream():
    if _simulated():
        return SimStream()
    return Stream(_cp().cuda.Stream.ptds)


def external_stream(ptr):
    """A stream created elsewhere (a ``cudaStream_t`` as an int), not owned by gpureplace."""
    if not isinstance(ptr, int) or isinstance(ptr, bool):
        raise TypeError(f"external_stream(ptr): ptr must be a stream handle (int), got {ptr!r}")
    if _simulated():
        return SimStream(ptr)
    return Stream(_cp().cuda.ExternalStream(ptr))


class Event:
    """A CUDA event (numba-cuda's ``Event``), wrapping CuPy's (``.cupy``)."""

    __slots__ = ("cupy",)

    def __init__(self, timing=True):
        self.cupy = _cp().cuda.Event(disable_timing=not timing)

    def record(self, stream=0):
        self.cupy.record(_cupy_stream(stream))

    def synchronize(self):
        self.cupy.synchronize()

    def wait(self, stream=0):
        """Make ``stream`` wait for this event."""
        s = _cupy_stream(stream)
        (s if s is not None else _cp().cuda.get_current_stream()).wait_event(self.cupy)

    def query(self):
        return bool(self.cupy.done)

    def elapsed_time(self, evtend):
        """Milliseconds from this event to ``evtend`` (both recorded, with timing)."""
        return _cp().cuda.get_elapsed_time(self.cupy, evtend.cupy)


class SimEvent:
    """An event under the simulator: recording reads the host clock."""

    __slots__ = ("timing", "_t")

    def __init__(self, timing=True):
        self.timing, self._t = timing, None

    def record(self, stream=0):
        self._t = time.perf_counter()

    def synchronize(self):
        return None

    def wait(self, stream=0):
        return None

    def query(self):
        return True

    def elapsed_time(self, evtend):
        if not (self.timing and evtend.timing):
            raise RuntimeError("elapsed_time needs two events created with timing=True")
        if self._t is None or evtend._t is None:
            raise RuntimeError("elapsed_time needs both events recorded")
        return (evtend._t - self._t) * 1e3


def event(timing=True):
    """A CUDA event; ``timing=False`` makes one that cannot time but costs less."""
    return SimEvent(timing) if _simulated() else Event(timing)


def event_elapsed_time(evtstart, evtend):
    """Milliseconds between two recorded events."""
    return evtstart.elapsed_time(evtend)


def synchronize():
    """Wait for all work on the current device."""
    if not _simulated():
        _cp().cuda.runtime.deviceSynchronize()


# ---------------------------------------------------------------------------------------------
# Device arrays


class _NumbaArrayMethods:
    """numba-cuda's ``DeviceNDArray`` methods that CuPy / NumPy arrays do not have."""

    __slots__ = ()

    def is_c_contiguous(self):
        return bool(self.flags.c_contiguous)

    def is_f_contiguous(self):
        return bool(self.flags.f_contiguous)

    @property
    def alloc_size(self):
        return int(self.nbytes)

    def split(self, section, stream=0):
        """Views of consecutive ``section``-element pieces of a 1-D contiguous array."""
        if self.ndim != 1 or not self.flags.c_contiguous:
            raise ValueError("split() needs a 1-D contiguous array")
        if not isinstance(section, int) or section <= 0:
            raise ValueError(f"split(section): section must be a positive int, got {section!r}")
        return [self[i:i + section] for i in range(0, self.shape[0], section)]


def _host(ary):
    """``ary`` as a host NumPy array (lists, scalars and array-likes too)."""
    if hasattr(ary, "__cuda_array_interface__") and not isinstance(ary, np.ndarray):
        raise TypeError(f"expected a host array, got a device array ({type(ary).__name__}); use "
                        f"copy_to_device(d_ary) / cupy.copyto for device-to-device copies")
    return np.asarray(ary)


_DeviceNDArray = None


def _device_array_class():
    global _DeviceNDArray
    if _DeviceNDArray is None:
        cp = _cp()

        class DeviceNDArray(_NumbaArrayMethods, cp.ndarray):
            """A CuPy array with numba-cuda's ``DeviceNDArray`` methods."""

            def copy_to_host(self, ary=None, stream=0):
                """The array's contents in host memory: a new NumPy array, or written into
                ``ary`` (same shape and dtype); asynchronous when ``stream`` is given."""
                base = self.view(type=cp.ndarray)
                s = _cupy_stream(stream)
                if ary is None:
                    ary = np.empty(self.shape, self.dtype,
                                   order="F" if _f_only(base) else "C")
                elif not isinstance(ary, np.ndarray) or ary.shape != self.shape or \
                        ary.dtype != self.dtype:
                    raise ValueError(f"copy_to_host(ary): ary must be a NumPy array of shape "
                                     f"{self.shape} and dtype {self.dtype}")
                if _same_layout(ary, base):
                    # bytes as they are: any dtype (records too), no temporary
                    if s is None:
                        base.data.copy_to_host(ary.ctypes.data, ary.nbytes)
                    else:
                        base.data.copy_to_host_async(ary.ctypes.data, ary.nbytes, s)
                else:
                    ary[...] = base.get(stream=s)
                return ary

            def copy_to_device(self, ary, stream=0):
                """Fill the array from ``ary``: a host array (or list) or a device array."""
                base = self.view(type=cp.ndarray)
                s = _cupy_stream(stream)
                if hasattr(ary, "__cuda_array_interface__") or isinstance(ary, cp.ndarray):
                    with (s if s is not None else contextlib.nullcontext()):
                        cp.copyto(base, cp.asarray(ary))
                    return
                host = np.asarray(ary, dtype=self.dtype)
                if host.shape != self.shape:
                    raise ValueError(f"copy_to_device: shape {host.shape} does not match the "
                                     f"device array's {self.shape}")
                if _same_layout(host, base):
                    if s is None:
                        base.data.copy_from_host(host.ctypes.data, host.nbytes)
                    else:
                        base.data.copy_from_host_async(host.ctypes.data, host.nbytes, s)
                else:
                    with (s if s is not None else contextlib.nullcontext()):
                        cp.copyto(base, cp.asarray(host))

            @property
            def device_ctypes_pointer(self):
                return ctypes.c_void_p(self.data.ptr)

            def __repr__(self):
                return (f"<gpureplace.cuda DeviceNDArray shape={self.shape} "
                        f"dtype={self.dtype}>")

        DeviceNDArray.__module__ = "gpureplace.cuda"
        DeviceNDArray.__qualname__ = "DeviceNDArray"
        _DeviceNDArray = DeviceNDArray
    return _DeviceNDArray


def _array_interface(ary, address):
    """``__cuda_array_interface__`` (version 3) of the NumPy array ``ary`` at device ``address``."""
    return {"shape": ary.shape, "typestr": ary.dtype.str,
            "descr": ary.dtype.descr if ary.dtype.names else [("", ary.dtype.str)],
            "data": (address, False),
            "strides": None if ary.flags.c_contiguous else ary.strides, "version": 3}


class SimDeviceNDArray(_NumbaArrayMethods, np.ndarray):
    """A "device" array under the simulator: host memory with numba-cuda's methods."""

    def __array_finalize__(self, obj):
        # pointers into it that kernels are given are bounds-checked
        from .simulator.arrays import remember_allocation
        remember_allocation(self)

    def copy_to_host(self, ary=None, stream=0):
        if ary is None:
            return np.array(self, copy=True, order="K").view(np.ndarray)
        if ary.shape != self.shape or ary.dtype != self.dtype:
            raise ValueError(f"copy_to_host(ary): ary must be a NumPy array of shape "
                             f"{self.shape} and dtype {self.dtype}")
        ary[...] = self
        return ary

    def copy_to_device(self, ary, stream=0):
        host = np.asarray(ary, dtype=self.dtype)
        if host.shape != self.shape:
            raise ValueError(f"copy_to_device: shape {host.shape} does not match the device "
                             f"array's {self.shape}")
        self[...] = host

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        # results of NumPy operations on simulated device arrays are plain arrays
        if return_scalar:
            return obj[()]
        return np.asarray(obj)

    @property
    def __cuda_array_interface__(self):
        # The simulator's "device" is the host, so the address is the host memory's (as in
        # numba's simulator): code that hands raw pointers to kernels runs there too.
        return _array_interface(self, self.ctypes.data)


def _f_only(a):
    return a.flags.f_contiguous and not a.flags.c_contiguous


def _same_layout(host, dev):
    """Whether ``host`` and ``dev`` hold their elements in the same byte order (both C- or both
    F-contiguous), so a copy is one memcpy."""
    return (host.flags.c_contiguous and dev.flags.c_contiguous) or \
        (host.flags.f_contiguous and dev.flags.f_contiguous)


def _order_of(host):
    """'F' for a column-major array, contiguous or a strided view of one (NumPy's order='K'
    for empty_like), else 'C'."""
    if host.flags.c_contiguous:
        return "C"
    if host.flags.f_contiguous:
        return "F"
    strides = [abs(s) for s, n in zip(host.strides, host.shape) if n > 1]
    return "F" if len(strides) > 1 and strides[0] < strides[-1] else "C"


def to_device(obj, stream=0, copy=True, to=None):
    """Copy a host array to the GPU: a new ``DeviceNDArray`` (or into ``to``).  A device array
    (anything with ``__cuda_array_interface__``) is returned as a device array view, uncopied."""
    if to is not None:
        to.copy_to_device(obj, stream=stream)
        return to
    if _simulated():
        if isinstance(obj, SimDeviceNDArray):
            return obj
        host = np.asarray(obj)
        arr = np.array(host, copy=True, order="K") if copy else np.empty_like(host, order="K")
        return arr.view(SimDeviceNDArray)
    if is_cuda_array(obj):
        return as_cuda_array(obj)
    host = _host(obj)
    if not (host.flags.c_contiguous or host.flags.f_contiguous):
        host = np.ascontiguousarray(host)
    arr = _cp().empty(host.shape, host.dtype, order=_order_of(host)).view(
        type=_device_array_class())
    if copy:
        arr.copy_to_device(host, stream=stream)
    return arr


def _span(shape, strides, itemsize):
    if any(n == 0 for n in shape):
        return 0
    if any(s < 0 for s in strides):
        raise ValueError(f"device_array: negative strides {strides} are not supported")
    return sum((n - 1) * s for n, s in zip(shape, strides)) + itemsize


def _shape_tuple(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(n) for n in shape)


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """An uninitialised array on the GPU (numba-cuda's default dtype: float64)."""
    shape, dtype = _shape_tuple(shape), np.dtype(dtype)
    if order not in ("C", "F"):
        raise ValueError(f"device_array: order must be 'C' or 'F', got {order!r}")
    if _simulated():
        if strides is None:
            return np.empty(shape, dtype, order=order).view(SimDeviceNDArray)
        buf = np.empty(_span(shape, strides, dtype.itemsize), np.uint8)
        return np.ndarray(shape, dtype, buffer=buf, strides=strides).view(SimDeviceNDArray)
    cp = _cp()
    cls = _device_array_class()
    if strides is None:
        return cp.empty(shape, dtype, order=order).view(type=cls)
    mem = cp.cuda.alloc(_span(shape, tuple(strides), dtype.itemsize))
    return cp.ndarray(shape, dtype, mem, tuple(strides)).view(type=cls)


def device_array_like(ary, stream=0):
    """An uninitialised GPU array with ``ary``'s shape, dtype and layout."""
    return device_array(ary.shape, ary.dtype, order=_order_of(ary), stream=stream)


def as_cuda_array(obj, sync=True):
    """A ``DeviceNDArray`` view of a device array of another library (``__cuda_array_interface__``
    or DLPack): no copy."""
    if _simulated():
        if isinstance(obj, np.ndarray):
            return obj.view(SimDeviceNDArray)
        raise TypeError(f"as_cuda_array: the simulator works on host memory; got "
                        f"{type(obj).__name__}")
    cp = _cp()
    if isinstance(obj, np.ndarray) and not is_cuda_array(obj) or not (
            is_cuda_array(obj) or isinstance(obj, cp.ndarray) or hasattr(obj, "__dlpack__")):
        raise TypeError(f"as_cuda_array: {type(obj).__name__} is not a device array (it has no "
                        f"__cuda_array_interface__); use to_device to copy host data")
    arr = obj if isinstance(obj, cp.ndarray) else (
        cp.asarray(obj) if is_cuda_array(obj) else cp.from_dlpack(obj))
    return arr.view(type=_device_array_class())


def from_cuda_array_interface(desc, owner=None, sync=True):
    """A ``DeviceNDArray`` over the memory a ``__cuda_array_interface__`` dictionary describes;
    ``owner`` (kept alive by the view) is the object that owns that memory."""
    if not isinstance(desc, dict) or not {"shape", "typestr", "data"} <= set(desc):
        raise TypeError("from_cuda_array_interface: expected a __cuda_array_interface__ "
                        "dictionary (with 'shape', 'typestr' and 'data')")
    return as_cuda_array(_Described(desc, owner), sync=sync)


class _Described:
    """Memory described by a ``__cuda_array_interface__`` dictionary, and what owns it."""

    def __init__(self, desc, owner):
        self.__cuda_array_interface__ = desc
        self.owner = owner


def is_cuda_array(obj):
    """Whether ``obj`` exposes ``__cuda_array_interface__`` (a device array of any library)."""
    return hasattr(obj, "__cuda_array_interface__") or isinstance(obj, SimDeviceNDArray)


# -- pinned and mapped host memory ---------------------------------------------------------------

_HOST_ALLOC_PORTABLE, _HOST_ALLOC_MAPPED, _HOST_ALLOC_WRITE_COMBINED = 1, 2, 4


def _pinned_buffer(nbytes, flags=0):
    cp = _cp()
    return cp.cuda.PinnedMemoryPointer(cp.cuda.pinned_memory.PinnedMemory(max(nbytes, 1),
                                                                         flags), 0)


def _contiguous_strides(shape, itemsize, order):
    strides, acc = [0] * len(shape), itemsize
    for ax in (reversed(range(len(shape))) if order == "C" else range(len(shape))):
        strides[ax] = acc
        acc *= max(shape[ax], 1)
    return tuple(strides)


def pinned_array(shape, dtype=np.float64, strides=None, order="C"):
    """A host array in page-locked memory (fast and asynchronous copies)."""
    shape, dtype = _shape_tuple(shape), np.dtype(dtype)
    if _simulated():
        return np.empty(shape, dtype, order=order) if strides is None else np.ndarray(
            shape, dtype, buffer=np.empty(_span(shape, strides, dtype.itemsize), np.uint8),
            strides=strides)
    return _page_locked(shape, dtype, strides, order)


def _page_locked(shape, dtype, strides, order, flags=0):
    """A NumPy array over new page-locked memory (``flags``: cudaHostAlloc's)."""
    st = tuple(strides) if strides is not None else _contiguous_strides(shape, dtype.itemsize,
                                                                        order)
    buf = _pinned_buffer(_span(shape, st, dtype.itemsize), flags)
    return np.ndarray(shape, dtype, buffer=buf, strides=st)


def pinned_array_like(ary):
    return pinned_array(ary.shape, ary.dtype, order=_order_of(ary))


class MappedNDArray(np.ndarray):
    """Host memory the GPU reads and writes directly (``mapped_array``): a NumPy array that
    kernels take as a device array."""

    @property
    def __cuda_array_interface__(self):
        return _array_interface(self, self._device_address())

    def _device_address(self):
        return _device_pointer(self.ctypes.data)

    def copy_to_host(self, ary=None, stream=0):
        synchronize()
        if ary is None:
            return np.array(self, copy=True).view(np.ndarray)
        ary[...] = self
        return ary

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        if return_scalar:
            return obj[()]
        return np.asarray(obj)


def _device_pointer(host_ptr):
    """The device address of mapped host memory (the same address under unified addressing)."""
    if not host_ptr:
        return 0
    lib = _device.libcuda()
    if lib is not None:
        out = ctypes.c_uint64()
        fn = getattr(lib, "cuMemHostGetDevicePointer_v2", None)
        if fn is not None and fn(ctypes.byref(out), ctypes.c_void_p(host_ptr), 0) == 0:
            return out.value
    return host_ptr


def mapped_array(shape, dtype=np.float64, strides=None, order="C", stream=0, portable=False,
                 wc=False):
    """Host memory mapped into the GPU's address space: kernels read and write it directly."""
    shape, dtype = _shape_tuple(shape), np.dtype(dtype)
    if _simulated():
        return pinned_array(shape, dtype, strides, order).view(SimDeviceNDArray)
    flags = _HOST_ALLOC_MAPPED | (_HOST_ALLOC_PORTABLE if portable else 0) | (
        _HOST_ALLOC_WRITE_COMBINED if wc else 0)
    return _page_locked(shape, dtype, strides, order, flags).view(MappedNDArray)


class ManagedNDArray(MappedNDArray):
    """Managed (unified) memory (``managed_array``): one address that the host and every GPU
    use, migrated on demand by the driver."""

    def _device_address(self):
        return self.ctypes.data


class _ManagedAllocation:
    """Owns one ``cudaMallocManaged`` allocation; freed when the last array over it goes."""

    def __init__(self, nbytes, attach_global):
        rt = _cp().cuda.runtime
        self._free = rt.free
        self.ptr = rt.mallocManaged(max(nbytes, 1), 1 if attach_global else 2)

    def __del__(self):
        if getattr(self, "ptr", 0):
            try:
                self._free(self.ptr)
            except Exception:       # interpreter shutdown: the context may be gone
                pass
            self.ptr = 0


def managed_array(shape, dtype=np.float64, strides=None, order="C", stream=0,
                  attach_global=True):
    """An array in managed memory: host code reads and writes it as a NumPy array, kernels take
    it as a device array (the driver migrates pages on demand).  ``attach_global=False``
    attaches it to the host until a stream uses it, as numba-cuda's does."""
    shape, dtype = _shape_tuple(shape), np.dtype(dtype)
    if _simulated():
        return pinned_array(shape, dtype, strides, order).view(SimDeviceNDArray)
    st = tuple(strides) if strides is not None else _contiguous_strides(shape, dtype.itemsize,
                                                                        order)
    nbytes = _span(shape, st, dtype.itemsize)
    owner = _ManagedAllocation(nbytes, attach_global)
    buf = (ctypes.c_byte * max(nbytes, 1)).from_address(owner.ptr)
    buf._gpureplace_owner = owner           # the NumPy array keeps the buffer, which keeps this
    return np.ndarray(shape, dtype, buffer=buf, strides=st).view(ManagedNDArray)


def mapped_array_like(ary, stream=0, portable=False, wc=False):
    return mapped_array(ary.shape, ary.dtype, order=_order_of(ary), stream=stream,
                        portable=portable, wc=wc)


_HOST_REGISTER_PORTABLE, _HOST_REGISTER_MAPPED = 1, 2


@contextlib.contextmanager
def _registered(arrays, flags):
    cp = _cp()
    done = []
    try:
        for a in arrays:
            if not isinstance(a, np.ndarray):
                raise TypeError(f"expected NumPy arrays, got {type(a).__name__}")
            if a.nbytes:
                cp.cuda.runtime.hostRegister(a.ctypes.data, a.nbytes, flags)
                done.append(a)
        yield
    finally:
        for a in done:
            cp.cuda.runtime.hostUnregister(a.ctypes.data)


@contextlib.contextmanager
def pinned(*arylist):
    """Page-lock existing host arrays for the duration of the block."""
    if _simulated():
        yield
        return
    with _registered(arylist, _HOST_REGISTER_PORTABLE):
        yield


@contextlib.contextmanager
def mapped(*arylist, **kws):
    """Map existing host arrays into the GPU for the block: yields device arrays (one, or a
    list) over the same memory."""
    if _simulated():
        views = [np.asarray(a).view(SimDeviceNDArray) for a in arylist]
        yield views[0] if len(views) == 1 else views
        return
    cp = _cp()
    with _registered(arylist, _HOST_REGISTER_PORTABLE | _HOST_REGISTER_MAPPED):
        views = []
        for a in arylist:
            mem = cp.cuda.UnownedMemory(_device_pointer(a.ctypes.data), a.nbytes, a)
            views.append(cp.ndarray(a.shape, a.dtype, cp.cuda.MemoryPointer(mem, 0),
                                    a.strides).view(type=_device_array_class()))
        try:
            yield views[0] if len(views) == 1 else views
        finally:
            cp.cuda.runtime.deviceSynchronize()     # nothing may touch the memory afterwards


# ---------------------------------------------------------------------------------------------
# Devices and contexts


def _attribute_key(name):
    return name.replace("_", "").lower()


class Device:
    """A GPU (numba-cuda's ``Device``): ``id``, ``name``, ``compute_capability`` and the driver's
    attributes under numba-cuda's names (``MAX_THREADS_PER_BLOCK``, ``MULTIPROCESSOR_COUNT``,
    ``WARP_SIZE``, ...).  ``with device:`` makes it current for the block."""

    def __init__(self, devnum):
        self.id = int(devnum)
        self._stack = []

    @property
    def _cupy(self):
        return _cp().cuda.Device(self.id)

    @property
    def name(self):
        name = _cp().cuda.runtime.getDeviceProperties(self.id)["name"]
        return name.decode() if isinstance(name, bytes) else name

    @property
    def compute_capability(self):
        cc = self._cupy.compute_capability
        return int(cc[:-1]), int(cc[-1])

    @property
    def uuid(self):
        raw = _cp().cuda.runtime.getDeviceProperties(self.id).get("uuid", b"")
        h = raw.hex() if isinstance(raw, bytes) else str(raw)
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    def __getattr__(self, name):
        if not name.isupper():
            raise AttributeError(name)
        attrs = {_attribute_key(k): v for k, v in self._cupy.attributes.items()}
        value = attrs.get(_attribute_key(name))
        if value is None:
            raise AttributeError(f"device attribute {name!r} is not known (the driver's "
                                 f"attributes: {', '.join(sorted(self._cupy.attributes))})")
        return value

    def reset(self):
        """Wait for the device and release CuPy's cached memory on it."""
        with self._cupy:
            _cp().cuda.runtime.deviceSynchronize()
            _cp().get_default_memory_pool().free_all_blocks()

    def __enter__(self):
        cupy_dev = self._cupy
        cupy_dev.__enter__()
        self._stack.append(cupy_dev)
        return self

    def __exit__(self, *exc):
        return self._stack.pop().__exit__(*exc)

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("Device", self.id))

    def __repr__(self):
        return f"<CUDA device {self.id} '{self.name}'>"


_SIM_ATTRIBUTES = {"MAX_THREADS_PER_BLOCK": 1024, "MAX_BLOCK_DIM_X": 1024,
                   "MAX_BLOCK_DIM_Y": 1024, "MAX_BLOCK_DIM_Z": 64, "MAX_GRID_DIM_X": 2**31 - 1,
                   "MAX_GRID_DIM_Y": 65535, "MAX_GRID_DIM_Z": 65535, "WARP_SIZE": 32,
                   "MAX_SHARED_MEMORY_PER_BLOCK": 48 * 1024, "MULTIPROCESSOR_COUNT": 1,
                   "MAX_REGISTERS_PER_BLOCK": 65536, "CLOCK_RATE": 0,
                   "COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0}


class SimDevice:
    """The simulator's stand-in device."""

    id = 0
    name = "gpureplace CPU simulator"
    compute_capability = (9, 0)

    def __getattr__(self, name):
        try:
            return _SIM_ATTRIBUTES[name]
        except KeyError:
            raise AttributeError(f"the simulated device has no attribute {name!r} (it has: "
                                 f"{', '.join(sorted(_SIM_ATTRIBUTES))})") from None

    def reset(self):
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return "<CUDA device 0 'gpureplace CPU simulator'>"


def get_current_device():
    if _simulated():
        return SimDevice()
    return Device(_cp().cuda.runtime.getDevice())


def select_device(device_id):
    """Make GPU ``device_id`` current for this thread; returns it."""
    if _simulated():
        if device_id != 0:
            raise ValueError(f"select_device({device_id}): the simulator has one device, 0")
        return SimDevice()
    n = _device.device_count()
    if not 0 <= device_id < n:
        raise ValueError(f"select_device({device_id}): there are {n} GPU(s)")
    _cp().cuda.Device(device_id).use()
    return Device(device_id)


class _GPUs:
    """``cuda.gpus``: the GPUs, indexable and iterable; ``gpus.current`` is the current one."""

    def _count(self):
        return 1 if _simulated() else _device.device_count()

    def __len__(self):
        return self._count()

    def __getitem__(self, i):
        n = self._count()
        if not -n <= i < n:
            raise IndexError(f"gpus[{i}]: there are {n} GPU(s)")
        return SimDevice() if _simulated() else Device(i % n)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def current(self):
        return get_current_device()

    def __repr__(self):
        return f"<gpureplace.cuda.gpus: {list(self)!r}>"


gpus = _GPUs()


def list_devices():
    return list(gpus)


MemoryInfo = namedtuple("MemoryInfo", "free total")


class _Context:
    """``cuda.current_context()``: the current device's context (memory information,
    synchronisation)."""

    def __init__(self, dev):
        self.device = dev

    def get_memory_info(self):
        if _simulated():
            return MemoryInfo(0, 0)
        with _cp().cuda.Device(self.device.id):
            free, total = _cp().cuda.runtime.memGetInfo()
        return MemoryInfo(free, total)

    def synchronize(self):
        if not _simulated():
            with _cp().cuda.Device(self.device.id):
                _cp().cuda.runtime.deviceSynchronize()

    def reset(self):
        self.device.reset()

    def __repr__(self):
        return f"<CUDA context on {self.device!r}>"


def current_context(devnum=None):
    dev = get_current_device() if devnum is None else gpus[devnum]
    return _Context(dev)


def close():
    """Wait for the current device and release CuPy's cached device memory (the context itself
    stays: CuPy and other libraries share it)."""
    if not _simulated():
        get_current_device().reset()


def detect():
    """Print the GPUs found; True when there is at least one."""
    if _simulated():
        print("No CUDA GPU found: kernels run in gpureplace's CPU simulator")
        return False
    n = _device.device_count()
    print(f"Found {n} CUDA device(s)")
    for dev in gpus:
        cc = dev.compute_capability
        print(f"id {dev.id} {dev.name!r:>30}  compute capability {cc[0]}.{cc[1]}")
    return n > 0


@contextlib.contextmanager
def defer_cleanup():
    """numba-cuda delays freeing device memory inside this block; CuPy frees an array when its
    last reference goes, in stream order, so there is nothing to defer."""
    yield


def profile_start():
    if not _simulated():
        _cp().cuda.runtime.profilerStart()


def profile_stop():
    if not _simulated():
        _cp().cuda.runtime.profilerStop()


@contextlib.contextmanager
def profiling():
    profile_start()
    try:
        yield
    finally:
        profile_stop()


def is_float16_supported():
    return True


class _DeviceArrayNamespace:
    """``cuda.devicearray``: ``DeviceNDArray`` (CuPy's subclass, or the simulator's) and
    ``is_cuda_ndarray``."""

    @property
    def DeviceNDArray(self):  # noqa: N802 - numba-cuda's name
        return SimDeviceNDArray if _simulated() else _device_array_class()

    @staticmethod
    def is_cuda_ndarray(obj):
        return is_cuda_array(obj)


devicearray = _DeviceArrayNamespace()
