"""The host API's twins in the simulator (``gpureplace.cuda`` under the simulator backend): device
arrays are host NumPy arrays with numba-cuda's methods, streams and events stand-ins whose timings
come from the host clock, one simulated device.  ``hostapi`` calls these when the simulator is
the backend."""

from __future__ import annotations

import contextlib
import ctypes
import time

import numpy as np

from ..hostapi.arrays import (NumbaArrayMethods, RecordMethods, array_interface, copy_source,
                              is_record, record_copy, span)
from .arrays import remember_allocation, view_described


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

    def copy_to_host(self, ary=None, stream=0):
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


def as_cuda_array(obj):
    if isinstance(obj, np.ndarray):
        return obj.view(SimDeviceNDArray)
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
