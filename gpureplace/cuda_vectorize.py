"""``cuda.vectorize`` and ``cuda.guvectorize``: NumPy-style (generalised) ufuncs on the GPU.

    @cuda.vectorize(["float32(float32, float32)", "float64(float64, float64)"])
    def rel_diff(x, y):
        return 2 * (x - y) / (x + y)

    rel_diff(a, b)                  # host or device arrays, scalars, broadcasting
    rel_diff(d_a, d_b, out=d_out, stream=s)
    rel_diff.reduce(d_a)            # pairwise, for associative functions

    @cuda.guvectorize(["void(float32[:,:], float32[:,:], float32[:,:])"], "(m,n),(n,p)->(m,p)")
    def matmul(a, b, c): ...

As numba-cuda's: inputs are CuPy / PyTorch / any ``__cuda_array_interface__`` array (used where
they are), host arrays, lists or scalars (copied to the device); the result is a device array when
an input was one, else a host array (a scalar for scalar inputs); ``out=`` writes into a given
array; ``stream=`` orders everything on that stream.  The signature used is the first whose
input types the arguments cast to safely (NumPy's rule); without signatures (``vectorize``
only) each new combination of input dtypes compiles on first use.  ``numba.vectorize(...,
target="cuda")`` and ``numba.guvectorize(..., target="cuda")`` build the same objects when
numba-cuda is not installed.

The element function is compiled as a device function into generated kernels, like any helper a
kernel calls: redefining what it calls, or a global it reads, recompiles exactly those kernels.
"""

from __future__ import annotations

import re

import numpy as np
from numba.core import types
from numba.np import numpy_support

from . import hostapi, probe
from .hostapi.streams import cupy_stream
from .compiler.signature import normalize_signature
from .jit import jit
from .jit.backends import simulated
from .jit.function import GPUFunction

_TPB = 256
_SIM_BLOCKS = 4            # the simulator runs threads one after another: few blocks, strided
_TARGET_OPTIONS = {"nopython", "fastmath", "opt", "lineinfo", "debug", "cache", "max_registers",
                   "target", "identity", "writable_args"}


def _check_options(kind, options):
    unknown = sorted(set(options) - _TARGET_OPTIONS)
    if unknown:
        raise TypeError("The following target options are not supported: "
                        + ", ".join(repr(k) for k in unknown))
    if options.get("nopython", True) is not True:
        raise TypeError("nopython flag must be True")
    target = options.get("target", "cuda")
    if target not in ("cuda", "gpu"):
        raise ValueError(f"cuda.{kind}: target must be 'cuda', got {target!r}")
    return {k: options[k] for k in ("fastmath", "opt", "lineinfo") if k in options}


def _element_function(func, kind, jit_options):
    if isinstance(func, GPUFunction):
        if not func.device:
            raise TypeError(f"cuda.{kind}: {func.__qualname__} is a kernel; give a Python "
                            f"function (or a cuda.jit(device=True) function)")
        return func
    if not callable(func):
        raise TypeError(f"cuda.{kind} decorates a function, got {func!r}")
    return jit(device=True, **jit_options)(func)


# -- arguments -------------------------------------------------------------------------------

def _xp():
    return np if simulated() else probe.cupy_module()


class _Operand:
    """One argument: a device array (used where it is), a host array (copied), or a scalar."""

    __slots__ = ("value", "kind", "dtype", "shape")

    def __init__(self, value, where):
        if _is_device(value):
            self.kind = "device"
            self.value = _device_view(value)
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
        self.dtype = self.value.dtype
        self.shape = tuple(self.value.shape)

    def on_device(self, dtype, stream):
        """The operand as a device array of ``dtype`` (a copy when it must move or convert)."""
        if self.kind == "device":
            arr = self.value
            if arr.dtype != dtype:
                with _on(stream):
                    arr = arr.astype(dtype)
            return arr
        host = np.ascontiguousarray(self.value, dtype=dtype) if self.value.ndim else \
            np.asarray(self.value, dtype=dtype)
        if simulated():
            return host.copy() if host is self.value else host
        return _device_view(hostapi.to_device(host, stream=stream))


