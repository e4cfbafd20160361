"""``cuda.guvectorize``'s object: a generalised ufunc over the loop dimensions, one thread per
element of the broadcast loop."""

from __future__ import annotations

import re

import numpy as np
from numba.core import types

from ..compiler.signature import normalize_signature
from ..jit import jit, pickling
from ..jit.backends import simulated
from .lazy import any_dask, gufunc_over_dask
from .ufunc import identifier
from .operands import (GENERATED, Operand, array_module, as_result, check_options, check_out_dtype, choose,
                       configured, device_view, dtype_of, element_function, is_device, on_stream,
                       shape_of, to_host, write_back)

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


def refuse_writable_args(writable_args):
    """numba-cuda's refusal of ``guvectorize(writable_args=...)``: a device array given as input
    is written where it is, a host input is a copy."""
    if writable_args:
        raise TypeError("guvectorize(writable_args=...): writable_args are not supported on "
                        "the GPU: a device array given as input is written in place, a host "
                        "array is copied to the device and not back")


class CUDAGUFunc:
    """What ``@cuda.guvectorize`` returns: a generalised ufunc over the loop dimensions."""

    def __init__(self, func, signatures, layout, identity=None, writable_args=(), *,
                 _context=None, **options):
        refuse_writable_args(writable_args)
        jit_options = check_options("guvectorize", options)
        # what a pickle rebuilds it from: the function, the signatures added, the options
        self._given = (func, [], dict(options, identity=identity))
        # the context its kernel compiles in: None, the default one of the moment; rebuilt from
        # a pickle, the one pickled with it (jit/pickling.py)
        self._context = _context
        self.py_func = getattr(func, "py_func", func)
        self._element = element_function(func, "guvectorize", jit_options, _context)
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

    def __reduce__(self):
        """Pickled as its Python function, signatures, options and context (jit/pickling.py)."""
        func, sigs, kwargs = self._given
        return pickling.reduce_made(self, func, (sigs, self.signature), kwargs, self._context)

    def __dask_tokenize__(self):
        """Dask's token: the digest of its definition and its context's (a redefinition, or
        a changed override, gets a new one)."""
        func, sigs, kwargs = self._given
        return pickling.made_token(self, func, (sigs, self.signature), kwargs, self._context)

    def add(self, sig):
        args, ret = normalize_signature(sig, f"cuda.guvectorize of {self.__qualname__}")
        if ret is not None and ret != types.void and ret != types.none:
            raise TypeError(f"guvectorized functions cannot return values: the signature "
                            f"{sig!r} specifies {ret} return type")
        if len(args) != self.nargs:
            raise TypeError(f"cuda.guvectorize: the signature {sig!r} has {len(args)} "
                            f"argument(s), the layout {self.signature!r} {self.nargs}")
        self._signatures.append(tuple(args))
        self._given[1].append(sig)

    def __repr__(self):
        return f"<gpureplace.cuda guvectorize {self.__qualname__} {self.signature}>"

    def _select(self, ops):
        dtypes = [op.dtype for op in ops]
        cands = [(tuple(dtype_of(getattr(t, "dtype", t)) for t in sig[:self.nin]), sig)
                 for sig in self._signatures]
        hit = choose(cands, ops)
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
        if any_dask(args[:nin]):                 # (a lazy Dask array, block by block)
            return gufunc_over_dask(self, args[:nin], out if len(args) == nin else args[nin:])
        outs = list(args[nin:]) or None
        if out is not None:
            if outs is not None:
                raise ValueError("cannot specify argument 'out' as both positional and keyword")
            outs = list(out) if isinstance(out, tuple) else [out]
        if outs is not None and len(outs) != nout:
            raise ValueError(f"{self.__qualname__}: {nout} output(s), {len(outs)} given")
        ops = [Operand(a, f"{self.__qualname__}: argument {i}")
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
        xp = array_module()
        out_dtypes = [dtype_of(getattr(t, "dtype", t)) for t in sig[nin:]]
        shapes = [loop + tuple(sizes[d] for d in dims) for dims in self._out_dims]
        any_device = any(op.kind == "device" for op in ops)
        n = int(np.prod(loop)) if loop else 1
        flat_in, copied_back = [], []
        for i, (op, dims, ty) in enumerate(zip(ops, self._in_dims, sig[:nin])):
            arr = op.on_device(dtype_of(getattr(ty, "dtype", ty)), stream)
            flat_in.append(self._rows(i, op, arr, loop, tuple(sizes[d] for d in dims), sig,
                                      stream, copied_back))
        targets, flat_out = [], []
        for k, (shape, dt) in enumerate(zip(shapes, out_dtypes)):
            given = outs[k] if outs is not None else None
            if given is not None and shape_of(given) != shape:
                if not _without_unit_loop_dims(shape_of(given), shape, len(loop)):
                    raise ValueError(f"{self.__qualname__}: output {k} has shape "
                                     f"{shape_of(given)}, expected {shape}")
                # (numba-cuda's old-style scalars: ``()`` inputs given as 1-element arrays make
                # loop dimensions of 1, which the output may leave out: as many elements, in
                # the same order)
            if given is not None:
                check_out_dtype(self.__name__, dt, given)
            dev = device_view(given) if given is not None and is_device(given) else None
            if dev is None or dev.dtype != dt:
                with on_stream(stream):
                    dev = xp.empty(shape, dt)
            targets.append(dev)
            core = shape[len(loop):]
            view = dev.reshape((n,) + (core or (1,)))
            if view.size and not _shares(view, dev):     # (an empty one is not written)
                raise ValueError(f"{self.__qualname__}: output {k} cannot be viewed as "
                                 f"{n} rows without a copy (give a contiguous array)")
            flat_out.append(view)
        if n:
            # each thread calls the function on row i of every operand: a core of () is a
            # scalar where the signature says so, else a 1-element array
            flat_in = [a.reshape((n, 1)) if not dims and isinstance(ty, types.Array) else a
                       for a, dims, ty in zip(flat_in, self._in_dims, sig[:nin])]
            configured(self._kernel(), n, stream)(*flat_in, *flat_out)
            for user, rows in copied_back:   # (a device input the kernel wrote, through a copy)
                with on_stream(stream):
                    user[...] = rows.reshape(user.shape)
        results = []
        for k, dev in enumerate(targets):
            given = outs[k] if outs is not None else None
            if given is not None:
                results.append(write_back(given, dev, stream))
            elif not shapes[k]:
                results.append(to_host(dev, stream)[()])
            else:
                results.append(as_result(dev) if any_device else to_host(dev, stream))
        return results[0] if nout == 1 else tuple(results)

    def _rows(self, i, op, arr, loop, core, sig, stream, copied_back):
        """Input ``i`` (``arr``, on the device as the signature's type) as one row per element
        of the loop, ``(n,) + core``.  As numba-cuda: an input whose loop dimensions hold as
        many elements as the loop is only reshaped, so that what the element function writes
        into a device input reaches it (a host input is a copy, not copied back); one spread
        over the loop (broadcast, zero strides) is refused where the function writes it, as
        every row would be the same memory, written by many threads at once (numba-cuda lets
        them race)."""
        xp = array_module()
        n = int(np.prod(loop)) if loop else 1
        own = op.shape[:len(op.shape) - len(core)]
        if (int(np.prod(own)) if own else 1) == n:
            with on_stream(stream):
                rows = arr.reshape((n,) + core)
            if op.kind == "device" and n and rows.size:
                if arr is not op.value and self._writes_input(sig, i):
                    raise TypeError(
                        f"{self.__qualname__}: argument {i} is a device array of "
                        f"{op.value.dtype}, which the signature takes as {arr.dtype}: the "
                        f"function writes that argument, and would write a converted copy of "
                        f"it, not it; pass a device array of {arr.dtype}")
                if not _shares(rows, arr) and self._writes_input(sig, i):
                    copied_back.append((arr, rows))     # (not viewable as rows: a copy)
            return rows
        if n and self._writes_input(sig, i):
            raise ValueError(
                f"{self.__qualname__}: argument {i} (shape {op.shape}) is broadcast over the "
                f"loop dimensions {loop}, and the function writes it: every one of the {n} "
                f"calls would write the same memory at once; pass an array of loop dimensions "
                f"{loop} (e.g. np.broadcast_to(a, {loop + core}).copy())")
        with on_stream(stream):
            return xp.broadcast_to(arr, loop + core).reshape((n,) + core)

    def _writes_input(self, sig, i):
        """Whether the element function writes input ``i`` of signature ``sig``: its front end
        fails with that parameter typed read-only (cached per signature and world age)."""
        ty = sig[i]
        if not isinstance(ty, types.Array) or not ty.mutable:
            return False
        return self._element._writes_parameter(tuple(sig), i, ty.copy(readonly=True)) \
            is not None

    @staticmethod
    def _show(dims):
        return "(" + ",".join(dims) + ")"

    def _kernel(self):
        if self._gukernel is None:
            params = [f"a{k}" for k in range(self.nargs)]
            name = identifier(self.__name__)
            src = (f"def gufunc_{name}({', '.join(params)}):\n"
                   f"    i = grid(1)\n    step = gridsize(1)\n    n = {params[-1]}.shape[0]\n"
                   f"    while i < n:\n        f({', '.join(p + '[i]' for p in params)})\n"
                   f"        i += step\n")
            from ..compiler.intrinsics.indexing import grid, gridsize
            env = {"grid": grid, "gridsize": gridsize, "f": self._element, "__name__": GENERATED}
            exec(compile(src, f"<cuda.guvectorize({self.__name__})>", "exec"), env)
            self._gukernel = jit(env[f"gufunc_{name}"], context=self._context)
        return self._gukernel


def _without_unit_loop_dims(given, expected, nloop):
    """Whether the output shape ``given`` is ``expected`` less leading loop dimensions that are
    all 1 (numba-cuda accepts such an output)."""
    drop = len(expected) - len(given)
    return 0 < drop <= nloop and all(n == 1 for n in expected[:drop]) and \
        tuple(expected[drop:]) == tuple(given)


def _shares(view, base):
    if simulated():
        return np.shares_memory(view, base)
    return view.data.ptr == base.data.ptr
