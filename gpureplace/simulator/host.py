"""The host API's twins in the simulator (``gpureplace.cuda`` under the simulator backend): device
arrays are host NumPy arrays with numba-cuda's methods, streams and events stand-ins whose timings
come from the host clock, one simulated device.  ``hostapi`` calls these when the simulator is
the backend."""

from __future__ import annotations

import contextlib
import ctypes
import time

import numpy as np

from ..errors import LaunchError
from ..hostapi.arrays import (NumbaArrayMethods, RecordMethods, array_interface, copy_source,
                              is_record, not_a_device_array, record_copy, span, squeeze_axes)
from .arrays import allocation_around, remember_allocation, view_described

try:
    from numpy.lib.array_utils import byte_bounds as _byte_bounds
except ImportError:                      # NumPy < 2
    _byte_bounds = np.byte_bounds


class SimStream:
    """A stream under the simulator: launches run at once, so there is nothing to wait for."""

    __slots__ = ("ptr",)
    simulated = True

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

    def add_callback(self, callback, arg=None):
        callback(self, 0, arg)               # (the launches before it have all run)

    def async_done(self):
        from ..runtime.streams import when_done
        return when_done(self, self.add_callback)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return "<gpureplace.cuda.Stream (simulated)>"


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


class SimDeviceNDArray(NumbaArrayMethods, np.ndarray):
    """A "device" array under the simulator: host memory with numba-cuda's methods."""

    def __array_finalize__(self, obj):
        # pointers into it that kernels are given are bounds-checked
        remember_allocation(self)
        stream = getattr(obj, "_gr_stream", 0)       # a view keeps the array's stream
        if stream:
            self._gr_stream = stream

    @property
    def stream(self):
        """The stream the array is bound to (``bind``), 0 for none."""
        return self.__dict__.get("_gr_stream", 0)

    def bind(self, stream=0):
        """A view of the array bound to ``stream`` (numba-cuda's ``bind``); under the simulator
        every operation runs at once, whatever its stream."""
        out = self.view()
        out._gr_stream = stream or 0
        return out

    @property
    def device_ctypes_pointer(self):
        """The address of the elements (host memory: the simulator's device memory)."""
        return ctypes.c_void_p(self.ctypes.data)

    def __getitem__(self, key):
        out = super().__getitem__(key)
        if self.ndim and self.dtype.names is not None and not isinstance(key, str) and (
                isinstance(out, np.void) or isinstance(out, np.ndarray) and out.ndim == 0):
            # an element of a record array: numba-cuda's DeviceRecord, a view of the element
            # (kernels given it write into this array)
            if isinstance(out, np.void):
                out = super().__getitem__((*(key if isinstance(key, tuple) else (key,)),
                                           Ellipsis))
            return out.view(SimDeviceRecord)
        return out

    def getitem(self, key, stream=0):
        """``self[key]`` (numba-cuda's ``getitem``): a view (an array, or a record's
        ``DeviceRecord``) bound to ``stream``, or an element's value."""
        out = self[key]
        if isinstance(out, SimDeviceNDArray) and stream:
            out._gr_stream = stream
        return out

    def setitem(self, key, value, stream=0):
        """``self[key] = value`` (numba-cuda's ``setitem``): a scalar, a host array or a device
        array, broadcast as NumPy broadcasts."""
        if hasattr(value, "__cuda_array_interface__") and not isinstance(value, np.ndarray):
            value = as_cuda_array(value)
        np.ndarray.__setitem__(self, key, value)

    def __iter__(self):
        if self.ndim and self.dtype.names is not None:      # (DeviceRecords, as __getitem__)
            return (self[i] for i in range(self.shape[0]))
        return super().__iter__()

    def squeeze(self, axis=None, stream=0):
        """A view without the axes of length 1 (all of them, or ``axis``: an int or a tuple of
        ints, each of length 1), bound to ``stream`` or this array's stream."""
        out = np.ndarray.squeeze(self, squeeze_axes(self.shape, axis)).view(SimDeviceNDArray)
        stream = stream or self.stream
        if stream:
            out._gr_stream = stream
        return out

    def copy_to_host(self, ary=None, stream=0):
        from ..jit.graphs import refuse_host_sync
        refuse_host_sync("copy_to_host()")
        if ary is None:
            return np.array(self, copy=True, order="K").view(np.ndarray)
        if ary.shape != self.shape or ary.dtype != self.dtype:
            raise ValueError(f"copy_to_host(ary): ary must be a NumPy array of shape "
                             f"{self.shape} and dtype {self.dtype}")
        ary[...] = self
        return ary

    def copy_to_device(self, ary, stream=0):
        self[...] = copy_source(self, ary)      # (as the GPU's: no dtype conversion)

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        # results of NumPy operations on simulated device arrays are plain arrays
        if return_scalar:
            return obj[()]
        return np.asarray(obj)

    @property
    def __cuda_array_interface__(self):
        # The simulator's "device" is the host, so the address is the host memory's (as in
        # numba's simulator): code that hands raw pointers to kernels runs there too.
        return array_interface(self, self.ctypes.data)


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


class SimDeviceRecord(RecordMethods, SimDeviceNDArray):
    """``cuda.to_device(record)`` under the simulator (hostapi's ``DeviceRecord``)."""


