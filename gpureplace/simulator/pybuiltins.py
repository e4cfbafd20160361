"""Python's builtins as device code computes them: ``float``, ``int``, ``range``, ``max``, ``min``
and ``round`` give the types and values Numba gives them on the device."""

from __future__ import annotations

import builtins
import weakref

import numpy as np
from numba.core import types as nbtypes
from numba.np import numpy_support

from . import hostbf16
from .arrays import DeviceCaster, wrap_int
from .hostmath import cvt_rzi
from .raises import device_error
from .valuetypes import class_numba_type, converter, numba_type_of, typed_call, unified

_MISSING = object()
_I64 = np.dtype(np.int64)


def device_builtin(raw, typingctx=None):
    """The device meaning of the builtin ``raw`` (``round``, ``range``, ``max``, ``min``,
    ``float``, ``int``, ``complex``), or None for any other value.  ``typingctx``: the
    compiler's typing context (the argument types Numba's typing gives ``round``)."""
    if raw is round:
        return _round_for(typingctx)
    if raw is range:
        return _device_range
    if raw is max:
        return _device_max
    if raw is min:
        return _device_min
    if raw is float:
        return _FLOAT
    if raw is int:
        return _INT
    if raw is complex:
        return np.complex128
    if raw is isinstance:
        return _device_isinstance
    return None


def _device_isinstance(value, classinfo):
    """``isinstance(x, t)`` in device code, as Numba's typing answers it: where ``t`` stands for
    a Numba type (``float``, ``int``, ``bool``, ``np.int32``, ``float32``,
    ``cuda.bf16.bfloat16``), whether x has exactly that type on the device (an int32 is no
    ``int``, a float32 no ``float``); any other class (``tuple``) as Python answers it."""
    infos = classinfo if type(classinfo) is tuple else (classinfo,)
    value_type = _MISSING
    for c in infos:
        t = _class_type(c)
        if isinstance(t, nbtypes.Type):
            if value_type is _MISSING:
                value_type = numba_type_of(value)
            if value_type == t:
                return True
        elif isinstance(value, t):
            return True
    return False


def _class_type(c):
    """The Numba type the class ``c`` of an ``isinstance`` stands for (Numba's
    ``as_numba_type``), or ``c`` itself.  The simulator's globals have put the device meanings
    in the builtins' places (``float`` is ``_FLOAT``, ``np.int32`` a ``DeviceCaster``), which
    Python's isinstance does not take as classes."""
    if c is _FLOAT:
        return nbtypes.float64
    if c is _INT:
        return nbtypes.int64
    if c is bool:
        return nbtypes.boolean
    if isinstance(c, DeviceCaster):
        return _dtype_type(c.dtype, c)
    if isinstance(c, type) and issubclass(c, (np.number, np.bool_)) and c in _NUMPY_SCALARS:
        # (np.float64, np.bool_, complex's np.complex128: compared as Numba types, since a
        # value of that type may be a Python one, True or a constant, which is no instance)
        return _dtype_type(np.dtype(c), c)
    return c


_NUMPY_SCALARS = frozenset(np.sctypeDict.values())     # (the concrete classes, not np.floating)


def _dtype_type(dtype, c):
    try:
        return numpy_support.from_dtype(dtype)
    except NotImplementedError:            # (np.longdouble: no Numba type, never a device value)
        return c


def _FLOAT(value=0.0):
    """``float(x)`` in device code: a float16, bfloat16 or float32 keeps its type (as Numba and
    numba-cuda type it), anything else is a float64."""
    if isinstance(value, (np.float16, np.float32)) or hostbf16.is_bfloat16(value):
        return value
    return np.float64(value)


def _INT(value=0, base=_MISSING):
    """``int(x)`` in device code, as Numba types and lowers it: an integer keeps its type (a
    uint64 stays one), a boolean is an int64, and a float becomes an int64 through PTX's
    ``cvt.rzi.s64``: truncated toward zero and saturated (+inf and the floats beyond the range
    give INT64_MAX, -inf INT64_MIN), NaN INT64_MIN as the GPU gives it (``hostmath.cvt_rzi``)."""
    if base is not _MISSING:
        return wrap_int(int(value, base), _I64)
    if isinstance(value, (bool, np.bool_)):
        return wrap_int(int(value), _I64)
    if isinstance(value, np.integer):
        return wrap_int(value, value.dtype)
    if isinstance(value, int):
        return wrap_int(value, _I64 if value < (1 << 63) else np.dtype(np.uint64))
    if isinstance(value, (float, np.floating)) or hostbf16.is_bfloat16(value):
        return cvt_rzi(value, _I64)
    return wrap_int(value, _I64)


class _DeviceRange:
    """``range`` in device code: its values are int32 when every argument is an int32, else
    int64 (Numba's range_state32 / range_state64), not Python ints."""

    __slots__ = ("_r", "_cls")

    def __init__(self, *args):
        if len(args) == 3 and args[2] == 0:
            # Numba's range raises this (a ValueError of the device, which stops the thread)
            raise device_error(ValueError("range() arg 3 must not be zero"))
        self._r = range(*(int(a) for a in args))
        i32 = all(isinstance(a, np.int32) for a in args)
        self._cls = type(wrap_int(0, np.dtype(np.int32 if i32 else np.int64)))

    def __iter__(self):
        cls = self._cls
        for v in self._r:
            yield cls(v)

    def __reversed__(self):
        cls = self._cls
        for v in reversed(self._r):
            yield cls(v)

    def __len__(self):
        return len(self._r)

    def __getitem__(self, i):
        return self._cls(self._r[int(i)])

    def __contains__(self, v):
        return v in self._r

    start = property(lambda self: self._cls(self._r.start))
    stop = property(lambda self: self._cls(self._r.stop))
    step = property(lambda self: self._cls(self._r.step))

    def __repr__(self):
        return repr(self._r)


