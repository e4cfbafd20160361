"""The functions the simulator re-creates, and the code it re-creates them with.

A Python function reached from a kernel is re-created over its own code (see ``resolve``) unless it
is a library's (NumPy, Numba, the standard library, debuggers, gpureplace itself): those run as
they are.  The re-created code gives Python's number literals the types Numba gives them: ``2`` is
an int64 and ``1.5`` a float64 (so ``x32 * 1.5`` is float64, as on the device, not float32 as
NumPy 2's weak Python floats would make it).
"""

from __future__ import annotations

import types as pytypes

import numpy as np

from ..compiler.diagnostics import in_standard_library
from .arrays import wrap_int

#: Modules whose functions run as they are (not re-created): libraries, debuggers, the stdlib.
_LIBRARY_PACKAGES = frozenset(["numpy", "numba", "llvmlite", "cupy", "torch", "IPython", "ipdb",
                               "pdb", "bdb", "pytest", "_pytest", "scipy", "gpureplace",
                               "pydevd", "debugpy", "logging", "traceback", "warnings"])

_code_cache = {}


def is_library(fn):
    """Whether ``fn`` runs as it is (a library's, or the standard library's, function)."""
    mod = (getattr(fn, "__module__", None) or "").split(".", 1)[0]
    if mod in _LIBRARY_PACKAGES:
        return True
    return in_standard_library(fn.__code__.co_filename)


def device_const(c):
    """The constant ``c`` as Numba types it: an int64, float64 or complex128 (a tuple's items
    and a code object's constants in turn)."""
    if type(c) is int:
        if -(1 << 63) <= c < (1 << 63):
            return wrap_int(c, np.dtype(np.int64))
        return c
    if type(c) is float:
        return np.float64(c)
    if type(c) is complex:
        return np.complex128(c)
    if type(c) is tuple:
        return tuple(device_const(x) for x in c)
    if isinstance(c, pytypes.CodeType):
        return device_code(c)
    return c


def device_code(code):
    """``code`` with number constants typed as Numba types them (cached)."""
    hit = _code_cache.get(code)
    if hit is None:
        hit = _code_cache[code] = code.replace(
            co_consts=tuple(device_const(c) for c in code.co_consts))
    return hit

