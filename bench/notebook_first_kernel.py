"""The first kernel in a notebook, through a real Jupyter kernel: gpureplace's kernel ("Python 3
(gpureplace)": IPython with ``--ext=gpureplace``) against CuPy's RawKernel in a plain IPython
kernel, started the same way in the same run.

Each kernel starts, sits idle ``--idle`` seconds (the user typing; gpureplace warms the compiler
and CUDA meanwhile, ``gpureplace.prewarm``), then runs a cell that defines a kernel and a cell
that launches it and reads a result back; then the same for a second kernel.  Then the loop a
notebook lives in: the second kernel edited in its cell and, after a pause (``--pause`` s: the
user reads the result and moves on), launched again; a third kernel with a helper, the helper
edited and, after a pause, the kernel launched again (CuPy, which tracks nothing, rebuilds its
RawKernel with the new helper); last, a fourth new kernel defined and, after a pause (the user
typing its launch), launched (gpureplace guesses its argument types from the launches its
parameter names had).  The times are from the execute request to its reply, per cell, so they
hold what the user waits for.

Usage: python bench/notebook_first_kernel.py [--idle 3] [--pause 1] [--repeat 3] [--json OUT]
(needs a GPU, CuPy, ipykernel and jupyter_client; ``--no-prewarm`` measures gpureplace with the
warm-up off, ``--no-ahead`` without recompiling ahead while the user pauses).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

GPUREPLACE_CELLS = [
    ("define", '%%cuda\ndef saxpy(a, x, y, out):\n    i = cuda.grid(1)\n    if i < out.size:\n'
               '        out[i] = a * x[i] + y[i]\n'),
    ("launch", "import cupy as cp\nx = cp.ones(1 << 20, cp.float32); y = cp.ones_like(x); "
               "out = cp.empty_like(x)\nsaxpy[(x.size + 255) // 256, 256](2.0, x, y, out)\n"
               "float(out[0])"),
    ("define 2", '%%cuda\ndef scale(a, x, out):\n    i = cuda.grid(1)\n    if i < out.size:\n'
                 '        out[i] = a * x[i]\n'),
    ("launch 2", "scale[(x.size + 255) // 256, 256](3.0, x, out)\nfloat(out[0])"),
    # the notebook's loop: edit a kernel, run it again; edit a helper, run its kernel again
    ("edit", '%%cuda\ndef scale(a, x, out):\n    i = cuda.grid(1)\n    if i < out.size:\n'
             '        out[i] = a * x[i] + 1.0\n'),
    ("launch edited", "scale[(x.size + 255) // 256, 256](3.0, x, out)\nfloat(out[0])"),
    ("define 3", '%%cuda\ndef shift(v):\n    return v + 1.0\n\ndef shifted(x, out):\n'
                 '    i = cuda.grid(1)\n    if i < out.size:\n        out[i] = shift(x[i])\n'),
    ("launch 3", "shifted[(x.size + 255) // 256, 256](x, out)\nfloat(out[0])"),
    ("edit helper", '%%cuda\ndef shift(v):\n    return v + 2.0\n'),
    ("launch after helper edit", "shifted[(x.size + 255) // 256, 256](x, out)\nfloat(out[0])"),
    # a further new kernel, launched after the user typed its launch cell
    ("define 4", '%%cuda\ndef offset(a, x, out):\n    i = cuda.grid(1)\n    if i < out.size:\n'
                 '        out[i] = x[i] + a\n'),
    ("launch 4 after pause", "offset[(x.size + 255) // 256, 256](1.0, x, out)\nfloat(out[0])"),
]

#: What each launching cell shows (x is all ones): the code the cells above defined ran.
EXPECTED = {"launch": 3.0, "launch 2": 3.0, "launch edited": 4.0, "launch 3": 2.0,
            "launch after helper edit": 3.0, "launch 4 after pause": 2.0}

#: Cells run after the user paused (``--pause`` seconds: reading the result, moving to the next
#: cell) rather than at once.
AFTER_PAUSE = ("launch edited", "launch after helper edit", "launch 4 after pause")

CUPY_CELLS = [
    ("define", 'import cupy as cp\nsaxpy = cp.RawKernel(r"""\nextern "C" __global__ void '
               'saxpy(float a, const float* x, const float* y, float* out, int n) {\n'
               '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n'
               '  if (i < n) out[i] = a * x[i] + y[i];\n}\n""", "saxpy")'),
    ("launch", "x = cp.ones(1 << 20, cp.float32); y = cp.ones_like(x); out = cp.empty_like(x)\n"
               "saxpy(((x.size + 255) // 256,), (256,), (cp.float32(2.0), x, y, out, "
               "cp.int32(x.size)))\nfloat(out[0])"),
    ("define 2", 'scale = cp.RawKernel(r"""\nextern "C" __global__ void scale(float a, '
                 'const float* x, float* out, int n) {\n'
                 '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n'
                 '  if (i < n) out[i] = a * x[i];\n}\n""", "scale")'),
    ("launch 2", "scale(((x.size + 255) // 256,), (256,), (cp.float32(3.0), x, out, "
                 "cp.int32(x.size)))\nfloat(out[0])"),
    ("edit", 'scale = cp.RawKernel(r"""\nextern "C" __global__ void scale(float a, '
             'const float* x, float* out, int n) {\n'
             '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n'
             '  if (i < n) out[i] = a * x[i] + 1.0f;\n}\n""", "scale")'),
    ("launch edited", "scale(((x.size + 255) // 256,), (256,), (cp.float32(3.0), x, out, "
                      "cp.int32(x.size)))\nfloat(out[0])"),
    ("define 3", 'SHIFT = "__device__ float shift(float v) { return v + 1.0f; }"\n'
                 'BODY = r"""\nextern "C" __global__ void shifted(const float* x, float* out, '
                 'int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n'
                 '  if (i < n) out[i] = shift(x[i]);\n}\n"""\n'
                 'shifted = cp.RawKernel(SHIFT + BODY, "shifted")'),
    ("launch 3", "shifted(((x.size + 255) // 256,), (256,), (x, out, cp.int32(x.size)))\n"
                 "float(out[0])"),
    # CuPy has no dependency tracking: the user rebuilds the kernel with the new helper
    ("edit helper", 'SHIFT = "__device__ float shift(float v) { return v + 2.0f; }"\n'
                    'shifted = cp.RawKernel(SHIFT + BODY, "shifted")'),
    ("launch after helper edit", "shifted(((x.size + 255) // 256,), (256,), "
                                 "(x, out, cp.int32(x.size)))\nfloat(out[0])"),
    ("define 4", 'offset = cp.RawKernel(r"""\nextern "C" __global__ void offset(float a, '
                 'const float* x, float* out, int n) {\n'
                 '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n'
                 '  if (i < n) out[i] = x[i] + a;\n}\n""", "offset")'),
    ("launch 4 after pause", "offset(((x.size + 255) // 256,), (256,), (cp.float32(1.0), x, "
                             "out, cp.int32(x.size)))\nfloat(out[0])"),
]


