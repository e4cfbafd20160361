"""Pointers in simulated device code: a ``CPointer`` argument (``RawPointer``), the views
``numba.carray`` / ``numba.farray`` make of one (``PointerArrays``), and the memory they may
touch.  A pointer into a simulated device array (or an array argument of the same launch) is
checked against that allocation; any other address against the memory mapped into this
process (``ProcessMemory``), so that a stray access is an IndexError naming the thread and the
line, never a crash of the process."""

from __future__ import annotations

import bisect
import ctypes
import os
import stat
import sys

import numpy as np

from .arrays import (DeviceCaster, SimArray, allocation_around, current_place,
                     host_array_around, index_text, wrap_int)


# ---------------------------------------------------------------------------------------------
# The memory of this process: what a pointer outside every known allocation may touch


class ProcessMemory:
    """The memory mapped into this process, as ``/proc/self/maps`` (Linux) lists it: where a
    pointer whose allocation the simulator does not know (a host address, ``h.ctypes.data``)
    may read or store.  An access elsewhere would crash the process, where the GPU reports an
    illegal address.

    The parsed ranges are kept and read again only on a miss, and at each launch that holds
    such a pointer (``refresh``: memory unmapped since, a freed array's, must not pass).  Only
    memory that can be touched without a fault counts: readable (and, for stores, writable)
    anonymous memory, the heap and stacks, and the pages of a mapped regular file that the file
    still covers; never device files (a GPU's memory), ``[vvar]`` and the like, nor mappings of
    deleted files (which may have shrunk).  Without ``/proc/self/maps`` (``available`` false)
    nothing counts: such pointers are refused rather than risk a crash."""

    def __init__(self, path="/proc/self/maps"):
        self.path = path
        self.available = os.path.exists(path)
        self._runs = None              # ((starts, ends) readable, (starts, ends) writable)
        self._text = None              # the maps they were parsed from

    def refresh(self):
        """Read the maps again (what was cached may since have been unmapped); parsed again
        only where they changed."""
        if not self.available:
            return
        try:
            with open(self.path, "rb") as f:
                text = f.read()
        except OSError:
            self.available = False
            self._runs = None
            return
        if text != self._text:
            self._runs, self._text = self._parse(text), text

    def run(self, start, end, write=False):
        """``(low, high)``, the stretch of contiguous mapped memory that holds bytes ``start``
        to ``end`` (exclusive), readable -- and writable with ``write`` -- or None where they
        are not all such memory (or the maps cannot be read)."""
        if not self.available or start < 0 or end > 1 << 64 or end < start:
            return None
        runs = self._runs
        if runs is not None:
            hit = _run_of(runs[write], start, end)
            if hit is not None:
                return hit
        self.refresh()                 # a miss: memory mapped since?
        runs = self._runs
        return None if runs is None else _run_of(runs[write], start, end)

    @staticmethod
    def _parse(text):
        page = _page_size()
        readable, writable = ([], []), ([], [])
        sizes = {}
        for line in text.splitlines():
            fields = line.split(None, 5)
            if len(fields) < 5:
                continue
            perms = fields[1]
            if perms[:1] != b"r":
                continue
            low, _, high = fields[0].partition(b"-")
            low, high = int(low, 16), int(high, 16)
            name = fields[5].strip() if len(fields) > 5 else b""
            if name:
                high = _safe_end(name, low, high, int(fields[2], 16), page, sizes)
                if high <= low:
                    continue
            _extend(readable, low, high)
            if perms[1:2] == b"w":
                _extend(writable, low, high)
        return readable, writable


def _page_size():
    try:
        return os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 4096


_SAFE_PSEUDO = (b"[heap]", b"[stack", b"[anon")


