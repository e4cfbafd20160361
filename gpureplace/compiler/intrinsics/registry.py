"""Collects the typing and lowering registries of every intrinsic module (and the typing of
Numba's array reductions that the typing context installs beside them)."""

import functools
import importlib
import threading

import numpy as np

_MODULES = ("indexing", "devicemath", "libdevice_calls", "sync", "memory", "constmem", "atomics", "warp",
            "bits", "fp16", "bf16", "fp8", "printing", "external", "cg", "vectors", "cachehints")


@functools.lru_cache(maxsize=None)
def _modules():
    # (once: the typing and target contexts ask for the registries at every refresh, several
    # times a compile; importlib's lookups cost more than the rest of the refresh)
    return tuple(importlib.import_module(f"{__package__}.{name}") for name in _MODULES)


def typing_registries():
    return [m.typing for m in _modules()]


def lowering_registries():
    return [m.lowering for m in _modules()]


def language_modules():
    """Modules whose ``__all__`` names make up ``gpureplace.cuda``."""
    return [m for m in _modules() if m.__name__.rsplit(".", 1)[1] not in ("devicemath",
                                                                           "libdevice_calls")]


@functools.lru_cache(maxsize=None)
def array_reductions_typing():
    """NumPy's reductions of arrays in device code (``np.all(a)``, ``np.sum``, ``np.nanmax``,
    ``a.mean()``, ``np.count_nonzero``...): Numba's own implementations (``numba.np.arraymath``,
    loops compiled as device functions), and the ``np.nditer`` / ``np.ndindex`` typing they
    iterate with.  What would allocate an array (``np.cumsum``, ``np.sort``) is refused where
    the kernel is compiled (compiler/validate.py)."""
    from numba.core.typing import npydecl
    from numba.core.typing.templates import Registry
    _import_arraymath()                 # (registers its overloads)
    reg = Registry()
    for value, typ in npydecl.registry.globals:
        if value is np.nditer or value is np.ndindex or value is np.ndenumerate:
            reg.register_global(value, typ)
    return reg


def _import_arraymath():
    """Import ``numba.np.arraymath`` without its BLAS check.

    At its import Numba asks whether a BLAS is there (``_HAVE_BLAS``) by importing SciPy's
    ``linalg``: 300-450 ms of a first compile where SciPy is installed, for an answer only host
    code's ``np.correlate`` / ``np.convolve`` read (device code has no BLAS).  The check is
    deferred to the first time that answer is read, and then made as Numba would make it, so
    that Numba's own CPU code in the same process behaves as it always has."""
    import sys
    with _arraymath_lock:            # (the warm-up's thread and the user's may both be first)
        if "numba.np.arraymath" in sys.modules:
            import numba.np.arraymath  # noqa: F401  (waits for an import under way elsewhere)
            return
        import numba.np.linalg as linalg
        check = linalg.ensure_blas

        def deferred():
            raise ImportError("(gpureplace: BLAS check deferred)")
        linalg.ensure_blas = deferred
        try:
            import numba.np.arraymath as arraymath
        finally:
            linalg.ensure_blas = check
        if arraymath.ensure_blas is deferred:
            arraymath.ensure_blas = check
        if arraymath.__dict__.get("_HAVE_BLAS") is False:
            arraymath._HAVE_BLAS = _BlasCheck(check)


_arraymath_lock = threading.Lock()


class _BlasCheck:
    """Truthy when a BLAS is there (SciPy's ``cython_blas``), asked at the first read."""

    def __init__(self, check):
        self._check = check
        self._answer = None

    def __bool__(self):
        if self._answer is None:
            try:
                self._check()
                self._answer = True
            except ImportError:
                self._answer = False
        return self._answer
