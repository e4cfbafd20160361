"""The disk cache's directory: where it is, what gpureplace writes there and nothing else, its size
cap (LRU eviction), ``clear()`` and ``info()``.  ``gpureplace.cache`` is this module.

Compiled kernels survive interpreter restarts, are never served stale (``kernel_cache`` decides
what an entry holds and when it may be used), and never cost the user anything -- a damaged entry
is a miss, an unusable directory a warning.

Where: ``$GPUREPLACE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpureplace`` (an absolute one: a relative
``XDG_CACHE_HOME`` is ignored, as the XDG specification asks), else ``~/.cache/gpureplace``;
created 0700.  ``GPUREPLACE_CACHE=0`` (or ``gpureplace.cache.enabled = False``) turns it off.

Layout (``kernel_cache.FORMAT`` 5)::

    CACHEDIR.TAG                  the marker: gpureplace made (or adopted) this directory
    usage                         the running size total: its length in bytes is the KiB stored
    kernels/<key>/<variant>.ptx   one compiled kernel: its PTX ...
    kernels/<key>/<variant>.json  ... and its metadata (JSON, never pickles)
    libdevice/pruned-<hash>.bc    libdevice cut down to the functions some kernels call
    libdevice/text-<hash>.ll      libdevice's IR text (compiler/libdevice_link.py)
    libdevice/slowpath-<hash>.ptx its trigonometric reduction compiled once (trig_slowpath.py)
    .tmp-XXXXXXXX                 a file being written (temp file + rename), in any of the folders

What the user can count on:

- A damaged entry is a miss, never an error.  The JSON carries a digest over its own canonical
  content, which includes the PTX's digest and length: a flipped byte in either file, a truncated
  file, bad JSON or a PTX and a JSON from different writes fail the check, the entry is removed and
  the kernel compiled again.  Fields are type-checked too before anything reads them.
- A directory that cannot be used -- it cannot be created (read-only parent, no home directory),
  it is a file, it holds another program's CACHEDIR.TAG, or it is refused as insecure (others can
  write to it, or another user owns it: code planted there would run on the GPU) -- costs one
  ``UserWarning`` naming it, the reason and what to do; the process then runs without the disk
  cache.  A directory removed or replaced while the process runs is checked again before the
  next write (its marker's inode is the one recorded when it was accepted: one ``stat``).  An insecure directory is never read or written.  Found by gpureplace's own background
  work (the warm-up, a recompile-ahead round: threads named ``gpureplace-...``), where a warning
  reaches no cell, the warning is held and raised by the next use of the cache in the user's own
  code (their first kernel compile: the cell it shows in without the warm-up).  ``info()`` (and
  ``%cuda_cache stats``) gives the reason as soon as it is known.
- ``clear()`` deletes only what gpureplace provably wrote: nothing at all in a directory without
  gpureplace's CACHEDIR.TAG, and there only files whose names are exactly the ones above, or the
  flat names of FORMAT <= 4 (``<40 hex>[-<12 hex>].json|.ptx``,
  ``libdevice-[text-]<40 hex>.bc|.ll``).  A ``settings.json`` or ``notes.ptx`` beside them stays.
- gpureplace marks a directory (the first time it uses it) only when it made it or found it
  empty.  One that holds anything already is the user's: it is not used (a warning says so and
  suggests a new folder inside it), so no file of the user's is ever overwritten or deleted, even
  one whose name is exactly one gpureplace writes.
- Loading and storing cost the same with 16 entries or 16,000: a load lists only its key's folder,
  a store appends to ``usage``.  Every store appends one byte per KiB it wrote (``O_APPEND``: writes
  of processes sharing the cache never lose one another's bytes), so the total is one ``fstat``.
  When it passes ``max_bytes`` one process (``flock`` on the directory) scans the whole directory:
  it deletes temp files and half entries older than ``STALE_SECONDS`` (left by a crash) and files of
  older formats, evicts least-recently-used entries and libdevice files until the total is at
  ``LOW_WATER`` of the cap, and sets ``usage`` (sparse) to the measured total plus what was
  appended meanwhile.  So a scan comes at most once per quarter of the cap stored, and its cost
  is spread over those stores.
  Measured with bench/disk_cache_scale.py (16,000 entries of 13 KB, 188 MiB, under the 256 MiB
  cap; a CPU shared with other jobs): when load and store listed the whole directory, a warm load
  took 25 ms and a store 182 ms (0.26 and 1.2 ms with 100 entries); now 0.31 and 0.43 ms (0.29 and
  0.78 with 100).  The scan of those 16,000 entries takes 0.6 s, once per 64 MiB stored (about
  5,000 such stores: 0.12 ms each).
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import threading
import time
import warnings

from ..config import env_size
from ..errors import user_stacklevel

enabled = os.environ.get("GPUREPLACE_CACHE", "1").lower() not in ("0", "false", "no", "off")
#: Size cap in bytes (LRU eviction beyond it): ``GPUREPLACE_CACHE_MAX_BYTES`` (``1G``, ``512MiB``,
#: ``1e9``: ``config.SIZE_FORMS``; anything else is a warning and the default).
max_bytes = env_size("GPUREPLACE_CACHE_MAX_BYTES", 256 << 20)
#: A scan evicts down to this fraction of ``max_bytes``, so the next one is a quarter-cap away.
LOW_WATER = 0.75
#: A temp file or half an entry older than this was left by a process that died while writing.
STALE_SECONDS = 600

MARKER = "CACHEDIR.TAG"
USAGE = "usage"
KERNELS = "kernels"
LIBDEVICE = "libdevice"
_MARKER_ID = "# gpureplace disk cache"
_MARKER_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                f"{_MARKER_ID}: gpureplace.cache.clear() empties it.\n"
                "# A cache directory tag (https://bford.info/cachedir/): backup tools may skip "
                "this directory.\n")

# Exactly the names gpureplace writes; nothing else is ever deleted.
_KEY = re.compile(r"[0-9a-f]{40}\Z")
ENTRY_FILE = re.compile(r"([0-9a-f]{12})\.(json|ptx)\Z")
_LIBDEVICE_FILE = re.compile(r"(?:pruned|text)-[0-9a-f]{40}\.(?:bc|ll)\Z")
_TEMP = re.compile(r"\.tmp-[a-z0-9_]{8}\Z")                    # tempfile.mkstemp(prefix=".tmp-")
_OLD_FILE = re.compile(r"(?:[0-9a-f]{40}(?:-[0-9a-f]{12})?\.(?:json|ptx)"
                       r"|libdevice-(?:text-)?[0-9a-f]{40}\.(?:bc|ll))\Z")    # FORMAT <= 4

_explicit_dir = None
write_lock = threading.Lock()
_usable = {}          # directory checked (and marked) by this process -> its marker's identity
_problems = {}        # directory -> why it cannot be used (warned once)
_held = {}            # directory -> why, found in the background and not warned about yet
_warn_lock = threading.Lock()
#: Threads whose name starts so are gpureplace's own background work (the warm-up, recompile-ahead
#: rounds): a warning raised there is printed outside any cell, so it is held for the user's code.
BACKGROUND_THREADS = "gpureplace-"
_NOT_ABSOLUTE = "it is not an absolute path (no home directory: HOME is unset)"


def _not_absolute():
    """Why the default directory is a relative path: HOME is unset (and there is no passwd
    entry), or HOME itself is relative."""
    home = os.environ.get("HOME")
    if home and not os.path.isabs(home):
        return f"it is not an absolute path (HOME is {home!r}, which is not an absolute path)"
    return _NOT_ABSOLUTE


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
    # Without HOME (and no passwd entry, as in some containers) "~" stays "~": the path is then
    # relative, and _prepare refuses it rather than litter the working directory.  A relative
    # XDG_CACHE_HOME is invalid and ignored (the XDG Base Directory specification).
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpureplace")


def ensure_dir():
    """The cache directory, created, checked and marked; None when it cannot be used (the
    first time, with a warning that says why and what to do: in gpureplace's background threads
    held for the next use outside them)."""
    path = directory()
    known = _usable.get(path)
    if known is not None:
        if _marker_identity(path) == known:
            return path
        # Removed, or replaced (by a folder of the user's, say) since it was accepted: check it
        # again, as at its first use -- made again, or refused with a warning.
        _usable.pop(path, None)
    reason = _prepare(path)
    if reason is None:
        with _warn_lock:
            _problems.pop(path, None)
            _held.pop(path, None)
        ident = _marker_identity(path)
        if ident is not None:
            _usable[path] = ident
        return path
    background = threading.current_thread().name.startswith(BACKGROUND_THREADS)
    with _warn_lock:
        if path in _problems:
            first = False
            _problems[path] = reason
        elif background:
            first = False
            _held[path] = reason
        else:
            first = True
            _held.pop(path, None)
            _problems[path] = reason
    if first:
        warnings.warn(
            f"gpureplace is not using the disk cache directory {path}: {reason}. Kernels "
            f"still compile, but are not kept for the next process. Set GPUREPLACE_CACHE_DIR "
            f"to a private directory you can write to, or GPUREPLACE_CACHE=0 to turn the disk "
            f"cache off.", UserWarning, stacklevel=user_stacklevel())
    return None


def forget(path):
    """Check (and mark) ``path`` again at its next use: it went away under this process."""
    _usable.pop(path, None)


def _marker_identity(path):
    """(device, inode) of ``path``'s marker file, or None: what says, at one ``stat`` a use, that
    the directory accepted is still there (one removed and made again, by gpureplace or by the
    user, has no marker, or another)."""
    try:
        st = os.stat(os.path.join(path, MARKER))
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _prepare(path):
    """Create ``path`` (0700) and check it; why it cannot be used, or None."""
    if not os.path.isabs(path):
        return _not_absolute()
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError as exc:
        # (the path, or a folder above it, is not a directory: makedirs names which)
        where = os.path.abspath(exc.filename) if isinstance(exc.filename, str) else path
        if where == path:
            return _not_a_directory(path, "it")
        return f"it cannot be created ({_not_a_directory(where, where)})"
    except OSError as exc:
        above = _dangling_above(path)
        if above is not None:
            return f"it cannot be created ({_not_a_directory(above, above)})"
        return f"it cannot be created ({exc.strerror or exc})"
    return _insecure(path) or _adopt(path)


def _dangling_above(path):
    """The folder above ``path`` that is a symbolic link to a missing path, or None."""
    parent = os.path.dirname(path)
    while parent and parent != path:
        if os.path.lexists(parent):
            return parent if os.path.islink(parent) and not os.path.exists(parent) else None
        path, parent = parent, os.path.dirname(parent)
    return None


def _not_a_directory(path, name):
    """Why ``path`` (called ``name`` in the message), which exists, is no directory."""
    if os.path.islink(path) and not os.path.exists(path):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return f"{name} is a symbolic link to a missing path ({target})"
    return f"{name} is a file, not a directory"


def _insecure(path):
    """Why ``path`` must not be trusted, or None."""
    try:
        st = os.stat(path)
    except FileNotFoundError as exc:
        if os.path.islink(path):
            return _not_a_directory(path, "it")
        return f"it cannot be read ({exc.strerror or exc})"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if not stat.S_ISDIR(st.st_mode):
        return "it is a file, not a directory"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"other users can write to it (mode {stat.S_IMODE(st.st_mode):o}) and could "
                f"plant code in it; `chmod 700 {path}` makes it private")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it belongs to another user (uid {st.st_uid})"
    return None


def _marker(path):
    """True if ``path`` has gpureplace's marker, False if none, or a reason it is not ours."""
    try:
        with open(os.path.join(path, MARKER), "rb") as fh:
            text = fh.read(4096)
    except FileNotFoundError:
        return False
    except OSError as exc:
        return f"its {MARKER} cannot be read ({exc.strerror or exc})"
    return True if _MARKER_ID.encode() in text else \
        f"it holds another program's {MARKER} (it is that program's cache)"


