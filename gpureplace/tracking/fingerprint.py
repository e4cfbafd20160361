"""Fingerprints: what a binding's value *means* to compiled code, comparable within and across runs.

Compiled code depends on content, not identity: re-running an identical cell rebinds every name to
new objects that mean the same thing, and must invalidate nothing.  So functions are fingerprinted
by their code (bytecode, constants, names, nested code), defaults and closure contents; constants
by type and value (NumPy arrays by contents up to ``contents.INLINE_ARRAY_BYTES``, larger ones by
dtype, shape and layout: their contents are tracked by snapshot); modules by name; device
intrinsics and host callables by qualified name; an object whose class defines
``__fingerprint_parts__`` (an overload of gpureplace's ``extending``) by the values that gives.
Classes that device code reads into its code are fingerprinted by what it reads: an ``Enum``
class (and each of its members) by its members' names and values, a namedtuple class (and each
namedtuple) by its name, fields and defaults -- a class defined again with other members or
fields means other code, while its name stays the same.  Other classes by qualified name.
Line numbers are left out: moving code down a cell changes no generated instruction.

``fingerprint(value)`` returns a short hex string, or None when the value has no stable content (an
arbitrary object); such a value is then compared by identity in-process and makes the compiled
code ineligible for the disk cache.
"""

from __future__ import annotations

import enum
import hashlib
import re
import struct
import types as pytypes

import numpy as np

from .contents import INLINE_ARRAY_BYTES


class _Unstable(Exception):
    pass


def fingerprint(value):
    h = hashlib.blake2b(digest_size=16)
    try:
        _feed(h, value, 0)
    except _Unstable:
        return None
    except Exception:
        # a user's object that fails being looked at (a ``__getattr__`` that raises KeyError,
        # an ``__eq__`` or ``__len__`` that raises): no stable content, compared by identity
        return None
    return h.hexdigest()


def _feed(h, v, depth):
    if depth > 40:
        raise _Unstable
    up = h.update
    if isinstance(v, enum.Enum):
        # (before the scalars: an IntEnum member is an int)
        up(f"enum:{v.name};".encode())
        _feed(h, v.value, depth + 1)
        _feed_class(h, type(v), depth + 1)
        return
    if isinstance(v, float):
        # (by its bits: repr gives -nan and nan alike)
        up(b"float:" + struct.pack("<d", v) + b";")
        return
    if isinstance(v, complex):
        up(b"complex:" + struct.pack("<dd", v.real, v.imag) + b";")
        return
    if v is None or isinstance(v, (bool, int, str, bytes)):
        up(f"{type(v).__name__}:{v!r};".encode())
        return
    if isinstance(v, tuple):
        if type(v) is not tuple and not _feed_class(h, type(v), depth + 1):
            up(f"{type(v).__module__}.{type(v).__qualname__}:".encode())
        # (a namedtuple's fields are read by name: its class, fed above, is part of its meaning)
        up(b"tuple(")
        for item in v:
            _feed(h, item, depth + 1)
        up(b")")
        return
    if isinstance(v, frozenset):
        up(b"frozenset(")
        for item in sorted(v, key=repr):
            _feed(h, item, depth + 1)
        up(b")")
        return
    if isinstance(v, pytypes.FunctionType):
        _feed_function(h, v, depth)
        return
    if isinstance(v, pytypes.CodeType):
        _feed_code(h, v, depth)
        return
    if isinstance(v, pytypes.ModuleType):
        up(f"module:{v.__name__};".encode())
        return
    if isinstance(v, type) and _feed_class(h, v, depth + 1):
        return
    if hasattr(v, "__cuda_array_interface__"):
        # a device array: its address is in the code, which must not outlive the process
        # (no disk cache); rebinding the name is found by identity
        raise _Unstable
    if isinstance(v, np.ndarray):
        layout = "C" if v.flags.c_contiguous else "F" if v.flags.f_contiguous else "A"
        up(f"ndarray:{_dtype_text(v.dtype)}:{v.shape}:{layout};".encode())
        if v.nbytes <= INLINE_ARRAY_BYTES:
            up(v.tobytes())            # compiled into the code: part of what it means
        else:
            # Its contents live in device memory, copied there from the read's snapshot when
            # the module loads: the code (and a disk-cache entry) holds for any contents, and
            # an in-place change is found by comparing with that snapshot, not by hashing.
            up(b"in device memory;")
        return
    if isinstance(v, np.dtype):
        up(f"np:dtype:{_dtype_text(v)};".encode())
        return
    if isinstance(v, np.generic):
        # (its bits: a NaN's sign and a record's fields are in them, not always in its repr)
        up(f"np:{type(v).__name__}:{_dtype_text(v.dtype)}:".encode() + v.tobytes() + b";")
        return
    parts = getattr(type(v), "__fingerprint_parts__", None)
    if parts is not None:
        # an object defined by a few values of its own (a ``NumbaOverload``: its host, its
        # generator and the options given to ``@overload``)
        up(f"parts:{type(v).__module__}.{type(v).__qualname__};".encode())
        _feed(h, v.__fingerprint_parts__(), depth + 1)
        return
    py_func = getattr(v, "py_func", None)
    if isinstance(py_func, pytypes.FunctionType):
        # gpureplace functions (and Numba dispatchers) mean their Python source to a caller: a
        # callee compiles in its caller's context and options, so wrapping a plain function with
        # cuda.jit (as %%cuda does) changes nothing for the code that calls it -- but the
        # signatures it declares do (its arguments are converted to them).
        _feed_function(h, py_func, depth + 1)
        declared = getattr(v, "declared_signatures", ())
        if declared:
            up(f"declared:{[str(s) for s in declared]!r}:"
               f"{sorted((str(k), str(r)) for k, r in getattr(v, 'declared_returns', {}).items())!r};"
               .encode())
        return
    qual = _qualified_name(v)
    if qual is not None:
        up(f"named:{qual};".encode())
        return
    raise _Unstable


