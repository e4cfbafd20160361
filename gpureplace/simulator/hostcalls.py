"""What the simulator calls on the host for a kernel's call of a host library: NumPy's functions
and ufuncs (on scalars and on arrays, typed as the compiled code types them), ``cmath`` through
Numba's CPU compile (the device's special values, not CPython's exceptions), CFFI calls, and
numba-cuda's own kernel language mapped to gpureplace.cuda's.  ``resolve.Resolver`` picks them."""

from __future__ import annotations

import sys
import threading
import types as pytypes

import numpy as np
from numba.core import types as nbtypes

from . import operators
from .valuetypes import class_numba_type, converter, typed_call

_MISSING = object()


_NUMPY_DISPATCHER = type(np.sum)


def _is_numba_intrinsic(raw):
    from numba.core.extending import _Intrinsic
    return isinstance(raw, _Intrinsic)


_counterparts = {}        # id(numba-cuda object) -> (it, gpureplace.cuda's of the same name)


def numba_cuda_counterpart(raw):
    """gpureplace.cuda's object of the name ``raw`` has in numba-cuda's ``numba.cuda`` (the
    module itself, ``cuda.grid``, ``cuda.threadIdx``, ``cuda.atomic`` ...), where ``raw`` is one
    of those and numba-cuda is loaded; None otherwise.  The compiled code takes numba-cuda's
    kernel language as it is; the simulator runs gpureplace's, which means the same."""
    module = sys.modules.get("numba.cuda")
    if module is None:
        return None
    ours = sys.modules.get("gpureplace.cuda")     # (above this layer: loaded by gpureplace)
    if ours is None:
        return None
    if not _counterparts:
        pairs = {"cuda": (module, ours)}
        for name in dir(module):
            if name.startswith("_") or not hasattr(ours, name):
                continue
            theirs = getattr(module, name, None)
            if theirs is None or isinstance(theirs, (int, float, str, type(None))):
                continue
            pairs[name] = (theirs, getattr(ours, name))
        _counterparts.update({id(t): (t, o) for t, o in pairs.values() if t is not o})
    found = _counterparts.get(id(raw))
    return found[1] if found is not None and found[0] is raw else None


def _is_numpy_function(raw):
    """A function of NumPy's that is no ufunc (``np.round``, ``np.sinc``, ``np.clip``)."""
    if type(raw) is _NUMPY_DISPATCHER:
        return True
    return isinstance(raw, pytypes.FunctionType) and \
        (getattr(raw, "__module__", None) or "").partition(".")[0] == "numpy"


class NumpyFunction:
    """A NumPy function on numbers in simulated device code: NumPy computes it, and the result
    is converted to the type Numba's typing gives the call, as compiled (``np.round`` of a
    float32 is a float64 there, a float32 in NumPy).  Calls Numba does not type this way
    (arrays, keywords) give NumPy's result."""

    __slots__ = ("fn", "typingctx", "plans")

    def __init__(self, fn, typingctx):
        self.fn, self.typingctx, self.plans = fn, typingctx, {}

    def __call__(self, *args, **kwargs):
        if kwargs or self.typingctx is None:
            return self.fn(*args, **kwargs)
        classes = tuple(type(a) for a in args)
        plan = self.plans.get(classes, _MISSING)
        if plan is _MISSING:
            plan = self.plans[classes] = self._plan(classes)
        if plan is None:
            return self.fn(*args)
        widen, conv = plan
        if widen is not None:
            # (Numba computes in its result's float type: np.sinc of a float32 in float64)
            args = [widen(a) if isinstance(a, (float, complex, np.inexact)) else a
                    for a in args]
        return conv(self.fn(*args))

    def _plan(self, classes):
        """(converter of the float arguments or None, converter of the result), or None."""
        types = [class_numba_type(c) for c in classes]
        if any(t is None for t in types):
            return None
        sig = typed_call(self.typingctx, self.fn, types)
        ret = None if sig is None else sig.return_type
        if isinstance(ret, nbtypes.BaseTuple):
            convs = tuple(converter(t) for t in ret.types)
            if None in convs:
                return None
            return None, (lambda r: tuple(c(x) for c, x in zip(convs, r)))
        conv = None if ret is None else converter(ret)
        if conv is None:
            return None
        if isinstance(ret, nbtypes.Float):
            # (a complex argument stays as it is: made a float it would lose its imaginary part,
            # np.angle(1j) would be 0; and Numba computes np.angle of a complex64 in float32)
            return (lambda a: a if isinstance(a, (complex, np.complexfloating))
                    else conv(a)), conv
        if isinstance(ret, nbtypes.Complex):
            return conv, conv
        return None, conv

    def __repr__(self):
        return f"<simulated numpy.{self.fn.__name__}>"


def _is_cmath_function(raw):
    """A function of the ``cmath`` module (``cmath.log``, ``cmath.sqrt``...)."""
    return isinstance(raw, pytypes.BuiltinFunctionType) and \
        getattr(raw, "__module__", None) == "cmath"


_numba_cpu = {}                  # (function, number of arguments, error model) -> dispatcher
_numba_cpu_lock = threading.Lock()


def _numba_cpu_call(fn, nargs, error_model):
    """A ``numba.njit`` of ``lambda a0, ...: fn(a0, ...)`` (made once)."""
    key = (fn, nargs, error_model)
    disp = _numba_cpu.get(key)
    if disp is None:
        with _numba_cpu_lock:
            disp = _numba_cpu.get(key)
            if disp is None:
                import numba
                names = ", ".join(f"a{i}" for i in range(nargs))
                ns = {"fn": fn}
                exec(f"def call({names}):\n    return fn({names})\n", ns)   # noqa: S102
                disp = _numba_cpu[key] = numba.njit(error_model=error_model)(ns["call"])
    return disp


