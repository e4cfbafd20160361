"""Issue 17: the first kernel's result in a fresh process, step by step, with and
without work started in the background, against CuPy NVRTC in the same run (cold caches).

Usage: python bench/first_kernel_overlap.py [--rounds 5]
"""

import os
import statistics
import subprocess
import sys
import tempfile

STEPS = r'''
import time
T = [time.perf_counter()]
import math
import gpureplace
T.append(time.perf_counter())
{start}
from gpureplace import cuda
import cupy
T.append(time.perf_counter())
@cuda.jit
def k1(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = math.sin(a * x[i])
{after_jit}
x = cupy.ones(1024, dtype=cupy.float32)
T.append(time.perf_counter())
k1[4, 256](x, 1.0)
cupy.cuda.runtime.deviceSynchronize()
T.append(time.perf_counter())
print(" ".join(str(b - a) for a, b in zip(T, T[1:])), T[-1] - T[0])
'''

CUPY = r'''
import time
T = [time.perf_counter()]
import cupy as cp
T.append(time.perf_counter())
k1 = cp.RawKernel(r"""extern "C" __global__ void k1(float* x, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) x[i] = sinf(a * x[i]); }""", "k1")
x = cp.ones(1024, dtype=cp.float32)
T.append(time.perf_counter())
k1((4,), (256,), (x, cp.float32(1.0), cp.int64(1024)))
cp.cuda.runtime.deviceSynchronize()
T.append(time.perf_counter())
print(" ".join(str(b - a) for a, b in zip(T, T[1:])), T[-1] - T[0])
'''

_WARM = "from gpureplace import prewarm; prewarm.start()"
_WARM_COMPILER = "from gpureplace import prewarm; prewarm.start(cuda=False)"
VARIANTS = {
    "gpureplace": (STEPS.format(start="", after_jit=""), {}),
    "eager_init": (STEPS.format(start="", after_jit=""), {"GPUREPLACE_EAGER_INIT": "1"}),
    "prewarm_at_import": (STEPS.format(start=_WARM, after_jit=""), {"GPUREPLACE_PREWARM": "1"}),
    "both": (STEPS.format(start=_WARM, after_jit=""),
             {"GPUREPLACE_PREWARM": "1", "GPUREPLACE_EAGER_INIT": "1"}),
    # the warm-up started once the kernel is defined (the user's next step, making arrays, starts
    # CUDA with the GIL released), with CUDA or the compiler alone
    "prewarm_at_jit": (STEPS.format(start="", after_jit=_WARM), {"GPUREPLACE_PREWARM": "1"}),
    "compiler_at_jit": (STEPS.format(start="", after_jit=_WARM_COMPILER),
                        {"GPUREPLACE_PREWARM": "1"}),
    "cupy_nvrtc": (CUPY, {}),
}


def run(code, extra):
    env = dict(os.environ, GPUREPLACE_CACHE="0", CUDA_CACHE_DISABLE="1",
               CUPY_CACHE_DIR=tempfile.mkdtemp(prefix="cupy-cold-"), **extra)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return [1e3 * float(v) for v in out.stdout.split()[-5:] if v]


def main():
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
    got = {k: [] for k in VARIANTS}
    for _ in range(rounds):
        for name, (code, env) in VARIANTS.items():
            got[name].append(run(code, env))
    for name, rows in got.items():
        med = [statistics.median(col) for col in zip(*rows)]
        print(f"{name:18s} steps " + " / ".join(f"{m:.0f}" for m in med[:-1]) +
              f" | total median {med[-1]:.0f} ms, min {min(r[-1] for r in rows):.0f} ms")


if __name__ == "__main__":
    main()
