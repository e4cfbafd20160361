"""Pickling what ``cuda.jit`` and ``cuda.vectorize`` make, so that kernels travel to other
processes (``multiprocessing``, Dask workers) as numba-cuda's do.

What is pickled is the Python function and the options, never compiled code: the receiving
process compiles for its own GPU (or finds the kernel in its disk cache), and its tracking sees
the function as any other.  The Python function goes through cloudpickle (Numba's copy of it),
by reference when its module can be imported by name, by value otherwise (a function defined in
a notebook cell, in ``__main__`` or inside another function), with the globals it reads: a device
function it calls is pickled the same way, recursively.

Each pickled object carries an identifier and a digest of its definition (the pickled function,
its globals and callees, its context's overrides, its options): unpickled where an object of
that identifier and digest lives (the process that pickled it, or a Dask worker that ran an
earlier task), it is that object again, with its compiled kernels, not a copy.  A new digest
under a known identifier is a redefinition made where it was pickled (a notebook cell re-run):
an object rebuilt here earlier whose function only reads other globals now takes them in place
(bound where its function reads them, then checked as the cell hook checks a notebook, so only
what changed compiles and the rest relinks); so do the plain functions it reaches, at any depth
-- a helper redefined there is bound here reading the namespace the old one read, the values a
helper reads are bound there (``adopting.adopt_globals``); otherwise the new definition is built.  What did
not change -- device functions and other kernels, each with its own identifier and digest --
stays as it was, compiled.  In the process that defined an object (where Dask's scheduler
runs: it unpickles the tasks it is given and pickles them again for the workers), a pickle of
it changes nothing: it gives a ``Pinned`` handle that uses the live object while that is still
the definition pickled and pickles again as it came, or, for a definition replaced since, a
detached object of that definition (the live one untouched).  Sent back by a process that
received it (a Dask task's result), it is the live object itself while that is still the
definition (``returned``).  The digest is also what Dask's ``tokenize`` sees
(``__dask_tokenize__``): made from a canonical description of the definition
(tracking/pickled.py), it is the same in every process, the one that rebuilt it included.
"""

from __future__ import annotations

import contextlib
import threading
import types
import uuid
import weakref

from ..tracking.pickled import Defined, digest, digesting, dumps, module_reads  # noqa: F401
from ..tracking.pickled import pickled_digest, viewing  # noqa: F401

_objects = weakref.WeakValueDictionary()      # identifier -> object pickled or rebuilt here
#: identifier -> object rebuilt here, kept alive: a Dask worker's task holds its kernel only
#: while it runs, and the next task of the same definition must find it, compiled (one object
#: per identifier: a redefinition replaces the one before)
_rebuilt = {}


def identifier(obj):
    """The identifier pickles of ``obj`` carry (made, and remembered, on the first pickle)."""
    uid = obj.__dict__.get("_pickle_uid")
    if uid is None:
        uid = uuid.uuid4().hex
        obj.__dict__["_pickle_uid"] = uid
        _objects[uid] = obj
    return uid


_active = threading.local()                   # .uids: objects whose function is being pickled


@contextlib.contextmanager
def pickling_function_of(uid):
    """While the function of the object ``uid`` is pickled (a recursive device function's
    globals hold the object itself: see ``SelfReference``)."""
    uids = _active.__dict__.setdefault("uids", set())
    uids.add(uid)
    try:
        yield
    finally:
        uids.discard(uid)


def is_pickling_function_of(uid):
    return uid in getattr(_active, "uids", ())


class SelfReference:
    """Where a pickled function referred to the object being pickled (itself, for a recursive
    device function): replaced by the rebuilt object (``resolve_self_references``)."""

    def __init__(self, uid):
        self.uid = uid

    def __reduce__(self):
        return (SelfReference, (self.uid,))


def resolve_self_references(func, obj):
    """Put ``obj`` where ``func``'s globals and closure hold a ``SelfReference`` to it."""
    uid = obj.__dict__.get("_pickle_uid")
    for name, value in list(func.__globals__.items()):
        if isinstance(value, SelfReference) and value.uid == uid:
            func.__globals__[name] = obj
    for cell in func.__closure__ or ():
        if _filled(cell) and isinstance(cell.cell_contents, SelfReference) and \
                cell.cell_contents.uid == uid:
            cell.cell_contents = obj


