"""Atomics in the simulator: ``cuda.atomic.*`` (read-modify-write under the launch's lock),
``cas`` and ``compare_and_swap``."""

from __future__ import annotations

import types as pytypes

from ...compiler.intrinsics import atomics
from ..arrays import SimArray, to_dtype_value


def _umask(dt):
    return (1 << (dt.itemsize * 8)) - 1


def table(launch):
    """The atomic stubs of ``launch``: ``{id(stub): value}``."""
    out = {}
    lock = launch.atomic_lock

    def _target(fname, ary, idx):
        if not isinstance(ary, SimArray):
            raise TypeError(f"cuda.atomic.{fname}(): the first argument must be an array, got "
                            f"{type(ary).__name__}")
        if not ary._writable:
            raise TypeError(f"cuda.atomic.{fname}(): the array is read-only")
        return ary._a, ary._check(idx)

    def _read(ary, old):
        r = ary._read
        return old if r is None else r(old)

    def _nan(v):
        return v != v

    def _rmw(fname, update):
        def op(ary, idx, val):
            a, i = _target(fname, ary, idx)
            dt = a.dtype
            with lock:
                old = a[i]
                a[i] = to_dtype_value(update(old, _conv(val, dt), dt), dt)
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
        with lock:
            cur = a[i]
            if cur == _conv(old, dt):
                a[i] = _conv(val, dt)
        return _read(ary, cur)

    def compare_and_swap(ary, old, val):
        return cas(ary, 0, old, val)

    ns["cas"] = cas
    ns["compare_and_swap"] = compare_and_swap
    out[id(atomics.cas)] = cas
    out[id(atomics.compare_and_swap)] = compare_and_swap
    out[id(atomics.atomic)] = pytypes.SimpleNamespace(**ns)
    return out
