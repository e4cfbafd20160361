"""Device arrays (numba-cuda's ``DeviceNDArray``: a CuPy array with numba's methods):
``to_device``, ``device_array[_like]``, ``as_cuda_array``, the ``__cuda_array_interface__``."""

from __future__ import annotations

import contextlib
import ctypes

import numpy as np

from ..jit import graphs
from ..runtime.arguments import VectorArray
from ..runtime.launch import describe_kind
from .common import cupy, sim, simulated
from .streams import checked_stream, cupy_stream, stream_handle, wait_for_interface_stream


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
    return VectorArray(array, count)


class NumbaArrayMethods:
    """numba-cuda's ``DeviceNDArray`` methods that CuPy / NumPy arrays do not have."""

    __slots__ = ()

    def is_c_contiguous(self):
        return bool(self.flags.c_contiguous)

    def is_f_contiguous(self):
        return bool(self.flags.f_contiguous)

    @property
    def alloc_size(self):
        """The bytes the elements span, from the lowest to the highest address (numba-cuda's
        ``memory_size_from_info``): ``nbytes`` for a contiguous array, more for a strided view
        (``a[:, :2]`` of a 4 x 6 float32 array spans 80); 0 for an empty one."""
        if any(n == 0 for n in self.shape):
            return 0
        return sum((n - 1) * abs(s) for n, s in zip(self.shape, self.strides)) + \
            self.dtype.itemsize

    @property
    def gpu_data(self):
        """The device memory the elements lie in (numba-cuda's ``MemoryPointer``): ``ptr``,
        ``size``, ``owner``; what ``cuda.current_context().get_ipc_handle`` takes."""
        from .ipc import array_memory
        return array_memory(self)

    def get_ipc_handle(self):
        """An ``IpcArrayHandle`` to send (pickled) to another process, which opens it as a
        device array over this array's memory (``with handle as d_arr:``).  Linux only."""
        from .ipc import array_ipc_handle
        return array_ipc_handle(self)

    def reshape(self, *shape, order="C"):
        """A view of another shape, as numba-cuda's: one that would need a copy (a reshape of a
        non-contiguous view that NumPy cannot express with strides) is refused, since writes
        to a copy would never reach this array."""
        out = super().reshape(*shape, order=order)
        _refuse_copy(self, out)
        return out

    def ravel(self, order="C", stream=0):
        """The elements as a 1-D view (refused where that needs a copy, as numba-cuda's),
        bound to ``stream`` or this array's."""
        checked_stream(stream, "ravel")
        out = super().ravel(order)
        _refuse_copy(self, out)
        return self._bound_view(out, stream)

    def split(self, section, stream=0):
        """Views of consecutive ``section``-element pieces of a 1-D contiguous array, bound to
        ``stream`` or this array's (as numba-cuda's)."""
        checked_stream(stream, "split")
        if self.ndim != 1 or not self.flags.c_contiguous:
            raise ValueError("split() needs a 1-D contiguous array")
        if isinstance(section, np.integer):
            section = int(section)
        if not isinstance(section, int) or section <= 0:
            raise ValueError(f"split(section): section must be a positive int, got {section!r}")
        return [self._bound_view(self[i:i + section], stream)
                for i in range(0, self.shape[0], section)]

    def _bound_view(self, out, stream):
        """``out``, a view of this array (which keeps its stream), bound to ``stream`` where
        one is given."""
        if stream:
            if not isinstance(out, type(self)):
                out = out.view(type=type(self))
            out._gr_stream = stream
        return out

    def as_cuda_arg(self):
        """The device memory passed for the array (numba-cuda's: its ``gpu_data``)."""
        return self.gpu_data


