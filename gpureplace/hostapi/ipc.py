"""CUDA IPC: device memory of one process used by another on the same machine (numba-cuda's
``get_ipc_handle`` / ``open_ipc_array``), through CuPy's ``cudaIpc*MemHandle`` calls.

In the process that owns the memory::

    h = d_arr.get_ipc_handle()              # an IpcArrayHandle: pickle it, send it
    # or, for raw memory: cuda.current_context().get_ipc_handle(d_arr.gpu_data)

In another process (started with the 'spawn' method)::

    with h as d_view:                       # a DeviceNDArray over the same memory
        ...
    with cuda.open_ipc_array(raw_64_bytes, shape, dtype) as d_view:
        ...

A handle names a whole ``cudaMalloc`` allocation; CuPy's memory pool hands out pieces of larger
allocations, and slices and foreign arrays point into the middle of theirs, so the handle also
carries the memory's offset from the allocation's start (``cuMemGetAddressRange``).  When the
receiving device cannot reach the source device's memory (no peer access), ``open`` copies the
bytes into a new allocation instead ("staged"), as numba-cuda does.

The simulator's device arrays are this process's host memory: IPC is refused there.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys

import numpy as np

from .. import probe
from ..errors import CudaDriverError, NoDeviceError
from .arrays import as_cuda_array, device_array_class, shape_tuple
from .common import cupy, simulated
from .devices import current_context
from .streams import checked_stream, cupy_stream

IPC_HANDLE_SIZE = 64                     # sizeof(cudaIpcMemHandle_t)
_LAZY_ENABLE_PEER_ACCESS = 1             # cudaIpcMemLazyEnablePeerAccess
_CUDA_ERROR_INVALID_CONTEXT = 201

#: The handles this process made: opening one here is refused (CUDA cannot map a process's own
#: memory through IPC; numba-cuda refuses too, but only for the handle object it returned).
_made_here = set()


def require_ipc(what):
    """Refuse IPC where it cannot work: the simulator, and systems other than Linux."""
    if simulated():
        raise NoDeviceError(
            f"{what}: CUDA IPC (sharing device memory between processes) is not available in "
            f"the simulator: its device arrays are host memory of this process.  Share host "
            f"data with multiprocessing.shared_memory instead, or run on a GPU")
    if not sys.platform.startswith("linux"):
        raise OSError(f"{what}: OS does not support CUDA IPC (CUDA shares device memory "
                      f"between processes on Linux only)")


class DeviceMemory:
    """A range of device memory (numba-cuda's ``MemoryPointer``, what ``d_arr.gpu_data`` gives):
    its address ``ptr``, ``size`` in bytes, the ``owner`` that keeps it alive and the device it
    is on (``device_id``, None when unknown)."""

    __slots__ = ("ptr", "size", "owner", "device_id")

    def __init__(self, ptr, size, owner=None, device_id=None):
        self.ptr, self.size = int(ptr), int(size)
        self.owner, self.device_id = owner, device_id

    @property
    def handle(self):
        """The address (numba-cuda: ``int(memory.handle)``)."""
        return self.ptr

    device_pointer = handle

    @property
    def device_ctypes_pointer(self):
        return ctypes.c_void_p(self.ptr)

    def view(self, start, stop=None):
        """The bytes ``[start, stop)`` of this memory (kept alive by it)."""
        stop = self.size if stop is None else stop
        if not 0 <= start <= stop <= self.size:
            raise ValueError(f"view({start}, {stop}): outside the memory's {self.size} bytes")
        return DeviceMemory(self.ptr + start, stop - start, self, self.device_id)

    def __repr__(self):
        return f"<DeviceMemory 0x{self.ptr:x}, {self.size} bytes, device {self.device_id}>"


def layout_extent(shape, strides, itemsize):
    """(lowest, end) byte offsets of an array's elements from its first element: negative
    strides reach below it; (0, 0) for an empty array."""
    if any(n == 0 for n in shape):
        return 0, 0
    low = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    high = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
    return low, high + itemsize


def array_memory(arr):
    """``arr.gpu_data``: the memory a device array's elements lie in, from its lowest byte."""
    data = getattr(arr, "data", None)
    ptr = getattr(data, "ptr", None)                  # a CuPy array
    if ptr is None:
        ptr = arr.__cuda_array_interface__["data"][0]  # the simulator's (host) arrays
    low, end = layout_extent(arr.shape, arr.strides, arr.dtype.itemsize)
    return DeviceMemory(ptr + low, end - low, arr, getattr(data, "device_id", None))


def allocation_range(ptr):
    """(start, size) of the driver allocation that holds device address ``ptr``
    (``cuMemGetAddressRange``; CuPy does not bind it)."""
    lib = probe.libcuda()
    if lib is None:
        raise CudaDriverError("CUDA IPC needs the CUDA driver library (libcuda.so.1), which "
                              "could not be loaded")
    start, size = ctypes.c_uint64(), ctypes.c_size_t()

    def query():
        return lib.cuMemGetAddressRange_v2(ctypes.byref(start), ctypes.byref(size),
                                           ctypes.c_uint64(ptr))

    status = query()
    if status == _CUDA_ERROR_INVALID_CONTEXT:
        cupy().cuda.runtime.free(0)     # binds the device's primary context to this thread
        status = query()
    if status != 0:
        raise CudaDriverError(f"cuMemGetAddressRange(0x{ptr:x}) failed with CUDA error "
                              f"{status}: the address is not in device memory of this process")
    return start.value, size.value


def device_identity(devnum):
    """Where a GPU sits on the PCI bus: the same GPU in every process, whatever numbers
    ``CUDA_VISIBLE_DEVICES`` gives it (numba-cuda's ``Device.get_device_identity``)."""
    props = cupy().cuda.runtime.getDeviceProperties(devnum)
    return {"pci_domain_id": props["pciDomainID"], "pci_bus_id": props["pciBusID"],
            "pci_device_id": props["pciDeviceID"]}


def device_of_identity(identity):
    """This process's number for the GPU that ``device_identity`` described."""
    for devnum in range(probe.device_count()):
        if device_identity(devnum) == identity:
            return devnum
    raise RuntimeError(f"the GPU the IPC handle was made on ({identity}) is not visible in "
                       f"this process (CUDA_VISIBLE_DEVICES?)")


def handle_bytes(handle, what="handle"):
    """The 64 bytes of a cudaIpcMemHandle_t, from bytes, a sequence of ints (ctypes' signed
    bytes too), or an object holding them (``.reserved``, as numba-cuda's handles have)."""
    if isinstance(handle, IpcHandle):
        handle = handle.handle
    raw = getattr(handle, "reserved", handle)
    if isinstance(raw, (bytes, bytearray, memoryview)):
        data = bytes(raw)
    else:
        try:
            values = [int(b) for b in raw]
        except (TypeError, ValueError):
            raise TypeError(f"{what}: expected the {IPC_HANDLE_SIZE} bytes of a CUDA IPC "
                            f"handle (bytes, or an object with .reserved), got "
                            f"{type(handle).__name__}") from None
        if not all(-128 <= v < 256 for v in values):
            raise ValueError(f"{what}: the handle's values must be bytes (-128 to 255)")
        data = bytes(v & 0xFF for v in values)
    if len(data) != IPC_HANDLE_SIZE:
        raise ValueError(f"{what}: a CUDA IPC handle has {IPC_HANDLE_SIZE} bytes, got "
                         f"{len(data)}")
    return data


def array_layout(shape, dtype, strides, what):
    """(shape, dtype, strides) checked; strides default to C order (an int: a 1-D array's)."""
    try:
        shape = shape_tuple(shape)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: shape must be an int or a tuple of ints, got "
                        f"{shape!r}") from None
    if any(n < 0 for n in shape):
        raise ValueError(f"{what}: shape {shape} has a negative extent")
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{what}: dtype {dtype!r} is not a NumPy dtype") from None
    if strides is None:
        strides, step = [], dtype.itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= max(n, 1)
    elif isinstance(strides, (int, np.integer)):
        strides = [strides] * len(shape) if len(shape) == 1 else None
    if strides is None or len(strides) != len(shape):
        raise ValueError(f"{what}: strides must give one value per axis of shape {shape}")
    return shape, dtype, tuple(int(s) for s in strides)


