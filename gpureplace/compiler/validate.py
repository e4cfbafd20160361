"""Validation before emission.

LLVM's NVPTX back end aborts the whole process (a notebook's kernel dies) on intrinsics it cannot
select, such as ``llvm.sin`` or ``llvm.pow``.  We scan modules first and raise a ``CompileError``
naming the Python function and line instead.
"""

from __future__ import annotations

from ..errors import CompileError
from .runtime_helpers import SYMBOLS as _runtime_helper_symbols

#: LLVM intrinsics the NVPTX back end selects (prefix match on the name up to the type suffix).
_SELECTABLE = (
    "llvm.nvvm.", "llvm.fabs.", "llvm.fma.", "llvm.fmuladd.", "llvm.sqrt.", "llvm.copysign.",
    "llvm.minnum.", "llvm.maxnum.", "llvm.minimum.", "llvm.maximum.", "llvm.floor.",
    "llvm.ceil.", "llvm.trunc.", "llvm.rint.", "llvm.nearbyint.", "llvm.round.",
    "llvm.roundeven.", "llvm.ctpop.", "llvm.ctlz.", "llvm.cttz.", "llvm.bitreverse.",
    "llvm.bswap.", "llvm.abs.", "llvm.smin.", "llvm.smax.", "llvm.umin.", "llvm.umax.",
    "llvm.fshl.", "llvm.fshr.", "llvm.memcpy.", "llvm.memset.", "llvm.memmove.",
    "llvm.lifetime.", "llvm.assume", "llvm.expect.", "llvm.sadd.with.overflow.",
    "llvm.uadd.with.overflow.", "llvm.ssub.with.overflow.", "llvm.usub.with.overflow.",
    "llvm.smul.with.overflow.", "llvm.umul.with.overflow.", "llvm.sadd.sat.", "llvm.uadd.sat.",
    "llvm.ssub.sat.", "llvm.usub.sat.", "llvm.stacksave", "llvm.stackrestore", "llvm.trap",
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
    """Raise if lowering ``cf`` left a call the device cannot run."""
    if cf.bad_calls:
        name, loc = cf.bad_calls[0]
        raise CompileError(
            f"this code calls {describe_symbol(name)}",
            function=cf.pyfunc.__qualname__,
            filename=getattr(loc, "filename", "") or cf.pyfunc.__code__.co_filename,
            lineno=getattr(loc, "line", 0) or cf.pyfunc.__code__.co_firstlineno,
            chain=(cf.pyfunc.__qualname__,))


def check_linked(binding_module, where):
    """After linking a kernel: every declaration left must be something the device provides."""
    for fn in binding_module.functions:
        # Device functions and libdevice are defined by now: a declaration left is unresolved.
        if fn.is_declaration and (not is_allowed_symbol(fn.name)
                                  or fn.name.startswith(("_ZN", "__nv_"))):
            raise CompileError(f"unresolved call to {describe_symbol(fn.name)}",
                               function=where.pyfunc.__qualname__,
                               filename=where.pyfunc.__code__.co_filename,
                               lineno=where.pyfunc.__code__.co_firstlineno,
                               chain=(where.pyfunc.__qualname__,))
