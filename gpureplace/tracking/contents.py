"""The contents of global arrays that compiled code read: kept, and compared after each cell.

A global NumPy array changes in place (``G[1] = 7``) without its name being rebound, so neither
identity nor a fingerprint taken at compile time notices.  Every record of a read whose value is
an array (or a tuple holding arrays) keeps a private copy of the contents it was compiled
against -- a ``Snapshot`` -- and the cell hook and the revalidation after the world moved compare
the live array with it.  The device never sees anything but that copy: small arrays are compiled
into the code from it, larger ones are copied from it into device memory when the module loads
(see ``INLINE_ARRAY_BYTES``), so what runs is exactly what the check compared.

Cost: a comparison is one ``memcmp``-speed pass over the array (0.2 us for 64 bytes, 3 us for
64 KiB, 0.1 ms per MiB on the 2-core development machine); the copies are shared between the
records of one array while its contents stay the same.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

#: Global arrays up to this size are compiled into the kernel as constants (loads from them
#: fold, and a change recompiles the kernel); larger ones live in device memory, filled from the
#: snapshot when the kernel's module loads, so their size never reaches the compiler.
INLINE_ARRAY_BYTES = 64 << 10
#: Larger global arrays are refused (pass them as arguments): each is copied once more on the
#: host and compared after every cell.
MAX_GLOBAL_ARRAY_BYTES = 256 << 20

_SMALL = 256 << 10               # compared as bytes objects; larger ones with memcmp
_MAX_DEPTH = 8
_lock = threading.Lock()
_latest = {}                      # id(array) -> (weakref to it, its latest Copy)


def _order(a):
    """The memory order a copy of ``a`` keeps: Fortran for Fortran arrays, C otherwise (Numba
    types such arrays with those layouts and lowers their constants in that order)."""
    return "F" if a.flags.f_contiguous and not a.flags.c_contiguous else "C"


def _memcmp():
    import ctypes
    import ctypes.util
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        fn = libc.memcmp
    except (OSError, AttributeError, TypeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return fn


_MEMCMP = _memcmp()


def _same_memory(x, y):
    """Whether two contiguous arrays of one size hold the same bytes (one pass, no temporaries
    beyond a chunk)."""
    if _MEMCMP is not None:
        return _MEMCMP(x.ctypes.data, y.ctypes.data, x.nbytes) == 0
    xb, yb = x.ravel(order="K").view(np.uint8), y.ravel(order="K").view(np.uint8)
    step = 1 << 20
    return all(np.array_equal(xb[i:i + step], yb[i:i + step]) for i in range(0, xb.size, step))


class Copy:
    """A private, read-only copy of an array's contents (``array``, in the original's memory
    order) and, for small ones, its bytes (``key``): what compiled code was built from."""

    __slots__ = ("array", "key", "nbytes", "dtype", "shape", "_oversize")

    def __init__(self, a):
        self.nbytes, self.dtype, self.shape = a.nbytes, a.dtype, a.shape
        if a.nbytes > MAX_GLOBAL_ARRAY_BYTES:
            # Never copied: no kernel is compiled against it (compiler/target.py refuses it),
            # so only a rebinding matters here.
            self.array, self.key, self._oversize = None, None, id(a)
            return
        self._oversize = None
        self.array = np.array(a, order=_order(a), copy=True)
        self.array.flags.writeable = False
        self.key = self.array.tobytes() if self.array.nbytes <= _SMALL else None

    def matches(self, a):
        """Whether ``a`` has this dtype, shape and these bytes (NaN payloads included)."""
        try:
            if a.shape != self.shape or (a.dtype is not self.dtype and a.dtype != self.dtype):
                return False
        except AttributeError:
            return False
        if not isinstance(a, (np.ndarray, np.void)):
            return False
        if self.key is not None:
            return a.tobytes() == self.key
        if self._oversize is not None:
            return id(a) == self._oversize
        return _same_memory(np.asarray(a, order=_order(self.array)), self.array)


def _copy_of(a):
    """The ``Copy`` of ``a``, shared with other records of the same array while its contents
    have not changed."""
    with _lock:
        hit = _latest.get(id(a))
    if hit is not None and hit[0]() is a and hit[1].matches(a):
        return hit[1]
    copy = Copy(a)
    try:
        ref = weakref.ref(a, lambda _, key=id(a): _latest.pop(key, None))
    except TypeError:             # (a subclass without weak references: not shared)
        return copy
    with _lock:
        _latest[id(a)] = (ref, copy)
    return copy


class Snapshot:
    """The arrays inside a value, copied: ``parts`` is ``[(path, Copy)]``, ``path`` the tuple
    indices that lead to the array (``()`` for an array itself)."""

    __slots__ = ("parts",)

    def __init__(self, parts):
        self.parts = parts

    def same_as(self, value):
        """Whether ``value`` has these arrays, with this dtype, shape and these bytes."""
        parts = self.parts
        if len(parts) == 1 and not parts[0][0]:
            return parts[0][1].matches(value)          # the common case: an array itself
        return all(copy.matches(_at(value, path)) for path, copy in parts)

    def copy_at(self, path):
        """The ``Copy`` of the array at ``path``, or None."""
        for p, copy in self.parts:
            if p == path:
                return copy
        return None

    def __repr__(self):
        return f"<Snapshot of {len(self.parts)} array(s)>"


def _at(value, path):
    for i in path:
        if not isinstance(value, tuple) or i >= len(value):
            return None
        value = value[i]
    return value


def arrays_in(value, path=(), depth=0):
    """``[(path, array)]`` of the NumPy arrays in ``value`` (an array, or tuples of them)."""
    if isinstance(value, np.ndarray):
        return [(path, value)]
    if isinstance(value, tuple) and depth < _MAX_DEPTH:
        out = []
        for i, item in enumerate(value):
            out.extend(arrays_in(item, path + (i,), depth + 1))
        return out
    return []


def snapshot(value):
    """A ``Snapshot`` of the arrays in ``value``, or None when it holds none.  A NumPy record
    (``R = REC[0]`` of a structured array, a view of its element; or one assigned to, ``R.x =
    1``) changes in place as an array does: it is kept as a one-record copy."""
    if isinstance(value, np.void) and value.dtype.names is not None:
        return Snapshot([((), Copy(value))])
    if not isinstance(value, (np.ndarray, tuple)) or hasattr(value, "__cuda_array_interface__"):
        return None          # (a device array is used where it is: nothing to compare)
    found = arrays_in(value)
    if not found:
        return None
    return Snapshot([(path, _copy_of(a)) for path, a in found])


def is_resident(array):
    """Whether a global array (or its ``Copy``) of this size lives in device memory rather than
    in the code."""
    return array.nbytes > INLINE_ARRAY_BYTES
