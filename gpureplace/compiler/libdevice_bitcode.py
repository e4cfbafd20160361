"""libdevice's bitcode: where to find it, what it offers, and pruned copies to link (the functions
themselves, callable from device code: ``gpureplace.libdevice``).

libdevice is NVIDIA's bitcode library of math functions (``__nv_sinf``, ``__nv_pow``, ...).  Linking
all of it into every kernel costs tens of milliseconds and bloats the PTX, so we keep the parsed
bitcode once per process and hand out, per set of needed functions, a pruned copy holding only
those functions and what they call (everything internal, so the optimiser can drop what it inlines).

A damaged libdevice must be an error that says what to do, not a dead interpreter: LLVM aborts the
process on some damaged bitcode (llvmlite's parse_bitcode ends in an assertion or a segfault on a
few flipped bytes; an empty, random or text file and most truncations only raise).  So before LLVM
reads a file in this process, it is checked (``_read_libdevice``): the bitcode magic, whole 32-bit
words, a plausible size; then either its SHA-256 is known -- NVIDIA's releases in
``KNOWN_LIBDEVICE``, or the hash recorded by the wheel that installed it (pip's RECORD) -- or a
child process parses it first (about 0.3 s, once: its IR text is kept in the disk cache, whose
presence later says the file parsed).  A hash list alone would refuse every release it does not
name; a child for every file would slow every cold start.  A bad file raises ``LibdeviceInvalid``.
"""

from __future__ import annotations

import base64
import glob
import hashlib
import os
import re
import signal
import struct
import subprocess
import sys
import threading

import llvmlite.binding as llvm

from ..errors import LibdeviceNotFound
from .libdevice_tuning import DEFINE_NAME, contract_float_ops, tune_trig


class LibdeviceInvalid(LibdeviceNotFound):
    """A libdevice file was found, but it is not usable bitcode (empty, damaged, not libdevice)."""

_lock = threading.Lock()
_parsed = None            # the whole of libdevice, parsed once
_pruned = {}              # frozenset(names) -> bitcode bytes of the pruned module
_table = None             # name -> (return llvm type str, [arg llvm type str])

#: An explicit path, set by ``gpureplace.config`` or the ``GPUREPLACE_LIBDEVICE`` variable.
explicit_path = None


def _candidates():
    env = os.environ.get("GPUREPLACE_LIBDEVICE")
    if explicit_path:
        yield "explicit setting gpureplace.compiler.libdevice.explicit_path", explicit_path
    if env:
        yield "GPUREPLACE_LIBDEVICE", env
    # The nvidia-nvvm wheel (CUDA 13: nvidia/cu13/nvvm; CUDA 12: nvidia/cuda_nvcc/nvvm).
    for base in sys.path:
        if not base or not os.path.isdir(os.path.join(base, "nvidia")):
            continue
        for pat in ("nvidia/cu*/nvvm/libdevice/libdevice*.bc",
                    "nvidia/cuda_nvcc/nvvm/libdevice/libdevice*.bc",
                    "nvidia/nvvm/libdevice/libdevice*.bc"):
            for hit in sorted(glob.glob(os.path.join(base, pat))):
                yield "the nvidia-nvvm wheel", hit
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            yield var, os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc")
    yield "/usr/local/cuda", "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc"


def find_libdevice() -> str:
    """Path of libdevice.10.bc, or a LibdeviceNotFound naming every place that was searched."""
    return _find()[1]


def _find():
    """(where it was found, path) of the libdevice to use."""
    looked = []
    for where, path in _candidates():
        if os.path.isfile(path):
            return where, path
        if where.startswith(("explicit", "GPUREPLACE_LIBDEVICE")):
            # What the user named, or nothing: another libdevice in its place would be a surprise.
            raise LibdeviceNotFound(
                f"{where} names {path}, which is not a file. Correct it, or unset it to use the "
                f"libdevice found automatically (`pip install nvidia-nvvm` provides one).")
        looked.append(f"  {where}: {path}")
    raise LibdeviceNotFound(
        "libdevice.10.bc was not found. Install it with `pip install nvidia-nvvm` (or the "
        "gpureplace[cuda13] extra), set CUDA_HOME, or set GPUREPLACE_LIBDEVICE to its path. "
        "Searched:\n" + "\n".join(looked))


