"""Numba-style overloads in the simulator: what ``gpureplace.cuda.extending.overload`` (an
override whose value is a ``compiler.overloads.NumbaOverload``), ``overload_method`` and
``overload_attribute`` give a call or an attribute of the kernel's code.

The generator is asked with the Numba types of the values, as the compiler asks it with the
arguments' types, and the implementation it returns runs as simulated device code
(``Resolver.function``): its names resolve through the kernel's Context, so the kernel language
in it (``cuda.shfl_sync``, ``cuda.threadIdx``) has its simulated meaning.  Run as plain Python it
would call the kernel language's stubs, which refuse to run outside a kernel.

``simulated_overload(resolver, overload, mask)`` is an override's meaning (for the resolver's
``override_value``); until the resolver asks it, the ``NumbaOverload`` itself is called, and
reaches the same code through ``run_overload`` (installed as its ``simulated_call``), in the
launch that the running thread simulates (``running``).  ``array_attribute(array, name)`` is the
meaning of an attribute that NumPy's array does not have: an ``overload_method`` or
``overload_attribute`` of Numba's array type.
"""

from __future__ import annotations

import threading

from numba.core import types as nbtypes

from ...compiler import overloads as _overloads
from ...dispatch.context import host_key
from ..valuetypes import numba_type_of

#: ``running.launch``: the simulated launch whose kernel code the current thread runs
running = threading.local()


def _types(args, kwargs):
    return (tuple(nbtypes.unliteral(numba_type_of(a)) for a in args),
            tuple((k, nbtypes.unliteral(numba_type_of(v))) for k, v in kwargs.items()))


def _implementation(made):
    """The Python function of what a generator returned (``(signature, impl)`` or ``impl``; a
    ``register_jitable`` / ``njit`` dispatcher's ``py_func``), or None."""
    if isinstance(made, tuple):
        made = made[1]
    return getattr(made, "py_func", made)


class SimulatedOverload:
    """A ``NumbaOverload`` override in simulated device code: per call, the implementation its
    generator gives for the arguments' Numba types, simulated (once per types)."""

    __slots__ = ("resolver", "overload", "mask", "chosen", "__name__")

    def __init__(self, resolver, overload, mask):
        self.resolver, self.overload, self.mask = resolver, overload, mask
        self.chosen = {}
        self.__name__ = getattr(overload.host, "__name__", overload.__name__)

    def __call__(self, *args, **kwargs):
        key = _types(args, kwargs)
        fn = self.chosen.get(key)
        if fn is None:
            ov = self.overload
            argtypes, kwtypes = key
            impl = _implementation(ov.generator(*argtypes, **dict(kwtypes)))
            if impl is None:
                shown = ", ".join(str(t) for t in argtypes)
                raise TypeError(f"{ov.__qualname__}, the overload of "
                                f"{getattr(ov.host, '__qualname__', ov.host)}, has no "
                                f"implementation for ({shown})")
            fn = self.chosen[key] = self.resolver.function(impl, self.mask)
        return fn(*args, **kwargs)

    def __repr__(self):
        return f"<simulated {self.overload!r}>"


def simulated_overload(resolver, overload, mask):
    """The meaning of the override ``overload`` (a ``NumbaOverload``) with the override mask
    ``mask`` (inside it, the overridden function is the next layer's), made once per launch."""
    key = ("overload", id(overload), _mask_key(mask))
    made = resolver.hosts.get(key)
    if made is None or made.overload is not overload:
        made = resolver.hosts[key] = SimulatedOverload(resolver, overload, mask)
    return made


def _mask_key(mask):
    from ...compiler.resolve import mask_key
    return mask_key(mask)


