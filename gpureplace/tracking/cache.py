"""The disk cache: compiled kernels survive interpreter restarts, and are never served stale.

Layout: one directory per user (``$GPUREPLACE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpureplace``,
else ``~/.cache/gpureplace``), created 0700; one refused if others can write to it.  Each entry is
``<key>.ptx`` plus ``<key>.json`` (metadata, never pickles), written atomically (temp file +
rename), with a checksum of the PTX.

The *key* hashes what is known before compiling: the kernel's own code (fingerprint), argument
types, options, the context stack (names, fast-math flags and every override's fingerprint), PTX
ISA and the versions of gpureplace, Numba and llvmlite.  The *metadata* lists every function of
the call graph with the fingerprints of all the globals it read; an entry is used only when each of
them still has that fingerprint in this process.  So a callee redefined in a new process -- same
kernel source, different helper -- misses the cache instead of receiving the old binary.

A size cap evicts least-recently-used entries; ``clear()`` empties the cache; ``GPUREPLACE_CACHE=0``
(or ``gpureplace.cache.enabled = False``) turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import tempfile
import threading

from ..errors import GPUReplaceError
from . import bindings
from .fingerprint import fingerprint

FORMAT = 4          # bumped whenever generated code changes for the same inputs
enabled = os.environ.get("GPUREPLACE_CACHE", "1").lower() not in ("0", "false", "no", "off")
#: Size cap in bytes (LRU eviction beyond it).
max_bytes = int(os.environ.get("GPUREPLACE_CACHE_MAX_BYTES", 256 << 20))
_explicit_dir = None
_lock = threading.Lock()
_checked_dirs = set()


class CacheDirectoryError(GPUReplaceError, PermissionError):
    pass


def set_directory(path):
    global _explicit_dir
    _explicit_dir = None if path is None else os.path.abspath(os.path.expanduser(str(path)))


def explicit_directory():
    """The directory set by ``set_directory`` (``%config GPUReplace.cache_dir``), or None."""
    return _explicit_dir


def directory():
    if _explicit_dir:
        return _explicit_dir
    env = os.environ.get("GPUREPLACE_CACHE_DIR")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpureplace")


def _ensure_dir():
    path = directory()
    if path in _checked_dirs:
        return path
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.stat(path)
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheDirectoryError(
            f"gpureplace refuses the cache directory {path}: other users can write to it "
            f"(mode {stat.S_IMODE(st.st_mode):o}); run `chmod 700 {path}` or set "
            f"GPUREPLACE_CACHE_DIR to a private directory")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise CacheDirectoryError(f"gpureplace refuses the cache directory {path}: it belongs "
                                  f"to another user")
    _checked_dirs.add(path)
    return path


def _versions():
    import llvmlite
    import numba

    from .. import __version__
    from ..compiler.backend import CODEGEN_REVISION, llvm_options
    return (f"gpureplace={__version__};numba={numba.__version__};llvmlite={llvmlite.__version__};"
            f"codegen={CODEGEN_REVISION};llvm={' '.join(llvm_options())}")


def context_fingerprint(context):
    """Hash of the context stack: names, fast-math flags, options and every override."""
    h = hashlib.blake2b(digest_size=16)
    for layer in context.stack():
        h.update(f"{layer.name}|{layer.fastmath}|{sorted(layer.options.items())!r};".encode())
        if layer.parent is None:
            continue       # the built-in table is part of the gpureplace version
        for ovr in sorted(layer.overrides(), key=lambda o: (repr(_qual(o.host)), repr(o.types))):
            fp = fingerprint(ovr.impl)
            if fp is None:
                return None
            h.update(f"{_qual(ovr.host)}->{fp}|{ovr.types!r};".encode())
    return h.hexdigest()


def _qual(obj):
    from ..dispatch.context import _name_of
    return _name_of(obj)


def kernel_key(py_func, argtypes, options, context, ptx_isa):
    own = fingerprint(py_func)
    ctx = context_fingerprint(context)
    if own is None or ctx is None:
        return None
    text = "|".join([str(FORMAT), own, str(py_func.__module__), py_func.__qualname__,
                     repr(tuple(str(t) for t in argtypes)), repr(options), ctx, str(ptx_isa),
                     _versions()])
    return hashlib.blake2b(text.encode(), digest_size=20).hexdigest()


# ---------------------------------------------------------------------------------------------
# What a compiled call graph depends on, as JSON


def _function_ref(pyfunc):
    """(module, qualname) that finds ``pyfunc`` again in another process, or None."""
    if (not pyfunc.__module__ or "<locals>" in pyfunc.__qualname__
            or "<lambda>" in pyfunc.__qualname__):
        return None
    return [pyfunc.__module__, pyfunc.__qualname__]


def describe_for_disk(cf):
    """JSON-able dependency records of ``cf``'s whole call graph, or None if not reproducible."""
    nodes = []
    for i, each in enumerate(cf.closure()):
        # The kernel itself is at hand when loading; callees must be found again by name.
        ref = [each.pyfunc.__module__, each.pyfunc.__qualname__] if i == 0 else \
            _function_ref(each.pyfunc)
        if ref is None:
            return None
        reads = []
        for rec in each.global_reads:
            if rec.fingerprint is None:
                return None
            owner = rec.owner.__name__ if rec.owner is not None else None
            reads.append([rec.kind, rec.name, owner, rec.fingerprint, rec.lineno])
        nodes.append({"function": ref, "code": fingerprint(each.pyfunc), "reads": reads})
    return nodes


