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
what changed compiles and the rest relinks); otherwise the new definition is built.  What did
not change -- device functions and other kernels, each with its own identifier and digest --
stays as it was, compiled.  In the process that defined an object, a pickle of it gives the
live object and changes nothing; one of a definition it has replaced since gives a detached
object of that definition (the live one untouched).  The digest is also what Dask's ``tokenize`` sees
(``__dask_tokenize__``).
"""

from __future__ import annotations

import contextlib
import threading
import types
import uuid
import weakref

from ..tracking.pickled import Defined, digest, digesting, pickled_digest  # noqa: F401

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
    or gpureplace function it reaches) reads, compared by identity (kept alive by the key, so
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
        g = f.__globals__
        values += [g.get(name, _MISSING) for name in _global_names(f.__code__)]
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


def _global_names(code):
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += _global_names(const)
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
    from numba import cloudpickle
    with explained_pickling(func):
        return cloudpickle.dumps(func)


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
    for name in dict.fromkeys(_global_names(func.__code__)):
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


def rebuild(uid, make, *args, definition=None, adopt=None, current=None, detached=None):
    """The object pickled as ``uid``: the live one if this process has it with the same
    ``definition`` digest, else ``make(*args)`` (remembered under ``uid``, replacing an earlier
    definition's).  ``adopt(live)``: bring an object rebuilt here earlier to the new definition
    in place, if it can (True) -- never an object this process defined itself.

    Where this process defined the object and has redefined it since it was pickled (a Dask
    scheduler running in the notebook's process unpickles a task queued before the cell that
    redefined a helper): ``detached(*args)``, an object of the pickled definition that leaves
    the live one as it is (``current(live)``: the live definition's digest), so the task runs
    the code it was submitted with."""
    with _rebuild_lock:     # (a Dask worker rebuilds in its tasks' threads and its event loop)
        return _rebuild(uid, make, args, definition, adopt, current, detached)


_rebuild_lock = threading.RLock()


def _rebuild(uid, make, args, definition, adopt, current, detached):
    obj = _objects.get(uid)
    if obj is not None and _rebuilt.get(uid) is not obj:
        if definition is None or current is None or detached is None or \
                current(obj) == definition:
            return obj                  # this process defined it: the live definition
        return detached(*args)
    if obj is not None and definition is not None and \
            obj.__dict__.get("_pickle_digest") != definition:
        if adopt is not None and adopt(obj):
            obj.__dict__["_pickle_digest"] = definition
            return obj
        obj = None
    if obj is None:
        obj = make(*args)
        obj.__dict__["_pickle_uid"] = uid
        obj.__dict__["_pickle_digest"] = definition
        _objects[uid] = _rebuilt[uid] = obj
        _warm_receiver()
    return obj


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


def reduce_made(obj, func, args, kwargs):
    """``__reduce__`` of an object made as ``type(obj)(func, *args, **kwargs)`` (the ufuncs of
    ``cuda.vectorize`` / ``guvectorize``): ``func`` pickled by ``function_bytes``."""
    if digesting():
        return (Defined, (made_token(obj, func, args, kwargs),))
    data = function_bytes(func)
    return (_rebuild_made, (identifier(obj), type(obj), data, args, kwargs,
                            made_token(obj, func, args, kwargs)))


def made_token(obj, func, args, kwargs):
    """``__dask_tokenize__`` of such an object: its definition's digest."""
    return digest(type(obj).__qualname__, pickled_digest(func), args, sorted(kwargs.items()))


def _rebuild_made(uid, cls, func_bytes, args, kwargs, definition):
    return rebuild(uid, _make, cls, func_bytes, args, kwargs, definition=definition)


def _make(cls, func_bytes, args, kwargs):
    return cls(loads_function(func_bytes), *args, **kwargs)


def loads_function(data):
    import pickle
    return pickle.loads(data)