def squeeze_axes(shape, axis):
    """The axes ``squeeze(axis)`` removes from an array of ``shape``: every axis of length 1
    (``axis=None``), or ``axis`` (an int or a tuple of ints), each of which must have length 1
    (numba-cuda's ValueError otherwise)."""
    if axis is None:
        return tuple(i for i, n in enumerate(shape) if n == 1)
    axes = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for ax in axes:
        if not isinstance(ax, (int, np.integer)) or isinstance(ax, bool):
            raise TypeError(f"squeeze(axis): axis must be None, an int or a tuple of ints, "
                            f"got {axis!r}")
        if not -len(shape) <= ax < len(shape):
            raise getattr(np, "exceptions", np).AxisError(int(ax), len(shape))
        if shape[ax] != 1:
            raise ValueError("cannot select an axis to squeeze out which has size not equal "
                             "to one")
        out.append(int(ax) % len(shape))
    return tuple(sorted(set(out)))


def not_a_device_array(obj):
    """The TypeError of ``as_cuda_array`` given host data."""
    return TypeError(f"as_cuda_array: {type(obj).__name__} is not a device array (it has no "
                     f"__cuda_array_interface__); use to_device to copy host data")


def _refuse_copy(array, out):
    """Refuse ``out`` (a reshape or ravel of ``array``) if it is a copy rather than a view."""
    if out.size == 0:
        return
    mem = getattr(getattr(array, "data", None), "mem", None)
    if mem is not None:                                  # CuPy: views share the allocation
        shared = getattr(getattr(out, "data", None), "mem", None) is mem
    else:
        shared = np.may_share_memory(out, array)
    if not shared:
        raise NotImplementedError("operation requires copying: this array's elements are not "
                                  "laid out so that the new shape is a view of them (copy it "
                                  "first, e.g. with cupy.ascontiguousarray, and pass the copy)")


def host_array(ary):
    """``ary`` as a host NumPy array (lists, scalars and array-likes too)."""
    if hasattr(ary, "__cuda_array_interface__") and not isinstance(ary, np.ndarray):
        raise TypeError(f"expected a host array, got a device array ({type(ary).__name__}); use "
                        f"copy_to_device(d_ary) / cupy.copyto for device-to-device copies")
    return np.asarray(ary)


def copy_source(target, ary):
    """``ary`` as a host array to copy into device array ``target`` (``copy_to_device``), in
    ``target``'s shape; None when ``ary`` is empty: numba-cuda then copies nothing, whatever
    its shape or dtype.  Refused as numba-cuda refuses it (``check_copy``): another dtype is
    ``TypeError('incompatible dtype')`` (the copy is of bytes: it never converts), a shape that
    differs by more than axes of length 1 ``ValueError('incompatible shape')``."""
    host = host_array(ary)
    if host.size == 0:
        return None
    check_copy(target, host, "copy_to_device")
    return as_shape(host, target.shape)


def host_target(device, ary):
    """Refuse ``ary`` as the host array ``copy_to_host(ary)`` of ``device`` writes into, as
    numba-cuda refuses it (``check_copy``), or for not being a NumPy array."""
    if not isinstance(ary, np.ndarray):
        raise TypeError(f"copy_to_host(ary): ary must be a NumPy array, got "
                        f"{type(ary).__name__}")
    check_copy(device, ary, "copy_to_host")


def check_copy(device, other, what):
    """numba-cuda's ``check_array_compatibility`` for a copy between ``device`` (the device
    array whose method ``what`` is) and ``other`` (the host or device array given): the same
    dtype (``TypeError('incompatible dtype: ...')``: a copy moves bytes, it never converts), the
    same shape once the axes of length 1 are left out (``ValueError('incompatible shape:
    ...')``): a (4, 1) column copies to and from a (4,) array, whose bytes are the same.  (Unlike
    numba-cuda's, which copies bytes as they lie, the copies here follow each array's strides,
    so a layout that differs needs no refusal.)"""
    if other.dtype != device.dtype:
        hint = f"give ary of dtype {device.dtype}" if what == "copy_to_host" else \
            f"convert first, e.g. ary.astype(np.{device.dtype})"
        raise TypeError(f"incompatible dtype: {device.dtype} vs. {other.dtype} ({what} copies "
                        f"elements as they are: {hint})")
    if _squeezed(device.shape) != _squeezed(other.shape):
        raise ValueError(f"incompatible shape: {what}(ary): ary's shape {tuple(other.shape)} "
                         f"does not match the device array's {tuple(device.shape)} (they may "
                         f"differ only in axes of length 1)")


