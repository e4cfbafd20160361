"""Generated-code throughput: the same kernels as gpureplace Python, CUDA C (NVRTC)
and, when it imports and compiles, numba-cuda.

Kernels: saxpy (2**28 float32, with GB/s and % of the device-to-device copy bandwidth), chained
sin / exp / log in float32 and float64 (default and fast math), a shared-memory block reduction
(2**26 float32), a 2-D 5-point stencil (8192 x 8192 float32) and a shared-memory tiled matmul
(2048 x 2048 float32, 16 x 16 tiles); and the kernels people write in notebooks
(codegen_kernels_notebook.py): a tiled transpose (8192 x 8192 float32, 32 x 33 shared tile,
32 x 8 threads), a 256-bin histogram of 2**28 uint8 (shared-memory atomics merged with global
ones), a warp-shuffle reduction (shfl_down_sync, 2**26 float32) and inclusive block scan
(shfl_up_sync, 1,024 per block), an all-pairs n-body step (2**15 bodies as float4; 1 / sqrt in
the default context and in the fast-math one against --use_fast_math, and rsqrt by name), a row
softmax (8192 x 4096 float32, one block per row), a * x + b in float16 and in bfloat16 (2**28;
CUDA C through cuda_fp16.h / cuda_bf16.h) and a 5 x 5 convolution with a halo tile in shared
memory (8192 x 8192 float32).  Rows of the notebook kernels also give each variant's rate (GB/s,
pair interactions per second).

Timing: CUDA events around back-to-back launches, queued behind one untimed launch so the GPU never
waits on the host inside the timed span (the host's launch overhead is bench/launch.py's subject,
not this one's); variants interleaved round by round; the median per launch is reported.  Every
result is checked against the CUDA C result and, on a small size, against NumPy.

    ratio = CUDA C ms / gpureplace ms      (>= 0.97 meets the goal)

Usage:
    python bench/codegen.py [--json PATH] [--png PATH] [--md PATH] [--only SUBSTR] [--budget S]
    python bench/codegen.py --check-compile [--json PATH] [--nvcc PATH [--nvcc-flags "-I DIR"]]
        (no GPU needed: compiles every gpureplace specialisation and assembles it with ptxas,
        reporting registers and spilled bytes; with --nvcc, the CUDA C too)

--only SUBSTR runs the kernel families whose key contains it (saxpy, chains, reduction, stencil,
matmul, transpose, histogram, warp, nbody, softmax, half, conv) and, of chains and nbody, the
rows whose label contains it ('sin f32', fastmath, rsqrt).

Fairness notes: the CUDA C is what a careful CUDA programmer writes for the same algorithm: plain
pointers (no ``__restrict__``), 64-bit linear indices in the 1-D kernels (what ``cuda.grid(1)``
gives), ``int`` coordinates in the 2-D ones (and ``int`` body indices in n-body, as GPU Gems 3
writes it).  NVRTC contracts ``a * b + c`` into FMA by default.  The CUDA C compiles with
NVRTC's defaults (nvcc's: float32 denormals kept, IEEE division and square root), or
``--use_fast_math`` in the fast-math rows, to PTX loaded as ours: not through ``cupy.RawKernel``,
which appends ``-ftz=true`` to every compile, so that its code flushes denormals where
gpureplace's default context keeps them (until 2026-12-02 the twins were RawKernels: n-body's
rsqrt row then compared code without rsqrtf's denormal scaling against code with it).  The float16 /
bfloat16 CUDA C uses cuda_fp16.h's operators, whose ``mul.f16`` / ``add.f16`` (no rounding
modifier) ptxas may fuse into one HFMA; gpureplace rounds the product (``mul.rn``).
numba-cuda is left out of the rows whose arrays are gpureplace vector views (float4 saxpy, n-body)
and of any row where it does not compile or run the kernel (bfloat16).

The benchmark is split by job, in this folder: codegen_kernels.py (the kernels, in gpureplace
Python and CUDA C), codegen_harness.py (compile-only check, building, timing and checking),
codegen_runs.py (one benchmark per kernel family) and codegen_report.py (Markdown and plot); the
notebook kernels in codegen_kernels_notebook.py and codegen_runs_notebook.py; this file runs them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import gpureplace

# The sibling modules: bench/ is a folder of scripts, not a package, and this file is also loaded
# by path (tests/compiler/test_codegen_quality.py), where the folder is not on sys.path by itself.
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from codegen_harness import Bench, check_compile, error_row, free_memory  # noqa: E402
from codegen_kernels import (CHAINS, CUDA_C_FAST_OPTIONS, CUDA_C_OPTIONS,  # noqa: E402
                             block_sum, chain_exp, chain_log, chain_sin, compile_plan,
                             cuda_c_sources, matmul_tiled, saxpy, saxpy_stride, saxpy_vec4,
                             stencil5)
from codegen_report import markdown, write_png  # noqa: E402
from codegen_runs import BENCHES, ROW_FILTERED  # noqa: E402

# What other code reads from this module (the kernels: tests/compiler/test_codegen_quality.py).
__all__ = ["BENCHES", "Bench", "CHAINS", "CUDA_C_FAST_OPTIONS", "CUDA_C_OPTIONS", "block_sum",
           "chain_exp", "chain_log", "chain_sin", "check_compile", "compile_plan",
           "cuda_c_sources", "main", "markdown", "matmul_tiled", "run_gpu", "saxpy",
           "saxpy_stride", "saxpy_vec4", "stencil5", "write_png"]


def run_gpu(args):
    import cupy as cp
    b = Bench(cp, args.budget)
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    print(f"device: {name}, sm_{dev.compute_capability}, {b.sm_count} SMs", file=sys.stderr)
    t_start = time.perf_counter()
    rows = []
    for key, fn in BENCHES:
        if args.only and key not in ROW_FILTERED and args.only not in key:
            continue
        t0 = time.perf_counter()
        try:
            if key in ROW_FILTERED:         # these pick their rows by label themselves
                rows += fn(b, None if not args.only or args.only in key else args.only)
            else:
                rows += fn(b)
        except Exception as exc:
            rows.append(error_row(key, exc))
        free_memory(cp)     # the benchmark's arrays died with its frame: give the memory back
        print(f"[{key}: {time.perf_counter() - t0:.1f} s]", file=sys.stderr)
    result = {"device": name, "arch": f"sm_{dev.compute_capability}",
              "gpureplace_version": gpureplace.__version__, "cupy_version": cp.__version__,
              "cuda_c_options": list(CUDA_C_OPTIONS),
              "cuda_c_fast_options": list(CUDA_C_FAST_OPTIONS),
              "numba_cuda_note": b.numba_note, "nvrtc_notes": b.raw_notes,
              "wall_s": time.perf_counter() - t_start, "rows": rows}
    md = markdown(result)
    print(md)
    for r in rows:
        for c in r.get("checks", []):
            if c.startswith("MISMATCH"):
                print(f"{r['kernel']}: {c}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1, default=float)
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(md + "\n")
    if args.png:
        write_png(result, args.png)
    print(f"[total {result['wall_s']:.1f} s]", file=sys.stderr)
    return 0 if all(r.get("check_ok") for r in rows) else 2


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check-compile", action="store_true",
                    help="compile every gpureplace kernel (no GPU) and exit")
    ap.add_argument("--nvcc", help="with --check-compile: also `nvcc -ptx` the CUDA C sources")
    ap.add_argument("--nvcc-flags", help="with --nvcc: more nvcc arguments (e.g. '-I DIR' for the "
                                         "CCCL headers cuda_fp16.h needs)")
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--md", help="write the Markdown table here too")
    ap.add_argument("--only", help="run only kernels whose name contains this (e.g. saxpy, "
                                   "'sin f32', fastmath, stencil, transpose, nbody, half)")
    ap.add_argument("--budget", type=float, default=0.6,
                    help="seconds of timed GPU work per kernel row (default 0.6)")
    args = ap.parse_args(argv)
    if args.check_compile:
        return check_compile(args)
    return run_gpu(args)


if __name__ == "__main__":
    sys.exit(main())
