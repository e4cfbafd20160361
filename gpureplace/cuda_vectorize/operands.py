"""What a vectorized call's arguments are and how they move: device arrays used where they are,
host arrays, lists and scalars copied; the signature chosen for them; results back where the
caller wants them; the options both decorators take."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
from numba.np import numpy_support

from .. import hostapi, probe
from ..hostapi.streams import cupy_stream
from ..jit import jit
from ..jit.backends import simulated
from ..jit.function import GPUFunction

TPB = 256
SIM_BLOCKS = 4            # the simulator runs threads one after another: few blocks, strided
TARGET_OPTIONS = {"nopython", "fastmath", "opt", "lineinfo", "debug", "cache", "max_registers",
                   "target", "identity", "writable_args"}


class UnrecognizedOptions(TypeError, KeyError):
    """Options vectorize / guvectorize do not know: a TypeError as numba-cuda's decorators
    raise, a KeyError as Numba's ``vectorize(target="cuda")`` raises."""

    def __str__(self):
        return str(self.args[0])


def check_options(kind, options):
    unknown = sorted(set(options) - TARGET_OPTIONS)
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        if kind == "guvectorize":       # (numba-cuda's guvectorize words, the names last)
            raise UnrecognizedOptions(f"The following target options are not supported: "
                                      f"{names}")
        raise UnrecognizedOptions(f"The following target options are not supported "
                                  f"(Unrecognized options): {names}")
    if options.get("nopython", True) is not True:
        raise TypeError("nopython flag must be True")
    if "nopython" in options:
        warnings.warn("nopython kwarg for cuda target is redundant (device code is always "
                      "compiled without the interpreter)", RuntimeWarning, stacklevel=3)
    target = options.get("target", "cuda")
    if target not in ("cuda", "gpu"):
        raise ValueError(f"cuda.{kind}: target must be 'cuda', got {target!r}")
    return {k: options[k] for k in ("fastmath", "opt", "lineinfo") if k in options}


def element_function(func, kind, jit_options, context):
    """``func`` as the device function a ufunc's kernels call; a Python function compiled (for
    the types it returns) in ``context``, the ufunc's."""
    if isinstance(func, GPUFunction):
        if not func.device:
            raise TypeError(f"cuda.{kind}: {func.__qualname__} is a kernel; give a Python "
                            f"function (or a cuda.jit(device=True) function)")
        return func
    if not callable(func):
        raise TypeError(f"cuda.{kind} decorates a function, got {func!r}")
    return jit(device=True, context=context, **jit_options)(func)


# -- arguments -------------------------------------------------------------------------------

def array_module():
    return np if simulated() else probe.cupy_module()


class Operand:
    """One argument: a device array (used where it is), a host array (copied), or a scalar."""

    __slots__ = ("value", "kind", "dtype", "shape", "free", "raw")

    def __init__(self, value, where):
        # ``free``: a scalar numba-cuda's signature resolution fits to whichever loop the arrays
        # match (a Python number or a NumPy number; not a NumPy bool, a 0-d array or a list)
        self.free = isinstance(value, (int, float, complex, np.number))
        self.raw = value
        if is_device(value):
            self.kind = "device"
            self.value = device_view(value)
        elif isinstance(value, (bool, int, float, complex, np.generic)):
            self.kind = "scalar"
            self.value = np.asarray(value)
        else:
            try:
                self.value = np.asarray(value)
            except Exception as exc:
                raise TypeError(f"{where} is {type(value).__name__}, which is neither an "
                                f"array nor a scalar ({exc})") from None
            if self.value.dtype == object:
                raise TypeError(f"{where} is {type(value).__name__} of objects, not numbers")
            self.kind = "host"
        # (data in the other byte order, read from a file: its values are the native dtype's,
        # which the loops are chosen by and which on_device converts it to)
        dt = self.value.dtype
        self.dtype = dt if dt.isnative else dt.newbyteorder("=")
        self.shape = tuple(self.value.shape)

    def on_device(self, dtype, stream):
        """The operand as a device array of ``dtype`` (a copy when it must move or convert)."""
        if self.kind == "device":
            arr = self.value
            if arr.dtype != dtype:
                with on_stream(stream):
                    arr = arr.astype(dtype)
            return arr
        host = np.ascontiguousarray(self.value, dtype=dtype) if self.value.ndim else \
            np.asarray(self.value, dtype=dtype)
        if simulated():
            return host.copy() if host is self.value else host
        return device_view(hostapi.to_device(host, stream=stream))


def is_device(value):
    if simulated():
        return hasattr(value, "copy_to_host") and isinstance(value, np.ndarray)
    return hasattr(value, "__cuda_array_interface__") or (
        type(value).__module__.startswith("torch") and getattr(value, "is_cuda", False))


def device_view(value):
    """A CuPy (or, in the simulator, NumPy) view of a device array."""
    if simulated():
        return value.view(np.ndarray)
    cp = probe.cupy_module()
    if isinstance(value, cp.ndarray):
        return value.view(cp.ndarray)
    return cp.asarray(value) if hasattr(value, "__cuda_array_interface__") else \
        cp.from_dlpack(value)


def on_stream(stream):
    """CuPy's current stream set to ``stream`` for array operations (nothing in the simulator)."""
    s = None if simulated() else cupy_stream(stream)
    return s if s is not None else contextlib.nullcontext()


def as_result(arr):
    """What a call returns for a device result: numba-cuda's DeviceNDArray."""
    return hostapi.as_cuda_array(arr, _host_ok=True)


