"""Arrays and scalars with the device's semantics.

``SimArray`` wraps a NumPy array the way a kernel sees it: element reads give scalars of the
element type (float32 stays float32, intrinsics see the integer width, integer arithmetic
widens as Numba's does), stores wrap integers to the element type as the device's truncating
stores do, and an index out of bounds raises an ``IndexError`` naming the thread, the
block, the source line and the index.
"""

from __future__ import annotations

import os
import sys
import weakref

import numpy as np

from ..compiler.bfloat16 import is_bfloat16_dtype
from ..compiler.fp8 import FP8Value
from ..errors import describe_location

try:
    from numpy.lib.array_utils import byte_bounds as _byte_bounds
except ImportError:                                  # NumPy 1.x
    _byte_bounds = np.byte_bounds

_INT_LIMITS = {}


def wrap_int(value, dtype):
    """``value`` (any integer) reduced modulo 2**bits into ``dtype``'s range, as a device integer
    (see ``_device_int_type``)."""
    lim = _INT_LIMITS.get(dtype)
    if lim is None:
        if dtype.kind in "mM":           # a timedelta64 is a NumPy integer too: no wrapping
            return value if isinstance(value, np.generic) else dtype.type(int(value))
        info = np.iinfo(dtype)
        lim = _INT_LIMITS[dtype] = (info.bits, 1 << info.bits, info.min < 0, info.min, info.max,
                                    _device_int_type(dtype))
    bits, modulus, signed, lo, hi, cls = lim
    v = int(value)
    if lo <= v <= hi:
        return cls(v)
    v &= modulus - 1
    if signed and v >> (bits - 1):
        v -= modulus
    return cls(v)


_I64, _U64 = np.dtype(np.int64), np.dtype(np.uint64)
_INT64_MIN = -(1 << 63)
_DEVICE_INT_TYPES = {}


def _int_power(a, b, unsigned):
    """``a ** b`` of two integers (Python ints in the operation's type, int64 or uint64) as
    Numba's ``int_power`` computes it, which the compiled code runs for every integer exponent
    (a literal one too: Numba types it as an int64): repeated squaring, wrapping at each step;
    a negative exponent gives 1 / a**-b in integers (0 unless a is 1 or -1), and 0 ** -n the
    numpy error model's INT64_MIN; an exponent above 0x10000 goes through ``math.pow(a,
    float(b))`` and converts back as the device converts a float (``cvt.rzi``, saturated:
    3 ** 70000 is INT64_MAX, not the wrapped power); and an exponent of INT64_MIN, whose
    negation overflows, raises Numba's OverflowError (the thread stops)."""
    dtype = _U64 if unsigned else _I64
    if b < 0:
        if b == _INT64_MIN:
            from .raises import device_error
            raise device_error(OverflowError())
        if a == 0:
            return wrap_int(_INT64_MIN, dtype)
        if a != 1 and a != -1:
            return wrap_int(0, dtype)
    if abs(b) > 0x10000:                  # (for -1 the parity of float(b), as pow sees it)
        from .hostmath import host_pow
        return cvt_rzi(host_pow(np.float64(a), np.float64(b)), dtype)
    if b < 0:
        return wrap_int(-1 if a == -1 and b % 2 else 1, dtype)
    return wrap_int(pow(a, b, 1 << 64), dtype)              # wrapped at each step

#: the types of values that already compute as the device does (device integers, NumPy floats
#: and complex numbers): ``operators`` lets these through untouched
DEVICE_VALUE_TYPES = {np.float16, np.float32, np.float64, np.complex64, np.complex128}


