"""Contexts: override tables that decide what a host callable means on the device.

A ``Context`` maps host callables (``math.sin``, ``np.exp``, ``abs``, a user's function) to device
replacements.  Lookup walks the stack: the nearest context that overrides a callable wins, and a
context without an override falls back to its parent, down to the built-in table that maps math,
NumPy ufuncs and builtins to libdevice and NVVM intrinsics.

Every table change bumps ``Context.version`` and the global world counter, so compiled code that
resolved through the table can be revalidated.
"""

from __future__ import annotations

import inspect
import itertools
import threading

_MISSING = object()
_lock = threading.RLock()
_ids = itertools.count()


def host_key(obj):
    """The key under which a host callable is looked up: the object itself where hashable."""
    try:
        hash(obj)
    except TypeError:
        return ("id", id(obj))
    return obj


class Override:
    """One entry of a context's table: ``host`` replaced by ``impl`` on the device."""

    __slots__ = ("host", "impl", "context", "types", "serial")

    def __init__(self, host, impl, context, types=None):
        self.host = host
        self.impl = impl
        self.context = context
        self.types = types
        self.serial = next(_ids)

    def __repr__(self):
        return (f"<Override {_name_of(self.host)} -> {_name_of(self.impl)} "
                f"in context {self.context.name!r}>")


def _name_of(obj):
    mod = getattr(obj, "__module__", None) or ""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    if isinstance(obj, type(inspect)):  # a module
        return obj.__name__
    return f"{mod}.{name}" if mod and mod != "builtins" else name


class Context:
    """A named override table with an optional parent.

    ``Context(name, parent=default_context, fastmath=False, **options)``
    """

    def __init__(self, name, parent=_MISSING, fastmath=False, **options):
        if parent is _MISSING:
            parent = default_context
        if parent is not None and not isinstance(parent, Context):
            raise TypeError(f"Context parent must be a Context or None, got {parent!r}")
        self.name = str(name)
        self.parent = parent
        self.fastmath = bool(fastmath)
        self.options = dict(options)
        self._table = {}
        self.version = 0
        self.uid = next(_ids)
        self._compiler = None       # (typing context, target context), made on first compile

    # -- the table --------------------------------------------------------------------------------
    def override(self, host, impl=None, *, types=None):
        """Replace ``host`` by ``impl`` on the device in this context (usable as a decorator)."""
        if not callable(host):
            raise TypeError(f"override(): {host!r} is not callable, so there is nothing to override")

        def register(fn):
            if not callable(fn):
                raise TypeError(f"override({_name_of(host)}): the replacement {fn!r} is not callable")
            with _lock:
                self._table[host_key(host)] = Override(host, fn, self, types)
                self._bump()
            return fn

        return register if impl is None else register(impl)

    def remove_override(self, host):
        with _lock:
            if self._table.pop(host_key(host), None) is not None:
                self._bump()

    def _bump(self):
        from ..tracking import world
        self.version += 1
        world.bump()

    def lookup(self, host, start=None):
        """``Override`` for ``host`` found walking up from ``start`` (default: this context), or None."""
        key = host_key(host)
        layer = self if start is None else start
        while layer is not None:
            hit = layer._table.get(key)
            if hit is not None:
                return hit
            layer = layer.parent
        return None

    def stack(self):
        """This context and its ancestors, nearest first."""
        out, layer = [], self
        while layer is not None:
            out.append(layer)
            layer = layer.parent
        return out

    def overrides(self):
        """``{host: Override}`` defined in this context itself (not its parents)."""
        return {o.host: o for o in self._table.values()}

    @property
    def effective_fastmath(self):
        return any(layer.fastmath for layer in self.stack())

    def compilers(self):
        """The Numba typing and target contexts that compile in this context (made once)."""
        if self._compiler is None:
            with _lock:
                if self._compiler is None:
                    from ..compiler.target import GPUTypingContext, GPUTargetContext
                    tyctx = GPUTypingContext(self)
                    self._compiler = (tyctx, GPUTargetContext(tyctx))
        return self._compiler

    def __repr__(self):
        parent = self.parent.name if self.parent else None
        return f"<Context {self.name!r} parent={parent!r} overrides={len(self._table)}>"


#: The built-in table (math, NumPy ufuncs, builtins -> libdevice / NVVM); filled by compiler.devicemath.
builtin_context = Context("builtin", parent=None)
#: The context kernels compile in unless told otherwise; ``gpureplace.override`` writes here.
default_context = Context("default", parent=builtin_context)


def override(host, impl=None, *, types=None):
    """Override ``host`` in the default context (decorator)."""
    return default_context.override(host, impl, types=types)