#: SHA-256 of NVIDIA's libdevice.10.bc releases known to parse (each checked against the hash
#: that its wheel's RECORD lists): these skip the check in a child process.
KNOWN_LIBDEVICE = {
    "7e46db290976f7d8988b85c8820a135595ede636faa1ca7de63e67f8c775456f": "nvidia-nvvm 13.5.37",
    "91334d6e12748f6cb5bbf0a1cd965a56bcd93dc4f496d2e5c5f8c6e523094356": "nvidia-nvvm 13.0.88",
}
#: Sizes a libdevice can plausibly have (NVIDIA's are 400-500 KiB).
PLAUSIBLE_BYTES = (64 << 10, 64 << 20)
#: Seconds a child process may take to parse a libdevice file.
CHECK_SECONDS = 120

_BITCODE_MAGIC = b"BC\xc0\xde"
_WRAPPER_MAGIC = struct.pack("<I", 0x0B17C0DE)
_trusted = set()          # (path, size, mtime_ns) of files known to parse, in this process
_no_child = False         # a child process could not run the check (no verdict either way)


def _invalid(where, path, problem):
    if where.startswith(("explicit", "GPUREPLACE_LIBDEVICE")):
        todo = (f"Point {where.split()[-1]} at a good libdevice.10.bc, or unset it to use the one "
                f"found automatically")
    else:
        todo = ("Reinstall it (`pip install --force-reinstall nvidia-nvvm`), or set "
                "GPUREPLACE_LIBDEVICE to a good libdevice.10.bc")
    return LibdeviceInvalid(f"libdevice at {path} (from {where}) cannot be used: {problem}. "
                            f"{todo}.")


def _read_libdevice():
    """(where, path, identity, bytes) of libdevice, after the checks that need no LLVM."""
    where, path = _find()
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            data = fh.read()
    except OSError as exc:
        raise _invalid(where, path, f"it cannot be read ({exc.strerror or exc})") from None
    problem = bitcode_problem(data)
    if problem is not None:
        raise _invalid(where, path, problem)
    return where, path, (path, st.st_size, st.st_mtime_ns), data


def bitcode_problem(data: bytes):
    """What makes ``data`` surely not a usable libdevice, or None (LLVM may still refuse it)."""
    if not data:
        return "it is empty"
    if data[:4] == _WRAPPER_MAGIC:
        if len(data) < 20:
            return f"it is truncated ({len(data)} bytes: a bitcode wrapper header alone is 20)"
        offset, size = struct.unpack_from("<II", data, 8)
        if offset + size > len(data):
            return (f"it is truncated: its wrapper header promises {offset + size} bytes, the "
                    f"file has {len(data)}")
        body = data[offset:offset + size]
        if body[:4] != _BITCODE_MAGIC:
            return "its bitcode wrapper header points at something that is not bitcode"
    elif data[:4] == _BITCODE_MAGIC:
        body = data
    else:
        return f"it is not LLVM bitcode ({_what_it_is(data)}; bitcode starts with 'BC' 0xC0DE)"
    low, high = PLAUSIBLE_BYTES
    if len(data) < low:
        return (f"it is only {len(data)} bytes, too small for libdevice (NVIDIA's are 400-500 "
                f"KiB): probably truncated, or another file")
    if len(data) > high:
        return f"it is {len(data)} bytes, too large for libdevice (NVIDIA's are 400-500 KiB)"
    if len(body) % 4:
        return (f"it is truncated: bitcode is a whole number of 32-bit words, and this is "
                f"{len(body)} bytes")
    return None


def _what_it_is(data):
    head = data[:512]
    if head.lstrip().startswith((b";", b"target ", b"source_filename", b"define ")):
        return "it is LLVM IR text; libdevice is the .bc file"
    if head.startswith(b"\x1f\x8b"):
        return "it is gzip-compressed"
    if head.startswith(b"\x7fELF"):
        return "it is an ELF binary"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return f"it starts with the bytes {head[:4].hex(' ')}"
    return "it is a text file"