_device_range = _DeviceRange


def _minmax(builtin):
    def device(*args, **kwargs):
        result = builtin(*args, **kwargs)
        if kwargs or len(args) < 2:
            return result                    # of an iterable: one type already
        first = type(args[0])
        if all(type(a) is first for a in args):
            return result
        # Numba converts every argument to their unified type (max(int32, float32) is a
        # float64, max(True, int32) an int32); Python returns the winning argument as it is
        ty = unified(args)
        if isinstance(ty, (nbtypes.Integer, nbtypes.Float, nbtypes.Boolean)):
            from .launch_args import scalar_as
            return scalar_as(result, ty)
        return result
    device.__name__ = builtin.__name__
    return device


_device_max = _minmax(builtins.max)
_device_min = _minmax(builtins.min)


class _DeviceRound:
    """``round`` in device code: its argument first converted to the float type Numba's typing
    gives the call, as compiled.  numba-cuda types ``round`` for float32 and float64 only, so an
    integer or a boolean becomes one (a float32 from bool, int8, uint8 and int16, a float64
    from wider integers: ``cvt.rn.f64.s64``) and is rounded from there: ``round(2**62 - 1)`` is
    2**62 and ``round(uint64(2**64 - 1))`` INT64_MAX (``cvt.rzi.s64.f64`` saturates), and
    ``round(int32(x), 1)`` a float64; a float16 is rounded as a float32."""

    __slots__ = ("typingctx", "plans")

    def __init__(self, typingctx):
        self.typingctx, self.plans = typingctx, {}

    def __call__(self, x, ndigits=None):
        args = (x,) if ndigits is None else (x, ndigits)
        classes = tuple(type(a) for a in args)
        plan = self.plans.get(classes, _MISSING)
        if plan is _MISSING:
            plan = self.plans[classes] = self._plan(classes)
        if plan is None:
            return _device_round(x, ndigits)
        widen, conv = plan
        return conv(_device_round(widen(x), ndigits))

    def _plan(self, classes):
        """(conversion of the value rounded, conversion of the result), or None: the value's
        own type (no typing context, or a type Numba's typing does not give round)."""
        types_ = [class_numba_type(c) for c in classes]
        if self.typingctx is None or None in types_:
            return None
        sig = typed_call(self.typingctx, builtins.round, types_)
        if sig is None or not isinstance(sig.args[0], nbtypes.Float):
            return None
        widen, conv = converter(sig.args[0]), converter(sig.return_type)
        return (widen, conv) if widen is not None and conv is not None else None

    def __repr__(self):
        return "<simulated round>"


_rounds = weakref.WeakKeyDictionary()
_round_without_typing = _DeviceRound(None)


def _round_for(typingctx):
    """The ``_DeviceRound`` of ``typingctx`` (one per context, so that its plans last)."""
    if typingctx is None:
        return _round_without_typing
    impl = _rounds.get(typingctx)
    if impl is None:
        impl = _rounds[typingctx] = _DeviceRound(typingctx)
    return impl


def _device_round(x, ndigits=None):
    """``round`` as it is computed on the device: half to even; with ``ndigits`` on a float,
    Numba's scaled rounding in float64 (a float32 rounded as a float64 and converted back once,
    as numba-cuda does), which leaves x unchanged where the scaling overflows (NumPy would give
    inf or nan)."""
    import math
    if ndigits is None and isinstance(x, (float, np.floating)):
        # an int64: rounded half to even (cvt.rni in x's type), then cvt.rzi.s64, which
        # saturates (the infinities and values beyond the range too); NaN gives INT64_MIN
        return cvt_rzi(np.rint(x), _I64)
    if ndigits is None or not isinstance(x, (float, np.floating)):
        return builtins.round(x) if ndigits is None else builtins.round(x, ndigits)
    if isinstance(x, np.float32):
        return np.float32(_device_round(np.float64(x), ndigits))
    fty = type(x) if isinstance(x, np.floating) else np.float64
    ndigits = int(ndigits)

    def rnd(v):                    # llvm.round in the argument's type: half away from zero
        v = fty(v)
        return fty(math.copysign(math.floor(abs(float(v)) + 0.5), float(v)))
    xf = float(x)
    if math.isinf(xf) or math.isnan(xf):
        return x
    with np.errstate(all="ignore"):
        if ndigits >= 0:
            pow1, pow2 = (10.0 ** (ndigits - 22), 1e22) if ndigits > 22 else (10.0 ** ndigits, 1.0)
            y = (xf * pow1) * pow2
            if math.isinf(y):
                return x
        else:
            pow1 = 10.0 ** (-ndigits)
            y = xf / pow1
        z = float(rnd(y))
        if abs(float(fty(y)) - z) == 0.5:
            z = 2.0 * float(rnd(float(fty(y)) / 2.0))
        z = (z / pow2) / pow1 if ndigits >= 0 else z * pow1
    return fty(z)