def run_kernel(cells, extension, idle, env_extra, pause=1.0):
    """Start a kernel, wait ``idle`` s, run ``cells`` (those of ``AFTER_PAUSE`` ``pause`` s after
    the cell before); {label: seconds} and the last output."""
    from jupyter_client.manager import start_new_kernel
    env = dict(os.environ, **env_extra)
    argv_extra = ["--ext=gpureplace"] if extension else []
    km, kc = start_new_kernel(kernel_name="python3", env=env, extra_arguments=argv_extra)
    try:
        time.sleep(idle)
        times, last = {}, None
        for label, code in cells:
            if label in AFTER_PAUSE:
                time.sleep(pause)
            results = []

            def keep(msg, results=results):
                if msg["msg_type"] == "execute_result":
                    results.append(msg["content"]["data"]["text/plain"])

            t0 = time.perf_counter()
            reply = kc.execute_interactive(code, timeout=300, output_hook=keep)
            times[label] = time.perf_counter() - t0
            if reply["content"]["status"] != "ok":
                raise RuntimeError(f"cell {label!r} failed: {reply['content'].get('evalue')}")
            if label in EXPECTED and results != [repr(EXPECTED[label])]:
                raise RuntimeError(f"cell {label!r} gave {results}, not {EXPECTED[label]!r}: "
                                   f"the kernel did not run the code its cells defined")
        last = kc.execute_interactive("print(float(out[0]))", timeout=60,
                                      output_hook=lambda m: None)["content"]["status"]
        return times, last
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--idle", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pause", type=float, default=1.0)
    ap.add_argument("--no-prewarm", action="store_true")
    ap.add_argument("--no-ahead", action="store_true")
    ap.add_argument("--json", help="write the measurements here")
    ap.add_argument("--simulator", action="store_true",
                    help="a smoke test without a GPU: gpureplace's cells on the simulator "
                         "(NumPy arrays), no CuPy kernel")
    args = ap.parse_args()
    rows = {"gpureplace": [], "cupy": []}
    cells = GPUREPLACE_CELLS
    if args.simulator:
        cells = [(label, code.replace("import cupy as cp", "import numpy as cp"))
                 for label, code in cells]
    for _ in range(args.repeat):
        # a cold compile, as a new kernel's first; the driver's JIT cache off for both (the
        # same PTX, from the repeats before, would be loaded from it without its JIT)
        env = {"GPUREPLACE_CACHE": "0", "CUDA_CACHE_DISABLE": "1"}
        if args.no_prewarm:
            env["GPUREPLACE_PREWARM"] = "0"
        if args.no_ahead:
            env["GPUREPLACE_RECOMPILE_AHEAD"] = "0"
        if args.simulator:
            env["GPUREPLACE_BACKEND"] = "simulator"
        rows["gpureplace"].append(run_kernel(cells, True, args.idle, env, args.pause)[0])
        if args.simulator:
            rows["cupy"].append({label: float("nan") for label, _ in CUPY_CELLS})
            continue
        rows["cupy"].append(run_kernel(CUPY_CELLS, False, args.idle,
                                       {"CUPY_CACHE_DIR": f"/tmp/cupy-cache-{time.time()}",
                                        "CUDA_CACHE_DISABLE": "1"}, args.pause)[0])
    summary = {}
    for name, runs in rows.items():
        summary[name] = {label: statistics.median([r[label] for r in runs])
                         for label in runs[0]}
    print(f"{'cell':<25} {'gpureplace ms':>14} {'CuPy ms':>10} {'ratio':>7}")
    for label in summary["gpureplace"]:
        g, c = 1e3 * summary["gpureplace"][label], 1e3 * summary["cupy"][label]
        print(f"{label:<25} {g:>14.1f} {c:>10.1f} {g / c:>6.2f}x")
    first = 1e3 * (summary["gpureplace"]["define"] + summary["gpureplace"]["launch"])
    second = 1e3 * (summary["gpureplace"]["define 2"] + summary["gpureplace"]["launch 2"])
    print(f"first kernel's cells: {first:.0f} ms (goal <= 150), a further kernel's: "
          f"{second:.0f} ms (goal <= 35)" + (" [prewarm off]" if args.no_prewarm else ""))
    for what, cell in (("an edited kernel", "launch edited"),
                       ("a kernel after its helper was edited", "launch after helper edit"),
                       ("a new kernel (its parameters' types guessed)", "launch 4 after pause")):
        g, c = 1e3 * summary["gpureplace"][cell], 1e3 * summary["cupy"][cell]
        print(f"{what}, launched after a {args.pause:g} s pause: {g:.1f} ms (CuPy {c:.1f} ms)"
              + (" [recompile ahead off]" if args.no_ahead else ""))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"runs": rows, "median": summary, "idle": args.idle, "pause": args.pause,
                       "recompile_ahead": not args.no_ahead,
                       "prewarm": not args.no_prewarm, "python": sys.version.split()[0]},
                      fh, indent=1)


if __name__ == "__main__":
    main()
