"""Dependency records: which globals a compiled function read, found in its Numba IR.

Each ``ir.Global`` / ``ir.FreeVar`` node is a name the function read from its module namespace or
its closure; a ``getattr`` on a module global (``math.sin``, ``mylib.helper``) is recorded as that
module attribute.  Redefinition tracking compares these against the current bindings.
"""

from __future__ import annotations

import types as pytypes
from dataclasses import dataclass, field

from numba.core import ir

from ..tracking.fingerprint import fingerprint


@dataclass(frozen=True)
class GlobalRead:
    kind: str           # "global", "freevar" or "attr"
    namespace: str      # module name of the namespace read (or "<closure>")
    name: str           # the name, or "module.attr" for kind "attr"
    value: object = field(compare=False, hash=False, repr=False)
    lineno: int = 0
    owner: object = field(default=None, compare=False, hash=False, repr=False)  # module of "attr"
    fingerprint: str = field(default=None, compare=False)

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
