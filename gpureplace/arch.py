"""GPU architectures: what each ``sm_XX`` needs (the oldest PTX ISA that targets it), what one
thread, block and module can hold on it, which PTX ISA a driver accepts, and how a user names one.

Pure tables and functions, with nothing to ask of the machine (``probe`` asks which GPU and driver
this process has).  The compiler checks these before LLVM sees a request: LLVM aborts the process on
an architecture or PTX ISA it cannot honour.
"""

from __future__ import annotations

import re

from .errors import CompileError, UnknownArchitecture

DEFAULT_ARCH = "sm_90"
#: Newest PTX ISA the bundled LLVM can emit (llvmlite 0.50 ships LLVM 22: ptx90).
LLVM_MAX_PTX = 90



def ptx_isa_for_driver(driver_version: int | None) -> int:
    """PTX ISA (e.g. 90 for 9.0) that a driver of CUDA version ``driver_version`` (e.g. 13000)
    accepts."""
    if not driver_version:
        return 80          # no driver to ask: PTX 8.0 (CUDA 12.0), which every CUDA 12+ driver takes
    major, minor = driver_version // 1000, (driver_version % 1000) // 10
    if major >= 13:
        isa = 90 + minor
    elif major == 12:
        isa = {0: 80, 1: 81, 2: 82, 3: 83, 4: 84, 5: 85, 6: 85, 7: 86, 8: 87, 9: 88}.get(minor, 88)
    elif major == 11:
        isa = 70 + min(minor, 8)
    else:
        isa = 60
    return min(isa, LLVM_MAX_PTX)


#: The oldest PTX ISA that can target each architecture (PTX ISA release notes).  LLVM aborts the
#: process when asked for an older one, so this is checked before any code is generated.
ARCH_MIN_PTX = {50: 40, 52: 41, 53: 42, 60: 50, 61: 50, 62: 50, 70: 60, 72: 61, 75: 63, 80: 70,
                86: 71, 87: 74, 89: 78, 90: 78, 100: 86, 101: 86, 103: 88, 110: 90, 120: 87,
                121: 88}

#: Architecture-specific (``a``) and family (``f``) targets: only these exist, each from a PTX ISA
#: of its own (newer than its base architecture's: sm_100f needs 8.8 where sm_100 needs 8.6).  LLVM
#: aborts the process below it, and takes any other suffix as an unknown processor (it warns on
#: stderr and writes a ``.target`` that ptxas and the driver refuse).
ARCH_VARIANT_MIN_PTX = {"sm_90a": 80, "sm_100a": 86, "sm_101a": 86, "sm_103a": 88, "sm_110a": 90,
                        "sm_120a": 87, "sm_121a": 88, "sm_100f": 88, "sm_101f": 88,
                        "sm_103f": 88, "sm_110f": 90, "sm_120f": 88, "sm_121f": 88}


def arch_min_ptx(arch: str) -> int:
    """The oldest PTX ISA that can target ``arch``; a CompileError for an architecture unknown
    here (LLVM would abort the process, or write a target nothing can load)."""
    number = arch_number(arch)
    if arch[-1] in "af":
        need = ARCH_VARIANT_MIN_PTX.get(arch)
        if need is None:
            variants = ", ".join(ARCH_VARIANT_MIN_PTX)
            raise CompileError(f"unknown GPU architecture {arch!r}: the architecture-specific "
                               f"and family targets are {variants}; or give the plain "
                               f"sm_{number}")
        return need
    need = ARCH_MIN_PTX.get(number)
    if need is None:
        known = ", ".join(f"sm_{n}" for n in sorted(ARCH_MIN_PTX))
        raise CompileError(f"unknown GPU architecture {arch!r}: known are {known}")
    return need


def ptx_isa_for_arch(arch: str, driver_isa: int, have_driver: bool) -> int:
    """The PTX ISA to emit for ``arch``: the driver's (``driver_isa``), or, without a driver,
    the arch's minimum when that is newer than the default; a clear error when the driver is too
    old for the arch or the arch is unknown (LLVM would abort the process)."""
    need = arch_min_ptx(arch)
    if driver_isa >= need:
        return driver_isa
    if need > LLVM_MAX_PTX:
        raise CompileError(f"{arch} needs PTX ISA {need // 10}.{need % 10}, newer than the "
                           f"bundled LLVM emits ({LLVM_MAX_PTX // 10}.{LLVM_MAX_PTX % 10})")
    if have_driver:
        raise CompileError(f"{arch} needs PTX ISA {need // 10}.{need % 10}, but the installed "
                           f"CUDA driver accepts PTX up to {driver_isa // 10}.{driver_isa % 10}: "
                           f"update the driver, or compile for an older architecture")
    return need