def _known_good(path, ident, data):
    """Whether LLVM surely parses ``data`` (the file ``path``) without a check in a child."""
    if ident in _trusted:
        return True
    digest = hashlib.sha256(data).hexdigest()
    return digest in KNOWN_LIBDEVICE or digest == _installed_digest(path)


def _installed_digest(path):
    """The SHA-256 that pip recorded for ``path`` when a wheel installed it (RECORD), or None."""
    parts = os.path.abspath(path).split(os.sep)
    if "nvidia" not in parts:
        return None
    i = len(parts) - 1 - parts[::-1].index("nvidia")
    site, rel = os.sep.join(parts[:i]), "/".join(parts[i:])
    for record in glob.glob(os.path.join(site, "nvidia_*.dist-info", "RECORD")):
        try:
            with open(record, encoding="utf-8") as fh:
                for line in fh:
                    name, _, rest = line.partition(",")
                    if name == rel and rest.startswith("sha256="):
                        b64 = rest[len("sha256="):].split(",", 1)[0]
                        return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()
        except (OSError, ValueError):
            continue
    return None


# The child's program: exit 0 with the IR text on stdout, 3 when LLVM refuses the file, 4 when it
# is bitcode but not libdevice; a signal when LLVM aborts; anything else says nothing of the file.
_CHECK_PROGRAM = r"""
import re, sys
sys.path.insert(0, sys.argv[2])
import llvmlite.binding as llvm
try:
    with open(sys.argv[1], "rb") as fh:
        text = str(llvm.parse_bitcode(fh.read()))
except Exception as exc:
    sys.stderr.write(" ".join(str(exc).split()))
    sys.exit(3)
if not re.search(r"^define [^\n]*@__nv_", text, re.M):
    sys.exit(4)
sys.stdout.buffer.write(text.encode())
"""
_CRASHES = {getattr(signal, name) for name in ("SIGABRT", "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE")
            if hasattr(signal, name)}


def _parse_in_child(where, path):
    """libdevice's IR text as a child process printed it; LibdeviceInvalid if LLVM refused or
    crashed on the file there; None when no child could tell (the caller parses it here)."""
    global _no_child
    if _no_child or not sys.executable:
        return None
    import llvmlite
    site = os.path.dirname(os.path.dirname(os.path.abspath(llvmlite.__file__)))
    try:
        proc = subprocess.run([sys.executable, "-c", _CHECK_PROGRAM, path, site],
                              stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=CHECK_SECONDS)
    except subprocess.TimeoutExpired:
        raise _invalid(where, path, f"LLVM did not finish reading it in {CHECK_SECONDS} s") \
            from None
    except OSError:
        _no_child = True
        return None
    if proc.returncode == 0:
        return proc.stdout.decode("utf-8", errors="replace")
    if proc.returncode == 3:
        reason = proc.stderr.decode("utf-8", errors="replace").strip()[-300:]
        raise _invalid(where, path, f"LLVM cannot read it ({reason})")
    if proc.returncode == 4:
        raise _invalid(where, path, "it is LLVM bitcode, but defines no libdevice (__nv_*) "
                                    "function")
    if -proc.returncode in _CRASHES:
        name = signal.Signals(-proc.returncode).name
        raise _invalid(where, path, f"LLVM crashed reading it ({name}): the file is damaged")
    _no_child = True
    return None


def _parse_here(where, path, data):
    try:
        return llvm.parse_bitcode(data)
    except RuntimeError as exc:
        raise _invalid(where, path, f"LLVM cannot read it ({' '.join(str(exc).split())})") \
            from None


def _load():
    """The whole of libdevice, parsed in this process once it is known to parse."""
    global _parsed
    with _lock:
        if _parsed is None:
            from .backend import initialize_llvm
            initialize_llvm()
            where, path, ident, data = _read_libdevice()
            if not _known_good(path, ident, data):
                _parse_in_child(where, path)
                _trusted.add(ident)
            _parsed = _parse_here(where, path, data)
        return _parsed


