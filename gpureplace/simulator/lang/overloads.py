"""Numba-style overloads in the simulator: what ``gpureplace.cuda.extending.overload`` (an
override whose value is a ``compiler.overloads.NumbaOverload``), ``overload_method`` and
``overload_attribute`` give a call or an attribute of the kernel's code.

The generator is asked with the Numba types of the values, as the compiler asks it with the
arguments' types, and the implementation it returns runs as simulated device code
(``Resolver.function``): its names resolve through the kernel's Context, so the kernel language
in it (``cuda.shfl_sync``, ``cuda.threadIdx``) has its simulated meaning.  Run as plain Python it
would call the kernel language's stubs, which refuse to run outside a kernel.

An argument that is a literal in the compiled code (a constant of the code, a variable only ever
bound to one, a global int: Numba types it ``Literal[int](3)``) is asked about as Numba asks:
literal first for a ``prefer_literal`` overload, else its plain type first and the literal when
that gave nothing (``ask``).  Which arguments were literals is what the compiled code's typing
says of the call's line (``literal_types``; ``devicecode.literal_calls``).

``simulated_overload(resolver, overload, mask)`` is an override's meaning (for the resolver's
``override_value``); until the resolver asks it, the ``NumbaOverload`` itself is called, and
reaches the same code through ``run_overload`` (installed as its ``simulated_call``), in the
launch that the running thread simulates (``running``).

An attribute of a value whose Numba type has ``overload_method`` / ``overload_attribute``
templates is what the compiler's typing resolves it to (``attribute_winner``: a target's own
templates first, then in the order they were registered): an array's (``overloaded_array_
attribute``, before NumPy's attribute of that name; ``array_attribute`` where NumPy has none)
and a user's extension type's (``ExtensionValue``, before the Python object's attribute).
"""

from __future__ import annotations

import sys
import threading

from numba.core import errors as nb_errors
from numba.core import types as nbtypes

from ...compiler import overloads as _overloads
from ...dispatch.context import host_key
from ..valuetypes import numba_type_of

#: ``running.launch``: the simulated launch whose kernel code the current thread runs
running = threading.local()

#: what ``overloaded_attribute`` answers where no overload gives the attribute
NOT_OVERLOADED = object()


def _types(args, kwargs):
    return (tuple(nbtypes.unliteral(numba_type_of(a)) for a in args),
            tuple((k, nbtypes.unliteral(numba_type_of(v))) for k, v in kwargs.items()))


def _implementation(made):
    """The Python function of what a generator returned (``(signature, impl)`` or ``impl``; a
    ``register_jitable`` / ``njit`` dispatcher's ``py_func``), or None."""
    if isinstance(made, tuple):
        made = made[1]
    return getattr(made, "py_func", made)


# -- literal arguments -----------------------------------------------------------------------------

_sim_globals = []


def _call_site():
    """``(file, line)`` of the simulated device code that makes the call being answered: the
    nearest frame running a re-created function (its globals a ``SimGlobals``), or None."""
    if not _sim_globals:
        from ..resolve import SimGlobals
        _sim_globals.append(SimGlobals)
    cls = _sim_globals[0]
    frame = sys._getframe(2)
    for _ in range(16):
        if frame is None:
            return None
        if type(frame.f_globals) is cls:
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back
    return None


def _agrees(ty, value):
    """Whether ``value`` can be the argument Numba typed ``ty`` (a literal: that value)."""
    if not isinstance(ty, nbtypes.Literal):
        return True
    try:
        return nbtypes.unliteral(ty) == nbtypes.unliteral(numba_type_of(value)) and \
            bool(ty.literal_value == value)
    except Exception:                          # noqa: BLE001 (not comparable: not it)
        return False


def literal_types(resolver, callee, args, kwargs):
    """``(argument types, keyword types)`` with the literal types the compiled code gave this
    call's arguments (``callee``: the host function called, or a method's name), where its
    typing saw literals at the line that makes it and they are these values; else None."""
    calls = getattr(resolver, "literal_calls", None)
    if not calls:
        return None
    site = _call_site()
    entries = calls.get(site) if site is not None else None
    if not entries:
        return None
    for key, argtypes, kwtypes in entries:
        if key is not None and key is not callee and key != callee:
            continue
        if len(argtypes) != len(args) or len(kwtypes) != len(kwargs):
            continue
        kw = dict(kwtypes)
        if kw.keys() != kwargs.keys():
            continue
        if all(map(_agrees, argtypes, args)) and all(_agrees(kw[k], v)
                                                     for k, v in kwargs.items()):
            return tuple(argtypes), tuple((k, kw[k]) for k in kwargs)
    return None


