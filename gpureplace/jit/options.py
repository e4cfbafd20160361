"""The options of ``cuda.jit`` that are checked where they are given (before anything compiles).
Signatures are read by ``compiler.signature.normalize_signature`` (a string is parsed, never
evaluated)."""

from __future__ import annotations


def check_max_registers(value):
    if value is None or value == 0:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 255:
        raise ValueError(f"cuda.jit(max_registers=...) must be an int from 1 to 255, got "
                         f"{value!r}")
    return value


def check_carveout(value):
    """numba-cuda's ``shared_memory_carveout``: "MaxL1", "MaxShared", "default", or the percent
    (0 to 100) of the unified L1/shared memory to prefer as shared memory; None: the driver's."""
    if value is None:
        return None
    named = {"maxl1": 0, "maxshared": 100, "default": -1}
    if isinstance(value, str) and value.lower() in named:
        return named[value.lower()]
    if isinstance(value, int) and not isinstance(value, bool) and -1 <= value <= 100:
        return value
    raise ValueError(f"cuda.jit(shared_memory_carveout=...) must be 'MaxL1', 'MaxShared', "
                     f"'default' or a percentage from 0 to 100, got {value!r}")


def check_launch_bounds(value):
    """numba-cuda's ``launch_bounds``: max threads per block, or a tuple (max threads, min
    blocks per multiprocessor, max blocks per cluster)."""
    if value is None:
        return ()
    bounds = (value,) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(bounds, tuple) or not 1 <= len(bounds) <= 3 or not all(
            isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in bounds) or \
            not 1 <= bounds[0] <= 1024:
        many = f"Got {len(bounds)} launch bounds: " if isinstance(bounds, tuple) and \
            len(bounds) > 3 else ""
        raise ValueError(f"{many}cuda.jit(launch_bounds=...) must be the maximum threads per block "
                         f"(1 to 1024) or a tuple (max threads, min blocks per multiprocessor"
                         f"[, max blocks per cluster]), got {value!r}")
    return bounds


#: LLVM's fast-math flags, which numba-cuda's ``fastmath=`` also takes as a set
FASTMATH_FLAGS = frozenset({"fast", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc"})


def check_flag(option, value, *, none=False):
    """A True/False option (``lineinfo``, ``debug``, ``opt``...): a bool, or 0 / 1; None where
    ``none``.  Any other value -- ``"no"`` is true to Python -- is refused."""
    if value is None and none:
        return None
    if _is_flag(value):
        return bool(value)
    raise ValueError(f"cuda.jit({option}=...) takes True or False, got {value!r}")


def _is_flag(value):
    return isinstance(value, bool) or (isinstance(value, int) and value in (0, 1))


def check_fastmath(value):
    """``fastmath=``: True / False, or (as numba-cuda) a set of LLVM fast-math flags, any of
    which turns gpureplace's fast math on."""
    if isinstance(value, (set, frozenset, list, tuple, dict)):
        unknown = sorted(str(f) for f in value if f not in FASTMATH_FLAGS)
        if unknown:
            raise ValueError(f"cuda.jit(fastmath=...): {', '.join(unknown)} is no fast-math "
                             f"flag (they are {', '.join(sorted(FASTMATH_FLAGS))})")
        return bool(value)
    if _is_flag(value):
        return bool(value)
    raise ValueError(f"cuda.jit(fastmath=...) takes True or False (or a set of LLVM fast-math "
                     f"flags), got {value!r}")
