"""Call types kept per typing context: what Numba's templates answered, not asked again.

Numba types a call such as ``operator.add(float32, float64)``, ``x[i]`` or ``bool(b)`` by trying
the templates registered for the function in turn (two dozen for an operator, each rating the
arguments' conversions) and asks again at each of type inference's two rounds, at the lowering
of every binary operator and subscript, and in every compile: about 2 ms of a small kernel's
22 ms.  A template's answer depends on the types asked about and on the registries the context
has installed, and on nothing else -- unless working it out resolves a value through the
dispatch context or compiles a function (an ``@overload``'s implementation, a device function),
which a frame records as a dependency.  So an answer is kept only when that did not happen
(``resolve.activity`` unchanged), failures are never kept, and a context drops all it kept when
a registry is added or one it has gains a registration (``GPUTypingContext.refresh``).

A Numba function type also remembers, per argument types of the signature, which
implementation lowering is to use (``Function._impl_keys``, set by each answer); an answer given
from here sets it again as the templates would have.
"""

from __future__ import annotations

from numba.core import types


class CallTypes:
    """One typing context's kept answers: (function, argument types, keywords) -> signature."""

    __slots__ = ("_entries",)

    def __init__(self):
        self._entries = {}

    def clear(self):
        self._entries.clear()

    def answer(self, func, args, kws, ask, fnty=None):
        """The signature ``ask()`` gives for calling ``func`` with ``args`` / ``kws``, from what
        was kept where it may be.  ``fnty``: the Numba function type that answers for ``func``
        (``func`` itself when it is one)."""
        from .resolve import activity
        try:
            key = (func, tuple(args), tuple(sorted(kws.items())) if kws else ())
            kept = self._entries.get(key)
        except TypeError:                   # a type that cannot be a key
            return ask()
        if kept is not None:
            sig, fnty, impl = kept
            if impl is not None:
                fnty._impl_keys[sig.args] = impl
            return sig
        before = activity()
        sig = ask()
        if sig is not None and activity() == before:
            if fnty is None and isinstance(func, types.Function):
                fnty = func
            impl = None if fnty is None else fnty._impl_keys.get(sig.args)
            self._entries[key] = (sig, fnty, impl)
        return sig


_numba_get_call_type = types.Function.get_call_type


def _get_call_type(self, context, args, kws):
    """``types.Function.get_call_type``, answered from the context's kept call types when the
    context is one of ours (Numba's lowering asks the function type directly)."""
    kept = getattr(context, "call_types", None)
    if type(kept) is not CallTypes:
        return _numba_get_call_type(self, context, args, kws)
    return kept.answer(self, args, kws,
                       lambda: _numba_get_call_type(self, context, args, kws))


def install():
    if types.Function.get_call_type is _numba_get_call_type:
        types.Function.get_call_type = _get_call_type
