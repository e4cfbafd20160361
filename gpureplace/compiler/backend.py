"""Back end: LLVM IR -> PTX with llvmlite's NVPTX target.

Steps, in order: link the kernel's modules and the pruned libdevice, internalize everything but the
kernels, fold ``__nvvm_reflect`` (LLVM's NVVMReflect pass, driven by the module flags we set),
optimise at O3, validate that nothing unselectable is left, emit PTX for ``sm_XX`` with a PTX ISA
version the driver accepts.
"""

from __future__ import annotations

import functools
import os
import re
import threading

import llvmlite.binding as llvm

from ..arch import DEFAULT_ARCH, arch_number, ptx_isa_for_arch, ptx_isa_for_driver
from .. import probe
from ..errors import CompileError
from . import libdevice_link

TRIPLE = "nvptx64-nvidia-cuda"

_init_lock = threading.Lock()
_initialized = False


#: LLVM's full-unroll threshold.  NVVM unrolls loops with a constant trip count far more readily
#: than LLVM's default (300): a loop of 15 libdevice sinf calls stays rolled at 300, which costs
#: the instruction-level parallelism between iterations (0.81x of CUDA C measured on the H200);
#: at 3000 it unrolls as nvcc does.  It is a process-wide LLVM option, set once.
UNROLL_THRESHOLD = 3000

#: LLVM's threshold for *partial* unrolling (a constant trip count too large to unroll fully).
#: NVPTX sets it to a quarter of the full threshold as LLVM's default was (300 / 4 = 75) before
#: UNROLL_THRESHOLD raised the latter, so the 256-step inner loop of an n-body kernel (about 30
#: instructions a step) unrolled only 2x, where nvcc unrolls it 4x (8x with rsqrtf): each step's
#: square root then waits for the loop's branch instead of overlapping the next steps'.  At 300
#: (and RUNTIME_UNROLL_MAX_COUNT's cap of 4) it unrolls 4x: n-body with 1 / sqrt went from 0.945x
#: to 0.983x of CUDA C on the H200; of bench/codegen.py's 29 specialisations only n-body's three
#: and the row softmax (unchanged in time) compile differently.
PARTIAL_UNROLL_THRESHOLD = 300

#: Runtime unrolling of loops whose trip count is known only at run time, such as the grid-stride
#: loop ``while i < x.size: acc += x[i]; i += cuda.gridsize(1)``.
#:
#: Nothing is missing from the IR for it: Numba marks signed integer ``+`` ``nsw`` (its documented
#: choice: signed overflow is ignored), the stride ``ntid * nctaid`` is known positive from the
#: special registers' ranges, so ScalarEvolution does compute the trip count (the remaining range
#: divided by the stride).  What stops LoopUnroll is the cost of *materialising* that count in the
#: preheader: a 64-bit udiv by a run-time value (``TCC_Expensive``) plus about ten 64-bit adds,
#: selects and compares (2 each on NVPTX) is far over LLVM's default budget of 4, so the runtime
#: unroller gives up ("high cost for expanding trip count") and the loop keeps one load in flight
#: per iteration.  NVVM pays for the division (nvcc's PTX for the same C loop divides in the
#: preheader, with a 32-bit fast path, then unrolls 4x): it runs once per thread per loop entry,
#: and the unrolled body keeps four independent loads in flight, which a memory-bound grid-stride
#: loop needs (the block reduction ran at 0.61x of CUDA C without it).  32 admits the expansion
#: for 1-D and 2-D grid-stride loops, with starts like ``grid(1) * 4 + offset`` and bounds like
#: ``x.size - 3``.  The budget's other users (IndVarSimplify's exit-value rewriting and LFTR) may
#: then also spend up to a division outside a loop; compiling every kernel of the test suite and
#: of bench/codegen.py with and without it changed only grid-stride loops.
#:
#: Soundness: this lets LLVM use what it already proved; no flag or assumption is added.  The
#: count is exact for every execution in which ``i += stride`` does not overflow int64; one in
#: which it does was already poison under the ``nsw`` Numba emits (and indexes far outside any
#: array).
SCEV_EXPANSION_BUDGET = 32

