"""NumPy ufuncs on arrays in device code: ``np.sin(x, out)``, ``np.add(a, b, out=c)``.

Inside a kernel a ufunc on scalars is the device function the Context gives it (libdevice, an
NVVM intrinsic, an override).  Called with arrays and an output array, as numba-cuda allows, it
becomes a loop over the output's elements, each computed by that same scalar call, with NumPy's
broadcasting (inputs of fewer dimensions align to the trailing ones, axes of length 1 repeat).
The loop is a generated device function, typed and compiled in the calling kernel's Context
like any helper, so an override of the ufunc applies to the array form too.  Without an output
array the call would allocate, which device code cannot: that is a clear compile error.
"""

from __future__ import annotations

import numpy as np
from numba.core import errors as nb_errors, types

_LOOPS = {}


def loop_input_types(ufunc, argtypes):
    """NumPy's choice of loop for these argument types: the input types of the first of
    ``ufunc.types`` that every argument casts to safely (int32 -> float64 for np.arccos), as
    Numba types; None where the argument is used as it is."""
    from numba.np import numpy_support
    try:
        dts = [numpy_support.as_dtype(getattr(a, "dtype", a)) for a in argtypes]
    except (NotImplementedError, TypeError):
        return [None] * len(argtypes)
    return [None if t is None else numpy_support.from_dtype(t)
            for t in numpy_loop_dtypes(ufunc, dts)]


def numpy_loop_dtypes(ufunc, dtypes):
    """Per input dtype, the dtype NumPy's loop for ``ufunc`` converts it to (None: unchanged)."""
    for spec in ufunc.types:
        chars = spec.split("->")[0]
        if len(chars) != len(dtypes) or any(c in "OMm" for c in chars):
            continue
        loop = [np.dtype(c) for c in chars]
        if all(np.can_cast(d, t, "safe") for d, t in zip(dtypes, loop)):
            return [None if d == t else t for d, t in zip(dtypes, loop)]
    return [None] * len(dtypes)


def loop_function(ufunc, in_ndims, out_ndims, casts=None):
    """The device function computing ``ufunc`` elementwise: inputs with ``in_ndims`` (None for
    a scalar), outputs with ``out_ndims`` (all of the same rank); made once per shape.
    ``casts``: per input, the Numba type its elements convert to first (None: as they are)."""
    casts = tuple(casts or [None] * len(in_ndims))
    key = (ufunc, tuple(in_ndims), tuple(out_ndims), casts)
    fn = _LOOPS.get(key)
    if fn is not None:
        return fn
    ins = [f"a{k}" for k in range(len(in_ndims))]
    outs = ["out"] if len(out_ndims) == 1 else [f"out{k}" for k in range(len(out_ndims))]
    rank = out_ndims[0]
    first = outs[0]

    def element(name, ndim):
        if ndim is None:
            return name
        if ndim == 0:
            return f"{name}[()]"
        index = ", ".join(f"(i{rank - ndim + d} if {name}.shape[{d}] != 1 else 0)"
                          for d in range(ndim))
        return f"{name}[{index},]"

    def converted(k, a, n):
        return f"T{k}({element(a, n)})" if casts[k] is not None else element(a, n)

    call = f"UF({', '.join(converted(k, a, n) for k, (a, n) in enumerate(zip(ins, in_ndims)))})"
    lines = [f"def {ufunc.__name__}_on_arrays({', '.join(ins + outs)}):"]
    indent = "    "
    for d in range(rank):                  # nested loops over the output's axes
        lines.append(f"{indent}for i{d} in range({first}.shape[{d}]):")
        indent += "    "
    where = ", ".join(f"i{d}" for d in range(rank)) + "," if rank else "()"
    lines += [indent + line for line in _stores([f"{o}[{where}]" for o in outs], call)]
    lines.append(f"    return {first if len(outs) == 1 else '(' + ', '.join(outs) + ',)'}")
    src = "\n".join(lines) + "\n"
    env = {"UF": ufunc, **{f"T{k}": t for k, t in enumerate(casts) if t is not None}}
    exec(compile(src, f"<{ufunc.__name__} on arrays>", "exec"), env)
    fn = env[f"{ufunc.__name__}_on_arrays"]
    fn.source = src
    _LOOPS[key] = fn
    return fn


