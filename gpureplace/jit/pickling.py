"""Pickling what ``cuda.jit`` and ``cuda.vectorize`` make, so that kernels travel to other
processes (``multiprocessing``, Dask workers) as numba-cuda's do.

What is pickled is the Python function and the options, never compiled code: the receiving
process compiles for its own GPU (or finds the kernel in its disk cache), and its tracking sees
the function as any other.  The Python function goes through cloudpickle (Numba's copy of it),
by reference when its module can be imported by name, by value otherwise (a function defined in
a notebook cell, in ``__main__`` or inside another function), with the globals it reads: a device
function it calls is pickled the same way, recursively.

Each pickled object carries an identifier: unpickled in the process that pickled it (or a second
time anywhere), it is the same object again, with its compiled kernels, not a copy.
"""

from __future__ import annotations

import uuid
import weakref

_objects = weakref.WeakValueDictionary()      # identifier -> object pickled or rebuilt here


def identifier(obj):
    """The identifier pickles of ``obj`` carry (made, and remembered, on the first pickle)."""
    uid = obj.__dict__.get("_pickle_uid")
    if uid is None:
        uid = uuid.uuid4().hex
        obj.__dict__["_pickle_uid"] = uid
        _objects[uid] = obj
    return uid


def function_bytes(func):
    """``func`` pickled by cloudpickle (by value where it cannot be imported by name)."""
    from numba import cloudpickle
    return cloudpickle.dumps(func)


def rebuild(uid, make, *args):
    """The object pickled as ``uid``: the live one if this process has it, else ``make(*args)``
    (remembered under ``uid``)."""
    obj = _objects.get(uid)
    if obj is None:
        obj = make(*args)
        obj.__dict__["_pickle_uid"] = uid
        _objects[uid] = obj
    return obj


def reduce_made(obj, func, args, kwargs):
    """``__reduce__`` of an object made as ``type(obj)(func, *args, **kwargs)`` (the ufuncs of
    ``cuda.vectorize`` / ``guvectorize``): ``func`` pickled by ``function_bytes``."""
    return (rebuild, (identifier(obj), _make, type(obj), function_bytes(func), args, kwargs))


def _make(cls, func_bytes, args, kwargs):
    return cls(loads_function(func_bytes), *args, **kwargs)


def loads_function(data):
    import pickle
    return pickle.loads(data)