#: Largest factor for partial and runtime unrolling (full unrolling of constant trip counts is not
#: limited by it).  LLVM's default starts at 8; NVVM unrolls these loops 4x (nvcc's PTX for the
#: grid-stride reduction and for a row-sum loop).  8 copies cost registers: the block reduction
#: needs 32 at 8x (the edge of full occupancy for 256-thread blocks, 8 per SM) and 28 at 4x,
#: against NVRTC's 26.
RUNTIME_UNROLL_MAX_COUNT = 4

#: A kernel whose code (or a device function it calls) loops over a range of constant bounds
#: with at least CONSTANT_RANGE_MIN_TRIPS steps is optimised with a larger partial-unrolling
#: budget: up to CONSTANT_LOOP_MAX_COUNT copies within CONSTANT_LOOP_PARTIAL_THRESHOLD.  NVVM
#: unrolls such a loop by its body's size (n-body's 256-step inner loop 8x with rsqrtf, 16x
#: under fast math; nvcc's SASS) while keeping grid-stride loops at 4x; LLVM has one cap for
#: partial and runtime unrolling, so the choice is made per kernel: the histogram's grid-stride
#: loop at 8x ran 1.6x slower (H200), and a kernel with no constant range keeps the defaults.
#: The options are LLVM's process-wide ones, so each optimisation sets them under a lock (and a
#: kernel of both kinds gets the larger budget for both).  H200, bench/codegen.py: n-body 1/sqrt
#: 0.995x -> 1.016x, fast math 0.872x -> 1.013x, rsqrt 0.824x -> 1.042x of CUDA C (the
#: histogram and the reductions unchanged: no constant range).
CONSTANT_RANGE_MIN_TRIPS = 16
CONSTANT_LOOP_MAX_COUNT = 16
CONSTANT_LOOP_PARTIAL_THRESHOLD = 600

#: Loop strength reduction keeps its rewrite only where its own cost model rates it better than
#: the loop as it is (LLVM's ``lsr-drop-solution``, on by default for RISC-V; a choice between
#: two equivalent forms, so it cannot change results).  Without it, the 4x-unrolled grid-stride
#: saxpy (3 arrays) got 12 pointer induction variables, one per array and copy, each bumped every
#: iteration: 40 registers, against 26 with it and 24 for nvcc's chained pointers.  Over the test
#: suite's and the benchmark's kernels it changes only loops like that one (and cuts a 4-D
#: indexing test kernel from 72 to 40 registers); the tiled matmul is unchanged.
LSR_DROP_UNPROFITABLE = True

#: SimplifyCFG does not sink instructions common to both arms of an if/else into the block where
#: they join.  In a kernel like ``if edge: out[i, j] = a[i, j] else: out[i, j] = f(a, i, j)`` it
#: turned the two stores into one store of a phi after the join; ptxas then keeps a divergent
#: branch with a reconvergence barrier (BSSY/BSYNC) around the arms instead of predicating them.
#: NVVM keeps a store in each arm (nvcc's PTX for the same C does), and so do we now: the 5-point
#: stencil went from 0.952x to 0.971x of CUDA C on the H200, and the other 15 kernels of
#: bench/codegen.py did not change (within 0.002).  Like the options above it is process-wide.
SINK_COMMON_INSTRUCTIONS = False