def _adopt(path):
    """Mark ``path`` as gpureplace's (the only directory ``clear()`` empties and a scan evicts
    from); why not, or None.  Only a directory gpureplace made, or found empty, is marked: one
    that already holds anything else is the user's, and nothing there may be overwritten (a file
    of theirs named ``usage``) or deleted (one whose name looks like an old cache entry)."""
    mark = _marker(path)
    if mark is True:
        return None
    if mark is not False:
        return mark
    found = sorted(e.name for e in _listing(path) if not _TEMP.match(e.name))
    if MARKER in found:               # another process has just marked it
        mark = _marker(path)
        return None if mark is True else (mark or f"its {MARKER} went away")
    if found:
        return _not_empty(path, found)
    try:
        atomic_write(os.path.join(path, MARKER), _MARKER_TEXT.encode())
    except OSError as exc:
        return f"it cannot be written ({exc.strerror or exc})"
    return None


def _not_empty(path, found):
    shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
    return (f"it already holds files that are not gpureplace's ({shown}), and gpureplace "
            f"keeps its cache only in a directory it made or found empty, so that nothing of "
            f"yours is ever overwritten or deleted there; a new folder inside it will do "
            f"({os.path.join(path, 'gpureplace-cache')})")


def _problem(path):
    """Why ``path`` cannot be used, as ``_prepare`` would find it, without creating or marking
    anything -- or, when nothing there says so, why this process found it could not use it
    (it could not be written, say: a read-only file system); None when it can (or will be made
    and marked at its first use)."""
    if not os.path.isabs(path):
        return _not_absolute()
    recorded = None if path in _usable else _problems.get(path) or _held.get(path)
    return _problem_seen(path) or recorded


