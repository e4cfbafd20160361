"""Digests of definitions, and what a user's module carries when a function pickles: what another
process compares to tell an unchanged kernel, device function or override from a redefined one,
and what Dask's tokens are made of.

A definition's digest (``pickled_digest``) is made from a canonical description of what pickling
it carries, never from pickle's bytes: those depend on pickle's memo (whether two equal strings
are one object), on the order of a set's items (the process's hash seed), on the file name of the
cell or script (ipykernel's holds the process id) and on the identifiers cloudpickle gives the
classes it pickles by value, so the same cell text run in two processes -- or a definition rebuilt
in another process from its pickle -- digested apart.  The description holds, for a function
pickled by value, its code's fingerprint (tracking/fingerprint.py: bytecode, constants, names;
not line numbers or the file), its defaults, closure and attributes, and every global its code
names that it has, described the same way; for a function, class or module pickled by name, the
name, and for a user's module also the fingerprints of its functions and the values of the
attributes read of it (below); data by type and value (arrays by dtype, shape and contents, a
set's items in a sorted order); a gpureplace object met inside by its own definition's digest
(*digest mode*: ``digesting()``), so that a callee's redefinition changes its callers' digests;
anything else by what ``__reduce_ex__`` makes of it.

cloudpickle pickles a module by its name only, and a function importable by name the same way:
the attributes a notebook set on the user's own module (``mycfg.SCALE = 3``) would neither reach
another process nor change the digest.  ``dumps`` pickles such a module with the values of the
attributes the function reads of it (``mycfg.SCALE`` in its code, or ``SCALE`` in a function of
``mycfg`` it calls); another process sets them on its own copy of the module before the function
is used there, as the notebook did here (``_module_as_read``).  Modules of the standard library,
of installed packages and of gpureplace are pickled by name, as before.

The same holds for the module's own plain functions that the pickled functions reach: a module
edited on disk and reloaded in the notebook (``importlib.reload``; autoreload's new code in
place) has new functions where another process still has its old import.  They travel as their
code, defaults and fingerprint (``_Source``): another process keeps its own function where the
fingerprint is the same (the same object: nothing recompiles), and otherwise binds in its module
a function of the code that travelled, reading that module's globals -- as the notebook's reload
left them, with the attributes that travel set.  It does not reload the module from its file:
the file it sees may not be the one edited (another machine), or may have been edited again
since the notebook reloaded it, and a reload runs the whole module again (every other function,
its side effects); the code that travelled is what the notebook runs.  The module's own
``@cuda.jit`` functions travel by their definition (jit/pickling.py), and another process keeps
its own where that is the same definition (the same token).  Where such a module is read by an
object of an earlier definition (a task queued before the change, ``viewing()``), or by an older
pickle in the process that made it, the values are read from a copy of the module (``_View``),
which leaves the module as it is.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import hashlib
import importlib
import sys
import threading
import types
import uuid
import weakref

from . import world
from .fingerprint import fingerprint

_state = threading.local()


def digest(*parts):
    """Digest of ``parts`` (bytes, or values with a stable repr)."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(part if isinstance(part, bytes) else repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()


def digesting():
    """Whether this thread is digesting a definition (see the module's docstring)."""
    return getattr(_state, "depth", 0) > 0


@contextlib.contextmanager
def digest_mode():
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


def pickled_digest(obj):
    """Digest of the definition of ``obj`` (a function, a gpureplace object, a value) that
    pickling it carries, from its canonical description (see the module's docstring): the same
    in every process for the same definition."""
    from .described import Description
    readers = [obj] if isinstance(obj, types.FunctionType) else []
    with digest_mode():
        description = Description(module_reads(readers))
        description.feed(obj, 0)
    return description.h.hexdigest()


