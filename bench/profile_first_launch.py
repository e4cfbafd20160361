"""Issue 17: what the first launch of a fresh process spends (compile, imports on
the way, module load), after CUDA has started.  Usage: python bench/profile_first_launch.py"""
import cProfile
import math
import pstats
import sys
import time

import cupy

import gpureplace  # noqa: F401
from gpureplace import cuda

x = cupy.ones(1024, dtype=cupy.float32)
cupy.cuda.runtime.deviceSynchronize()


@cuda.jit
def k1(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = math.sin(a * x[i])


before = set(sys.modules)
pr = cProfile.Profile()
t0 = time.perf_counter()
pr.enable()
k1[4, 256](x, 1.0)
cupy.cuda.runtime.deviceSynchronize()
pr.disable()
print(f"first launch {1e3 * (time.perf_counter() - t0):.0f} ms; modules imported on the way: "
      f"{len(set(sys.modules) - before)}: {sorted(set(sys.modules) - before)[:60]}")
st = pstats.Stats(pr)
st.sort_stats("cumulative").print_stats(45)
st.sort_stats("tottime").print_stats(25)
