"""Kernels over Dask arrays: ``gpureplace.dask.map_blocks``.

A kernel, device function or ``vectorize`` object pickles by what defines it (jit/pickling.py):
a Dask worker compiles it for its own GPU, or keeps what it compiled for an earlier task of the
same definition, and a redefinition in the notebook reaches the workers with the next task,
where only what changed is compiled again.  Dask tokenizes them by the same definition
(``__dask_tokenize__``), so graphs built with ``pure=True`` (the default) recompute after a
redefinition and not otherwise.

``map_blocks`` is the common case: a kernel launched once per block of one or more Dask arrays
(CuPy-backed on GPU workers; NumPy-backed under the simulator), writing a new block allocated
where the task runs::

    y = gpureplace.dask.map_blocks(saxpy, 2.0, x, x)     # saxpy(a, x, y, out), out per block

In a notebook the workers need not wait for the next task to learn of a redefinition: after a
cell that changed a kernel sent to them before (the kernel, or a helper or global it reads),
the extension's background round (gpureplace/jit/ahead.py) sends the new definition to every
worker of the current ``distributed`` client (``push_redefinitions``), where it is bound in
place of the old one and its stale launches compile and load in the worker's own background
round, while the user types.  The next task carries the same definition and finds it ready.
"""

from __future__ import annotations

import numbers

__all__ = ["map_blocks", "launch_block", "push_redefinitions", "sent_elsewhere"]

_DEFAULT_THREADS = {1: 256, 2: (16, 16), 3: (8, 8, 4)}


def map_blocks(kernel, *args, dtype=None, threads=None, name=None):
    """A Dask array whose blocks are ``kernel`` launched on the blocks of the Dask arrays in
    ``args``.

    ``kernel(*args, out)``: every Dask array argument is passed block by block (they must be
    chunked alike), a 0-d Dask array (``1 / x.max()``) as the scalar it computes to, of its
    dtype (computed in the graph, before the task: the result stays lazy), anything else as it
    is; ``out`` is a new block of the first array's block shape and ``dtype`` (default: the first
    array's), allocated by that block's array library (CuPy on a GPU worker).  The launch has one thread per element: ``threads`` per block
    (an int for one-dimensional blocks, default 256; else a tuple with one entry per dimension,
    default (16, 16) or (8, 8, 4)), and as many blocks as the block's shape needs, so the kernel
    indexes with ``cuda.grid(ndim)`` and checks the bounds against ``out.shape``.  ``name``:
    the output's key name (as Dask's ``map_blocks``; by default one made from the kernel's name
    and the token of everything that defines the result).
    """
    try:
        import dask.array as da
    except ImportError as exc:
        raise ImportError(f"gpureplace.dask.map_blocks needs Dask's arrays ({exc}): pip install "
                          f"'dask[array]' distributed (or gpureplace's 'dask' extra)") from exc
    from .jit.function import GPUFunction

    if not isinstance(kernel, GPUFunction) or kernel.device:
        raise TypeError(f"gpureplace.dask.map_blocks: the first argument must be a kernel "
                        f"(a function decorated with cuda.jit), got {kernel!r}")
    # (positions are counted from 1, as the kernel's parameters: "argument 2" is args[1])
    arrays = [(i, a) for i, a in enumerate(args) if isinstance(a, da.Array)]
    if not arrays:
        raise TypeError(f"gpureplace.dask.map_blocks({kernel.__name__}, ...): no argument is a "
                        f"Dask array (pass the arrays whose blocks the kernel runs over)")
    blocked = [(i, a) for i, a in arrays if a.ndim > 0]
    scalars = tuple(i for i, a in arrays if a.ndim == 0)
    if not blocked:
        at = ", ".join(str(i + 1) for i in scalars)
        raise TypeError(f"gpureplace.dask.map_blocks({kernel.__name__}, ...): the Dask array "
                        f"argument{'s' if len(scalars) > 1 else ''} {at} "
                        f"{'are' if len(scalars) > 1 else 'is'} 0-d, which the kernel gets as "
                        f"a scalar; pass an array of 1 to 3 dimensions too, whose blocks the "
                        f"kernel runs over")
    first_at, first = blocked[0]
    for i, a in blocked[1:]:
        if a.shape != first.shape or a.chunks != first.chunks:
            raise ValueError(f"gpureplace.dask.map_blocks({kernel.__name__}, ...): Dask array "
                             f"argument {i + 1} has shape {a.shape} and chunks {a.chunks}, "
                             f"argument {first_at + 1} (the first) has {first.shape} and "
                             f"{first.chunks}; rechunk them alike")
    import numpy as np
    dtype = np.dtype(first.dtype if dtype is None else dtype)
    threads = _threads(threads, first.ndim, kernel)
    meta = _empty_like(first._meta, (0,) * first.ndim, dtype)
    # The kernel goes in every task (not as a value of the graph under its token's key: a
    # worker still holding that value from before a redefinition would run the old code); its
    # pickle is remembered while nothing it reads changes (jit/pickling.py), so this is cheap.
    naming = {"name": name} if name else {"token": f"gpureplace-{kernel.__name__}"}
    extra = {"scalars": scalars} if scalars else {}
    return da.map_blocks(launch_block, kernel, threads, dtype.str, first_at, *args,
                         dtype=dtype, meta=meta, **naming, **extra)