def ask(generator, prefer_literal, lead, plain, literal):
    """The implementation ``generator(*lead, *argument types, **keyword types)`` gives, asked as
    Numba's typing asks it: with the literal types first where it prefers literals, else with
    the plain types first and the literal ones where those gave nothing (``literal``: None
    where no argument is a literal); None where neither does."""
    order = [plain] if literal is None or literal == plain else \
        [literal, plain] if prefer_literal else [plain, literal]
    failure = None
    for argtypes, kwtypes in order:
        try:
            impl = _implementation(generator(*lead, *argtypes, **dict(kwtypes)))
        except nb_errors.NumbaError as exc:      # (Numba's typing tries the other way)
            failure = failure or exc
            continue
        if impl is not None:
            return impl
    if failure is not None:
        raise failure
    return None


class SimulatedOverload:
    """A ``NumbaOverload`` override in simulated device code: per call, the implementation its
    generator gives for the arguments' Numba types, simulated (once per types)."""

    __slots__ = ("resolver", "overload", "mask", "chosen", "__name__")

    def __init__(self, resolver, overload, mask):
        self.resolver, self.overload, self.mask = resolver, overload, mask
        self.chosen = {}
        self.__name__ = getattr(overload.host, "__name__", overload.__name__)

    def __call__(self, *args, **kwargs):
        plain = _types(args, kwargs)
        ov = self.overload
        literal = literal_types(self.resolver, ov.host, args, kwargs)
        key = (plain, literal)
        fn = self.chosen.get(key)
        if fn is None:
            impl = ask(ov.generator, ov.prefer_literal, (), plain, literal)
            if impl is None:
                shown = ", ".join(str(t) for t in plain[0])
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


# -- overload_method / overload_attribute ----------------------------------------------------------

_attribute_index = {"size": -1, "by_name": {}, "by_type": {}}


def _attribute_templates(name):
    """The templates of ``overload_method`` / ``overload_attribute`` named ``name`` in Numba's
    registry whose target reaches gpureplace's, latest first (a definition run again adds one)."""
    return _index()["by_name"].get(name, ())


def _index():
    """``_attribute_index``, made again when Numba's registry has grown (a length compared
    otherwise: an array's attribute asks at each read)."""
    attrs = _attribute_index.get("attrs")
    if attrs is None:
        from numba.core.typing.templates import builtin_registry
        attrs = _attribute_index["attrs"] = builtin_registry.attributes
    if _attribute_index["size"] != len(attrs):
        from numba.core.target_extension import target_registry

        from ...compiler.target import GPUReplaceTarget
        by_name = {}
        for template in list(attrs):
            attr = getattr(template, "_attr", None)
            if attr is None or getattr(template, "_overload_func", None) is None:
                continue
            target = target_registry.get((getattr(template, "metadata", None) or {})
                                         .get("target", "generic"))
            if target is not None and issubclass(GPUReplaceTarget, target):
                by_name.setdefault(attr, []).insert(0, template)
        _attribute_index.update(size=len(attrs), by_name=by_name, by_type={})
    return _attribute_index


def _has_attribute_templates(ty):
    """Whether some ``overload_method`` / ``overload_attribute`` reaching gpureplace's target
    applies to the Numba type ``ty``."""
    index = _index()
    by_type = index["by_type"]
    hit = by_type.get(ty)
    if hit is None:
        hit = by_type[ty] = any(_applies(t, ty) for ts in index["by_name"].values() for t in ts)
    return hit


def _applies(template, ty):
    key = template.key
    return isinstance(ty, key) if isinstance(key, type) else ty == key