def _problem_seen(path):
    """What ``_problem`` finds by looking at ``path``."""
    if not os.path.lexists(path):     # made at the first use, unless that failed already
        return None
    reason = _insecure(path)
    if reason is not None:
        return reason
    mark = _marker(path)
    if mark is not False:
        return None if mark is True else mark
    found = sorted(e.name for e in _listing(path) if not _TEMP.match(e.name))
    return _not_empty(path, found) if found else None


# ---------------------------------------------------------------------------------------------
# Files of the cache directory


def unlink(path):
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def make_folders(d, *parts):
    """Make ``d/parts...`` (0700) below the cache directory ``d``, which must exist: if it went
    away, FileNotFoundError, rather than a new unmarked directory."""
    path = d
    for part in parts:
        path = os.path.join(path, part)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    return path


def atomic_write(path, data: bytes):
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        unlink(tmp)
        raise


def libdevice_path(name):
    """Where the libdevice file ``name`` (``pruned-<40 hex>.bc``, ``text-<40 hex>.ll``) is kept
    in the cache; None when the cache is off or its directory cannot be used."""
    if not enabled:
        return None
    d = ensure_dir()
    if d is None:
        return None
    try:
        return os.path.join(make_folders(d, LIBDEVICE), name)
    except OSError:
        return None