class NumbaCompiledCall:
    """A function of ``cmath`` in simulated device code: the same call compiled by Numba for the
    CPU (``numba.njit``, once per argument types), whose lowering is the one the compiler
    installs for the device (Numba's ``cmathimpl``), special cases included: ``cmath.log(0j)``
    is -inf+0j and ``cmath.exp(800+0j)`` inf as on the device, where CPython's ``cmath``
    raises ValueError or OverflowError, and ``cmath.asin(nanj)`` is nan+nanj where CPython's
    is nanj.  The arguments have the types Numba gives them (a complex64 computes in float32)
    and the result is converted to the call's return type (Numba boxes a complex64 as a Python
    complex).  An exception the compiled call raises (``cmath.log(z, 1)``: complex division by
    zero) is one of the device code, which stops the thread.  Calls Numba does not type are
    CPython's."""

    __slots__ = ("fn", "plans", "__name__")

    def __init__(self, fn):
        self.fn, self.plans, self.__name__ = fn, {}, fn.__name__

    def __call__(self, *args):
        key = (operators.python_error_model, *(type(a) for a in args))
        plan = self.plans.get(key, _MISSING)
        if plan is _MISSING:
            plan = self.plans[key] = self._plan(key[0], key[1:])
        if plan is None:
            return self.fn(*args)
        entry, conv = plan
        try:
            result = entry(*args)
        except Exception as exc:               # noqa: BLE001 (Numba's compiled code raised it)
            from .raises import device_error
            raise device_error(exc) from None
        return conv(result)

    def _plan(self, python_model, classes):
        """(the compiled entry point, the conversion of its result), or None."""
        types_ = tuple(class_numba_type(c) for c in classes)
        if None in types_:
            return None
        disp = _numba_cpu_call(self.fn, len(types_), "python" if python_model else "numpy")
        try:
            entry = disp.compile(types_)
        except Exception:                          # noqa: BLE001 (untyped: CPython's cmath)
            return None
        ret = disp.overloads[types_].signature.return_type
        if isinstance(ret, nbtypes.BaseTuple):
            convs = tuple(converter(t) for t in ret.types)
            if None in convs:
                return None
            return entry, (lambda r: tuple(c(x) for c, x in zip(convs, r)))
        conv = converter(ret)
        return None if conv is None else (entry, conv)

    def __repr__(self):
        return f"<simulated cmath.{self.fn.__name__}>"


class UfuncOnArrays:
    """A NumPy ufunc in simulated device code: its scalar meaning, and with arrays and an
    output array (``np.sin(x, out)``) that meaning elementwise with NumPy's broadcasting, as the
    compiled kernel loops (``compiler/ufunc_arrays.py``)."""

    __slots__ = ("ufunc", "scalar")

    def __init__(self, ufunc, scalar):
        self.ufunc, self.scalar = ufunc, scalar

    def __call__(self, *args, **kwargs):
        uf = self.ufunc
        out = kwargs.pop("out", None)
        ins, outs = args[:uf.nin], list(args[uf.nin:])
        if out is not None:
            outs = list(out) if isinstance(out, tuple) else [out]
        if not outs and not any(_is_array(a) for a in ins):
            return self.scalar(*ins, **kwargs)
        if len(outs) != uf.nout:
            raise TypeError(f"np.{uf.__name__} on arrays in device code needs its output "
                            f"array{'s' if uf.nout > 1 else ''} given (np.{uf.__name__}(..., "
                            f"out)): device code cannot allocate the result")
        from ..compiler.ufunc_arrays import numpy_loop_dtypes
        casts = numpy_loop_dtypes(uf, [np.dtype(a.dtype) if _is_array(a) else
                                       np.asarray(a).dtype for a in ins])
        shape = tuple(outs[0].shape)
        rank = len(shape)
        for idx in np.ndindex(*shape) if rank else [()]:
            vals = []
            for a, cast in zip(ins, casts):
                if _is_array(a):
                    n = len(a.shape)
                    a = a[tuple(idx[rank - n + d] if a.shape[d] != 1 else 0 for d in range(n))]
                vals.append(a if cast is None else cast.type(a))
            r = self.scalar(*vals)
            if uf.nout == 1:
                outs[0][idx] = r
            else:
                for o, v in zip(outs, r):
                    o[idx] = v
        return outs[0] if uf.nout == 1 else tuple(outs)


def _is_array(a):
    return hasattr(a, "shape") and not isinstance(a, (np.generic, int, float, complex, bool))

#: C element types of ``ffi.from_buffer``'s pointer, by NumPy dtype (what Numba types it as).
_C_TYPES = {"f4": "float", "f8": "double", "i1": "int8_t", "i2": "int16_t", "i4": "int32_t",
            "i8": "int64_t", "u1": "uint8_t", "u2": "uint16_t", "u4": "uint32_t",
            "u8": "uint64_t", "b1": "_Bool"}


class SimFFI:
    """A CFFI ``FFI`` object read by simulated device code: ``from_buffer(array)`` gives a
    pointer to the array's elements, typed as the compiled code types it (Numba's
    ``CPointer(dtype)``); anything else is the FFI's own."""

    def __init__(self, ffi):
        self._ffi = ffi

    def from_buffer(self, obj):
        host = np.asarray(obj)
        ctype = _C_TYPES.get(host.dtype.str[1:])
        if ctype is None:
            raise TypeError(f"ffi.from_buffer(): arrays of {host.dtype} have no C element type "
                            f"here")
        return self._ffi.from_buffer(f"{ctype}[]", host)

    def __getattr__(self, name):
        return getattr(self._ffi, name)
