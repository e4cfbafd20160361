"""The host API's twins in the simulator (``gpureplace.cuda`` under the simulator backend): device
arrays are host NumPy arrays with numba-cuda's methods, streams and events stand-ins whose timings
come from the host clock, one simulated device.  ``hostapi`` calls these when the simulator is
the backend."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import functools
import difflib
import itertools
import os
import threading
import time
import warnings

import numpy as np

from .. import arch
from ..errors import CudaDriverError, LaunchError
from ..jit import graphs
from ..hostapi.arrays import (NumbaArrayMethods, RecordMethods, array_interface, as_shape,
                              copy_source, host_target, is_record, not_a_device_array,
                              record_copy, span, squeeze_axes)
from ..hostapi.devices import NumberFormats
from ..hostapi.streams import checked_stream
from ..runtime import arguments
from ..runtime.launch import SIMULATED_DEVICE
from ..runtime.streams import interface_stream_problem
from .arrays import (allocation_around, null_data_problem,
                     remember_allocation, view_described)

try:
    from numpy.lib.array_utils import byte_bounds as _byte_bounds
except ImportError:                      # NumPy < 2
    _byte_bounds = np.byte_bounds


#: The handles of the simulator's default streams, the CUDA driver's ``CU_STREAM_LEGACY`` and
#: ``CU_STREAM_PER_THREAD`` (numba-cuda's ``legacy_default_stream()`` and
#: ``per_thread_default_stream()`` have them): ``SimStream(LEGACY_DEFAULT_STREAM)``.
LEGACY_DEFAULT_STREAM = 1
PER_THREAD_DEFAULT_STREAM = 2

#: Fake handles of the simulator's own streams (``SimStream()``): distinct, non-zero, never 1 or
#: 2, aligned as a driver's ``CUstream`` pointers are.
_stream_handles = itertools.count(0x5100_0000, 0x10)


class _Handle(ctypes.c_void_p):
    """A stream's ``handle``: a ``ctypes.c_void_p`` that ``int()`` also converts."""

    def __int__(self):
        return self.value or 0


class SimStream:
    """A stream under the simulator: launches and copies run at once, in the calling thread;
    callbacks (``add_callback``) run in a thread of their own, in order after the work queued
    before them (all of it done already), and ``synchronize()`` waits for them.

    ``SimStream()`` is a new stream with a handle of its own (a fake ``cudaStream_t``, distinct
    and non-zero, which a ``__cuda_array_interface__`` of an array made on it names);
    ``SimStream(handle)`` one over ``handle`` (``cuda.external_stream``, the default streams
    ``LEGACY_DEFAULT_STREAM`` and ``PER_THREAD_DEFAULT_STREAM``).  Streams of one handle are one
    stream: callbacks added through either run in one order."""

    __slots__ = ("ptr", "__weakref__")     # (numba-cuda code finalizes streams: weakref)
    simulated = True

    def __init__(self, ptr=None):
        self.ptr = next(_stream_handles) if ptr is None else ptr

    @property
    def handle(self):
        return _Handle(self.ptr)

    def __int__(self):
        return self.ptr

    def __cuda_stream__(self):
        """The CUDA stream protocol: ``(0, handle)``."""
        return (0, self.ptr)

    def synchronize(self):
        """Wait for the callbacks added to the stream so far (all else has run already)."""
        wait_for_callbacks(self.ptr)

    def query(self):
        """True when everything queued on the stream has finished: its callbacks too."""
        return not _callbacks.pending.get(self.ptr)

    @contextlib.contextmanager
    def auto_synchronize(self):
        with self:
            yield self
        self.synchronize()

    def add_callback(self, callback, arg=None):
        """Call ``callback(stream, status, arg)`` (status 0) in a thread of its own, as the
        driver does, once the work queued on the stream so far has finished (in the simulator
        it has, but for the callbacks added before this one, which run first).  An exception it
        raises is a warning ``Exception in stream callback: ...``, as numba-cuda says it;
        ``add_callback`` itself returns at once."""
        _callbacks.add(self, callback, arg)

    def async_done(self):
        from ..runtime.streams import when_done
        return when_done(self, self.add_callback)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        return f"<gpureplace.cuda.Stream {self.ptr:#x} (simulated)>"