#: 32-bit pointers into shared, constant and local memory (NVPTX's ``-nvptx-short-ptr``), as
#: NVVM uses by default: those address spaces are far smaller than 4 GiB, and a 64-bit pointer
#: into them costs a register pair and a 64-bit add for every address computed, and a 64-bit
#: compare for a loop stepping through a shared tile.  In n-body's inner loop (float4 bodies
#: staged in shared memory) it was the one difference left between our PTX and nvcc's once both
#: were unrolled alike, and ptxas scheduled the two differently: with 64-bit shared addresses it
#: put every rsqrt's denormal scaling on one predicate register (14 of 16 predicated FMULs on P2,
#: against nvcc's P2/P3/P4), which keeps the iterations' MUFU latencies from overlapping.  H200,
#: bench/codegen.py: n-body fast math 0.787x -> 0.872x, the row softmax 0.967x -> 0.975x of CUDA
#: C, every other row within 0.005.  Generic pointers stay 64-bit (``addrspacecast`` widens).
SHORT_POINTERS = True

#: Full unrolling of a loop whose trip count is unknown but *bounded* by a small constant, such
#: as a block's cooperative load of a halo tile, ``for r in range(cuda.threadIdx.y, 12, 8)``
#: (at most 2 steps, since threadIdx.y >= 0): LLVM's unroller does it when a target allows
#: (``UnrollingPreferences::UpperBound``, up to ``-unroll-max-upperbound``, 8 steps), and NVPTX
#: does not.  Its only switch outside the pass pipeline's text is LLVM's generic preferences
#: (BasicTTIImpl), which turn it on, with partial and runtime unrolling, once a partial-unrolling
#: threshold is given (``-partial-unrolling-threshold``); NVPTX's own preferences and our
#: ``-unroll-partial-threshold`` then set that threshold as before, so the one effect is the
#: upper-bound unrolling.  Each copy stays guarded by the loop's test; the loop's back edge and
#: induction variables go, and ptxas can issue the copies' loads together instead of one per
#: trip.  nvcc unrolls the same C loop 4x with a remainder.  The 5 x 5 convolution of
#: bench/codegen.py, the one kernel of it that changes: 442 -> 370 SASS instructions (nvcc's
#: 354), 32 registers as before and as nvcc's.
UPPER_BOUND_UNROLL = True

#: Process-wide LLVM options, set once (they also apply to anything else compiled by llvmlite in
#: this process, as the unroll threshold already did).
LLVM_OPTIONS = (f"-unroll-threshold={UNROLL_THRESHOLD}",
                f"-unroll-partial-threshold={PARTIAL_UNROLL_THRESHOLD}",
                f"-simplifycfg-sink-common={'true' if SINK_COMMON_INSTRUCTIONS else 'false'}",
                f"-scev-cheap-expansion-budget={SCEV_EXPANSION_BUDGET}",
                f"-unroll-max-count={RUNTIME_UNROLL_MAX_COUNT}",
                f"-lsr-drop-solution={'true' if LSR_DROP_UNPROFITABLE else 'false'}",
                f"-nvptx-short-ptr={'true' if SHORT_POINTERS else 'false'}") + (
    (f"-partial-unrolling-threshold={PARTIAL_UNROLL_THRESHOLD}",) if UPPER_BOUND_UNROLL else ())