def _print_libdevice():
    """libdevice's IR text: printed here when the file is known to parse, else by the child that
    checks it (which saves parsing it here too)."""
    where, path, ident, data = _read_libdevice()
    if not _known_good(path, ident, data):
        text = _parse_in_child(where, path)
        _trusted.add(ident)
        if text is not None:
            return text
    return str(_load())


def function_table():
    """``{name: (return type, (arg types...))}`` of every ``__nv_*`` function, as LLVM type strings."""
    global _table
    if _table is None:
        _table = _text_index().signatures()
    return _table


_REFLECT_CALL = re.compile(
    r"^(\s*)(%[\w.]+) = (?:tail |notail )?call i32 @__nvvm_reflect\(ptr(?: \w+)* (@[\w.]+)\)"
    r"(?: #\d+)?\s*$", re.M)
_STRING = re.compile(r'^(@[\w.]+) = .*constant \[\d+ x i8\] c"([^"]*?)\\00"', re.M)


def fold_reflect(text, values):
    """Replace each ``__nvvm_reflect("NAME")`` call in IR ``text`` by ``values[NAME]`` (0 if absent).

    libdevice chooses between precise and approximate code with these calls.  LLVM's own
    NVVMReflect pass knows only some of the names (not ``__CUDA_PREC_SQRT``), so we fold them all
    ourselves, as GPUCompiler.jl does.
    """
    strings = {m.group(1): m.group(2) for m in _STRING.finditer(text)}

    def repl(m):
        value = int(values.get(strings.get(m.group(3), ""), 0))
        return f"{m.group(1)}{m.group(2)} = add i32 0, {value}"

    return _REFLECT_CALL.sub(repl, text)


def pruned_bitcode(names, reflect=None) -> bytes:
    """Bitcode of a module holding the libdevice functions ``names`` and their dependencies,
    with ``__nvvm_reflect`` folded to ``reflect`` (``{"__CUDA_FTZ": 0, ...}``).

    The requested functions stay external so that linking resolves the kernel's declarations;
    the back end internalizes them afterwards, so the optimiser drops what it inlined.
    """
    reflect = dict(reflect or {})
    wanted = frozenset(names)
    key = (wanted, tuple(sorted(reflect.items())))
    hit = _pruned.get(key)
    if hit is not None:
        return hit
    hit = _from_disk(key)
    if hit is not None:
        _pruned[key] = hit
        return hit
    data = _prune(wanted, reflect)
    _pruned[key] = data
    _to_disk(key, data)
    return data


class _TextIndex:
    """libdevice's IR text cut into its top-level pieces, with what each definition refers to.

    Pruning assembles the text of the functions a kernel needs (and everything they reach)
    from these pieces: a few milliseconds, where cloning the whole module and letting LLVM's
    GlobalDCE strip it took about 45 ms per new set of functions.  Built once per process."""

    _SYMBOL = re.compile(r"@([\w.$]+)")

    def __init__(self, text):
        self.header, self.tail = [], []
        self.globals, self.defines, self.declares, self._refs = {}, {}, {}, {}
        pos, n = 0, len(text)
        while pos < n:
            eol = text.find("\n", pos)
            eol = n if eol < 0 else eol
            line = text[pos:eol]
            if line.startswith("define "):
                end = text.find("\n}\n", pos)
                end = n if end < 0 else end + 2
                body = text[pos:end]
                self.defines[DEFINE_NAME.match(body).group(1)] = body
                pos = end + 1
                continue
            if line.startswith("declare "):
                self.declares[self._SYMBOL.search(line).group(1)] = line
            elif line.startswith("@"):
                self.globals[self._SYMBOL.match(line).group(1)] = line
            elif line.startswith(("attributes ", "!")):
                self.tail.append(line)
            elif line.startswith(("target ", "%")):
                self.header.append(line)
            pos = eol + 1

    # "define [linkage and attributes] RET @__nv_name(TYPE [attributes] %arg, ...) ... {"
    _SIGNATURE = re.compile(r"^define [^@\n]*?(\S+) @(__nv_[\w.]+)\(([^)]*)\)")

    def signatures(self):
        """``{name: (return type, (argument types...))}`` of the ``__nv_*`` definitions."""
        table = {}
        for name, body in self.defines.items():
            m = self._SIGNATURE.match(body) if name.startswith("__nv_") else None
            if m:
                params = m.group(3)
                table[name] = (m.group(1),
                               tuple(p.split(" ", 1)[0] for p in params.split(", ")) if params else ())
        return table

    def refs(self, name):
        """The symbols the definition (or global) ``name`` refers to (found when first asked)."""
        found = self._refs.get(name)
        if found is None:
            text = self.defines.get(name) or self.globals.get(name) or ""
            found = self._refs[name] = set(self._SYMBOL.findall(text)) - {name}
        return found

    def module_text(self, wanted):
        """IR text of the functions ``wanted`` (external) and what they reach (internal)."""
        missing = [name for name in wanted if name not in self.defines]
        if missing:
            raise KeyError(f"libdevice defines no {', '.join(sorted(missing))}")
        seen, stack = set(), list(wanted)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            stack.extend(self.refs(name))
        out = list(self.header)
        out += [self.globals[n] for n in sorted(seen) if n in self.globals]
        out += [self.declares[n] for n in sorted(seen) if n in self.declares]
        for name in sorted(seen):
            body = self.defines.get(name)
            if body is None:
                continue
            if name not in wanted and not body.startswith(("define internal ",
                                                          "define private ")):
                body = "define internal " + body[len("define "):]
            out.append(body)
        return "\n".join(out + self.tail) + "\n"


