"""Memory in the simulator: ``cuda.shared.array`` (static, and dynamic with shape 0) and
``cuda.local.array`` (``cuda.const.array_like`` is in ``constmem``)."""

from __future__ import annotations

import sys
import types as pytypes

import numpy as np
from numba.core import types as nbtypes
from numba.core.errors import NumbaNotImplementedError
from numba.np import numpy_support

from ...compiler.intrinsics import memory
from ..arrays import SimArray
from .vectors import SimVectorArray


def _check_alignment(alignment, what):
    if alignment is None:
        return
    if isinstance(alignment, bool) or not isinstance(alignment, (int, np.integer)):
        raise TypeError(f"{what}(..., alignment=...): alignment must be a constant integer (a "
                        f"power of two), got {alignment!r}")
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"{what}(..., alignment={alignment}): Alignment must be a positive "
                         f"power of two")


#: The byte a shared or local array starts filled with.  On the GPU they start with whatever
#: the memory held (often zeros on a fresh device, not always): a kernel that reads an element
#: before any thread wrote it -- an accumulator never set to 0, a neighbour read without a
#: syncthreads() -- computes with garbage.  Zeros here would hide that; 0xFF bytes make it
#: show: every float is a NaN, every signed integer -1, every unsigned one its maximum.
UNWRITTEN = 0xFF


def _aligned_unwritten(dims, dt, alignment):
    """An array of ``dims`` and ``dt`` filled with ``UNWRITTEN`` bytes (zeros for a dtype of
    Python objects or booleans, which no byte pattern represents as garbage) whose address is
    a multiple of ``alignment`` (or of NumPy's own alignment when None), as the device places
    the array."""
    if dt.hasobject or dt.kind == "b":
        arr = np.zeros(dims, dt)
        if not alignment or arr.ctypes.data % alignment == 0:
            return arr
    nbytes = int(np.prod(dims, dtype=np.int64)) * dt.itemsize
    align = alignment or max(dt.alignment, 1)
    raw = np.empty(nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    view = raw[start:start + nbytes]
    view.fill(0 if dt.kind == "b" else UNWRITTEN)
    return view.view(dt).reshape(dims)


def _element_of(dtype, what):
    """(NumPy dtype of the storage, vector type or None) of a shared or local array's
    ``dtype``: a vector type (``cuda.float32x4``) is stored as its elements."""
    vt = getattr(dtype, "vector_type", None)
    return _dtype_of(dtype if vt is None else str(vt.element), what), vt


def _storage(dims, dt, vt, alignment):
    """The NumPy storage of an array of ``dims``, not yet written (``UNWRITTEN``): a vector's
    elements on a last axis."""
    return _aligned_unwritten(dims if vt is None else dims + (vt.count,), dt, alignment)


def _dtype_of(dtype, what):
    if getattr(dtype, "__name__", None) == "_INT":
        return np.dtype(np.int64)          # the simulator's ``int``
    if isinstance(dtype, nbtypes.Type):
        try:
            return numpy_support.as_dtype(dtype)
        except (NotImplementedError, NumbaNotImplementedError):
            from ...compiler.datamodels import user_value_size
            if user_value_size(dtype) is not None:
                # a type of the extension API (a StructModel): its Python objects, as they are
                return np.dtype(object)
            raise TypeError(f"{what}: dtype {dtype} has no NumPy equivalent") from None
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{what}(shape, dtype): dtype must be a scalar type such as np.float32, "
                        f"numba.int32 or 'float32', got {dtype!r}") from None


def _shape_of(shape, what):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    if isinstance(shape, tuple) and shape and all(isinstance(s, (int, np.integer))
                                                  for s in shape):
        return tuple(int(s) for s in shape)
    raise TypeError(f"{what}(shape, dtype): shape must be an int or a tuple of ints, got "
                    f"{shape!r}")


def table(launch):
    """The memory stubs of ``launch``: ``{id(stub): value}``."""
    tls = launch.tls
    out = {}
    onchip = launch.onchip

    def _onchip(arr):
        """Note ``arr``'s memory as shared or local, not global (atomics differ there)."""
        owner = arr
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        onchip[id(owner)] = owner
        return arr

    def shared_array(shape, dtype, alignment=None):
        dims = _shape_of(shape, "cuda.shared.array")
        _check_alignment(alignment, "cuda.shared.array")
        dt, vt = _element_of(dtype, "cuda.shared.array")
        block = tls.t.block
        if dims == (0,):
            key = dt if vt is None else vt
            view = block.dynamic_views.get(key)
            if view is None:
                with block.lock:
                    view = block.dynamic_views.get(key)
                    if view is None:
                        n = len(block.dynamic) // dt.itemsize
                        arr = _onchip(np.frombuffer(block.dynamic, dtype=dt, count=n))
                        view = block.dynamic_views[key] = _wrap(arr, vt)
            return view
        f = sys._getframe(1)
        site = (f.f_code, f.f_lasti)
        arr = block.shared.get(site)
        if arr is None:
            with block.lock:
                arr = block.shared.get(site)
                if arr is None:
                    if 0 in dims:
                        raise ValueError(f"cuda.shared.array: shape {dims} has a zero "
                                         f"dimension (only shape 0 means dynamic shared memory)")
                    arr = block.shared[site] = _wrap(_onchip(_storage(dims, dt, vt, alignment)),
                                                     vt)
        return arr

    def local_array(shape, dtype, alignment=None):
        dims = _shape_of(shape, "cuda.local.array")
        _check_alignment(alignment, "cuda.local.array")
        if 0 in dims:
            raise ValueError(f"cuda.local.array: shape {dims} has a zero dimension (a local "
                             f"array needs a positive size)")
        dt, vt = _element_of(dtype, "cuda.local.array")
        return _wrap(_onchip(_storage(dims, dt, vt, alignment)), vt)

    def _wrap(arr, vt):
        """A shared or local array as kernels see it: of scalars, or of vectors ``vt`` (the
        NumPy array then has the vector's elements as its last axis)."""
        if vt is None:
            return SimArray(arr, launch)
        if arr.ndim == 1:                                  # the dynamic shared memory
            arr = arr[:len(arr) // vt.count * vt.count].reshape(-1, vt.count)
        return SimVectorArray(arr, vt, launch)

    out[id(memory.shared)] = pytypes.SimpleNamespace(array=shared_array)
    out[id(memory.shared.array)] = shared_array
    out[id(memory.local)] = pytypes.SimpleNamespace(array=local_array)
    out[id(memory.local.array)] = local_array
    return out
