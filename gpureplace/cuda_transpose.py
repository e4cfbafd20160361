"""``cuda.kernels.transpose.transpose(a, b=None)``: numba-cuda's 2-D transpose on the device.

    from gpureplace.cuda.kernels.transpose import transpose
    d_t = transpose(d_a)              # a new (cols, rows) device array
    transpose(d_a, d_t)               # or into d_t

Tiles of 32 x 32 elements go through shared memory (33 columns: no bank conflicts), so both the
reads of ``a`` and the writes of ``b`` are coalesced (the algorithm of NVIDIA's "An Efficient
Matrix Transpose in CUDA C/C++").  Any dtype: the elements move as 1-, 2-, 4- or 8-byte words (a
record of 28 bytes as seven 4-byte words), so records, booleans and complex numbers transpose
alike.  ``a`` may be strided (a view); ``b`` is written where it is, whatever its strides.  The
work is queued on ``a``'s stream (``a.stream``) when it has one, else the current one; host
arrays are copied to the device (and ``b``, if given on the host, back).
"""

from __future__ import annotations

import numpy as np

from . import hostapi, probe
from .compiler.intrinsics.indexing import blockIdx, threadIdx
from .compiler.intrinsics.memory import shared
from .compiler.intrinsics.sync import syncthreads
from .jit import jit
from .jit.backends import simulated

__all__ = ["transpose"]

TILE = 32
_KERNELS = {}


def _kernel(word):
    """The transpose of (rows, cols, words) arrays of ``word`` (np.uint8 ... np.uint64)."""
    kernel = _KERNELS.get(word)
    if kernel is not None:
        return kernel
    dtype = np.dtype(word)

    def transpose_tiles(src, dst):
        tile = shared.array((TILE, TILE + 1), dtype)
        tx = threadIdx.x
        ty = threadIdx.y
        r0 = blockIdx.y * TILE
        c0 = blockIdx.x * TILE
        rows = src.shape[0]
        cols = src.shape[1]
        for w in range(src.shape[2]):
            for k in range(0, TILE, 8):           # 32 x 8 threads: four rows each
                r = r0 + ty + k
                if r < rows and c0 + tx < cols:
                    tile[ty + k, tx] = src[r, c0 + tx, w]
            syncthreads()
            for k in range(0, TILE, 8):
                c = c0 + ty + k
                if c < cols and r0 + tx < rows:
                    dst[c, r0 + tx, w] = tile[tx, ty + k]
            syncthreads()

    transpose_tiles.__qualname__ = f"transpose_tiles_{dtype.name}"
    kernel = _KERNELS[word] = jit(transpose_tiles)
    return kernel


def _word(itemsize):
    for size, word in ((8, np.uint64), (4, np.uint32), (2, np.uint16)):
        if itemsize % size == 0:
            return word
    return np.uint8


def _as_words(arr, xp, word):
    """The memory of the 2-D array ``arr`` as a (rows, cols, words) array of ``word``: the same
    bytes, no copy (the simulator's arrays are NumPy's, the GPU's CuPy's)."""
    rows, cols = arr.shape
    size = np.dtype(word).itemsize
    shape = (rows, cols, arr.dtype.itemsize // size)
    strides = (arr.strides[0], arr.strides[1], size)
    if xp is not np:
        return xp.ndarray(shape, word, memptr=arr.data, strides=strides)
    owner = arr
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    offset = arr.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    return np.ndarray(shape, word, buffer=owner.view(np.ndarray), offset=offset,
                      strides=strides)


def transpose(a, b=None):
    """The transpose of the 2-D array ``a``, written into ``b`` if given (shape ``a.shape[::-1]``,
    same dtype), else into a new device array; returns it."""
    if len(getattr(a, "shape", ())) != 2:
        raise ValueError(f"transpose(a, b): a must be a 2-D array, got shape "
                         f"{getattr(a, 'shape', None)}")
    rows, cols = a.shape
    stream = getattr(a, "stream", 0) or 0
    if not hostapi.is_cuda_array(a) and not simulated():
        a = hostapi.to_device(np.asarray(a), stream=stream)
    host_b = b if isinstance(b, np.ndarray) and not hostapi.is_cuda_array(b) else None
    if b is None or host_b is not None:
        out = hostapi.device_array((cols, rows), a.dtype, stream=stream)
    else:
        out = b
    if tuple(out.shape) != (cols, rows) or out.dtype != a.dtype:
        raise ValueError(f"transpose(a, b): b must have shape {(cols, rows)} and dtype "
                         f"{a.dtype}, got {tuple(out.shape)} {out.dtype}")
    if rows and cols:
        word = _word(a.dtype.itemsize)
        xp = np if simulated() else probe.cupy_module()
        if xp is not np:
            a, out_view = hostapi.as_cuda_array(a), hostapi.as_cuda_array(out)
        else:
            a, out_view = np.asarray(a), out
        src, dst = _as_words(a, xp, word), _as_words(out_view, xp, word)
        grid = ((cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE)
        _kernel(word)[grid, (TILE, 8), stream](src, dst)
    if host_b is not None:
        out.copy_to_host(host_b, stream=stream)
        return host_b
    return out
