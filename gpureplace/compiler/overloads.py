"""Numba-style ``@overload`` generators as the device meaning of a host callable.

``gpureplace.cuda.extending.overload(func)`` (numba-cuda's ``@overload(func, target="cuda")``)
registers a ``NumbaOverload`` as an override of ``func`` in a Context, so an overload is tracked
like any override: it shows in the dispatch report, a redefinition (the cell run again) replaces
it and recompiles exactly the kernels that called ``func``, and another Context can override it
again.  The compiler types a call through Numba's own overload template (the generator is called
with the argument types and returns the implementation, which compiles as a device function in
the calling kernel's Context); the simulator calls the generator with the values' types and runs
the implementation as simulated device code (``simulator/lang/overloads.py``), its names resolved
through the kernel's Context as the compiler resolves them.  What a user's generator reads (a
global flag, the implementation it returns by name) is a dependency of the code compiled with its
answer (``generator_reads``, below).  The disk cache finds an overload's implementation again in
another process by asking its generators again (``answers``, below).
"""

from __future__ import annotations

import dis
import functools
import re
import sys
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
# What a generator read: dependencies of the code compiled with its answer
#
# A generator chooses the implementation from what it reads when it is called -- a global flag
# (``impl_a if MODE == "a" else impl_b``), a module-level implementation by name, an attribute
# of one of the user's modules -- and Numba keeps its answer per typing context and argument
# types (the template's ``_impl_cache``).  So each function whose typing asked a user's
# generator (the call of the overloaded function, or of an ``overload_method`` /
# ``overload_attribute``) records what the generator read as reads of its own
# (``generator_reads``): the module-level names its code loads (and attributes of the user's
# modules read through them), and the implementation it returned where that stands under its
# name in its module, as a helper called by name is recorded.  A change to any of them is a
# redefinition of that function alone (in this process and for the disk cache), and the
# template's kept answers are dropped the next time it is asked (``_Watch``), so the
# recompile asks the generator again.  Library generators (Numba's, NumPy's) are not watched.

_UNSET = object()
_MISSING = object()
#: Nested code a generator runs itself (not the implementations it defines): comprehensions.
_RUN_INLINE = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})
#: Top-level packages whose modules a generator reads as library code (attributes not tracked).
_LIBRARY_PACKAGES = frozenset({"numba", "numpy", "llvmlite", "gpureplace", "IPython"})


@functools.lru_cache(maxsize=2048)
def _loaded_names(code):
    """``((name, attr, ...), ...)``: the global names ``code`` loads (and the comprehensions it
    runs load), each with the chain of attributes read from it straight after."""
    out, chain = [], None
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            if chain:
                out.append(tuple(chain))
            chain = [ins.argval]
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and chain is not None:
            chain.append(ins.argval)
        elif chain:
            out.append(tuple(chain))
            chain = None
    if chain:
        out.append(tuple(chain))
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType) and const.co_name in _RUN_INLINE:
            out.extend(_loaded_names(const))
    return tuple(dict.fromkeys(out))


def _library_module(module):
    name = getattr(module, "__name__", None) or ""
    top = name.split(".")[0]
    if top in _LIBRARY_PACKAGES or top in sys.stdlib_module_names:
        return True
    from ..errors import is_library_file
    path = getattr(module, "__file__", None)
    return not path or is_library_file(path)


def _module_of(namespace):
    """The module whose namespace is the dict ``namespace``, or None."""
    module = sys.modules.get(namespace.get("__name__", None) or "")
    return module if module is not None and vars(module) is namespace else None


def _generator_bindings(generator):
    """``[(module or None, namespace dict, name, value)]``: the module-level bindings that
    ``generator``'s code reads, as they are now (names its module does not define -- builtins
    -- left out; attributes only of the user's modules)."""
    namespace = generator.__globals__
    out = []
    for chain in _loaded_names(generator.__code__):
        value = namespace.get(chain[0], _MISSING)
        if value is _MISSING:
            continue
        out.append((_MISSING, namespace, chain[0], value))
        for attr in chain[1:]:
            if not isinstance(value, pytypes.ModuleType) or _library_module(value):
                break
            where = vars(value)
            owner, value = value, where.get(attr, _MISSING)
            if value is _MISSING:
                break
            out.append((owner, where, attr, value))
    return out


def _implementation_binding(impl, bindings):
    """``(module or None, namespace, name, impl)`` where the implementation ``impl`` stands
    under its name in its module -- unless the generator read it from a container (a table of
    implementations: a new definition of the name is not what it would return) -- or None."""
    if not isinstance(impl, pytypes.FunctionType) or "<" in impl.__qualname__ or \
            "." in impl.__qualname__:
        return None
    namespace = impl.__globals__
    if namespace.get(impl.__name__) is not impl:
        return None
    for _, _, _, value in bindings:
        held = value.values() if isinstance(value, dict) else \
            value if isinstance(value, (list, tuple)) else ()
        try:
            if any(item is impl for item in held):
                return None
        except Exception:            # (a user's container that fails being looked at)
            return None
    return (_MISSING, namespace, impl.__name__, impl)


