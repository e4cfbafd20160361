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
    """``fn(*args)`` block by block, broadcast as NumPy broadcasts (``dask.array.apply_gufunc``
    with scalar cores, as for an elementwise function)."""
    _no_out(fn, out)
    import dask.array as da
    return da.apply_gufunc(fn, ",".join(["()"] * len(args)) + "->()", *args)


def gufunc_over_dask(fn, args, out):
    """``fn(*args)`` over the loop dimensions' blocks, each core dimension in one chunk
    (``dask.array.apply_gufunc``, as for NumPy's gufuncs)."""
    _no_out(fn, out)
    import dask.array as da
    return da.apply_gufunc(fn, fn.signature, *args)
