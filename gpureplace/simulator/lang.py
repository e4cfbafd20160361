"""The kernel language on the host: what each ``gpureplace.cuda`` stub means in a simulated launch.

``language(launch)`` returns ``{id(stub): simulated value}`` for every stub and namespace of the
kernel language; the values read the running thread's indices from ``launch.tls``.
"""

from __future__ import annotations

import sys
import types as pytypes

import numpy as np
from numba.core import types as nbtypes
from numba.np import numpy_support

from ..compiler.intrinsics import atomics, bits, cg, indexing, memory, sync, vectors, warp
from . import hostmath
from .arrays import SimArray, to_dtype_value, wrap_int


class _Dim3Like:
    """threadIdx / blockIdx / blockDim / gridDim in the simulator (print shows (x, y, z))."""
    __slots__ = ()


class _Dim3(_Dim3Like):
    __slots__ = ("x", "y", "z")

    def __init__(self, dims):
        self.x, self.y, self.z = dims

    def __repr__(self):
        return f"dim3({self.x}, {self.y}, {self.z})"


def _check_alignment(alignment, what):
    if alignment is None:
        return
    if isinstance(alignment, bool) or not isinstance(alignment, (int, np.integer)):
        raise TypeError(f"{what}(..., alignment=...): alignment must be a constant integer (a "
                        f"power of two), got {alignment!r}")
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"{what}(..., alignment={alignment}): Alignment must be a positive "
                         f"power of two")


def _aligned_zeros(dims, dt, alignment):
    """Zeros of ``dims`` and ``dt`` whose address is a multiple of ``alignment`` (or of NumPy's
    own alignment when None), as the device places the array."""
    if not alignment:
        return np.zeros(dims, dt)
    nbytes = int(np.prod(dims, dtype=np.int64)) * dt.itemsize
    raw = np.zeros(nbytes + alignment, np.uint8)
    start = (-raw.ctypes.data) % alignment
    return raw[start:start + nbytes].view(dt).reshape(dims)


def _element_of(dtype, what):
    """(NumPy dtype of the storage, vector type or None) of a shared or local array's
    ``dtype``: a vector type (``cuda.float32x4``) is stored as its elements."""
    vt = getattr(dtype, "vector_type", None)
    return _dtype_of(dtype if vt is None else str(vt.element), what), vt


def _storage(dims, dt, vt, alignment):
    """The zeroed NumPy storage of an array of ``dims``: a vector's elements on a last axis."""
    return _aligned_zeros(dims if vt is None else dims + (vt.count,), dt, alignment)


def _dtype_of(dtype, what):
    if getattr(dtype, "__name__", None) == "_INT":
        return np.dtype(np.int64)          # the simulator's ``int``
    if isinstance(dtype, nbtypes.Type):
        try:
            return numpy_support.as_dtype(dtype)
        except NotImplementedError:
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


def device_format(value):
    """One printed item, as the device's printf renders it."""
    if value is None:
        return "None"
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return "%f" % float(value)
    if isinstance(value, (complex, np.complexfloating)):
        return "(%f%+fj)" % (float(value.real), float(value.imag))
    if isinstance(value, _Dim3Like):
        value = (value.x, value.y, value.z)
    if isinstance(value, tuple):
        inner = ", ".join(device_format(v) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})"
    raise TypeError(f"print() in device code cannot print a value of type "
                    f"{type(value).__name__}; it prints numbers, booleans, None, string "
                    f"constants and tuples of these")


_U32, _I32 = np.dtype(np.uint32), np.dtype(np.int32)


def _value_of(v):
    """A shuffled / matched value as the device carries it (booleans become int32)."""
    if isinstance(v, (bool, np.bool_)):
        return wrap_int(1 if v else 0, _I32)
    return v


