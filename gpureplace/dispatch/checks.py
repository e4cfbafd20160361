"""What ``Context(...)`` and ``Context.override(...)`` check of what they are given, at
definition (a replacement no call could reach, options a context does not have, types that are
not types) -- before anything compiles, naming the override -- and when a replacement defined
again means what the old one did (nothing to recompile)."""

from __future__ import annotations

import inspect

from ..tracking.fingerprint import fingerprint
from ..tracking.names import qualified_name


def refuse_options(name, options):
    """A context has a name, a parent and a fast-math flag, nothing else: another keyword
    (``fast_math=True``, ``arch="sm_80"``) would be kept and mean nothing."""
    import difflib
    bad = sorted(options)[0]
    close = difflib.get_close_matches(bad.lower().replace("_", ""), ["fastmath", "parent"], n=1)
    hint = f" (did you mean {close[0]}=?)" if close else (
        " (compile options such as arch, lineinfo or max_registers are cuda.jit's)")
    raise TypeError(f"Context({name!r}): unknown option {bad!r}{hint}; a context takes a name, "
                    f"a parent and fastmath")


def same_meaning(old, new):
    """Whether implementation ``new`` means what ``old`` did: functions of one fingerprint."""
    if old is new:
        return True
    if not (inspect.isfunction(old) and inspect.isfunction(new)) or \
            old.__globals__ is not new.__globals__:
        return False
    fp = fingerprint(new)
    return fp is not None and fp == fingerprint(old)


def normalize_types(host, types):
    """Argument types of a typed override, as a tuple of Numba types."""
    import numpy as np
    from numba.core import types as nbtypes
    from numba.np import numpy_support
    if isinstance(types, (str, nbtypes.Type)) or not isinstance(types, (tuple, list)):
        types = (types,)
    out = []
    for t in types:
        if isinstance(t, nbtypes.Type):
            out.append(t)
            continue
        try:
            if isinstance(t, str) and isinstance(getattr(nbtypes, t, None), nbtypes.Type):
                out.append(getattr(nbtypes, t))
                continue
            out.append(numpy_support.from_dtype(np.dtype(t)))
        except (TypeError, NotImplementedError):
            raise TypeError(f"override({qualified_name(host)}, types=...): {t!r} is not a type "
                            f"(use numba types such as float32, NumPy types or their names)") \
                from None
    return tuple(out)


def refuse_uncallable(host, fn):
    """Refuse, at definition, a replacement that device code cannot call: a partial, a bound
    method, an instance of a Python class with ``__call__`` (the launch would only find that
    ``host`` has no device implementation)."""
    import functools
    import types as pytypes
    if isinstance(fn, functools.partial):
        what = "a functools.partial"
    elif isinstance(fn, pytypes.MethodType):
        what = f"a bound method ({qualified_name(fn.__func__)})"
    elif not isinstance(fn, (pytypes.FunctionType, pytypes.BuiltinFunctionType, type)) and \
            not hasattr(fn, "py_func") and \
            isinstance(getattr(type(fn), "__call__", None), pytypes.FunctionType) and \
            (type(fn).__module__ or "").partition(".")[0] not in ("gpureplace", "numba", "numpy"):
        what = f"an instance of {type(fn).__qualname__}"
    else:
        return
    raise TypeError(f"override({qualified_name(host)}): the replacement is {what}, which device "
                    f"code cannot call; give a function (a def or a lambda: bind extra "
                    f"arguments in it, lambda v: f(v, 3.0)) or a device function")


def _positional_arity(fn):
    """(min, max) positional arguments ``fn`` accepts, or None when it cannot be told."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    lo = hi = 0
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            hi += 1
            if p.default is p.empty:
                lo += 1
        elif p.kind is p.VAR_POSITIONAL:
            hi = float("inf")
        elif p.kind is p.KEYWORD_ONLY and p.default is p.empty:
            return None
    return lo, hi


def check_signatures(host, impl, argtypes):
    """Refuse, at definition, a replacement that cannot take the overridden function's calls."""
    target = getattr(impl, "py_func", impl)
    have = _positional_arity(target)
    if have is None:
        return
    if argtypes is not None:
        need = (len(argtypes), len(argtypes))
    else:
        need = _positional_arity(getattr(host, "py_func", host))
        if need is None:
            return
    if need[1] < have[0] or need[0] > have[1]:      # no call of the host could fit
        def fmt(r):
            return str(r[0]) if r[0] == r[1] else f"{r[0]} to {'any' if r[1] == float('inf') else r[1]}"
        raise TypeError(f"override({qualified_name(host)}): {qualified_name(target)} takes "
                        f"{fmt(have)} positional argument(s), but calls of {qualified_name(host)} "
                        f"pass {fmt(need)}")