def _find_function(ref):
    module, qualname = ref
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        if obj is None:
            return None
        obj = getattr(obj, part, None)
    obj = getattr(obj, "py_func", obj)
    return obj


class CachedFunction:
    """Dependency records of one function of a disk-loaded kernel, in ``deps.check``'s terms."""

    def __init__(self, pyfunc, context, reads, callees=()):
        self.pyfunc = pyfunc
        self.context = context
        self.global_reads = reads
        self.resolutions = []
        self.callees = list(callees)
        self.overrides_used = []
        self.checked_age = -1

    @property
    def qualname(self):
        return f"{self.pyfunc.__module__}.{self.pyfunc.__qualname__}"

    def closure(self):
        return [self] + [c for c in self.callees]


def _validate(nodes, context, kernel_func):
    """CachedFunction of the kernel if every recorded read still holds, else None."""
    from ..compiler.records import GlobalRead
    from .deps import MISSING, current_value
    funcs = []
    for i, node in enumerate(nodes):
        pyfunc = kernel_func if i == 0 else _find_function(node["function"])
        if pyfunc is None or fingerprint(pyfunc) != node["code"]:
            return None
        reads = []
        for kind, name, owner, fp, lineno in node["reads"]:
            owner_mod = sys.modules.get(owner) if owner else None
            if owner and owner_mod is None:
                return None
            rec = GlobalRead(kind, owner or pyfunc.__module__, name, None, lineno, owner_mod, fp)
            probe = CachedFunction(pyfunc, context, [])
            now = current_value(probe, rec)
            if now is MISSING or fingerprint(now) != fp:
                return None
            reads.append(GlobalRead(kind, rec.namespace, name, now, lineno, owner_mod, fp))
        funcs.append(CachedFunction(pyfunc, context, reads))
    kernel = funcs[0]
    kernel.callees = funcs[1:]
    kernel.context_fp = context_fingerprint(context)
    # Loaded code depends on these bindings exactly as compiled code does: the cell hook must
    # watch them, or a helper redefined after a warm start would never move the world.
    for each in funcs:
        bindings.track_compiled(each)
    return kernel


# ---------------------------------------------------------------------------------------------
# Store and load


def _paths(key):
    d = _ensure_dir()
    return os.path.join(d, key + ".ptx"), os.path.join(d, key + ".json")


