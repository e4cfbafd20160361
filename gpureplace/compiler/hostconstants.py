"""Host values device code reads as constants, where Numba has no typing of its own for them:
int enumerations that are not ``enum.Enum`` (cuda-python's), and CFFI's objects (Numba's
support, installed when first needed)."""

from __future__ import annotations

import collections.abc
import functools


def int_constant_class(val):
    """A class whose members are its own int instances, without being an enum.Enum (whose
    typing Numba has): cuda-python's enums (``cuda.bindings.runtime.cudaRoundMode``)."""
    import enum
    return (isinstance(val, type) and issubclass(val, int) and val not in (int, bool)
            and not issubclass(val, enum.Enum)
            and isinstance(getattr(val, "__members__", None), collections.abc.Mapping))


@functools.lru_cache(maxsize=None)
def int_constants(cls):
    """A module holding ``cls``'s members as plain ints (what device code reads of it)."""
    import types as pytypes
    mod = pytypes.ModuleType(f"{cls.__module__}.{cls.__qualname__}")
    for name, member in cls.__members__.items():
        setattr(mod, name, int(member))
    return mod


def install_cffi(typing_context, target_context):
    """Numba's CFFI typing (``ffi.from_buffer(array)``, functions of out-of-line modules) and
    lowering, in a pair of device contexts."""
    from numba.core.typing import cffi_utils
    from numba.misc import cffiimpl
    typing_context.install_registry(cffi_utils.registry)
    target_context.install_registry(cffiimpl.registry)
