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
array (of the result's dtype or one NumPy's ``same_kind`` rule casts it to); ``stream=`` orders
everything on that stream.  The signature used is numba-cuda's: the first matching the argument
types exactly, else the one matching the arrays exactly with any type for the Python / NumPy
scalars (``f(float32_array, 1.0)`` runs the float32 loop); failing that, the first the
arguments cast to safely (NumPy's rule).  Without signatures (``vectorize`` only) each new
combination of input dtypes compiles on first use.  ``numba.vectorize(...,
target="cuda")`` and ``numba.guvectorize(..., target="cuda")`` build the same objects when
numba-cuda is not installed.

The element function is compiled as a device function into generated kernels, like any helper a
kernel calls: redefining what it calls, or a global it reads, recompiles exactly those kernels.
"""

from __future__ import annotations

from numba.core import types

from .gufunc import CUDAGUFunc, parse_gufunc_signature
from .numba_target import CUDAGUFuncVectorize, CUDAVectorize, register_numba_target
from .ufunc import CUDAUFunc

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


__all__ = ["vectorize", "guvectorize", "CUDAUFunc", "CUDAGUFunc", "CUDAVectorize",
           "CUDAGUFuncVectorize", "parse_gufunc_signature", "register_numba_target"]