def _device_int_type(dtype):
    """A subclass of ``dtype``'s NumPy scalar type that computes as Numba types integers.

    Element reads, casts and intrinsics give these, so the integer width stays visible (``popc``,
    stores) while arithmetic follows Numba rather than NumPy: ``+ - * // % ** & | ^`` compute in
    64 bits, unsigned when both operands are unsigned (``uint8 + uint8`` is a uint64: 150 + 250
    does not wrap to 144), otherwise signed (``uint64 + int64`` is an int64, not NumPy's
    float64); a shift has the signedness of its left operand.  Unary ``-`` and ``~`` compute in
    the operand's own width and then widen, as Numba's lowering does (``-uint8(100)`` is 156, a
    uint64).  Floats and arrays mix as
    in NumPy, which matches Numba's scalar rules.
    """
    cls = _DEVICE_INT_TYPES.get(dtype)
    if cls is not None:
        return cls
    import operator
    base = dtype.type
    unsigned_self = dtype.kind == "u"

    def result(value, unsigned):
        return wrap_int(value, _U64 if unsigned else _I64)

    def binary(op, name):
        zero_div = name in ("floordiv", "mod")

        def compute(a, b, unsigned):
            if zero_div and b == 0:
                return result(0, unsigned)            # no exception on the device
            if not unsigned and (zero_div or name == "pow"):
                # a signed result: Numba converts both operands to int64 first, so a uint64
                # of 2**63 or more divides as a negative number
                a, b = int(wrap_int(a, _I64)), int(wrap_int(b, _I64))
                if zero_div and b == -1 and a == _INT64_MIN:
                    # Numba's int_divmod_signed tests for the one quotient that overflows
                    # (INT64_MIN // -1, and its remainder) and gives 0 for both, where the
                    # wrapped quotient would be INT64_MIN again
                    return result(0, unsigned)
            if name == "pow":
                return _int_power(a, b, unsigned)
            return result(op(a, b), unsigned)

        def forward(self, other):
            if isinstance(other, (int, np.integer)):
                return compute(int(self), int(other),
                               unsigned_self and isinstance(other, np.unsignedinteger))
            return op(base(self), other)

        def reflected(self, other):
            if isinstance(other, (int, np.integer)):
                return compute(int(other), int(self),
                               unsigned_self and isinstance(other, np.unsignedinteger))
            return op(other, base(self))
        return forward, reflected

    def shift(op, left_unsigned_of):
        def compute(a, count, unsigned):
            if count < 0 or count >= 64:
                return result(-1 if (op is operator.rshift and a < 0) else 0, unsigned)
            return result(op(a, count), unsigned)

        def forward(self, other):
            if isinstance(other, (int, np.integer)):
                return compute(int(self), int(other), unsigned_self)
            return op(base(self), other)

        def reflected(self, other):
            if isinstance(other, (int, np.integer)):
                return compute(int(other), int(self), left_unsigned_of(other))
            return op(other, base(self))
        return forward, reflected

    ns = {"__slots__": ()}
    for name, op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                     ("floordiv", operator.floordiv), ("mod", operator.mod),
                     ("pow", operator.pow), ("and", operator.and_), ("or", operator.or_),
                     ("xor", operator.xor)):
        ns[f"__{name}__"], ns[f"__r{name}__"] = binary(op, name)
    for name, op in (("lshift", operator.lshift), ("rshift", operator.rshift)):
        ns[f"__{name}__"], ns[f"__r{name}__"] = shift(
            op, lambda other: isinstance(other, np.unsignedinteger))
    if dtype == _U64 or dtype.kind == "i":
        # uint64 against a signed integer compares in float64 (Numba's typing: there is no
        # integer type for both); NumPy would compare the exact values
        def compare(name):
            parent = getattr(base, f"__{name}__")
            mixed = ((lambda o: isinstance(o, np.signedinteger) or type(o) is int)
                     if dtype == _U64 else (lambda o: isinstance(o, np.uint64)))
            op = getattr(operator, name)

            def apply(self, other):
                if mixed(other):
                    return op(float(self), float(other))
                return parent(self, other)
            return apply
        for name in ("eq", "ne", "lt", "le", "gt", "ge"):
            ns[f"__{name}__"] = compare(name)
        ns["__hash__"] = base.__hash__
    ns["__neg__"] = lambda self: result(int(wrap_int(-int(self), dtype)), unsigned_self)
    ns["__pos__"] = lambda self: result(int(self), unsigned_self)
    ns["__invert__"] = lambda self: result(int(wrap_int(~int(self), dtype)), unsigned_self)
    ns["__abs__"] = lambda self: wrap_int(abs(int(self)), dtype)
    ns["__repr__"] = lambda self: repr(base(self))
    cls = _DEVICE_INT_TYPES[dtype] = type(base.__name__, (base,), ns)
    cls.__module__ = __name__
    DEVICE_VALUE_TYPES.add(cls)
    return cls


def saturated_int(f, dtype):
    """The float ``f`` as an integer of ``dtype`` the way LLVM's ``llvm.fptosi.sat`` /
    ``llvm.fptoui.sat`` (what the 8-bit float and bfloat16 intrinsics compile to) convert it:
    truncated toward zero, saturated to the range (infinities too), NaN 0.  A plain conversion
    (a cast, a store) is ``cvt_rzi``'s instead."""
    if f != f:
        return dtype.type(0)
    info = np.iinfo(dtype)
    return dtype.type(int(max(min(f, info.max), info.min)))