def byte_offset(offset, what):
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
        raise ValueError(f"{what}: expected a byte offset >= 0, got {offset!r}")
    return int(offset)


def context_device(context, what):
    if context is None:
        context = current_context()
    devnum = getattr(getattr(context, "device", None), "id", None)
    if not isinstance(devnum, int):
        raise TypeError(f"{what}: expected a context (cuda.current_context()), got "
                        f"{type(context).__name__}")
    return devnum


class IpcMemHandle:
    """A ``cudaIpcMemHandle_t``: its 64 bytes are ``reserved``, as in numba-cuda."""

    __slots__ = ("reserved",)

    def __init__(self, reserved):
        self.reserved = handle_bytes(reserved)

    def __bytes__(self):
        return self.reserved

    def __eq__(self, other):
        return isinstance(other, IpcMemHandle) and other.reserved == self.reserved

    def __hash__(self):
        return hash(self.reserved)

    def __reduce__(self):
        return IpcMemHandle, (self.reserved,)

    def __repr__(self):
        return f"<IpcMemHandle {self.reserved[:8].hex()}...>"


class IpcHandle:
    """A CUDA IPC handle to ``size`` bytes of device memory, ``offset`` bytes into the
    allocation that ``handle`` names (numba-cuda's ``IpcHandle``).  Pickled, it keeps the
    handle, size, offset and the source GPU's identity (``source_info``); ``base``, the memory
    it was made from (kept alive by it), is None after unpickling.

    In another process ``open(context)`` gives the memory (a ``DeviceMemory``) and
    ``open_array(...)`` a device array over it; ``close()`` unmaps it."""

    def __init__(self, base, handle, size, source_info=None, offset=0):
        self.base = base
        self.handle = handle if isinstance(handle, IpcMemHandle) else IpcMemHandle(handle)
        self.size, self.offset, self.source_info = int(size), int(offset), source_info
        self._opened = None              # the mapping open() made (None: closed)

    def __reduce__(self):
        return IpcHandle, (None, self.handle, self.size, self.source_info, self.offset)

    def __repr__(self):
        return f"<IpcHandle {self.size} bytes at offset {self.offset}>"

    def _refuse_reopen(self):
        if self.base is not None or self.handle.reserved in _made_here:
            raise ValueError("opening IpcHandle from original process: CUDA IPC shares memory "
                             "with other processes; here, use the array itself")
        if self._opened is not None:
            raise ValueError("IpcHandle is already opened")

    def can_access_peer(self, context):
        """Whether the context's device reaches the source device's memory directly."""
        if self.source_info is None:
            raise RuntimeError("IPC handle doesn't have source info")
        devnum = context_device(context, "can_access_peer(context)")
        source = device_of_identity(self.source_info)
        return source == devnum or bool(cupy().cuda.runtime.deviceCanAccessPeer(devnum, source))

    def open(self, context=None):
        """Map the memory into this process, on the context's device; the memory (a
        ``DeviceMemory``).  Copies it into a new allocation when that device cannot reach the
        source device (``open_staged``)."""
        require_ipc("IpcHandle.open")
        context_device(context, "open(context)")
        self._refuse_reopen()
        if self.source_info is None or self.can_access_peer(context):
            return self.open_direct(context)
        return self.open_staged(context)

    def open_direct(self, context=None):
        """Map the memory (``cudaIpcOpenMemHandle``) on the context's device."""
        devnum = context_device(context, "open_direct(context)")
        require_ipc("IpcHandle.open")
        self._refuse_reopen()
        self._opened = self._map(devnum)
        return DeviceMemory(self._opened.ptr + self.offset, self.size, self._opened, devnum)

    def open_staged(self, context=None):
        """A copy of the memory in a new allocation on the context's device, made through the
        source device (for devices without peer access)."""
        if self.source_info is None:
            raise RuntimeError("IPC handle doesn't have source info")
        devnum = context_device(context, "open_staged(context)")
        require_ipc("IpcHandle.open_staged")
        self._refuse_reopen()
        source = device_of_identity(self.source_info)
        cp = cupy()
        mapping = self._map(source)
        try:
            with cp.cuda.Device(devnum):
                copy = cp.cuda.alloc(self.size)
            cp.cuda.runtime.memcpyPeer(copy.ptr, devnum, mapping.ptr + self.offset, source,
                                       self.size)
        finally:
            mapping.close()
        self._opened = "staged"             # (the copy is the caller's: nothing to unmap)
        return DeviceMemory(copy.ptr, self.size, copy, devnum)

    def _map(self, devnum):
        cp = cupy()
        with cp.cuda.Device(devnum):
            try:
                start = cp.cuda.runtime.ipcOpenMemHandle(self.handle.reserved,
                                                         _LAZY_ENABLE_PEER_ACCESS)
            except cp.cuda.runtime.CUDARuntimeError as exc:
                raise CudaDriverError(
                    f"IpcHandle.open: CUDA could not open the IPC handle ({exc}); was the "
                    f"memory freed, or did the process that shared it exit?") from exc
        return OpenedMapping(start, devnum)

    def open_array(self, context, shape, dtype, strides=None, offset=0):
        """``open(context)``, seen as a device array of ``shape`` and ``dtype`` starting
        ``offset`` bytes into the memory (strides: C order by default)."""
        shape, dtype, strides = array_layout(shape, dtype, strides, "open_array")
        offset = byte_offset(offset, "open_array(offset)")
        low, end = layout_extent(shape, strides, dtype.itemsize)
        if offset + end - low > self.size:
            raise ValueError(f"open_array: an array of shape {shape}, strides {strides} and "
                             f"dtype {dtype} needs {end - low} bytes from offset {offset}; "
                             f"the shared memory has {self.size}")
        memory = self.open(context)
        try:
            return array_over(memory, shape, dtype, strides, offset - low)
        except BaseException:
            self.close()
            raise

    def close(self):
        """Unmap the memory ``open`` mapped: arrays over it must not be used afterwards."""
        if self._opened is None:
            raise ValueError("IpcHandle not opened")
        opened, self._opened = self._opened, None
        if isinstance(opened, OpenedMapping):
            opened.close()