#: Part of the disk caches' keys: raised whenever a change alters the code generated for the same
#: source, options and versions (2: libdevice.tune_trig; 3: round(float32, n) in float64; 4: fast
#: math flushes denormals in every function and uses tanh.approx.f32; 5: local arrays zeroed by a
#: loop, opt=True is O3; 6: float % and // call libdevice's fmod, see exact_remainders; 7: max and
#: min of two floats are one max / min instruction, ignoring NaN as numba-cuda's do; 8: partial
#: unrolling up to PARTIAL_UNROLL_THRESHOLD; 9: range loops step nsw, see rangeloops.py; 10: a
#: range's count in a form ScalarEvolution bounds, rangeloops.range_getiter; 11: that count
#: unsigned, right where stop - start exceeds int64; 12: libdevice's float operations contract,
#: libdevice_tuning.contract_float_ops; 13: 32-bit shared, constant and local pointers,
#: SHORT_POINTERS; 14: constant-bound range loops unrolled more, CONSTANT_LOOP_MAX_COUNT; 15:
#: loops bounded by a small constant unrolled fully, UPPER_BOUND_UNROLL; 16: the double-precision
#: trigonometric reduction compiled once for kernels without loops, trig_slowpath.py; 17: opt=0
#: contracts no float operation into an FMA, TargetContext.post_lowering; 18: a C-contiguous
#: array's reshape computes its strides without the no-copy helper, reshape_helper.lower_reshape;
#: 19: a read-only array passed where a device function's signature declares a writable one that
#: it writes is refused, resolve.DeviceFunctionType: such kernels compiled before must not load;
#: 20: float16 with an int8 or a bool stays in half precision, devicemath._half_template; 21:
#: libdevice's llvm.convert.from.fp16 and llvm.tanh lowered before the back end (half2float,
#: fast_tanhf), libdevice_tuning.lower_newer_intrinsics: pruned libdevice files of before hold
#: them); 22: a math function of a float32 and a wide integer computes in float64, as numba-cuda
#: types it (devicemath._float_of); 23: float32 ** the most negative int64 no longer loops
#: forever (devicemath._make_float_int_power); 24: a device function's declared signatures are
#: chosen by Numba's conversion ranks (an int takes float64 over float32, ranking.py), and the
#: code generator runs at LLVM's level 2 (target_machine); 25: a write into a global record is
#: refused (constant_writes.py: it compiled, and the write was lost), so that no process is
#: served code that an older gpureplace compiled.
CODEGEN_REVISION = 25


@functools.lru_cache(maxsize=None)
def llvm_options() -> tuple[str, ...]:
    """The LLVM options this process compiles with: :data:`LLVM_OPTIONS`, where
    ``GPUREPLACE_LLVM_OPTIONS`` (space-separated ``-name=value``) adds options or replaces the
    value of one of the same name.  Read once: LLVM takes each option once per process.  They
    are part of the disk cache's key."""
    merged = {}
    for option in LLVM_OPTIONS + tuple(os.environ.get("GPUREPLACE_LLVM_OPTIONS", "").split()):
        if not re.fullmatch(r"-{1,2}[A-Za-z0-9][\w.-]*(=\S*)?", option):
            raise ValueError(f"GPUREPLACE_LLVM_OPTIONS: {option!r} is not an LLVM option "
                             f"of the form -name or -name=value")
        merged[option.lstrip("-").split("=", 1)[0]] = option
    return tuple(merged.values())


def initialize_llvm():
    global _initialized
    if not _initialized:
        with _init_lock:
            if not _initialized:
                llvm.initialize_all_targets()
                llvm.initialize_all_asmprinters()
                for option in llvm_options():
                    llvm.set_option("gpureplace", option)
                _initialized = True


def compile_ptx_isa(arch: str) -> int:
    """The PTX ISA a compile for ``arch`` emits in this process (what the installed driver
    accepts; PTX 8.0, or the arch's minimum, without one): what intrinsics that need a newer ISA
    check against while they are lowered (``intrinsics/requirements.py``)."""
    version = probe.driver_version()
    return ptx_isa_for_arch(arch, ptx_isa_for_driver(version), version is not None)


@functools.lru_cache(maxsize=None)
def target_machine(arch: str, ptx: int):
    initialize_llvm()
    target = llvm.Target.from_triple(TRIPLE)
    # The code generator at LLVM's default level (2), not its aggressive one (3): the IR is
    # optimised at O3 before (``optimize``); at level 2 instruction selection and scheduling give
    # the same PTX for 27 of bench/codegen.py's 29 specialisations (the two others differ in the
    # block layout of sin f64's rarely taken slow path) and the same speed on the H200 (every
    # row within 0.004, 2026-12-05), and take ~1.3 ms less of a small kernel's compile.
    return target.create_target_machine(cpu=arch, features=f"+ptx{ptx}", opt=2)


@functools.lru_cache(maxsize=None)
def data_layout() -> str:
    return str(target_machine(DEFAULT_ARCH, 80).target_data)


