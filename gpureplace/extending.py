"""``gpureplace.cuda.extending``: numba-cuda's extension API, on gpureplace's compiler.

    from gpureplace.cuda.extending import overload, intrinsic, register_model, ...

Code written against ``numba.cuda.extending`` ports by changing the import:

- ``overload(func)`` (``target="cuda"``, the default) is an override of ``func`` in the default
  Context (``context=`` another): it shows in the dispatch report, running the definition again
  replaces it and recompiles the kernels that call ``func``, and a Context can override it again.
  The generator is Numba's: called with the argument types, it returns the implementation, which
  compiles as a device function in the calling kernel's Context.  ``target="cpu"`` (or any target
  that is not a GPU) is Numba's own ``overload``.
- ``overload_method``, ``overload_attribute``, ``overload_classmethod`` register with Numba for
  gpureplace's target (kernels see them; defined again -- its cell run again -- the new
  definition replaces the old one for typing and lowering, and the kernels that used it
  recompile).
- ``intrinsic``, ``register_jitable``, ``typeof_impl``, ``type_callable``, ``register_model``,
  ``models`` / ``core_models``, ``make_attribute_wrapper``, ``lower`` (``lower_builtin``),
  ``lower_cast``, ``lower_getattr``, ``lower_setattr``, ``infer``, ``infer_getattr``,
  ``infer_global``, ``as_numba_type``, ``cgutils``: Numba's own, whose registries gpureplace's
  typing and target contexts install.
"""

from __future__ import annotations

import sys
import types as _pytypes

from numba.core import cgutils, extending as _numba_extending, types  # noqa: F401
from numba.core.datamodel import models as core_models  # noqa: F401
from numba.core.extending import (NativeValue, SentryLiteralArgs, as_numba_type,  # noqa: F401
                                  box, infer, infer_getattr, lower_builtin,
                                  lower_cast, lower_getattr, lower_getattr_generic,
                                  lower_setattr, lower_setattr_generic, make_attribute_wrapper,
                                  models, reflect, register_jitable, register_model,
                                  sentry_literal_args, type_callable, typeof_impl, unbox)
from numba.core.imputils import builtin_registry as lowering_registry
from numba.core.typing.templates import builtin_registry as typing_registry
from numba.core.typing.templates import infer_global  # noqa: F401

from .compiler.overloads import NumbaOverload
from .dispatch.context import default_context

#: The class of what ``intrinsic`` returns (numba-cuda's extensions test ``isinstance`` on it).
_Intrinsic = _numba_extending._Intrinsic

#: numba-cuda's ``cudaimpl.lower`` / ``lower_attr``: lowering for every gpureplace kernel.
lower = lower_builtin
lower_attr = lower_getattr

_GPU_TARGETS = ("cuda", "gpu", "gpureplace", "generic")


def _target(target, what):
    if target in _GPU_TARGETS:
        return "gpureplace" if target != "generic" else "generic"
    return None


def overload(func, jit_options=None, strict=True, inline="never", prefer_literal=False,
             target="cuda", context=None, **kwargs):
    """``@overload(func)``: the decorated generator gives ``func``'s device implementation for
    the argument types it is called with (None: not these types).  An override of ``func`` in
    ``context`` (default: the default Context)."""
    if _target(target, "overload") is None:
        return _numba_extending.overload(func, jit_options=jit_options or {}, strict=strict,
                                         inline=inline, prefer_literal=prefer_literal,
                                         target=target, **kwargs)
    if not callable(func):
        raise TypeError(f"overload(): {func!r} is not callable, so there is nothing to overload")
    where = default_context if context is None else context

    def decorate(generator):
        where.override(func, NumbaOverload(func, generator, jit_options, strict, inline,
                                           prefer_literal, **kwargs))
        return generator
    return decorate


def _numba_for_gpureplace(name):
    numba_fn = getattr(_numba_extending, name)

    def register(typ, attr, target="cuda", **kwargs):
        tgt = _target(target, name)
        return numba_fn(typ, attr, target=tgt or target, **kwargs)
    register.__name__ = register.__qualname__ = name
    register.__doc__ = (f"numba-cuda's ``{name}(typ, attr)``: Numba's, registered for gpureplace's "
                        f"target (``target='cuda'``, the default).")
    return register


overload_method = _numba_for_gpureplace("overload_method")
overload_attribute = _numba_for_gpureplace("overload_attribute")
overload_classmethod = _numba_for_gpureplace("overload_classmethod")


def intrinsic(*args, **kwargs):
    """numba-cuda's ``@intrinsic``: Numba's (its typing and lowering apply to every target that
    installs Numba's registries, gpureplace's among them)."""
    kwargs.pop("target", None)
    return _numba_extending.intrinsic(*args, **kwargs)


def _numba_cuda_modules():
    """``cudaimpl`` / ``cudadecl`` under this module: where numba-cuda code registers lowering
    and typing (``from numba.cuda.cudaimpl import lower``)."""
    impl = _pytypes.ModuleType(__name__ + ".cudaimpl")
    impl.lower, impl.lower_attr, impl.registry = lower, lower_attr, lowering_registry
    impl.lower_cast, impl.lower_constant = lower_cast, lowering_registry.lower_constant
    decl = _pytypes.ModuleType(__name__ + ".cudadecl")
    decl.registry = typing_registry
    decl.register, decl.register_attr = typing_registry.register, typing_registry.register_attr
    decl.register_global = typing_registry.register_global
    return impl, decl


cudaimpl, cudadecl = _numba_cuda_modules()
sys.modules.setdefault(cudaimpl.__name__, cudaimpl)
sys.modules.setdefault(cudadecl.__name__, cudadecl)

__all__ = ["overload", "overload_method", "overload_attribute", "overload_classmethod",
           "intrinsic", "register_jitable", "typeof_impl", "type_callable", "register_model",
           "models", "core_models", "make_attribute_wrapper", "lower", "lower_builtin",
           "lower_attr", "lower_cast", "lower_getattr", "lower_getattr_generic", "lower_setattr",
           "lower_setattr_generic", "infer", "infer_getattr", "infer_global", "as_numba_type",
           "cgutils", "types", "lowering_registry", "typing_registry", "SentryLiteralArgs",
           "sentry_literal_args", "box", "unbox", "reflect", "NativeValue"]