class OpenedMapping:
    """Memory of another process mapped into this one (``cudaIpcOpenMemHandle``)."""

    def __init__(self, ptr, device_id):
        self.ptr, self.device_id = ptr, device_id

    def close(self):
        rt = cupy().cuda.runtime
        with cupy().cuda.Device(self.device_id):
            rt.deviceSynchronize()          # nothing queued may touch the memory afterwards
            rt.ipcCloseMemHandle(self.ptr)


def array_over(memory, shape, dtype, strides, first):
    """A DeviceNDArray over ``memory`` (kept alive by it), its first element ``first`` bytes
    in."""
    cp = cupy()
    mem = cp.cuda.UnownedMemory(memory.ptr, memory.size, memory,
                                -1 if memory.device_id is None else memory.device_id)
    arr = cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(mem, first), strides)
    return arr.view(type=device_array_class())


def as_memory(memory, what):
    """``memory`` as a DeviceMemory: itself, or a device array's ``gpu_data``."""
    if isinstance(memory, DeviceMemory):
        return memory
    if hasattr(memory, "__cuda_array_interface__"):
        return array_memory(as_cuda_array(memory, _host_ok=True))
    raise TypeError(f"{what}: expected device memory (a device array's .gpu_data), got "
                    f"{type(memory).__name__}")