def launch_block(kernel, threads, dtype, first_at, *args, scalars=()):
    """One task of ``map_blocks``: a new block shaped as ``args[first_at]``, ``kernel``
    launched over it; ``scalars``: the positions of 0-d arrays, passed as their one value."""
    if scalars:
        args = tuple(_scalar(a) if i in scalars else a for i, a in enumerate(args))
    block = args[first_at]
    out = _empty_like(block, block.shape, dtype)
    if out.size:
        grid = tuple(-(-n // t) for n, t in zip(out.shape, threads))
        kernel[grid if len(grid) > 1 else grid[0],
               threads if len(threads) > 1 else threads[0]](*args, out)
    return out


def _threads(threads, ndim, kernel):
    if ndim not in _DEFAULT_THREADS:
        raise ValueError(f"gpureplace.dask.map_blocks({kernel.__name__}, ...): arrays of "
                         f"{ndim} dimensions; a launch covers 1 to 3")
    threads = _DEFAULT_THREADS[ndim] if threads is None else threads
    threads = (threads,) if isinstance(threads, numbers.Integral) else tuple(threads)
    if len(threads) != ndim or not all(isinstance(t, numbers.Integral) and t > 0
                                       for t in threads):
        raise ValueError(f"gpureplace.dask.map_blocks({kernel.__name__}, ...): threads="
                         f"{threads!r} must give a positive int for each of the {ndim} "
                         f"dimensions of the arrays")
    return tuple(int(t) for t in threads)


def _scalar(block):
    """The value of a 0-d block (NumPy's or CuPy's array, or a NumPy scalar), as a NumPy scalar
    of its dtype (a float32 stays a float32 for the kernel's types)."""
    import numpy as np
    if type(block).__module__.split(".", 1)[0] == "cupy":
        block = block.get()
    return np.asarray(block)[()]


def _empty_like(template, shape, dtype):
    """A new array of ``shape`` and ``dtype`` from ``template``'s library (CuPy, NumPy)."""
    module = type(template).__module__.split(".", 1)[0]
    if module == "cupy":
        import cupy
        return cupy.empty(shape, dtype)
    import numpy as np
    return np.empty(shape, dtype)


def push_redefinitions():
    """Send the kernels defined here, sent to other processes before, whose definition has
    changed since (the kernel, or a function or global it reads) to every worker of the current
    ``distributed`` client, which binds them in place and compiles their stale launches in the
    background (``_receive``).  Returns how many kernels were sent (0 without a client).
    Nothing depends on it: the next task carries the definition all the same."""
    import sys
    if "distributed" not in sys.modules:
        return 0
    from distributed.client import default_client
    try:
        client = default_client()
    except ValueError:                 # no client in this process
        return 0
    import pickle
    from .jit import pickling
    from .jit.function import GPUFunction
    changed = []
    for obj in list(pickling.defined_here()):
        if isinstance(obj, GPUFunction) and not obj.device:
            sent = obj.__dict__.get("_sent_digest")
            if sent is not None and sent != obj.definition_digest():
                changed.append((pickling.identifier(obj), pickle.dumps(obj)))
    if not changed:
        return 0
    client.run(_receive, changed)      # (from a background round: it waits for the workers)
    return len(changed)


def sent_elsewhere():
    """Whether kernels defined here were sent to other processes and this process has a
    ``distributed`` client: then the extension's round after every cell runs
    ``push_redefinitions``, whether or not the cell moved the world here (a kernel launched only
    on workers was never compiled here, so nothing here records what it reads)."""
    import sys
    if "distributed" not in sys.modules:
        return False
    from .jit import pickling
    if not any("_sent_digest" in getattr(obj, "__dict__", {})
               for obj in pickling.defined_here()):
        return False
    from distributed.client import default_client
    try:
        default_client()
    except ValueError:                 # no client in this process
        return False
    return True


def _receive(changed):
    """On a worker: of the kernels ``changed`` ([(identifier, pickle)]), those it received
    before bound to their new definitions in place (only what changed will compile), then
    their stale launches compiled and loaded in a background round."""
    try:
        import pickle
        from .jit import ahead, pickling
        known = [data for uid, data in changed if pickling.was_received(uid)]
        for data in known:
            pickle.loads(data)           # (kept by jit/pickling.py for the next task)
        if known:
            ahead.schedule(lambda: True, delay=0)
    except Exception:                  # the next task carries the definition all the same
        pass