def _squeezed(shape):
    return tuple(n for n in shape if n != 1)


def as_shape(a, shape):
    """``a`` viewed with ``shape``, which differs from its own at most by axes of length 1 (as
    ``check_copy`` lets through): adding or dropping such axes never needs a copy, so writes
    to the view reach ``a``."""
    return a if tuple(a.shape) == tuple(shape) else a.reshape(shape)


def refuse_objects(obj, what="to_device"):
    """Refuse, with TypeError, what no device array can hold: None, Python objects (an array
    of dtype object, or a list NumPy makes one of)."""
    if obj is None:
        raise TypeError(f"{what}: expected an array (or a list, scalar or record) to copy to "
                        f"the device, got None")
    dt = getattr(obj, "dtype", None)
    if dt is None and not hasattr(obj, "__cuda_array_interface__"):
        dt = np.asarray(obj).dtype
    if isinstance(dt, np.dtype) and dt.hasobject:
        raise TypeError(f"{what}: cannot copy a {type(obj).__name__} of dtype {dt} to the "
                        f"device: Python objects have no device form; give numbers, booleans "
                        f"or records")
    if isinstance(dt, np.dtype) and not hasattr(obj, "__cuda_array_interface__"):
        from ..runtime.transfers import dtype_problem
        why = dtype_problem(dt)
        if why is not None:         # (a device copy no kernel could take)
            raise TypeError(f"{what}: the array {why}")


_DeviceNDArray = None
_DeviceRecord = None


def is_record(obj):
    """A structured scalar (``arr[i]`` of a record array, ``np.record``)."""
    return isinstance(obj, np.void) and obj.dtype.names is not None


def record_copy(rec):
    """A 0-d array holding a copy of record ``rec`` (``np.array(rec)`` of an element of a
    record array may share its memory)."""
    host = np.empty((), rec.dtype)
    host[()] = rec
    return host


class RecordMethods:
    """What numba-cuda's ``DeviceRecord`` adds to a 0-d device array of a record dtype (the
    GPU's and the simulator's): ``d_rec["x"]`` is the field's value, copied to the host (a
    number, or an array for an array field), and kernels type it as the record itself."""

    def __getitem__(self, key):
        if not isinstance(key, str):
            return super().__getitem__(key)
        if key not in (self.dtype.names or ()):
            raise KeyError(f"the record has no field {key!r} (its fields: "
                           f"{', '.join(self.dtype.names)})")
        value = self.copy_to_host()[key]
        return value[()] if value.ndim == 0 else value

    def getitem(self, key, stream=0):
        """``self[key]`` (numba-cuda's ``DeviceRecord.getitem``): a field's value."""
        checked_stream(stream, "getitem")
        return self[key] if isinstance(key, str) else super().getitem(key, stream)

    def __setitem__(self, key, value):
        self.setitem(key, value)

    def setitem(self, key, value, stream=0):
        """``self[key] = value`` (numba-cuda's ``DeviceRecord.setitem``): the field ``key``
        set to ``value`` in device memory, in order with ``stream``'s work."""
        checked_stream(stream, "setitem")
        if not isinstance(key, str):
            return super().setitem(key, value, stream)
        if key not in (self.dtype.names or ()):
            raise KeyError(f"the record has no field {key!r} (its fields: "
                           f"{', '.join(self.dtype.names)})")
        stream = stream or self.stream
        wait = getattr(stream, "synchronize", lambda: None)   # (host copies must be done)
        host = self.copy_to_host(stream=stream)
        wait()
        host[key] = value
        self.copy_to_device(host, stream=stream)
        wait()

    @property
    def _numba_type_(self):
        from numba.np import numpy_support
        return numpy_support.from_dtype(self.dtype)


