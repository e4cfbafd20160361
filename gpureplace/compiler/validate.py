"""Validation before emission.

LLVM's NVPTX back end aborts the whole process (a notebook's kernel dies) on intrinsics it cannot
select, such as ``llvm.sin`` or ``llvm.pow``.  We scan modules first and raise a ``CompileError``
naming the Python function and line instead.
"""

from __future__ import annotations

import weakref

import llvmlite.binding as llvm

from ..errors import CompileError
from .intrinsics import usage
from .intrinsics.memory import format_bytes, more_shared_advice
from .runtime_helpers import SYMBOLS as _runtime_helper_symbols

#: LLVM intrinsics the NVPTX back end selects (prefix match on the name up to the type suffix).
_SELECTABLE = (
    "llvm.nvvm.", "llvm.fabs.", "llvm.fma.", "llvm.fmuladd.", "llvm.sqrt.", "llvm.copysign.",
    "llvm.minnum.", "llvm.maxnum.", "llvm.minimum.", "llvm.maximum.", "llvm.floor.",
    "llvm.ceil.", "llvm.trunc.", "llvm.rint.", "llvm.nearbyint.", "llvm.round.",
    "llvm.roundeven.", "llvm.ctpop.", "llvm.ctlz.", "llvm.cttz.", "llvm.bitreverse.",
    "llvm.bswap.", "llvm.abs.", "llvm.smin.", "llvm.smax.", "llvm.umin.", "llvm.umax.",
    "llvm.scmp.", "llvm.ucmp.",
    "llvm.fshl.", "llvm.fshr.", "llvm.memcpy.", "llvm.memset.", "llvm.memmove.",
    "llvm.lifetime.", "llvm.assume", "llvm.expect.", "llvm.sadd.with.overflow.",
    "llvm.uadd.with.overflow.", "llvm.ssub.with.overflow.", "llvm.usub.with.overflow.",
    "llvm.smul.with.overflow.", "llvm.umul.with.overflow.", "llvm.sadd.sat.", "llvm.uadd.sat.",
    "llvm.ssub.sat.", "llvm.usub.sat.", "llvm.fptosi.sat.", "llvm.fptoui.sat.", "llvm.stacksave", "llvm.stackrestore", "llvm.trap",
    "llvm.debugtrap", "llvm.invariant.", "llvm.is.fpclass.", "llvm.ptrmask.", "llvm.dbg.",
    "llvm.experimental.constrained.",
)
#: External functions that the CUDA driver/ptxas provides.
_EXTERNAL_OK = {"vprintf"} | set(_runtime_helper_symbols)        # the latter: linked later

_HINTS = {
    "llvm.pow": "use math.pow / ** on floats (libdevice __nv_pow)",
    "llvm.sin": "use math.sin (libdevice __nv_sin)",
    "llvm.cos": "use math.cos (libdevice __nv_cos)",
    "llvm.exp": "use math.exp (libdevice __nv_exp)",
    "llvm.log": "use math.log (libdevice __nv_log)",
}


def is_allowed_symbol(name: str) -> bool:
    if name.startswith("llvm."):
        return name.startswith(_SELECTABLE)
    if name.startswith(("__nv_", "_ZN")) or name in _EXTERNAL_OK:
        return True
    from .intrinsics.external import DECLARED
    return name in DECLARED            # cuda.declare_device: linked when the kernel loads


def invalid_declarations(module):
    """Names of functions declared in ``module`` (llvmlite.ir) that the device cannot run."""
    out = []
    for gv in module.globals.values():
        if getattr(gv, "is_declaration", False) and hasattr(gv, "ftype"):
            if not is_allowed_symbol(gv.name):
                out.append(gv.name)
    return out


def describe_symbol(name):
    base = ".".join(name.split(".")[:2])
    hint = _HINTS.get(base)
    what = (f"LLVM intrinsic {name}, which the NVPTX back end cannot compile"
            if name.startswith("llvm.") else f"external function {name!r}, which has no device "
                                              f"implementation")
    return what + (f" ({hint})" if hint else "")


def check_compiled(cf):
    """Raise if lowering ``cf`` left a call the device cannot run, or if its local arrays (and
    those of the device functions it calls) are more than a thread can have."""
    if cf.bad_calls:
        name, loc = cf.bad_calls[0]
        raise CompileError(
            f"this code calls {describe_symbol(name)}",
            function=cf.pyfunc.__qualname__,
            filename=getattr(loc, "filename", "") or cf.pyfunc.__code__.co_filename,
            lineno=getattr(loc, "line", 0) or cf.pyfunc.__code__.co_firstlineno,
            chain=(cf.pyfunc.__qualname__,))
    _check_local_total(cf)