def dumps(obj, readers=None):
    """``cloudpickle.dumps(obj)``, where a user's module (see the module's docstring) that the
    functions ``readers`` read attributes of (by default ``obj`` itself, if a function) travels
    with those attributes' values."""
    import io

    from numba import cloudpickle
    if readers is None:
        readers = [obj] if isinstance(obj, types.FunctionType) else []
    reads = module_reads(readers)
    if not reads:
        return cloudpickle.dumps(obj)
    with io.BytesIO() as file:
        _ModulePickler(file, reads).dump(obj)
        return file.getvalue()


def _pickler_class():
    from numba import cloudpickle

    class ModulePickler(cloudpickle.Pickler):
        def __init__(self, file, reads):
            super().__init__(file, protocol=None)
            self._reads = reads

        def reducer_override(self, obj):
            if isinstance(obj, types.ModuleType):
                module = obj
            elif isinstance(obj, types.FunctionType):
                module = _by_name(obj)
            else:
                module = None
            hit = self._reads.get(id(module)) if module is not None else None
            if hit is not None:
                values = _values(*hit)
                if values:
                    # (the process that pickled it is left out of a digest: the same definition
                    # digests the same in every process)
                    origin = None if digesting() else PROCESS
                    if obj is module:
                        return (_module_as_read, (obj.__name__, values, origin))
                    return (_function_as_read, (obj.__module__, obj.__qualname__, values,
                                                origin))
            return super().reducer_override(obj)

    return ModulePickler


class _LazyPickler:
    cls = None

    def __call__(self, file, reads):
        if self.cls is None:
            self.cls = _pickler_class()
        return self.cls(file, reads)


_ModulePickler = _LazyPickler()

#: this process, as the pickles it makes name it (``_module_as_read``)
PROCESS = uuid.uuid4().hex


def module_reads(funcs):
    """``{id(module): (module, attribute names)}`` for each user's module whose attributes the
    functions ``funcs`` read -- ``mycfg.SCALE`` in their code, or ``SCALE`` in a function of
    ``mycfg`` that cloudpickle pickles by name (and that function itself) --, following the
    plain functions they reach.  Modules that only a library provides are left out."""
    reads, seen, stack = {}, set(), list(funcs)
    while stack:
        f = stack.pop()
        if not isinstance(f, types.FunctionType) or id(f) in seen:
            continue
        seen.add(id(f))
        g = f.__globals__
        home = _by_name(f)
        if home is not None and "." not in f.__qualname__:
            _note(reads, home, f.__qualname__)     # (its code travels: see ``_Source``)
        for chain in _attribute_chains(f.__code__):
            value = g.get(chain[0], _MISSING)
            if value is _MISSING:
                continue
            if not isinstance(value, types.ModuleType):
                if home is not None:
                    _note(reads, home, chain[0])         # SCALE, read bare in mycfg's code
                stack.append(value)
                continue
            module, rest = value, chain[1:]
            while len(rest) > 1 and isinstance(getattr(module, rest[0], None),
                                               types.ModuleType):
                module, rest = getattr(module, rest[0]), rest[1:]
            if rest and _users_module(module):
                _note(reads, module, rest[0])
                stack.append(getattr(module, rest[0], None))
        for cell in f.__closure__ or ():
            try:
                stack.append(cell.cell_contents)
            except ValueError:
                pass
    return reads


_MISSING = object()


def _note(reads, module, name):
    hit = reads.get(id(module))
    if hit is None:
        hit = reads[id(module)] = (module, set())
    hit[1].add(name)


def _by_name(f):
    """The user's module ``f`` is pickled by reference from (its bare globals are attributes
    of it), or None (pickled by value, its globals with it)."""
    name = getattr(f, "__module__", None)
    module = sys.modules.get(name) if name else None
    if module is None or name == "__main__" or not _users_module(module):
        return None
    obj = module
    for part in f.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return module if obj is f else None