def device_record_class():
    """numba-cuda's ``DeviceRecord`` (``cuda.to_device(record)``): one structured value in
    device memory, a 0-d device array that kernels take as the record itself, by reference
    (what they write to it stays on the device until ``copy_to_host()``)."""
    global _DeviceRecord
    if _DeviceRecord is None:
        base = device_array_class()

        class DeviceRecord(RecordMethods, base):
            pass

        from ..runtime.arguments import device_record_handler, register_handler
        register_handler(DeviceRecord, device_record_handler)
        _DeviceRecord = DeviceRecord
    return _DeviceRecord


def device_array_class():
    global _DeviceNDArray
    if _DeviceNDArray is None:
        cp = cupy()

        class DeviceNDArray(NumbaArrayMethods, cp.ndarray):
            """A CuPy array with numba-cuda's ``DeviceNDArray`` methods."""

            def copy_to_host(self, ary=None, stream=0):
                """The array's contents in host memory: a new NumPy array, or written into
                ``ary`` (the same dtype, the same shape but for axes of length 1, as
                ``check_copy`` says); asynchronous when ``stream`` is given."""
                checked_stream(stream, "copy_to_host")
                base = self.view(type=cp.ndarray)
                s = cupy_stream(stream)
                if ary is None:
                    ary = np.empty(self.shape, self.dtype,
                                   order="F" if _f_only(base) else "C")
                else:
                    host_target(self, ary)
                target = as_shape(ary, self.shape)
                if not target.size:
                    return ary
                if _same_layout(target, base):
                    # bytes as they are: any dtype (records too), no temporary
                    if s is None:
                        base.data.copy_to_host(target.ctypes.data, target.nbytes)
                    else:
                        base.data.copy_to_host_async(target.ctypes.data, target.nbytes, s)
                else:
                    target[...] = base.get(stream=s)
                return ary

            def copy_to_device(self, ary, stream=0):
                """Fill the array from ``ary``: a host array (or list) or a device array."""
                checked_stream(stream, "copy_to_device")
                base = self.view(type=cp.ndarray)
                s = cupy_stream(stream)
                if hasattr(ary, "__cuda_array_interface__") or isinstance(ary, cp.ndarray):
                    src = cp.asarray(ary)
                    if src.size == 0:               # (numba-cuda: nothing to do)
                        return
                    check_copy(self, src, "copy_to_device")
                    with (s if s is not None else contextlib.nullcontext()):
                        cp.copyto(base, as_shape(src, base.shape))
                    return
                if s is None:       # (on another stream it is asynchronous: no capture's)
                    graphs.refuse_host_copy("d.copy_to_device(host data)")
                host = copy_source(self, ary)
                if host is None:
                    return
                if _same_layout(host, base):
                    if s is None:
                        base.data.copy_from_host(host.ctypes.data, host.nbytes)
                    else:
                        base.data.copy_from_host_async(host.ctypes.data, host.nbytes, s)
                else:
                    with (s if s is not None else contextlib.nullcontext()):
                        cp.copyto(base, cp.asarray(host))

            def __array__(self, dtype=None, copy=None):
                """``np.asarray(d)``: a copy in host memory, as numba-cuda's DeviceNDArray
                gives (CuPy refuses the implicit copy; numba-cuda code relies on it, e.g.
                ``np.testing.assert_equal(d_out, expected)``)."""
                if copy is False:
                    raise ValueError("a device array cannot be viewed as a NumPy array "
                                     "without a copy")
                host = self.copy_to_host()
                return host if dtype is None else host.astype(dtype, copy=False)

            def __getitem__(self, key):
                """A view, as CuPy's; but an element (a 0-d result) is copied to the host and
                returned as a NumPy scalar, as numba-cuda's DeviceNDArray returns it, so that
                host code reading ``d[i]`` (``for x in d``, a CPU function called on it) gets
                a number; an element of a record array is a ``DeviceRecord``, a view."""
                return self.getitem(key)

            def getitem(self, key, stream=0):
                """``self[key]`` (numba-cuda's ``getitem``), the views it makes bound to
                ``stream`` (or this array's) and an element read in order with its work."""
                checked_stream(stream, "getitem")
                stream = stream or self.stream
                out = cp.ndarray.__getitem__(self, key)
                if out.ndim == 0 and self.ndim and out.dtype.names is not None:
                    return with_stream(out.view(type=device_record_class()), stream)
                if out.ndim == 0:
                    return out.get(stream=cupy_stream(stream))[()]
                return with_stream(out, stream)

            def __setitem__(self, key, value):
                self.setitem(key, value)

            def setitem(self, key, value, stream=0):
                """``self[key] = value`` (numba-cuda's ``setitem``) on ``stream`` (or this
                array's): a scalar, a host array or a device array, broadcast."""
                checked_stream(stream, "setitem")
                s = cupy_stream(stream or self.stream)
                with (s if s is not None else contextlib.nullcontext()):
                    if not (isinstance(value, cp.ndarray) or np.isscalar(value)):
                        value = cp.asarray(value if is_cuda_array(value) else
                                           host_array(value))
                    cp.ndarray.__setitem__(self.view(type=cp.ndarray), key, value)

            def squeeze(self, axis=None, stream=0):
                """A view without the axes of length 1 (all of them, or ``axis``: an int or
                a tuple of ints, each of length 1), bound to ``stream`` or this array's."""
                checked_stream(stream, "squeeze")
                out = cp.ndarray.squeeze(self, squeeze_axes(self.shape, axis))
                return with_stream(out.view(type=type(self)), stream or self.stream)

            def __iter__(self):
                if self.ndim == 0:
                    raise TypeError("iteration over a 0-d array")
                return (self[i] for i in range(self.shape[0]))

            @property
            def device_ctypes_pointer(self):
                return ctypes.c_void_p(self.data.ptr)

            def __array_finalize__(self, obj):
                # a view (slice, reshape...) keeps the array's stream
                self._gr_stream = getattr(obj, "_gr_stream", 0)

            @property
            def stream(self):
                """The stream the array belongs to (``device_array(..., stream=s)``, or the
                one its ``__cuda_array_interface__`` named), 0 for none."""
                return self.__dict__.get("_gr_stream", 0)

            def bind(self, stream=0):
                """A view of the array bound to ``stream`` (numba-cuda's ``bind``): its
                ``stream``, the one its ``__cuda_array_interface__`` names."""
                checked_stream(stream, "bind")
                out = self.view(type=type(self))
                out._gr_stream = stream or 0
                return out

            @property
            def __cuda_array_interface__(self):
                desc = cupy_interface.__get__(self)
                desc["stream"] = interface_stream(self.stream)
                return desc

            def __repr__(self):
                return (f"<gpureplace.cuda DeviceNDArray shape={self.shape} "
                        f"dtype={self.dtype}>")

        cupy_interface = cp.ndarray.__cuda_array_interface__
        DeviceNDArray.__module__ = "gpureplace.cuda"
        DeviceNDArray.__qualname__ = "DeviceNDArray"
        _DeviceNDArray = DeviceNDArray
    return _DeviceNDArray