# ---------------------------------------------------------------------------------------------
# What one thread, block and module can hold, summed over a kernel (each array on its own is
# checked where it is typed, in intrinsics/memory.py; these are the sums).

_local_totals = weakref.WeakKeyDictionary()       # code library -> bytes per thread, callees in


def _local_total(cf):
    """Bytes of local arrays a thread running ``cf`` can have at once: its own, plus the most
    that one of its callees needs (calls run one after another; LLVM inlines them and reuses
    the space only when it proves the lifetimes apart)."""
    total = _local_totals.get(cf.library)
    if total is None:
        own = sum(s.nbytes for s in usage.sites(cf.library, usage.LOCAL))
        total = own + max((_local_total(c) for c in cf.callees), default=0)
        _local_totals[cf.library] = total
    return total


def _check_local_total(cf):
    from ..arch import LOCAL_BYTES_PER_THREAD
    own = usage.sites(cf.library, usage.LOCAL)
    if not own and not cf.callees:
        return
    total = _local_total(cf)
    if total <= LOCAL_BYTES_PER_THREAD:
        return
    parts = [f"{s.what} at line {s.line}: {format_bytes(s.nbytes)}" for s in own]
    deepest = max(cf.callees, key=_local_total, default=None)
    if deepest is not None and _local_total(deepest):
        parts.append(f"{deepest.pyfunc.__qualname__}() and what it calls: "
                     f"{format_bytes(_local_total(deepest))}")
    # the line of the array that took the sum over (or the largest, when the callees did)
    running, at = total - sum(s.nbytes for s in own), None
    for s in own:
        running += s.nbytes
        if running > LOCAL_BYTES_PER_THREAD:
            at = s
            break
    at = at or max(own, key=lambda s: s.nbytes, default=None)
    raise CompileError(
        f"the local arrays of {cf.pyfunc.__qualname__} add up to {format_bytes(total)} per "
        f"thread ({'; '.join(parts)}), more than a thread's "
        f"{format_bytes(LOCAL_BYTES_PER_THREAD)} of local memory; use global arrays (pass them "
        f"as arguments), or cuda.shared.array for data shared by a block",
        function=cf.pyfunc.__qualname__, filename=cf.pyfunc.__code__.co_filename,
        lineno=at.line if at else cf.pyfunc.__code__.co_firstlineno,
        chain=(cf.pyfunc.__qualname__,))


def check_linked(binding_module, where, provided=()):
    """After linking (and optimising) a kernel: every declaration left must be something the
    device provides (or ``provided``: compiled on its own and added to the PTX), its static
    shared and constant data must fit, and no compare-and-swap may be left on local memory."""
    for fn in binding_module.functions:
        # Device functions and libdevice are defined by now: a declaration left is unresolved.
        if fn.is_declaration and fn.name not in provided and (
                not is_allowed_symbol(fn.name) or fn.name.startswith(("_ZN", "__nv_"))):
            raise CompileError(f"unresolved call to {describe_symbol(fn.name)}",
                               function=where.pyfunc.__qualname__,
                               filename=where.pyfunc.__code__.co_filename,
                               lineno=where.pyfunc.__code__.co_firstlineno,
                               chain=(where.pyfunc.__qualname__,))
    libraries = [cf.library for cf in where.closure()]
    _check_data_totals(binding_module, where, libraries)
    if any(usage.sites(lib, usage.CAS) for lib in libraries) and \
            any(usage.sites(lib, usage.LOCAL) for lib in libraries):
        _check_cas_on_local(binding_module, where, libraries)


#: LLVM address spaces of static shared and constant data
_SHARED_SPACE, _CONST_SPACE = "addrspace(3)", "addrspace(4)"


