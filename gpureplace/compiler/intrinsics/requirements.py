"""What the GPU being compiled for can run: the minimum architecture and PTX ISA of intrinsics.

LLVM's NVPTX back end aborts the whole process (a notebook's kernel dies) on an intrinsic the
target architecture lacks (``LLVM ERROR: Cannot select: intrinsic %llvm.nvvm.match.any.sync``
below sm_70), and inline PTX the target cannot run (``nanosleep`` below sm_70, ``activemask``
before PTX ISA 6.2) makes ptxas, and so the driver at load, refuse the module.  A lowering that
needs more than every architecture offers calls :func:`require` first, which raises at the user's
line, naming the construct, the architecture compiled for and what to do instead.

The architecture is the compile's (``Options.arch``: ``kernel.compile(sig, arch=...)``,
``compile_ptx(cc=...)``, or the current GPU's); the PTX ISA is the one that compile emits, which
follows the installed driver (``backend.compile_ptx_isa``).  Lowering runs once per option set
(the arch is part of every cache key), so the check sees the right target each time.
"""

from __future__ import annotations

from ...arch import DEFAULT_ARCH
from .stubs import IntrinsicArgumentError


def compile_target():
    """(arch, PTX ISA) of the function being lowered, or (arch, None) when the arch itself is
    unknown or malformed: the back end refuses that one with its own message."""
    from .. import backend, frontend
    from ...errors import CompileError
    cf = frontend.current_compiled()
    arch = cf.options.arch if cf is not None else DEFAULT_ARCH
    try:
        return arch, backend.compile_ptx_isa(arch)
    except (CompileError, ValueError):
        return arch, None


def arch_at_least(number: int) -> bool:
    """Whether the function being lowered targets sm_``number`` or newer (False for an arch
    the back end will refuse anyway)."""
    from ...arch import arch_number
    arch, isa = compile_target()
    return isa is not None and arch_number(arch) >= number


def ptx_at_least(version: int) -> bool:
    """Whether the PTX ISA being emitted is ``version`` (63 for 6.3) or newer."""
    _, isa = compile_target()
    return isa is not None and isa >= version


def _cc(number):
    return f"({number // 10}, {number % 10})"


def require(what: str, sm: int = 0, ptx: int = 0, instead: str = ""):
    """Refuse ``what`` (``"cuda.match_any_sync()"``) unless the compile targets sm_``sm`` or newer
    and emits PTX ISA ``ptx`` (``63`` for 6.3) or newer.  ``instead``: what a user of an older
    GPU can write in its place.  Raised from a lowering, the error names the user's line."""
    from ...arch import arch_number
    arch, isa = compile_target()
    if isa is None:
        return                  # an unknown arch: the back end says so, before any code is made
    if sm and arch_number(arch) < sm:
        alt = f"; {instead}" if instead else ""
        raise IntrinsicArgumentError(
            f"{what} needs a GPU of compute capability {sm // 10}.{sm % 10} or newer (sm_{sm}), "
            f"but this code is compiled for {arch}: compile for sm_{sm} or newer "
            f"(kernel.compile(sig, arch='sm_{sm}'), compile_ptx(..., cc={_cc(sm)})) to run it on "
            f"such a GPU{alt}")
    if ptx and isa < ptx:
        raise IntrinsicArgumentError(
            f"{what} needs PTX ISA {ptx // 10}.{ptx % 10} or newer, but the installed CUDA driver "
            f"accepts PTX up to {isa // 10}.{isa % 10} (this compile for {arch} emits that): "
            f"update the NVIDIA driver")