def array_interface(ary, address, stream=0):
    """``__cuda_array_interface__`` (version 3) of the NumPy array ``ary`` at device ``address``,
    naming ``stream`` (a ``Stream``, or 0 for none)."""
    return {"shape": ary.shape, "typestr": ary.dtype.str, "descr": _descr(ary.dtype),
            "data": (address, False),
            "strides": None if ary.flags.c_contiguous else ary.strides, "version": 3,
            "stream": interface_stream(stream)}


def _descr(dtype):
    """The interface's ``descr`` of ``dtype``: NumPy's for a record, whose fields it lists;
    a record whose fields overlap (a C union) or are out of order has none in NumPy's terms,
    and is described as its bytes, as NumPy's own ``__array_interface__`` describes it."""
    if dtype.names:
        try:
            return dtype.descr
        except ValueError:
            pass
    return [("", dtype.str)]


def interface_stream(stream):
    """The ``stream`` entry of a ``__cuda_array_interface__`` for an array of ``stream``: None
    for none (consumers need not wait), else its handle (1 for the legacy default stream)."""
    if not stream:
        return None
    return stream_handle(stream) or 1


def with_stream(arr, stream):
    """``arr`` (a DeviceNDArray) belonging to ``stream`` (a ``Stream``, or 0 / None)."""
    if stream:
        arr._gr_stream = stream
    return arr


