"""A user's ``numba.extending.overload`` defined again (its notebook cell run again): Numba adds
the new template after the old one, which would go on answering, for kernels compiled before and
after alike.  ``latest_overloads`` is what the typing context keeps of a function's templates
(``typing_context.GPUTypingContext``); ``note_overload_redefinitions`` tells redefinition tracking which
functions were defined again, so that the kernels that read them recompile.  An
``overload_method`` / ``overload_attribute`` defined again (for the same type and name) is told
the same way: the generators it replaces are the functions redefined, and the code that used one
recorded it (``method_marker``).  Imports nothing heavy: Numba's registry is read only once
something was compiled."""

from __future__ import annotations

import functools
import sys
import threading

from ..errors import is_library_file


def overload_site(template):
    """Where a user's ``@overload`` template was defined: (module, qualified name, target) of
    the function that made it, and that function's code object -- or None for any other
    template (library code registers one function many times on purpose, from factories)."""
    made_by = getattr(template, "_overload_func", None)
    code = getattr(made_by, "__code__", None)
    if code is None or _library_file(code.co_filename):
        return None
    metadata = getattr(template, "metadata", None) or {}
    return (getattr(made_by, "__module__", None), getattr(made_by, "__qualname__", None),
            metadata.get("target")), code


_library_file = functools.lru_cache(maxsize=4096)(is_library_file)     # (once a file)


def latest_overloads(templates):
    """``templates`` less each user's ``@overload`` template that a later definition of the
    same function (same module, qualified name and target; new code: its cell run again)
    replaces.  Templates made by one definition (the same code, as a factory in a loop makes
    them) all stay."""
    last = {}
    for template in templates:
        site = overload_site(template)
        if site is not None:
            last[site[0]] = site[1]
    return [t for t in templates
            if (site := overload_site(t)) is None or last[site[0]] is site[1]]


_registrations_seen = [0]
_attributes_seen = [0]
_registrations_lock = threading.Lock()


def superseded_overloads():
    """The functions whose ``numba.extending.overload`` was defined again (a cell run again)
    since the last call, in Numba's registry of global typings (where generic and "cuda"
    overloads reach our kernels): what the cell hook and ``gpureplace.refresh()`` treat as a
    redefinition of those functions' device meaning -- and the generators of the
    ``overload_method`` / ``overload_attribute`` templates defined again since
    (``superseded_methods``).  Costs a length comparison when nothing was registered."""
    from numba.core.typing.templates import builtin_registry
    entries = builtin_registry.globals
    methods = superseded_methods()
    with _registrations_lock:
        start, _registrations_seen[0] = _registrations_seen[0], len(entries)
        if start == len(entries):
            return methods
        sites, again = {}, []
        for i, (value, ty) in enumerate(entries):
            for template in getattr(ty, "templates", ()):
                site = overload_site(template)
                if site is None:
                    continue
                where, code = site
                seen = sites.setdefault(id(value), {})
                if i >= start and where in seen and seen[where] is not code and \
                        all(v is not value for v in again):
                    again.append(value)
                seen[where] = code
        return again + [m for m in methods if all(m is not v for v in again)]


def method_site(template):
    """``(type, attribute name, target)`` of a user's ``overload_method`` /
    ``overload_attribute`` template (what a later definition for the same type and name
    replaces: Numba lowers the name with the latest one), or None for any other template, and
    where its key is no dictionary key."""
    attr = getattr(template, "_attr", None)
    if not isinstance(attr, str) or overload_site(template) is None:
        return None
    metadata = getattr(template, "metadata", None) or {}
    where = template.key, attr, metadata.get("target")
    try:
        hash(where)
    except TypeError:
        return None
    return where


def superseded_methods():
    """The generators of the user's ``overload_method`` / ``overload_attribute`` templates
    that a template registered since the last call replaces: one for the same type and name
    from other code (its cell run again, or another definition).  Templates one definition
    made (the same code, as a factory in a loop makes them) replace none."""
    from numba.core.typing.templates import builtin_registry
    entries = builtin_registry.attributes
    with _registrations_lock:
        start, _attributes_seen[0] = _attributes_seen[0], len(entries)
        if start == len(entries):
            return []
        sites, again = {}, []
        for i, template in enumerate(list(entries)):
            where = method_site(template)
            if where is None:
                continue
            generator = template._overload_func
            earlier = sites.setdefault(where, [])
            if i >= start and any(g.__code__ is not generator.__code__ for g in earlier):
                again.extend(g for g in earlier
                             if g is not generator and all(g is not a for a in again))
            earlier.append(generator)
        return again