class _Callbacks:
    """The simulator's stand-in for the driver thread that runs stream callbacks: one worker
    thread while any are queued, running them in the order they were added (one stream's after
    another's, as the driver's one thread runs them), so that a callback never runs in the
    thread that added it (which may hold a lock it takes)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.queue = collections.deque()        # (stream, callback, arg)
        self.pending = {}                       # stream handle -> callbacks not finished
        self.worker = None                      # the thread running them, while there is one

    def add(self, stream, callback, arg):
        with self.cond:
            self.queue.append((stream, callback, arg))
            self.pending[stream.ptr] = self.pending.get(stream.ptr, 0) + 1
            if self.worker is None:
                self.worker = threading.Thread(target=self._work, daemon=True,
                                               name="gpureplace-sim-stream-callbacks")
                self.worker.start()

    def _work(self):
        while True:
            with self.cond:
                if not self.queue:
                    self.worker = None
                    self.cond.notify_all()
                    return
                stream, callback, arg = self.queue.popleft()
            try:
                callback(stream, 0, arg)
            except Exception as exc:
                # (numba-cuda's Stream._stream_callback: the driver's thread goes on)
                warnings.warn(f"Exception in stream callback: {exc}")
            finally:
                with self.cond:
                    left = self.pending[stream.ptr] - 1
                    if left:
                        self.pending[stream.ptr] = left
                    else:
                        del self.pending[stream.ptr]
                    self.cond.notify_all()

    def wait(self, handle=None):
        """Until the callbacks of the stream ``handle`` (None: of every stream) have run; at
        once in a callback itself, which no wait can end (the GPU refuses CUDA calls there)."""
        if not self.pending or threading.current_thread() is self.worker:
            return
        with self.cond:
            while self.pending.get(handle) if handle is not None else self.pending:
                self.cond.wait(0.05)          # (short waits: an interrupt is seen)


_callbacks = _Callbacks()


def _callbacks_after_fork():
    # (the parent's callback thread is not in a forked child, nor its queue's work)
    global _callbacks
    _callbacks = _Callbacks()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_callbacks_after_fork)


def wait_for_callbacks(handle=None):
    """Wait for the stream callbacks queued so far on the stream ``handle`` (an int; None:
    every stream's, as a device synchronisation waits for them), as ``synchronize`` does."""
    _callbacks.wait(handle)


def _in_order(stream):
    """Before work on ``stream`` (a stream object or handle given to a host API call): the
    callbacks queued on it before, which a stream runs first."""
    if stream and _callbacks.pending:
        _callbacks.wait(getattr(stream, "ptr", stream))


class SimEvent:
    """An event under the simulator: recording reads the host clock."""

    __slots__ = ("timing", "_t")

    def __init__(self, timing=True):
        self.timing, self._t = timing, None

    def record(self, stream=0):
        checked_stream(stream, "Event.record")
        self._t = time.perf_counter()

    def synchronize(self):
        return None

    def wait(self, stream=0):
        checked_stream(stream, "Event.wait")
        return None

    def query(self):
        return True

    def elapsed_time(self, evtend):
        if not (self.timing and evtend.timing):
            raise CudaDriverError("elapsed_time needs two events created with timing=True")
        if self._t is None or evtend._t is None:
            raise CudaDriverError("elapsed_time needs both events recorded")
        return (evtend._t - self._t) * 1e3


#: Values ``d[key] = value`` stores as they are (no ``__cuda_array_interface__`` to convert)
_PLAIN_VALUES = (np.ndarray, np.generic, int, float, complex)


class SimDeviceNDArray(NumbaArrayMethods, np.ndarray):
    """A "device" array under the simulator: host memory with numba-cuda's methods.

    Being a NumPy array, ``np.asarray(d)`` of it is a view of the simulated device memory,
    where numba-cuda's ``DeviceNDArray.__array__`` copies to the host: NumPy never asks an
    ndarray subclass for ``__array__``.  A snapshot that later launches must not change is
    ``d.copy_to_host()``."""

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
        checked_stream(stream, "bind")
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
        if graphs.capturing and not isinstance(out, np.ndarray):
            # an element copied to the host (numba-cuda's DeviceNDArray reads it so): a host
            # synchronisation, which a capture refuses, before what it captured ever ran
            graphs.refuse_host_sync(f"reading an element of a device array (d[{key!r}])")
        return out

    def getitem(self, key, stream=0):
        """``self[key]`` (numba-cuda's ``getitem``): a view (an array, or a record's
        ``DeviceRecord``) bound to ``stream``, or an element's value."""
        checked_stream(stream, "getitem")
        out = self[key]
        if isinstance(out, SimDeviceNDArray) and stream:
            out._gr_stream = stream
        return out

    def setitem(self, key, value, stream=0):
        """``self[key] = value`` (numba-cuda's ``setitem``): a scalar, a host array or a device
        array, broadcast as NumPy broadcasts, on ``stream`` (or this array's).  On the stream
        of a graph capture in progress (0: the current one) it is captured, as a GPU captures
        it: checked now, done at each replay (a device or host array given is read then; a
        list or a scalar is taken now)."""
        checked_stream(stream, "setitem")
        if hasattr(value, "__cuda_array_interface__") and not isinstance(value, np.ndarray):
            value = as_cuda_array(value)
        stream = stream or self.stream
        if graphs.capturing and not stream and graphs.recorder() is not None:
            if not isinstance(value, np.ndarray) and not np.isscalar(value):
                value = np.array(value)           # (a list: its values now)
            _check_assignment(self, key, value)
            if graphs.deferred("setitem", lambda: np.ndarray.__setitem__(self, key, value)):
                return
        _in_order(stream)
        np.ndarray.__setitem__(self, key, value)

    def __setitem__(self, key, value):
        # ``d[key] = value``: numba-cuda's setitem (on the array's stream), captured as it is;
        # a number or an array stored with no capture and no stream callback queued (a
        # kernel's store to a global device array) is stored at once
        if graphs.capturing or _callbacks.pending or not isinstance(value, _PLAIN_VALUES):
            return self.setitem(key, value)
        np.ndarray.__setitem__(self, key, value)

    def __iter__(self):
        if self.ndim and self.dtype.names is not None:      # (DeviceRecords, as __getitem__)
            return (self[i] for i in range(self.shape[0]))
        if graphs.capturing and self.ndim == 1 and self.shape[0]:
            graphs.refuse_host_sync("iterating over the elements of a device array")
        return super().__iter__()

    def item(self, *args):
        if graphs.capturing:
            graphs.refuse_host_sync("d.item()")
        return super().item(*args)

    def tolist(self):
        if graphs.capturing:
            graphs.refuse_host_sync("d.tolist()")
        return super().tolist()

    def __repr__(self):
        # (NumPy's printer reads each element with a[i, j]: a DeviceRecord here, which it
        # cannot print as a structured scalar; the plain view's elements are NumPy's)
        if not (self.ndim and self.dtype.names is not None):
            return super().__repr__()
        name, text = type(self).__name__, repr(self.view(np.ndarray))
        return name + text[len("array"):].replace("\n" + " " * len("array("),
                                                   "\n" + " " * (len(name) + 1))

    def __str__(self):
        if not (self.ndim and self.dtype.names is not None):
            return super().__str__()
        return str(self.view(np.ndarray))

    def squeeze(self, axis=None, stream=0):
        """A view without the axes of length 1 (all of them, or ``axis``: an int or a tuple of
        ints, each of length 1), bound to ``stream`` or this array's stream."""
        checked_stream(stream, "squeeze")
        out = np.ndarray.squeeze(self, squeeze_axes(self.shape, axis)).view(SimDeviceNDArray)
        stream = stream or self.stream
        if stream:
            out._gr_stream = stream
        return out

    def copy_to_host(self, ary=None, stream=0):
        """The elements in a new host array, or written into ``ary``: a NumPy array of the same
        dtype and shape, but for axes of length 1 (numba-cuda's ``check_array_compatibility``:
        TypeError for another dtype, ValueError for another shape)."""
        graphs.refuse_host_sync("copy_to_host()")
        checked_stream(stream, "copy_to_host")
        _in_order(stream)
        if ary is None:
            return np.array(self, copy=True, order="K").view(np.ndarray)
        host_target(self, ary)
        np.copyto(as_shape(ary, self.shape), self.view(np.ndarray))
        return ary

    def copy_to_device(self, ary, stream=0):
        """Fill the array from ``ary`` (host or device), refused as numba-cuda refuses it (see
        ``hostapi.arrays.copy_source``); an empty ``ary`` copies nothing.  On the stream of a
        graph capture in progress (0: the current one) the copy is captured, as a GPU captures
        it: checked now, made at each replay (reading an array ``ary`` then; a list now)."""
        checked_stream(stream, "copy_to_device")
        if not stream and not isinstance(ary, SimDeviceNDArray) and \
                not hasattr(ary, "__cuda_array_interface__"):
            graphs.refuse_host_copy("d.copy_to_device(host data)")     # (as the GPU refuses it)
        host = copy_source(self, ary)           # (as the GPU's: no dtype conversion)
        if host is None:
            return
        if graphs.capturing and not stream and graphs.deferred(
                "copy_to_device", lambda: np.ndarray.__setitem__(self, Ellipsis, host)):
            return
        _in_order(stream)
        np.ndarray.__setitem__(self, Ellipsis, host)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # NumPy's operations on the plain arrays; a result in a given output array (``d += 1``,
        # ``np.add(d, 1, out=d)``) is that array, any other a plain (host) array, as
        # __array_wrap__ says.  Into device arrays while this thread captures a graph on their
        # stream, the operation is captured: a GPU runs it (CuPy's kernel) on the capturing
        # stream, so it runs at each replay in order with the launches, never at the capture
        # (checked now, as CuPy checks it at its call).
        out = kwargs.get("out")
        args = tuple(_plain(x) for x in inputs)
        if out is not None:
            kwargs["out"] = tuple(_plain(o) for o in out)
        run = functools.partial(getattr(ufunc, method), *args, **kwargs)
        if out and graphs.capturing and method == "__call__" and \
                all(isinstance(o, SimDeviceNDArray) and not o.stream for o in out) and \
                graphs.recorder() is not None:
            _check_ufunc(ufunc, args, kwargs)
            if graphs.deferred(f"np.{ufunc.__name__}(..., out=d)", run):
                return out[0] if len(out) == 1 else out
        result = run()
        if out is not None:
            return out[0] if len(out) == 1 else out
        return result

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        # (Ufuncs do not come here: __array_ufunc__ runs them on the plain arrays.)  A result
        # another NumPy function made from simulated device arrays is a plain array (a host
        # array, as numba-cuda's DeviceNDArray gives NumPy); a device array it hands back as
        # the result stays what it is: a device array (or mapped memory) that kernels take.
        if isinstance(obj, SimDeviceNDArray):
            return obj
        if return_scalar:
            return obj[()]
        return np.asarray(obj)

    @property
    def __cuda_array_interface__(self):
        # The simulator's "device" is the host, so the address is the host memory's (as in
        # numba's simulator): code that hands raw pointers to kernels runs there too.  Version
        # 3: it names the array's stream (its handle), as the GPU's arrays do.
        return array_interface(self, self.ctypes.data, self.stream)


def _plain(x):
    """A simulated device array as the plain NumPy array of its memory; anything else as it is."""
    return x.view(np.ndarray) if isinstance(x, SimDeviceNDArray) else x


def _scratch(a, writeable=False):
    """An array of ``a``'s shape and dtype over one element (no memory of its size)."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, a.dtype), a.shape, (0,) * a.ndim,
                                           writeable=writeable)


def _check_ufunc(ufunc, args, kwargs):
    """Refuse now what ``ufunc(*args, **kwargs)`` would refuse (shapes that do not broadcast, a
    result its output cannot take), without touching the arrays: run on scratch arrays."""
    args = tuple(_scratch(a) if isinstance(a, np.ndarray) else a for a in args)
    checked = dict(kwargs, out=tuple(_scratch(o, True) for o in kwargs["out"]))
    with np.errstate(all="ignore"):
        ufunc(*args, **checked)


def _check_assignment(arr, key, value):
    """Refuse now what ``arr[key] = value`` would refuse (an index out of bounds, a shape that
    does not broadcast, a value the dtype cannot take), without writing: a captured fill is
    refused at its call, as a GPU's is, not at the replay."""
    target = np.ndarray.__getitem__(arr.view(np.ndarray), key)
    dtype = target.dtype if isinstance(target, (np.ndarray, np.generic)) else arr.dtype
    shape = np.shape(target)
    # (one element written over and over: no memory of the target's size)
    scratch = np.lib.stride_tricks.as_strided(np.empty(1, dtype), shape, (0,) * len(shape),
                                              writeable=True)
    scratch[...] = value


def _array_key(arr):
    """A simulated device array as a kernel argument (its type key and values), where the launch
    path asks for one: as its ``__cuda_array_interface__`` describes it, without the stream it
    names, which is the simulator's (no GPU stream to wait for; the GPU's own device arrays are
    not waited for either)."""
    return arguments.value_key(_Described(array_interface(arr, arr.ctypes.data)))


class _Described:
    """Memory described by a ``__cuda_array_interface__`` dictionary (that names no stream)."""

    __slots__ = ("__cuda_array_interface__",)

    def __init__(self, desc):
        self.__cuda_array_interface__ = desc


#: The simulated device's attributes, under numba-cuda's names (the driver's
#: ``CU_DEVICE_ATTRIBUTE_*``).  It models one multiprocessor of an sm_90 GPU (an H100 / H200): the
#: limits a launch checks (the block and grid dimensions, shared memory: ``arch``'s tables) and
#: what code reads to size its work are an H100's; it has no clock (CLOCK_RATE and
#: MEMORY_CLOCK_RATE 0: timings are the host's) and sits on no PCI bus (0).
_SIM_ATTRIBUTES = {
    "COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0,
    "MULTIPROCESSOR_COUNT": SIMULATED_DEVICE["MULTIPROCESSOR_COUNT"], "WARP_SIZE": 32,
    "MAX_THREADS_PER_BLOCK": 1024, "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024,
    "MAX_BLOCK_DIM_Z": 64, "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535,
    "MAX_GRID_DIM_Z": 65535,
    "MAX_THREADS_PER_MULTIPROCESSOR": 2048, "MAX_BLOCKS_PER_MULTIPROCESSOR": 32,
    "MAX_REGISTERS_PER_BLOCK": 65536, "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536,
    "MAX_SHARED_MEMORY_PER_BLOCK": arch.STATIC_SHARED_BYTES,
    "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": arch.shared_opt_in_bytes("sm_90"),
    "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR":
        SIMULATED_DEVICE["MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"],
    "RESERVED_SHARED_MEMORY_PER_BLOCK": SIMULATED_DEVICE["RESERVED_SHARED_MEMORY_PER_BLOCK"],
    "TOTAL_CONSTANT_MEMORY": arch.CONST_BYTES, "L2_CACHE_SIZE": 50 * 1024 * 1024,
    "GLOBAL_MEMORY_BUS_WIDTH": 5120, "MAX_PITCH": 2**31 - 1,
    "CLOCK_RATE": 0, "MEMORY_CLOCK_RATE": 0,
    "CONCURRENT_KERNELS": 1, "UNIFIED_ADDRESSING": 1, "COOPERATIVE_LAUNCH": 1,
    "CAN_MAP_HOST_MEMORY": 1, "MANAGED_MEMORY": 1, "CONCURRENT_MANAGED_ACCESS": 1,
    "STREAM_PRIORITIES_SUPPORTED": 1, "COMPUTE_PREEMPTION_SUPPORTED": 1,
    "GLOBAL_L1_CACHE_SUPPORTED": 1, "LOCAL_L1_CACHE_SUPPORTED": 1,
    "SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO": 2,
    "INTEGRATED": 0, "KERNEL_EXEC_TIMEOUT": 0, "COMPUTE_MODE": 0, "TCC_DRIVER": 0,
    "ECC_ENABLED": 0, "MULTI_GPU_BOARD": 0, "MULTI_GPU_BOARD_GROUP_ID": 0,
    "PCI_BUS_ID": 0, "PCI_DEVICE_ID": 0, "PCI_DOMAIN_ID": 0,
}


def _attribute_key(name):
    # (as hostapi.devices' GPU Device: MAX_THREADS_PER_MULTI_PROCESSOR, the runtime API's
    # spelling, is MAX_THREADS_PER_MULTIPROCESSOR)
    return name.replace("_", "").lower()


_SIM_ATTRIBUTE_KEYS = {_attribute_key(k): v for k, v in _SIM_ATTRIBUTES.items()}


class SimDevice(NumberFormats):
    """The simulator's stand-in device: one device, 0, of compute capability 9.0, with the
    driver's attributes (``_SIM_ATTRIBUTES``) and numba-cuda simulator's ``uuid``."""

    id = 0
    name = "gpureplace CPU simulator"
    compute_capability = (9, 0)
    uuid = "GPU-00000000-0000-0000-0000-000000000000"

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        value = _SIM_ATTRIBUTE_KEYS.get(_attribute_key(name)) if name.isupper() else None
        if value is None:
            close = difflib.get_close_matches(name.upper(), _SIM_ATTRIBUTES, n=3)
            hint = (f"did you mean {' or '.join(close)}?" if close else
                    f"it has {', '.join(sorted(_SIM_ATTRIBUTES))}")
            raise AttributeError(f"the simulated device has no attribute {name!r} (device "
                                 f"attributes are the driver's, upper case): {hint}")
        return value

    def get_device_identity(self):
        """numba-cuda's ``Device.get_device_identity()``: where the device sits on the PCI
        bus (0, 0, 0: nowhere)."""
        return {"pci_domain_id": self.PCI_DOMAIN_ID, "pci_bus_id": self.PCI_BUS_ID,
                "pci_device_id": self.PCI_DEVICE_ID}

    def __eq__(self, other):
        return isinstance(other, SimDevice)      # (there is one)

    def __hash__(self):
        return hash(("SimDevice", 0))

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


arguments.register_handler(SimDeviceNDArray, _array_key)
arguments.register_handler(SimDeviceRecord, _array_key)


def _bound(arr, stream):
    """``arr`` belonging to ``stream`` (its ``.stream``, as numba-cuda's arrays made with a
    ``stream=`` report it); 0 or None: none."""
    if stream:
        arr._gr_stream = stream
    return arr


def to_device(obj, copy=True, stream=0):
    if isinstance(obj, SimDeviceNDArray):
        return obj
    if copy and not stream and not hasattr(obj, "__cuda_array_interface__"):
        graphs.refuse_host_copy("cuda.to_device(host data)")      # (as the GPU refuses it)
    _in_order(stream)
    if is_record(obj):
        rec = record_copy(obj) if copy else np.empty((), obj.dtype)
        return _bound(rec.view(SimDeviceRecord), stream)
    host = np.asarray(obj)
    arr = np.array(host, copy=True, order="K") if copy else np.empty_like(host, order="K")
    return _bound(arr.view(SimDeviceNDArray), stream)


def device_array(shape, dtype, strides, order, stream=0):
    if strides is None:
        return _bound(np.empty(shape, dtype, order=order).view(SimDeviceNDArray), stream)
    buf = np.empty(span(shape, strides, dtype.itemsize), np.uint8)
    return _bound(np.ndarray(shape, dtype, buffer=buf, strides=strides).view(SimDeviceNDArray),
                  stream)


def as_cuda_array(obj, host_ok=False):
    """A simulated device array view of ``obj``: a simulated device array, a view of one's
    memory, or a ``__cuda_array_interface__`` describing such memory.  A host NumPy array is
    refused, as on the GPU (but for gpureplace's own callers, ``host_ok``: in the simulator their
    "device" buffers are host arrays)."""
    if isinstance(obj, SimDeviceNDArray):
        return obj.view(type(obj))
    if isinstance(obj, np.ndarray):
        if host_ok or in_simulated_memory(obj):
            return obj.view(SimDeviceNDArray)
        raise not_a_device_array(obj)
    desc = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(desc, dict):
        # (a simulated device array's interface, e.g. given to from_cuda_array_interface:
        # a view of the same host memory)
        if desc.get("mask") is not None:
            raise NotImplementedError("as_cuda_array: Masked arrays are not supported (the "
                                      "__cuda_array_interface__ has a 'mask')")
        # (refused as the GPU's as_cuda_array refuses it, which waits for the stream named)
        problem = interface_stream_problem(desc)
        if problem is not None:
            raise ValueError(problem)
        problem = null_data_problem(desc)
        if problem is not None:
            raise ValueError(f"as_cuda_array: the __cuda_array_interface__ given is one "
                             f"{problem}")
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


def in_simulated_memory(arr):
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
    if host is not None and host.size and in_simulated_memory(host):
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


def mapped_array(shape, dtype, strides, order, stream=0):
    """Mapped and managed memory alike: host memory is the simulated device's."""
    return _bound(pinned_array(shape, dtype, strides, order).view(SimDeviceNDArray), stream)


def mapped_views(arrays):
    return [np.asarray(a).view(SimDeviceNDArray) for a in arrays]


def select_device(number, device_id):
    """``cuda.select_device(device_id)``, whose device number is ``number``."""
    if number != 0:
        raise ValueError(f"select_device({device_id!r}): the simulator has one device, 0")
    return SimDevice()
