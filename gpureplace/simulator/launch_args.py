"""A launch's arguments as the simulated kernel takes them, converted as the GPU path converts them.

``LaunchArguments`` turns each argument of a simulated launch into what the kernel's Python code
works on (a ``SimArray`` over NumPy memory, a wrapped integer, a record, a tuple of such) and its
Numba type, the type a GPU launch would compile the kernel for; ``convert_to`` and
``match_explicit`` then fit them to a signature declared in ``cuda.jit``.  After a launch that
succeeded, ``LaunchArguments.write_back`` copies back what the kernel worked on in a copy (a
strided host view, a record, a CuPy array or a torch tensor).

The conversion follows the GPU path (``runtime.arguments``, ``runtime.transfers``,
``runtime.conversion``) on purpose, rule for rule and refusal for refusal, because the simulator
is where kernels are tried before they meet a GPU: what runs here must run there, and what fails
there must fail here, in the same words.  So the kernel sees and types what the GPU's kernel
would (a strided host view as its contiguous staging copy, a record as a copy of it, a read-only
host array as a copy taken before the launch where it overlaps an array the kernel writes, as
the GPU's own device copy of it), and what the GPU path refuses (a CPU tensor, a misaligned
array, a dtype with no device form, a host array in a prepared launch or a graph capture, a
negative pointer, arguments that fit no declared signature) is refused here as it is there.
"""

from __future__ import annotations

import enum
import sys

import numpy as np
from numba.core import types as nbtypes

from ..compiler.abi import contiguous_strides, element_alignment, misalignment
from ..compiler.ranking import best_signature, conversion_rank
from ..errors import LaunchError, SignatureError
from ..runtime import arguments, conversion, transfers
from .arrays import SimArray, checked_interface, record_of, wrap_int
from .pointers import RawPointer
from .host import SimDeviceNDArray, SimDeviceRecord