def cvt_rzi(value, dtype):
    """The float ``value`` as an integer of ``dtype`` (a device integer) the way the compiled
    conversion (PTX ``cvt.rzi``; ``cvt.rzi.s16`` / ``u16`` and a truncation for 8-bit types)
    converts it on the GPU: truncated toward zero and saturated to the type's range, the
    infinities too.  A NaN gives what the hardware gives (measured on an H200): the sign bit
    alone (INT64_MIN, 2**63 unsigned) for a 64-bit result, and for a 32- or 16-bit one from a
    float64; 0 for a 32- or 16-bit one from a narrower float, and for 8-bit results."""
    f = float(value)
    bits = dtype.itemsize * 8
    width = 16 if bits == 8 else bits            # (8-bit results: converted to 16 bits first)
    if f != f:
        narrow = isinstance(value, (np.float32, np.float16)) or (
            isinstance(value, np.generic) and is_bfloat16_dtype(value.dtype))
        return wrap_int(1 << (width - 1) if width == 64 or not narrow else 0, dtype)
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if dtype.kind == "i" else \
        (0, (1 << width) - 1)
    if f in (float("inf"), float("-inf")):
        return wrap_int(hi if f > 0 else lo, dtype)
    return wrap_int(min(max(int(f), lo), hi), dtype)


def to_dtype_value(value, dtype):
    """``value`` converted as a store into an array of ``dtype`` converts it on the device (a
    float to an integer: ``cvt_rzi``, saturated)."""
    kind = dtype.kind
    if kind in "iu":
        if isinstance(value, (int, np.integer, np.bool_)):
            return wrap_int(value, dtype)
        if isinstance(value, FP8Value):
            return saturated_int(float(value), dtype)     # (as compiled: llvm.fptosi.sat)
        if isinstance(value, (float, np.floating)) or (
                isinstance(value, np.generic) and is_bfloat16_dtype(value.dtype)):
            return cvt_rzi(value, dtype)
        return value
    return value


def record_of(box):
    """The record held by ``box``, a 0-d structured array, as device code reads it: an
    ``np.record``, whose fields are attributes (``r.x``) as well as items (``r["x"]``), as
    Numba's Record type gives them (``np.void`` has items only); a write goes to ``box``."""
    return box.view(np.recarray)[()]


def constant_record(value):
    """A global record (``np.void``, as ``REC[0]`` gives it) as device code reads it: the
    compiled code folds its fields in as constants, so a copy whose fields read as
    ``record_of``'s and which refuses writes (``_ConstantRecord``)."""
    box = np.asarray(value).copy()     # (np.asarray(value) is a view of the record's array)
    box.flags.writeable = False
    return box.view(np.dtype((_ConstantRecord, box.dtype)))[()]


class _ConstantRecord(np.record):
    """A global record in device code.  Numba lowers each read of the global as a fresh
    copy of its bytes, so a write changes a temporary that a later read may or may not see
    (and never the host's record): the simulator refuses it, by name, rather than guess."""

    __slots__ = ()

    def __setattr__(self, name, value):
        self._refuse(name)

    def __setitem__(self, key, value):
        self._refuse(key)

    @staticmethod
    def _refuse(field):
        raise TypeError(f"a global record is a constant in device code: cannot write its field "
                        f"{field!r}, in {current_place()} (pass the record as a kernel argument "
                        f"to write it, or copy the field into a local variable)")


def _reader_of(dtype):
    """Conversion of elements read: integers become device integers of the element type
    (``_device_int_type``), floats stay NumPy scalars of the element type, as Numba types them.
    Booleans are read as Python bools: NumPy adds ``np.bool_`` values as a logical or,
    Numba (and Python) as integers (``a[i] + b[i]`` is 2 when both are true)."""
    if dtype.kind == "b":
        return bool
    if dtype.kind in "iu":
        return _device_int_type(dtype)
    return None


def _check_step(index):
    """A slice of step 0 is an error of the device code: Numba's compiled slicing raises it
    (a ValueError that stops the thread, reported with debug=True), where NumPy's would be an
    error of the simulator."""
    if type(index) is slice and index.step is not None and index.step == 0:
        from .raises import device_error
        raise device_error(ValueError("slice step cannot be zero"))


