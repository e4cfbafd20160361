"""Where a further kernel's time goes once the process is warm (the notebook's "a further kernel"
and the "second kernel" goal): each of ``--n`` new small kernels is compiled, its PTX loaded
(the driver's JIT to machine code) and launched; CuPy's RawKernel does the same for the same
kernel in CUDA C in the same run (NVRTC to a cubin, load, launch).  Prints the median of each
step, and of a callee's redefinition (the kernel's recompile).

Usage: python bench/profile_further_kernel.py [--n 15] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

KERNEL = '''
def scale_{n}(a, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + {n}.0
'''

CUDA_C = r'''extern "C" __global__ void scale_{n}(float a, const float* x, float* out, long n) {{
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) out[i] = a * x[i] + {n}.0f; }}
'''


def median_ms(values):
    return round(1e3 * statistics.median(values), 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args()

    # cold caches, as in a new process of a user's: neither CuPy's kernel cache nor the
    # driver's JIT cache may hold what an earlier run of this script compiled (the kernels
    # here are the same each run)
    import os
    import tempfile
    os.environ["CUDA_CACHE_DISABLE"] = "1"
    os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="cupy-cold-")
    import math
    import cupy as cp
    import gpureplace
    from gpureplace import cuda

    x = cp.ones(1 << 20, cp.float32)
    out = cp.empty_like(x)
    grid = (x.size + 255) // 256
    a = np.float32(2.0)
    ns = {"cuda": cuda, "math": math}

    # warm: the first kernel (imports, CUDA, libdevice) is another benchmark's
    exec(KERNEL.format(n=0), ns)
    cuda.jit(ns["scale_0"])[grid, 256](2.0, x, out)
    cp.cuda.runtime.deviceSynchronize()
    cp.RawKernel(CUDA_C.format(n=0), "scale_0")((grid,), (256,),
                                                 (cp.float32(2.0), x, out, cp.int64(x.size)))

    rows = {"compile": [], "load+launch": [], "cached launch": [], "whole (define+launch)": [],
            "cupy compile": [], "cupy load+launch": [], "cupy whole": [],
            "driver load of our PTX": [], "driver JIT of a new PTX": [],
            "recompile (callee changed)": []}
    for n in range(1, args.n + 1):
        exec(KERNEL.format(n=n), ns)
        t0 = time.perf_counter()
        k = cuda.jit(ns[f"scale_{n}"])
        # (the types a launch with these arguments gives: a float32 scalar, C-contiguous arrays)
        spec = k.compile("void(float32, float32[::1], float32[::1])")
        t1 = time.perf_counter()
        k[grid, 256](a, x, out)
        cp.cuda.runtime.deviceSynchronize()
        t2 = time.perf_counter()
        k[grid, 256](a, x, out)
        cp.cuda.runtime.deviceSynchronize()
        t3 = time.perf_counter()
        rows["compile"].append(t1 - t0)
        rows["load+launch"].append(t2 - t1)
        rows["cached launch"].append(t3 - t2)
        rows["whole (define+launch)"].append(t2 - t0)
        t4 = time.perf_counter()
        cp.cuda.function.Module().load(spec.ptx.encode())
        rows["driver load of our PTX"].append(time.perf_counter() - t4)
        # the driver's JIT alone, of PTX it has not seen (a twin kernel compiled, not launched):
        # what of "load+launch" is the driver's, and what is ours
        exec(KERNEL.format(n=n + 500), ns)
        twin = cuda.jit(ns[f"scale_{n + 500}"]).compile(
            "void(float32, float32[::1], float32[::1])").ptx.encode()
        t4 = time.perf_counter()
        cp.cuda.function.Module().load(twin)
        rows["driver JIT of a new PTX"].append(time.perf_counter() - t4)

        t0 = time.perf_counter()
        rk = cp.RawKernel(CUDA_C.format(n=n + 1000), f"scale_{n + 1000}")
        rk.compile()
        t1 = time.perf_counter()
        rk((grid,), (256,), (cp.float32(2.0), x, out, cp.int64(x.size)))
        cp.cuda.runtime.deviceSynchronize()
        t2 = time.perf_counter()
        rows["cupy compile"].append(t1 - t0)
        rows["cupy load+launch"].append(t2 - t1)
        rows["cupy whole"].append(t2 - t0)

    # a callee redefined: the kernel that calls it recompiles on its next launch
    exec("def shift(v):\n    return v + 1.0\n"
         "def with_callee(a, x, out):\n    i = cuda.grid(1)\n    if i < out.size:\n"
         "        out[i] = math.sin(a * shift(x[i]))\n", ns)
    kc = cuda.jit(ns["with_callee"])
    kc[grid, 256](2.0, x, out)
    for n in range(args.n):
        exec(f"def shift(v):\n    return v - {n}.0\n", ns)
        gpureplace.refresh()
        t0 = time.perf_counter()
        kc[grid, 256](2.0, x, out)
        cp.cuda.runtime.deviceSynchronize()
        rows["recompile (callee changed)"].append(time.perf_counter() - t0)

    result = {name: median_ms(v) for name, v in rows.items()}
    for name, ms in result.items():
        print(f"{name:32s} {ms:8.2f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