class LaunchArguments:
    """The arguments of one launch as the simulated kernel takes them (``values``) and their
    Numba types (``types``).  ``bound``: for a prepared launch or a graph capture, which bind
    their arguments beyond one launch and so refuse host arrays, as the GPU path does.
    ``detached``: id of a read-only host array -> the copy the kernel reads instead (see
    ``shared_read_only``)."""

    def __init__(self, launch, bound=False, detached=None):
        self.launch = launch
        self.bound = bound
        self.detached = detached or {}
        self.values = []
        self.types = []
        self.copy_back = []            # (original, host copy, how)
        self.staged = {}               # buffer key of a strided host view: its C-ordered copy
        self.read_only_records = []    # (where, copy, its bytes before): checked, not copied back
        self.host_arrays = []          # writable NumPy arrays the kernel may change
        self.read_only_hosts = []      # read-only host NumPy arrays, given in place

    def add(self, value, where, name="a"):
        v, t = self.convert(value, where, name)
        self.values.append(v)
        self.types.append(t)

    def convert(self, a, where, name="a"):
        if isinstance(a, SimDeviceRecord):
            # cuda.to_device(record): the kernel works on the record in place
            return record_of(a.view(np.ndarray)), a._numba_type_
        if isinstance(a, np.ndarray):
            if self.bound and _is_host_memory(a):
                # (in the GPU path's words: runtime/arguments.py's _numpy_array_handler)
                raise arguments.ArgumentError(
                    f"{where} is a host NumPy array: prepared launches and CUDA graphs take "
                    f"device arrays (cupy.asarray(a), or cuda.to_device(a)); only a plain "
                    f"launch copies host arrays to the device and back")
            if not (a.flags.c_contiguous or a.flags.f_contiguous) and _is_host_memory(a):
                # a strided host view: the kernel gets a C-ordered copy, written back into the
                # view after the launch, as the GPU's staging copy is (runtime/transfers.py's
                # DeviceCopy); it has the copy's type (a declared float32[::1] takes it).  One
                # copy per view of the memory, as there one staging copy per buffer key: the
                # same view given twice is one array to the kernel, and written back once
                key = transfers.buffer_key(a) + (not a.flags.writeable,)
                staged = self.staged.get(key)
                if staged is None:
                    staged = self.staged[key] = np.ascontiguousarray(a)
                    if a.flags.writeable:
                        self.copy_back.append((a, staged, "view"))
                    else:
                        staged.flags.writeable = False
                return self._array(staged, where, name)
            return self._array(a, where, name)
        cls = type(a)
        mod = cls.__module__ or ""
        if mod.startswith("cupy") and cls.__name__ == "ndarray":
            host = a.get()
            self.copy_back.append((a, host, "cupy"))
            return self._array(host, where, name)[0], _type_from_key(a, where)
        if mod.startswith("torch") and hasattr(a, "data_ptr") and hasattr(a, "stride"):
            if not a.is_cuda:
                # refused as on the GPU (runtime/arguments.torch_handler): code tried here
                # would fail there
                raise arguments.ArgumentError(
                    f"{where} is a PyTorch tensor on the CPU; move it to the GPU first "
                    f"(t.cuda())")
            host = a.detach().cpu().numpy()
            self.copy_back.append((a, host, "torch"))
            return self._array(host, where, name)
        if hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack__"):
            # another library's device array: simulated memory where it is, else via CuPy
            from .host import foreign_view
            if hasattr(a, "__cuda_array_interface__"):
                checked_interface(a, where)          # (refused by name, as on the GPU)
            return self.convert(foreign_view(a, where), where)
        if isinstance(a, np.void) and a.dtype.names is not None:
            # a record argument: the kernel works on a copy, written back after the launch (as
            # on the device); np.record gives it attribute access.  A record of a read-only
            # array is not written back: the launch is refused if the kernel wrote it
            box = np.asarray(a).copy()    # (np.array(a) is a view of the record's array)
            self.host_arrays.append(box)
            if a.flags.writeable:
                self.copy_back.append((a, box, "record"))
            else:
                self.read_only_records.append((where, box, box.copy()))
            return record_of(box), _type_from_key(a, where)
        if isinstance(a, arguments.VectorArray):
            return self._vectors(a, where)
        if isinstance(a, tuple):
            # (an item is named in what is said of it: "k: argument 0 ('t'), item t[1], ...")
            fields = getattr(type(a), "_fields", None)
            vals, tys = zip(*(
                self.convert(x, arguments.item_place(where, f"[{j}]" if fields is None else
                                                     f".{fields[j]}"))
                for j, x in enumerate(a))) if a else ((), ())
            if hasattr(type(a), "_fields"):          # a namedtuple: fields by name
                return type(a)(*vals), nbtypes.BaseTuple.from_types(list(tys), type(a))
            return tuple(vals), nbtypes.BaseTuple.from_types(list(tys))
        if isinstance(a, enum.Enum):                 # an IntEnum member is an int too
            return a, _type_from_key(a, where)
        if isinstance(a, bool):
            return a, nbtypes.boolean
        if isinstance(a, int):
            if -(1 << 63) <= a < (1 << 63):
                return wrap_int(a, np.dtype(np.int64)), nbtypes.int64
            if 0 <= a < (1 << 64):                   # as Numba types it
                return wrap_int(a, np.dtype(np.uint64)), nbtypes.uint64
            raise LaunchError(f"{where.rstrip(',')} = {a} does not fit in 64 bits (kernels "
                              f"take int64 or uint64 integers)")
        if isinstance(a, float):
            return np.float64(a), nbtypes.float64
        if isinstance(a, complex):
            return np.complex128(a), nbtypes.complex128
        if isinstance(a, np.integer):
            return wrap_int(a, a.dtype), _type_from_key(a, where)
        return a, _type_from_key(a, where)

    def _array(self, a, where, name):
        """NumPy array ``a`` (a simulated device array, a host array, the host copy of another
        library's array) as the kernel sees it, and its type."""
        ty = _array_type(a, where, name)
        _refuse_misaligned(a, where)
        if a.flags.writeable:
            self.host_arrays.append(a)
        elif transfers.is_host_array(a):
            # (its own copy, taken now, when it overlaps an array the kernel writes: see
            # shared_read_only)
            self.read_only_hosts.append(a)
            a = self.detached.get(id(a), a)
        # (a simulated device array's elements as a plain NumPy array's: the kernel's reads
        # and writes skip the host API's indexing, which captures and refuses host reads)
        return SimArray(a.view(np.ndarray) if isinstance(a, SimDeviceNDArray) else a,
                        self.launch), ty

    def shared_read_only(self):
        """{id: copy} of the read-only host arrays given that may share memory with an array
        the kernel may write.  On the GPU each read-only host array is copied to the device
        before the launch, on its own (its buffer key holds the read-only flag:
        ``runtime.transfers.transfer_of``), and never copied back, as numba-cuda does: the
        kernel reads what it held before the launch, never its own writes through another
        view, as it reads a ``cuda.In`` copy.  Only arrays whose bounds overlap a writable
        one's are copied (the others read the same either way), and not one that lies in
        simulated device memory (a device array's plain view, which the GPU reads in place)."""
        if not self.read_only_hosts or not self.host_arrays:
            return {}
        copies = {}
        for ro in self.read_only_hosts:
            if id(ro) in copies or not any(np.may_share_memory(ro, w)
                                           for w in self.host_arrays):
                continue
            if not _is_host_memory(ro):
                continue
            copy = ro.copy(order="K")
            copy.flags.writeable = False
            copies[id(ro)] = copy
        return copies

    def _vectors(self, v, where):
        """cuda.as_vectors(array, n): the array (converted as any array argument) grouped into
        vectors of its last axis, with the layout checks a GPU launch makes."""
        from .lang import SimVectorArray
        if isinstance(v.array, np.ndarray) and _is_host_memory(v.array):
            raise arguments.ArgumentError(f"{where}: {arguments.host_vectors_problem(v)}")
        inner, _ = self.convert(v.array, where)
        if not isinstance(inner, SimArray):
            raise LaunchError(f"{where} is as_vectors({type(v.array).__qualname__}, "
                              f"{v.count}); it takes an array")
        host = inner._a
        try:
            vshape = arguments.vector_array_layout(host.shape, host.flags.c_contiguous,
                                                   v.vector_type, host.ctypes.data,
                                                   f"as_vectors(a, {v.count})")
        except LaunchError as exc:
            raise type(exc)(f"{where}: {exc}") from None
        grouped = host.reshape(vshape + (v.count,))
        # (read-only vectors of a read-only array, as the GPU's key types them)
        return (SimVectorArray(grouped, v.vector_type, self.launch, inner._writable),
                nbtypes.Array(v.vector_type, len(vshape), "C", readonly=not inner._writable))

    def write_back(self, restore):
        """After a launch that succeeded: what the kernel worked on in a copy, written back
        into the argument it was made from (a strided host view, a record, a CuPy array, a
        torch tensor), as the GPU path copies back after the kernel.  A record of a read-only
        array that the kernel wrote fails the launch instead, as on the GPU: ``restore()`` is
        called first, to put host memory back as it was (as after any failed launch), and
        nothing is copied back."""
        for where, host, before in self.read_only_records:
            refused = arguments.read_only_record_written(where, before, host)
            if refused is not None:
                restore()
                raise refused
        for original, host, how in self.copy_back:
            if how == "record":
                for name in host.dtype.names:
                    original[name] = host[name]
            elif how == "view":
                original[...] = host
            elif how == "cupy":
                import cupy
                original[...] = cupy.asarray(host)
            else:
                import torch
                with torch.no_grad():
                    original.copy_(torch.from_numpy(host))


