"""Launch arguments: Python values -> (type key, flat parameter values), fast.

Each Python type gets a handler, found once and cached, that returns the value's *type key* (what
selects the specialisation) and its flat parameter values in ABI order (``compiler.abi``).  The
Numba type is built from the key only when a key is seen for the first time.
"""

from __future__ import annotations

import enum
import re
import sys
import types as types_module
from collections.abc import Mapping

import numpy as np
from numba.core import types
from numba.np import numpy_support

from .. import probe
from ..compiler.abi import contiguous_strides, element_alignment, layout_of, misalignment
from ..compiler import fp8
from ..compiler.bfloat16 import bfloat16, host_dtype, is_bfloat16_dtype, register_dtype
from ..compiler.intrinsics.vectors import vector_types
from ..errors import LaunchError
from .hints import ArgHint
from .streams import interface_stream_problem, wait_for_interface_stream


class ArgumentError(LaunchError, TypeError):
    """An argument no kernel can take.  Its message says what is wrong with the value; a launch
    prefixes it with the kernel and the argument (``k: argument 0 ('t') is None, ...``).  For an
    item of a tuple the message starts ``item [1], ...`` (``_tuple_handler``), which that prefix
    turns into ``k: argument 0 ('t'), item t[1], ...``."""

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], str) and ") item " in args[0]:
            args = (_ITEM_OF_ARGUMENT.sub(r"argument \1 ('\2'), item \2", args[0], count=1),)
        super().__init__(*args)


#: ``argument 0 ('t') item [1]...`` (a launch's prefix before a tuple item's message)
_ITEM_OF_ARGUMENT = re.compile(r"argument (\d+) \('(\w+)'\) item (?=[\[.])")


def item_place(where, step):
    """``where`` (``k: argument 0 ('t')``, what names an argument in a message, or an item of
    one: ``k: argument 0 ('t'), item t[1],``) for its item ``step`` (``[0]``, or ``.x`` for a
    namedtuple's field): ``k: argument 0 ('t'), item t[1][0],``, as ``ArgumentError`` says it."""
    if where.endswith(","):
        return f"{where[:-1]}{step},"
    return str(ArgumentError(f"{where} item {step},"))


def _in_item(exc, step):
    """``exc`` (an ArgumentError of an item of a tuple) as the tuple's: ``item [1], is None``."""
    msg = str(exc)
    msg = f"item {step}{msg[5:]}" if msg.startswith("item ") else \
        f"item {step}{'' if msg.startswith('=') else ','} {msg}"
    return type(exc)(msg)


def array_argument(dt, ptr, shape, strides, readonly=False, aligned=True):
    """Key and values of an array: contiguous layouts pass no strides (``compiler.abi``).
    ``readonly``: the kernel gets it as a read-only array (a read-only host array's device
    copy): key kind "roarray", another specialisation, whose writes fail to compile.  An array
    whose elements are not all aligned as the compiled code loads them is refused (unless
    ``aligned`` is false: a host array the simulator reads in place)."""
    layout = layout_of(shape, strides, dt.itemsize)
    align = element_alignment(dt) if aligned else 1
    if align > 1 and (ptr % align or layout == "A" or dt.itemsize % align):
        problem = misalignment(dt, ptr, shape,
                               strides or contiguous_strides(shape, dt.itemsize))
        if problem is not None:
            raise ArgumentError(problem)
    key = ("roarray" if readonly else "array", dt, len(shape), layout)
    if layout == "A":
        return key, (ptr, *shape, *strides)
    return key, (ptr, *shape)


def cupy_handler(a):
    return array_argument(a.dtype, a.data.ptr, a.shape, a.strides)


def torch_handler(t):
    if not t.is_cuda:
        raise ArgumentError("is a PyTorch tensor on the CPU; move it to the GPU first (t.cuda())")
    dt = _torch_dtype(t.dtype)
    shape = tuple(t.shape)
    strides = tuple(s * dt.itemsize for s in t.stride())
    return array_argument(dt, t.data_ptr(), shape, strides)


_TORCH_DTYPES = {}