@functools.lru_cache(maxsize=None)
def target_data():
    """LLVM's target data of that layout (type sizes and alignments), made once."""
    return llvm.create_target_data(data_layout())


def pass_builder(level: int, arch: str = DEFAULT_ARCH, ptx: int = 80):
    tm = target_machine(arch, ptx)
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    if level >= 2:
        pto.loop_vectorization = False      # GPUs vectorise across threads, not within one
        pto.slp_vectorization = False
    return llvm.create_pass_builder(tm, pto)


def optimization_level(opt) -> int:
    """``cuda.jit(opt=...)`` as an LLVM level: numba-cuda's True / False (3 / 0) or 0 to 3; a
    CompileError for anything else (llvmlite would raise from deep inside the pass builder)."""
    if opt is True or opt is False:
        return 3 if opt else 0
    if isinstance(opt, int) and 0 <= opt <= 3:
        return opt
    raise CompileError(f"cuda.jit(opt={opt!r}): opt must be an optimisation level from 0 to 3, "
                       f"or True (3) / False (0)")


_unroll_lock = threading.Lock()
_unroll_wide = False                    # the unrolling options LLVM holds now are the wide ones


def _set_unrolling(wide: bool):
    """LLVM's partial-unrolling cap and budget for a kernel with (``wide``) or without a
    constant-bound range loop; called under ``_unroll_lock``.  Options the user set through
    GPUREPLACE_LLVM_OPTIONS are left as given."""
    global _unroll_wide
    if wide == _unroll_wide:
        return
    user = os.environ.get("GPUREPLACE_LLVM_OPTIONS", "")
    for name, narrow_value, wide_value in (
            ("unroll-max-count", RUNTIME_UNROLL_MAX_COUNT, CONSTANT_LOOP_MAX_COUNT),
            ("unroll-partial-threshold", PARTIAL_UNROLL_THRESHOLD,
             CONSTANT_LOOP_PARTIAL_THRESHOLD)):
        if f"-{name}=" not in user:
            llvm.set_option("gpureplace", f"-{name}={wide_value if wide else narrow_value}")
    _unroll_wide = wide


def optimize(mod, arch: str, ptx: int, level: int = 3, constant_loops: bool = False):
    """Optimise ``mod`` at ``level``; ``constant_loops``: it loops over a constant-bound range
    (CONSTANT_RANGE_MIN_TRIPS), so it gets the larger partial-unrolling budget."""
    pb = pass_builder(optimization_level(level), arch, ptx)
    mpm = pb.getModulePassManager()
    try:
        with _unroll_lock:
            _set_unrolling(constant_loops)
            try:
                mpm.run(mod, pb)
            finally:
                _set_unrolling(False)   # anything else llvmlite compiles sees the defaults
    finally:
        free_pass_manager(mpm)


def free_pass_manager(mpm):
    """Free ``mpm``'s passes now.  llvmlite 0.50's ModulePassManager never frees them itself
    (the empty ``_dispose`` of its first base class hides the one that would): some 30 KiB of
    native memory per kernel compiled, for the life of the process.  (The pass builder's
    instrumentation callbacks, ~28 KiB a run, are lost inside llvmlite with no way to free
    them; a pass builder is still made per run, as reusing one would call the callbacks a
    finished run left behind.)"""
    if type(mpm)._dispose is llvm.ffi.ObjectRef._dispose:
        if not mpm.closed:
            llvm.ffi.lib.LLVMPY_DisposeNewModulePassManger(mpm)
            mpm.detach()
    else:
        mpm.close()


def emit_ptx(mod, arch: str, ptx: int) -> str:
    return target_machine(arch, ptx).emit_assembly(mod)


