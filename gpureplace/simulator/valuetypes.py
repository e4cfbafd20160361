"""The Numba types of simulated values, where the simulator chooses as the compiler types: typed
overrides, the declared signatures of a device function, the unified type of ``max`` / ``min``."""

from __future__ import annotations

import numpy as np
from numba.core import types as nbtypes
from numba.np import numpy_support

from .arrays import SimArray


def numba_type_of(value):
    """The Numba type the device would give a simulated value (for typed overrides)."""
    if isinstance(value, (bool, np.bool_)):
        return nbtypes.boolean
    if isinstance(value, np.generic):
        return numpy_support.from_dtype(value.dtype)
    if isinstance(value, int):
        return nbtypes.int64
    if isinstance(value, float):
        return nbtypes.float64
    if isinstance(value, complex):
        return nbtypes.complex128
    from numba import typeof
    if isinstance(value, SimArray):
        ty = typeof(value._a)
        return ty if value._writable else ty.copy(readonly=True)
    from .lang import SimVector
    from .runner import RawPointer
    if isinstance(value, SimVector):
        return value.vector_type
    if isinstance(value, RawPointer):
        return nbtypes.CPointer(numpy_support.from_dtype(value.dtype))
    if type(value) is tuple:
        return nbtypes.BaseTuple.from_types([numba_type_of(v) for v in value])
    return typeof(value)


_unifier = []


def unified(values):
    """The Numba type that values of these types unify to (Numba's unify_types)."""
    if not _unifier:
        from numba.core.typing import Context
        _unifier.append(Context())
    tys = [nbtypes.unliteral(numba_type_of(v)) for v in values]
    return _unifier[0].unify_types(*tys)


def declared_call(gpufunction, fn):
    """``fn`` (a simulated device function given signatures in cuda.jit) converting its
    arguments to the declared signature they fit best, as the compiled call does."""
    from ..compiler.ranking import best_signature
    from .runner import convert_to

    def call(*args):
        types_ = [numba_type_of(a) for a in args]
        sig = best_signature(gpufunction.declared_signatures, types_, gpufunction.__qualname__,
                             float_to_int=True, first_of_ties=True)
        if sig is None:
            raise TypeError(f"No matching definition for argument type(s) "
                            f"({', '.join(map(str, types_))}) of {gpufunction.__qualname__}")
        converted = []
        for a, t, d in zip(args, types_, sig):
            if isinstance(d, nbtypes.Integer) and isinstance(t, nbtypes.Float):
                a, t = int(a), nbtypes.int64          # float -> int truncates, as on the device
            c = convert_to(a, t, d)
            converted.append(a if c is None else c)
        result = fn(*converted)
        declared = gpufunction.declared_returns.get(tuple(sig))
        return result if declared is None else _cast_result(result, declared)
    call.__sim_wrapped__ = fn                # what the scans for synchronising calls look into
    return call


def _cast_result(value, declared):
    """``value`` returned as the ``declared`` return type, as the compiled return converts it."""
    from .runner import scalar_as
    if isinstance(declared, nbtypes.BaseTuple) and isinstance(value, tuple):
        return tuple(_cast_result(v, d) for v, d in zip(value, declared.types))
    if isinstance(declared, (nbtypes.Integer, nbtypes.Float, nbtypes.Boolean, nbtypes.Complex)):
        return scalar_as(value, declared)
    return value