_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), type(Ellipsis), range,
              frozenset, types.ModuleType, types.BuiltinFunctionType)
_MISSING = object()


def reads_key(func):
    """What cloudpickle would pickle of ``func`` may have changed unless this is the same: the
    objects its code, defaults and closure hold and every global it (and each plain function
    or gpureplace function it reaches, a default's included) reads, compared by identity (kept alive by the key, so
    that an identity is never reused); None where identity cannot tell (a global array, list
    or instance can change in place), and then nothing is remembered."""
    import numpy as np
    seen, stack, held = set(), [func], []
    while stack:
        f = stack.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        held += [f, f.__code__, f.__defaults__, f.__kwdefaults__]
        values = [cell.cell_contents for cell in f.__closure__ or () if _filled(cell)]
        # (a default may hold a helper -- ``def g(v, f=h)`` -- whose globals are read too)
        values += [*(f.__defaults__ or ()), *(f.__kwdefaults__ or {}).values()]
        g = f.__globals__
        values += [g.get(name, _MISSING) for name in global_names(f.__code__)]
        # (the attributes of a user's module that travel with it: tracking/pickled.py)
        for module, names in module_reads([f]).values():
            values += [getattr(module, name, _MISSING) for name in sorted(names)]
        for value in values:
            held.append(value)
            if isinstance(value, (_IMMUTABLE, np.generic)) or value is _MISSING:
                continue
            if isinstance(value, types.FunctionType):
                stack.append(value)
            elif hasattr(value, "py_func") and hasattr(value, "definition_digest"):
                stack.append(value.py_func)           # a gpureplace function it calls
            elif isinstance(value, tuple) and all(isinstance(v, _IMMUTABLE) for v in value):
                continue
            elif type(value).__module__.startswith(("numba.", "gpureplace.")) and \
                    not hasattr(value, "__array_interface__"):
                continue                     # types, intrinsics, contexts (pickled apart)
            else:
                return None
    return _Key(held)


class _Key:
    """Objects compared by identity (and held, so that no identity is reused meanwhile)."""

    __slots__ = ("objects", "ids")

    def __init__(self, objects):
        self.objects = objects
        self.ids = tuple(map(id, objects))

    def __eq__(self, other):
        return isinstance(other, _Key) and self.ids == other.ids

    __hash__ = None


def _filled(cell):
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def global_names(code):
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += global_names(const)
    return names


def remembered(obj, what, key, make):
    """``make()``, remembered on ``obj`` under ``what`` while ``key`` (``reads_key``) is the
    same; made afresh whenever ``key`` is None."""
    if key is None:
        return make()
    memo = obj.__dict__.setdefault("_pickle_memo", {})
    hit = memo.get(what)
    if hit is not None and hit[0] == key:
        return hit[1]
    value = make()
    memo[what] = (key, value)
    return value


def function_bytes(func):
    """``func`` pickled by cloudpickle (by value where it cannot be imported by name)."""
    with explained_pickling(func):
        return dumps(func)


@contextlib.contextmanager
def explained_pickling(func):
    """Turn a failure to pickle ``func`` into a TypeError that names the global (of ``func``, or
    of a function it reads) that cannot be pickled, instead of only its type."""
    try:
        yield
    except (TypeError, AttributeError, RecursionError) as exc:
        culprit = _unpicklable_global(func, set())
        if culprit is None or isinstance(exc, UnpicklableGlobal):
            raise
        reader, name, value = culprit
        raise UnpicklableGlobal(
            f"{func.__qualname__} cannot be pickled (to run in another process, a Dask worker, "
            f"or for Dask's token): the global {name!r} that {reader} reads is "
            f"{type(value).__module__}.{type(value).__qualname__}, which cannot be pickled "
            f"({type(exc).__name__}: {exc}); pass it as an argument, or make it something "
            f"picklable (a module-level function, a number, an array)") from exc


class UnpicklableGlobal(TypeError):
    """A gpureplace function cannot be pickled: a global it reads cannot (the message names
    it and the function that reads it)."""