def run_overload(overload, args, kwargs):
    """``overload(*args, **kwargs)`` called by simulated device code (the resolver gave the
    ``NumbaOverload`` itself): its implementation simulated, with the mask the resolver gives
    an override (the overridden function is the next layer's inside it).  NotImplemented
    outside a simulated launch."""
    launch = getattr(running, "launch", None)
    resolver = getattr(launch, "resolver", None)
    if resolver is None:
        return NotImplemented
    mask = {}
    host = overload.host
    for ovr in resolver.context.candidates(host):
        if ovr.impl is overload:
            parent = ovr.context.parent
            mask = {host_key(host): parent if parent is not None else False}
            break
    return simulated_overload(resolver, overload, mask)(*args, **kwargs)


_overloads.NumbaOverload.simulated_call = staticmethod(run_overload)


# -- overload_method / overload_attribute of array types -------------------------------------------

_attribute_index = {"size": -1, "by_name": {}}


def _attribute_templates(name):
    """The templates of ``overload_method`` / ``overload_attribute`` named ``name`` in Numba's
    registry whose target reaches gpureplace's, latest first (a definition run again adds one)."""
    from numba.core.target_extension import target_registry
    from numba.core.typing.templates import builtin_registry

    from ...compiler.target import GPUReplaceTarget
    attrs = builtin_registry.attributes
    if _attribute_index["size"] != len(attrs):
        by_name = {}
        for template in list(attrs):
            attr = getattr(template, "_attr", None)
            if attr is None or getattr(template, "_overload_func", None) is None:
                continue
            target = target_registry.get((getattr(template, "metadata", None) or {})
                                         .get("target", "generic"))
            if target is not None and issubclass(GPUReplaceTarget, target):
                by_name.setdefault(attr, []).insert(0, template)
        _attribute_index.update(size=len(attrs), by_name=by_name)
    return _attribute_index["by_name"].get(name, ())


def _applies(template, ty):
    key = template.key
    return isinstance(ty, key) if isinstance(key, type) else ty == key


class SimulatedMethod:
    """``array.name`` of an ``overload_method``: called, the implementation its generator gives
    for (the array's type, the arguments' types), simulated, with the array first."""

    __slots__ = ("resolver", "templates", "this", "this_type", "name")

    def __init__(self, resolver, templates, this, this_type, name):
        self.resolver, self.templates, self.this, self.this_type, self.name = \
            resolver, templates, this, this_type, name

    def __call__(self, *args, **kwargs):
        argtypes, kwtypes = _types(args, kwargs)
        key = (self.name, self.this_type, argtypes, kwtypes)
        cache = self.resolver.hosts
        fn = cache.get(key)
        if fn is None:
            for template in self.templates:
                impl = _implementation(template._overload_func(self.this_type, *argtypes,
                                                               **dict(kwtypes)))
                if impl is not None:
                    fn = cache[key] = self.resolver.function(impl, {})
                    break
            else:
                shown = ", ".join(str(t) for t in argtypes)
                raise TypeError(f"{self.this_type}.{self.name}(): no overload_method of it "
                                f"takes ({shown})")
        return fn(self.this, *args, **kwargs)


def array_attribute(array, name):
    """``array.name`` in simulated device code where NumPy's array has no such attribute: an
    ``overload_method`` of Numba's array type (a method of the kernel's code), or the value of
    an ``overload_attribute``; AttributeError where there is none."""
    launch = array._sim
    resolver = getattr(launch, "resolver", None)
    templates = () if resolver is None or name.startswith("__") else _attribute_templates(name)
    if templates:
        ty = numba_type_of(array)
        found = [t for t in templates if _applies(t, ty)]
        methods = [t for t in found if getattr(t, "is_method", False)]
        if methods:
            return SimulatedMethod(resolver, methods, array, ty, name)
        for template in found:
            impl = _implementation(template._overload_func(ty))
            if impl is not None:
                return resolver.function(impl, {})(array)
    raise AttributeError(f"a device array has no attribute {name!r} (NumPy's array has none, "
                         f"and no overload_method or overload_attribute of Numba's array type "
                         f"gives one)")