#: NumPy's functions with ``__array_function__`` dispatch (``np.sum``, ``np.sinc``: instances
#: of this C type since NumPy 1.25, plain functions before); a kernel means by them what
#: Numba's implementation for that name does, itself a fingerprinted callee of the kernel
_NUMPY_FUNCTION = type(np.sum) if not isinstance(np.sum, pytypes.FunctionType) else None


def _dtype_text(dt):
    """``dt`` in full: a record's field names, types and offsets too (its ``str`` is ``|V16``
    for every 16-byte record)."""
    return dt.str if dt.fields is None and dt.subdtype is None else repr(dt)


def _qualified_name(v):
    """``module.qualname`` for builtins, ufuncs, NumPy's functions, classes, intrinsic stubs;
    None otherwise."""
    if _NUMPY_FUNCTION is not None and isinstance(v, _NUMPY_FUNCTION):
        return f"{v.__module__}.{v.__qualname__}"
    if isinstance(v, (pytypes.BuiltinFunctionType, type, np.ufunc)):
        mod = getattr(v, "__module__", None) or ("numpy" if isinstance(v, np.ufunc) else "")
        return f"{mod}.{getattr(v, '__qualname__', getattr(v, '__name__', ''))}"
    mod = getattr(v, "__module__", "") or ""
    if mod.startswith("gpureplace.") and hasattr(v, "__qualname__"):
        return f"{mod}.{v.__qualname__}"
    try:
        from numba.core import types as nbtypes
        from numba.core.extending import _Intrinsic
        if isinstance(v, nbtypes.Type):
            return f"numba-type:{v}"
        if isinstance(v, _Intrinsic) and mod.startswith("numba.") and hasattr(v, "__qualname__"):
            # Numba's own intrinsics (``np.sum``'s ``_numpy_sum``): what they generate is this
            # Numba version's, part of the disk cache's key.  A user's intrinsic has no
            # fingerprint: its code generator's reads are not tracked.
            return f"numba-intrinsic:{mod}.{v.__qualname__}"
    except ImportError:      # pragma: no cover
        pass
    return None


def _feed_class(h, cls, depth):
    """Feed what device code reads from class ``cls`` -- an Enum class's members, a namedtuple
    class's fields and defaults -- and return True; False (nothing fed) for other classes."""
    if depth > 40:
        raise _Unstable
    if isinstance(cls, enum.EnumMeta):
        kind = "enum-class"
        # every name, aliases too (an alias is a name of its canonical member)
        content = [(name, member.name) for name, member in cls.__members__.items()]
        values = tuple(member.value for member in cls.__members__.values())
    elif issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
        kind = "namedtuple-class"
        content = list(cls._fields)
        defaults = getattr(cls, "_field_defaults", None) or {}
        values = tuple(sorted(defaults.items())) if isinstance(defaults, dict) else ()
    else:
        return False
    bases = [f"{b.__module__}.{b.__qualname__}" for b in cls.__mro__[1:]]
    h.update(f"{kind}:{cls.__module__}.{cls.__qualname__}:{bases!r}:{content!r};".encode())
    _feed(h, values, depth + 1)
    return True


