"""What a kernel links of libdevice: per set of needed functions, a pruned copy holding only those
functions and what they reach (everything else internal, so that the optimiser drops what it
inlines), with ``__nvvm_reflect`` folded and the tuning of ``libdevice_tuning.py`` applied.

Linking all of libdevice into every kernel costs tens of milliseconds and bloats the PTX.  The
copies are cut from libdevice's IR text (``_TextIndex``), which the disk cache keeps once a
process has printed it; a machine's first compile reads it ahead, in a thread.  Each pruned copy
is kept in memory and in the disk cache.  The file itself, its checks and its parse:
``libdevice_bitcode.py``.
"""

from __future__ import annotations

import os
import re
import threading

import llvmlite.binding as llvm

from . import libdevice_bitcode as _bitcode
from .libdevice_bitcode import _cache_file, _identity, _read_checked, _write_checked
from .libdevice_tuning import DEFINE_NAME, contract_float_ops, lower_newer_intrinsics, tune_trig

_lock = threading.Lock()
_pruned = {}              # frozenset(names) -> bitcode bytes of the pruned module
_table = None             # name -> (return llvm type str, [arg llvm type str])


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


_reach = {}               # (name, target) -> whether name's definition reaches target


def reaches(name, target):
    """Whether libdevice's ``name`` calls ``target``, directly or through others."""
    key = (name, target)
    hit = _reach.get(key)
    if hit is None:
        hit = _reach[key] = target in _text_index().reached({name}) - {name}
    return hit


def pruned_bitcode(names, reflect=None) -> bytes:
    """Bitcode of a module holding the libdevice functions ``names`` and their dependencies,
    with ``__nvvm_reflect`` folded to ``reflect`` (``{"__CUDA_FTZ": 0, ...}``).

    The requested functions stay external so that linking resolves the kernel's declarations;
    the back end internalizes them afterwards, so the optimiser drops what it inlined.
    """
    reflect = dict(reflect or {})
    wanted = frozenset(names)
    key = (wanted, tuple(sorted(reflect.items())))
    return derived(_pruned, key, lambda: _disk_path(key), lambda: _prune(wanted, reflect))


def derived(memo, key, path, make):
    """What ``make()`` builds from libdevice for ``key`` (bytes): from ``memo``, else from the
    disk cache file ``path()`` names (checksummed; None: no disk cache), else built and kept in
    both."""
    hit = memo.get(key)
    if hit is not None:
        return hit
    where = path()
    hit = None if where is None else _read_checked(where)
    if hit is None:
        hit = make()
        if where is not None:
            _write_checked(where, hit)
    memo[key] = hit
    return hit


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

    def reached(self, names):
        """``names`` and every symbol their definitions refer to, directly or through others."""
        seen, stack = set(), list(names)
        while stack:
            name = stack.pop()
            if name not in seen:
                seen.add(name)
                stack.extend(self.refs(name))
        return seen

    def module_text(self, wanted):
        """IR text of the functions ``wanted`` (external) and what they reach (internal)."""
        missing = [name for name in wanted if name not in self.defines]
        if missing:
            raise KeyError(f"libdevice defines no {', '.join(sorted(missing))}")
        seen = self.reached(wanted)
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
                _bitcode._trusted.add(_identity())
                return text
    text = _bitcode._print_libdevice()       # (takes its lock itself)
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
        folded = llvm.parse_assembly(lower_newer_intrinsics(contract_float_ops(tune_trig(
            fold_reflect(text, reflect)))))
    except RuntimeError:
        # A libdevice whose text does not cut as this one does (metadata that names functions,
        # say): let LLVM do the pruning, slower but whatever the layout.
        folded = llvm.parse_assembly(lower_newer_intrinsics(contract_float_ops(tune_trig(
            fold_reflect(_pruned_by_llvm(wanted), reflect)))))
    return folded.as_bitcode()


def _pruned_by_llvm(wanted):
    """IR text of libdevice with ``wanted`` external, everything else internal, and what
    nothing reaches removed by LLVM's GlobalDCE."""
    full = _bitcode._load()
    with _bitcode._lock:
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
    from .backend import free_pass_manager, pass_builder
    try:
        pm.run(mod, pass_builder(0))
    finally:
        free_pass_manager(pm)
    return str(mod)


# A new process compiling its first kernel would prune again (tens of ms): the pruned bitcode is
# kept in the disk cache, named by everything it depends on, and checksummed.

def _disk_path(key):
    names, reflect = key
    from .backend import CODEGEN_REVISION
    return _cache_file("pruned-", (sorted(names), reflect, CODEGEN_REVISION), ".bc")
