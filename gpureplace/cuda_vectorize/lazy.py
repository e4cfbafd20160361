"""``cuda.vectorize`` / ``cuda.guvectorize`` objects called on Dask arrays: a lazy Dask array, one
task per block (run where the blocks are: the workers), as NumPy's own ufuncs give on Dask
arrays -- rather than the whole array computed into the client and run there."""

from __future__ import annotations


def any_dask(args):
    """Whether any of ``args`` is a Dask collection (checked without importing Dask)."""
    return any(type(a).__module__.startswith("dask.") and hasattr(a, "__dask_graph__")
               for a in args)


def _no_out(fn, out):
    if out is not None:
        raise TypeError(f"{fn.__qualname__}: out= is not taken with Dask arrays, whose result is "
                        f"a lazy Dask array (store it with dask.array.store, or call "
                        f"{fn.__qualname__} on computed arrays)")


def ufunc_over_dask(fn, args, out):
    """``fn(*args)`` block by block, broadcast as NumPy broadcasts and with the blocks of
    operands chunked otherwise (or NumPy arrays) lined up, as Dask does for NumPy's own ufuncs
    (``dask.array.core.elemwise``).  The result's dtype is the signature ``fn`` chooses for the
    operands' dtypes, refused in the words it uses for NumPy arrays."""
    _no_out(fn, out)
    import dask.array as da
    import numpy as np

    from .operands import Operand
    samples = [np.zeros((1,) * a.ndim, a.dtype) if isinstance(a, da.Array) else a
               for a in args]
    ops = [Operand(a, f"{fn.__qualname__}: argument {i}") for i, a in enumerate(samples)]
    _, out_dtype = fn._select(ops)
    return da.core.elemwise(fn, *args, dtype=np.dtype(out_dtype))


def gufunc_over_dask(fn, args, out):
    """``fn(*args)`` over the loop dimensions' blocks, each core dimension in one chunk
    (``dask.array.apply_gufunc``, as for NumPy's gufuncs)."""
    _no_out(fn, out)
    import dask.array as da
    return da.apply_gufunc(fn, fn.signature, *args)
