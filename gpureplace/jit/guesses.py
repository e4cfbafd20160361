"""Argument types for a notebook's kernel before its first launch: those the parameters of the
same names were given at the notebook's latest launches (``x``, ``out``, ``a`` usually mean the
same arrays from one kernel to the next).  ``jit/ahead.py`` compiles a kernel just defined in a
cell for them while the user types its launch, as it does for a kernel redefined under its old
name; a wrong guess costs a background compile and nothing else (the launch compiles for what it
is given, as without it)."""

from __future__ import annotations

import inspect

_PLAIN = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
#: parameter name -> (argument type key, device) of the latest launch that gave it
_seen = {}


def _names(fn):
    """The kernel's parameter names, when it has only plain positional ones (else None)."""
    params = list(fn._pysig.parameters.values())
    if not params or any(p.kind not in _PLAIN for p in params):
        return None
    return [p.name for p in params]


def note_launch(fn, keys, dev):
    """A launch of ``fn`` (a kernel of the notebook) with argument type ``keys`` on ``dev``."""
    names = _names(fn)
    if names is not None and len(names) == len(keys):
        for name, key in zip(names, keys):
            _seen[name] = (key, dev)


def guess(fn):
    """``(argument type keys, device)`` for a kernel never launched, from the launches its
    parameter names had; None unless every parameter was seen, all on one device."""
    names = _names(fn)
    if names is None:
        return None
    seen = [_seen.get(name) for name in names]
    if any(s is None for s in seen):
        return None
    devices = {dev for _, dev in seen}
    if len(devices) != 1:
        return None
    return tuple(key for key, _ in seen), devices.pop()


def forget():
    """Forget the launches seen (tests; a new session)."""
    _seen.clear()