class _Watch:
    """A user's generator whose template's kept answers hold only while what it read when it
    answered still means the same."""

    __slots__ = ("generator", "seen")

    def __init__(self, generator):
        self.generator = generator
        #: ``[[namespace, name, value, fingerprint]]`` read when the kept answers were made
        self.seen = None

    def revalidate(self, template):
        from ..tracking.fingerprint import fingerprint
        seen = self.seen
        if seen is None:
            return
        for entry in seen:
            now = entry[0].get(entry[1], _MISSING)
            if now is entry[2]:
                continue
            if now is not _MISSING:
                fp = fingerprint(now)
                if fp is not None and fp == entry[3]:
                    entry[2] = now          # (the same meaning: fast next time)
                    continue
            template._impl_cache.clear()    # (the class's dictionary, every typing context's)
            self.seen = None
            return

    def note(self, template, got):
        """``got`` (the template's answer: a dispatcher of the implementation, or None) was
        given to the function being compiled: remember what the generator read then, and tell
        the function (``generator_reads``)."""
        from ..tracking.fingerprint import fingerprint
        from .frontend import current_compiled
        impl = getattr(got[0], "py_func", None) if isinstance(got, tuple) and got else None
        if self.seen is None:
            self.seen = [[ns, name, value, fingerprint(value)]
                         for _, ns, name, value in _generator_bindings(self.generator)]
        if impl is not None:
            named = _implementation_binding(impl, [(None, e[0], e[1], e[2]) for e in self.seen])
            if named is not None and not any(e[0] is named[1] and e[1] == named[2]
                                             for e in self.seen):
                self.seen.append([named[1], named[2], impl, fingerprint(impl)])
        cf = current_compiled()
        if cf is not None:
            used = cf.__dict__.setdefault("overload_generators", {})
            impls = used.setdefault(template, [])
            if impl is not None and all(i is not impl for i in impls):
                impls.append(impl)


def _watch_of(template):
    """The ``_Watch`` of an overload template class (made once), or None for a library's
    generator."""
    watch = template.__dict__.get("_gpureplace_watch", _UNSET)
    if watch is _UNSET:
        from .overload_redefinitions import _library_file
        generator = getattr(template, "_overload_func", None)
        code = getattr(generator, "__code__", None)
        watch = _Watch(generator) if isinstance(generator, pytypes.FunctionType) and \
            code is not None and not _library_file(code.co_filename) else None
        type.__setattr__(template, "_gpureplace_watch", watch)
    return watch


def _install_watch():
    """Numba's ``_OverloadFunctionTemplate._get_impl`` (what every ``@overload`` template --
    function, method, attribute -- asks for its implementation), watched in gpureplace's
    typing contexts."""
    from numba.core.typing.templates import _OverloadFunctionTemplate
    numba_get_impl = _OverloadFunctionTemplate._get_impl
    if getattr(numba_get_impl, "gpureplace_watched", False):
        return

    def _get_impl(self, args, kws):
        template = type(self)
        watch = _watch_of(template) if getattr(self.context, "dispatch_context", None) \
            is not None else None
        if watch is None:
            return numba_get_impl(self, args, kws)
        from .resolve import active
        active()          # (a dependency is recorded: call_types.py keeps no answer of it)
        watch.revalidate(template)
        got = numba_get_impl(self, args, kws)
        watch.note(template, got)
        return got

    _get_impl.gpureplace_watched = True
    _get_impl.__wrapped__ = numba_get_impl
    _OverloadFunctionTemplate._get_impl = _get_impl


def generator_reads(cf, reads):
    """``reads`` (those of compiled function ``cf``) with what the user's generators whose
    answers its typing used read (``_Watch.note``): the module-level bindings their code
    loads, the implementation each returned where it stands under its name, and for an
    ``overload_method`` / ``overload_attribute`` the template it came from
    (``overload_redefinitions.method_marker``).  Each is recorded at the line of the call."""
    used = cf.__dict__.pop("overload_generators", None)
    if not used:
        return reads
    from ..tracking.contents import arrays_in
    from ..tracking.fingerprint import fingerprint
    from .overload_redefinitions import method_marker
    from .records import GlobalRead
    have = {(r.kind, r.namespace, r.name) for r in reads}
    out = list(reads)
    lines = {}
    for res in cf.resolutions:
        if res.line:
            lines.setdefault(id(res.host), res.line)
    own = cf.pyfunc.__globals__
    for template, impls in used.items():
        watch = _watch_of(template)
        line = lines.get(id(getattr(template, "key", None)), 0)
        found = _generator_bindings(watch.generator)
        for impl in impls:
            named = _implementation_binding(impl, found)
            if named is not None:
                found.append(named)
        for owner, namespace, name, value in found:
            if arrays_in(value) and not hasattr(value, "__cuda_array_interface__"):
                # (the code does not read it: a record of it would put a copy of it in the
                # kernel's module, as for the arrays the code reads)
                continue
            if namespace is own:
                rec = GlobalRead("global", cf.pyfunc.__module__, name, value, line, None,
                                 fingerprint(value))
            else:
                owner = _module_of(namespace) if owner is _MISSING else owner
                if owner is None:
                    continue          # (a namespace no module holds: nothing to find it by)
                rec = GlobalRead("attr", owner.__name__, f"{owner.__name__}.{name}", value,
                                 line, owner, fingerprint(value))
            if (rec.kind, rec.namespace, rec.name) not in have:
                have.add((rec.kind, rec.namespace, rec.name))
                out.append(rec)
        marker = method_marker(watch.generator, line)
        if marker is not None and (marker.kind, marker.namespace, marker.name) not in have:
            have.add((marker.kind, marker.namespace, marker.name))
            out.append(marker)
    return out


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


_install_watch()