def _torch_dtype(tdt):
    dt = _TORCH_DTYPES.get(tdt)
    if dt is None:
        import torch
        name = str(tdt).replace("torch.", "")
        if tdt is torch.bool:
            name = "bool"
        try:
            dt = host_dtype() if tdt is torch.bfloat16 else np.dtype(name)
        except TypeError:
            raise ArgumentError(f"has PyTorch dtype {tdt}, which kernels cannot take") from None
        except ImportError as e:
            raise ArgumentError(f"has PyTorch dtype {tdt}: {e}") from None
        _TORCH_DTYPES[tdt] = dt
    return dt


def _cai_handler(obj):
    cai = obj.__cuda_array_interface__
    dt, shape, strides, ptr, readonly = described_array(cai)
    if cai.get("stream") is not None:
        problem = interface_stream_problem(cai)
        if problem is not None:
            raise ArgumentError(f"has an interface that names no stream: {problem}")
        # version 3: the producer's work on that stream comes first (numba-cuda waits too)
        wait_for_interface_stream(cai)
    if cai.get("mask") is not None:
        raise ArgumentError("has a masked __cuda_array_interface__ ('mask'): masked arrays "
                            "are not supported")
    # data[1], the read-only flag: typed read-only, as numba-cuda types it (and the simulator)
    return array_argument(dt, ptr, shape, strides or contiguous_strides(shape, dt.itemsize),
                          readonly)


def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def described_array(cai):
    """``(dtype, shape, strides or None, address, read-only)`` of the array that the
    ``__cuda_array_interface__`` ``cai`` describes, or an ArgumentError that says what is wrong
    with it (a message for ``k: argument 0 ('a') ...``): a launch checks it before reading it,
    on the GPU here (``_cai_handler``), in the simulator through ``simulator.arrays``."""
    if type(cai) is dict:
        # the common case, checked quickly (each fast-path launch of such an array asks):
        # tuples of Python ints, a dtype seen before, no record 'descr', no strides
        shape, data, typestr = cai.get("shape"), cai.get("data"), cai.get("typestr")
        dt = _INTERFACE_DTYPES.get(typestr) if type(typestr) is str else None
        if type(shape) is tuple and type(data) is tuple and len(data) == 2 and \
                type(data[0]) is int and data[0] > 0 and isinstance(dt, np.dtype) and \
                cai.get("strides") is None and cai.get("descr") is None:
            for n in shape:
                if type(n) is not int or n < 0:
                    break
            else:
                return dt, shape, None, data[0], bool(data[1])
    if type(cai) is not dict and not isinstance(cai, Mapping):
        raise ArgumentError(f"has a __cuda_array_interface__ that is a {type(cai).__qualname__}, "
                            f"not a dict (the CUDA Array Interface's 'shape', 'typestr', "
                            f"'data', ...)")
    for entry in ("shape", "typestr", "data"):
        if entry not in cai:
            raise ArgumentError(f"has a __cuda_array_interface__ without {entry!r} (the CUDA "
                                f"Array Interface requires 'shape', 'typestr' and 'data')")
    shape = cai["shape"]
    if not isinstance(shape, (tuple, list)) or not all(_is_int(n) and n >= 0 for n in shape):
        raise ArgumentError(f"has a __cuda_array_interface__ whose 'shape' is {shape!r}, not a "
                            f"tuple of non-negative ints")
    shape = tuple(int(n) for n in shape)
    dt = _interface_dtype(cai["typestr"], cai.get("descr"))
    data = cai["data"]
    if not isinstance(data, (tuple, list)) or len(data) != 2 or not (
            data[0] is None or _is_int(data[0]) and data[0] >= 0):
        raise ArgumentError(f"has a __cuda_array_interface__ whose 'data' is {data!r}, not "
                            f"(address, read-only flag)")
    strides = cai.get("strides")
    if strides is not None:
        if not isinstance(strides, (tuple, list)) or not all(_is_int(s) for s in strides):
            raise ArgumentError(f"has a __cuda_array_interface__ whose 'strides' is "
                                f"{strides!r}, not None or a tuple of ints (bytes)")
        if len(strides) != len(shape):
            raise ArgumentError(f"has a __cuda_array_interface__ whose 'strides' {strides!r} "
                                f"has {len(strides)} entries for the {len(shape)} dimensions "
                                f"of its 'shape' {shape!r}")
        strides = tuple(int(s) for s in strides)
    problem = null_data_problem(shape, data)
    if problem is not None:
        raise ArgumentError(f"has a __cuda_array_interface__ {problem}")
    return dt, shape, strides, int(data[0] or 0), bool(data[1])


