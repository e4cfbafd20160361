"""The canonical description of a definition, fed into a hash: what ``pickled_digest``
(tracking/pickled.py, whose docstring says what it holds and why) digests -- the same in every
process for the same definition, whatever pickle's memo, the hash seed, the cell's file name or
cloudpickle's class identifiers are there."""

from __future__ import annotations

import enum
import functools
import hashlib
import sys
import types

from .fingerprint import fingerprint, function_parts_fingerprint
from .pickled import _MISSING, Defined, _function_fp, _users_module

_SCALARS = frozenset({type(None), bool, int, float, complex, str, bytes})
_MAX_DEPTH = 100               # (nested deeper: cloudpickle's bytes of it)
#: attributes of a class pickled by value that say nothing of what it means
_CLASS_NOISE = frozenset({"__dict__", "__weakref__", "_abc_impl", "__slots__", "__doc__"})


class Description:
    """The canonical description of a definition, fed into a hash (see ``pickled_digest``)."""

    def __init__(self, reads):
        self.reads = reads                # module_reads of the functions described
        self.h = hashlib.blake2b(digest_size=16)
        self.seen = {}                    # id -> order of the first visit (what can recur)
        self.held = []                    # (kept alive: no id is reused meanwhile)

    def put(self, *parts):
        for part in parts:
            data = part if isinstance(part, bytes) else str(part).encode()
            self.h.update(len(data).to_bytes(8, "little"))
            self.h.update(data)

    def first_visit(self, v):
        """True the first time; after, only where it was met first is described."""
        order = self.seen.get(id(v))
        if order is not None:
            self.put("again", order)
            return False
        self.seen[id(v)] = len(self.seen)
        self.held.append(v)
        return True

    def feed(self, v, depth):
        t = type(v)
        if t in _SCALARS:
            self.put(t.__name__, repr(v))
            return
        if depth > _MAX_DEPTH:
            self.put("deep", _pickle_bytes(v))
            return
        depth += 1
        if t is tuple:
            self.put("tuple", len(v))
            for item in v:
                self.feed(item, depth)
            return
        if isinstance(v, enum.Enum) or (isinstance(v, tuple) and hasattr(t, "_fields")):
            fp = fingerprint(v)           # (members and namedtuples: by class content too)
            if fp is not None:
                self.put("content", fp)
                return
        if isinstance(v, (set, frozenset)):
            self.put(t.__name__, *sorted(_sub(self.reads, item, depth) for item in v))
            return
        import numpy as np
        if isinstance(v, (np.generic, np.dtype)):
            self.put("numpy", t.__name__, repr(v))
            return
        if not self.first_visit(v):
            return
        if isinstance(v, types.FunctionType):
            self.function(v, depth)
        elif isinstance(v, types.ModuleType):
            self.module(v, depth)
        elif isinstance(v, type):
            self.cls(v, depth)
        elif t is list:
            self.put("list", len(v))
            for item in v:
                self.feed(item, depth)
        elif t is dict:
            self.put("dict", len(v))
            for key, item in v.items():
                self.feed(key, depth)
                self.feed(item, depth)
        elif isinstance(v, np.ndarray):
            self.put("ndarray", v.dtype.str, v.shape)
            if v.dtype.hasobject:
                self.feed(v.tolist(), depth)
            else:
                self.put(np.ascontiguousarray(v).tobytes())
        elif isinstance(v, types.MethodType):
            self.put("method")
            self.feed(v.__func__, depth)
            self.feed(v.__self__, depth)
        elif isinstance(v, np.ufunc) or (isinstance(v, types.BuiltinFunctionType) and isinstance(
                getattr(v, "__self__", None), (types.ModuleType, type(None)))):
            self.put("builtin", getattr(v, "__module__", None), getattr(v, "__qualname__", v))
        else:
            self.other(v, t, depth)

    def function(self, f, depth):
        if _pickled_by_name(f):
            self.put("function by name", f.__module__, f.__qualname__)
            home = sys.modules.get(f.__module__)
            if _users_module(home):
                # its content (a module edited and reloaded) and what is read of its module
                self.put(_function_fp(f))
                self.feed(home, depth)
            return
        code = f.__code__
        self.put("function", f.__module__, f.__qualname__,
                 function_parts_fingerprint(code, None, None))
        self.feed(f.__defaults__, depth)
        self.feed(f.__kwdefaults__, depth)
        for cell in f.__closure__ or ():
            try:
                self.feed(cell.cell_contents, depth)
            except ValueError:
                self.put("empty cell")
        g = f.__globals__
        for name in _code_names(code):
            if name in g:
                self.put("global", name)
                self.feed(g[name], depth)
        if f.__dict__:
            self.put("attributes")
            self.feed(dict(sorted(f.__dict__.items())), depth)

    def module(self, m, depth):
        self.put("module", m.__name__)
        hit = self.reads.get(id(m))
        for name in sorted(hit[1]) if hit is not None and hit[0] is m else ():
            value = getattr(m, name, _MISSING)
            self.put("attribute", name)
            if value is _MISSING:
                self.put("missing")
            else:
                self.feed(value, depth)

    def cls(self, c, depth):
        if isinstance(c, enum.EnumMeta) or (issubclass(c, tuple) and hasattr(c, "_fields")):
            self.put("class content", fingerprint(c))
        elif _pickled_by_name(c):
            self.put("class by name", c.__module__, c.__qualname__)
        else:                                 # (defined in a notebook: pickled by value)
            self.put("class", c.__module__, c.__qualname__)
            self.feed(c.__bases__, depth)
            for name in sorted(c.__dict__):
                if name in _CLASS_NOISE:
                    continue
                value = c.__dict__[name]
                if isinstance(value, (staticmethod, classmethod)):
                    value = (type(value).__name__, value.__func__)
                elif isinstance(value, property):
                    value = ("property", value.fget, value.fset, value.fdel)
                elif isinstance(value, (types.MemberDescriptorType,
                                        types.GetSetDescriptorType)):
                    value = "descriptor"
                self.put("member", name)
                self.feed(value, depth)

    def other(self, v, t, depth):
        if t.__module__.startswith("gpureplace."):
            if hasattr(t, "pinned_target"):
                self.feed(v.pinned_target(), depth)   # (a handle: what it stands for now)
                return
            try:
                reduced = v.__reduce__()               # (digest mode: its definition's digest)
            except Exception:
                reduced = None
            if isinstance(reduced, tuple) and reduced[0] is Defined:
                self.put("defined", reduced[1][0])
                return
        py_func = getattr(v, "py_func", None)
        if isinstance(py_func, types.FunctionType):    # a Numba dispatcher: its function
            self.put("py_func", t.__module__, t.__qualname__)
            self.feed(py_func, depth)
            return
        fp = fingerprint(v)                            # numba types, intrinsics, ...
        if fp is not None and not isinstance(v, types.BuiltinFunctionType):
            self.put("fingerprint", fp)
            return
        try:
            reduced = v.__reduce_ex__(4)
        except Exception:
            self.put("pickled", _pickle_bytes(v))      # (raises where nothing pickles it)
            return
        if isinstance(reduced, str):
            self.put("global", getattr(v, "__module__", None), reduced)
            return
        self.put("reduce", len(reduced))
        for i, part in enumerate(reduced):
            if i in (3, 4) and part is not None:
                part = list(part)                      # (list items, dict items)
            self.feed(part, depth)


def _sub(reads, value, depth):
    """The description of ``value`` alone (an item of a set, put in a sorted order)."""
    d = Description(reads)
    d.feed(value, depth)
    return d.h.hexdigest()


def _pickle_bytes(v):
    from numba import cloudpickle
    return cloudpickle.dumps(v)


@functools.lru_cache(maxsize=4096)
def _code_names(code):
    """The names ``code`` (and the code nested in it) loads, sorted: its globals among them."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.update(_code_names(const))
    return tuple(sorted(names))


def _pickled_by_name(obj):
    """Whether cloudpickle pickles the function or class ``obj`` by its name (its module can be
    imported and has it under its qualified name), not by value."""
    name = getattr(obj, "__module__", None)
    module = sys.modules.get(name) if name else None
    if module is None or name == "__main__":
        return False
    found = module
    for part in obj.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is obj