def _unpicklable_global(func, seen):
    """(reader, name, value) of the first global read by ``func`` (or, for a plain function it
    reads, by that function, recursively) that cloudpickle refuses; None if none is found."""
    from numba import cloudpickle
    if id(func) in seen or not isinstance(func, types.FunctionType):
        return None
    seen.add(id(func))
    glb = func.__globals__
    for name in dict.fromkeys(global_names(func.__code__)):
        if name not in glb:
            continue
        value = glb[name]
        inner = getattr(value, "py_func", value)
        if isinstance(inner, types.FunctionType) and inner.__module__ == func.__module__:
            hit = _unpicklable_global(inner, seen)
            if hit is not None:
                return hit
            continue
        try:
            cloudpickle.dumps(value)
        except Exception:
            return func.__qualname__, name, value
    return None


def rebuild(uid, make, *args, definition=None, adopt=None, current=None, detached=None,
            again=None, detached_key=None):
    """The object pickled as ``uid``: the live one if this process has it with the same
    ``definition`` digest, else ``make(*args)`` (remembered under ``uid``, replacing an earlier
    definition's).  ``adopt(live)``: bring an object rebuilt here earlier to the new definition
    in place, if it can (True) -- never an object this process defined itself.

    Where this process defined the object (a Dask scheduler runs in the notebook's process: it
    unpickles the tasks it is given, holds them, and pickles them again when it sends them to a
    worker), the result must stay the definition that was pickled, whatever cells run
    meanwhile: ``current(live)`` is the live definition's digest, ``detached(*args)`` makes an
    object of the pickled definition that leaves the live one as it is, and ``again`` is the
    pickle's ``(callable, args)``.  Unpickled while the live object is still that definition,
    the result is a ``Pinned`` handle on it (it launches the live object's compiled code, and
    pickles as ``again``); unpickled after a redefinition, a detached object.  Inside another
    definition's function (a device function its kernel calls) the live object itself, as the
    kernel holding it is pinned or detached already.  ``detached_key``: what else than
    ``definition`` tells one detached object from another (the context as pickled)."""
    with _rebuild_lock:     # (a Dask worker rebuilds in its tasks' threads and its event loop)
        return _rebuild(uid, make, args, definition, adopt, current, detached, again,
                        (uid, definition, detached_key))


_rebuild_lock = threading.RLock()
#: (identifier, definition) -> the detached object / Pinned handle made for it here (one each,
#: shared by every task that holds it)
_detached = weakref.WeakValueDictionary()
_pinned = weakref.WeakValueDictionary()


def _rebuild(uid, make, args, definition, adopt, current, detached, again, key):
    if detached is not None and definition is not None and is_detaching():
        # What an object of an earlier definition calls is of that definition too, never a
        # live object that a later definition changes in place.
        return _detached_object(key, detached, args)
    obj = _objects.get(uid)
    if obj is not None and _rebuilt.get(uid) is not obj:
        if definition is None or current is None or detached is None:
            return obj
        if current(obj) != definition:
            return _detached_object(key, detached, args)
        if again is None or getattr(_loading, "depth", 0) or getattr(_returning, "depth", 0):
            return obj
        return _pin(obj, key, definition, current, detached, args, again)
    if obj is not None and definition is not None and \
            obj.__dict__.get("_pickle_digest") != definition:
        if adopt is not None and adopt(obj):
            obj.__dict__["_pickle_digest"] = definition
        else:
            obj = None
    if obj is None:
        obj = make(*args)
        obj.__dict__["_pickle_uid"] = uid
        obj.__dict__["_pickle_digest"] = definition
        _objects[uid] = _rebuilt[uid] = obj
        _warm_receiver()
    if definition is None or detached is None or again is None or \
            getattr(_loading, "depth", 0):
        return obj
    # A process that received it (a Dask worker) keeps one live object per identifier, brought
    # to each new definition in place; a task unpickled before holds a handle that stays with
    # the definition it came with (the live object while it is that one, else a detached one).
    return _pin(obj, key, definition, _received_digest, detached, args, again)


def _received_digest(obj):
    return obj.__dict__.get("_pickle_digest")


def _pin(live, key, definition, current, detached, args, again):
    """The ``Pinned`` handle on ``live`` for the pickle ``key`` (one, shared by every task
    holding that pickle, while ``live`` is the object it stands for)."""
    pin = _pinned.get(key)
    if pin is None or pin._live is not live:
        pin = _pinned[key] = Pinned(live, key, definition, current, detached, args, again)
    return pin


