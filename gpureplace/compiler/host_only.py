"""What device code cannot do, said plainly (Numba's own message would name one of its
internals): allocating NumPy functions and heap containers, refused while a call is typed."""

from __future__ import annotations

from numba.core import types

#: NumPy functions that allocate a new array: device code has no heap (no NRT).
_ALLOCATORS = ("empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
               "full_like", "array", "asarray", "arange", "linspace", "copy", "concatenate",
               "stack", "eye", "identity")


def _allocator_name(func):
    import numpy as np
    key = getattr(func, "typing_key", None)
    for name in _ALLOCATORS:
        if key is not None and key is getattr(np, name, None):
            return f"np.{name}"
    return None


def _container_kind(ty):
    if isinstance(ty, (types.List, types.ListType)):
        return "lists"
    if isinstance(ty, (types.DictType, types.LiteralStrKeyDict)):
        return "dicts"
    if isinstance(ty, types.Set):
        return "sets"
    if isinstance(ty, types.UnicodeType):
        return "strings"
    return None


def unsupported_message(kind):
    return (f"{kind} are not supported in device code (they need a heap); use a tuple, an array "
            f"argument, or cuda.local.array / cuda.shared.array")


def reject_host_only(func, args):
    """A TypingError for a call device code cannot make: a NumPy function that allocates an
    array, or a list, dict, set or string argument."""
    from numba.core.errors import TypingError
    name = _allocator_name(func)
    if name == "np.asarray" and len(args) == 1 and isinstance(args[0], types.Array):
        name = None             # the array itself, nothing allocated (Numba's reductions use it)
    if name is not None:
        raise TypingError(f"{name}() allocates a new array, which device code cannot do (there "
                          f"is no heap); pass the output array in as an argument, or use "
                          f"cuda.local.array / cuda.shared.array for scratch space")
    for ty in args:
        kind = _container_kind(ty)
        if kind is not None:
            raise TypingError(unsupported_message(kind))
