"""Changes to libdevice's IR, made when gpureplace prunes libdevice
(``libdevice_link.pruned_bitcode``), so that LLVM compiles it as NVVM does: its double-precision
trigonometry laid out as nvcc's code is, and its float operations contracted into FMAs where CUDA
C's default ``-fmad=true`` contracts them."""

from __future__ import annotations

import re


# Double-precision sine and cosine.  As LLVM compiled libdevice's code, 16 calls of math.sin per
# thread ran at 0.92x of the same loop compiled by nvcc (bench/codegen.py, H200); with the two
# changes below at 1.03x.  Neither changes a result: only how the code is laid out.
#
# 1. The Payne-Hanek argument reduction for |x| >= 2^31, __internal_trig_reduction_slowpathd, is
#    inlined.  libdevice marks it noinline, and it stays an ABI call in SASS (CALL.REL): each call
#    site must keep the caller's live values where the callee cannot clobber them, which in a loop
#    of calls costs more than the rarely taken branch around inlined code (0.957x with this change
#    alone).  The single-precision reduction is inlined in libdevice already.
# 2. The two branches that end sin and cos on the quadrant q (q & 1: the cosine polynomial's last
#    step instead of the sine's; q & 2: negate) carry branch weights that call the skipping edge
#    likely.  Without them SimplifyCFG speculates both arms and merges them with 64-bit selects,
#    even with its folding thresholds at 0: NVPTX's cost model rates an FMA and a negation as free.
#    That is four FSEL and a DADD per call where nvcc's code has two predicated DFMAs (0.963x with
#    this change alone).  The weights only make SimplifyCFG see the branches as predictable (its
#    one test for keeping a branch); ptxas predicates the short arms either way.
TRIG_WITH_QUADRANT_BRANCHES = frozenset({"__nv_sin", "__nv_cos", "__nv_sincos", "__nv_sinpi",
                                         "__nv_cospi", "__nv_sincospi"})
_SLOWPATH_DEFINE = re.compile(r"^(define internal [^\n]*@__internal_trig_reduction_slowpathd\("
                              r"[^)]*\)) #\d+ \{", re.M)
_QUADRANT_BRANCH = re.compile(r"(%[\w.]+) = and i32 %[\w.]+, [12]\n\s*(%[\w.]+) = icmp ne i32 \1, 0"
                              r"\n\s*br i1 \2, label %[\w.]+, label %[\w.]+")
#: The name a ``define`` line of IR text defines.
DEFINE_NAME = re.compile(r"^define [^\n]*?@([\w.]+)\(", re.M)


def tune_trig(text):
    """IR ``text`` of (part of) libdevice with the two changes described above."""
    text = _SLOWPATH_DEFINE.sub(r"\1 alwaysinline {", text)
    pieces = re.split(r"(?=^define )", text, flags=re.M)
    marked = False
    for i, piece in enumerate(pieces):
        m = DEFINE_NAME.match(piece)
        if m and m.group(1) in TRIG_WITH_QUADRANT_BRANCHES:
            piece, n = _QUADRANT_BRANCH.subn(lambda b: f"{b.group(0)}, !prof !{{SKIP}}", piece)
            pieces[i], marked = piece, marked or n > 0
    text = "".join(pieces)
    if not marked:
        return text
    ids = [int(x) for x in re.findall(r"^!(\d+) = ", text, flags=re.M)]
    node = f"!{max(ids, default=-1) + 1}"
    return (text.replace("!{SKIP}", node)
            + f'\n{node} = !{{!"branch_weights", i32 1, i32 2000}}\n')


_PLAIN_FLOAT_OP = re.compile(r"^(\s*%[\w.]+ = )(fmul|fadd|fsub) (float|double) ", re.M)


def contract_float_ops(text):
    """libdevice's float multiplies, adds and subtracts marked ``contract``, as NVVM treats them
    under CUDA C's default ``-fmad=true``: its bitcode carries no fast-math flags and NVVM
    contracts by its global option, so CUDA C's ``acc += expf(v)`` fuses the function's last
    multiply with the add (one FFMA).  LLVM decides per instruction, and without the flag the
    NVPTX back end writes ``mul.rn.f32``, which ptxas must not fuse: the float32 exp chain of
    bench/codegen.py ran at 0.964x of CUDA C for that alone.  Where libdevice's algorithms need
    a product or sum rounded on its own they call ``llvm.nvvm.mul.rn.*`` / ``add.rn.*`` or
    ``llvm.fma.*``, which no flag changes."""
    return _PLAIN_FLOAT_OP.sub(r"\1\2 contract \3 ", text)


_FROM_FP16 = re.compile(r"^(\s*)(%[\w.]+) = (?:tail )?call float @llvm\.convert\.from\.fp16\.f32"
                        r"\(i16 (%[\w.]+)\)", re.M)
_TANH_F32 = re.compile(r"call (?:afn )?float @llvm\.tanh\.f32\(float (%[\w.]+)\)")


def lower_newer_intrinsics(text):
    """libdevice's calls of LLVM intrinsics that NVVM knows and llvmlite's LLVM does not select
    for NVPTX, written as what they mean: ``llvm.convert.from.fp16.f32`` (``__nv_half2float``)
    as a half's bits widened, ``llvm.tanh.f32`` (``__nv_fast_tanhf`` from sm_75 on, where
    ``__nvvm_reflect`` folded the architecture in) as the hardware's ``tanh.approx.f32``."""
    text = _FROM_FP16.sub(r"\1\2.half = bitcast i16 \3 to half\n\1\2 = fpext half \2.half to float",
                          text)
    return _TANH_F32.sub(r'call float asm "tanh.approx.f32 $0, $1;", "=f,f"(float \1)', text)
