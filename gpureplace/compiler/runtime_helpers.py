"""Device versions of the C helpers from Numba's runtime that its lowering calls.

Numba lowers a few operations to calls of C functions in its helper library, which the GPU does
not have: ``array.reshape`` calls ``numba_attempt_nocopy_reshape`` (reshape_helper.py), and
``complex ** complex`` calls ``numba_cpow`` / ``numba_cpowf``.  Each is written here as a
Python function that gpureplace compiles for the device; ``compiler/pipeline.py`` links it, behind
a C-ABI entry of the helper's name, into kernels whose code calls it.
"""

from __future__ import annotations

import math

#: the helpers' C names (validation lets calls to them through: they are linked later)
SYMBOLS = ("numba_attempt_nocopy_reshape", "numba_cpow", "numba_cpowf")


def complex_pow(a, b):
    """CPython's complex power (``_Py_c_pow``), as Numba's ``numba_cpow`` computes it; where
    Python raises ZeroDivisionError (zero to a negative or complex power) the result is NaN."""
    if b.real == 0.0 and b.imag == 0.0:
        return complex(1.0, 0.0)
    if a.real == 0.0 and a.imag == 0.0:
        if b.imag != 0.0 or b.real < 0.0:
            return complex(math.nan, math.nan)
        return complex(0.0, 0.0)
    vabs = math.hypot(a.real, a.imag)
    length = math.pow(vabs, b.real)
    at = math.atan2(a.imag, a.real)
    phase = at * b.real
    if b.imag != 0.0:
        length /= math.exp(at * b.imag)
        phase += b.imag * math.log(vabs)
    return complex(length * math.cos(phase), length * math.sin(phase))


def cpow(a, b, out):
    out[0] = complex_pow(a[0], b[0])


def cpowf(a, b, out):
    # Numba's numba_cpowf computes in double precision too
    r = complex_pow(complex(a[0]), complex(b[0]))
    out[0] = r


def helpers():
    """``{C name: (Python function, argument types)}``."""
    from numba.core import types

    from . import reshape_helper as rh
    c128, c64 = types.CPointer(types.complex128), types.CPointer(types.complex64)
    return {rh.SYMBOL: (rh.attempt_nocopy_reshape, rh.ARGTYPES),
            "numba_cpow": (cpow, (c128, c128, c128)),
            "numba_cpowf": (cpowf, (c64, c64, c64))}