class DeviceCaster:
    """``int32(x)``, ``np.uint8(x)`` in device code: a conversion that wraps like the device's,
    still usable as a dtype (``cuda.local.array(4, int32)``)."""

    __slots__ = ("dtype", "name", "_host")

    def __init__(self, dtype, host):
        self.dtype = np.dtype(dtype)
        self.name = str(self.dtype)
        self._host = host

    def __call__(self, value=0):
        dt = self.dtype
        if dt.kind in "iu":
            return to_dtype_value(value, dt) if not isinstance(value, str) else dt.type(value)
        return dt.type(value)

    def __repr__(self):
        return f"<simulated {self._host!r}>"


_HERE = os.path.dirname(os.path.abspath(__file__))


def current_location(depth=1):
    """``(function, file, line)`` of the nearest frame outside the simulator (the user's code)."""
    f = sys._getframe(depth)
    while f is not None and f.f_code.co_filename.startswith(_HERE):
        f = f.f_back
    if f is None:
        return "?", "?", 0
    code = f.f_code
    return code.co_name, code.co_filename, f.f_lineno


def current_place():
    """``oob at file.py:4`` -- in a notebook ``oob at Cell In[3], line 4`` -- for the nearest
    frame outside the simulator: where an error of the kernel's code names its line."""
    name, filename, line = current_location()
    return f"{name} at {describe_location(filename, line, f'{filename}:{line}')}"


# The memory of the simulator's device arrays, so that a raw pointer into one (a CPointer
# argument) is bounds-checked: the simulator's device memory is the process's own, and a stray
# store through a pointer would corrupt it.  Keyed by id, dropped when the array dies.
_allocations = weakref.WeakValueDictionary()


class _DescribedMemory:
    """Memory that a ``__cuda_array_interface__`` describes, offered to NumPy (as its
    ``__array_interface__``); it keeps alive the array that owns the memory."""

    def __init__(self, interface, owner):
        self.__array_interface__ = interface
        self.owner = owner


def _owner(array):
    while True:
        base = array.base
        if isinstance(base, _DescribedMemory):       # a view made from an interface
            base = base.owner
        if not isinstance(base, np.ndarray):
            return array
        array = base


def remember_allocation(array):
    """Note the memory under ``array`` (a simulated device array)."""
    owner = _owner(array)
    _allocations[id(owner)] = owner


def allocation_around(address, arrays=()):
    """``(low, high)``, the byte bounds of the simulated device allocation (or of the memory
    under one of ``arrays``) that holds ``address``; None when none does."""
    for owner in [*_allocations.values(), *(_owner(a) for a in arrays)]:
        low, high = _byte_bounds(owner)
        if low <= address < high:
            return low, high
    return None


def host_array_around(address, frame):
    """``(low, high)``, the byte bounds of a host NumPy array that holds ``address`` and that
    the code running in ``frame`` or its callers holds (a local or global, or an item of a
    list, tuple or dict there): the allocation behind a pointer such as ``a.ctypes.data`` given
    to a kernel.  None when none is found (the pointer is then checked against the process's
    mapped memory only, which cannot tell one allocation from the next: a write past ``a``
    would land in the heap).  NumPy arrays are not tracked by the garbage collector, so this
    looks where a launch's caller keeps its arrays."""
    seen = set()

    def search(values):
        for v in values:
            if isinstance(v, (list, tuple)) and len(v) <= 256:
                items = v
            elif isinstance(v, dict) and len(v) <= 256 and not (
                    "__name__" in v and "__builtins__" in v):
                items = v.values()
            else:
                items = (v,)
            for a in items:
                if isinstance(a, np.ndarray) and not a.dtype.hasobject and a.size and \
                        id(a) not in seen:
                    seen.add(id(a))
                    owner = _owner(a)
                    low, high = _byte_bounds(owner)
                    if low <= address < high:
                        return low, high
        return None

    scanned = set()
    while frame is not None:
        for ns in (frame.f_locals, frame.f_globals):
            if id(ns) in scanned:
                continue
            scanned.add(id(ns))
            found = search(list(ns.values()))
            if found is not None:
                return found
        frame = frame.f_back
    return None