_index = None
_index_lock = threading.Lock()        # (one thread reads and indexes; another waits for it)


_unwritten = None            # (path, text) printed by the read-ahead, for the disk cache


def _text_index(needed=True):
    """libdevice's text, indexed; ``needed``: a compile uses libdevice (then a text the read-ahead
    printed goes to the disk cache, for the next process -- not before: a program whose kernels
    never call it leaves no 2.6-MB text there)."""
    global _index, _unwritten
    if _index is None:
        with _index_lock:
            if _index is None:
                _index = _TextIndex(_ir_text(write=needed))
    if needed and _unwritten is not None:
        with _index_lock:
            if _unwritten is not None:
                path, text = _unwritten
                _unwritten = None
                _save_text(path, text)
    return _index


# libdevice's text, read ahead: without the disk cache (a machine's first compile) parsing and
# printing the bitcode take 100-150 ms, nearly all of it in LLVM with the GIL released, while the
# first compile spends longer than that in Numba's front end before it links.  The first compile
# starts the read in a thread (load_ahead); the link waits for it, if it is not done.
_ahead = None


def load_ahead():
    """Read, parse and index libdevice in a thread, once a process (the first compile calls it);
    an error is left for the compile that needs libdevice to report."""
    global _ahead
    if _ahead is not None or _index is not None:
        return
    # LLVM's target first, here: llvmlite serialises every call into LLVM, and the front end,
    # which makes it at its start, would otherwise wait for the whole read
    from .backend import data_layout
    data_layout()
    with _lock:
        if _ahead is not None:
            return
        _ahead = threading.Thread(target=_load_quietly, name="gpureplace-libdevice", daemon=True)
    _ahead.start()


def _load_quietly():
    try:
        _text_index(needed=False)
    except Exception:
        pass


def _before_fork():
    # (a child forked while the thread holds a lock of this module would wait for it forever)
    thread = _ahead
    if thread is not None and thread.is_alive() and thread is not threading.current_thread():
        thread.join(30)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork)


def _ir_text(write=True):
    """libdevice as IR text.  Parsing the bitcode and printing it takes about 60 ms, so a process
    reads the text a previous one printed (kept in the disk cache, checksummed, named by the file
    and the LLVM version that printed it): about 4 ms.  ``write``: keep a text printed here in
    the disk cache now (else it is noted in ``_unwritten``)."""
    global _unwritten
    path = _text_path()
    if path is not None:
        blob = _read_checked(path)
        if blob is not None:
            try:
                text = blob.decode()
            except UnicodeDecodeError:
                pass
            else:
                # Named by this file's path, size and mtime: a process parsed it without harm.
                _trusted.add(_identity())
                return text
    text = _print_libdevice()       # (takes the lock itself)
    if path is not None:
        if write:
            _save_text(path, text)
        else:
            _unwritten = (path, text)
    return text


