"""``numba.vectorize(..., target="cuda")`` / ``numba.guvectorize``: Numba's builder protocol,
answered with gpureplace's ufuncs."""

from __future__ import annotations

from .gufunc import CUDAGUFunc, refuse_writable_args
from .ufunc import CUDAUFunc

class _Builder:
    """What Numba's ``vectorize`` / ``guvectorize`` call on a target's builder: ``add`` each
    signature, ``disable_compile``, then ``build_ufunc``."""

    def __init__(self, func, identity, targetoptions):
        self._func, self._identity = func, identity
        self._options = dict(targetoptions or {})
        self._sigs = []

    def add(self, sig):
        self._sigs.append(sig)

    def disable_compile(self):
        pass


class CUDAVectorize(_Builder):
    """Numba's ufunc-builder protocol (``numba.vectorize(..., target="cuda")``)."""

    def __init__(self, func, identity=None, cache=False, targetoptions=None):
        super().__init__(func, identity, targetoptions)

    def build_ufunc(self):
        return CUDAUFunc(self._func, self._sigs, identity=self._identity, **self._options)


class CUDAGUFuncVectorize(_Builder):
    """Numba's gufunc-builder protocol (``numba.guvectorize(..., target="cuda")``)."""

    def __init__(self, func, signature, identity=None, cache=False, targetoptions=None,
                 writable_args=()):
        refuse_writable_args(writable_args)
        super().__init__(func, identity, targetoptions)
        self._layout = signature

    def build_ufunc(self):
        return CUDAGUFunc(self._func, self._sigs, self._layout, identity=self._identity,
                          **self._options)


def register_numba_target(replace=False):
    """Make ``numba.vectorize(..., target="cuda")`` / ``numba.guvectorize`` build gpureplace's
    ufuncs.  Numba gives that target to the ``numba.cuda`` package; ``import gpureplace.cuda``
    takes it over only where no ``numba.cuda`` is installed, ``replace=True`` in any case (for
    code ported from numba-cuda in a process that does not also use numba's own CUDA target).
    Returns whether the target is now gpureplace's."""
    import importlib.util
    from numba.np.ufunc.decorators import GUVectorize, Vectorize
    if not replace:
        try:
            if importlib.util.find_spec("numba.cuda") is not None:
                return False
        except (ImportError, ValueError):
            pass
    for registry, builder in ((Vectorize.target_registry, CUDAVectorize),
                              (GUVectorize.target_registry, CUDAGUFuncVectorize)):
        registry.ondemand.pop("cuda", None)
        if "cuda" in registry:                  # already built: dict.__delitem__ is allowed
            dict.__delitem__(registry, "cuda")
        registry.ondemand["cuda"] = lambda builder=builder: builder
    return True