def to_host(arr, stream):
    if simulated():
        return np.array(arr)
    s = cupy_stream(stream)
    out = arr.get(stream=s)
    if s is not None:
        s.synchronize()
    return out


def write_back(out, result, stream):
    """Write the device ``result`` into the user's ``out`` (host or device)."""
    if is_device(out):
        dev = device_view(out)
        if not _same_memory(dev, result):
            with on_stream(stream):
                dev[...] = result
        # numba-cuda's arrays come back as they are; another library's as a DeviceNDArray view
        return out if hasattr(out, "copy_to_host") else as_result(dev)
    out[...] = to_host(result, stream)
    return out


def shape_of(a):
    """The shape of a host or device array, also one known only by its
    ``__cuda_array_interface__``."""
    shape = getattr(a, "shape", None)
    if shape is None and hasattr(a, "__cuda_array_interface__"):
        shape = a.__cuda_array_interface__["shape"]
    return tuple(shape) if shape is not None else ()


def _same_memory(a, b):
    if simulated():
        return a.__array_interface__["data"] == b.__array_interface__["data"] and \
            a.strides == b.strides
    return a.data.ptr == b.data.ptr and a.strides == b.strides


def safe(dtype, target):
    return dtype == target or np.can_cast(dtype, target, "safe")


def _fits(op, target):
    """Whether ``op`` goes to ``target``: an array by NumPy's safe casting; a scalar (when no
    signature takes every operand safely) by its value, as NumPy's value-based rule had it."""
    if safe(op.dtype, target):
        return True
    if op.kind != "scalar":
        return False
    value = op.value[()]
    kind = target.kind
    if op.dtype.kind in "iub" and kind in "iu":
        info = np.iinfo(target)
        return info.min <= int(value) <= info.max
    if op.dtype.kind in "iubf":
        return kind in "fc" and (op.dtype.kind != "f" or np.isfinite(value) is not None)
    return op.dtype.kind == "c" and kind == "c"


def choose(candidates, ops):
    """The candidate (a tuple of input dtypes first) for ``ops``, by numba-cuda's rule
    (``UFuncMechanism._resolve_signature``) where that picks one: the first whose input dtypes
    are the operands' exactly (a scalar's dtype is NumPy's for it: ``1.0`` float64, ``1``
    int64), else the one loop that takes the arrays exactly, the scalars (Python or NumPy
    numbers) whatever their type.  Where numba-cuda finds none (it needs arrays of the exact
    types) or several (it raises "ambiguous"), NumPy's rule among those: the first that takes
    every operand safely, else the first that takes them with scalars judged by value."""
    hit = next((c for c in candidates if all(op.dtype == t for op, t in zip(ops, c[0]))), None)
    if hit is not None:
        return hit
    if any(op.free for op in ops):
        loose = [c for c in candidates
                 if all(op.free or op.dtype == t for op, t in zip(ops, c[0]))]
        if len(loose) == 1:
            return loose[0]
        candidates = loose or candidates
    for rule in (lambda op, t: safe(op.dtype, t), _fits):
        for cand in candidates:
            if all(rule(op, t) for op, t in zip(ops, cand[0])):
                return cand
    return None


def scalar_as(op, dtype):
    """A scalar operand as ``dtype``, as numba-cuda makes it (``np.array([value], dtype)``:
    a Python int out of the type's range raises ``OverflowError``)."""
    return np.array(op.raw if op.free else op.value, dtype=dtype)[()]


def check_out_dtype(name, result, out):
    """NumPy's ``same_kind`` rule for writing a result of dtype ``result`` into ``out``.
    numba-cuda refuses any other dtype (a host ``out`` fails ``assert out.dtype == resty`` or
    ``incompatible dtype``, a device one finds no kernel); NumPy casts within a kind, as here,
    and refuses the rest, as here."""
    dtype = getattr(out, "dtype", None)
    if dtype is None and hasattr(out, "__cuda_array_interface__"):
        dtype = np.dtype(out.__cuda_array_interface__["typestr"])
    if dtype is None:
        return
    dtype = np.dtype(str(dtype).replace("torch.", "")) if not isinstance(dtype, np.dtype) \
        else dtype
    if not np.can_cast(result, dtype, "same_kind"):
        raise OutputCastError(f"Cannot cast ufunc {name!r} output from {result!r} to "
                              f"{dtype!r} with casting rule 'same_kind'")


class OutputCastError(TypeError):
    """An ``out=`` of a dtype the result cannot be cast to (NumPy's ``UFuncTypeError``)."""


def dtype_of(ty):
    return numpy_support.as_dtype(ty)


#: The module the kernels ``cuda.vectorize`` / ``guvectorize`` generate say they belong to: a
#: kernel of no module could not be kept in the disk cache (``kernel_cache.describe_for_disk``
#: records each function's module and name), so each process compiled them again.  No module
#: of that name exists; the kernel itself is at hand when an entry is loaded.
GENERATED = "gpureplace.cuda_vectorize.generated"


def configured(kernel, n, stream):
    """``kernel[blocks, TPB, stream]`` for ``n`` elements.  Inside a graph capture the default
    ``stream=0`` is the capture's stream, as a launch naming no stream is (a launch naming
    stream 0 there is refused: the graph would not capture it, so ``add(x, y, out=z)`` could
    not be captured at all)."""
    from ..jit import graphs
    if not stream and graphs.recorder() is not None:
        return kernel[blocks_for(n), TPB]
    return kernel[blocks_for(n), TPB, stream]


def blocks_for(n):
    blocks = max(1, (n + TPB - 1) // TPB)
    return min(blocks, SIM_BLOCKS) if simulated() else min(blocks, 2 ** 31 - 1)
