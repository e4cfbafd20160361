"""Numba-style ``@overload`` generators as the device meaning of a host callable.

``gpureplace.cuda.extending.overload(func)`` (numba-cuda's ``@overload(func, target="cuda")``)
registers a ``NumbaOverload`` as an override of ``func`` in a Context, so an overload is tracked
like any override: it shows in the dispatch report, a redefinition (the cell run again) replaces
it and recompiles exactly the kernels that called ``func``, and another Context can override it
again.  The compiler types a call through Numba's own overload template (the generator is called
with the argument types and returns the implementation, which compiles as a device function in
the calling kernel's Context); the simulator calls the generator with the values' types and runs
the implementation as simulated device code (``simulator/lang/overloads.py``), its names resolved
through the kernel's Context as the compiler resolves them.  The disk cache finds an overload's implementation again in another
process by asking its generators again (``answers``, below).
"""

from __future__ import annotations

import re
import types as pytypes

from numba.core import types


class NumbaOverload:
    """``host``'s device implementation chosen by ``generator(*argument types)``."""

    #: ``simulated_call(overload, args, kwargs)``: the call run as simulated device code, or
    #: NotImplemented outside a simulated launch (the simulator installs it: this layer does
    #: not import the simulator)
    simulated_call = None

    def __init__(self, host, generator, jit_options=None, strict=True, inline="never",
                 prefer_literal=False, **metadata):
        if not callable(generator):
            raise TypeError(f"overload({getattr(host, '__qualname__', host)!r}) decorates a "
                            f"function that returns the implementation, got {generator!r}")
        self.host = host
        self.generator = generator
        self.jit_options = dict(jit_options or {})
        self.strict, self.inline, self.prefer_literal = strict, inline, prefer_literal
        self.metadata = dict(metadata)
        self.__name__ = getattr(generator, "__name__", "overload")
        self.__qualname__ = getattr(generator, "__qualname__", self.__name__)
        self.__module__ = getattr(generator, "__module__", None)
        self._type = None

    def numba_type(self):
        """A ``types.Function`` over Numba's overload template for this generator (made once;
        a redefinition is a new ``NumbaOverload``)."""
        if self._type is None:
            from numba.core.typing.templates import make_overload_template
            template = make_overload_template(
                self.host, self.generator, self.jit_options, self.strict, self.inline,
                self.prefer_literal, **{**self.metadata, "target": "gpureplace"})
            self._type = types.Function(template)
        return self._type

    def __call__(self, *args, **kwargs):
        """The implementation for the values' types: in a simulated launch, as simulated device
        code (the kernel language in it has its simulated meaning there); elsewhere, as Python
        (a host call of the overload: NumPy arrays and numbers)."""
        if self.simulated_call is not None:
            done = self.simulated_call(self, args, kwargs)
            if done is not NotImplemented:
                return done
        from numba import typeof
        impl = self.generator(*[typeof(a) for a in args],
                              **{k: typeof(v) for k, v in kwargs.items()})
        if impl is None:
            shown = ", ".join(str(typeof(a)) for a in args)
            raise TypeError(f"{self.__qualname__}, the overload of "
                            f"{getattr(self.host, '__qualname__', self.host)}, has no "
                            f"implementation for ({shown})")
        if isinstance(impl, tuple):          # (signature, implementation)
            impl = impl[1]
        return impl(*args, **kwargs)

    def __getstate__(self):
        """Pickled by what defines it: its Numba type (a template holding the implementations
        compiled here, and through them this process's compilers) is made again where it is
        unpickled (pickling it recursed without end once a kernel had used the overload)."""
        return {**self.__dict__, "_type": None}

    def __fingerprint_parts__(self):
        """What defines this overload across processes (``tracking.fingerprint``): the host, the
        generator (its code and closure) and the options given to ``@overload``."""
        return (self.host, self.generator, _sorted_items(self.jit_options), self.strict,
                self.inline, self.prefer_literal, _sorted_items(self.metadata))

    def __repr__(self):
        return f"<overload {self.__qualname__} of {getattr(self.host, '__qualname__', self.host)}>"


def _sorted_items(mapping):
    return tuple(sorted(mapping.items(), key=lambda item: repr(item[0])))


# ---------------------------------------------------------------------------------------------
# Overload implementations in the disk cache (kernel_cache.py)
#
# A device function that an overload generator returned (a lambda, a function local to the
# generator, a module function it chose) is no binding of its own: another process finds it
# again by asking the generators of the host function again, with the argument types the
# compile asked them with.  An entry records what every generator of that host answered (each
# generator's fingerprint and options, and the fingerprint of what it returned); it is used only
# where all of them answer the same now -- another overload body, another value in its
# implementation's closure, another choice among implementations is a miss.