def _save_text(path, text):
    _write_checked(path, text.encode())
    _forget_old_texts(path)


_TEXT_PREFIX, _TEXT_SUFFIX, _TEXTS_KEPT = "text-", ".ll", 3


def _text_path():
    return _cache_file(_TEXT_PREFIX, (), _TEXT_SUFFIX)


def _forget_old_texts(keep):
    """Keep the texts of the few libdevice files (or LLVM versions) used last, not every one."""
    directory = os.path.dirname(keep)
    try:
        names = [n for n in os.listdir(directory)
                 if n.startswith(_TEXT_PREFIX) and n.endswith(_TEXT_SUFFIX)]
        dated = sorted(((os.stat(os.path.join(directory, n)).st_mtime, n) for n in names),
                       reverse=True)
    except OSError:
        return
    for _, name in dated[_TEXTS_KEPT:]:
        if os.path.join(directory, name) != keep:
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass


def _prune(wanted, reflect):
    text = _text_index().module_text(wanted)
    try:
        folded = llvm.parse_assembly(contract_float_ops(tune_trig(fold_reflect(text, reflect))))
    except RuntimeError:
        # A libdevice whose text does not cut as this one does (metadata that names functions,
        # say): let LLVM do the pruning, slower but whatever the layout.
        folded = llvm.parse_assembly(contract_float_ops(tune_trig(fold_reflect(
            _pruned_by_llvm(wanted), reflect))))
    return folded.as_bitcode()


def _pruned_by_llvm(wanted):
    """IR text of libdevice with ``wanted`` external, everything else internal, and what
    nothing reaches removed by LLVM's GlobalDCE."""
    full = _load()
    with _lock:
        mod = full.clone()
    for fn in mod.functions:
        if not fn.is_declaration:
            fn.linkage = "external" if fn.name in wanted else "internal"
    for gv in mod.global_variables:
        if not gv.is_declaration:
            gv.linkage = "internal"
    pm = llvm.create_new_module_pass_manager()
    pm.add_global_dead_code_eliminate_pass()
    pm.add_strip_dead_prototype_pass()
    from .backend import pass_builder
    pm.run(mod, pass_builder(0))
    return str(mod)


# A new process compiling its first kernel would prune again (tens of ms): the pruned bitcode is
# kept in the disk cache, named by everything it depends on, and checksummed.

def _disk_path(key):
    names, reflect = key
    from .backend import CODEGEN_REVISION
    return _cache_file("pruned-", (sorted(names), reflect, CODEGEN_REVISION), ".bc")


def _identity():
    """(path, size, mtime_ns) of the libdevice file in use."""
    path = find_libdevice()
    st = os.stat(path)
    return path, st.st_size, st.st_mtime_ns


def _cache_file(prefix, key, suffix):
    """Path in the disk cache of a file derived from this libdevice by this LLVM and ``key``;
    None when the disk cache is off or its directory cannot be used (that warns once)."""
    from . import diskcache as cache
    if not cache.enabled:
        return None
    text = repr(_identity() + (llvm.llvm_version_info,) + tuple(key))
    digest = hashlib.blake2b(text.encode(), digest_size=20).hexdigest()
    return cache.libdevice_path(f"{prefix}{digest}{suffix}")


def _from_disk(key):
    path = _disk_path(key)
    return None if path is None else _read_checked(path)


def _to_disk(key, data):
    path = _disk_path(key)
    if path is not None:
        _write_checked(path, data)


def _read_checked(path):
    """The bytes ``_write_checked`` stored at ``path``; None when absent or damaged (then removed,
    to be built again)."""
    from . import diskcache as cache
    blob = cache.read_file(path)
    if blob is None:
        return None
    digest, data = blob[:20], blob[20:]
    if hashlib.blake2b(data, digest_size=20).digest() != digest:
        try:
            os.unlink(path)
        except OSError:
            pass
        return None
    return data


def _write_checked(path, data):
    from . import diskcache as cache
    cache.write_file(path, hashlib.blake2b(data, digest_size=20).digest() + data)