def argtypes_fingerprint(argtypes):
    """A fingerprint of argument types (Numba types) for a key that must hold across processes:
    their text, and the content of the Python classes they carry -- a namedtuple's type reads
    ``p.y`` at the index its class gives ``y``, yet prints the same for ``namedtuple("P", "x
    y")`` and ``namedtuple("P", "y x")``.  None if one cannot be fingerprinted."""
    h = hashlib.blake2b(digest_size=16)
    try:
        for t in argtypes:
            _feed_type(h, t, 0)
    except _Unstable:
        return None
    return h.hexdigest()


def _feed_type(h, t, depth):
    if depth > 40:
        raise _Unstable
    h.update(f"type:{t};".encode())
    cls = getattr(t, "instance_class", None)
    if isinstance(cls, type) and not _feed_class(h, cls, depth + 1):
        h.update(f"class:{cls.__module__}.{cls.__qualname__};".encode())
    inner = getattr(t, "types", None)             # tuples (of namedtuples...)
    if isinstance(inner, tuple):
        for each in inner:
            _feed_type(h, each, depth + 1)
    dtype = getattr(t, "dtype", None)             # arrays, and tuples of one type
    if dtype is not None and dtype is not t and not isinstance(dtype, np.dtype):
        _feed_type(h, dtype, depth + 1)


#: A notebook cell's file: ipykernel's ``/tmp/ipykernel_<pid>/<hash of the cell>.py`` and
#: IPython's ``<ipython-input-<count>-<hash>>``: the process id and the execution count change
#: with every kernel restart while the cell stays the same.
_CELL_FILE = re.compile(r"(?:^|[/\\])ipykernel_\d+[/\\](?P<name>[^/\\]+)$")
_INPUT_FILE = re.compile(r"(?:^|[/\\])<ipython-input-\d+-(?P<hash>[0-9a-f]+)>$")


def stable_filename(path):
    """``path`` as it stays across processes: a notebook cell's file by its cell's hash alone
    (``_CELL_FILE``), any other file as it is."""
    m = _CELL_FILE.search(path)
    if m:
        return f"<ipykernel cell {m['name']}>"
    m = _INPUT_FILE.search(path)
    if m:
        return f"<ipython-input {m['hash']}>"
    return path


def positions_fingerprint(code):
    """Where ``code`` (and every code object nested in it) is: its file (a notebook cell's by
    the cell: ``stable_filename``), first line and line table.  Not part of what a function
    means (code that only moved compiles to the same instructions), but part of compiled code
    with line information (``lineinfo`` / ``debug``: its ``.loc`` directives name these
    lines)."""
    h = hashlib.blake2b(digest_size=16)
    stack = [code]
    while stack:
        c = stack.pop()
        h.update(f"{stable_filename(c.co_filename)}:{c.co_firstlineno}:".encode())
        h.update(c.co_linetable)
        stack.extend(k for k in reversed(c.co_consts) if isinstance(k, pytypes.CodeType))
    return h.hexdigest()


def function_parts_fingerprint(code, defaults, kwdefaults):
    """The fingerprint of a function's code, defaults and keyword defaults (what assigning
    ``__code__``, ``__defaults__``, ``__kwdefaults__`` changes in place), or None."""
    h = hashlib.blake2b(digest_size=16)
    try:
        _feed_parts(h, code, defaults, kwdefaults, 0)
    except _Unstable:
        return None
    return h.hexdigest()


def _feed_parts(h, code, defaults, kwdefaults, depth):
    _feed_code(h, code, depth + 1)
    _feed(h, defaults, depth + 1)
    if kwdefaults:
        _feed(h, tuple(sorted(kwdefaults.items())), depth + 1)


def _feed_function(h, fn, depth):
    h.update(f"function:{fn.__module__}.{fn.__qualname__};".encode())
    _feed_parts(h, fn.__code__, fn.__defaults__, fn.__kwdefaults__, depth)
    if fn.__closure__:
        for cell in fn.__closure__:
            try:
                contents = cell.cell_contents
            except ValueError:        # empty cell
                h.update(b"<empty cell>")
                continue
            _feed(h, contents, depth + 1)


def _feed_code(h, code, depth):
    h.update(code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                   code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
                   code.co_flags)).encode())
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            _feed_code(h, const, depth + 1)
        else:
            _feed(h, const, depth + 1)