def context_ipc_handle(context, memory):
    """``context.get_ipc_handle(memory)``: an IpcHandle another process can open."""
    memory = as_memory(memory, "get_ipc_handle(memory)")
    require_ipc("get_ipc_handle")
    if memory.size == 0 or not memory.ptr:
        raise ValueError("get_ipc_handle(memory): the memory is empty; there is no allocation "
                         "to share")
    cp = cupy()
    devnum = context.device.id if memory.device_id is None else memory.device_id
    with cp.cuda.Device(devnum):
        start, _ = allocation_range(memory.ptr)
        try:
            raw = cp.cuda.runtime.ipcGetMemHandle(start)
        except cp.cuda.runtime.CUDARuntimeError as exc:
            raise CudaDriverError(
                f"get_ipc_handle(memory): CUDA refused to share the allocation at 0x{start:x} "
                f"({exc}): only memory from cudaMalloc (CuPy's default pool) can be shared, "
                f"not managed memory or cudaMallocAsync pools") from exc
    _made_here.add(bytes(raw))
    return IpcHandle(memory, raw, memory.size, device_identity(devnum),
                     offset=memory.ptr - start)


class IpcArrayHandle:
    """A device array's IPC handle (``d_arr.get_ipc_handle()``): pickle it to another process,
    where ``with handle as d_arr:`` (or ``open()`` ... ``close()``) gives a device array of the
    same shape, strides and dtype over the shared memory."""

    def __init__(self, ipc_handle, array_desc):
        self._ipc_handle = ipc_handle
        self._array_desc = dict(array_desc)

    def open(self):
        return self._ipc_handle.open_array(current_context(), **self._array_desc)

    def close(self):
        self._ipc_handle.close()

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<IpcArrayHandle {self._array_desc}>"