def arch_number(arch: str) -> int:
    m = re.fullmatch(r"sm_(\d+)[af]?", arch)
    if not m:
        raise ValueError(f"arch must look like 'sm_90', got {arch!r}")
    return int(m.group(1))


# ---------------------------------------------------------------------------------------------
# What one thread, block and module can hold.  The CUDA C++ Programming Guide's "Technical
# Specifications per Compute Capability": 512 KiB of local memory per thread and 64 KiB of
# constant memory on every architecture; 48 KiB of static shared memory per block (ptxas refuses
# more: "uses too much shared data (..., 0xc000 max)"), more only as dynamic shared memory after
# the kernel opts in, up to a maximum of each architecture.

#: Local memory of one thread (``cuda.local.array``), in bytes.
LOCAL_BYTES_PER_THREAD = 512 * 1024
#: Static shared memory of one block (``cuda.shared.array`` with a constant shape), in bytes.
STATIC_SHARED_BYTES = 48 * 1024
#: Constant memory of one module (``cuda.const.array_like``, print()'s format strings), in bytes.
CONST_BYTES = 64 * 1024
#: Shared memory one block can have after opting in (dynamic shared memory), in KiB, by
#: architecture (the Programming Guide's "maximum amount of shared memory per thread block").
SHARED_OPT_IN_KIB = {50: 48, 52: 48, 53: 48, 60: 48, 61: 48, 62: 48, 70: 96, 72: 96, 75: 64,
                     80: 163, 86: 99, 87: 163, 89: 99, 90: 227, 100: 227, 101: 227, 103: 227,
                     110: 227, 120: 99, 121: 99}


def shared_opt_in_bytes(arch: str) -> int | None:
    """The most shared memory a block of a kernel compiled for ``arch`` can have (None when the
    architecture is unknown)."""
    try:
        kib = SHARED_OPT_IN_KIB.get(arch_number(arch))
    except ValueError:
        return None
    return None if kib is None else kib * 1024


def normalize_arch(value, what, known=True):
    """``"sm_XX"`` from an architecture given as numba-cuda's ``(major, minor)`` tuple of ints or
    as an ``sm_XX`` string (checked by ``arch_number``, as ``%config GPUReplace.arch`` is);
    anything else is refused with the accepted forms.  ``what`` names the option in the message
    (``"compile_ptx(cc=...)"``); ``known``: also refuse an architecture the compiler does not
    know (else that is said when a compile asks for it)."""
    forms = ("a (major, minor) tuple of ints such as (9, 0) (or (9, 0, 'a') for an "
             "architecture-specific 'sm_90a', (10, 0, 'f') for a family 'sm_100f'), or a "
             "string such as 'sm_90'")
    if isinstance(value, tuple):
        suffix = value[2] if len(value) == 3 and value[2] in ("a", "f") else ""
        head = value[:2] if suffix else value
        if len(head) == 2 and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                  for v in head):
            return _known(f"sm_{head[0]}{head[1]}{suffix}", what, known)
        hint = ""
        if 1 <= len(value) <= 3 and all(isinstance(v, int) for v in value):
            hint = f" (did you mean {(value + (0,))[:2]!r}?)"
        raise ValueError(f"{what} must be {forms}; got {value!r}{hint}")
    if isinstance(value, str):
        try:
            arch_number(value)
        except ValueError:
            pass
        else:
            return _known(value, what, known)
    hint = ""
    digits = str(value).strip().lower().removeprefix("compute_").removeprefix("sm")
    if (isinstance(value, int) and not isinstance(value, bool)) or \
            (isinstance(value, str) and digits.isdigit()):
        hint = f" (did you mean 'sm_{digits}'?)"
    raise ValueError(f"{what} must be {forms}; got {value!r}{hint}")


def _known(arch, what, check):
    """``arch``, once the compiler knows it (``arch_min_ptx`` decides, with the list of those it
    knows in its message) when ``check``."""
    if check:
        try:
            arch_min_ptx(arch)
        except CompileError as exc:
            raise UnknownArchitecture(f"{what}: {exc.reason}") from None
    return arch
