"""Back end: LLVM IR -> PTX with llvmlite's NVPTX target.

Steps, in order: link the kernel's modules and the pruned libdevice, internalize everything but the
kernels, fold ``__nvvm_reflect`` (LLVM's NVVMReflect pass, driven by the module flags we set),
optimise at O3, validate that nothing unselectable is left, emit PTX for ``sm_XX`` with a PTX ISA
version the driver accepts.
"""

from __future__ import annotations

import functools
import re
import threading

import llvmlite.binding as llvm

from . import libdevice

TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_ARCH = "sm_90"
#: Newest PTX ISA the bundled LLVM can emit (llvmlite 0.50 ships LLVM 22: ptx90).
LLVM_MAX_PTX = 90

_init_lock = threading.Lock()
_initialized = False


#: LLVM's full-unroll threshold.  NVVM unrolls loops with a constant trip count far more readily
#: than LLVM's default (300): a loop of 15 libdevice sinf calls stays rolled at 300, which costs
#: the instruction-level parallelism between iterations (0.81x of CUDA C measured on the H200);
#: at 3000 it unrolls as nvcc does.  It is a process-wide LLVM option, set once.
UNROLL_THRESHOLD = 3000


def initialize_llvm():
    global _initialized
    if not _initialized:
        with _init_lock:
            if not _initialized:
                llvm.initialize_all_targets()
                llvm.initialize_all_asmprinters()
                llvm.set_option("gpureplace", f"-unroll-threshold={UNROLL_THRESHOLD}")
                _initialized = True


def ptx_isa_for_driver(driver_version: int | None) -> int:
    """PTX ISA (e.g. 90 for 9.0) that a driver of CUDA version ``driver_version`` (e.g. 13000) accepts."""
    if not driver_version:
        return 80          # no driver to ask: PTX 8.0 (CUDA 12.0) is accepted by every CUDA 12+ driver
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


def arch_number(arch: str) -> int:
    m = re.fullmatch(r"sm_(\d+)[af]?", arch)
    if not m:
        raise ValueError(f"arch must look like 'sm_90', got {arch!r}")
    return int(m.group(1))


@functools.lru_cache(maxsize=None)
def target_machine(arch: str, ptx: int):
    initialize_llvm()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=arch, features=f"+ptx{ptx}", opt=3)


@functools.lru_cache(maxsize=None)
def data_layout() -> str:
    return str(target_machine(DEFAULT_ARCH, 80).target_data)


def pass_builder(level: int, arch: str = DEFAULT_ARCH, ptx: int = 80):
    tm = target_machine(arch, ptx)
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    if level >= 2:
        pto.loop_vectorization = False      # GPUs vectorise across threads, not within one
        pto.slp_vectorization = False
    return llvm.create_pass_builder(tm, pto)


def optimize(mod, arch: str, ptx: int, level: int = 3):
    pb = pass_builder(level, arch, ptx)
    mpm = pb.getModulePassManager()
    mpm.run(mod, pb)


def emit_ptx(mod, arch: str, ptx: int) -> str:
    return target_machine(arch, ptx).emit_assembly(mod)


def reflect_values(arch: str, fastmath: bool):
    """``__nvvm_reflect`` answers: flush denormals and approximate sqrt/div only under fast math."""
    return {"__CUDA_ARCH": arch_number(arch) * 10, "__CUDA_FTZ": int(fastmath),
            "__CUDA_PREC_SQRT": int(not fastmath), "__CUDA_PREC_DIV": int(not fastmath)}


def link_libdevice(mod, names, arch=DEFAULT_ARCH, fastmath=False):
    """Link the pruned libdevice holding ``names`` (and their dependencies) into ``mod``."""
    if not names:
        return
    lib = llvm.parse_bitcode(libdevice.pruned_bitcode(names, reflect_values(arch, fastmath)))
    lib.triple = TRIPLE
    lib.data_layout = mod.data_layout
    mod.link_in(lib)


def internalize_except(mod, keep):
    """Give internal linkage to every definition not named in ``keep`` (the kernels)."""
    for fn in mod.functions:
        if not fn.is_declaration and fn.name not in keep:
            fn.linkage = "internal"
    for gv in mod.global_variables:
        if not gv.is_declaration and gv.name not in keep and gv.linkage.name != "internal":
            # Constant tables and strings stay module-local; shared/const arrays are already internal.
            gv.linkage = "internal"