def write_file(path, data: bytes):
    """Write ``data`` to ``path`` in the cache (from ``libdevice_path``) atomically and count it
    against the cap; False when it cannot be written, or the cache directory is no longer the one
    ``path`` was given in (removed or replaced meanwhile: ``ensure_dir`` checks it again)."""
    d = os.path.dirname(os.path.dirname(path))
    if ensure_dir() != d:
        return False
    try:
        atomic_write(path, data)
    except OSError:
        return False
    account(d, len(data))
    return True


def read_file(path):
    """The bytes at ``path`` in the cache (marked as used, for LRU eviction), or None."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    try:
        os.utime(path)
    except OSError:
        pass
    return data


def account(d, nbytes):
    """Add ``nbytes`` to the running total of the cache directory ``d``; scan it when the total
    passes the cap."""
    try:
        fd = os.open(os.path.join(d, USAGE), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, bytes(-(-nbytes // 1024)))
            total = os.fstat(fd).st_size * 1024
        finally:
            os.close(fd)
    except OSError:
        return
    if total > max_bytes:
        _scan(d)


def _listing(path):
    try:
        with os.scandir(path) as it:
            return list(it)
    except OSError:
        return []


def _lstat(entry):
    try:
        return entry.stat(follow_symlinks=False)
    except OSError:                 # removed since the listing
        return None


def _walk(d):
    """What gpureplace wrote in ``d``: (kind, paths, bytes, mtime) with kind "entry" (paths: its
    JSON and PTX), "half" (one of them alone), "temp", "old" (FORMAT <= 4), "libdevice" and
    "folder" (a key's folder, paths: it).  Only names exactly like those gpureplace writes, and
    never through a symbolic link to a folder."""
    for entry in _listing(d):
        if _TEMP.match(entry.name) or _OLD_FILE.match(entry.name):
            st = _lstat(entry)
            if st is not None and not stat.S_ISDIR(st.st_mode):
                kind = "temp" if entry.name.startswith(".") else "old"
                yield kind, [entry.path], st.st_size, st.st_mtime
    for entry in _listing(os.path.join(d, LIBDEVICE)):
        if _LIBDEVICE_FILE.match(entry.name) or _TEMP.match(entry.name):
            st = _lstat(entry)
            if st is not None and not stat.S_ISDIR(st.st_mode):
                kind = "temp" if entry.name.startswith(".") else "libdevice"
                yield kind, [entry.path], st.st_size, st.st_mtime
    for folder in _listing(os.path.join(d, KERNELS)):
        try:
            if not _KEY.match(folder.name) or not folder.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        halves = {}
        for entry in _listing(folder.path):
            m = ENTRY_FILE.match(entry.name)
            if m is None and not _TEMP.match(entry.name):
                continue
            st = _lstat(entry)
            if st is None or stat.S_ISDIR(st.st_mode):
                continue
            if m is None:
                yield "temp", [entry.path], st.st_size, st.st_mtime
            else:
                halves.setdefault(m.group(1), {})[m.group(2)] = (entry.path, st)
        for files in halves.values():
            if len(files) == 2:
                (json_path, js), (ptx_path, ps) = files["json"], files["ptx"]
                yield "entry", [json_path, ptx_path], js.st_size + ps.st_size, js.st_mtime
            else:
                (path, st), = files.values()
                yield "half", [path], st.st_size, st.st_mtime
        yield "folder", [folder.path], 0, 0


def _scan(d):
    """Walk the whole directory once (see the module's docstring): remove leftovers, evict down to
    ``LOW_WATER`` of the cap if over it, and restart the running total from what is left."""
    lock = _lock_directory(d)
    if lock is False:
        return                       # another process is scanning
    try:
        now = time.time()
        counted = _usage_kib(d)      # what stores had added when the walk began
        total, evictable, folders = 0, [], []
        for kind, paths, nbytes, mtime in _walk(d):
            if kind == "folder":
                folders.append(paths[0])
            elif kind == "old" or (kind in ("temp", "half") and now - mtime > STALE_SECONDS):
                for path in paths:
                    unlink(path)
            else:
                total += nbytes      # a young temp file or half entry: a write in progress
                if kind in ("entry", "libdevice"):
                    evictable.append((mtime, nbytes, paths))
        if total > max_bytes * LOW_WATER:
            evictable.sort(key=lambda item: item[0])
            for _, nbytes, paths in evictable:
                if total <= max_bytes * LOW_WATER:
                    break
                for path in paths:
                    unlink(path)
                total -= nbytes
        for folder in folders:
            try:
                os.rmdir(folder)     # only empty ones go
            except OSError:
                pass
        _set_usage(d, total, counted)
    finally:
        if lock is not None:
            os.close(lock)


def _lock_directory(d):
    """A file descriptor holding an exclusive lock on ``d``; False if another process holds it;
    None where there are no such locks (two scans at once only evict a little more)."""
    try:
        import fcntl
        fd = os.open(d, os.O_RDONLY)
    except (ImportError, OSError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    except OSError:
        os.close(fd)
        return None
    return fd


def _usage_kib(d):
    try:
        return os.stat(os.path.join(d, USAGE)).st_size
    except OSError:
        return 0


def _set_usage(d, total, counted=None):
    """Make ``usage`` say ``total`` bytes (a sparse file of that many KiB), plus what other
    processes appended since it said ``counted`` KiB: their stores during a scan are not lost
    (those the walk saw are counted twice, which only brings the next scan sooner)."""
    try:
        fd = os.open(os.path.join(d, USAGE), os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        since = 0 if counted is None else max(os.fstat(fd).st_size - counted, 0)
        os.ftruncate(fd, -(-total // 1024) + since)
    except OSError:
        pass
    finally:
        os.close(fd)


def clear():
    """Delete every entry of the disk cache, and the libdevice files kept there; returns the
    number of kernels removed.  Only files gpureplace provably wrote go: nothing in a directory
    without its marker (that is said in a warning), there only the names it writes."""
    d = directory()
    if not os.path.isdir(d):
        return 0
    reason = _insecure(d)
    if reason is None:
        mark = _marker(d)
        if mark is True:
            return _clear(d)
        if mark is False:
            if not _listing(d):
                return 0             # nothing to delete, nothing to say
            reason = (f"it has no {MARKER} written by gpureplace, so its files may not be "
                      f"gpureplace's")
        else:
            reason = mark
    warnings.warn(f"gpureplace.cache.clear() deleted nothing in {d}: {reason}. Delete the "
                  f"files by hand if they are gpureplace's, or point GPUREPLACE_CACHE_DIR at "
                  f"the cache directory meant.", UserWarning, stacklevel=user_stacklevel())
    return 0


def _clear(d):
    n, folders = 0, []
    for kind, paths, _, _ in _walk(d):
        if kind == "folder":
            folders.append(paths[0])
            continue
        removed = [unlink(path) for path in paths]
        n += kind == "entry" and removed[0]
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:
            pass
    _set_usage(d, 0)
    return n


def info():
    """``{"directory", "entries", "bytes", "enabled", "problem"}`` of the disk cache: kernels and
    bytes of what gpureplace wrote there; ``problem``: why the directory is not used, or None."""
    d = directory()
    entries = size = 0
    problem = _problem(d)
    if problem is None:
        for kind, _, nbytes, _ in _walk(d):
            entries += kind == "entry"
            size += nbytes
    return {"directory": d, "entries": entries, "bytes": size, "enabled": enabled,
            "problem": problem}