@functools.lru_cache(maxsize=4096)
def _attribute_chains(code):
    """The names each global load of ``code`` (and of the code nested in it) is followed by:
    ``("mycfg", "SCALE")`` for ``mycfg.SCALE``, ``("SCALE",)`` for ``SCALE``."""
    chains, current = [], None
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            current = [ins.argval]
            chains.append(current)
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and current is not None:
            current.append(ins.argval)
        elif ins.opname not in ("CACHE", "EXTENDED_ARG", "PRECALL", "PUSH_NULL"):
            current = None
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            chains += _attribute_chains(const)
    return tuple(tuple(c) for c in chains)


def _users_module(module):
    """A module of the user's (not the standard library's, an installed package's or
    gpureplace's), that cloudpickle pickles by name."""
    name = getattr(module, "__name__", None)
    if not name or name == "__main__" or sys.modules.get(name) is not module:
        return False
    from .deps import _library_module
    return not _library_module(module)


def _values(module, names):
    """{name: value} of the attributes ``names`` of ``module`` that travel: data (numbers,
    strings, arrays, tuples of them), functions that another module defined (a notebook's,
    bound there), the module's own plain functions, as their code (``_Source``), and its own
    gpureplace functions (``@cuda.jit`` in it), which pickle by their definition."""
    out = {}
    for name in sorted(names):
        value = getattr(module, name, _MISSING)
        if value is _MISSING:
            continue
        source = _source_of(value, module)
        if source is not None:
            out[name] = source
        elif _travels(value, module.__name__) or hasattr(value, "definition_digest"):
            out[name] = value
    return out


def _travels(value, home):
    import numpy as np
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, np.generic,
                                           np.ndarray)):
        return True
    if isinstance(value, tuple):
        return all(_travels(v, home) for v in value)
    func = getattr(value, "py_func", value)
    return isinstance(func, types.FunctionType) and func.__module__ != home


class _Source:
    """A plain function of a user's module as the pickling process has it: its code, defaults,
    keyword defaults, names, and their fingerprint (see the module's docstring)."""

    __slots__ = ("fingerprint", "code", "defaults", "kwdefaults", "name", "qualname")

    def __init__(self, fingerprint, code, defaults, kwdefaults, name, qualname):
        self.fingerprint, self.code, self.defaults = fingerprint, code, defaults
        self.kwdefaults, self.name, self.qualname = kwdefaults, name, qualname

    def __reduce__(self):
        return (_Source, (self.fingerprint, self.code, self.defaults, self.kwdefaults,
                          self.name, self.qualname))

    def matches(self, value):
        """Whether ``value`` (this process's function) is this definition."""
        return isinstance(value, types.FunctionType) and \
            _function_fp(value) == self.fingerprint

    def build(self, namespace):
        """A function of this code reading its globals from ``namespace`` (a module's)."""
        func = types.FunctionType(self.code, namespace, self.name, self.defaults)
        func.__kwdefaults__ = self.kwdefaults
        func.__qualname__ = self.qualname
        return func


#: function -> (code, defaults, kwdefaults, fingerprint) as last computed
_fingerprints = weakref.WeakKeyDictionary()


def _function_fp(func):
    """``fingerprint(func)``, remembered while its code and defaults are the same objects."""
    hit = _fingerprints.get(func)
    if hit is not None and hit[0] is func.__code__ and hit[1] is func.__defaults__ and \
            hit[2] is func.__kwdefaults__:
        return hit[3]
    fp = fingerprint(func)
    _fingerprints[func] = (func.__code__, func.__defaults__, func.__kwdefaults__, fp)
    return fp


def _source_of(value, module):
    """``value`` as a ``_Source`` where it is a plain function defined in ``module`` (and only
    there: no closure, a name of the module's own), else None."""
    if not isinstance(value, types.FunctionType) or value.__globals__ is not module.__dict__ \
            or value.__closure__ or "<" in value.__qualname__ or "." in value.__qualname__:
        return None
    fp = _function_fp(value)
    if fp is None:
        return None
    return _Source(fp, value.__code__, value.__defaults__, value.__kwdefaults__,
                   value.__name__, value.__qualname__)