def _f_only(a):
    return a.flags.f_contiguous and not a.flags.c_contiguous


def _same_layout(host, dev):
    """Whether ``host`` and ``dev`` hold their elements in the same byte order (both C- or both
    F-contiguous), so a copy is one memcpy."""
    return (host.flags.c_contiguous and dev.flags.c_contiguous) or \
        (host.flags.f_contiguous and dev.flags.f_contiguous)


def order_of(host):
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
    checked_stream(stream, "to_device")
    if to is not None:
        to.copy_to_device(obj, stream=stream)
        return to
    refuse_objects(obj)
    if simulated():
        return sim().to_device(obj, copy, stream)
    if is_cuda_array(obj):
        return as_cuda_array(obj)
    if copy and not stream:
        graphs.refuse_host_copy("cuda.to_device(host data)")
    if is_record(obj):
        host = record_copy(obj)
        rec = with_stream(cupy().empty((), host.dtype).view(type=device_record_class()), stream)
        if copy:
            rec.copy_to_device(host, stream=stream)
        return rec
    host = host_array(obj)
    if not (host.flags.c_contiguous or host.flags.f_contiguous):
        host = np.ascontiguousarray(host)
    arr = with_stream(cupy().empty(host.shape, host.dtype, order=order_of(host)).view(
        type=device_array_class()), stream)
    if copy:
        arr.copy_to_device(host, stream=stream)
    return arr


def span(shape, strides, itemsize):
    if any(n == 0 for n in shape):
        return 0
    if any(s < 0 for s in strides):
        raise ValueError(f"device_array: negative strides {strides} are not supported")
    return sum((n - 1) * s for n, s in zip(shape, strides)) + itemsize


def shape_tuple(shape, what="device_array"):
    """``shape`` (an int, or a tuple or other sequence of ints; NumPy's integers too) as a tuple
    of ints; anything else, a float included, is refused as numba-cuda refuses it (TypeError),
    naming ``what``'s argument (``int(3.7)`` would quietly make 3 elements)."""
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    bad = f" (a {type(shape).__name__})"
    if not isinstance(shape, (str, bytes, dict, set, np.floating, float)):
        try:
            dims = tuple(shape)
        except TypeError:
            dims = None
        if dims is not None:
            wrong = [n for n in dims if not isinstance(n, (int, np.integer))]
            if not wrong:
                return tuple(int(n) for n in dims)
            bad = f" (an element is {wrong[0]!r}{describe_kind(wrong[0])})"
    raise TypeError(f"{what}(shape): shape must be an integer or tuple of integers, got "
                    f"{shape!r}{bad}")