_methods = {"size": -1, "by_generator": {}}


def method_templates(generator):
    """The user's ``overload_method`` / ``overload_attribute`` templates whose generator is
    ``generator`` (Numba types a method's call through an ``@overload`` of its generator)."""
    from numba.core.typing.templates import builtin_registry
    entries = builtin_registry.attributes
    with _registrations_lock:
        if _methods["size"] != len(entries):
            found = {}
            for template in list(entries):
                if method_site(template) is not None:
                    found.setdefault(id(template._overload_func), []).append(template)
            _methods.update(size=len(entries), by_generator=found)
        return [t for t in _methods["by_generator"].get(id(generator), ())
                if t._overload_func is generator]


class _MethodGenerators:
    """Holds each ``overload_method`` / ``overload_attribute`` generator that compiled code
    used, under a name of its own (``method_marker``): never rebound, so the record of it
    changes only when ``superseded_methods`` reports the generator replaced."""


_method_generators = _MethodGenerators()
_method_names = {}          # id(generator) -> its name in _method_generators


def method_marker(generator, line):
    """A read (``records.GlobalRead``) recording that code used the ``overload_method`` /
    ``overload_attribute`` whose generator is ``generator`` -- stale once a later definition
    for the same type and name replaces it (``tracking.deps.overloads_redefined``) -- or None
    for a generator of no such template.  It has no fingerprint: code that used one is not
    kept on disk (what a method's name means is not recorded there)."""
    templates = method_templates(generator)
    if not templates:
        return None
    from .records import GlobalRead
    with _registrations_lock:
        name = _method_names.get(id(generator))
        if name is None or vars(_method_generators).get(name.rsplit(".", 1)[1]) \
                is not generator:
            key = templates[0].key
            shown = getattr(key, "__name__", None) or str(key).replace(".", "_")
            name = f"{shown}.{templates[0]._attr}#{len(_method_names)}"
            _method_names[id(generator)] = name
            vars(_method_generators)[name.rsplit(".", 1)[1]] = generator
    return GlobalRead("attr", "overload_method", name, generator, line, _method_generators,
                      None)


def note_overload_redefinitions():
    """``superseded_overloads`` told to redefinition tracking (the world moves if any); the
    functions, or none while nothing was compiled in this process (cheap to call: the cell
    hook and ``gpureplace.refresh()`` do at every turn)."""
    if "gpureplace.compiler.target" not in sys.modules:
        return []
    from ..tracking import deps
    functions = superseded_overloads()
    deps.overloads_redefined(functions)
    return functions


_index = {"size": -1, "by_function": {}}


def overloads_for_kernels(func):
    """The templates of ``numba.extending.overload(func, ...)`` that kernels use in place of
    ``func``'s own body: those whose target reaches gpureplace's (generic, CUDA), the latest
    definition of each user's overload only (``latest_overloads``).  The simulator runs them as
    the compiler does; none for a function nobody overloaded (a dictionary lookup)."""
    from numba.core.typing.templates import builtin_registry
    entries = builtin_registry.globals
    with _registrations_lock:
        if _index["size"] != len(entries):
            by_function = {}
            for value, ty in entries:
                for template in getattr(ty, "templates", ()):
                    if getattr(template, "_overload_func", None) is not None:
                        by_function.setdefault(id(value), (value, []))[1].append(template)
            _index.update(size=len(entries), by_function=by_function)
        hit = _index["by_function"].get(id(func))
    if hit is None or hit[0] is not func:
        return []
    from numba.core.target_extension import target_registry

    from .target import GPUReplaceTarget
    out = []
    for template in latest_overloads(hit[1]):
        target = target_registry.get((getattr(template, "metadata", None) or {})
                                     .get("target", "generic"))
        if target is not None and issubclass(GPUReplaceTarget, target):
            out.append(template)
    return out


_users = {"size": -1, "hosts": {}}


def users_overloaded():
    """``{id(function): function}``: the functions a user's ``numba.extending.overload`` (for
    any target) was written for, in Numba's registry -- the disk cache records what their
    overloads answered (kernel_cache.py).  Listed again only when the registry grew."""
    from numba.core.typing.templates import builtin_registry
    entries = builtin_registry.globals
    with _registrations_lock:
        if _users["size"] != len(entries):
            hosts = {}
            for value, ty in entries:
                if any(overload_site(t) is not None for t in getattr(ty, "templates", ())):
                    hosts[id(value)] = value
            _users.update(size=len(entries), hosts=hosts)
        return _users["hosts"]