def _is_device(value):
    if simulated():
        return hasattr(value, "copy_to_host") and isinstance(value, np.ndarray)
    return hasattr(value, "__cuda_array_interface__") or (
        type(value).__module__.startswith("torch") and getattr(value, "is_cuda", False))


def _device_view(value):
    """A CuPy (or, in the simulator, NumPy) view of a device array."""
    if simulated():
        return value.view(np.ndarray)
    cp = probe.cupy_module()
    if isinstance(value, cp.ndarray):
        return value.view(cp.ndarray)
    return cp.asarray(value) if hasattr(value, "__cuda_array_interface__") else \
        cp.from_dlpack(value)


def _on(stream):
    """CuPy's current stream set to ``stream`` for array operations (nothing in the simulator)."""
    import contextlib
    s = None if simulated() else cupy_stream(stream)
    return s if s is not None else contextlib.nullcontext()


def _as_result(arr):
    """What a call returns for a device result: numba-cuda's DeviceNDArray."""
    return hostapi.as_cuda_array(arr)


def _to_host(arr, stream):
    if simulated():
        return np.array(arr)
    s = cupy_stream(stream)
    out = arr.get(stream=s)
    if s is not None:
        s.synchronize()
    return out


def _write_back(out, result, stream):
    """Write the device ``result`` into the user's ``out`` (host or device)."""
    if _is_device(out):
        dev = _device_view(out)
        if not _same_memory(dev, result):
            with _on(stream):
                dev[...] = result
        # numba-cuda's arrays come back as they are; another library's as a DeviceNDArray view
        return out if hasattr(out, "copy_to_host") else _as_result(dev)
    out[...] = _to_host(result, stream)
    return out


def _shape_of(a):
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


def _safe(dtype, target):
    return dtype == target or np.can_cast(dtype, target, "safe")


def _fits(op, target):
    """Whether ``op`` goes to ``target``: an array by NumPy's safe casting; a scalar (when no
    signature takes every operand safely) by its value, as NumPy's value-based rule had it."""
    if _safe(op.dtype, target):
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


def _choose(candidates, ops):
    """The first candidate (a tuple of input dtypes first) that takes every operand safely, else
    the first that takes them with scalars judged by value."""
    for rule in (lambda op, t: _safe(op.dtype, t), _fits):
        for cand in candidates:
            if all(rule(op, t) for op, t in zip(ops, cand[0])):
                return cand
    return None


def _dtype_of(ty):
    return numpy_support.as_dtype(ty)