@contextlib.contextmanager
def viewing():
    """While an object of an earlier definition is rebuilt (jit/pickling.py's detached objects,
    in a process that received it): the module attributes its pickle carries are read from a
    copy of the module (``_view``), never set on the module, which the live objects use."""
    _state.viewing = getattr(_state, "viewing", 0) + 1
    try:
        yield
    finally:
        _state.viewing -= 1


def _module_as_read(name, values, origin):
    """A module pickled with attribute values read of it: in another process than the one that
    pickled it, the values are set on that process's module first (a notebook set them there:
    a worker runs what the notebook would), and the world moves (what was compiled with the
    old ones is checked again).  In the process that pickled it, and for an earlier definition
    (``viewing``), the module as it is, or a copy of it with the values pickled where some have
    changed since (an older task's function, see ``jit/pickling.py``)."""
    module = importlib.import_module(name)
    changed = {k: v for k, v in values.items()
               if not same_value(getattr(module, k, _MISSING), v)}
    if not changed:
        return module
    if origin == PROCESS or getattr(_state, "viewing", 0):
        return _view(module, values)
    for k, v in changed.items():
        setattr(module, k, v.build(module.__dict__) if isinstance(v, _Source) else v)
    world.bump()
    return module


def _function_as_read(module_name, qualname, values, origin):
    """A function of a user's module pickled by name, with the module's attributes it reads
    (see ``_module_as_read``): where its code travelled, the function of that code."""
    module = _module_as_read(module_name, values, origin)
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if isinstance(module, _View) and isinstance(obj, types.FunctionType) and \
            obj.__globals__ is not module.__dict__:
        obj = _rehomed(obj, module.__dict__)
    return obj


def _rehomed(func, namespace):
    """A copy of ``func`` reading its globals from ``namespace``."""
    copy = types.FunctionType(func.__code__, namespace, func.__name__, func.__defaults__,
                              func.__closure__)
    copy.__kwdefaults__ = func.__kwdefaults__
    copy.__qualname__ = func.__qualname__
    copy.__module__ = func.__module__
    return copy


class _View(types.ModuleType):
    """A copy of a module with some attributes as an older pickle had them."""


_views = {}                              # (module name, digest of the values) -> _View


def _view(module, values):
    from numba import cloudpickle
    key = (module.__name__, digest(cloudpickle.dumps(values)))
    view = _views.get(key)
    if view is None:
        view = _View(module.__name__)
        view.__dict__.update(module.__dict__)
        view.__dict__.update({k: v.build(view.__dict__) if isinstance(v, _Source) else v
                              for k, v in values.items()})
        for name, value in list(view.__dict__.items()):
            if isinstance(value, types.FunctionType) and value.__globals__ is module.__dict__:
                view.__dict__[name] = _rehomed(value, view.__dict__)   # (they read the copy)
        if len(_views) > 64:
            _views.clear()
        _views[key] = view
    return view


def same_value(a, b):
    """Whether ``a`` (this process's value) is what the pickled ``b`` stands for: a ``_Source``
    its function, a gpureplace function of the same token, data of the same type and value
    (arrays by dtype, shape and contents), a function, module or dispatcher by identity."""
    import numpy as np
    if isinstance(b, _Source):
        return b.matches(a)
    if hasattr(b, "definition_digest") and hasattr(a, "definition_digest"):
        # (a gpureplace function: this process's own import of it is kept where it is the same
        # definition -- its token, the same in every process -- as the one pickled)
        try:
            return a is b or a.__dask_tokenize__() == b.__dask_tokenize__()
        except Exception:
            return False
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, (types.FunctionType, types.ModuleType)) or hasattr(a, "py_func"):
        return a is b
    try:
        return bool(a == b) or (a != a and b != b)
    except Exception:
        return False


class Defined:
    """What a gpureplace object pickles as in digest mode: its definition's digest."""

    def __init__(self, definition):
        self.definition = definition

    def __reduce__(self):
        return (Defined, (self.definition,))
