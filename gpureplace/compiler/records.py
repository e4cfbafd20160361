"""Dependency records: which globals a compiled function read, found in its Numba IR.

Each ``ir.Global`` / ``ir.FreeVar`` node is a name the function read from its module namespace or
its closure; a ``getattr`` on a module global (``math.sin``, ``mylib.helper``) is recorded as that
module attribute.  Redefinition tracking compares these against the current bindings; a read of
an array (or of a tuple holding arrays) also keeps a copy of the contents it was compiled
against (``snapshot``, tracking/contents.py), which is what the device gets and what an in-place
change is detected against.
"""

from __future__ import annotations

import sys
import types as pytypes
from dataclasses import dataclass, field

from numba.core import ir

from ..tracking import contents
from ..tracking.fingerprint import fingerprint
from ..tracking.pickled import same_value

_TAKE = object()


@dataclass(frozen=True)
class GlobalRead:
    kind: str           # "global", "freevar" or "attr"
    namespace: str      # module name of the namespace read (or "<closure>")
    name: str           # the name, or "module.attr" for kind "attr"
    value: object = field(compare=False, hash=False, repr=False)
    lineno: int = 0
    owner: object = field(default=None, compare=False, hash=False, repr=False)  # module of "attr"
    fingerprint: str = field(default=None, compare=False)
    #: The arrays in ``value``, copied when the record is made (None: it holds none).  Every way
    #: a record comes into being (compile, relink, disk cache) takes it here, from the value.
    snapshot: object = field(default=_TAKE, compare=False, hash=False, repr=False)

    def __post_init__(self):
        if self.snapshot is _TAKE:
            object.__setattr__(self, "snapshot", contents.snapshot(self.value))

    @property
    def attr(self):
        return self.name.rsplit(".", 1)[1] if self.kind == "attr" else self.name

    def __str__(self):
        return f"{self.namespace}:{self.name}" if self.kind != "attr" else self.name


def collect_global_reads(func_ir):
    reads, seen = [], set()
    modname = func_ir.func_id.func.__module__ if func_ir.func_id.func else ""
    module_vars = {}

    def add(kind, namespace, name, value, line, owner=None):
        if (kind, namespace, name) not in seen:
            seen.add((kind, namespace, name))
            reads.append(GlobalRead(kind, namespace, name, value, line, owner,
                                    fingerprint(value)))

    for block in func_ir.blocks.values():
        for inst in block.body:
            if not isinstance(inst, ir.Assign):
                continue
            val = inst.value
            line = getattr(inst.loc, "line", 0) or 0
            if isinstance(val, ir.Global):
                add("global", modname, val.name, val.value, line)
                if isinstance(val.value, pytypes.ModuleType):
                    module_vars[inst.target.name] = val.value
            elif isinstance(val, ir.FreeVar):
                add("freevar", "<closure>", val.name, val.value, line)
                if isinstance(val.value, pytypes.ModuleType):
                    module_vars[inst.target.name] = val.value
            elif isinstance(val, ir.Expr) and val.op == "getattr":
                mod = module_vars.get(val.value.name)
                if mod is not None:
                    attr = getattr(mod, val.attr, None)
                    add("attr", mod.__name__, f"{mod.__name__}.{val.attr}", attr, line, owner=mod)
                    if isinstance(attr, pytypes.ModuleType):
                        module_vars[inst.target.name] = attr
    return reads


def override_reads(resolutions, reads):
    """``reads`` with a read of the name of each override implementation ``resolutions`` found
    that stands under its name in its module (``Override.home``): the override follows that
    name (dispatch/context.py), so code compiled with it depends on the binding as on a
    helper it calls by name, and the cell that defines it again is a change."""
    have = {(r.kind, r.namespace, r.name) for r in reads}
    out = list(reads)
    for res in resolutions:
        for ovr in res.candidates:
            home = getattr(ovr, "home", None)
            module = None if home is None else sys.modules.get(home[0])
            name = None if home is None else f"{home[0]}.{home[1]}"
            if module is None or ("attr", home[0], name) in have:
                continue
            have.add(("attr", home[0], name))
            out.append(GlobalRead("attr", home[0], name, ovr.impl, res.line, module,
                                  fingerprint(ovr.impl)))
    return out


# ---------------------------------------------------------------------------------------------
# Global arrays in device memory


def find_array(reads, array):
    """``(record, path, Copy)`` of the read in ``reads`` whose value holds ``array`` (the very
    object), or None."""
    for rec in reads:
        if rec.snapshot is None:
            continue
        for path, part in contents.arrays_in(rec.value):
            if part is array:
                return rec, path, rec.snapshot.copy_at(path)
    return None


def resident_symbol(pyfunc, rec, path):
    """The name of the device-memory global that holds the array at ``path`` of ``rec``'s
    value: the same in every function (and process) that reads that binding, so a kernel and
    its helpers share one copy, and a disk-cache entry finds it again."""
    import hashlib
    owner = pyfunc.__qualname__ if rec.kind == "freevar" else ""
    text = f"{rec.kind}|{rec.namespace}|{owner}|{rec.name}|{path}"
    return "__gpureplace_array_" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def resident_arrays(cf):
    """``[(symbol, copied array)]`` of the global arrays that ``cf``'s call graph reads from
    device memory (the larger ones, see ``contents.INLINE_ARRAY_BYTES``)."""
    found, whose = {}, {}
    for each in cf.closure():
        for rec in each.global_reads:
            if rec.snapshot is None:
                continue
            for path, part in rec.snapshot.parts:
                if part.array is None or not contents.is_resident(part):
                    continue
                symbol = resident_symbol(each.pyfunc, rec, path)
                held = found.setdefault(symbol, part.array)
                if held is not part.array and not same_value(held, part.array):
                    _refuse_two_arrays(cf, whose[symbol], each, rec)
                whose.setdefault(symbol, each)
    return list(found.items())


def _refuse_two_arrays(cf, first, second, rec):
    """Two functions of one name (closures one factory made) that read different arrays
    through the same closure variable, in one kernel: their device-memory global is named by
    what is read (the same in every process, for the disk cache), so one of them would read the
    other's array."""
    from .frontend import CompileError
    name = second.pyfunc.__qualname__
    code = second.pyfunc.__code__
    raise CompileError(
        f"{cf.pyfunc.__qualname__} calls two functions {name} (closures made by one factory) "
        f"that read different arrays through their closure variable {rec.name!r}; device "
        f"code keeps such an array in device memory under the variable's name, so one would "
        f"read the other's: give the arrays to the kernel as arguments, or build the "
        f"functions in factories of their own",
        function=name, filename=code.co_filename, lineno=rec.lineno or code.co_firstlineno,
        chain=(cf.pyfunc.__qualname__, name))
