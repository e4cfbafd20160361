"""Where the first kernel's time goes in a fresh process: imports, CUDA start-up, each compile stage.

Usage: GPUREPLACE_CACHE=0 python bench/profile_first_kernel.py [--profile]
"""

import sys
import time

t0 = time.perf_counter()
import numba  # noqa: E402,F401
t1 = time.perf_counter()
import math  # noqa: E402

from gpureplace import cuda  # noqa: E402
from gpureplace import probe  # noqa: E402
t2 = time.perf_counter()
has_gpu = probe.available()
if has_gpu:
    import cupy
    x = cupy.zeros(1024, dtype=cupy.float32)
t3 = time.perf_counter()


@cuda.jit
def k1(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = math.sin(a * x[i])


if "--profile" in sys.argv:
    import cProfile
    import pstats
    cProfile.run('k1.compile("void(float32[:], float32)")', "/tmp/first.prof")
    pstats.Stats("/tmp/first.prof").sort_stats("cumulative").print_stats(30)
else:
    k1.compile("void(float32[:], float32)")
t4 = time.perf_counter()
if has_gpu:
    k1[4, 256](x, 1.0)
    cupy.cuda.runtime.deviceSynchronize()
t5 = time.perf_counter()
print(f"import numba {1e3 * (t1 - t0):.0f} ms | import gpureplace {1e3 * (t2 - t1):.0f} ms | "
      f"CUDA start-up {1e3 * (t3 - t2):.0f} ms | compile {1e3 * (t4 - t3):.0f} ms | "
      f"load + first launch {1e3 * (t5 - t4):.0f} ms")