def attribute_winner(resolver, ty, name):
    """The attribute template through which the compiled code types ``value.name`` for a value
    of Numba type ``ty``: the compiler's typing context's answer (its target's own templates
    first, then Numba's generic ones, each in the order registered), or None (none, or no
    typing context to ask).  Asked once per launch."""
    cache = resolver.hosts
    key = ("getattr", ty, name)
    hit = cache.get(key, cache)
    if hit is not cache:
        return hit
    winner = None
    typingctx = resolver.typing_ready()
    if typingctx is not None:
        from numba.core.target_extension import target_override

        from ...compiler import frontend
        from ...compiler import resolve as compiler_resolve
        try:
            with frontend._lock, target_override("gpureplace"), \
                    compiler_resolve.outside_a_compile(typingctx.dispatch_context):
                found = typingctx.find_matching_getattr_template(ty, name)
                if not found and nbtypes.unliteral(ty) != ty:
                    found = typingctx.find_matching_getattr_template(nbtypes.unliteral(ty), name)
            winner = found["template"] if found else None
        except Exception:                      # noqa: BLE001 (no answer: the fallbacks)
            winner = None
    cache[key] = winner
    return winner


def _template_in(impl, depth=0):
    """The ``overload_method`` / ``overload_attribute`` template class whose lowering ``impl``
    is (Numba's ``method_impl`` / ``getattr_impl`` close over it), or None."""
    for cell in getattr(impl, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if getattr(v, "_overload_func", None) is not None and hasattr(v, "_attr"):
            return v if isinstance(v, type) else type(v)
        if depth < 3 and callable(v) and getattr(v, "__closure__", None):
            found = _template_in(v, depth + 1)
            if found is not None:
                return found
    return None


def lowering_template(resolver, winner, ty, name):
    """The template whose implementation the compiled code runs for ``value.name`` typed by
    the template ``winner``: the lowering Numba's target context finds for it.  Each
    ``overload_method`` / ``overload_attribute`` template registers a lowering keyed by its type
    key and name, and of those registered for one key the last one is found: a user's generic
    template of a name Numba overloads too (``numba.extending.overload_method(types.Array,
    "fill")``) is typed by Numba's, registered first, and lowered by the user's.  ``winner``'s
    own class where the target context does not say."""
    cache = resolver.hosts
    key = ("lowering", ty, name, type(winner))
    hit = cache.get(key)
    if hit is not None:
        return hit
    found = None
    targetctx = getattr(resolver.typing_ready(), "lowering_context", None)
    if targetctx is not None:
        try:
            if getattr(winner, "is_method", False):
                selector = targetctx._defns.get((winner.key, name))
            else:
                selector = targetctx._getattrs.get(name)
            if selector is not None:
                found = _template_in(selector.find((ty,)))
        except Exception:                      # noqa: BLE001 (the typing's template)
            found = None
    if found is None or getattr(found, "is_method", False) != \
            getattr(winner, "is_method", False):
        found = type(winner)
    cache[key] = found
    return found


def overloaded_attribute(resolver, value, ty, name, user_only=False):
    """``value.name`` (``value`` of Numba type ``ty``) where the compiled code's typing resolves
    it by an ``overload_method`` or ``overload_attribute``: the implementation its lowering runs
    (``lowering_template``), as a method of the kernel's code called with ``value`` first, or
    run on ``value``; ``user_only``: only where that is a user's, not one of Numba's own (whose
    meaning is NumPy's).  NOT_OVERLOADED otherwise."""
    winner = attribute_winner(resolver, ty, name)
    if winner is None or getattr(winner, "_overload_func", None) is None:
        return NOT_OVERLOADED
    template = lowering_template(resolver, winner, ty, name)
    if user_only:
        from ...compiler.overload_redefinitions import overload_site
        if overload_site(template) is None:
            return NOT_OVERLOADED
    if getattr(template, "is_method", False):
        return SimulatedMethod(resolver, (template,), value, ty, name)
    impl = _implementation(template._overload_func(ty))
    if impl is None:
        return NOT_OVERLOADED
    return resolver.function(impl, {})(value)


class SimulatedMethod:
    """``value.name`` of an ``overload_method``: called, the implementation its generator gives
    for (the value's type, the arguments' types), simulated, with the value first."""

    __slots__ = ("resolver", "templates", "this", "this_type", "name")

    def __init__(self, resolver, templates, this, this_type, name):
        self.resolver, self.templates, self.this, self.this_type, self.name = \
            resolver, templates, this, this_type, name

    def __call__(self, *args, **kwargs):
        plain = _types(args, kwargs)
        literal = literal_types(self.resolver, self.name, args, kwargs)
        key = ("method", self.name, self.this_type, tuple(map(id, self.templates)), plain,
               literal)
        cache = self.resolver.hosts
        fn = cache.get(key)
        if fn is None:
            for template in self.templates:
                impl = ask(template._overload_func, getattr(template, "prefer_literal", False),
                           (self.this_type,), plain, literal)
                if impl is not None:
                    fn = cache[key] = self.resolver.function(impl, {})
                    break
            else:
                shown = ", ".join(str(t) for t in plain[0])
                raise TypeError(f"{self.this_type}.{self.name}(): no overload_method of it "
                                f"takes ({shown})")
        return fn(self.this, *args, **kwargs)


def overloaded_array_attribute(array, name):
    """``array.name`` where a user's ``overload_method`` / ``overload_attribute`` of Numba's
    array type is what the compiled code's typing chose for it (a target's own template comes
    before Numba's: the user's overload of ``a.trace()`` or ``a.clip()`` is what runs, not
    NumPy's method); NOT_OVERLOADED otherwise (NumPy's attribute, as Numba's own means it)."""
    templates = _attribute_templates(name)
    if not templates:
        return NOT_OVERLOADED
    from ...compiler.overload_redefinitions import overload_site
    if all(overload_site(t) is None for t in templates):
        return NOT_OVERLOADED                  # (only Numba's own: NumPy's attribute)
    resolver = getattr(array._sim, "resolver", None)
    if resolver is None:
        return NOT_OVERLOADED
    return overloaded_attribute(resolver, array, numba_type_of(array), name, user_only=True)


def array_attribute(array, name):
    """``array.name`` in simulated device code where NumPy's array has no such attribute: an
    ``overload_method`` of Numba's array type (a method of the kernel's code), or the value of
    an ``overload_attribute``; AttributeError where there is none."""
    launch = array._sim
    resolver = getattr(launch, "resolver", None)
    templates = () if resolver is None or name.startswith("__") else _attribute_templates(name)
    if templates:
        ty = numba_type_of(array)
        found = overloaded_attribute(resolver, array, ty, name)
        if found is not NOT_OVERLOADED:
            return found
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


# -- values of a user's extension type -------------------------------------------------------------

class ExtensionValue:
    """A value of a user's extension type (``typeof_impl`` gives its Numba type) whose type has
    ``overload_method`` / ``overload_attribute`` templates, as device code sees it: an attribute
    the compiled code's typing resolves to one of them is its simulated implementation; any
    other (a ``make_attribute_wrapper`` field) is the Python object's own."""

    __slots__ = ("_sim_value", "_sim_type", "_sim_resolver")

    def __init__(self, resolver, value, ty):
        object.__setattr__(self, "_sim_value", value)
        object.__setattr__(self, "_sim_type", ty)
        object.__setattr__(self, "_sim_resolver", resolver)

    def __getattr__(self, name):
        if name.startswith("__") or name.startswith("_sim_"):
            raise AttributeError(name)
        found = overloaded_attribute(self._sim_resolver, self, self._sim_type, name)
        if found is not NOT_OVERLOADED:
            return found
        return getattr(self._sim_value, name)

    def __setattr__(self, name, value):
        setattr(self._sim_value, name, value)

    def __repr__(self):
        return repr(self._sim_value)


_LIBRARY_ROOTS = frozenset(["builtins", "numpy", "numba", "llvmlite", "cupy", "torch",
                            "gpureplace", "ml_dtypes", "cffi", "_cffi_backend", "enum"])


def extension_value(resolver, value):
    """``value`` as device code sees it where it is an object of a user's class typed by
    ``typeof_impl`` as a type that has ``overload_method`` / ``overload_attribute`` templates
    (an ``ExtensionValue``); else None."""
    cls = type(value)
    if (cls.__module__ or "").split(".", 1)[0] in _LIBRARY_ROOTS or isinstance(value, tuple):
        return None        # (a namedtuple is a tuple: indexed, unpacked, its fields read as is)
    from numba.core.typing.typeof import Purpose, typeof, typeof_impl
    if typeof_impl.dispatch(cls) is typeof_impl.dispatch(object):
        return None
    try:
        ty = typeof(value, Purpose.constant)
    except Exception:                          # noqa: BLE001 (no Numba type: as it is)
        return None
    if not _has_attribute_templates(ty):
        return None
    return ExtensionValue(resolver, value, ty)