class SimVector:
    """A value of a CUDA vector type (``cuda.float32x4(...)``) in the simulator: its elements
    are the attributes ``x``, ``y``, ``z``, ``w``, of the element type; it cannot be changed."""

    __slots__ = ("vector_type", "_values")

    def __init__(self, vector_type, values):
        object.__setattr__(self, "vector_type", vector_type)
        object.__setattr__(self, "_values", tuple(values))

    def __getattr__(self, name):
        fields = vectors.FIELDS
        if name in fields and fields.index(name) < len(self._values):
            return self._values[fields.index(name)]
        raise AttributeError(f"{self.vector_type.name} has no attribute {name!r}")

    def __setattr__(self, name, value):
        raise AttributeError(f"{self.vector_type.name} values cannot be changed")

    def __repr__(self):
        return f"{self.vector_type.name}({', '.join(str(v) for v in self._values)})"


class SimVectorArray:
    """``cuda.as_vectors(a, n)`` in the simulator: the NumPy array seen as vectors of ``n``
    elements along its last axis (a view: stores reach the array)."""

    __slots__ = ("_a", "vector_type", "_launch", "_writable", "shape", "size", "ndim", "dtype")

    def __init__(self, grouped, vector_type, launch, writable=True):
        self._a = grouped                          # shape (..., n // count, count)
        self.vector_type, self._launch = vector_type, launch
        self._writable = writable and grouped.flags.writeable
        self.shape = grouped.shape[:-1]
        self.size = int(np.prod(self.shape))
        self.ndim = len(self.shape)
        self.dtype = vector_type

    def __len__(self):
        return self.shape[0]

    def _index(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != self.ndim or not all(isinstance(i, (int, np.integer)) for i in idx):
            self._fail(idx, f"index with {self.ndim} integer(s)")
        out = []
        for axis, (i, n) in enumerate(zip(idx, self.shape)):
            i = int(i)
            j = i + n if i < 0 else i
            if not 0 <= j < n:
                self._fail(idx, f"index {i} is out of bounds for axis {axis} with size {n}")
            out.append(j)
        return tuple(out)

    def _fail(self, idx, what):
        from .arrays import _show, current_location
        name, filename, line = current_location()
        raise IndexError(f"{what}: index {_show(idx)} of a {self.vector_type.name} array of shape "
                         f"{self.shape}, in {name} at {filename}:{line}, {self._launch.where()}")

    def __getitem__(self, idx):
        row = self._a[self._index(idx)]
        return SimVector(self.vector_type, [row.dtype.type(x) for x in row])

    def __setitem__(self, idx, value):
        if not isinstance(value, SimVector) or value.vector_type is not self.vector_type:
            raise TypeError(f"a {self.vector_type.name} array stores "
                            f"cuda.{self.vector_type.name}(...) values, got {value!r}")
        if not self._writable:
            self._fail(idx, "the array is read-only")
        self._a[self._index(idx)] = value._values


def _vector_constructor(vt):
    dtype = np.dtype(str(vt.element))

    def construct(*args):
        values = []
        for a in args:
            if isinstance(a, SimVector):
                values += a._values
            else:
                values.append(dtype.type(to_dtype_value(_value_of(a), dtype)))
        if len(values) != vt.count:     # (the compiler refuses this first)
            raise TypeError(f"cuda.{vt.name}(): needs {vt.count} element(s), got {len(values)}")
        return SimVector(vt, values)
    construct.__name__ = vt.name
    construct.vector_type = vt                 # (also a dtype of shared and local arrays)
    return construct


def language(launch):
    """The simulated kernel language of ``launch``: ``{id(stub): value}``."""
    tls = launch.tls
    bdim, gdim = launch.block, launch.grid
    out = {}

    # -- indexing ---------------------------------------------------------------------------------
    # Indices are device integers, as typed: threadIdx / blockIdx / blockDim / gridDim, laneid
    # and warpsize int32, grid / gridsize int64 (a Python int would not wrap, and would be
    # "weak" next to a float32)
    i32 = type(wrap_int(0, _I32))
    i64 = type(wrap_int(0, np.dtype(np.int64)))
    tids = {}                                   # index tuple -> its device int32 values

    def dev3(t):
        hit = tids.get(t)
        if hit is None:
            hit = tids[t] = tuple(i32(v) for v in t)
        return hit

    class ThreadIdx(_Dim3Like):
        __slots__ = ()
        x = property(lambda self: dev3(tls.t.tid)[0])
        y = property(lambda self: dev3(tls.t.tid)[1])
        z = property(lambda self: dev3(tls.t.tid)[2])

    class BlockIdx(_Dim3Like):
        __slots__ = ()
        x = property(lambda self: dev3(tls.t.bid)[0])
        y = property(lambda self: dev3(tls.t.bid)[1])
        z = property(lambda self: dev3(tls.t.bid)[2])

    out[id(indexing.threadIdx)] = ThreadIdx()
    out[id(indexing.blockIdx)] = BlockIdx()
    out[id(indexing.blockDim)] = _Dim3(dev3(bdim))
    out[id(indexing.gridDim)] = _Dim3(dev3(gdim))
    bx, by, bz = bdim
    gx, gy, gz = gdim

    def grid(ndim):
        t = tls.t
        tid, bid = t.tid, t.bid
        if ndim == 1:
            return i64(bid[0] * bx + tid[0])
        if ndim == 2:
            return (i64(bid[0] * bx + tid[0]), i64(bid[1] * by + tid[1]))
        if ndim == 3:
            return (i64(bid[0] * bx + tid[0]), i64(bid[1] * by + tid[1]),
                    i64(bid[2] * bz + tid[2]))
        raise ValueError(f"cuda.grid(ndim): ndim must be 1, 2 or 3, got {ndim!r}")

    def gridsize(ndim):
        if ndim == 1:
            return i64(bx * gx)
        if ndim == 2:
            return (i64(bx * gx), i64(by * gy))
        if ndim == 3:
            return (i64(bx * gx), i64(by * gy), i64(bz * gz))
        raise ValueError(f"cuda.gridsize(ndim): ndim must be 1, 2 or 3, got {ndim!r}")

    out[id(indexing.grid)] = grid
    out[id(indexing.gridsize)] = gridsize
    out[id(indexing.warpsize)] = i32(32)
    # laneid is read per thread: the resolver asks ``launch.dynamic`` for it at each read
    launch.dynamic[id(indexing.laneid)] = lambda: i32(tls.t.lane)

    # -- barriers and fences ----------------------------------------------------------------------
    def syncthreads():
        t = tls.t
        t.block.barrier(t, None, False)

    def syncthreads_count(predicate):
        t = tls.t
        return wrap_int(t.block.barrier(t, "count", bool(predicate)), _I32)

    def syncthreads_and(predicate):
        t = tls.t
        return wrap_int(t.block.barrier(t, "and", bool(predicate)), _I32)

    def syncthreads_or(predicate):
        t = tls.t
        return wrap_int(t.block.barrier(t, "or", bool(predicate)), _I32)

    def syncwarp(mask=0xFFFFFFFF):
        t = tls.t
        t.block.warp_op(t, "syncwarp", mask, None, lambda g: dict.fromkeys(g.payload),
                        "cuda.syncwarp")

    def fence():
        pass

    def nanosleep(ns):
        if not isinstance(ns, (int, np.integer)) or isinstance(ns, bool):
            raise TypeError(f"cuda.nanosleep(ns): ns must be an integer number of nanoseconds, "
                            f"got {ns!r}")
        # the device may sleep anywhere from 0 to 2 * ns: a thread here does not sleep at all

    for stub, fn in ((sync.syncthreads, syncthreads), (sync.syncthreads_count, syncthreads_count),
                     (sync.syncthreads_and, syncthreads_and),
                     (sync.syncthreads_or, syncthreads_or), (sync.syncwarp, syncwarp),
                     (sync.threadfence, fence), (sync.threadfence_block, fence),
                     (sync.threadfence_system, fence), (sync.nanosleep, nanosleep)):
        out[id(stub)] = fn

    # -- memory -----------------------------------------------------------------------------------
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
                        arr = np.frombuffer(block.dynamic, dtype=dt, count=n)
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
                    arr = block.shared[site] = _wrap(_storage(dims, dt, vt, alignment), vt)
        return arr

    def local_array(shape, dtype, alignment=None):
        dims = _shape_of(shape, "cuda.local.array")
        _check_alignment(alignment, "cuda.local.array")
        if 0 in dims:
            raise ValueError(f"cuda.local.array: shape {dims} has a zero dimension (a local "
                             f"array needs a positive size)")
        dt, vt = _element_of(dtype, "cuda.local.array")
        return _wrap(_storage(dims, dt, vt, alignment), vt)

    def _wrap(arr, vt):
        """A shared or local array as kernels see it: of scalars, or of vectors ``vt`` (the
        NumPy array then has the vector's elements as its last axis)."""
        if vt is None:
            return SimArray(arr, launch)
        if arr.ndim == 1:                                  # the dynamic shared memory
            arr = arr[:len(arr) // vt.count * vt.count].reshape(-1, vt.count)
        return SimVectorArray(arr, vt, launch)

    consts = {}

    def const_array_like(ndarray):
        src = ndarray._a if isinstance(ndarray, SimArray) else ndarray
        if not isinstance(src, np.ndarray):
            raise TypeError(f"cuda.const.array_like(arr): arr must be a global NumPy array, got "
                            f"{type(ndarray).__name__}")
        hit = consts.get(id(src))
        if hit is None:
            copy = np.array(src, copy=True)
            copy.flags.writeable = False
            hit = consts[id(src)] = (src, SimArray(copy, launch, writable=False))
        return hit[1]

    # -- cooperative groups -------------------------------------------------------------------------
    class GridGroup:
        """``cuda.cg.this_grid()``: ``sync()`` is a barrier across every block (they run at once
        in the simulator's grid mode)."""

        __slots__ = ()

        def sync(self):
            t = tls.t
            barrier = launch.grid_barrier
            if barrier is None:
                raise RuntimeError("cuda.cg.this_grid().sync() reached outside the simulator's "
                                   "grid mode (the grid group came from code the simulator did "
                                   "not see before the launch)")
            t.block.barrier(t, None, True, before_release=barrier.arrive)

    the_grid = GridGroup()

    def this_grid():
        return the_grid

    out[id(cg.this_grid)] = this_grid
    out[id(cg.cg)] = pytypes.SimpleNamespace(this_grid=this_grid)

    out[id(memory.shared)] = pytypes.SimpleNamespace(array=shared_array)
    out[id(memory.shared.array)] = shared_array
    out[id(memory.local)] = pytypes.SimpleNamespace(array=local_array)
    out[id(memory.local.array)] = local_array
    out[id(memory.const)] = pytypes.SimpleNamespace(array_like=const_array_like)
    out[id(memory.const.array_like)] = const_array_like

    # -- atomics ----------------------------------------------------------------------------------
    lock = launch.atomic_lock

    def _target(fname, ary, idx):
        if not isinstance(ary, SimArray):
            raise TypeError(f"cuda.atomic.{fname}(): the first argument must be an array, got "
                            f"{type(ary).__name__}")
        if not ary._writable:
            raise TypeError(f"cuda.atomic.{fname}(): the array is read-only")
        return ary._a, ary._check(idx)

    def _read(ary, old):
        r = ary._read
        return old if r is None else r(old)

    def _nan(v):
        return v != v

    def _rmw(fname, update):
        def op(ary, idx, val):
            a, i = _target(fname, ary, idx)
            dt = a.dtype
            with lock:
                old = a[i]
                a[i] = to_dtype_value(update(old, _conv(val, dt), dt), dt)
            return _read(ary, old)
        op.__name__ = fname
        return op

    def _conv(val, dt):
        return to_dtype_value(val, dt) if dt.kind in "iu" else dt.type(val)

    def _int_only(fname, fn):
        def update(old, val, dt):
            if dt.kind not in "iu":
                raise TypeError(f"cuda.atomic.{fname}(): unsupported array dtype {dt}; "
                                f"supported dtypes are int32, uint32, int64, uint64")
            return fn(int(old), int(val), dt)
        return update

    def _max(old, val, dt):
        if dt.kind == "f" and (_nan(old) or _nan(val)):
            return old
        return val if val > old else old

    def _min(old, val, dt):
        if dt.kind == "f" and (_nan(old) or _nan(val)):
            return old
        return val if val < old else old

    def _nanmax(old, val, dt):
        if _nan(val):
            return old
        if _nan(old):
            return val
        return val if val > old else old

    def _nanmin(old, val, dt):
        if _nan(val):
            return old
        if _nan(old):
            return val
        return val if val < old else old

    def _inc(old, val, dt):
        return 0 if old >= val else old + 1

    def _dec(old, val, dt):
        return val if (old == 0 or old > val) else old - 1

    def _arith(fn):
        def update(old, val, dt):
            if dt.kind in "iu":
                return fn(int(old), int(val))
            return fn(old, val)
        return update

    ops = {
        "add": _arith(lambda o, v: o + v), "sub": _arith(lambda o, v: o - v),
        "max": _max, "min": _min, "nanmax": _nanmax, "nanmin": _nanmin,
        "exch": lambda o, v, dt: v,
        "and_": _int_only("and_", lambda o, v, dt: o & v),
        "or_": _int_only("or_", lambda o, v, dt: o | v),
        "xor": _int_only("xor", lambda o, v, dt: o ^ v),
        "inc": _int_only("inc", lambda o, v, dt: _inc(o & _umask(dt), v & _umask(dt), dt)),
        "dec": _int_only("dec", lambda o, v, dt: _dec(o & _umask(dt), v & _umask(dt), dt)),
    }
    ns = {}
    for name, update in ops.items():
        ns[name] = fn = _rmw(name, update)
        out[id(atomics._stubs[name])] = fn

    def cas(ary, idx, old, val):
        a, i = _target("cas", ary, idx)
        dt = a.dtype
        with lock:
            cur = a[i]
            if cur == _conv(old, dt):
                a[i] = _conv(val, dt)
        return _read(ary, cur)

    def compare_and_swap(ary, old, val):
        return cas(ary, 0, old, val)

    ns["cas"] = cas
    ns["compare_and_swap"] = compare_and_swap
    out[id(atomics.cas)] = cas
    out[id(atomics.compare_and_swap)] = compare_and_swap
    out[id(atomics.atomic)] = pytypes.SimpleNamespace(**ns)

    # -- warps ------------------------------------------------------------------------------------
    def _shuffle(stub, source):
        what = f"cuda.{stub.__name__}"

        def compute(g):
            res = {}
            for lane, (value, arg) in g.payload.items():
                src = source(lane, int(arg))
                res[lane] = g.payload[src][0] if src is not None and src in g.payload else value
            return res

        def shfl(mask, value, arg):
            t = tls.t
            return t.block.warp_op(t, stub.__name__, mask, (_value_of(value), arg), compute,
                                   what)
        shfl.__name__ = stub.__name__
        return shfl

    out[id(warp.shfl_sync)] = _shuffle(warp.shfl_sync, lambda lane, src: src & 31)
    out[id(warp.shfl_up_sync)] = _shuffle(
        warp.shfl_up_sync, lambda lane, d: lane - d if lane - d >= 0 else None)
    out[id(warp.shfl_down_sync)] = _shuffle(
        warp.shfl_down_sync, lambda lane, d: lane + d if lane + d < 32 else None)
    out[id(warp.shfl_xor_sync)] = _shuffle(warp.shfl_xor_sync, lambda lane, m: (lane ^ m) & 31)

    def _vote(stub, reduce):
        what = f"cuda.{stub.__name__}"

        def compute(g):
            r = reduce(g)
            return dict.fromkeys(g.payload, r)

        def vote(mask, predicate):
            t = tls.t
            return t.block.warp_op(t, stub.__name__, mask, bool(predicate), compute, what)
        vote.__name__ = stub.__name__
        return vote

    def _ballot(g):
        bits_ = 0
        for lane, p in g.payload.items():
            if p:
                bits_ |= 1 << lane
        return wrap_int(bits_, np.dtype(np.int32))

    out[id(warp.ballot_sync)] = _vote(warp.ballot_sync, _ballot)
    out[id(warp.all_sync)] = _vote(warp.all_sync, lambda g: all(g.payload.values()))
    out[id(warp.any_sync)] = _vote(warp.any_sync, lambda g: any(g.payload.values()))
    out[id(warp.eq_sync)] = _vote(warp.eq_sync, lambda g: len(set(g.payload.values())) <= 1)

    def _match_any(g):
        res = {}
        for lane, v in g.payload.items():
            m = 0
            for other, w in g.payload.items():
                if w == v:
                    m |= 1 << other
            res[lane] = wrap_int(m, np.dtype(np.int32))
        return res

    def _match_all(g):
        vals = list(g.payload.values())
        same = all(v == vals[0] for v in vals)
        r = (wrap_int(g.arrived, np.dtype(np.int32)), True) if same else (np.int32(0), False)
        return dict.fromkeys(g.payload, r)

    def match_any_sync(mask, value):
        t = tls.t
        return t.block.warp_op(t, "match_any_sync", mask, _value_of(value), _match_any,
                               "cuda.match_any_sync")

    def match_all_sync(mask, value):
        t = tls.t
        return t.block.warp_op(t, "match_all_sync", mask, _value_of(value), _match_all,
                               "cuda.match_all_sync")

    def activemask():
        t = tls.t
        caller = sys._getframe(1)             # the call site: each side of a branch is its own
        return wrap_int(t.block.active_lanes(t, (caller.f_code, caller.f_lasti)), _U32)

    def lanemask_lt():
        return wrap_int((1 << tls.t.lane) - 1, _U32)

    out[id(warp.match_any_sync)] = match_any_sync
    out[id(warp.match_all_sync)] = match_all_sync
    out[id(warp.activemask)] = activemask
    out[id(warp.lanemask_lt)] = lanemask_lt

    # -- bits and arithmetic ----------------------------------------------------------------------
    for stub, fn in ((bits.popc, hostmath.popc), (bits.brev, hostmath.brev),
                     (bits.clz, hostmath.clz), (bits.ffs, hostmath.ffs),
                     (bits.fma, hostmath.fma), (bits.cbrt, hostmath.cbrt),
                     (bits.selp, hostmath.selp)):
        out[id(stub)] = fn
    for stub in set(vectors.constructors.values()):
        out[id(stub)] = _vector_constructor(stub.vector_type)
    out[id(bits.fp16)] = pytypes.SimpleNamespace(**hostmath.FP16)
    for name, fn in hostmath.FP16.items():
        out[id(getattr(bits.fp16, name))] = fn
    return out


def _umask(dt):
    return (1 << (dt.itemsize * 8)) - 1


#: Names whose use means the threads of a block must run concurrently.
SYNC_NAMES = frozenset([
    "syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp",
    "shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "ballot_sync", "all_sync",
    "any_sync", "eq_sync", "match_any_sync", "match_all_sync", "activemask"])

#: stubs whose use makes a launch run every block at once (the simulator's grid mode)
GRID_STUBS = frozenset((id(cg.this_grid),))
SYNC_STUBS = frozenset(id(getattr(mod, n)) for mod in (sync, warp) for n in SYNC_NAMES
                       if hasattr(mod, n))
