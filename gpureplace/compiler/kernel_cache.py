"""Compiled kernels on disk: what an entry's key hashes, what its metadata records, and when a
stored kernel may be used in this process (the directory itself: ``diskcache``).

The *key* hashes what is known before compiling: the kernel's own code (fingerprint), argument
types, options, the context stack (names, fast-math flags and every override's fingerprint), PTX
ISA, the versions of gpureplace, Numba and llvmlite, and the libdevice file in use (its path, size
and mtime: another ``GPUREPLACE_LIBDEVICE``, an upgraded wheel or another ``CUDA_HOME`` is another
key; found once per process without reading the file).  The *metadata* lists every function of
the call graph with the fingerprints of all the globals it read; an entry is used only when each of
them still has that fingerprint in this process.  So a callee redefined in a new process -- same
kernel source, different helper -- misses the cache instead of receiving the old binary.  A key
has one *variant* per call graph seen (a hash of that list), so a kernel whose callee alternates
between two definitions keeps both; the ``MAX_VARIANTS`` most recently used are kept.

A callee is found again by what reached it, not only by its name (``_Finder``): a lambda or a
closure that a validated read holds, an override's implementation, and an ``@overload``'s
implementation by asking the overload's generators again with the recorded argument types
(``overloads.answers``) -- always checked against its recorded fingerprint.

An entry is two files, ``kernels/<key>/<variant>.ptx`` and ``.json``; the JSON is sealed with a
digest over its canonical content (which includes the PTX's digest and length), so a damaged or
mismatched pair is a miss and is removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import types

from ..tracking import bindings
from ..tracking.functions import lines_in
from ..tracking.deps import UNSEEN, current_value, read_changed
from ..tracking.fingerprint import (argtypes_fingerprint, fingerprint, positions_fingerprint,
                                    stable_filename)
from ..version import __version__
from . import backend, diskcache, libdevice_bitcode, overloads
from .pipeline import KernelSpecialization
from .records import GlobalRead

FORMAT = 7          # bumped whenever the layout changes (generated code: CODEGEN_REVISION)


def _versions():
    import llvmlite
    import numba

    return (f"gpureplace={__version__};numba={numba.__version__};llvmlite={llvmlite.__version__};"
            f"codegen={backend.CODEGEN_REVISION};llvm={' '.join(backend.llvm_options())};"
            f"libdevice={libdevice_bitcode.key_identity()}")


def kernel_key(py_func, argtypes, options, context, ptx_isa):
    own = fingerprint(py_func)
    ctx = context.fingerprint()
    args = argtypes_fingerprint(argtypes)     # (with the classes they carry: namedtuple fields)
    if own is None or ctx is None or args is None:
        return None
    text = "|".join([str(FORMAT), own, str(py_func.__module__), py_func.__qualname__,
                     args, repr(options), ctx, str(ptx_isa), _versions()])
    return hashlib.blake2b(text.encode(), digest_size=20).hexdigest()


# ---------------------------------------------------------------------------------------------
# What a compiled call graph depends on, as JSON


def _function_ref(pyfunc):
    """(module, qualname) of ``pyfunc``: where another process looks for it (``_Finder``), or
    None for a function of no module."""
    module = pyfunc.__module__
    if not isinstance(module, str) or not module:
        return None
    return [module, pyfunc.__qualname__]


class _Finder:
    """Finds the functions of a stored call graph again in this process.  A callee is looked for
    first among the functions that the validated reads of the functions before it hold (the
    function a compiled call meant, whatever its name: a lambda bound to a global, a closure a
    factory made; the only way to the functions of a notebook's cell pickled by value to a Dask
    worker), then among the implementations of the context's overrides, then by importing its
    name.  Any function found must have the fingerprint recorded -- its code, defaults and
    closure contents -- so two lambdas of one module, or two closures of one factory, are never
    taken one for the other.  An overload's implementation is found by asking its generators
    again (``_from_overloads``)."""

    def __init__(self, context):
        self.context = context
        self.reached = {}
        self.overridden = None

    def note(self, value):
        """Remember ``value`` (a read's value) if it is a function, or a gpureplace function's
        Python function."""
        _add_function(self.reached, value)

    def find(self, ref, code):
        key = tuple(ref)
        found = _with_code(code, *self.reached.get(key, ()))
        if found is None:
            if self.overridden is None:
                self.overridden = {}
                for layer in self.context.stack():
                    for ovr in layer.overrides():
                        _add_function(self.overridden, ovr.impl)
            found = _with_code(code, *self.overridden.get(key, ()))
        if found is None:
            found = _with_code(code, _find_function(ref))
        return found


def _add_function(table, value):
    try:
        pyfunc = getattr(value, "py_func", value)
    except Exception:               # (a user's object whose __getattr__ raises)
        return
    if isinstance(pyfunc, types.FunctionType):
        known = table.setdefault((pyfunc.__module__, pyfunc.__qualname__), [])
        if all(each is not pyfunc for each in known):
            known.append(pyfunc)


def describe_for_disk(cf, positions=False):
    """JSON-able dependency records of ``cf``'s whole call graph, or None if not reproducible:
    a read without a fingerprint, or a callee another process could not find again the way
    ``_validate`` looks for it.  ``positions``: the code has line information (lineinfo, debug),
    so each function's place in its file is recorded too: moved code is then a miss."""
    graph = cf.closure()
    made = overloads.implementations_made(cf.context) if len(graph) > 1 else {}
    finder = _Finder(cf.context)
    nodes, values = [], []
    for i, each in enumerate(graph):
        ref = _function_ref(each.pyfunc)
        code = fingerprint(each.pyfunc)
        if ref is None or code is None:
            return None
        node = {"function": ref, "code": code}
        if positions:
            node["lines"] = positions_fingerprint(each.pyfunc.__code__)
        # (the kernel itself is at hand when loading)
        entries = [e for e in made.get(id(each.pyfunc), ()) if e[0] is each.pyfunc] if i else ()
        origins = _overload_origins(entries, values, cf.context, code) if entries else None
        if origins is not None:
            node["overload"] = origins
        elif any(e[4] for e in entries) or (i and finder.find(ref, code) is None):
            # (a library's overload -- its generators are those of this Numba version -- is
            # found by its name when its origin cannot be recorded; a user's is not kept)
            return None
        reads = []
        for rec in each.global_reads:
            if rec.fingerprint is None:
                return None
            owner = rec.owner.__name__ if rec.owner is not None else None
            reads.append([rec.kind, rec.name, owner, rec.fingerprint, rec.lineno])
            finder.note(rec.value)
        node["reads"] = reads
        nodes.append(node)
        values.append([rec.value for rec in each.global_reads])
    if not _overloads_recorded(nodes, values, cf.context):
        return None
    return nodes


def _overload_origins(entries, values, context, code):
    """What ``_from_overloads`` needs to find the implementation with fingerprint ``code`` again
    (``entries``: how overload templates gave it, ``implementations_made``): for each, the read
    of an earlier function that holds the host (``[function, read]``), the argument types as
    text, and what every generator of the host answers for them.  None if one cannot be
    recorded: a host no earlier function read (an overloaded method, an inlined call), an
    argument type without a text, a generator or function without a fingerprint."""
    origins = []
    for _, host, args, kws, _ in entries:
        where = next(([j, r] for j, held in enumerate(values) for r, value in enumerate(held)
                      if value is host), None)
        arg_texts = [overloads.type_text(a) for a in args]
        kw_texts = [[k, overloads.type_text(v)] for k, v in sorted(kws.items())]
        if where is None or None in arg_texts or any(t is None for _, t in kw_texts):
            return None
        said = overloads.answers(host, context, args, kws)
        if said is None or all(fingerprint(fn) != code for fn in said[1]):
            return None         # (a generator that answers otherwise each time it is asked)
        origin = {"host": where, "args": arg_texts, "kws": kw_texts, "answers": said[0]}
        if origin not in origins:
            origins.append(origin)
    return origins


def _overloads_recorded(nodes, values, context):
    """Whether every host with a user's overload that the graph reads leads to an
    implementation recorded with its origin: otherwise what its overloads answered is not in
    the entry (a call that fell through to the host's own body, or was inlined), and a process
    where they answer otherwise would be served this code."""
    hosts = overloads.user_hosts(context)
    if not hosts:
        return True
    recorded = {id(values[j][r]) for node in nodes for j, r in
                (o["host"] for o in node.get("overload", ()))}
    return all(id(value) in recorded or hosts.get(id(value)) is not value
               or not overloads.users_overload(value, context)
               for held in values for value in held)


def _nodes_well_formed(nodes):
    """Whether ``nodes`` (read from disk) has the shape ``describe_for_disk`` gives, checked
    before ``_validate`` reads it: a field added there is checked here too."""
    if not isinstance(nodes, list) or not nodes:
        return False
    for node in nodes:
        if not (isinstance(node, dict) and isinstance(node.get("code"), str)
                and _strings(node.get("function"), 2) and isinstance(node.get("reads"), list)):
            return False
        for read in node["reads"]:
            if not (isinstance(read, list) and len(read) == 5 and _strings(read[:2], 2)
                    and (read[2] is None or isinstance(read[2], str))
                    and isinstance(read[3], str) and (read[4] is None or isinstance(read[4], int))):
                return False
        if "lines" in node and not isinstance(node["lines"], str):
            return False
        if "overload" in node and not _origins_well_formed(node["overload"]):
            return False
    return True


def _origins_well_formed(origins):
    if not isinstance(origins, list) or not origins:
        return False
    for o in origins:
        if not (isinstance(o, dict) and isinstance(o.get("host"), list) and len(o["host"]) == 2
                and all(type(n) is int for n in o["host"])
                and isinstance(o.get("args"), list) and all(isinstance(a, str) for a in o["args"])
                and isinstance(o.get("kws"), list) and all(_strings(k, 2) for k in o["kws"])
                and isinstance(o.get("answers"), list)
                and all(_strings(a, 3) for a in o["answers"])):
            return False
    return True


def _strings(value, n):
    return isinstance(value, list) and len(value) == n and all(isinstance(v, str) for v in value)


def _find_function(ref):
    """The function importing ``ref``'s name finds (a ``<lambda>`` or ``<locals>`` name finds
    nothing), or None."""
    module, qualname = ref
    obj = sys.modules.get(module)
    try:
        for part in qualname.split("."):
            if obj is None:
                return None
            obj = getattr(obj, part, None)
        return getattr(obj, "py_func", obj)
    except Exception:           # (a module's __getattr__ that raises something else)
        return None


class CachedFunction:
    """Dependency records of one function of a disk-loaded kernel, in ``deps.check``'s terms."""

    def __init__(self, pyfunc, context, reads, callees=(), options=None):
        self.pyfunc = pyfunc
        self.context = context
        self.options = options       # the kernel's (line information: tracking/functions.py)
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


def _with_code(code, *candidates):
    """The first of ``candidates`` whose fingerprint is ``code``, or None."""
    for pyfunc in candidates:
        if pyfunc is not None and fingerprint(pyfunc) == code:
            return pyfunc
    return None


def _from_overloads(origins, funcs, context, code):
    """The implementation with fingerprint ``code`` that the overload generators recorded in
    ``origins`` give now, asked again with the recorded argument types -- if every generator of
    each host (held by a validated read of ``funcs``) answers what it answered then -- or None."""
    found = None
    for origin in origins:
        j, r = origin["host"]
        if not (0 <= j < len(funcs) and 0 <= r < len(funcs[j].global_reads)):
            return None
        host = funcs[j].global_reads[r].value
        try:
            args = [overloads.parse_type(text) for text in origin["args"]]
            kws = {k: overloads.parse_type(text) for k, text in origin["kws"]}
        except (ValueError, RecursionError):
            return None
        said = overloads.answers(host, context, args, kws)
        if said is not None and not said[0] and origin["answers"]:
            # Numba's own overloads (``np.sum``'s) are registered as its registries load, at a
            # process's first compile: load them (what a compile would do first) and ask again
            _load_registries(context)
            said = overloads.answers(host, context, args, kws)
        if said is None or said[0] != origin["answers"]:
            return None         # another body, another closure value, another choice
        found = found or _with_code(code, *said[1])
    return found


def _load_registries(context):
    from numba.core.compiler_lock import global_compiler_lock

    from .target import compilers
    with global_compiler_lock:
        compilers(context)[1].refresh()


def _validate(nodes, context, kernel_func, options=None):
    """CachedFunction of the kernel if every recorded read still holds (and, for code with
    line information, every function is where it was), else None."""
    funcs, finder = [], _Finder(context)
    positions = lines_in(options)
    for i, node in enumerate(nodes):
        if i == 0:
            pyfunc = _with_code(node["code"], kernel_func)
        elif "overload" in node:
            pyfunc = _from_overloads(node["overload"], funcs, context, node["code"])
        else:
            pyfunc = finder.find(node["function"], node["code"])
        if pyfunc is None:
            return None
        if positions and node.get("lines") != positions_fingerprint(pyfunc.__code__):
            return None                     # moved in its file: the .loc lines would be wrong
        reads = []
        probe = CachedFunction(pyfunc, context, [])     # what the reads are resolved from
        for kind, name, owner, fp, lineno in node["reads"]:
            owner_mod = sys.modules.get(owner) if owner else None
            if owner and owner_mod is None:
                return None
            # (a closure variable's namespace is "<closure>", as records.py names it when it
            # compiles: the name of its device-memory array, resident_symbol, is built from it)
            namespace = "<closure>" if kind == "freevar" else owner or pyfunc.__module__
            rec = GlobalRead(kind, namespace, name, UNSEEN, lineno, owner_mod, fp)
            if read_changed(probe, rec) is not None:
                return None                 # redefined (or gone) since it was stored
            now = current_value(probe, rec)
            finder.note(now)
            reads.append(GlobalRead(kind, rec.namespace, name, now, lineno, owner_mod, fp))
        funcs.append(CachedFunction(pyfunc, context, reads, options=options))
    kernel = funcs[0]
    kernel.callees = funcs[1:]
    kernel.context_fp = context.fingerprint()
    # Loaded code depends on these bindings exactly as compiled code does: the cell hook must
    # watch them, or a helper redefined after a warm start would never move the world.
    for each in funcs:
        bindings.track_compiled(each)
    return kernel


# ---------------------------------------------------------------------------------------------
# Store and load


def _digest(data: bytes):
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def _canonical(meta):
    return json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()


def _seal(meta):
    """The JSON text of ``meta`` with a ``digest`` over its canonical content."""
    return json.dumps(dict(meta, digest=_digest(_canonical(meta))), sort_keys=True).encode()


def _unseal(raw: bytes):
    """The metadata ``_seal`` wrote, or None if ``raw`` is not exactly that."""
    try:
        meta = json.loads(raw)
    except (ValueError, RecursionError):         # (a UnicodeDecodeError is a ValueError)
        return None
    if not isinstance(meta, dict):
        return None
    digest = meta.pop("digest", None)
    if not isinstance(digest, str) or digest != _digest(_canonical(meta)):
        return None
    return meta


def _well_formed(meta, ptx):
    """Whether sealed ``meta`` describes ``ptx`` with the fields and types ``load`` reads."""
    return (meta.get("format") == FORMAT and isinstance(meta.get("name"), str)
            and isinstance(meta.get("llvm_ir", ""), str)
            and meta.get("ptx_bytes") == len(ptx) and meta.get("ptx_sha") == _digest(ptx)
            and _nodes_well_formed(meta.get("nodes")))


def store(key, spec):
    """Write ``spec`` (a KernelSpecialization) under ``key``; silently skip what cannot be kept."""
    if not diskcache.enabled or key is None:
        return False
    nodes = describe_for_disk(spec.compiled, lines_in(spec.options))
    if nodes is None:
        return False
    ptx = spec.ptx.encode()
    meta = {"format": FORMAT, "name": spec.name, "param_format": spec.param_format,
            "nodes": nodes, "ptx_sha": _digest(ptx), "ptx_bytes": len(ptx), "llvm_ir": spec.llvm_ir}
    # One entry per variant of the call graph: a kernel whose callee alternates between two
    # definitions keeps both, instead of each overwriting the other.
    variant = hashlib.blake2b(json.dumps(nodes, sort_keys=True).encode(), digest_size=6).hexdigest()
    sealed = _seal(meta)
    for _ in range(2):
        d = diskcache.ensure_dir()
        if d is None:
            return False
        folder = os.path.join(d, diskcache.KERNELS, key)
        try:
            diskcache.make_folders(d, diskcache.KERNELS, key)
            with diskcache.write_lock:
                # PTX first: a JSON (what load looks for) is never seen before its PTX.
                diskcache.atomic_write(os.path.join(folder, variant + ".ptx"), ptx)
                diskcache.atomic_write(os.path.join(folder, variant + ".json"), sealed)
        except FileNotFoundError:
            diskcache.forget(d)      # removed under us (by hand, or a scan took an empty folder)
            continue                # make it (and mark it) again, once
        except OSError:
            return False            # full disk, read-only: the kernel is compiled all the same
        diskcache.account(d, len(ptx) + len(sealed))
        _trim(folder, variant)
        return True
    return False


def load(key, py_func, argtypes, options, context, make=KernelSpecialization):
    """A KernelSpecialization from disk, or None (missing, stale for this process, or damaged:
    then removed).  Reads only the folder of ``key``; the most recently used variant first."""
    if not diskcache.enabled or key is None:
        return None
    d = diskcache.ensure_dir()
    if d is None:
        return None
    folder = os.path.join(d, diskcache.KERNELS, key)
    for variant, _ in _variants(folder):
        spec = _load_entry(folder, variant, py_func, argtypes, options, context, make)
        if spec is not None:
            return spec
    return None


#: Variants kept per key: a kernel whose helpers a notebook redefined many times would otherwise
#: gather one entry per definition, and a recompile reads every one of them before it compiles.
MAX_VARIANTS = 8


def _variants(folder):
    """``[(variant, stat of its JSON)]`` in ``folder``, the most recently used first."""
    found = []
    try:
        with os.scandir(folder) as it:
            for entry in it:
                m = diskcache.ENTRY_FILE.match(entry.name)
                if m and m.group(2) == "json":
                    try:
                        found.append((m.group(1), entry.stat(follow_symlinks=False)))
                    except OSError:
                        continue
    except OSError:
        return []
    found.sort(key=lambda item: (-item[1].st_mtime_ns, item[0]))
    return found


def _trim(folder, keep):
    """Remove the least recently used variants of ``folder`` beyond ``MAX_VARIANTS`` (never
    ``keep``, the one just written)."""
    others = [variant for variant, _ in _variants(folder) if variant != keep]
    for variant in others[MAX_VARIANTS - 1:]:
        _remove_entry(folder, variant)


#: Entries read in this process: (JSON path) -> (identity of both files, metadata, PTX text).
#: A variant is read, unsealed and checked once; later loads (a recompile after each
#: redefinition looks at every variant of its key) only check its dependencies.  The files are
#: replaced, never rewritten in place, so their inode, size and change time identify them.
_read = {}


def _identity(path):
    st = os.stat(path)
    return (st.st_ino, st.st_dev, st.st_size, st.st_ctime_ns)


def _read_entry(folder, variant):
    """(metadata, PTX text) of a sound entry, or None (missing, or damaged: then removed)."""
    meta_path = os.path.join(folder, variant + ".json")
    ptx_path = os.path.join(folder, variant + ".ptx")
    try:
        ident = (_identity(meta_path), _identity(ptx_path))
    except FileNotFoundError:
        if os.path.exists(meta_path):       # half an entry (its PTX is written first)
            _remove_entry(folder, variant)
        _read.pop(meta_path, None)
        return None
    except OSError:
        _remove_entry(folder, variant)
        return None
    known = _read.get(meta_path)
    if known is not None and known[0] == ident:
        return known[1], known[2]
    try:
        with open(meta_path, "rb") as fh:
            raw = fh.read()
        with open(ptx_path, "rb") as fh:
            ptx = fh.read()
    except FileNotFoundError:
        return None                 # evicted since the listing
    except OSError:
        _remove_entry(folder, variant)
        return None
    meta = _unseal(raw)
    if meta is None or not _well_formed(meta, ptx):
        _remove_entry(folder, variant)      # damaged, or half of another write: compile again
        return None
    try:
        text = ptx.decode()
    except UnicodeDecodeError:
        _remove_entry(folder, variant)
        return None
    if len(_read) > 4096:
        _read.clear()
    _read[meta_path] = (ident, meta, text)
    return meta, text


def _load_entry(folder, variant, py_func, argtypes, options, context, make):
    found = _read_entry(folder, variant)
    if found is None:
        return None
    meta, text = found
    meta_path = os.path.join(folder, variant + ".json")
    try:
        root = _validate(meta["nodes"], context, py_func, options)
    except Exception:
        # Unreachable for a sealed, well-formed entry; a field added to the metadata without a
        # check in _nodes_well_formed would land here, and must cost a compile, not the user.
        _remove_entry(folder, variant)
        return None
    if root is None:
        return None           # a dependency differs in this process: compile afresh
    try:
        os.utime(meta_path)   # LRU bookkeeping (and the order variants are tried in)
        _read[meta_path] = ((_identity(meta_path), _read[meta_path][0][1]), meta, text)
    except (OSError, KeyError):
        pass
    if lines_in(options):
        text = _current_cell_files(text, root)
    spec = make(root, meta["name"], argtypes, text, meta.get("llvm_ir", ""),
                                options, 0.0)
    spec.from_disk = True
    return spec


_FILE_DIRECTIVE = re.compile(r'^(\s*\.file\s+\d+\s+")([^"]*)(")', re.M)


def _current_cell_files(ptx, root):
    """``ptx`` (with line information, from disk) naming this process's files of the notebook
    cells its functions come from: the process that compiled it named its own (ipykernel's
    ``/tmp/ipykernel_<pid>/...``), which a debugger or profiler could no longer find."""
    now = {}
    for each in root.closure():
        path = each.pyfunc.__code__.co_filename
        stable = stable_filename(path)
        if stable != path:
            now[stable] = os.path.abspath(path)    # (as Numba names the file: made absolute)
    if not now:
        return ptx

    def current(m):
        path = now.get(stable_filename(m.group(2)))
        return m.group(0) if path is None else f"{m.group(1)}{path}{m.group(3)}"
    return _FILE_DIRECTIVE.sub(current, ptx)


def _remove_entry(folder, variant):
    _read.pop(os.path.join(folder, variant + ".json"), None)
    for suffix in (".json", ".ptx"):        # the JSON first: without it nothing reads the PTX
        diskcache.unlink(os.path.join(folder, variant + suffix))
