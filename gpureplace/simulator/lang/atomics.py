"""Atomics in the simulator: ``cuda.atomic.*`` (read-modify-write under the launch's lock),
``cas`` and ``compare_and_swap``.

An atomic is where a spin-wait loop waits for another thread (a read through ``atomic.add(flag, 0,
0)``, a ``cas`` that fails): the thread may hand over there (``blocks.Block.spin``).  One that
changes memory is also progress the launch notes.
"""

from __future__ import annotations

import types as pytypes

import numpy as np

from ...compiler.intrinsics import atomics
from ..arrays import SimArray, cvt_rzi, to_dtype_value, wrap_int
from ..blocks import SPIN_UNCHANGED

_F32 = np.dtype(np.float32)
_I64 = np.dtype(np.int64)
_F32_TINY = np.finfo(np.float32).tiny          # the smallest normal float32


def _umask(dt):
    return (1 << (dt.itemsize * 8)) - 1


def _index(i):
    """One index of a tuple that holds a float, as the compiled code converts the tuple: every
    index to intp (compiler/intrinsics/atomics.py ``_check_index``, as numba-cuda), a float by
    ``fptosi``, PTX ``cvt.rzi.s64.f64``: truncated toward zero, saturated."""
    if isinstance(i, (float, np.floating)):
        return cvt_rzi(i, _I64)
    return wrap_int(i, _I64)


def _ftz(x):
    """A float32 subnormal flushed to a zero of its sign."""
    if x != 0 and abs(x) < _F32_TINY:
        return np.float32(-0.0) if np.signbit(x) else np.float32(0.0)
    return x


def _add_f32_global(fn):
    """``atom.global.add.f32`` (what ``cuda.atomic.add`` / ``sub`` on a float32 array in global
    memory compile to; ``sub`` adds the negated value).  The PTX ISA, ``atom``: "atom.add.f32 on
    global memory flushes subnormal inputs and results to sign-preserving zero; whereas
    atom.add.f32 on shared memory supports subnormal inputs and results and doesn't flush them
    to zero" (``.noftz`` exists for the f16 / bf16 forms only) -- whatever the kernel's own
    ``fastmath``: the atomic unit computes it."""
    def update(old, val, dt):
        return _ftz(np.float32(fn(_ftz(old), _ftz(val))))
    return update


def table(launch):
    """The atomic stubs of ``launch``: ``{id(stub): value}``."""
    out = {}
    lock = launch.atomic_lock
    tls = launch.tls
    onchip = launch.onchip

    def _target(fname, ary, idx):
        if not isinstance(ary, SimArray):
            raise TypeError(f"cuda.atomic.{fname}(): the first argument must be an array, got "
                            f"{type(ary).__name__}")
        if not ary._writable:
            raise TypeError(f"cuda.atomic.{fname}(): the array is read-only")
        if type(idx) is tuple and not all(isinstance(i, (int, np.integer)) for i in idx) and \
                all(isinstance(i, (int, float, np.integer, np.floating)) for i in idx):
            idx = tuple(_index(i) for i in idx)
        elif isinstance(idx, (float, np.floating)):
            idx = _index(idx)           # (a 1-D array's float index: intp, as the compiled code)
        return ary._a, ary._check(idx)

    def _global(a):
        """Whether ``a`` is global memory: not a shared or local array (``lang.memory`` notes
        the owners of their memory in ``launch.onchip``)."""
        owner = a
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        return onchip.get(id(owner)) is not owner

    def _read(ary, old):
        r = ary._read
        return old if r is None else r(old)

    def _nan(v):
        return v != v

    def _done(what, old, new):
        """After the atomic (outside the lock: the thread may hand over there)."""
        t = tls.t
        if new != old:
            launch.progress += 1
            t.block.spin(t, what, old, 1)
        else:
            t.block.spin(t, what, old, SPIN_UNCHANGED)

    def _rmw(fname, update):
        what = f"cuda.atomic.{fname}"
        ftz = _add_f32_global(lambda o, v: o + v if fname == "add" else o - v) \
            if fname in ("add", "sub") else None

        def op(ary, idx, val):
            a, i = _target(fname, ary, idx)
            dt = a.dtype
            fn = ftz if ftz is not None and dt == _F32 and _global(a) else update
            val = _conv(val, dt)
            with lock:
                old = a[i]
                new = a[i] = to_dtype_value(fn(old, val, dt), dt)
            _done(what, old, new)
            return _read(ary, old)
        op.__name__ = fname
        return op

    def _conv(val, dt):
        return to_dtype_value(val, dt) if dt.kind in "iu" else dt.type(val)

    def _int_only(fname, fn):
        def update(old, val, dt):
            if dt.kind not in "iu":
                raise TypeError(f"cuda.atomic.{fname}(): unsupported array dtype {dt}; "
                                f"supported dtypes are int32, uint32, int64, uint64")
            return fn(int(old), int(val), dt)
        return update

    def _max(old, val, dt):
        if dt.kind == "f" and (_nan(old) or _nan(val)):
            return old
        return val if val > old else old

    def _min(old, val, dt):
        if dt.kind == "f" and (_nan(old) or _nan(val)):
            return old
        return val if val < old else old

    def _nanmax(old, val, dt):
        if _nan(val):
            return old
        if _nan(old):
            return val
        return val if val > old else old

    def _nanmin(old, val, dt):
        if _nan(val):
            return old
        if _nan(old):
            return val
        return val if val < old else old

    def _inc(old, val, dt):
        return 0 if old >= val else old + 1

    def _dec(old, val, dt):
        return val if (old == 0 or old > val) else old - 1

    def _arith(fn):
        def update(old, val, dt):
            if dt.kind in "iu":
                return fn(int(old), int(val))
            return fn(old, val)
        return update

    ops = {
        "add": _arith(lambda o, v: o + v), "sub": _arith(lambda o, v: o - v),
        "max": _max, "min": _min, "nanmax": _nanmax, "nanmin": _nanmin,
        "exch": lambda o, v, dt: v,
        "and_": _int_only("and_", lambda o, v, dt: o & v),
        "or_": _int_only("or_", lambda o, v, dt: o | v),
        "xor": _int_only("xor", lambda o, v, dt: o ^ v),
        "inc": _int_only("inc", lambda o, v, dt: _inc(o & _umask(dt), v & _umask(dt), dt)),
        "dec": _int_only("dec", lambda o, v, dt: _dec(o & _umask(dt), v & _umask(dt), dt)),
    }
    ns = {}
    for name, update in ops.items():
        ns[name] = fn = _rmw(name, update)
        out[id(atomics.RMW_STUBS[name])] = fn

    def cas(ary, idx, old, val):
        a, i = _target("cas", ary, idx)
        dt = a.dtype
        old, val = _conv(old, dt), _conv(val, dt)
        with lock:
            cur = new = a[i]
            if cur == old:
                new = a[i] = val
        _done("cuda.atomic.cas", cur, new)
        return _read(ary, cur)

    def compare_and_swap(ary, old, val):
        return cas(ary, 0, old, val)

    ns["cas"] = cas
    ns["compare_and_swap"] = compare_and_swap
    out[id(atomics.cas)] = cas
    out[id(atomics.compare_and_swap)] = compare_and_swap
    out[id(atomics.atomic)] = pytypes.SimpleNamespace(**ns)
    return out
