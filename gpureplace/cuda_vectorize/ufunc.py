"""``cuda.vectorize``'s object: elementwise calls through generated grid-stride kernels."""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.np import numpy_support

from ..compiler.signature import normalize_signature
from ..jit import jit, pickling
from ..jit.backends import simulated
from .lazy import any_dask, ufunc_over_dask
from .operands import (GENERATED, Operand, array_module, as_result, check_options, check_out_dtype, choose,
                       configured, device_view, dtype_of, element_function, is_device, on_stream,
                       scalar_as, shape_of, to_host, write_back)

# -- vectorize -------------------------------------------------------------------------------

#: what an element function may return (datetime64 / timedelta64 too: their int64 counts)
_SCALAR_RESULTS = (types.Number, types.Boolean, types.NPDatetime, types.NPTimedelta)


class CUDAUFunc:
    """What ``@cuda.vectorize`` returns: call it like a NumPy ufunc."""

    def __init__(self, func, signatures=(), identity=None, *, _context=None, **options):
        jit_options = check_options("vectorize", options)
        # what a pickle rebuilds it from: the function, the signatures added, the options
        self._given = (func, [], dict(options, identity=identity))
        # the context its kernels compile in: None, the default one of the moment; rebuilt from
        # a pickle, the one pickled with it (jit/pickling.py)
        self._context = _context
        self.py_func = getattr(func, "py_func", func)
        self._element = element_function(func, "vectorize", jit_options, _context)
        self.__name__ = getattr(self.py_func, "__name__", "ufunc")
        self.__qualname__ = getattr(self.py_func, "__qualname__", self.__name__)
        self.__doc__ = getattr(self.py_func, "__doc__", None)
        self.__wrapped__ = self.py_func
        self.identity = identity
        self._signatures = []
        self._kernels = {}
        # made without signatures: compiles for input types no signature so far takes (as
        # Numba's dynamic ufuncs do), not only for the first
        self._dynamic = not signatures
        for sig in signatures:
            self.add(sig)
        self.nin = self._nparams()
        self.nout = 1
        self.nargs = self.nin + 1

    def _nparams(self):
        import inspect
        return len(inspect.signature(self.py_func).parameters)

    def __reduce__(self):
        """Pickled as its Python function, signatures, options and context (jit/pickling.py)."""
        func, sigs, kwargs = self._given
        return pickling.reduce_made(self, func, (sigs,), kwargs, self._context)

    def __dask_tokenize__(self):
        """Dask's token: the digest of its definition and its context's (a redefinition, or
        a changed override, gets a new one)."""
        func, sigs, kwargs = self._given
        return pickling.made_token(self, func, (sigs,), kwargs, self._context)

    def add(self, sig):
        """Add a signature (``"float32(float32, float32)"``, or Numba types)."""
        args, ret = normalize_signature(sig, f"cuda.vectorize of {self.__qualname__}")
        if any(isinstance(t, types.Array) for t in args) or isinstance(ret, types.Array):
            raise TypeError(f"cuda.vectorize: {sig!r} has array types; vectorize takes scalar "
                            f"element types (guvectorize takes arrays)")
        if ret is None:
            # argument types only (Numba's form): the return type is the function's, compiled
            ret = self._element.compile(tuple(args)).restype
            if not isinstance(ret, _SCALAR_RESULTS):
                raise TypeError(f"cuda.vectorize: {self.__qualname__} returns {ret} for "
                                f"{sig!r}; a vectorized function returns a number")
        self._signatures.append((tuple(dtype_of(t) for t in args), dtype_of(ret)))
        self._given[1].append(sig)

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
        hit = choose([s for s in self._signatures if len(s[0]) == len(ops)], ops)
        if hit is not None:
            return hit
        if not self._dynamic:
            have = ", ".join(self.types)
            raise TypeError(f"{self.__qualname__}: no signature takes input types "
                            f"({', '.join(map(str, dtypes))}) safely; it has {have}")
        # made without signatures: this combination compiles now (its return type from the
        # function); a later call whose types a loop so far takes safely uses that one
        argtypes = tuple(numpy_support.from_dtype(d) for d in dtypes)
        restype = self._element.compile(argtypes).restype
        if not isinstance(restype, _SCALAR_RESULTS):
            raise TypeError(f"{self.__qualname__} returns {restype} for ({', '.join(map(str, dtypes))}); "
                            f"a vectorized function returns a number")
        sig = (tuple(dtypes), dtype_of(restype))
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
        if any_dask(args):                      # (a lazy Dask array, block by block)
            return ufunc_over_dask(self, args, out)
        if isinstance(out, tuple):              # NumPy's out=(arr,): one output
            if len(out) != 1:
                raise ValueError(f"{self.__qualname__}: out= is a tuple of {len(out)} "
                                 f"arrays; a vectorized function has 1 output")
            out = out[0]
        ops = [Operand(a, f"{self.__qualname__}: argument {i}") for i, a in enumerate(args)]
        ins, out_dtype = self._select(ops)
        try:
            shape = np.broadcast_shapes(*(op.shape for op in ops))
        except ValueError:
            raise ValueError(f"{self.__qualname__}: operands could not be broadcast together "
                             f"with shapes {' '.join(str(op.shape) for op in ops)}") from None
        if out is not None:
            if shape_of(out) != shape:
                # (NumPy broadcasts the inputs to a larger out; numba-cuda refuses any other
                # shape, as here)
                raise ValueError(f"{self.__qualname__}: out has shape {shape_of(out)}, the "
                                 f"broadcast inputs {shape}: out= must have the inputs' "
                                 f"broadcast shape")
            check_out_dtype(self.__name__, out_dtype, out)
        xp = array_module()
        values = []
        for op, dt in zip(ops, ins):
            if op.kind == "scalar":
                values.append(scalar_as(op, dt))
            else:
                values.append(op.on_device(dt, stream))
        any_device = any(op.kind == "device" for op in ops)
        target = None
        if out is not None and is_device(out):
            target = device_view(out)
        if target is None:
            arrays = [v for v in values if not np.isscalar(v) and v.ndim > 1]
            fortran = arrays and all(a.flags.f_contiguous and not a.flags.c_contiguous
                                     for a in arrays)
            order = "F" if fortran else "C"
            with on_stream(stream):
                target = xp.empty(shape, out_dtype if out is None else out.dtype, order=order)
        self._run(values, target, shape, stream)
        if out is not None:
            return write_back(out, target, stream)
        if not shape:
            return to_host(target, stream)[()]
        return as_result(target) if any_device else to_host(target, stream)

    def _run(self, values, target, shape, stream):
        n = int(np.prod(shape)) if shape else 1
        if n == 0:
            return
        arrays = [v for v in values if not np.isscalar(v)]
        same = all(tuple(a.shape) == shape for a in arrays)
        flat_c = same and target.flags.c_contiguous and all(a.flags.c_contiguous for a in arrays)
        flat_f = same and target.flags.f_contiguous and all(a.flags.f_contiguous for a in arrays)
        xp = array_module()
        if flat_c or flat_f or not shape:
            order = "C" if flat_c or not shape else "F"
            flat = [v if np.isscalar(v) else v.reshape(-1, order=order) for v in values]
            dest = target.reshape(-1, order=order)
            kernel = self._kernel(tuple(np.isscalar(v) for v in values), 1)
        else:
            with on_stream(stream):
                flat = [v if np.isscalar(v) else xp.broadcast_to(v, shape) for v in values]
            dest = target
            kernel = self._kernel(tuple(np.isscalar(v) for v in values), len(shape))
        configured(kernel, n, stream)(*flat, dest)

    def _kernel(self, scalars, ndim):
        key = (scalars, ndim)
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = self._kernels[key] = _elementwise_kernel(self._element, scalars, ndim,
                                                              self.__name__, self._context)
        return kernel

    def reduce(self, arr, axis=0, stream=0, out=None):
        """Combine the elements of a 1-D array pairwise with the (binary, associative)
        function; returns a host scalar (or writes ``out[0]``)."""
        if self.nin != 2:
            raise ValueError(f"{self.__qualname__}.reduce needs a function of two arguments")
        if axis != 0:
            raise NotImplementedError(f"{self.__qualname__}.reduce: only axis=0 of a 1-D array")
        op = Operand(arr, f"{self.__qualname__}.reduce: arr")
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
            y = np.asarray(y) if simulated() else device_view(y)
            if n % 2:
                self(y[:1], x[n - 1:n], out=y[:1], stream=stream)
            x, n = y, half
        result = to_host(x[:1], stream)[0]
        if out is not None:
            return write_back(out, x[:1], stream)
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


def identifier(name):
    """``name`` made a Python identifier, for the generated kernel (a lambda's is ``<lambda>``)."""
    import re
    name = re.sub(r"\W", "_", str(name)).strip("_") or "function"
    return name if name.isidentifier() else "f_" + name


def _elementwise_kernel(element, scalars, ndim, name, context):
    """A grid-stride kernel calling ``element`` on each element: 1-D (flattened contiguous
    operands) or N-D (broadcast views of any strides), compiled in ``context``."""
    name = identifier(name)
    from ..compiler.intrinsics.indexing import grid, gridsize
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
    env = {"grid": grid, "gridsize": gridsize, "f": element, "__name__": GENERATED}
    exec(compile(src, f"<cuda.vectorize({name})>", "exec"), env)
    return jit(env[f"vectorized_{name}"], context=context)