def _detached_object(key, detached, args):
    with _rebuild_lock:
        obj = _detached.get(key)
        if obj is None:
            with detaching(), viewing():
                obj = detached(*args)
            _detached[key] = obj
        return obj


_detaching = threading.local()


@contextlib.contextmanager
def detaching():
    """While an object of an earlier definition is made (``rebuild``): it replaces nothing."""
    _detaching.depth = getattr(_detaching, "depth", 0) + 1
    try:
        yield
    finally:
        _detaching.depth -= 1


def is_detaching():
    return getattr(_detaching, "depth", 0) > 0


class Handle:
    """What stands, in the process that defined it, for an object unpickled there (see
    ``Pinned``): every use goes to ``pinned_target()``, and ``isinstance`` sees its class."""

    __slots__ = ()

    def pinned_target(self):
        raise NotImplementedError

    @property
    def __class__(self):
        return type(self.pinned_target())

    def __getattr__(self, name):
        return getattr(self.pinned_target(), name)

    def __getitem__(self, config):
        return PinnedLaunch(self, config)

    def __call__(self, *args, **kwargs):
        return self.pinned_target()(*args, **kwargs)

    def __dask_tokenize__(self):
        return self.pinned_target().__dask_tokenize__()

    def __repr__(self):
        return repr(self.pinned_target())

    def __dir__(self):
        return dir(self.pinned_target())


class Pinned(Handle):
    """A gpureplace object unpickled in the process that defined it, while the live object was
    still the definition pickled (see ``rebuild``): it is that object for every use (attributes,
    launches, calls) until the live object is redefined -- a helper it calls, a global it
    reads --, then an object of the pickled definition, detached from the live one.  Pickled
    again, it is the pickle it came from, so a task queued at a Dask scheduler before a cell
    redefined something runs, on its worker, the code it was submitted with."""

    __slots__ = ("_live", "_key", "_definition", "_current", "_detach", "_args", "_again",
                 "_off", "__weakref__")

    def __init__(self, live, key, definition, current, detach, args, again):
        self._live, self._key, self._definition = live, key, definition
        self._current, self._detach, self._args, self._again = current, detach, args, again
        self._off = None                 # the detached object, once the live one has moved on

    def pinned_target(self):
        """The object this handle stands for now: the live one while it is the definition
        pickled, else the detached object of that definition."""
        off = self._off
        if off is not None:
            return off
        live = self._live
        if self._current(live) == self._definition:
            return live
        off = self._off = _detached_object(self._key, self._detach, self._args)
        return off

    def __reduce__(self):
        if self._current is _received_digest:
            # (a process that received it sends it back, or on: a task's result)
            return (returned, self._again)
        return self._again


_returning = threading.local()


def returned(rebuild, args):
    """A pickle sent back by a process that received it (a Dask task's result, gathered by the
    client): in the process that defined it, the live object itself while it is still the
    definition pickled -- ``client.submit(lambda k: k, k).result() is k`` --, not a ``Pinned``
    handle, which stands for a task the scheduler holds; elsewhere as any pickle of it.  (A
    task that a worker submits with a kernel it received reaches the scheduler the same way,
    and so is not pinned there: only the notebook's own tasks are.)"""
    _returning.depth = getattr(_returning, "depth", 0) + 1
    try:
        return rebuild(*args)
    finally:
        _returning.depth -= 1


class PinnedVariant(Handle):
    """``pinned.with_context(context)`` as pickled (a variant of a pinned kernel): the variant
    of what the handle stands for now."""

    __slots__ = ("pinned", "context", "again")

    def __init__(self, pinned, context, again):
        self.pinned, self.context, self.again = pinned, context, again

    def pinned_target(self):
        return self.pinned.pinned_target().with_context(self.context)

    def __reduce__(self):
        return (self.again, (self.pinned, self.context))