def _check_data_totals(mod, where, libraries):
    """ptxas refuses a kernel whose static shared data is over 48 KiB ("uses too much shared
    data") or a module whose constant data is over 64 KiB: add up what the optimised module
    kept (what ptxas counts) and name the arrays."""
    from ..arch import CONST_BYTES, STATIC_SHARED_BYTES
    sizes = {_SHARED_SPACE: {}, _CONST_SPACE: {}}
    data_layout = None
    for gv in mod.global_variables:
        space = str(gv.type)
        if gv.is_declaration or not space.endswith((_SHARED_SPACE, _CONST_SPACE)):
            continue
        if data_layout is None:
            data_layout = llvm.create_target_data(mod.data_layout)
        sizes[space[-len(_SHARED_SPACE):]][gv.name] = \
            data_layout.get_abi_size(gv.global_value_type)
    for space, limit, kind, what, instead in (
            (_SHARED_SPACE, STATIC_SHARED_BYTES, usage.SHARED, "static shared arrays",
             "of static shared memory a block can have; "),
            (_CONST_SPACE, CONST_BYTES, usage.CONST, "constant data",
             "of constant memory a module can have; pass the larger arrays as kernel "
             "arguments instead")):
        total = sum(sizes[space].values())
        if total <= limit:
            continue
        if kind == usage.SHARED:
            instead += more_shared_advice(
                total, where.options.arch, "declare one cuda.shared.array(0, dtype) instead, "
                "split into the arrays by slicing,")
        found = {s.symbol: s for lib in libraries for s in usage.sites(lib, kind)}
        parts, seen = [], set()
        for name, nbytes in sorted(sizes[space].items(), key=lambda kv: -kv[1]):
            site = found.get(_unlinked(name))
            if site is None or (site.what, site.line) in seen:
                continue
            seen.add((site.what, site.line))
            parts.append(f"{site.what} in {site.where()}: {format_bytes(nbytes)}")
        first = max((found[_unlinked(n)] for n in sizes[space] if _unlinked(n) in found),
                    key=lambda s: s.nbytes, default=None)
        raise CompileError(
            f"the {what} of {where.pyfunc.__qualname__} add up to {format_bytes(total)} "
            f"({'; '.join(parts[:6])}{'; ...' if len(parts) > 6 else ''}), more than the "
            f"{format_bytes(limit)} {instead}",
            function=first.function if first else where.pyfunc.__qualname__,
            filename=first.filename if first else where.pyfunc.__code__.co_filename,
            lineno=first.line if first else where.pyfunc.__code__.co_firstlineno,
            chain=(where.pyfunc.__qualname__,))


def _points_into_alloca(value, defs, depth=0):
    """Whether the pointer ``value`` (an operand, llvmlite binding) is an address in an
    ``alloca``, i.e. in local memory: NVPTX makes the access a ``.local`` one when it emits the
    code.  ``defs``: the function's instructions by their text (an operand prints as the
    instruction that defines it, and llvmlite gives its own operands only to instructions)."""
    inst = defs.get(str(value))
    if inst is None or depth > 12:
        return False
    op = inst.opcode
    if op == "alloca":
        return True
    operands = list(inst.operands)
    if op in ("getelementptr", "bitcast", "addrspacecast"):
        return _points_into_alloca(operands[0], defs, depth + 1)
    if op in ("select", "phi"):
        return any(_points_into_alloca(v, defs, depth + 1)
                   for v in (operands[1:] if op == "select" else operands))
    return False


def _unlinked(name):
    """A global's name as its module had it (linking renames a clash to ``name.1``)."""
    base, _, suffix = name.rpartition(".")
    return base if base and suffix.isdigit() else name


def _check_cas_on_local(mod, where, libraries):
    """A compare-and-swap LLVM has proved to act on a local array: PTX has no atomics on local
    memory (ptxas: "State space incorrect for instruction 'atom'")."""
    for fn in mod.functions:
        defs, swaps = {}, []
        for block in fn.blocks:
            for inst in block.instructions:
                defs[str(inst)] = inst
                if inst.opcode == "cmpxchg":
                    swaps.append(inst)
        for inst in swaps:
            if not _points_into_alloca(next(iter(inst.operands)), defs):
                continue
            # which call it was is lost in inlining: name every compare-and-swap of the kernel
            sites = [s for lib in libraries for s in usage.sites(lib, usage.CAS)]
            first = sites[0]
            lines = ", ".join(f"{s.what} in {s.where()}" for s in sites[:6])
            raise CompileError(
                f"an atomic compare-and-swap acts on a cuda.local.array ({lines}): local "
                f"memory belongs to one thread, so PTX has no atomics for it and none are "
                f"needed; read, compare and write the element directly",
                function=first.function, filename=first.filename, lineno=first.line,
                chain=(where.pyfunc.__qualname__,))
