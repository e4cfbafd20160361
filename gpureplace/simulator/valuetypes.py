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
    from .lang.overloads import ExtensionValue
    from .pointers import RawPointer
    if isinstance(value, SimVector):
        return value.vector_type
    if isinstance(value, ExtensionValue):
        return value._sim_type
    if isinstance(value, RawPointer):
        return nbtypes.CPointer(numpy_support.from_dtype(value.dtype))
    from .lang.cg import SimGridGroup
    if isinstance(value, SimGridGroup):           # cuda.cg.this_grid()
        return value.numba_type
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
    from .launch_args import convert_to

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
    from .launch_args import scalar_as
    if isinstance(declared, nbtypes.BaseTuple) and isinstance(value, tuple):
        return tuple(_cast_result(v, d) for v, d in zip(value, declared.types))
    if isinstance(declared, (nbtypes.Integer, nbtypes.Float, nbtypes.Boolean, nbtypes.Complex)):
        return scalar_as(value, declared)
    return value



# ---------------------------------------------------------------------------------------------
# Numba's typing of scalar operations, for the classes of simulated values

_CLASS_TYPES = {bool: nbtypes.boolean, np.bool_: nbtypes.boolean, int: nbtypes.int64,
                float: nbtypes.float64, complex: nbtypes.complex128,
                np.float16: nbtypes.float16, np.float32: nbtypes.float32,
                np.float64: nbtypes.float64, np.complex64: nbtypes.complex64,
                np.complex128: nbtypes.complex128}


def class_numba_type(cls):
    """The Numba scalar type that simulated values of class ``cls`` stand for (a device integer
    its width, a Python int an int64...), or None where it is no plain number (a vector, a
    bfloat16, an 8-bit float, a timedelta...)."""
    ty = _CLASS_TYPES.get(cls)
    if ty is None and isinstance(cls, type) and issubclass(cls, np.integer):
        dt = np.dtype(cls)
        if dt.kind in "iu":
            ty = _CLASS_TYPES[cls] = numpy_support.from_dtype(dt)
    return ty


def value_class(ty):
    """The class of the simulated values of scalar Numba type ``ty`` (Python's bool for a
    boolean, a device integer, a NumPy float or complex), or None for any other type."""
    if isinstance(ty, nbtypes.Boolean):
        return bool
    if isinstance(ty, nbtypes.Integer):
        from .arrays import _device_int_type
        return _device_int_type(np.dtype(str(ty)))
    if isinstance(ty, (nbtypes.Float, nbtypes.Complex)):
        return np.dtype(str(ty)).type
    return None


_converters = {}


def converter(ty):
    """A function giving any simulated number as the Numba scalar type ``ty`` converts it (an
    integer wraps, a float truncates toward zero), or None for a type that is no scalar."""
    conv = _converters.get(ty)
    if conv is None and ty not in _converters:
        cls = value_class(ty)
        if cls is bool:
            conv = bool
        elif cls is not None and issubclass(cls, np.integer):
            from .arrays import to_dtype_value
            dt = np.dtype(str(ty))

            def conv(x, cls=cls, dt=dt):
                return x if type(x) is cls else to_dtype_value(x, dt)
        elif cls is not None:
            def conv(x, cls=cls):
                return x if type(x) is cls else cls(x)
        _converters[ty] = conv
    return conv


def resolved_signature(typingctx, op, argtypes):
    """The signature Numba's typing (``typingctx``, the compiler's) gives ``op`` applied to
    ``argtypes`` (``operator.add`` to ``(uint16, float32)``: ``(float64, float64) -> float64``),
    or None where it types none or gives a result that is no scalar number."""
    sig = typed_call(typingctx, op, argtypes)
    if sig is None or len(sig.args) != len(argtypes):
        return None
    ret = sig.return_type
    scalar = (nbtypes.Boolean, nbtypes.Integer, nbtypes.Float, nbtypes.Complex)
    if isinstance(ret, nbtypes.BaseTuple):
        if not all(isinstance(t, scalar) for t in ret.types):
            return None
    elif not isinstance(ret, scalar):
        return None
    if not all(isinstance(t, scalar) for t in sig.args):
        return None
    return sig


def typed_call(typingctx, fn, argtypes):
    """The signature Numba's typing (``typingctx``, the compiler's) gives ``fn(*argtypes)``, or
    None where it types none."""
    from ..compiler import frontend
    try:
        with frontend._lock:              # (one typing question at a time, as compiles ask)
            fnty = typingctx.resolve_value_type(fn)
            return typingctx.resolve_function_type(fnty, tuple(argtypes), {})
    except Exception:                          # noqa: BLE001 (untyped: the caller's own rule)
        return None