def _stores(targets, call):
    if len(targets) == 1:
        return [f"{targets[0]} = {call}"]
    return [f"r = {call}"] + [f"{t} = r[{k}]" for k, t in enumerate(targets)]


class UfuncType(types.Callable, types.Opaque):
    """A NumPy ufunc in device code: scalar calls go to the Context's meaning of it (``inner``),
    calls with arrays to a generated elementwise loop."""

    _instances = {}

    @classmethod
    def get(cls, ufunc, inner, frame):
        ident = (ufunc, inner, frame.context.uid, frame.options)
        inst = cls._instances.get(ident)
        if inst is None:
            inst = cls._instances[ident] = cls(ufunc, inner, frame, ident)
        return inst

    def __init__(self, ufunc, inner, frame, ident):
        self.ufunc, self.inner = ufunc, inner
        self._context, self._options = frame.context, frame.options
        self._ident = ident
        self._chosen = {}
        super().__init__(name=f"ufunc({ufunc.__name__}, context={frame.context.name})")

    @property
    def key(self):
        return (self.name, id(self.ufunc), id(self.inner), self._ident[2:])

    def get_call_type(self, context, args, kws):
        uf = self.ufunc
        out_kw = kws.get("out")
        if not any(isinstance(a, types.Array) for a in args) and out_kw is None and \
                len(args) <= uf.nin:
            sig = context.resolve_function_type(self.inner, args, kws)
            if sig is not None:
                self._chosen[tuple(sig.args)] = self.inner
            return sig
        if set(kws) - {"out"}:
            raise nb_errors.TypingError(
                f"np.{uf.__name__} on arrays in device code takes the inputs and out, not "
                f"{', '.join(sorted(set(kws) - {'out'}))}")
        ins, outs = list(args[:uf.nin]), list(args[uf.nin:])
        if out_kw is not None:
            if outs:
                raise nb_errors.TypingError(f"np.{uf.__name__}: out given both positionally "
                                            f"and as a keyword")
            outs = list(out_kw.types) if isinstance(out_kw, types.BaseTuple) else [out_kw]
        if len(ins) != uf.nin:
            raise nb_errors.TypingError(f"np.{uf.__name__} takes {uf.nin} input(s), got "
                                        f"{len(ins)}")
        if len(outs) != uf.nout or not all(isinstance(o, types.Array) for o in outs):
            raise nb_errors.TypingError(
                f"np.{uf.__name__} on arrays in device code needs its output array"
                f"{'s' if uf.nout > 1 else ''} given (np.{uf.__name__}(..., out)): device code "
                f"cannot allocate the result")
        rank = outs[0].ndim
        if any(o.ndim != rank for o in outs) or any(
                isinstance(a, types.Array) and a.ndim > rank for a in ins):
            raise nb_errors.TypingError(
                f"np.{uf.__name__}: inputs of {[getattr(a, 'ndim', 0) for a in ins]} "
                f"dimensions do not broadcast to an output of {rank}")
        for a in ins:
            if not isinstance(a, (types.Array, types.Number, types.Boolean)):
                raise nb_errors.TypingError(f"np.{uf.__name__} cannot take {a} in device code")
        from .resolve import DeviceFunctionType, current_frame
        frame = current_frame()
        fn = loop_function(uf, [a.ndim if isinstance(a, types.Array) else None for a in ins],
                           [o.ndim for o in outs], loop_input_types(uf, ins))
        fnty = DeviceFunctionType.get(fn, self._context, frame.mask if frame else {},
                                      self._options)
        folded = tuple(ins) + tuple(outs)
        sig = context.resolve_function_type(fnty, folded, {})
        if sig is None:
            return None
        self._chosen[tuple(sig.args)] = fnty
        return sig          # (with the loop's pysig: a call's out= folds onto its parameter)

    def get_call_signatures(self):
        return [], True

    def get_impl_key(self, sig):
        return self._chosen[tuple(sig.args)].get_impl_key(sig)
