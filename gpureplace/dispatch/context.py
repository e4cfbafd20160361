"""Contexts: override tables that decide what a host callable means on the device.

A ``Context`` maps host callables (``math.sin``, ``np.exp``, ``abs``, a user's function) to device
replacements.  Lookup walks the stack: the nearest context that overrides a callable wins, and a
context without an override falls back to its parent, down to the built-in table that maps math,
NumPy ufuncs and builtins to libdevice and NVVM intrinsics.

Every table change bumps ``Context.version`` and the global world counter, so compiled code that
resolved through the table can be revalidated.

A context's name is its identity where it is defined: creating a context with the name of a live
one that the same module's top-level code created (a notebook cell run again, a module reloaded)
defines that context again, in place -- the same object, its overrides, parent, fast-math flag and
options replaced -- so every kernel that holds it (``cuda.jit(context=ctx)``, ``with_context``, ``%%cuda
--context``, ``%config GPUReplace.context``) recompiles with the new definition at its next launch.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import sys
import threading
import warnings
import weakref

from ..config import settings
from ..tracking import world
from ..tracking.fingerprint import fingerprint
from ..tracking.pickled import Defined, digesting, dumps, pickled_digest
from ..tracking.pickled import digest as parts_digest
from ..tracking.names import qualified_name
from .checks import (check_signatures, normalize_types, refuse_options, refuse_uncallable,
                     same_meaning)

_MISSING = object()
_lock = threading.RLock()
_ids = itertools.count()
_named = weakref.WeakValueDictionary()     # name -> Context (for %%cuda --context NAME)
# (module, name, depth) -> the Context that module's top-level code created (see _redefined)
_defined_at = weakref.WeakValueDictionary()


def host_key(obj):
    """The key under which a host callable is looked up: the object itself where hashable."""
    try:
        hash(obj)
    except TypeError:
        return ("id", id(obj))
    return obj


def _depth(name, parent):
    """How many contexts called ``name`` the new context is stacked on (``parent``'s stack)."""
    if not isinstance(parent, Context):
        return 0
    return sum(1 for layer in parent.stack() if layer.name == name)


def _redefined(cls, name, parent, module, top_level):
    """The live context that ``Context(name, parent, ...)``, called from code of ``module``
    (its top-level code: ``top_level``), defines again, or None for a new one.  Only a context
    of the same class that the same module's top-level code created, at the same depth (stacked
    on as many contexts of its name), is defined again (a notebook's cells share ``__main__``; a
    reloaded module runs in its old namespace): contexts a function makes, each time it runs,
    are new ones, and neither they nor a layer stacked on a context of the same name
    (``Context(name, parent=Context.named(name))``) are taken for it when its cell runs again.
    A library's context of that name and the built-in ones stay.  A new context taking the name
    of another module's says so: kernels holding that one keep it, and ``Context.named`` now
    finds the new one."""
    stacked_on = parent.stack() if isinstance(parent, Context) else ()
    with _lock:
        old = _named.get(name)
        mine = _defined_at.get((module, name, _depth(name, parent))) \
            if top_level and module is not None else None
    if mine is not None and type(mine) is cls and mine not in stacked_on and \
            getattr(mine, "_frozen_args", None) is None:
        return mine
    if old is None or type(old) is not cls or getattr(old, "_frozen_args", None) is not None:
        return None
    if old not in stacked_on and getattr(old, "_defined_in", None) != module:
        warnings.warn(f"Context({name!r}) is a new context: the context of that name that "
                      f"{getattr(old, '_defined_in', None) or 'other code'} created stays as it "
                      f"is, for the kernels that hold it; Context.named({name!r}) and "
                      f"%%cuda --context {name} now mean the new one", stacklevel=3)
    return None


class Override:
    """One entry of a context's table: ``host`` replaced by ``impl`` on the device."""

    __slots__ = ("host", "impl", "context", "types", "serial", "digest", "home")

    def __init__(self, host, impl, context, types=None, digest=None):
        self.host = host
        self.impl = impl
        self.context = context
        self.types = types
        self.serial = next(_ids)
        self.digest = digest          # of the pickled implementation, once pickled
        #: (module name, name) where the implementation stands under its name (a function of
        #: a notebook or a module): the override follows that name (``current_impl``)
        # (the built-in table's implementations are gpureplace's own: no name to follow)
        self.home = None if context is not None and context.parent is None else _home_of(impl)

    def current_impl(self):
        """What the implementation's name holds now, where that is a new definition of it (its
        cell run again without ``override(...)``): else None."""
        if self.home is None:
            return None
        module = sys.modules.get(self.home[0])
        now = getattr(module, self.home[1], None) if module is not None else None
        if now is None or now is self.impl or _home_of(now) != self.home:
            return None
        return now

    def as_now(self):
        """This override with the implementation its name holds now (``current_impl``), as an
        entry of no table; itself where that is still its own.  What pickles and digests see:
        the table follows a new definition only at the next lookup
        (``Context._follow_implementations``), which moves the world."""
        now = self.current_impl()
        return self if now is None else Override(self.host, now, self.context, self.types)

    def definition_digest(self):
        """Digest of the implementation as pickled now (cloudpickle: by value, with the globals
        it reads, where it cannot be imported by name; a module's override in the default
        context by reference: its name and code, see ``Context.__reduce__``), remembered as
        ``digest``: what another process compares to tell an unchanged override from a
        redefined one."""
        if self.context is default_context and not _made_by_main(self.impl):
            self.digest = parts_digest("by reference", qualified_name(self.impl),
                                       fingerprint(self.impl))
        else:
            self.digest = pickled_digest(self.impl)
        return self.digest

    def match_key(self):
        """What identifies this override across processes: the host's qualified name (a host
        defined in a notebook arrives as a new object with every pickle) and the types."""
        return (repr(qualified_name(self.host)), self.types)

    def __repr__(self):
        return (f"<Override {qualified_name(self.host)} -> {qualified_name(self.impl)} "
                f"in context {self.context.name!r}>")


class Context:
    """A named override table with an optional parent.

    ``Context(name, parent=default_context, fastmath=False)``; called again with the
    name of a live context that the same module created (a cell run again), it defines that
    context again and returns it (see ``_redefined``).
    """

    def __new__(cls, name, parent=_MISSING, fastmath=False, _register=True, **options):
        if options and _register:
            refuse_options(name, options)
        # (frame 1: the code that called Context(...); type.__call__ has no Python frame)
        caller = sys._getframe(1)
        module = caller.f_globals.get("__name__")
        top_level = caller.f_code.co_name == "<module>"
        again = _redefined(cls, str(name), parent, module, top_level) if _register else None
        if again is not None:
            return again                   # __init__ then gives it its new definition
        self = super().__new__(cls)
        self._defined_in = module
        if _register and top_level and module is not None:
            with _lock:
                _defined_at[(module, str(name), _depth(str(name), parent))] = self
        return self

    def __init__(self, name, parent=_MISSING, fastmath=False, _register=True, **options):
        if parent is _MISSING:
            parent = default_context
        with _lock:
            again = "_table" in self.__dict__  # (defined again: see __new__ and _redefined)
            self.name = str(name)
            if not again:
                self._parent = None
            self.parent = parent
            self.fastmath = bool(fastmath)
            self.options = dict(options)
            # (defined again: the overrides it had, which the new definition may define again
            # the same way -- then kept, so that nothing compiled from them goes stale)
            self._before = (self._table, self._typed) if again else ({}, {})
            self._table = {}            # host key -> untyped Override
            self._typed = {}            # host key -> {argument types: Override}
            if again:
                self._bump()            # what was compiled in it revalidates, and recompiles
            else:
                self.version = 0
                self.uid = next(_ids)
            if _register:
                _named[self.name] = self

    @staticmethod
    def named(name):
        """The most recently created context called ``name``."""
        try:
            return _named[name]
        except KeyError:
            raise KeyError(f"no context is called {name!r}; known: "
                           f"{', '.join(sorted(_named)) or 'none'}") from None

    @property
    def parent(self):
        return self._parent

    @parent.setter
    def parent(self, parent):
        if parent is not None and not isinstance(parent, Context):
            raise TypeError(f"Context parent must be a Context or None, got {parent!r}")
        layer = parent
        while layer is not None:
            if layer is self:
                raise ValueError(f"context {self.name!r} cannot have parent {parent.name!r}: "
                                 f"{parent.name!r} already descends from {self.name!r} "
                                 f"(a context cycle)")
            layer = layer._parent
        if getattr(self, "_table", None) is not None and parent is not self._parent:
            self._bump()
        self._parent = parent

    # -- the table --------------------------------------------------------------------------------
    def override(self, host, impl=None, *, types=None):
        """Replace ``host`` by ``impl`` on the device in this context (usable as a decorator).

        ``types``: a tuple of argument types (numba types, NumPy types or their names) for which
        this replacement applies; calls with other argument types fall back to the next layer.
        """
        if not callable(host):
            raise TypeError(f"override(): {host!r} is not callable, so there is nothing to override")
        self._refuse_builtin("override")
        argtypes = None if types is None else normalize_types(host, types)

        def register(fn):
            if not callable(fn):
                raise TypeError(f"override({qualified_name(host)}): the replacement {fn!r} is not "
                                f"callable")
            refuse_uncallable(host, fn)
            check_signatures(host, fn, argtypes)
            if fn is host:
                raise ValueError(f"override({qualified_name(host)}): a function cannot override "
                                 f"itself")
            with _lock:
                self._insert(Override(host, fn, self, argtypes))
            return fn

        return register if impl is None else register(impl)

    def remove_override(self, host, *, types=None):
        """Remove the override of ``host`` (the one for ``types``, or the untyped one); True if
        there was one, else a warning says what this context has for ``host``."""
        self._refuse_builtin("remove_override")
        key = host_key(host)
        with _lock:
            if types is None:
                removed = self._table.get(key)
            else:
                removed = self._typed.get(key, {}).get(normalize_types(host, types))
            if removed is not None:
                self._remove(removed)
                return True
            typed = sorted(self._typed.get(key, {}), key=repr)
            untyped = self._table.get(key) is not None
        has = "; it has " + " and ".join(
            (["an untyped one"] if untyped else [])
            + ([f"typed ones for {', '.join(str(t) for t in typed)}"] if typed else [])) \
            if untyped or typed else ""
        which = "untyped " if types is None else f"{normalize_types(host, types)} "
        warnings.warn(f"remove_override: context {self.name!r} has no {which}override of "
                      f"{qualified_name(host)}, nothing removed{has}", stacklevel=2)
        return False

    def _refuse_builtin(self, what):
        if self is builtin_context:
            raise TypeError(f"builtin_context.{what}(): the built-in table is gpureplace's own "
                            f"(every process has it as it ships); override in the default "
                            f"context (gpureplace.override) or in a Context of your own")

    def candidates(self, host, start=None):
        """Overrides that may apply to ``host`` walking up from ``start``, in priority order:
        each layer's typed overrides, then its untyped one (which ends the walk)."""
        key = host_key(host)
        out = []
        layer = self if start is None else start
        while layer is not None:
            at = layer._follow_redefinition(host, key)
            layer._follow_implementations(at)
            typed = layer._typed.get(at)
            if typed:
                out.extend(typed.values())
            hit = layer._table.get(at)
            if hit is not None:
                out.append(hit)
                break
            layer = layer.parent
        return tuple(out)

    def _bump(self):
        self.version += 1
        world.bump()

    def lookup(self, host, start=None):
        """``Override`` for ``host`` found walking up from ``start`` (default: this context), or None."""
        key = host_key(host)
        layer = self if start is None else start
        while layer is not None:
            at = layer._follow_redefinition(host, key)
            layer._follow_implementations(at)
            hit = layer._table.get(at)
            if hit is not None:
                return hit
            layer = layer.parent
        return None

    def _follow_implementations(self, key):
        """Where the implementation of this layer's override of ``key`` was defined again under
        its name (the cell defining ``my_sin`` run again, ``override(math.sin, my_sin)`` not),
        the override takes the new definition: an override's implementation is its name, as
        a helper a kernel calls is.  (Defined again the same way, nothing changes: ``_insert``.)
        The compiled code that used it reads that name (compiler/frontend.py), so the cell
        hook finds the change."""
        if self is builtin_context:
            return
        entries = [self._table.get(key)] + list(self._typed.get(key, {}).values())
        for ovr in entries:
            now = None if ovr is None else ovr.current_impl()
            if now is not None:
                with _lock:
                    self._insert(Override(ovr.host, now, self, ovr.types))

    def _follow_redefinition(self, host, key):
        """Where this layer has no override of ``host`` but has one of an earlier definition of
        the same name (the cell that defines the overridden helper run again), the override
        moves to ``host``: it was given for the notebook's ``activation``, whichever object
        the name holds now.  So too where ``host`` arrived by value (a Dask worker: the
        kernel's global and the override's host are two unpickled objects of one name).
        Returns the key to look ``host`` up by: ``key``, or, for a copy of the definition that
        stands under its name (a kernel pickled by value to a "spawn" worker, whose main
        module defined and overrode the function too), that definition's, whose override it
        shares while both are in use."""
        if key in self._table or key in self._typed or self is builtin_context or \
                not (self._table or self._typed):
            return key
        fn = getattr(host, "py_func", host)
        if not inspect.isfunction(fn) or "<" in fn.__qualname__:
            return key
        if not (_stands_under_its_name(host) or _arrived_by_value(fn)):
            return self._same_definition_key(fn, key)
        name = (fn.__module__, fn.__qualname__)
        with _lock:
            for ovr in self.overrides():
                old = getattr(ovr.host, "py_func", ovr.host)
                if ovr.host is not host and inspect.isfunction(old) and \
                        (old.__module__, old.__qualname__) == name:
                    old_key = host_key(ovr.host)
                    if old_key in self._table:
                        self._table[key] = self._table.pop(old_key)
                        self._table[key].host = host
                    if old_key in self._typed:
                        self._typed[key] = self._typed.pop(old_key)
                        for each in self._typed[key].values():
                            each.host = host
                    return key
        return key

    def _same_definition_key(self, fn, key):
        """The key of this layer's override whose host is another object of the definition
        ``fn`` is (its name, equal code), where the module's global of that name is such an
        object too: a copy unpickled by value (a kernel sent to a "spawn" worker, whose main
        module defines the function as well; the override's host may be that module's, or a
        copy of its own).  Else ``key``."""
        if _same_definition_under_its_name(fn) is None:
            return key
        name = (fn.__module__, fn.__qualname__)
        with _lock:
            entries = self.overrides()
        for ovr in entries:
            old = getattr(ovr.host, "py_func", ovr.host)
            if inspect.isfunction(old) and (old.__module__, old.__qualname__) == name and \
                    old.__code__ == fn.__code__:
                return host_key(ovr.host)
        return key

    def stack(self):
        """This context and its ancestors, nearest first."""
        out, layer = [], self
        while layer is not None:
            out.append(layer)
            layer = layer.parent
        return out

    def overrides(self):
        """Every ``Override`` defined in this context itself (not its parents)."""
        out = list(self._table.values())
        for typed in self._typed.values():
            out.extend(typed.values())
        return out

    def _overrides_now(self):
        """``overrides()`` with each implementation as its name defines it now
        (``Override.as_now``): what a pickle of this context carries and its digest is made
        of, so that an implementation defined again (its cell run, ``override(...)`` not) goes
        to other processes and changes Dask's token before any lookup here follows it; the
        table itself is left as it is."""
        return [ovr.as_now() for ovr in self.overrides()]

    def preload(self, table, typed=None):
        """Fill this context from ``{host: implementation}`` (and ``typed``: ``{host: {argument
        types: implementation}}``) without bumping the world: for the built-in table, filled at
        import before anything compiled (``compiler/builtins.py``)."""
        with _lock:
            for host, impl in table.items():
                self._table[host_key(host)] = Override(host, impl, self)
            for host, by_types in (typed or {}).items():
                for argtypes, impl in by_types.items():
                    self._typed.setdefault(host_key(host), {})[tuple(argtypes)] = Override(
                        host, impl, self, tuple(argtypes))

    def fingerprint(self):
        """Hash of the context stack: names, fast-math flags, options and every override (None
        when an override's implementation cannot be fingerprinted).  Part of a kernel's disk
        cache key; a kernel loaded from disk is stale when it changes."""
        h = hashlib.blake2b(digest_size=16)
        for layer in self.stack():
            h.update(layer._header())
            if layer is builtin_context:
                continue       # the built-in table is part of the gpureplace version
            by_host = sorted(layer.overrides(),
                             key=lambda o: (repr(qualified_name(o.host)), repr(o.types)))
            for ovr in by_host:
                fp = fingerprint(ovr.impl)
                if fp is None:
                    return None
                h.update(f"{qualified_name(ovr.host)}->{fp}|{ovr.types!r};".encode())
        return h.hexdigest()

    def _header(self):
        """What a digest of a context stack holds of this layer beside its overrides."""
        return f"{self.name}|{self.fastmath}|{sorted(self.options.items())!r};".encode()

    # -- pickling (Dask workers, multiprocessing) --------------------------------------------
    def __reduce__(self):
        """Pickled by what defines it: the built-in table as a reference (every process has
        it); any other context as its name, parent, fast-math flag, options and its own
        overrides, each with its implementation as its name defines it now
        (``_overrides_now``).  Unpickled where a context of that name exists, that context is
        brought up to date -- overrides whose pickled implementation is unchanged are kept, so
        what was compiled with them stays valid; a changed or removed one moves the world, as a
        redefinition does -- else one is made."""
        if self is builtin_context:
            return (_builtin, ())
        if digesting():
            return (Defined, (self.definition_digest(),))
        frozen = getattr(self, "_frozen_args", None)
        if frozen is not None:             # a copy as an older pickle had it: that pickle
            return (_rebuild_context, frozen)
        if not getattr(self, "_received", False):
            self._sent = True              # (unpickled here again: this live context, as it is)
        mine = self._overrides_now()
        # Every override travels.  The default context's other process keeps the overrides it
        # has besides (``partial``); there a module's override goes by reference only -- its
        # module's name and the function's -- so unpickling imports the module, whose own
        # ``gpureplace.override(...)`` registers the entry that ``_adopt`` then keeps (where no
        # kernel's global may name the module), and neither the module's data nor its code
        # rides along with every kernel, which may not even use it.  A notebook's
        # implementation, and any of a named context's, goes by value, with what it reads of
        # a user's module (tracking/pickled.py)
        partial = self is default_context
        by_value = [o.impl for o in mine if not partial or _made_by_main(o.impl)]
        entries = [(o.host, o.impl, o.types) for o in mine]
        try:
            table = dumps(entries, readers=by_value)
        except Exception as exc:
            raise _unpicklable_override(self, mine, by_value, exc) from exc
        return (_rebuild_context, (self.name, self.parent, self.fastmath, dict(self.options),
                                   table, [o.definition_digest() for o in mine], partial))

    def definition_digest(self):
        """Digest of this context's stack as pickled (names, flags, options, every override's
        pickled implementation): part of the Dask token of a kernel compiled in it."""
        h = hashlib.blake2b(digest_size=16)
        for layer in self.stack():
            h.update(layer._header())
            if layer is builtin_context:
                continue
            # (by the key's text: an untyped override's types are None, and Numba's types
            # of different kinds do not order)
            for ovr in sorted(layer._overrides_now(), key=lambda o: repr(o.match_key())):
                h.update(f"{ovr.match_key()!r}->{ovr.definition_digest()};".encode())
        return h.hexdigest()

    def __dask_tokenize__(self):
        return ("gpureplace.Context", self.definition_digest())

    def _adopt(self, parent, fastmath, options, overrides, partial=False):
        """Bring this context to the pickled definition (see ``__reduce__``); ``partial``: the
        pickle is the default context's, and the overrides this process has besides (a module
        imported here registered them) stay -- but not one an earlier pickle brought that this
        one lacks: the sending process removed it since (and one of this process's own that
        it had replaced comes back)."""
        with _lock:
            brought = self.__dict__.setdefault("_brought_by_pickles", set())
            displaced = self.__dict__.setdefault("_displaced_by_pickles", {})
            if parent is not self._parent:
                self.parent = parent
            if bool(fastmath) != self.fastmath or dict(options) != self.options:
                self.fastmath, self.options = bool(fastmath), dict(options)
                self._bump()
            mine = {o.match_key(): o for o in self.overrides()}
            arrived = set()
            for host, impl, argtypes, digest in overrides:
                ovr = Override(host, impl, self, argtypes, digest)
                key = ovr.match_key()
                arrived.add(key)
                own = key not in brought
                brought.add(key)
                have = mine.get(key)
                if have is not None and (have.digest or have.definition_digest()) == digest:
                    # unchanged -- as received before, or as a module imported here registered
                    # it (unpickling imports that module): compiled code stays valid
                    continue
                if have is not None:
                    if partial and own:
                        displaced[key] = have
                    self._remove(have)
                self._insert(ovr)
            for key, have in mine.items():
                if key not in arrived and (not partial or key in brought):
                    self._remove(have)
                    brought.discard(key)
                    if key in displaced:
                        self._insert(displaced.pop(key))

    def _is_as_pickled(self, parent, fastmath, options, overrides):
        """Whether the pickle's definition (see ``_rebuild_context``) is this context's now."""
        if parent is not self._parent or bool(fastmath) != self.fastmath or \
                dict(options) != self.options:
            return False
        now = {o.match_key(): o.definition_digest() for o in self._overrides_now()}
        then = {Override(host, impl, self, argtypes, digest).match_key(): digest
                for host, impl, argtypes, digest in overrides}
        return now == then

    def _insert(self, ovr):
        hkey = host_key(ovr.host)
        if ovr.types is None:
            table, key, before = self._table, hkey, self._before[0]
        else:
            table, key = self._typed.setdefault(hkey, {}), ovr.types
            before = self._before[1].get(hkey, {})
        old = table.get(key) or before.pop(key, None)
        if old is not None and same_meaning(old.impl, ovr.impl):
            # the same override defined again (its cell run again, or its context's): the
            # entry takes the new objects and means what it meant, so nothing compiled from it
            # goes stale (as a helper defined again the same way invalidates nothing)
            old.host, old.impl, old.digest = ovr.host, ovr.impl, None
            table[key] = old
            return
        table[key] = ovr
        self._bump()

    def _remove(self, ovr):
        key = host_key(ovr.host)
        if ovr.types is None:
            self._table.pop(key, None)
        else:
            self._typed.get(key, {}).pop(ovr.types, None)
        self._bump()

    @property
    def effective_fastmath(self):
        return any(layer.fastmath for layer in self.stack())

    def __repr__(self):
        parent = self.parent.name if self.parent else None
        return f"<Context {self.name!r} parent={parent!r} overrides={len(self.overrides())}>"


def _home_of(impl):
    """(module name, name) of a function (or ``cuda.jit`` function) defined at the top level of
    its module and bound there under its name -- or about to be: a decorator
    (``@ctx.override(math.sin)``) sees the function before its name is bound, and a function
    whose globals are its module's namespace was defined there; None for anything else (a
    lambda, a closure, a method, a builtin, an object, a function of an ``exec`` namespace)."""
    fn = getattr(impl, "py_func", impl)
    if not inspect.isfunction(fn) or "." in fn.__qualname__ or "<" in fn.__qualname__:
        return None
    if _stands_under_its_name(impl):
        return (fn.__module__, fn.__qualname__)
    module = sys.modules.get(fn.__module__)
    if module is None or fn.__globals__ is not getattr(module, "__dict__", None):
        return None
    # Defined in the module but not (yet) under its name: a decorator's function, whose name
    # is unbound or still holds its previous definition (the cell run again).  A name bound
    # to something else (a wrapper made of it) is not this function's to follow.
    now = getattr(module, fn.__qualname__, None)
    now_fn = getattr(now, "py_func", now)
    if now is not None and not (inspect.isfunction(now_fn) and
                                now_fn.__qualname__ == fn.__qualname__ and
                                now_fn.__globals__ is fn.__globals__):
        return None
    return (fn.__module__, fn.__qualname__)


def _stands_under_its_name(obj):
    """Whether ``obj`` is what its module's global of its name holds now."""
    fn = getattr(obj, "py_func", obj)
    module = sys.modules.get(fn.__module__)
    return module is not None and "." not in fn.__qualname__ and \
        getattr(module, fn.__qualname__, None) is obj


def _same_definition_under_its_name(fn):
    """The function its module's global of its name holds, where that is another object of
    the same definition as ``fn`` (equal code: a copy unpickled by value in a process whose own
    main module defines it too), else None."""
    module = sys.modules.get(fn.__module__)
    named = getattr(module, fn.__qualname__, None) if module is not None else None
    named_fn = getattr(named, "py_func", named)
    if named is None or named_fn is fn or not inspect.isfunction(named_fn):
        return None
    return named if named_fn.__code__ == fn.__code__ else None


def _arrived_by_value(fn):
    """Whether ``fn`` is a function no module of this process holds under its name (a
    notebook's, unpickled by value on a Dask worker: the kernel's global and an override's host
    arrive as two objects of one name)."""
    module = sys.modules.get(fn.__module__)
    return module is None or getattr(module, fn.__qualname__, None) is None


#: The built-in table (math, NumPy ufuncs, builtins -> libdevice / NVVM); filled by compiler.builtins.
builtin_context = Context("builtin", parent=None)
#: The context kernels compile in unless told otherwise; ``gpureplace.override`` writes here.
default_context = Context("default", parent=builtin_context)


#: Fast math: f32 math maps to libdevice's __nv_fast_* functions (tanh to tanh.approx.f32),
#: single-precision denormals flush to zero in every function (backend.flush_denormals),
#: division and square root are approximate, and LLVM's fast-math flags are on.
fastmath_context = Context("fastmath", parent=default_context, fastmath=True)


def _builtin():
    return builtin_context


def _made_by_main(impl):
    """Whether ``impl`` comes from the main program, a notebook or code with no module file
    (another process cannot import it: it travels by value)."""
    import sys
    name = getattr(impl, "__module__", None)
    mod = sys.modules.get(name) if name else None
    return mod is None or name == "__main__" or getattr(mod, "__file__", None) is None


def _unpicklable_override(ctx, overrides, by_value, exc):
    """The TypeError for a context whose overrides do not pickle: it names the first override
    that does not, alone, and what it is made of."""
    for ovr in overrides:
        try:
            dumps([(ovr.host, ovr.impl, ovr.types)],
                  readers=[ovr.impl] if any(ovr.impl is f for f in by_value) else [])
        except Exception as alone:
            return TypeError(
                f"the {ctx.name!r} context cannot be pickled (to send a kernel compiled in it "
                f"to another process, a Dask worker, or for Dask's token): its override of "
                f"{qualified_name(ovr.host)} by {qualified_name(ovr.impl)} does not pickle "
                f"({type(alone).__name__}: {alone}); make the implementation and what it reads "
                f"picklable (a module-level function, numbers, arrays)")
    return exc


def _rebuild_context(name, parent, fastmath, options, table, digests, partial=False):
    """A pickled context in this process (see ``Context.__reduce__``)."""
    import pickle
    args = (name, parent, fastmath, options, table, digests, partial)
    overrides = [(*entry, digest) for entry, digest in zip(pickle.loads(table), digests)]
    with _lock:
        ctx = _named.get(name)
        if ctx is None:
            ctx = Context(name, parent=parent, fastmath=fastmath, **options)
            ctx._received = True
        elif getattr(ctx, "_sent", False):
            # this process defined and sent it (a Dask scheduler in the notebook's process
            # unpickles its tasks): its live overrides are never changed by a pickle.  Where
            # they are still the pickled ones, the live context (remembered with the pickle,
            # for the kernel being unpickled with it: ``pickled_as``); else a copy of the
            # pickled definition that replaces nothing (``frozen_copy``)
            if not ctx._is_as_pickled(parent, fastmath, options, overrides):
                return frozen_copy(ctx, args)
            _unpickled.last = (ctx, args)
            return ctx
        ctx._adopt(parent, fastmath, options, overrides, partial)
    return ctx


_unpickled = threading.local()    # .last: (live context, the arguments it was unpickled from)


def pickled_as(ctx):
    """The pickle's arguments of ``ctx`` where this process just gave its live context back
    for a pickle of it (see ``_rebuild_context``), else None."""
    last = getattr(_unpickled, "last", None)
    return last[1] if last is not None and last[0] is ctx else None


def frozen_copy(ctx, args):
    """A context as the pickle ``args`` of the live ``ctx`` defines it, registered under no
    name (an older task's kernel compiles with it: the live context stays as it is)."""
    import pickle
    name, parent, fastmath, options, table, digests, partial = args
    copy = Context(name, parent=parent, fastmath=fastmath, _register=False, **options)
    copy._adopt(parent, fastmath, options,
                [(*entry, digest) for entry, digest in zip(pickle.loads(table), digests)],
                partial)
    copy._frozen_args = args
    return copy


def stack_state(ctx):
    """What changes whenever an override of ``ctx`` or of its ancestors does."""
    return tuple((layer.uid, layer.version) for layer in ctx.stack())


class AsPickled:
    """Pickles as the context pickle ``args`` it was given (see ``pickled_as``)."""

    __slots__ = ("args",)

    def __init__(self, args):
        self.args = args

    def __reduce__(self):
        return (_rebuild_context, self.args)


def current_default():
    """The context a kernel without one of its own compiles in: ``settings.default_context``
    (``%config GPUReplace.default_context``), else ``default_context``."""
    return settings.default_context or default_context


def override(host, impl=None, *, types=None):
    """Override ``host`` in the default context (decorator)."""
    return default_context.override(host, impl, types=types)