def generators_of(host, context):
    """``[(owner, generator)]``: the overload generators that may give ``host``'s device meaning
    in ``context``, in the order a compile asks them -- its ``NumbaOverload`` overrides, then
    the templates of Numba's registry (``owner``: the ``NumbaOverload`` or the template)."""
    from .overload_redefinitions import overloads_for_kernels
    try:
        candidates = context.candidates(host)
    except TypeError:                # (not a host a context can hold)
        candidates = ()
    out = [(ovr.impl, ovr.impl.generator) for ovr in candidates
           if isinstance(ovr.impl, NumbaOverload)]
    out.extend((t, t._overload_func) for t in overloads_for_kernels(host))
    return out


def user_hosts(context):
    """``{id(host): host}``: the functions with a user's overload (not a library's) that may
    give their device meaning in ``context`` -- those of Numba's registry (any target: a
    superset) and the hosts of ``context``'s ``NumbaOverload`` overrides."""
    from .overload_redefinitions import users_overloaded
    ours = {id(ovr.host): ovr.host for layer in context.stack() if layer.parent is not None
            for ovr in layer.overrides() if isinstance(ovr.impl, NumbaOverload)}
    # (the built-in table, the layer without a parent, holds gpureplace's own)
    return {**users_overloaded(), **ours} if ours else users_overloaded()


def users_overload(host, context):
    """Whether a user's overload (not a library's) may give ``host``'s device meaning."""
    from .overload_redefinitions import overload_site
    return any(isinstance(owner, NumbaOverload) or overload_site(owner) is not None
               for owner, _ in generators_of(host, context))


def _options(owner):
    if isinstance(owner, NumbaOverload):
        return repr((_sorted_items(owner.jit_options), owner.strict, owner.inline,
                     owner.prefer_literal, _sorted_items(owner.metadata)))
    return repr((_sorted_items(getattr(owner, "_jit_options", None) or {}),
                 getattr(owner, "_strict", None), getattr(owner, "_inline", None),
                 getattr(owner, "prefer_literal", None),
                 _sorted_items(getattr(owner, "metadata", None) or {})))


def answers(host, context, args, kws):
    """``(texts, functions)``: what each generator of ``host`` (``generators_of``) answers for
    the argument types ``args`` and ``kws`` (and for their non-literal types: a compile asks
    both), as texts comparable across processes, and the functions they returned.  None where
    one cannot be told across processes (a generator or a function without a fingerprint), or
    where a template prefers literal arguments (it is asked with literal types this record has
    not kept)."""
    from ..tracking.fingerprint import fingerprint
    variants = [(tuple(args), dict(kws))]
    plain = (tuple(types.unliteral(a) for a in args),
             {k: types.unliteral(v) for k, v in kws.items()})
    if plain != variants[0]:
        variants.append(plain)
    texts, made = [], []
    for owner, generator in generators_of(host, context):
        if getattr(owner, "prefer_literal", False):
            return None
        gen_fp = fingerprint(generator)
        if gen_fp is None:
            return None
        for a, k in variants:
            try:
                got = generator(*a, **k)
            except Exception as exc:        # (what Numba would say: no implementation here)
                texts.append([gen_fp, _options(owner), f"raises {_name(type(exc))}"])
                continue
            fn = got[1] if isinstance(got, tuple) and len(got) == 2 else got
            if got is None:
                said = "none"
            elif isinstance(fn, pytypes.FunctionType):
                fp = fingerprint(fn)
                if fp is None:
                    return None
                said = fp if fn is got else f"signature {got[0]} {fp}"
                made.append(fn)
            else:
                said = f"gives a {_name(type(got))}"
            texts.append([gen_fp, _options(owner), said])
    return texts, made