def checked_interface(obj, where):
    """The ``__cuda_array_interface__`` of ``obj`` (argument ``where`` of a launch: ``k:
    argument 0 ('a')``), checked before the simulator reads it, as a GPU launch checks it
    (``runtime.arguments.described_array``): a malformed one (no 'typestr', an unknown one,
    Python objects, no 'shape' or 'data', 'strides' for other dimensions, not a dict) is
    refused by name, with the GPU's words."""
    from ..runtime import arguments
    from ..runtime.streams import interface_stream_problem
    desc = obj.__cuda_array_interface__
    try:
        arguments.described_array(desc)
    except arguments.ArgumentError as exc:
        raise type(exc)(f"{where} {exc}") from None
    problem = interface_stream_problem(desc)
    if problem is not None:        # (in the GPU path's words: runtime/arguments.py _cai_handler)
        raise arguments.ArgumentError(f"{where} has an interface that names no stream: "
                                      f"{problem}")
    return desc


def null_data_problem(desc):
    """``runtime.arguments.null_data_problem`` of the ``__cuda_array_interface__`` ``desc``
    (checked well-formed: ``described_array``)."""
    from ..runtime.arguments import null_data_problem as problem
    return problem(tuple(desc["shape"]), desc["data"])


def view_described(desc, owner=None):
    """A NumPy array over the memory that the ``__cuda_array_interface__`` dictionary ``desc``
    describes, which must lie inside a simulated device array (or inside ``owner``, when it is
    a NumPy array); None when it does not: other memory may be a GPU's, which reading would
    crash the process.  A NULL address for elements lies in none (callers refuse it by name:
    ``null_data_problem``)."""
    if null_data_problem(desc) is not None:
        return None
    interface = {"shape": tuple(desc["shape"]), "typestr": desc["typestr"],
                 "data": tuple(desc["data"]), "strides": desc.get("strides"), "version": 3}
    if desc.get("descr"):
        interface["descr"] = [tuple(field) for field in desc["descr"]]
    probe = np.asarray(_DescribedMemory(interface, None))     # (reads no element)
    if probe.size == 0:
        return np.empty(probe.shape, probe.dtype)
    low, high = _byte_bounds(probe)
    owners = list(_allocations.values())
    if isinstance(owner, np.ndarray):
        owners.append(_owner(owner))
    for candidate in owners:
        start, end = _byte_bounds(candidate)
        if start <= low and high <= end:
            out = np.asarray(_DescribedMemory(interface, candidate))
            if isinstance(owner, np.ndarray) and owner.dtype != out.dtype and \
                    owner.dtype.descr == interface.get("descr"):
                out = out.view(owner.dtype)   # (a padded record: NumPy names the padding)
            return out
    return None