def null_data_problem(shape, data):
    """What is wrong with an interface's 'data' ``data`` when it is a NULL address for
    elements (a kernel would read address 0: an illegal-address fault, which ends the CUDA
    context), said to follow "has a __cuda_array_interface__"; None otherwise.  Only an empty
    array may have no memory."""
    if data[0]:
        return None
    count = 1
    for n in shape:
        count *= int(n)
    if count == 0:
        return None
    return (f"whose 'data' is {tuple(data)!r}, a NULL address, for the {count} elements of its "
            f"'shape' {tuple(shape)!r} (only an empty array may have no memory)")


_INTERFACE_DTYPES = {}      # typestr -> dtype, or the ArgumentError's message


def _interface_dtype(typestr, descr):
    """The dtype of a ``__cuda_array_interface__``'s 'typestr' (its 'descr', for a record),
    checked to be one that kernels take."""
    fields = descr is not None and isinstance(descr, (list, tuple)) and len(descr) > 1
    hit = None if fields else _INTERFACE_DTYPES.get(typestr) if isinstance(typestr, str) \
        else None
    if hit is None:
        hit = _dtype_or_problem(typestr, descr if fields else None)
        if not fields and isinstance(typestr, str):
            _INTERFACE_DTYPES[typestr] = hit
    if isinstance(hit, str):
        raise ArgumentError(hit)
    return hit


def _dtype_or_problem(typestr, descr):
    said = f"'typestr' {typestr!r}" + ("" if descr is None else f" ('descr' {descr!r})")
    if not isinstance(typestr, str):
        return (f"has a __cuda_array_interface__ whose 'typestr' is {typestr!r}, not a NumPy "
                f"type string ('<f4', '<i8', ...)")
    try:
        dt = np.dtype(typestr)
        if descr is not None:
            dt = np.dtype([tuple(field) for field in descr])
    except Exception:
        return (f"has a __cuda_array_interface__ whose {said} is not a NumPy type string "
                f"('<f4', '<i8', ...)")
    if dt.hasobject:
        return (f"has a __cuda_array_interface__ whose {said} describes Python objects, which "
                f"kernels cannot take")
    if is_bfloat16_dtype(dt):
        register_dtype()
    try:
        _from_dtype(dt)
    except ArgumentError:
        return (f"has a __cuda_array_interface__ whose {said} is dtype {dt}, which kernels "
                f"cannot take")
    return dt


def _dlpack_handler(obj):
    return cupy_handler(probe.cupy_module().from_dlpack(obj))


class VectorArray:
    """``cuda.as_vectors(a, n)``: the C-contiguous device array ``a`` as a kernel sees it, an
    array of CUDA vector values of ``n`` elements along its last axis (``cuda.float32x4`` for
    ``n=4`` and float32 data), so that each element read or written is one wide memory access
    (16 bytes for float32x4, as CUDA C's ``float4``).  The address must be aligned to the
    vector's size (16 bytes at most): CuPy and PyTorch allocations are, views at other offsets
    may not be.  Simulated launches take NumPy arrays."""

    __slots__ = ("array", "count", "vector_type", "_cached")

    def __init__(self, array, count=4):
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 4:
            raise ValueError(f"as_vectors(a, n): n must be 1, 2, 3 or 4, got {count!r}")
        dt = getattr(array, "dtype", None)
        try:
            dt = np.dtype(str(dt))
        except TypeError:
            dt = None
        vt = vector_types.get(f"{dt.name}x{count}") if dt is not None else None
        if vt is None:
            raise ArgumentError(f"as_vectors(a, {count}): a has dtype {dt}; vector types hold "
                                f"int8 ... uint64, float32 or float64 elements")
        self.array, self.count, self.vector_type = array, count, vt
        self._cached = None
        if not isinstance(array, np.ndarray) or hasattr(array, "__cuda_array_interface__"):
            _vector_array_handler(self)             # checks layout, length and alignment now

    def __repr__(self):
        return f"cuda.as_vectors({type(self.array).__name__}, {self.count})"


def host_vectors_problem(v):
    """Why ``cuda.as_vectors`` of a host NumPy array cannot launch (both backends say it)."""
    return (f"as_vectors(a, {v.count}): a is a host NumPy array; vectors are a view of device "
            f"memory, and a launch copies only plain host-array arguments: pass "
            f"as_vectors(cuda.to_device(a), {v.count}) (or of a CuPy array)")


