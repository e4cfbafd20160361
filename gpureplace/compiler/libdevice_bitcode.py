"""libdevice's bitcode file: where to find it, whether it is safe to hand to LLVM, the parsed module
and its printed text, and the checksummed files derived from it in the disk cache.  What a kernel
links of it (pruned copies, the text they are cut from, the read-ahead): ``libdevice_link.py``;
the functions themselves, callable from device code: ``gpureplace.libdevice``.

libdevice is NVIDIA's bitcode library of math functions (``__nv_sinf``, ``__nv_pow``, ...).

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
import signal
import struct
import subprocess
import sys
import threading

import llvmlite.binding as llvm

from ..errors import LibdeviceNotFound


class LibdeviceInvalid(LibdeviceNotFound):
    """A libdevice file was found, but it is not usable bitcode (empty, damaged, not libdevice)."""

_lock = threading.Lock()
_parsed = None            # the whole of libdevice, parsed once

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
        if base:
            for hit in _wheel_files(base):
                yield "the nvidia-nvvm wheel", hit
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            yield var, os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc")
    yield "/usr/local/cuda", "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc"


def _wheel_files(base):
    """The files the globs ``nvidia/cu*/nvvm/libdevice/libdevice*.bc``, then ``nvidia/cuda_nvcc/...``
    and ``nvidia/nvvm/...`` find below ``base`` (each pattern's sorted), found by listing the
    folders: ``glob`` compiles its patterns at a process's first search, some 0.3 ms, and the
    kernel cache's key (``key_identity``) searches in every process that loads a kernel."""
    root = os.path.join(base, "nvidia")
    try:
        names = os.listdir(root)
    except OSError:                 # (no such folder, or not one)
        return
    for folders in (sorted(n for n in names if n.startswith("cu")), ["cuda_nvcc"], [""]):
        hits = []
        for folder in folders:
            where = os.path.join(root, folder, "nvvm", "libdevice")
            try:
                files = os.listdir(where)
            except OSError:
                continue
            hits += [os.path.join(where, f) for f in files
                     if f.startswith("libdevice") and f.endswith(".bc")]
        yield from sorted(hits)


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


def _identity():
    """(path, size, mtime_ns) of the libdevice file in use."""
    path = find_libdevice()
    st = os.stat(path)
    return path, st.st_size, st.st_mtime_ns


_key_identity = None       # (the settings that choose the file, key_identity() under them)


def key_identity():
    """What the kernel cache's key says of the libdevice in use: its path, size and mtime as
    text (``_identity``), or ``"none"`` when none is found.  Found once per process (a search of
    the places ``_candidates`` names and one ``stat``, never a read of the file), and again only
    when a setting that chooses the file changes; processes using the same file agree."""
    global _key_identity
    settings = (explicit_path, os.environ.get("GPUREPLACE_LIBDEVICE"),
                os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"))
    known = _key_identity
    if known is not None and known[0] == settings:
        return known[1]
    try:
        text = repr(_identity())
    except (LibdeviceNotFound, OSError):
        text = "none"       # (a kernel that calls libdevice then fails to compile, and is not kept)
    _key_identity = (settings, text)
    return text


def _cache_file(prefix, key, suffix):
    """Path in the disk cache of a file derived from this libdevice by this LLVM and ``key``;
    None when the disk cache is off or its directory cannot be used (that warns once)."""
    from . import diskcache as cache
    if not cache.enabled:
        return None
    text = repr(_identity() + (llvm.llvm_version_info,) + tuple(key))
    digest = hashlib.blake2b(text.encode(), digest_size=20).hexdigest()
    return cache.libdevice_path(f"{prefix}{digest}{suffix}")


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