def _safe_end(name, low, high, offset, page, sizes):
    """The end of the part of a named mapping that can be read without a fault: all of the heap,
    stacks and named anonymous memory, and of shared anonymous memory; of a regular file the
    pages its current size covers; nothing of anything else."""
    if name.startswith(b"["):
        return high if name.startswith(_SAFE_PSEUDO) else low
    if name in (b"/dev/zero (deleted)", b"/dev/zero") or name.startswith(b"/SYSV"):
        return high                    # shared anonymous memory, System V shared memory
    if name.endswith(b" (deleted)") or not name.startswith(b"/"):
        return low                     # a deleted file, a memfd: it may have shrunk since
    size = sizes.get(name)
    if size is None:
        try:
            st = os.stat(name)
            size = st.st_size if stat.S_ISREG(st.st_mode) else -1
        except OSError:
            size = -1
        sizes[name] = size
    if size < 0:
        return low                     # a device (a GPU's memory), a file gone
    covered = -(-(size - offset) // page) * page
    return min(high, low + max(covered, 0))


def _extend(runs, low, high):
    starts, ends = runs
    if ends and ends[-1] == low:
        ends[-1] = high                # contiguous with the last: one stretch
    else:
        starts.append(low)
        ends.append(high)


def _run_of(runs, start, end):
    starts, ends = runs
    k = bisect.bisect_right(starts, start) - 1
    if k >= 0 and end <= ends[k]:
        return starts[k], ends[k]
    return None


#: this process's memory, for every launch
process_memory = ProcessMemory()


def _not_memory_text(start, nbytes, write):
    """Why bytes ``start`` ... may not be touched: for the end of an error message."""
    span = f"0x{start:x}" if nbytes <= 1 else f"0x{start:x} to 0x{start + nbytes - 1:x}"
    if not process_memory.available:
        return (f"bytes {span}, which the simulator cannot check are memory of this process "
                f"(there is no {process_memory.path} here), so it refuses them rather than risk "
                f"crashing the process (a pointer into a simulated device array or into an "
                f"array argument of the same launch is checked against that array)")
    return (f"bytes {span}, which are not {'writable' if write else 'readable'} memory of "
            f"this process (on the GPU: an illegal address)")


# ---------------------------------------------------------------------------------------------
# Pointers


class RawPointer:
    """A pointer argument (``CPointer`` in a signature given to cuda.jit) in the simulator: an
    address of host memory (``array.ctypes.data``), indexed like the device pointer.

    When the address is inside a simulated device array (or an array argument of the same
    launch), an index outside that memory raises an IndexError naming the thread and line, as
    an array index does.  Elsewhere each access must touch memory of this process (readable,
    writable for a store: ``ProcessMemory``), or it raises the same way, naming the address:
    what would crash the process is the GPU's illegal address."""

    def __init__(self, address, dtype, conv=None):
        self.address, self.dtype = address, dtype
        self._buffer = (ctypes.c_char * dtype.itemsize)
        self._launch = None if conv is None else conv.launch
        arrays = () if conv is None else [v._a for v in conv.values if isinstance(v, SimArray)]
        self.bounds = allocation_around(address, arrays)
        if self.bounds is None and address:
            # (a host array the launching code holds: h.ctypes.data)
            self.bounds = host_array_around(address, sys._getframe(1))
        self._mapped = [None, None]   # the stretches of mapped memory seen: for loads, stores
        if self.bounds is None and conv is not None and \
                not getattr(conv, "memory_read", False):
            # once per launch: memory unmapped since an earlier launch read the maps must fail
            process_memory.refresh()
            conv.memory_read = True

    def _element(self, i, write=False):
        i = int(i)
        size = self.dtype.itemsize
        start = self.address + i * size
        bounds = self.bounds
        if bounds is not None:
            if not bounds[0] <= start <= bounds[1] - size:
                self._out_of_bounds(i)
        else:
            run = self._mapped[write]
            if run is None or not run[0] <= start <= run[1] - size:
                run = process_memory.run(start, start + size, write)
                if run is None and self.address == 0:
                    raise IndexError(f"index {i} of a null pointer to {self.dtype} "
                                     f"{'stores to' if write else 'reads'} address "
                                     f"0x{start:x} (the GPU's illegal address), in "
                                     f"{current_place()}{self._where()}")
                if run is None:
                    raise IndexError(f"index {i} of a pointer to {self.dtype} at "
                                     f"0x{self.address:x} {'stores to' if write else 'reads'} "
                                     f"{_not_memory_text(start, size, write)}, in "
                                     f"{current_place()}{self._where()}")
                self._mapped[write] = run
        return np.frombuffer(self._buffer.from_address(start), self.dtype, 1)

    def _where(self):
        return f", {self._launch.where()}" if self._launch is not None else ""

    def _out_of_bounds(self, i):
        low, high = self.bounds
        size = self.dtype.itemsize
        first, last = -((self.address - low) // size), (high - self.address) // size - 1
        raise IndexError(f"index {i} of a pointer to {self.dtype} is outside the allocation it "
                         f"points into ({high - low} bytes; indices {first} to {last} from this "
                         f"pointer are in it), in {current_place()}{self._where()}")

    def __getitem__(self, i):
        return self._element(i)[0]

    def __setitem__(self, i, value):
        if self.dtype.kind in "iu":
            value = wrap_int(int(value), self.dtype)      # a store truncates, as on the device
        self._element(i, True)[0] = value

    def __repr__(self):
        return f"<pointer to {self.dtype} at 0x{self.address:x}>"


class PointerArrays:
    """``numba.carray(ptr, shape, dtype=None)`` / ``numba.farray`` in simulated device code: a
    view of the memory a pointer points to, in C / Fortran order, bounds-checked as any array
    (``SimArray``).  The pointer is a ``RawPointer`` argument or a CFFI pointer
    (``ffi.from_buffer(array)``), the two the compiled code takes; its memory must hold the
    whole view: the allocation it points into where that is known, else memory of this process
    (``ProcessMemory``; a view of read-only memory is read-only).  Anything else is Numba's own
    function's (ctypes pointers)."""

    def __init__(self, original, launch):
        self._original = original
        self._launch = launch
        self._order = "F" if original.__name__ == "farray" else "C"
        self._name = f"numba.{original.__name__}"

    def __call__(self, ptr, shape, dtype=None):
        if isinstance(ptr, RawPointer):
            address, pointee, bounds = ptr.address, ptr.dtype, ptr.bounds
        else:
            found = _cffi_pointer(ptr)
            if found is None:
                return self._original(ptr, shape, dtype)
            address, pointee, bounds = found
        dt = _dtype_of(dtype) if dtype is not None else pointee
        if dt is None:
            raise TypeError(f"{self._name}(): explicit dtype required for a void* pointer, in "
                            f"{current_place()}, {self._launch.where()}")
        if pointee is not None and dt != pointee:
            raise TypeError(f"{self._name}(): mismatching dtype '{dt}' for a pointer to "
                            f"{pointee}, in {current_place()}, {self._launch.where()}")
        dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        dims = tuple(int(d) for d in dims)
        call = f"{self._name}(pointer, {dims[0] if len(dims) == 1 else dims}, {dt})"
        if any(d < 0 for d in dims):
            raise ValueError(f"{call}: a negative dimension, in {current_place()}, "
                             f"{self._launch.where()}")
        count = 1
        for d in dims:
            count *= d
        nbytes = count * dt.itemsize
        if nbytes == 0:
            return SimArray(np.empty(dims, dt, order=self._order), self._launch)
        if bounds is not None:
            if address + nbytes > bounds[1]:
                room = bounds[1] - address
                raise IndexError(f"{call} needs {nbytes} bytes from address 0x{address:x}, but "
                                 f"the allocation it points into ends {room} bytes after it "
                                 f"({room // dt.itemsize} elements of {dt}), in "
                                 f"{current_place()}, {self._launch.where()}")
            writable = True
        else:
            if process_memory.run(address, address + nbytes) is None:
                raise IndexError(f"{call} views {_not_memory_text(address, nbytes, False)}, in "
                                 f"{current_place()}, {self._launch.where()}")
            writable = process_memory.run(address, address + nbytes, True) is not None
        memory = (ctypes.c_char * nbytes).from_address(address)
        view = np.ndarray(dims, dt, buffer=memory, order=self._order)
        if not writable:
            view.flags.writeable = False
            return _ReadOnlyView(view, self._launch, False)
        return SimArray(view, self._launch)


class _ReadOnlyView(SimArray):
    """``numba.carray`` of memory this process may read but not write."""

    __slots__ = ()

    def __setitem__(self, idx, value):
        raise IndexError(f"a store at index {index_text(idx)} of a numba.carray view of memory "
                         f"that is not writable memory of this process (on the GPU: an illegal "
                         f"address), in {current_place()}, {self._sim.where()}")


def _dtype_of(spec):
    """The NumPy dtype that a ``dtype=`` argument of device code names (``np.float32``, a Numba
    type, the simulator's integer casters)."""
    if isinstance(spec, DeviceCaster):
        return spec.dtype
    from numba.core import types as nbtypes
    if isinstance(spec, nbtypes.Type):
        from numba.np import numpy_support
        return np.dtype(numpy_support.as_dtype(getattr(spec, "dtype", spec)
                                               if isinstance(spec, nbtypes.DTypeSpec) else spec))
    return np.dtype(spec)


_cffi = []


def _cffi_pointer(ptr):
    """``(address, element dtype, bounds)`` of a CFFI pointer (``ffi.from_buffer``: its buffer
    bounds it), or None for anything else."""
    if "_cffi_backend" not in sys.modules:
        return None
    import _cffi_backend
    if not isinstance(ptr, _cffi_backend._CDataBase):
        return None
    if not _cffi:
        import cffi
        _cffi.append(cffi.FFI())
    ffi = _cffi[0]
    ctype = ffi.typeof(ptr)
    if ctype.kind not in ("array", "pointer"):
        return None
    address = int(ffi.cast("uintptr_t", ptr))
    item = ctype.item
    dt = None if item.kind == "void" else _CFFI_DTYPES.get(item.cname)
    if item.kind != "void" and dt is None:
        return None
    if ctype.kind == "array":
        bounds = (address, address + ffi.sizeof(ptr))
    else:
        bounds = allocation_around(address)
    return address, dt, bounds


_CFFI_DTYPES = {name: np.dtype(code) for name, code in (
    ("float", "f4"), ("double", "f8"), ("int8_t", "i1"), ("int16_t", "i2"), ("int32_t", "i4"),
    ("int64_t", "i8"), ("uint8_t", "u1"), ("uint16_t", "u2"), ("uint32_t", "u4"),
    ("uint64_t", "u8"), ("_Bool", "b1"))}