def _is_host_memory(a):
    """Whether NumPy array ``a`` is a host array that a GPU launch copies (as
    ``runtime.transfers.is_host_array`` says), and neither a plain view of simulated device
    memory (what gpureplace's own modules hand the simulator, ``cuda.vectorize``'s operands: on
    a GPU they are CuPy views of the device array) nor an instance of what ``cupy.ndarray`` is
    in this process (a stand-in CuPy over NumPy, as the tests' simcupy.py: its arrays are the
    device arrays, as ``runtime.arguments`` takes a subclass of CuPy's)."""
    if not transfers.is_host_array(a):
        return False
    cupy = sys.modules.get("cupy")
    cls = getattr(cupy, "ndarray", None) if cupy is not None else None
    if isinstance(cls, type) and isinstance(a, cls):
        return False
    from .host import in_simulated_memory
    return not in_simulated_memory(a)


def _refuse_misaligned(a, where):
    """Refuse, as the GPU path does (``runtime.arguments.array_argument``), an array whose
    elements the compiled code could not load where they are: device memory, which the kernel
    reads in place, at an odd address or stride; a host array, whose device copy is
    contiguous, where that copy's elements are not aligned (a packed record's).  NumPy reads
    any of them; the GPU faults, ending the CUDA context."""
    if element_alignment(a.dtype) == 1:
        return
    if _is_host_memory(a):
        problem = misalignment(a.dtype, 0, a.shape, contiguous_strides(a.shape, a.dtype.itemsize))
    else:
        problem = misalignment(a.dtype, a.ctypes.data, a.shape, a.strides)
    if problem is not None:
        raise arguments.ArgumentError(f"{where} {problem}")


def _array_type(a, where, name):
    """The Numba type of array ``a`` (argument ``where``, called ``name``), or an ArgumentError
    naming the argument and the dtype, in the words a host array of that dtype is refused in
    (``runtime.transfers.refuse_untyped``): a simulated device array can have any NumPy dtype
    (``cuda.device_array(n, '>f4')``), which Numba cannot type, or types as Python objects."""
    from numba import typeof
    dt = a.dtype
    why = None
    if dt.hasobject:
        why = f"has dtype {dt}, whose Python objects have no device form; pass numbers"
    elif not dt.isnative:
        why = transfers.dtype_problem(dt, name)
    if why is None:
        try:
            return typeof(a)
        except Exception as exc:            # (long double, raw bytes 'V4', ...)
            why = transfers.dtype_problem(dt, name) or \
                f"has dtype {dt}, which kernels cannot take ({exc})"
    raise arguments.ArgumentError(f"{where} {why}")


