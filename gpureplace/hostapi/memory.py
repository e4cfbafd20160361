"""Host memory the GPU reaches: pinned (page-locked), mapped and managed arrays, and
``cuda.pinned`` / ``cuda.mapped`` for arrays that exist already."""

from __future__ import annotations

import contextlib
import ctypes

import numpy as np

from .. import probe
from .arrays import (array_interface, as_shape, device_array_class, host_target, order_of,
                     shape_tuple, span, with_stream)
from .common import cupy, sim, simulated
from .streams import checked_stream, synchronize


_HOST_ALLOC_PORTABLE, _HOST_ALLOC_MAPPED, _HOST_ALLOC_WRITE_COMBINED = 1, 2, 4


def _pinned_buffer(nbytes, flags=0):
    cp = cupy()
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
    shape, dtype = shape_tuple(shape, "pinned_array"), np.dtype(dtype)
    if simulated():
        return sim().pinned_array(shape, dtype, strides, order)
    return _page_locked(shape, dtype, strides, order)


def _page_locked(shape, dtype, strides, order, flags=0):
    """A NumPy array over new page-locked memory (``flags``: cudaHostAlloc's)."""
    st = tuple(strides) if strides is not None else _contiguous_strides(shape, dtype.itemsize,
                                                                        order)
    buf = _pinned_buffer(span(shape, st, dtype.itemsize), flags)
    return np.ndarray(shape, dtype, buffer=buf, strides=st)


def pinned_array_like(ary):
    return pinned_array(ary.shape, ary.dtype, order=order_of(ary))


class MappedNDArray(np.ndarray):
    """Host memory the GPU reads and writes directly (``mapped_array``): a NumPy array that
    kernels take as a device array."""

    @property
    def __cuda_array_interface__(self):
        return array_interface(self, self._device_address(), self.stream)

    def __array_finalize__(self, obj):
        self.stream = getattr(obj, "stream", 0)       # (a view keeps the array's stream)

    def _device_address(self):
        return _device_pointer(self.ctypes.data)

    def copy_to_host(self, ary=None, stream=0):
        """The elements in a new host array, or written into ``ary`` (checked as a device
        array's ``copy_to_host(ary)``: the same dtype, the same shape but for axes of length
        1), once the device's work is done."""
        checked_stream(stream, "copy_to_host")
        if ary is not None:
            host_target(self, ary)
        synchronize()
        if ary is None:
            return np.array(self, copy=True).view(np.ndarray)
        np.copyto(as_shape(ary, self.shape), self.view(np.ndarray))
        return ary

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        # A result NumPy made (``m + 1``) is a plain host array; the output array given
        # (``m += 1``, ``np.add(m, 1, out=m)``) stays the mapped or managed array it is, which
        # kernels take and which has copy_to_host (numba-cuda's classes stay what they are).
        if isinstance(obj, MappedNDArray):
            return obj
        if return_scalar:
            return obj[()]
        return np.asarray(obj)


def _device_pointer(host_ptr):
    """The device address of mapped host memory (the same address under unified addressing)."""
    if not host_ptr:
        return 0
    lib = probe.libcuda()
    if lib is not None:
        out = ctypes.c_uint64()
        fn = getattr(lib, "cuMemHostGetDevicePointer_v2", None)
        if fn is not None and fn(ctypes.byref(out), ctypes.c_void_p(host_ptr), 0) == 0:
            return out.value
    return host_ptr


def mapped_array(shape, dtype=np.float64, strides=None, order="C", stream=0, portable=False,
                 wc=False):
    """Host memory mapped into the GPU's address space: kernels read and write it directly."""
    shape, dtype = shape_tuple(shape, "mapped_array"), np.dtype(dtype)
    checked_stream(stream, "mapped_array")
    if simulated():
        return sim().mapped_array(shape, dtype, strides, order, stream)
    flags = _HOST_ALLOC_MAPPED | (_HOST_ALLOC_PORTABLE if portable else 0) | (
        _HOST_ALLOC_WRITE_COMBINED if wc else 0)
    out = _page_locked(shape, dtype, strides, order, flags).view(MappedNDArray)
    out.stream = stream or 0
    return out


class ManagedNDArray(MappedNDArray):
    """Managed (unified) memory (``managed_array``): one address that the host and every GPU
    use, migrated on demand by the driver."""

    def _device_address(self):
        return self.ctypes.data