class PinnedLaunch:
    """``pinned[grid, block]``: the launch of what the handle stands for now, pickled as the
    handle's configuration (so it stays pinned too)."""

    __slots__ = ("pinned", "config")

    def __init__(self, pinned, config):
        self.pinned, self.config = pinned, config

    def __call__(self, *args, **kwargs):
        # (under the lock that rebuilding takes: a Dask worker unpickles the next tasks in its
        # event loop while this one runs, and a new definition brought to the live object in
        # place must not change it in the middle of this launch)
        with _rebuild_lock:
            return self.pinned.pinned_target()[self.config](*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.pinned.pinned_target()[self.config], name)

    def __reduce__(self):
        from .launcher import configure
        return (configure, (self.pinned, self.config))


def defined_here():
    """The objects this process defined that were pickled at least once."""
    return [obj for uid, obj in list(_objects.items()) if _rebuilt.get(uid) is not obj]


def was_received(uid):
    """Whether an object pickled as ``uid`` was rebuilt here (from an earlier task)."""
    return uid in _rebuilt


def was_rebuilt(obj):
    """Whether ``obj`` was rebuilt here from a pickle (this process received it: a Dask worker)."""
    uid = obj.__dict__.get("_pickle_uid")
    return uid is not None and _rebuilt.get(uid) is obj


def _warm_receiver():
    """A process that receives gpureplace functions (a Dask worker) compiles when a redefinition
    reaches it, usually after loading its first kernels from the disk cache (which leaves its
    compiler cold: Numba's registries, LLVM's target, libdevice).  Warm them in the background
    at the first rebuild (``prewarm.start``: once per process, off with GPUREPLACE_PREWARM=0),
    where kernels will launch on a GPU; the simulator compiles nothing."""
    from ..config import settings
    from ..runtime import prewarm
    if prewarm.is_started() or settings.backend == "simulator" or settings.gpu_surely_absent():
        return
    prewarm.start()


def reduce_made(obj, func, args, kwargs, context):
    """``__reduce__`` of an object made as ``type(obj)(func, *args, **kwargs)`` (the ufuncs of
    ``cuda.vectorize`` / ``guvectorize``, ``cuda.reduce``) whose kernels compile in ``context``
    (None: the default one of the moment, ``current_default()``): ``func`` pickled by
    ``function_bytes``, and the context with its overrides, as a kernel's
    (``GPUFunction.__reduce__``): the rebuilt object's kernels compile in it."""
    context = _compiled_in(context)
    if digesting():
        return (Defined, (made_token(obj, func, args, kwargs, context),))
    data = function_bytes(func)
    return (_rebuild_made, (identifier(obj), type(obj), data, args, kwargs,
                            made_token(obj, func, args, kwargs, context), context))


def made_token(obj, func, args, kwargs, context):
    """``__dask_tokenize__`` of such an object: its definition's digest, with its context's
    (an override its kernels may use changed, it gets a new one)."""
    return digest(type(obj).__qualname__, pickled_digest(func), args, sorted(kwargs.items()),
                  _compiled_in(context).definition_digest())


def _compiled_in(context):
    """The context an object given ``context`` compiles in now."""
    from ..dispatch.context import current_default
    return current_default() if context is None else context


def _rebuild_made(uid, cls, func_bytes, args, kwargs, definition, context):
    # Where this process defined it, as ``rebuild_function`` does (jit/function.py): the
    # context's pickle when the live context was given back for it, so that an object of this
    # pickle (and its pickle again) stays with that definition of the context
    from ..dispatch.context import AsPickled, frozen_copy, pickled_as
    sent_as = pickled_as(context)

    def detached(cls, func_bytes, args, kwargs, context):
        return _make(cls, func_bytes, args, kwargs,
                     context if sent_as is None else frozen_copy(context, sent_as))

    return rebuild(uid, _make, cls, func_bytes, args, kwargs, context, definition=definition,
                   current=lambda obj: obj.__dask_tokenize__(), detached=detached,
                   again=(_rebuild_made, (uid, cls, func_bytes, args, kwargs, definition,
                                          context if sent_as is None else AsPickled(sent_as))))


def _make(cls, func_bytes, args, kwargs, context):
    return cls(loads_function(func_bytes), *args, _context=context, **kwargs)


_loading = threading.local()


def loads_function(data):
    """A pickled function (and what it reads: the device functions it calls are the live ones
    where this process defined them, not ``Pinned`` handles)."""
    import pickle
    _loading.depth = getattr(_loading, "depth", 0) + 1
    try:
        return pickle.loads(data)
    finally:
        _loading.depth -= 1