def _atomic_write(path, data: bytes):
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def store(key, spec):
    """Write ``spec`` (a KernelSpecialization) under ``key``; silently skip what cannot be kept."""
    if not enabled or key is None:
        return False
    nodes = describe_for_disk(spec.compiled)
    if nodes is None:
        return False
    ptx = spec.ptx.encode()
    meta = {"format": FORMAT, "name": spec.name, "param_format": spec.param_format,
            "nodes": nodes, "ptx_sha": hashlib.blake2b(ptx, digest_size=20).hexdigest(),
            "ptx_bytes": len(ptx), "llvm_ir": spec.llvm_ir}
    # One entry per variant of the call graph: a kernel whose callee alternates between two
    # definitions keeps both, instead of each overwriting the other.
    variant = hashlib.blake2b(json.dumps(nodes, sort_keys=True).encode(), digest_size=6).hexdigest()
    try:
        ptx_path, meta_path = _paths(f"{key}-{variant}")
        with _lock:
            _atomic_write(ptx_path, ptx)
            _atomic_write(meta_path, json.dumps(meta).encode())
        _evict()
    except CacheDirectoryError:
        raise
    except OSError:
        return False
    return True


def load(key, py_func, argtypes, options, context):
    """A KernelSpecialization from disk, or None (missing, stale for this process, or corrupt)."""
    if not enabled or key is None:
        return None
    try:
        d = _ensure_dir()
        names = [n[:-5] for n in os.listdir(d) if n.startswith(key + "-") and n.endswith(".json")]
    except FileNotFoundError:
        return None
    for entry in names:
        spec = _load_entry(entry, py_func, argtypes, options, context)
        if spec is not None:
            return spec
    return None


def _load_entry(key, py_func, argtypes, options, context):
    ptx_path, meta_path = _paths(key)
    try:
        with open(meta_path, "rb") as fh:
            meta = json.loads(fh.read())
        with open(ptx_path, "rb") as fh:
            ptx = fh.read()
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        _remove(key)
        return None
    if (not isinstance(meta, dict) or meta.get("format") != FORMAT
            or meta.get("ptx_bytes") != len(ptx)
            or meta.get("ptx_sha") != hashlib.blake2b(ptx, digest_size=20).hexdigest()):
        _remove(key)          # truncated or corrupted: drop it, the caller recompiles
        return None
    root = _validate(meta["nodes"], context, py_func)
    if root is None:
        return None           # a dependency differs in this process: compile afresh
    try:
        os.utime(meta_path)   # LRU bookkeeping
    except OSError:
        pass
    from ..compiler.kernel import KernelSpecialization
    spec = KernelSpecialization(root, meta["name"], argtypes, ptx.decode(), meta.get("llvm_ir", ""),
                                options, 0.0)
    spec.from_disk = True
    return spec


def _remove(key):
    for path in _paths(key):
        try:
            os.unlink(path)
        except OSError:
            pass


def _evict():
    d = directory()
    entries = []
    total = 0
    for name in os.listdir(d):
        if not name.endswith(".json"):
            continue
        key = name[:-5]
        try:
            st_m = os.stat(os.path.join(d, name))
            size = st_m.st_size + os.stat(os.path.join(d, key + ".ptx")).st_size
        except OSError:
            continue
        entries.append((st_m.st_mtime, key, size))
        total += size
    entries.sort()
    while total > max_bytes and entries:
        _, key, size = entries.pop(0)
        _remove(key)
        total -= size


def clear():
    """Delete every entry of the disk cache."""
    d = directory()
    if not os.path.isdir(d):
        return 0
    n = 0
    for name in os.listdir(d):
        if name.endswith((".ptx", ".json", ".bc", ".ll")) or name.startswith(".tmp-"):
            try:
                os.unlink(os.path.join(d, name))
                n += name.endswith(".json")
            except OSError:
                pass
    return n


def info():
    d = directory()
    if not os.path.isdir(d):
        return {"directory": d, "entries": 0, "bytes": 0, "enabled": enabled}
    names = os.listdir(d)
    size = sum(os.path.getsize(os.path.join(d, n)) for n in names if not n.startswith(".tmp-"))
    return {"directory": d, "entries": sum(n.endswith(".json") for n in names), "bytes": size,
            "enabled": enabled}