def refuse_captured_host_arrays(gpufunction, args, names):
    """Refuse, naming them all, the arguments that hold host arrays, in a launch a graph
    captures: in the GPU path's words (jit/launching.py's ``_launch_with_transfers``), where
    such a launch copies them to the device and back."""
    def holds(a):
        if isinstance(a, tuple):
            return any(holds(x) for x in a)
        return isinstance(a, np.ndarray) and _is_host_memory(a)
    hosts = [f"{i} ({names[i]!r})" for i, a in enumerate(args) if holds(a)]
    if hosts:
        raise LaunchError(f"{gpufunction.__qualname__}: argument {', '.join(hosts)} (a host "
                          f"NumPy array) is copied to or from the host around each launch, "
                          f"which a CUDA graph cannot hold; pass device arrays")


def _type_from_key(a, where):
    try:
        key, _ = arguments.value_key(a)
        return arguments.numba_type_of_key(key)
    except LaunchError as exc:
        raise type(exc)(f"{where} {exc}") from None


def scalar_as(value, declared):
    """``value`` as the scalar Numba type ``declared``, converted as the device converts it:
    integers wrap to their width, booleans are Python's (so that they add up as Numba's do)."""
    if isinstance(declared, nbtypes.Boolean):
        return bool(value)
    dt = np.dtype(str(declared))
    if dt.kind in "iu":
        return wrap_int(int(value), dt)
    with np.errstate(over="ignore"):          # (1e300 as float32 is inf, silently, as the
        return dt.type(value)                 # GPU path packs it)


def convert_to(value, ty, declared, conv=None):
    """``value`` of Numba type ``ty`` as an argument of ``declared`` type (a kernel given
    signatures in cuda.jit), or None when it does not fit -- numba-cuda's rules, as
    ``runtime.conversion.match_signature`` applies them on the GPU."""
    if isinstance(declared, nbtypes.Array):
        if not isinstance(ty, nbtypes.Array) or ty.dtype != declared.dtype or \
                ty.ndim != declared.ndim:
            return None
        if declared.layout in ("C", "F") and ty.layout != declared.layout:
            return None
        return value
    if isinstance(declared, (nbtypes.Integer, nbtypes.Float, nbtypes.Boolean, nbtypes.Complex)):
        if conversion_rank(ty, declared) is None:
            return None
        return scalar_as(value, declared)
    if isinstance(declared, nbtypes.CPointer):
        if not isinstance(ty, nbtypes.Integer):
            return None
        if int(value) < 0:
            if conv is None:
                return None
            # (refused as on the GPU, in its words: match_explicit names the argument)
            raise conversion.PointerRefused(conversion.pointer_refusal(int(value), declared))
        return RawPointer(int(value), np.dtype(str(declared.dtype)), conv)
    if isinstance(declared, nbtypes.BaseTuple):
        if not isinstance(ty, nbtypes.BaseTuple) or len(ty.types) != len(declared.types):
            return None
        out = [convert_to(v, t, d, conv) for v, t, d in zip(value, ty.types, declared.types)]
        if any(o is None for o in out):
            return None
        # (a namedtuple stays one: the kernel reads its fields by name)
        return type(value)(*out) if isinstance(declared, nbtypes.BaseNamedTuple) else tuple(out)
    return value if ty == declared else None


def match_explicit(gpufunction, conv):
    sig = best_signature(gpufunction.declared_signatures, conv.types, gpufunction.__qualname__)
    out = None
    if sig is not None:
        out, names = [], list(gpufunction._pysig.parameters)
        for i, (v, t, d) in enumerate(zip(conv.values, conv.types, sig)):
            try:
                out.append(convert_to(v, t, d, conv))
            except conversion.PointerRefused as exc:
                raise arguments.ArgumentError(f"{gpufunction.__qualname__}: argument {i} "
                                              f"({names[i]!r}) {exc}") from None
    if out is not None and all(o is not None for o in out):
        conv.values[:] = out
        conv.types[:] = list(sig)
        return
    sigs = "; ".join("(" + ", ".join(map(str, s)) + ")" for s in gpufunction.declared_signatures)
    got = ", ".join(map(str, conv.types))
    raise SignatureError(
        f"No matching definition for argument type(s) ({got}): {gpufunction.__qualname__} "
        f"was compiled for the signature(s) {sigs} given to cuda.jit, and takes no others")