def array_ipc_handle(arr):
    """``d_arr.get_ipc_handle()``."""
    require_ipc("get_ipc_handle")
    ipch = context_ipc_handle(current_context(), array_memory(arr))
    return IpcArrayHandle(ipch, {"shape": tuple(arr.shape), "strides": tuple(arr.strides),
                                 "dtype": np.dtype(arr.dtype)})


@contextlib.contextmanager
def open_ipc_array(handle, shape, dtype, strides=None, offset=0):
    """Open a CUDA IPC ``handle`` (its 64 bytes: ``ipch.handle.reserved``) from another process
    as a device array of ``shape``, ``dtype`` and ``strides`` (C order by default), ``offset``
    bytes into the allocation the handle names; the handle is closed when the block ends."""
    raw = handle_bytes(handle, "open_ipc_array(handle)")
    shape, dtype, strides = array_layout(shape, dtype, strides, "open_ipc_array")
    offset = byte_offset(offset, "open_ipc_array(offset)")
    require_ipc("open_ipc_array")
    low, end = layout_extent(shape, strides, dtype.itemsize)
    ipch = IpcHandle(None, raw, end - low, offset=offset)
    arr = ipch.open_array(current_context(), shape, dtype, strides)
    try:
        yield arr
    finally:
        ipch.close()


def device_address(obj, what):
    if isinstance(obj, DeviceMemory):
        return obj.ptr
    if hasattr(obj, "__cuda_array_interface__"):
        return int(obj.__cuda_array_interface__["data"][0])
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    raise TypeError(f"{what}: expected device memory, a device array or an address, got "
                    f"{type(obj).__name__}")


def _host_buffer(ary, size, what):
    if not isinstance(ary, np.ndarray) or not ary.flags.c_contiguous and \
            not ary.flags.f_contiguous:
        raise TypeError(f"{what}: expected a contiguous NumPy array, got {type(ary).__name__}")
    if size > ary.nbytes:
        raise ValueError(f"{what}: {size} bytes do not fit in the array's {ary.nbytes}")
    return ary.ctypes.data


def device_to_host(dst, src, size, stream=0):
    """numba-cuda's ``cuda.driver.device_to_host``: ``size`` bytes of device memory ``src``
    into the host array ``dst`` (asynchronous on ``stream``)."""
    checked_stream(stream, "device_to_host")
    _copy(_host_buffer(dst, size, "device_to_host(dst)"),
          device_address(src, "device_to_host(src)"), size, stream, "memcpyDeviceToHost")


def host_to_device(dst, src, size, stream=0):
    """numba-cuda's ``cuda.driver.host_to_device``: ``size`` bytes of the host array ``src``
    into device memory ``dst``."""
    checked_stream(stream, "host_to_device")
    _copy(device_address(dst, "host_to_device(dst)"),
          _host_buffer(src, size, "host_to_device(src)"), size, stream, "memcpyHostToDevice")


def _copy(dst, src, size, stream, kind):
    if simulated():                         # the simulator's device memory is host memory
        ctypes.memmove(dst, src, size)
        return
    rt = cupy().cuda.runtime
    s = cupy_stream(stream)
    if s is None:
        rt.memcpy(dst, src, size, getattr(rt, kind))
    else:
        rt.memcpyAsync(dst, src, size, getattr(rt, kind), s.ptr)


__all__ = ["DeviceMemory", "IpcArrayHandle", "IpcHandle", "IpcMemHandle", "device_to_host",
           "host_to_device", "open_ipc_array"]