def vector_array_layout(shape, c_contiguous, vector_type, address, where="as_vectors"):
    """Check a view of an array as ``vector_type`` values; returns the shape in vectors."""
    count = vector_type.count
    if not shape:
        raise ArgumentError(f"{where}: a 0-d array has no axis to group into vectors")
    if not c_contiguous:
        raise ArgumentError(f"{where}: the array must be C-contiguous (vectors are consecutive "
                            f"elements of its last axis)")
    if shape[-1] % count:
        raise ArgumentError(f"{where}: the last axis ({shape[-1]} elements) is not a multiple "
                            f"of {count}")
    align = vector_type.alignment
    if address % align:
        raise ArgumentError(f"{where}: the data address 0x{address:x} is not aligned to "
                            f"{align} bytes (a view that starts at another element?)")
    return tuple(shape[:-1]) + (shape[-1] // count,)


def _vector_array_handler(v):
    cached = v._cached
    if cached is not None and cached[0] == v.array.shape:
        return cached[1], cached[2]
    where = f"as_vectors(a, {v.count})"
    if isinstance(v.array, np.ndarray) and not hasattr(v.array, "__cuda_array_interface__"):
        raise ArgumentError(host_vectors_problem(v))
    key, values = value_key(v.array)
    if key[0] not in ("array", "roarray"):
        raise ArgumentError(f"{where}: a must be a device array, got "
                            f"{type(v.array).__qualname__}")
    kind, dt, ndim, layout = key
    vshape = vector_array_layout(tuple(values[1:1 + ndim]), layout == "C", v.vector_type,
                                 values[0], where)
    # (a read-only array, a __cuda_array_interface__ marked so: read-only vectors)
    out = ("vectors", dt, v.count, ndim) + (("readonly",) if kind == "roarray" else ()), \
        (values[0], *vshape)
    if handler_of(v.array) is cupy_handler:
        # a CuPy array's address, dtype and strides cannot change; its shape can (in place)
        v._cached = (v.array.shape, *out)
    return out


def _hint_handler(hint):
    raise ArgumentError(f"is {type(hint).__name__}(...), a copy to or from the host around a "
                        f"single launch: prepared launches and CUDA graphs take device arrays")


def _numpy_array_handler(a):
    # A plain launch copies host arrays (runtime/transfers.py) before it gets here: what
    # remains are the paths that bind arguments beyond one launch.
    if not probe.available():
        raise ArgumentError(f"is a host NumPy array, and {probe.no_device_message()}")
    raise ArgumentError("is a host NumPy array: prepared launches and CUDA graphs take device "
                        "arrays (cupy.asarray(a), or cuda.to_device(a)); only a plain launch "
                        "copies host arrays to the device and back")


def bool_handler(v):
    return ("bool",), (v,)


_UINT64 = np.dtype(np.uint64)


def int_handler(v):
    if -(1 << 63) <= v < (1 << 63):
        return ("int64",), (v,)
    if 0 <= v < (1 << 64):
        return ("scalar", _UINT64), (v,)         # as Numba types it: uint64
    raise ArgumentError(f"= {v} does not fit in 64 bits (kernels take int64 or uint64 "
                        f"integers)")


def float_handler(v):
    return ("float64",), (v,)


def _complex_handler(v):
    return ("complex128",), (v.real, v.imag)


def np_scalar_handler(v):
    dt = v.dtype
    if is_bfloat16_dtype(dt):
        return ("bfloat16",), (int(v.view(np.uint16)),)     # ml_dtypes.bfloat16: its bits
    key = ("scalar", dt)
    if key not in _KEY_TYPES:
        numba_type_of_key(key)     # (a string, bytes, long double: refused now, by name)
    if dt.kind == "c":
        return key, (v.real, v.imag)
    if dt.kind in "mM":
        return key, (int(v.view(np.int64)),)     # datetime64 / timedelta64: units
    return key, (v,)


def fp8_handler(v):
    """An 8-bit float (``cuda.fp8.fp8_e4m3(1.5)`` on the host): its byte."""
    return ("fp8", v.type.kind), (v.x,)


def record_handler(v):
    """A structured scalar (``arr[i]`` of a record array): passed as a pointer to a device copy
    that the launch makes and copies back afterwards, as numba-cuda does (see
    ``kernel.GPUFunction._launch``); the value here is the record itself.  Each record gets a
    copy of its own, so a launch that also gives its array, or gives it twice, is refused
    (``transfers.refuse_overlaps``): one copy-back would overwrite what the kernel wrote
    through the other."""
    return ("record", v.dtype), (v,)


def holds_record(key):
    """Whether argument type key ``key`` is a record's (``recs[i]``: copied to the device and
    back around the launch, ``_launch_with_records``) or a tuple's or namedtuple's holding one
    at any depth."""
    kind = key[0]
    if kind == "record":
        return True
    if kind == "tuple":
        return any(holds_record(k) for k in key[1:])
    if kind == "namedtuple":
        return any(holds_record(k) for k in key[2:])
    return False


def record_places(kernel, names, argtypes):
    """How messages name each record among arguments of types ``argtypes`` (parameter names
    ``names``), in the order of their parameter values: ``k: argument 0 ('r')``, or
    ``k: argument 1 ('t'), item t[0],`` for one inside a tuple."""
    places = []

    def walk(ty, where):
        if isinstance(ty, types.Record):
            places.append(where)
        elif isinstance(ty, types.BaseTuple):
            fields = ty.fields if isinstance(ty, types.BaseNamedTuple) else None
            for j, t in enumerate(ty.types):
                walk(t, item_place(where, f".{fields[j]}" if fields else f"[{j}]"))
    for i, ty in enumerate(argtypes):
        walk(ty, f"{kernel}: argument {i} ({names[i] if i < len(names) else i!r})")
    return places


def read_only_record_written(where, before, after):
    """The error for a record of a read-only NumPy array (argument ``where``, as
    ``record_places`` names it) that a launch gave the kernel, when the kernel wrote it:
    ``before`` / ``after`` are its copy's bytes (0-d arrays of its dtype) before and after the
    launch; None when no field changed.  Such a record is never written back (nothing may be
    written into a read-only array; numba-cuda types records without a read-only flag and
    forces its copy back into the array's memory), so a kernel that only reads it runs as with
    any record, and one that writes it fails the launch, on both backends, as after any failed
    launch: nothing is copied back into host memory (records, host arrays), and device memory
    keeps what the kernel wrote."""
    changed = [name for name in before.dtype.names
               if before[name].tobytes() != after[name].tobytes()]
    if not changed:
        return None
    fields = ", ".join(repr(n) for n in changed)
    return ArgumentError(
        f"{where} is a record of a read-only NumPy array, which the kernel wrote (field"
        f"{'s' if len(changed) > 1 else ''} {fields}): nothing can be copied back into it, so "
        f"the launch failed and copied nothing back to the host; pass a record of a writable "
        f"array (recs.copy()[i])")


def device_record_handler(v):
    """``cuda.to_device(record)`` (hostapi's ``DeviceRecord``): the record in device memory,
    passed as its address as a record argument is (no copies around the launch)."""
    return ("device_record", v.dtype), (v.data.ptr,)


def _tuple_handler(tup, fields=None):
    keys, vals = [], []
    for i, item in enumerate(tup):
        try:
            k, v = value_key(item)
        except ArgumentError as exc:
            # (said of the item, not the whole tuple: "argument 0 ('t'), item t[1], is None")
            raise _in_item(exc, f"[{i}]" if fields is None else f".{fields[i]}") from None
        keys.append(k)
        vals.extend(v)
    return ("tuple", *keys), tuple(vals)


def _namedtuple_handler(tup):
    """A namedtuple keeps its class (fields by name in the kernel); values as a tuple's."""
    key, vals = _tuple_handler(tup, type(tup)._fields)
    return ("namedtuple", type(tup), *key[1:]), vals


def _enum_handler(v):
    """An ``enum.Enum`` / ``IntEnum`` member: passed as its value (an integer, a float, a tuple
    of them...), typed as Numba types the member (comparisons and ``.value`` in the kernel)."""
    if isinstance(v, enum.IntEnum):
        return ("enum", type(v), ("int64",)), (int(v.value),)
    key, values = value_key(v.value)
    return ("enum", type(v), key), values


def _constant_handler(v):
    # Types and dtypes are compile-time constants: part of the key, no parameter.
    return ("const", v), ()


_HANDLERS = {bool: bool_handler, int: int_handler, float: float_handler,
             complex: _complex_handler, tuple: _tuple_handler, np.ndarray: _numpy_array_handler,
             fp8.FP8Value: fp8_handler}


def _find_handler(cls, value):
    mod = cls.__module__ or ""
    if mod.startswith("cupy") and cls.__name__ == "ndarray":
        return cupy_handler
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(getattr(cupy, "ndarray", None), type) and \
            isinstance(value, cupy.ndarray):
        return cupy_handler           # a subclass (cuda.to_device's DeviceNDArray)
    if mod.startswith("torch") and hasattr(value, "data_ptr") and hasattr(value, "stride"):
        return torch_handler
    if isinstance(value, np.ndarray):
        # host memory, unless the GPU can address it (cuda.mapped_array)
        return _cai_handler if hasattr(value, "__cuda_array_interface__") else \
            _numpy_array_handler
    if isinstance(value, np.void) and value.dtype.names is not None:
        return record_handler
    if isinstance(value, ArgHint):
        return _hint_handler
    if isinstance(value, VectorArray):
        return _vector_array_handler
    if isinstance(value, np.generic):
        return np_scalar_handler
    if isinstance(value, (type, np.dtype, types.Type)):
        return _constant_handler
    if hasattr(value, "__cuda_array_interface__"):
        return _cai_handler
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        return _dlpack_handler
    if isinstance(value, enum.Enum):
        return _enum_handler
    if isinstance(value, bool):
        return bool_handler
    if isinstance(value, int):
        return int_handler
    if isinstance(value, float):
        return float_handler
    if isinstance(value, tuple):
        return _namedtuple_handler if hasattr(cls, "_fields") else _tuple_handler
    return None


def register_handler(cls, handler):
    """Pass values of exactly ``cls`` to kernels as ``handler(value)`` -> (key, values) says."""
    _HANDLERS[cls] = handler


def handler_of(value):
    cls = type(value)
    return _HANDLERS.get(cls) or _find_handler(cls, value)


def value_key(value):
    cls = type(value)
    handler = _HANDLERS.get(cls)
    if handler is None:
        handler = _find_handler(cls, value)
        if handler is None:
            if value is None:
                raise ArgumentError("is None, which kernels cannot take (arrays with "
                                    "__cuda_array_interface__ or DLPack, scalars, tuples and "
                                    "types can; a CPointer parameter takes an address, 0 for "
                                    "a null pointer)")
            raise ArgumentError(_function_argument_refusal(value) or
                                f"has type {cls.__module__}.{cls.__qualname__}, which kernels "
                                f"cannot take (arrays with __cuda_array_interface__ or DLPack, "
                                f"scalars, tuples and types can)")
        if cls is not np.void:       # (a record and raw bytes share the class: asked each time)
            _HANDLERS[cls] = handler
    return handler(value)


def _function_argument_refusal(value):
    """The message for a function passed to a kernel (a device function, a kernel, a Python
    function), which no launch can pass (numba-cuda neither), or None for another value."""
    if not callable(value) or isinstance(value, type) or not (
            hasattr(value, "py_func") or isinstance(value, types_module.FunctionType)):
        return None
    name = getattr(value, "__name__", "f")
    what = "the device function" if getattr(value, "device", False) else \
        "the cuda.jit function" if hasattr(value, "py_func") else "the Python function"
    return (f"is {what} {name}: kernels cannot take functions as arguments (numba-cuda "
            f"neither); call {name}(...) in the kernel by its name (a global), choose among "
            f"functions by a number argument (if which == 0: ... elif which == 1: ...), or "
            f"pass {name} from the kernel to a device function that takes a function")


_KEY_TYPES = {}


def numba_type_of_key(key):
    ty = _KEY_TYPES.get(key)
    if ty is None:
        ty = _KEY_TYPES[key] = _key_to_type(key)
    return ty


def _key_to_type(key):
    kind = key[0]
    if kind in ("array", "roarray"):
        _, dt, ndim, layout = key
        if is_bfloat16_dtype(dt):
            register_dtype()                  # (ml_dtypes is loaded: the array has its dtype)
        return types.Array(_from_dtype(dt), ndim, layout, readonly=kind == "roarray")
    if kind == "bool":
        return types.boolean
    if kind == "int64":
        return types.int64
    if kind == "float64":
        return types.float64
    if kind == "bfloat16":
        return bfloat16
    if kind == "fp8":
        return fp8.TYPES[key[1]]
    if kind == "complex128":
        return types.complex128
    if kind == "scalar":
        dt = key[1]
        if dt.kind in "USVO":
            what = {"U": "a string", "S": "bytes", "V": "raw bytes", "O": "an object"}[dt.kind]
            raise ArgumentError(f"is a NumPy scalar of dtype {dt} ({what}), which kernels "
                                f"cannot take (numbers, bools, records, arrays and tuples of "
                                f"them can)")
        return _from_dtype(dt)
    if kind in ("record", "device_record"):
        return numpy_support.from_dtype(key[1])
    if kind == "pointer":
        return types.CPointer(numpy_support.from_dtype(key[1]))
    if kind == "vectors":
        _, dt, count, ndim = key[:4]
        return types.Array(vector_types[f"{dt.name}x{count}"], ndim, "C",
                           readonly=len(key) > 4)
    if kind == "tuple":
        return types.BaseTuple.from_types([numba_type_of_key(k) for k in key[1:]])
    if kind == "namedtuple":
        return types.BaseTuple.from_types([numba_type_of_key(k) for k in key[2:]], key[1])
    if kind == "enum":
        cls, inner = key[1], numba_type_of_key(key[2])
        return (types.IntEnumMember if issubclass(cls, enum.IntEnum) else
                types.EnumMember)(cls, inner)
    if kind == "const":
        from numba import typeof
        v = key[1]
        if isinstance(v, types.Type):
            return types.TypeRef(v)
        try:
            return typeof(v)
        except (ValueError, TypeError, NotImplementedError):
            what = f"the class {v.__module__}.{v.__qualname__}" if isinstance(v, type) else \
                f"the dtype {v}"
            raise ArgumentError(f"is {what}, which kernels cannot take (the types kernels "
                                f"compute with can: np.float32, a Numba type, a dtype of "
                                f"numbers)") from None
    raise AssertionError(key)


def long_double(dt, instead):
    """Why a long double ``dt`` has no device form, ending with what to pass: ``instead`` of the
    NumPy type to convert to (``"np.float64"``); None for any other dtype."""
    if dt.kind in "fc" and dt.itemsize > (8 if dt.kind == "f" else 16):
        wide = "np.float64" if dt.kind == "f" else "np.complex128"
        return f"has dtype {dt} (long double), which GPUs do not have; pass {instead(wide)}"
    return None


def _from_dtype(dt):
    """The Numba type of the elements or scalars of dtype ``dt``, or an ArgumentError."""
    from numba.core.errors import NumbaNotImplementedError
    why = long_double(dt, lambda wide: f"{wide}(...) of it")
    if why is not None:
        raise ArgumentError(why)
    try:
        return numpy_support.from_dtype(dt)
    except (NotImplementedError, NumbaNotImplementedError):
        raise ArgumentError(f"has dtype {dt}, which kernels cannot take") from None


# ---------------------------------------------------------------------------------------------
# Explicit signatures (``cuda.jit("void(float32[:], int32)")``): as in numba-cuda, such a kernel
# takes only those signatures, converting scalars to the declared types.


#: what the launch asks of each argument (an array by either protocol)
_PROTOCOLS = ("__cuda_array_interface__", "__dlpack__")


def refuse_uninspectable(kernel, pysig, args):
    """Refuse by name an argument that fails being asked whether it is an array (a ``dict``
    subclass whose ``__getattr__`` is ``dict.__getitem__`` raises KeyError where ``hasattr``
    expects AttributeError), before the launch asks it deep inside (a bare KeyError there)."""
    for i, a in enumerate(args):
        try:
            for name in _PROTOCOLS:
                hasattr(a, name)
        except Exception as exc:
            names = list(pysig.parameters)
            shown = names[i] if i < len(names) else i
            raise ArgumentError(
                f"{kernel}: argument {i} ({shown!r}) is a {type(a).__module__}."
                f"{type(a).__qualname__} object, which kernels cannot take: asking it for "
                f"{name} raised {type(exc).__name__}: {exc} (arrays with "
                f"__cuda_array_interface__ or DLPack, scalars, tuples and types can)") from None
