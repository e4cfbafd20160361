"""``cuda.reduce``: numba-cuda's reduction of a 1-D array with a binary function.

    sum_reduce = cuda.reduce(lambda a, b: a + b)
    total = sum_reduce(d_x)                      # a host scalar
    sum_reduce(d_x, res=d_out)                   # or left on the device, in d_out[0]

The binary function is compiled into the reduction's kernels like any helper a kernel calls, so
its redefinition (or a changed global it reads) recompiles them.  It must be associative: the
order in which elements are combined is not specified (as in numba-cuda).

Two passes of one kernel: each block combines a grid-stride share of the elements in shared
memory (at most ``_MAX_BLOCKS`` blocks), then one block combines the blocks' results, and a last
one-thread launch folds in ``init``.  Threads without an element carry a flag instead of an
identity value, so any function works, not only ones with an identity.
"""

from __future__ import annotations

import numpy as np

from . import hostapi
from .compiler.intrinsics.indexing import blockIdx, grid, gridDim, threadIdx
from .compiler.intrinsics.memory import shared
from .compiler.intrinsics.sync import syncthreads
from .jit import jit, pickling
from .jit.backends import simulated

_TPB = 256
_MAX_BLOCKS = 1024

_KERNELS = '''
def reduce_blocks(arr, n, out):
    vals = shared.array(TPB, arr.dtype)
    full = shared.array(TPB, int8)
    tid = threadIdx.x
    i = blockIdx.x * TPB + tid
    step = TPB * gridDim.x
    have = 0
    if i < n:
        acc = arr[i]
        have = 1
        i += step
        while i < n:
            acc = op(acc, arr[i])
            i += step
        vals[tid] = acc
    full[tid] = have
    syncthreads()
    s = TPB // 2
    while s > 0:
        if tid < s and full[tid + s]:
            if full[tid]:
                vals[tid] = op(vals[tid], vals[tid + s])
            else:
                vals[tid] = vals[tid + s]
                full[tid] = 1
        syncthreads()
        s //= 2
    if tid == 0:
        out[blockIdx.x] = vals[0]


def fold_init(partial, res, init):
    if grid(1) == 0:
        res[0] = op(init, partial[0])
'''


class Reduce:
    """A reduction with ``functor`` (a binary Python function, or a ``cuda.jit(device=True)``
    function); call it with a 1-D array."""

    def __init__(self, functor, *, _context=None):
        if not callable(functor):
            raise TypeError(f"cuda.reduce needs a binary function, got {functor!r}")
        self._functor = functor
        # the context its kernels compile in: None, the default one of the moment; rebuilt from
        # a pickle, the one pickled with it (jit/pickling.py)
        self._context = _context
        env = {"shared": shared, "threadIdx": threadIdx, "blockIdx": blockIdx,
               "gridDim": gridDim, "grid": grid, "syncthreads": syncthreads,
               "op": functor, "TPB": _TPB, "int8": np.int8}
        name = getattr(functor, "__name__", "op")
        exec(compile(_KERNELS, f"<cuda.reduce({name})>", "exec"), env)
        self._reduce_blocks = jit(env["reduce_blocks"], context=_context)
        self._fold_init = jit(env["fold_init"], context=_context)

    def __reduce__(self):
        """Pickled as its functor (cloudpickle: a lambda of a notebook by value) and context,
        as the kernels it launches are (jit/pickling.py)."""
        return pickling.reduce_made(self, self._functor, (), {}, self._context)

    def __dask_tokenize__(self):
        return pickling.made_token(self, self._functor, (), {}, self._context)

    def __call__(self, arr, size=None, res=None, init=0, stream=0):
        """Combine the first ``size`` elements of ``arr`` (all by default) and ``init``.

        Returns the result as a NumPy scalar, or writes it into ``res[0]`` (a device array) and
        returns None.  A host array is copied to the device first.

        As numba-cuda's ``Reduce.__call__``: ``size`` is a slice's stop, ``arr[:size]`` (a size
        beyond the array takes all of it, a negative one counts from its end; not an integer,
        a TypeError), and where that leaves no element the call returns ``init`` (of the
        array's type) and launches nothing, even with ``res`` given: ``res`` is left as it
        was.  Where numba-cuda differs: a 1-D array is checked with a ValueError (numba-cuda
        raises TypeError), lists and tuples are taken as host arrays, and ``res`` is checked
        to be an array of at least one element of the array's type.
        """
        if isinstance(arr, (list, tuple)):
            arr = np.asarray(arr)
        if getattr(arr, "ndim", 1) != 1:
            raise ValueError(f"cuda.reduce works on 1-D arrays, got shape {arr.shape}")
        length = int(arr.shape[0])
        # numba-cuda's ``arr = arr[:size]``: a slice's stop, clamped to the array
        if size is not None and (isinstance(size, bool) or not hasattr(size, "__index__")):
            raise TypeError(f"reduce: size must be an int (a slice's stop, arr[:size]) or None, "
                            f"got {size!r}")
        n = length if size is None else len(range(*slice(None, size).indices(length)))
        on_host = not (hostapi.is_cuda_array(arr) or simulated())
        if on_host:
            arr = hostapi.to_device(np.asarray(arr)[:n], stream=stream)
        elif simulated() and not isinstance(arr, np.ndarray):
            arr = np.asarray(arr)
        dtype = np.dtype(arr.dtype)
        init = dtype.type(init)
        if n < 1:
            return init                       # (numba-cuda: ``res`` is not written)
        if res is not None and (getattr(res, "dtype", None) != dtype or res.shape[0] < 1):
            raise ValueError(f"cuda.reduce: res must be a device array of at least one {dtype} "
                             f"element, got {res!r}")
        # (the simulator runs each block's threads in turn: a few blocks stride over the rest)
        cap = 4 if simulated() else _MAX_BLOCKS
        blocks = max(1, min((n + _TPB - 1) // _TPB, cap))
        partial = hostapi.device_array(blocks, dtype, stream=stream)
        self._reduce_blocks[blocks, _TPB, stream](arr, n, partial)
        if blocks > 1:
            self._reduce_blocks[1, _TPB, stream](partial, blocks, partial)
        out = res if res is not None else hostapi.device_array(1, dtype, stream=stream)
        self._fold_init[1, 1, stream](partial, out, init)
        if res is not None:
            return None
        return out.copy_to_host(stream=stream)[0]


def reduce(functor):
    """numba-cuda's ``@cuda.reduce``: a ``Reduce`` for ``functor``."""
    return Reduce(functor)


__all__ = ["reduce", "Reduce"]