def reflect_values(arch: str, fastmath: bool):
    """``__nvvm_reflect`` answers: flush denormals and approximate sqrt/div only under fast math."""
    return {"__CUDA_ARCH": arch_number(arch) * 10, "__CUDA_FTZ": int(fastmath),
            "__CUDA_PREC_SQRT": int(not fastmath), "__CUDA_PREC_DIV": int(not fastmath)}


_DEFINE_START = re.compile(r"^define [^\n]*?@(?:\"[^\"]*\"|[\w.$-]+)\(", re.M)
_AFTER_PARAMS = re.compile(r"(?: (?:local_)?unnamed_addr)?(?: addrspace\(\d+\))?(?: #\d+)*")
_ATTRIBUTE_GROUP = re.compile(r"^attributes #(\d+) = ", re.M)


def flush_denormals(text):
    """IR ``text`` with every function definition flushing single-precision denormals to zero
    (``"denormal-fp-math-f32"="preserve-sign"``), as CUDA C's ``-ftz=true`` and NVVM's do under
    fast math: NVPTX then selects the ``.ftz`` instructions.  Every definition needs it, libdevice's
    included, since LLVM does not inline a function whose denormal mode differs from its caller's.
    The attribute goes in a new attribute group that each ``define`` line also refers to."""
    groups = [int(g) for g in _ATTRIBUTE_GROUP.findall(text)]
    ref = f"#{max(groups, default=-1) + 1}"
    out, pos = [], 0
    for m in _DEFINE_START.finditer(text):
        i, depth = m.end(), 1                  # the parameter list's closing parenthesis
        while depth:
            c = text[i]
            depth += (c == "(") - (c == ")")
            i += 1
        i = _AFTER_PARAMS.match(text, i).end()
        out += [text[pos:i], " ", ref]
        pos = i
    out.append(text[pos:])
    return ("".join(out) +
            f'\nattributes {ref} = {{ "denormal-fp-math-f32"="preserve-sign,preserve-sign" }}\n')


_FREM = re.compile(r'^(\s*%(?:"[^"\n]*"|[-\w.$]+) = )frem'
                   r" (?:(?:fast|nnan|ninf|nsz|arcp|contract|afn|reassoc) )*"
                   r"(float|double) ([^,\n]+), ([^,\n]+?)(, !.*)?$", re.M)
_FMOD = {"float": "__nv_fmodf", "double": "__nv_fmod"}


def exact_remainders(text):
    """IR ``text`` with each ``frem`` of a float or double (Python's float ``%`` and ``//``, and
    ``math.remainder``'s helpers, as Numba lowers them) a call to libdevice's ``fmod``: NVPTX
    expands ``frem`` to ``x - trunc(x / y) * y``, whose rounded quotient makes ``1e10 % 3.0``
    256.0 instead of 1.0; ``fmod`` is exact, as CUDA C's ``fmodf`` is."""
    if " frem " not in text:
        return text
    used = set()

    def call(m):
        used.add(m.group(2))
        return (f"{m.group(1)}call {m.group(2)} @{_FMOD[m.group(2)]}({m.group(2)} {m.group(3)}, "
                f"{m.group(2)} {m.group(4)}){m.group(5) or ''}")

    text = _FREM.sub(call, text)
    for ty in sorted(used):
        name = _FMOD[ty]
        if not re.search(rf'^(declare|define)\b[^\n]*@"?{name}"?\(', text, re.M):
            text += f"\ndeclare {ty} @{name}({ty}, {ty})\n"
    return text


def link_libdevice(mod, names, arch=DEFAULT_ARCH, fastmath=False, separate_slowpath=False):
    """Link the pruned libdevice holding ``names`` (and their dependencies) into ``mod``;
    ``separate_slowpath``: with the trigonometric reduction only declared (trig_slowpath.py)."""
    if not names:
        return
    bitcode = libdevice_link.pruned_bitcode(names, reflect_values(arch, fastmath))
    if separate_slowpath:
        from .trig_slowpath import without_slowpath
        bitcode = without_slowpath(bitcode)
    lib = llvm.parse_bitcode(bitcode)
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