def to_device(obj, copy=True):
    if isinstance(obj, SimDeviceNDArray):
        return obj
    if is_record(obj):
        return (record_copy(obj) if copy else np.empty((), obj.dtype)).view(SimDeviceRecord)
    host = np.asarray(obj)
    arr = np.array(host, copy=True, order="K") if copy else np.empty_like(host, order="K")
    return arr.view(SimDeviceNDArray)


def device_array(shape, dtype, strides, order):
    if strides is None:
        return np.empty(shape, dtype, order=order).view(SimDeviceNDArray)
    buf = np.empty(span(shape, strides, dtype.itemsize), np.uint8)
    return np.ndarray(shape, dtype, buffer=buf, strides=strides).view(SimDeviceNDArray)


def as_cuda_array(obj, host_ok=False):
    """A simulated device array view of ``obj``: a simulated device array, a view of one's
    memory, or a ``__cuda_array_interface__`` describing such memory.  A host NumPy array is
    refused, as on the GPU (but for gpureplace's own callers, ``host_ok``: in the simulator their
    "device" buffers are host arrays)."""
    if isinstance(obj, SimDeviceNDArray):
        return obj.view(type(obj))
    if isinstance(obj, np.ndarray):
        if host_ok or _in_simulated_memory(obj):
            return obj.view(SimDeviceNDArray)
        raise not_a_device_array(obj)
    desc = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(desc, dict):
        # (a simulated device array's interface, e.g. given to from_cuda_array_interface:
        # a view of the same host memory)
        if desc.get("mask") is not None:
            raise NotImplementedError("as_cuda_array: Masked arrays are not supported (the "
                                      "__cuda_array_interface__ has a 'mask')")
        view = view_described(desc, getattr(obj, "owner", None))
        if view is not None:
            return view.view(SimDeviceNDArray)
        raise TypeError(f"as_cuda_array: the simulator works on host memory; this "
                        f"__cuda_array_interface__ describes memory at {desc['data'][0]:#x} "
                        f"(shape {tuple(desc['shape'])}, typestr {desc['typestr']!r}) that is "
                        f"not all in one simulated device array (a GPU's memory is out of its "
                        f"reach)")
    raise TypeError(f"as_cuda_array: the simulator works on host memory; got "
                    f"{type(obj).__name__}")


def _in_simulated_memory(arr):
    """Whether the elements of NumPy array ``arr`` lie in a simulated device array."""
    if arr.size == 0:
        return False
    low, high = _byte_bounds(arr)
    around = allocation_around(low)
    return around is not None and high <= around[1]


def foreign_view(a, where):
    """The array a simulated launch works on for ``a`` (argument ``where``), a device array of
    another library: a view of the simulated device memory its ``__cuda_array_interface__`` or
    DLPack export describes; a CuPy array of it when its memory is a GPU's and CuPy is there
    (the launch then copies it in and out); else LaunchError."""
    from ..probe import cupy_module
    cp, name = cupy_module(), type(a).__qualname__
    desc = getattr(a, "__cuda_array_interface__", None)
    if isinstance(desc, dict):
        if desc.get("mask") is not None:
            raise LaunchError(f"{where} is a masked array ({name}: its "
                              f"__cuda_array_interface__ has a 'mask'); kernels take no masks")
        view = view_described(desc, getattr(a, "owner", None))
        if view is not None:
            return view.view(SimDeviceNDArray)
        if cp is not None:
            return cp.asarray(a)
        raise LaunchError(f"{where} is a device array ({name}) whose __cuda_array_interface__ "
                          f"describes memory at {desc['data'][0]:#x} that is not in a "
                          f"simulated device array; the simulator works on host memory (a "
                          f"GPU's is out of its reach, and CuPy, which could copy it, is not "
                          f"available)")
    try:
        kind, _ = a.__dlpack_device__()
        host = np.from_dlpack(a) if int(kind) in (1, 3) else None   # (kDLCPU, kDLCUDAHost)
    except Exception as exc:                 # (a producer NumPy cannot read: its reason)
        host, why = None, f" ({type(exc).__name__}: {exc})"
    else:
        why = f" (its DLPack device type is {int(kind)}, not the host's)"
    if host is not None and host.size and _in_simulated_memory(host):
        return host.view(SimDeviceNDArray)
    if host is None and cp is not None:
        return cp.from_dlpack(a)
    if host is not None:
        why = (" (it exports host memory outside the simulated device arrays, which a GPU "
               "launch refuses too: copy it with cuda.to_device, or pass a NumPy array)")
    raise LaunchError(f"{where} is a DLPack array ({name}) the simulator cannot take as a "
                      f"device array{why}")


def pinned_array(shape, dtype, strides, order):
    return np.empty(shape, dtype, order=order) if strides is None else np.ndarray(
        shape, dtype, buffer=np.empty(span(shape, strides, dtype.itemsize), np.uint8),
        strides=strides)


def mapped_array(shape, dtype, strides, order):
    """Mapped and managed memory alike: host memory is the simulated device's."""
    return pinned_array(shape, dtype, strides, order).view(SimDeviceNDArray)


def mapped_views(arrays):
    return [np.asarray(a).view(SimDeviceNDArray) for a in arrays]


def select_device(device_id):
    if device_id != 0:
        raise ValueError(f"select_device({device_id}): the simulator has one device, 0")
    return SimDevice()