class SimArray:
    """A device array view over a NumPy array: bounds-checked, with device element types."""

    __slots__ = ("_a", "_read", "_sim", "shape", "size", "ndim", "dtype", "strides", "itemsize",
                 "_writable", "_int_store", "__weakref__")

    def __init__(self, array, sim, writable=True):
        if array.dtype.names is not None and not isinstance(array, np.recarray):
            array = array.view(np.recarray)
        self._a = array
        self._sim = sim                    # the launch (for thread/block names in errors)
        self.shape = array.shape
        self.size = array.size
        self.ndim = array.ndim
        self.dtype = array.dtype
        self.strides = array.strides
        self.itemsize = array.itemsize
        self._read = _reader_of(array.dtype)
        self._writable = writable and array.flags.writeable
        self._int_store = array.dtype.kind in "iu"

    # -- indexing -------------------------------------------------------------------------------
    def _check(self, idx):
        """``idx`` normalised (negative indices wrap, as Numba's do), or an IndexError."""
        shape = self.shape
        if type(idx) is tuple:
            if len(idx) != len(shape) or not all(isinstance(i, (int, np.integer)) for i in idx):
                if any(isinstance(i, (slice, type(None), type(Ellipsis))) for i in idx):
                    for i in idx:
                        _check_step(i)
                    return idx             # a slice: NumPy makes the view, bounds are clamped
                if len(idx) > len(shape):
                    self._oob(idx, f"too many indices ({len(idx)}) for a {len(shape)}-D array")
                return idx                 # fewer indices: a sub-array view
            out = []
            for axis, (i, n) in enumerate(zip(idx, shape)):
                i = int(i)
                if i < 0:
                    i += n
                    if i < 0:
                        self._oob(idx, f"index {int(idx[axis])} is out of bounds for axis "
                                       f"{axis} with size {n}")
                elif i >= n:
                    self._oob(idx, f"index {i} is out of bounds for axis {axis} with size {n}")
                out.append(i)
            return tuple(out)
        if isinstance(idx, (int, np.integer)):
            i = int(idx)
            n = shape[0] if shape else 0
            if not shape:
                self._oob(idx, "a 0-D array cannot be indexed with an integer")
            if i < 0:
                i += n
                if i < 0:
                    self._oob(idx, f"index {int(idx)} is out of bounds for axis 0 with size {n}")
            elif i >= n:
                self._oob(idx, f"index {i} is out of bounds for axis 0 with size {n}")
            return i
        _check_step(idx)
        return idx

    def _oob(self, idx, what):
        raise IndexError(f"{what}: index {index_text(idx)} of an array of shape {self.shape}, in "
                         f"{current_place()}, {self._sim.where()}")

    def __getitem__(self, idx):
        i = self._check(idx)
        v = self._a[i]
        if isinstance(v, np.ndarray):
            return SimArray(v, self._sim, self._writable)
        r = self._read
        return v if r is None else r(v)

    def __setitem__(self, idx, value):
        if not self._writable:
            raise TypeError(f"the array is read-only on the device (a constant or a read-only "
                            f"argument): cannot store at index {index_text(idx)}, in "
                            f"{current_place()}, {self._sim.where()}")
        i = self._check(idx)
        if isinstance(value, SimArray):
            value = value._a
        elif self._int_store and not isinstance(value, np.ndarray):
            value = to_dtype_value(value, self.dtype)
        self._a[i] = value

    # -- the rest of the array API kernels use --------------------------------------------------
    def __len__(self):
        return self.shape[0] if self.shape else 0

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    @property
    def T(self):
        return SimArray(self._a.T, self._sim, self._writable)

    def reshape(self, *shape, **kwargs):
        """A view of another shape, as Numba's ``array.reshape`` makes it (never a copy): a size
        that differs raises its ValueError, a layout that would need a copy its
        NotImplementedError, both errors of the device code (``raises.device_error``)."""
        if kwargs:
            return SimArray(self._a.reshape(*shape, **kwargs), self._sim, self._writable)
        from .raises import device_error
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        shape = [int(s) for s in shape]
        # (Numba's normalize_reshape_value)
        negative = [ax for ax, s in enumerate(shape) if s < 0]
        known = 1
        for s in shape:
            known *= s if s >= 0 else 1
        size = self._a.size
        if len(negative) > 1:
            raise device_error(ValueError("multiple negative shape values"))
        if negative:
            ok = size == 0 if known == 0 else size % known == 0
            shape[negative[0]] = 0 if known == 0 else size // known
        else:
            ok = size == known
        if not ok:
            raise device_error(ValueError("total size of new array must be unchanged"))
        try:
            try:
                view = self._a.reshape(tuple(shape), copy=False)
            except TypeError:                               # NumPy < 2.1: no copy=
                view = self._a.view()
                view.shape = tuple(shape)
        except (ValueError, AttributeError):                # it would need a copy
            raise device_error(NotImplementedError("incompatible shape for array")) from None
        return SimArray(view, self._sim, self._writable)

    def __getattr__(self, name):
        # Anything else (``copy``, ``reshape``, ``view``...) on the underlying array, unless the
        # compiled code runs a user's extending.overload_method / overload_attribute of arrays
        # for the name (``a.trace()``: a target's own template comes before Numba's own); what
        # the array has not, such an overload (a user's or Numba's) may give
        if name[:1] != "_":
            from .lang.overloads import NOT_OVERLOADED, overloaded_array_attribute
            found = overloaded_array_attribute(self, name)
            if found is not NOT_OVERLOADED:
                return found
        try:
            attr = getattr(self._a, name)
        except AttributeError:
            if name.startswith("__"):
                raise
            from .lang.overloads import array_attribute
            return array_attribute(self, name)
        if isinstance(attr, np.ndarray):
            return SimArray(attr, self._sim, self._writable)
        return attr

    def __array__(self, dtype=None, copy=None):
        return self._a if dtype is None else self._a.astype(dtype)

    def __repr__(self):
        return f"<simulated device array shape={self.shape} dtype={self.dtype}>"


def index_text(idx):
    if isinstance(idx, tuple):
        return "(" + ", ".join(index_text(i) for i in idx) + ("," if len(idx) == 1 else "") + ")"
    if isinstance(idx, np.integer):
        return str(int(idx))
    return repr(idx)