def _grid(n):
    blocks = max(1, (n + _TPB - 1) // _TPB)
    return min(blocks, _SIM_BLOCKS) if simulated() else min(blocks, 2 ** 31 - 1)


# -- vectorize -------------------------------------------------------------------------------

class CUDAUFunc:
    """What ``@cuda.vectorize`` returns: call it like a NumPy ufunc."""

    def __init__(self, func, signatures=(), identity=None, **options):
        jit_options = _check_options("vectorize", options)
        self.py_func = getattr(func, "py_func", func)
        self._element = _element_function(func, "vectorize", jit_options)
        self.__name__ = getattr(self.py_func, "__name__", "ufunc")
        self.__qualname__ = getattr(self.py_func, "__qualname__", self.__name__)
        self.__doc__ = getattr(self.py_func, "__doc__", None)
        self.__wrapped__ = self.py_func
        self.identity = identity
        self._signatures = []
        self._kernels = {}
        for sig in signatures:
            self.add(sig)
        self.nin = self._nparams()
        self.nout = 1
        self.nargs = self.nin + 1

    def _nparams(self):
        import inspect
        return len(inspect.signature(self.py_func).parameters)

    def add(self, sig):
        """Add a signature (``"float32(float32, float32)"``, or Numba types)."""
        args, ret = normalize_signature(sig, f"cuda.vectorize of {self.__qualname__}")
        if any(isinstance(t, types.Array) for t in args) or isinstance(ret, types.Array):
            raise TypeError(f"cuda.vectorize: {sig!r} has array types; vectorize takes scalar "
                            f"element types (guvectorize takes arrays)")
        if ret is None:
            raise TypeError(f"cuda.vectorize: the signature {sig!r} needs a return type "
                            f"('float32(float32, float32)')")
        self._signatures.append((tuple(_dtype_of(t) for t in args), _dtype_of(ret)))

    @property
    def types(self):
        """The signatures as NumPy's ``ufunc.types`` spells them (``'ff->f'``)."""
        return [("".join(d.char for d in ins) + "->" + out.char)
                for ins, out in self._signatures]

    @property
    def ntypes(self):
        return len(self._signatures)

    def __repr__(self):
        return f"<gpureplace.cuda vectorize {self.__qualname__} ({self.ntypes} signatures)>"

    def _select(self, ops):
        dtypes = [op.dtype for op in ops]
        hit = _choose([s for s in self._signatures if len(s[0]) == len(ops)], ops)
        if hit is not None:
            return hit
        if self._signatures:
            have = ", ".join(self.types)
            raise TypeError(f"{self.__qualname__}: no signature takes input types "
                            f"({', '.join(map(str, dtypes))}) safely; it has {have}")
        # no signatures: this combination compiles now (its return type from the function)
        argtypes = tuple(numpy_support.from_dtype(d) for d in dtypes)
        restype = self._element.compile(argtypes).restype
        if not isinstance(restype, (types.Number, types.Boolean)):
            raise TypeError(f"{self.__qualname__} returns {restype} for ({', '.join(map(str, dtypes))}); "
                            f"a vectorized function returns a number")
        sig = (tuple(dtypes), _dtype_of(restype))
        self._signatures.append(sig)
        return sig

    def __call__(self, *args, out=None, stream=0):
        nin = self.nin
        if len(args) == nin + 1:
            if out is not None:
                raise ValueError("cannot specify argument 'out' as both positional and keyword")
            args, out = args[:nin], args[nin]
        if len(args) != nin:
            raise TypeError(f"{self.__qualname__} takes {nin} input argument(s) (and optionally "
                            f"out), got {len(args)}")
        ops = [_Operand(a, f"{self.__qualname__}: argument {i}") for i, a in enumerate(args)]
        ins, out_dtype = self._select(ops)
        try:
            shape = np.broadcast_shapes(*(op.shape for op in ops))
        except ValueError:
            raise ValueError(f"{self.__qualname__}: operands could not be broadcast together "
                             f"with shapes {' '.join(str(op.shape) for op in ops)}") from None
        if out is not None and _shape_of(out) != shape:
            raise ValueError(f"{self.__qualname__}: out has shape {_shape_of(out)}, the "
                             f"broadcast inputs {shape}")
        xp = _xp()
        values = []
        for op, dt in zip(ops, ins):
            if op.kind == "scalar":
                values.append(dt.type(op.value[()]))
            else:
                values.append(op.on_device(dt, stream))
        any_device = any(op.kind == "device" for op in ops)
        target = None
        if out is not None and _is_device(out):
            target = _device_view(out)
        if target is None:
            arrays = [v for v in values if not np.isscalar(v) and v.ndim > 1]
            fortran = arrays and all(a.flags.f_contiguous and not a.flags.c_contiguous
                                     for a in arrays)
            order = "F" if fortran else "C"
            with _on(stream):
                target = xp.empty(shape, out_dtype if out is None else out.dtype, order=order)
        self._run(values, target, shape, stream)
        if out is not None:
            return _write_back(out, target, stream)
        if not shape:
            return _to_host(target, stream)[()]
        return _as_result(target) if any_device else _to_host(target, stream)

    def _run(self, values, target, shape, stream):
        n = int(np.prod(shape)) if shape else 1
        if n == 0:
            return
        arrays = [v for v in values if not np.isscalar(v)]
        same = all(tuple(a.shape) == shape for a in arrays)
        flat_c = same and target.flags.c_contiguous and all(a.flags.c_contiguous for a in arrays)
        flat_f = same and target.flags.f_contiguous and all(a.flags.f_contiguous for a in arrays)
        xp = _xp()
        if flat_c or flat_f or not shape:
            order = "C" if flat_c or not shape else "F"
            flat = [v if np.isscalar(v) else v.reshape(-1, order=order) for v in values]
            dest = target.reshape(-1, order=order)
            kernel = self._kernel(tuple(np.isscalar(v) for v in values), 1)
        else:
            with _on(stream):
                flat = [v if np.isscalar(v) else xp.broadcast_to(v, shape) for v in values]
            dest = target
            kernel = self._kernel(tuple(np.isscalar(v) for v in values), len(shape))
        kernel[_grid(n), _TPB, stream](*flat, dest)

    def _kernel(self, scalars, ndim):
        key = (scalars, ndim)
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = self._kernels[key] = _elementwise_kernel(self._element, scalars, ndim,
                                                              self.__name__)
        return kernel

    def reduce(self, arr, axis=0, stream=0, out=None):
        """Combine the elements of a 1-D array pairwise with the (binary, associative)
        function; returns a host scalar (or writes ``out[0]``)."""
        if self.nin != 2:
            raise ValueError(f"{self.__qualname__}.reduce needs a function of two arguments")
        if axis != 0:
            raise NotImplementedError(f"{self.__qualname__}.reduce: only axis=0 of a 1-D array")
        op = _Operand(arr, f"{self.__qualname__}.reduce: arr")
        if len(op.shape) != 1:
            raise ValueError(f"{self.__qualname__}.reduce works on 1-D arrays, got shape "
                             f"{op.shape}")
        n = op.shape[0]
        if n == 0:
            if self.identity is None:
                raise ValueError(f"zero-size array to reduction operation {self.__qualname__} "
                                 f"which has no identity")
            return op.dtype.type(self.identity)
        ins, out_dtype = self._select([op, op])
        x = op.on_device(ins[0], stream)
        while n > 1:
            half = n // 2
            y = self(x[:half], x[half:2 * half], stream=stream)
            y = np.asarray(y) if simulated() else _device_view(y)
            if n % 2:
                self(y[:1], x[n - 1:n], out=y[:1], stream=stream)
            x, n = y, half
        result = _to_host(x[:1], stream)[0]
        if out is not None:
            return _write_back(out, x[:1], stream)
        return result


_ELEMENTWISE_1D = '''
def {name}({params}, out):
    i = grid(1)
    step = gridsize(1)
    n = out.shape[0]
    while i < n:
        out[i] = f({args})
        i += step
'''

_ELEMENTWISE_ND = '''
def {name}({params}, out):
    i = grid(1)
    step = gridsize(1)
    n = out.size
    while i < n:
        r = i
{unravel}
        out[{index}] = f({args})
        i += step
'''


def _elementwise_kernel(element, scalars, ndim, name):
    """A grid-stride kernel calling ``element`` on each element: 1-D (flattened contiguous
    operands) or N-D (broadcast views of any strides)."""
    from .compiler.intrinsics.indexing import grid, gridsize
    params = [f"x{k}" for k in range(len(scalars))]
    if ndim == 1:
        args = ", ".join(p if s else f"{p}[i]" for p, s in zip(params, scalars))
        src = _ELEMENTWISE_1D.format(name=f"vectorized_{name}", params=", ".join(params),
                                     args=args)
    else:
        lines = []
        for d in range(ndim - 1, 0, -1):
            lines.append(f"        i{d} = r % out.shape[{d}]")
            lines.append(f"        r //= out.shape[{d}]")
        lines.append("        i0 = r")
        index = ", ".join(f"i{d}" for d in range(ndim))
        args = ", ".join(p if s else f"{p}[{index}]" for p, s in zip(params, scalars))
        src = _ELEMENTWISE_ND.format(name=f"vectorized_{name}", params=", ".join(params),
                                     unravel="\n".join(lines), index=index, args=args)
    env = {"grid": grid, "gridsize": gridsize, "f": element}
    exec(compile(src, f"<cuda.vectorize({name})>", "exec"), env)
    return jit(env[f"vectorized_{name}"])


# -- guvectorize -----------------------------------------------------------------------------

_DIMS = re.compile(r"\(\s*([\w\s,]*?)\s*\)")


def parse_gufunc_signature(layout):
    """``"(m,n),(n,p)->(m,p)"`` -> ``([("m", "n"), ("n", "p")], [("m", "p")])``."""
    if not isinstance(layout, str) or "->" not in layout:
        raise ValueError(f"cuda.guvectorize: the layout must look like '(m,n),(n)->(m)', got "
                         f"{layout!r}")
    left, right = layout.replace(" ", "").split("->", 1)

    def side(text):
        groups = _DIMS.findall(text)
        if _DIMS.sub("", text).replace(",", "") or not groups:
            raise ValueError(f"cuda.guvectorize: cannot read {text!r} in the layout {layout!r}")
        return [tuple(d for d in g.split(",") if d) for g in groups]

    return side(left), side(right)


class CUDAGUFunc:
    """What ``@cuda.guvectorize`` returns: a generalised ufunc over the loop dimensions."""

    def __init__(self, func, signatures, layout, identity=None, writable_args=(), **options):
        jit_options = _check_options("guvectorize", options)
        self.py_func = getattr(func, "py_func", func)
        self._element = _element_function(func, "guvectorize", jit_options)
        self.__name__ = getattr(self.py_func, "__name__", "gufunc")
        self.__qualname__ = getattr(self.py_func, "__qualname__", self.__name__)
        self.__doc__ = getattr(self.py_func, "__doc__", None)
        self.__wrapped__ = self.py_func
        self.signature = layout
        self._in_dims, self._out_dims = parse_gufunc_signature(layout)
        self.nin, self.nout = len(self._in_dims), len(self._out_dims)
        self.nargs = self.nin + self.nout
        self._signatures = []
        self._gukernel = None
        for sig in signatures:
            self.add(sig)

    def add(self, sig):
        args, ret = normalize_signature(sig, f"cuda.guvectorize of {self.__qualname__}")
        if ret is not None and ret != types.void and ret != types.none:
            raise TypeError(f"guvectorized functions cannot return values: the signature "
                            f"{sig!r} specifies {ret} return type")
        if len(args) != self.nargs:
            raise TypeError(f"cuda.guvectorize: the signature {sig!r} has {len(args)} "
                            f"argument(s), the layout {self.signature!r} {self.nargs}")
        self._signatures.append(tuple(args))

    def __repr__(self):
        return f"<gpureplace.cuda guvectorize {self.__qualname__} {self.signature}>"

    def _select(self, ops):
        dtypes = [op.dtype for op in ops]
        cands = [(tuple(_dtype_of(getattr(t, "dtype", t)) for t in sig[:self.nin]), sig)
                 for sig in self._signatures]
        hit = _choose(cands, ops)
        if hit is not None:
            return hit[1]
        have = "; ".join("(" + ", ".join(map(str, s)) + ")" for s in self._signatures)
        raise TypeError(f"{self.__qualname__}: no signature takes input types "
                        f"({', '.join(map(str, dtypes))}) safely; it has {have or 'none'}")

    def __call__(self, *args, out=None, stream=0):
        nin, nout = self.nin, self.nout
        if len(args) not in (nin, nin + nout):
            raise TypeError(f"gufunc accepts {nin} positional arguments or {nin + nout} "
                            f"positional arguments (input and output arrays). Got {len(args)} "
                            f"positional argument{'s' if len(args) != 1 else ''}.")
        outs = list(args[nin:]) or None
        if out is not None:
            if outs is not None:
                raise ValueError("cannot specify argument 'out' as both positional and keyword")
            outs = list(out) if isinstance(out, tuple) else [out]
        if outs is not None and len(outs) != nout:
            raise ValueError(f"{self.__qualname__}: {nout} output(s), {len(outs)} given")
        ops = [_Operand(a, f"{self.__qualname__}: argument {i}")
               for i, a in enumerate(args[:nin])]
        sig = self._select(ops)
        # the loop dimensions: what precedes each input's core dimensions, broadcast
        sizes, loops = {}, []
        for i, (op, dims) in enumerate(zip(ops, self._in_dims)):
            if len(op.shape) < len(dims):
                raise ValueError(f"{self.__qualname__}: argument {i} has {len(op.shape)} "
                                 f"dimension(s), its core {self._show(dims)} needs {len(dims)}")
            core = op.shape[len(op.shape) - len(dims):]
            for d, n in zip(dims, core):
                if sizes.setdefault(d, n) != n:
                    raise ValueError(f"{self.__qualname__}: dimension {d!r} is {sizes[d]} and "
                                     f"{n} (argument {i})")
            loops.append(op.shape[:len(op.shape) - len(dims)])
        try:
            loop = np.broadcast_shapes(*loops)
        except ValueError:
            raise ValueError(f"{self.__qualname__}: loop dimensions {loops} could not be "
                             f"broadcast together") from None
        for dims in self._out_dims:
            for d in dims:
                if d not in sizes:
                    raise ValueError(f"{self.__qualname__}: output dimension {d!r} is not set "
                                     f"by any input")
        xp = _xp()
        out_dtypes = [_dtype_of(getattr(t, "dtype", t)) for t in sig[nin:]]
        shapes = [loop + tuple(sizes[d] for d in dims) for dims in self._out_dims]
        any_device = any(op.kind == "device" for op in ops)
        n = int(np.prod(loop)) if loop else 1
        flat_in = []
        for op, dims, ty in zip(ops, self._in_dims, sig[:nin]):
            arr = op.on_device(_dtype_of(getattr(ty, "dtype", ty)), stream)
            core = tuple(sizes[d] for d in dims)
            with _on(stream):
                arr = xp.broadcast_to(arr, loop + core).reshape((n,) + core)
            flat_in.append(arr)
        targets, flat_out = [], []
        for k, (shape, dt) in enumerate(zip(shapes, out_dtypes)):
            given = outs[k] if outs is not None else None
            if given is not None and _shape_of(given) != shape:
                raise ValueError(f"{self.__qualname__}: output {k} has shape "
                                 f"{_shape_of(given)}, expected {shape}")
            dev = _device_view(given) if given is not None and _is_device(given) else None
            if dev is None or dev.dtype != dt:
                with _on(stream):
                    dev = xp.empty(shape, dt)
            targets.append(dev)
            core = shape[len(loop):]
            view = dev.reshape((n,) + (core or (1,)))
            if not _shares(view, dev):
                raise ValueError(f"{self.__qualname__}: output {k} cannot be viewed as "
                                 f"{n} rows without a copy (give a contiguous array)")
            flat_out.append(view)
        if n:
            # each thread calls the function on row i of every operand: a core of () is a
            # scalar where the signature says so, else a 1-element array
            flat_in = [a.reshape((n, 1)) if not dims and isinstance(ty, types.Array) else a
                       for a, dims, ty in zip(flat_in, self._in_dims, sig[:nin])]
            self._kernel()[_grid(n), _TPB, stream](*flat_in, *flat_out)
        results = []
        for k, dev in enumerate(targets):
            given = outs[k] if outs is not None else None
            if given is not None:
                results.append(_write_back(given, dev, stream))
            elif not shapes[k]:
                results.append(_to_host(dev, stream)[()])
            else:
                results.append(_as_result(dev) if any_device else _to_host(dev, stream))
        return results[0] if nout == 1 else tuple(results)

    @staticmethod
    def _show(dims):
        return "(" + ",".join(dims) + ")"

    def _kernel(self):
        if self._gukernel is None:
            params = [f"a{k}" for k in range(self.nargs)]
            src = (f"def gufunc_{self.__name__}({', '.join(params)}):\n"
                   f"    i = grid(1)\n    step = gridsize(1)\n    n = {params[-1]}.shape[0]\n"
                   f"    while i < n:\n        f({', '.join(p + '[i]' for p in params)})\n"
                   f"        i += step\n")
            from .compiler.intrinsics.indexing import grid, gridsize
            env = {"grid": grid, "gridsize": gridsize, "f": self._element}
            exec(compile(src, f"<cuda.guvectorize({self.__name__})>", "exec"), env)
            self._gukernel = jit(env[f"gufunc_{self.__name__}"])
        return self._gukernel


def _shares(view, base):
    if simulated():
        return np.shares_memory(view, base)
    return view.data.ptr == base.data.ptr


# -- decorators ------------------------------------------------------------------------------

def vectorize(signatures=None, **options):
    """numba-cuda's ``@cuda.vectorize(signatures)``: a ``CUDAUFunc``.  Without signatures
    (``@cuda.vectorize`` or ``@cuda.vectorize()``) each new combination of input dtypes compiles
    on first use."""
    if callable(signatures) and not isinstance(signatures, (str, list, tuple)):
        return CUDAUFunc(signatures, (), **options)
    sigs = [signatures] if isinstance(signatures, (str, types.Type)) or \
        hasattr(signatures, "args") else list(signatures or ())

    def wrap(func):
        return CUDAUFunc(func, sigs, **options)
    return wrap


def guvectorize(signatures, layout=None, **options):
    """numba-cuda's ``@cuda.guvectorize(signatures, "(n),(n)->()")``: a ``CUDAGUFunc``."""
    if layout is None:
        raise TypeError("cuda.guvectorize needs the signatures and the layout: "
                        "guvectorize(['void(float32[:], float32[:])'], '(n)->(n)')")
    sigs = [signatures] if isinstance(signatures, str) or hasattr(signatures, "args") else \
        list(signatures)

    def wrap(func):
        return CUDAGUFunc(func, sigs, layout, **options)
    return wrap


# -- numba.vectorize(target="cuda") ----------------------------------------------------------

class CUDAVectorize:
    """Numba's ufunc-builder protocol (``numba.vectorize(..., target="cuda")``)."""

    def __init__(self, func, identity=None, cache=False, targetoptions=None):
        self._func, self._identity = func, identity
        self._options = dict(targetoptions or {})
        self._sigs = []

    def add(self, sig):
        self._sigs.append(sig)

    def disable_compile(self):
        pass

    def build_ufunc(self):
        return CUDAUFunc(self._func, self._sigs, identity=self._identity, **self._options)


class CUDAGUFuncVectorize:
    """Numba's gufunc-builder protocol (``numba.guvectorize(..., target="cuda")``)."""

    def __init__(self, func, signature, identity=None, cache=False, targetoptions=None,
                 writable_args=()):
        self._func, self._layout, self._identity = func, signature, identity
        self._options = dict(targetoptions or {})
        self._sigs = []

    def add(self, sig):
        self._sigs.append(sig)

    def disable_compile(self):
        pass

    def build_ufunc(self):
        return CUDAGUFunc(self._func, self._sigs, self._layout, identity=self._identity,
                          **self._options)


def register_numba_target(replace=False):
    """Make ``numba.vectorize(..., target="cuda")`` / ``numba.guvectorize`` build gpureplace's
    ufuncs.  Numba gives that target to the ``numba.cuda`` package; ``import gpureplace.cuda``
    takes it over only where no ``numba.cuda`` is installed, ``replace=True`` in any case (for
    code ported from numba-cuda in a process that does not also use numba's own CUDA target).
    Returns whether the target is now gpureplace's."""
    import importlib.util
    from numba.np.ufunc.decorators import GUVectorize, Vectorize
    if not replace:
        try:
            if importlib.util.find_spec("numba.cuda") is not None:
                return False
        except (ImportError, ValueError):
            pass
    for registry, builder in ((Vectorize.target_registry, CUDAVectorize),
                              (GUVectorize.target_registry, CUDAGUFuncVectorize)):
        registry.ondemand.pop("cuda", None)
        if "cuda" in registry:                  # already built: dict.__delitem__ is allowed
            dict.__delitem__(registry, "cuda")
        registry.ondemand["cuda"] = lambda builder=builder: builder
    return True


__all__ = ["vectorize", "guvectorize", "CUDAUFunc", "CUDAGUFunc", "CUDAVectorize",
           "CUDAGUFuncVectorize"]