def device_array(shape, dtype=np.float64, strides=None, order="C", stream=0):
    """An uninitialised array on the GPU (numba-cuda's default dtype: float64), belonging to
    ``stream`` (its ``.stream``)."""
    shape, dtype = shape_tuple(shape), np.dtype(dtype)
    if order not in ("C", "F"):
        raise ValueError(f"device_array: order must be 'C' or 'F', got {order!r}")
    checked_stream(stream, "device_array")
    if simulated():
        return sim().device_array(shape, dtype, strides, order, stream)
    cp = cupy()
    cls = device_array_class()
    if strides is None:
        return with_stream(cp.empty(shape, dtype, order=order).view(type=cls), stream)
    mem = cp.cuda.alloc(span(shape, tuple(strides), dtype.itemsize))
    return with_stream(cp.ndarray(shape, dtype, mem, tuple(strides)).view(type=cls), stream)


def device_array_like(ary, stream=0):
    """An uninitialised GPU array with ``ary``'s shape, dtype and layout."""
    return device_array(ary.shape, ary.dtype, order=order_of(ary), stream=stream)


def as_cuda_array(obj, sync=True, *, _host_ok=False):
    """A ``DeviceNDArray`` view of a device array of another library (``__cuda_array_interface__``
    or DLPack): no copy.  When the interface names a stream (version 3), the view belongs to it
    and, unless ``sync=False`` or ``settings.cuda_array_interface_sync`` is off, the producer's
    work queued there is waited for first."""
    if simulated():
        # (_host_ok: gpureplace's own modules hand the simulator's "device" buffers, host
        # arrays, in; a user's host array is refused as on the GPU)
        return sim().as_cuda_array(obj, host_ok=_host_ok)
    cp = cupy()
    if isinstance(obj, np.ndarray) and not is_cuda_array(obj) or not (
            is_cuda_array(obj) or isinstance(obj, cp.ndarray) or hasattr(obj, "__dlpack__")):
        raise not_a_device_array(obj)
    stream = 0
    if isinstance(obj, cp.ndarray):
        arr, stream = obj, getattr(obj, "stream", 0)
    elif is_cuda_array(obj):
        cai = obj.__cuda_array_interface__
        if cai.get("mask") is not None:
            raise NotImplementedError("as_cuda_array: Masked arrays are not supported (the "
                                      "__cuda_array_interface__ has a 'mask')")
        stream = wait_for_interface_stream(cai, sync) or 0
        # (CuPy is given the description without the stream: the wait is done, once)
        arr = cp.asarray(_Described(dict(cai, stream=None), obj))
    else:
        arr = cp.from_dlpack(obj)
    return with_stream(arr.view(type=device_array_class()), stream)


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
    return hasattr(obj, "__cuda_array_interface__")   # the simulator's device arrays have it too


class _DeviceArrayNamespace:
    """``cuda.devicearray``: ``DeviceNDArray`` (CuPy's subclass, or the simulator's),
    ``is_cuda_ndarray`` and ``auto_device``."""

    @property
    def DeviceNDArray(self):  # noqa: N802 - numba-cuda's name
        return sim().SimDeviceNDArray if simulated() else device_array_class()

    @staticmethod
    def is_cuda_ndarray(obj):
        return is_cuda_array(obj)

    @staticmethod
    def from_array_like(ary, stream=0, gpu_data=None):
        """numba-cuda's ``devicearray.from_array_like``: an uninitialised device array with
        ``ary``'s shape, dtype and layout."""
        if gpu_data is not None:
            raise NotImplementedError("from_array_like(gpu_data=...): numba-cuda's driver "
                                      "memory objects do not exist here; use "
                                      "cuda.from_cuda_array_interface")
        return device_array_like(ary, stream=stream)

    @staticmethod
    def auto_device(obj, stream=0, copy=True, user_explicit=False):
        """numba-cuda's ``devicearray.auto_device``: ``(device array, whether it was copied)``:
        a device array as it is (a view), anything else copied to the device."""
        if is_cuda_array(obj):
            return as_cuda_array(obj), False
        if np.isscalar(obj) or isinstance(obj, np.generic):
            obj = np.array(obj)
        return to_device(np.asarray(obj), stream=stream, copy=copy), True


devicearray = _DeviceArrayNamespace()