class _ManagedAllocation:
    """Owns one ``cudaMallocManaged`` allocation; freed when the last array over it goes."""

    def __init__(self, nbytes, attach_global):
        rt = cupy().cuda.runtime
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
    shape, dtype = shape_tuple(shape, "managed_array"), np.dtype(dtype)
    checked_stream(stream, "managed_array")
    if simulated():
        return sim().mapped_array(shape, dtype, strides, order, stream)
    st = tuple(strides) if strides is not None else _contiguous_strides(shape, dtype.itemsize,
                                                                        order)
    nbytes = span(shape, st, dtype.itemsize)
    owner = _ManagedAllocation(nbytes, attach_global)
    buf = (ctypes.c_byte * max(nbytes, 1)).from_address(owner.ptr)
    buf._gpureplace_owner = owner           # the NumPy array keeps the buffer, which keeps this
    out = np.ndarray(shape, dtype, buffer=buf, strides=st).view(ManagedNDArray)
    out.stream = stream or 0
    return out


def mapped_array_like(ary, stream=0, portable=False, wc=False):
    return mapped_array(ary.shape, ary.dtype, order=order_of(ary), stream=stream,
                        portable=portable, wc=wc)


_HOST_REGISTER_PORTABLE, _HOST_REGISTER_MAPPED = 1, 2


@contextlib.contextmanager
def _registered(arrays, flags):
    cp = cupy()
    done = []
    try:
        for a in arrays:
            if a.nbytes:
                cp.cuda.runtime.hostRegister(a.ctypes.data, a.nbytes, flags)
                done.append(a)
        yield
    finally:
        for a in done:
            cp.cuda.runtime.hostUnregister(a.ctypes.data)


def _host_arrays(arylist, what):
    """Refuse, with TypeError naming the argument, what ``what`` (``pinned`` / ``mapped``)
    cannot lock in place: anything but a NumPy array.  (A list would become a temporary copy,
    which the block would pin or map while the list itself stayed as it was; numba-cuda needs
    the memory of a buffer too.)"""
    for i, a in enumerate(arylist):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"cuda.{what}(*arylist): arylist[{i}] must be a NumPy array (host "
                            f"memory to {'map' if what == 'mapped' else 'page-lock'} in "
                            f"place), got a {type(a).__name__}; make it one first "
                            f"(a = np.asarray(...)) and use that array")


def pinned(*arylist):
    """Page-lock existing host arrays (NumPy arrays) for the duration of the block."""
    _host_arrays(arylist, "pinned")
    return _pinned(arylist)


@contextlib.contextmanager
def _pinned(arylist):
    if simulated():
        yield
        return
    with _registered(arylist, _HOST_REGISTER_PORTABLE):
        yield


def mapped(*arylist, **kws):
    """Map existing host arrays (NumPy arrays) into the GPU for the block: yields device arrays
    (one, or a list) over the same memory, bound to ``stream`` (the only keyword, as
    numba-cuda's ``mapped(*arylist, stream=0)``)."""
    unknown = sorted(set(kws) - {"stream"})
    if unknown:
        raise TypeError(f"cuda.mapped(*arylist, stream=0): only accepts 'stream' as keyword, "
                        f"got {', '.join(map(repr, unknown))}")
    stream = kws.get("stream", 0)
    checked_stream(stream, "mapped")
    _host_arrays(arylist, "mapped")
    return _mapped(arylist, stream)


@contextlib.contextmanager
def _mapped(arylist, stream):
    if simulated():
        views = [with_stream(v, stream) for v in sim().mapped_views(arylist)]
        yield views[0] if len(views) == 1 else views
        return
    cp = cupy()
    with _registered(arylist, _HOST_REGISTER_PORTABLE | _HOST_REGISTER_MAPPED):
        views = []
        for a in arylist:
            mem = cp.cuda.UnownedMemory(_device_pointer(a.ctypes.data), a.nbytes, a)
            views.append(with_stream(cp.ndarray(a.shape, a.dtype, cp.cuda.MemoryPointer(mem, 0),
                                                a.strides).view(type=device_array_class()),
                                     stream))
        try:
            yield views[0] if len(views) == 1 else views
        finally:
            cp.cuda.runtime.deviceSynchronize()     # nothing may touch the memory afterwards
