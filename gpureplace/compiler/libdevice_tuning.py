"""Changes to libdevice's IR that make LLVM lay out its double-precision trigonometry as nvcc's
code is laid out, made when gpureplace prunes libdevice (``libdevice_bitcode.pruned_bitcode``)."""

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