def _name(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


_templates = {"sizes": None, "templates": ()}


def _overload_templates():
    """Every overload template of Numba's registry (functions and methods): those whose cache
    of implementations ``implementations_made`` reads.  Listed again only when the registry grew."""
    from numba.core.typing.templates import builtin_registry
    sizes = (len(builtin_registry.globals), len(builtin_registry.attributes))
    if _templates["sizes"] != sizes:
        found = {}
        for _, ty in list(builtin_registry.globals):
            for template in getattr(ty, "templates", ()):
                found.setdefault(id(template), template)
        for template in list(builtin_registry.attributes):
            found.setdefault(id(template), template)
        _templates.update(sizes=sizes, templates=tuple(
            (t, t._impl_cache) for t in found.values()
            if isinstance(getattr(t, "_impl_cache", None), dict)))
    return _templates["templates"]


def implementations_made(context):
    """``{id(function): [(function, host, args, kws, users)]}``: the implementations that
    overload templates (Numba's registry's, and the ``NumbaOverload`` overrides of
    ``context``'s stack) returned in this process, with the host overloaded (the template's
    key: a type for a method's), the argument types the generator was called with, and whether
    the overload is a user's (not a library's)."""
    from .overload_redefinitions import overload_site
    # (a template's cache is a dictionary of its class, filled in place: listed with it)
    used = [(t, cache, overload_site(t) is not None) for t, cache in _overload_templates()
            if cache]
    for layer in context.stack():
        if layer.parent is None:
            continue                    # the built-in table: no overloads there
        for ovr in layer.overrides():
            if isinstance(ovr.impl, NumbaOverload) and ovr.impl._type is not None:
                used.extend((t, t._impl_cache, True) for t in ovr.impl._type.templates)
    made = {}
    for template, cache, users in used:
        for key, value in list(cache.items()):
            fn = getattr(value[0], "py_func", None) if isinstance(value, tuple) else None
            if isinstance(fn, pytypes.FunctionType) and isinstance(key, tuple) and len(key) > 2:
                made.setdefault(id(fn), []).append((fn, template.key, key[1], dict(key[2]),
                                                    users))
    return made


# -- argument types as text -------------------------------------------------------------------

def type_text(ty):
    """``ty`` as text that ``parse_type`` gives back exactly, or None (a type it does not know)."""
    text = str(ty)
    try:
        back = parse_type(text)
    except ValueError:
        return None
    return text if type(back) is type(ty) and back == ty else None


def parse_type(text):
    """The Numba type ``type_text`` wrote: scalars, arrays, tuples, integer and boolean
    literals -- read, never evaluated; ValueError for anything else."""
    ty, rest = _parse(text, 0)
    if rest:
        raise ValueError(f"not a type: {text!r}")
    return ty


_NAMED = None
_LITERAL = re.compile(r"Literal\[(int|bool)\]\((-?\d+|True|False)\)")
_ARRAY_TAIL = re.compile(r", (\d+)d, ([CFA])\)")


def _named():
    global _NAMED
    if _NAMED is None:
        named = {}
        for value in vars(types).values():
            if isinstance(value, types.Type) and not isinstance(value, types.Literal):
                named.setdefault(str(value), value)
        _NAMED = named
    return _NAMED


def _parse(text, depth):
    if depth > 20:
        raise ValueError("a type nested too deeply")
    for prefix, flags in (("readonly array(", {"readonly": True}),
                          ("unaligned array(", {"aligned": False}), ("array(", {})):
        if text.startswith(prefix):
            dtype, rest = _parse(text[len(prefix):], depth + 1)
            m = _ARRAY_TAIL.match(rest)
            if m is None:
                raise ValueError(f"not an array type: {text!r}")
            return types.Array(dtype, int(m.group(1)), m.group(2), **flags), rest[m.end():]
    if text.startswith("UniTuple("):
        item, rest = _parse(text[len("UniTuple("):], depth + 1)
        m = re.match(r" x (\d+)\)", rest)
        if m is None:
            raise ValueError(f"not a tuple type: {text!r}")
        return types.UniTuple(item, int(m.group(1))), rest[m.end():]
    if text.startswith("Tuple("):
        items, rest = [], text[len("Tuple("):]
        while not rest.startswith(")"):
            item, rest = _parse(rest, depth + 1)
            items.append(item)
            if rest.startswith(", "):
                rest = rest[2:]
            elif not rest.startswith(")"):
                raise ValueError(f"not a tuple type: {text!r}")
        return types.Tuple(tuple(items)), rest[1:]
    m = _LITERAL.match(text)
    if m is not None:
        kind, value = m.groups()
        if kind == "bool" and value in ("True", "False"):
            return types.literal(value == "True"), text[m.end():]
        if kind == "int" and value not in ("True", "False"):
            return types.literal(int(value)), text[m.end():]
        raise ValueError(f"not a literal type: {text!r}")
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", text)
    if m is not None and m.group(0) in _named():
        return _named()[m.group(0)], text[m.end():]
    raise ValueError(f"not a type: {text!r}")
