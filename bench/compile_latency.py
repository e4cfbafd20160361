"""Compile latency in fresh processes: first kernel (imports' one-time work included) and a second
small kernel, for gpureplace and, where present, numba-cuda and CuPy RawKernel (NVRTC).

Usage: python bench/compile_latency.py [--repeat 5]

Each tool runs in ``--repeat`` rounds of fresh processes, the tools one after the other within a
round; the JSON gives each measure's median and range over the rounds, and gpureplace's first
result and second kernel against CuPy's of the same round (the median of those ratios).
"""

import json
import subprocess
import sys

GPUREPLACE = r'''
import time
t0 = time.perf_counter()
import math
import gpureplace
from gpureplace import cuda
def shift(v):
    return v + 1.0
@cuda.jit
def k1(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = math.sin(a * shift(x[i]))
k1.compile("void(float32[:], float32)")
t1 = time.perf_counter()
@cuda.jit
def k2(x, y):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] + y[i] * 2.0
k2.compile("void(float32[:], float32[:])")
t2 = time.perf_counter()
def shift(v):          # a callee redefined: k1 recompiles, only what changed is lowered again
    return v - 1.0
gpureplace.refresh()
k1.compile("void(float32[:], float32)")
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
'''

NUMBA = r'''
import time
t0 = time.perf_counter()
import math
from numba import cuda
@cuda.jit("void(float32[:], float32)")
def k1(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = math.sin(a * x[i])
t1 = time.perf_counter()
@cuda.jit("void(float32[:], float32[:])")
def k2(x, y):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] + y[i] * 2.0
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
'''

CUPY = r'''
import time
t0 = time.perf_counter()
import cupy as cp
k1 = cp.RawKernel(r"""extern "C" __global__ void k1(float* x, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) x[i] = sinf(a * x[i]); }""", "k1")
k1.compile()
t1 = time.perf_counter()
k2 = cp.RawKernel(r"""extern "C" __global__ void k2(float* x, const float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) x[i] = x[i] + y[i] * 2.0; }""", "k2")
k2.compile()
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
'''


# From a fresh process's start to the first kernel's result: imports, compile, CUDA context,
# module load, launch and synchronise (what a user waits for); the scripts above stop at compile.
GPUREPLACE_LAUNCH = r'''
import time
t0 = time.perf_counter()
import math
import gpureplace
from gpureplace import cuda
import cupy
@cuda.jit
def k1(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = math.sin(a * x[i])
x = cupy.ones(1024, dtype=cupy.float32)
k1[4, 256](x, 1.0)
cupy.cuda.runtime.deviceSynchronize()
print(time.perf_counter() - t0)
'''

NUMBA_LAUNCH = r'''
import time
t0 = time.perf_counter()
import math
import numpy as np
from numba import cuda
@cuda.jit
def k1(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = math.sin(a * x[i])
x = cuda.to_device(np.ones(1024, dtype=np.float32))
k1[4, 256](x, 1.0)
cuda.synchronize()
print(time.perf_counter() - t0)
'''

CUPY_LAUNCH = r'''
import time
t0 = time.perf_counter()
import cupy as cp
k1 = cp.RawKernel(r"""extern "C" __global__ void k1(float* x, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) x[i] = sinf(a * x[i]); }""", "k1")
x = cp.ones(1024, dtype=cp.float32)
k1((4,), (256,), (x, cp.float32(1.0), cp.int64(1024)))
cp.cuda.runtime.deviceSynchronize()
print(time.perf_counter() - t0)
'''


TRITON = r'''
import time
t0 = time.perf_counter()
import torch
import triton
import triton.language as tl
@triton.jit
def k1(x_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.sin(a * tl.load(x_ptr + offs, mask=m)), mask=m)
x = torch.ones(1024, device="cuda")
k1[(4,)](x, 1.0, 1024, BLOCK=256)        # Triton compiles at the first launch
torch.cuda.synchronize()
t1 = time.perf_counter()
@triton.jit
def k2(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m) * 2.0,
             mask=m)
y = torch.ones(1024, device="cuda")
k2[(4,)](x, y, 1024, BLOCK=256)
torch.cuda.synchronize()
t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
'''


def _cold_env(extra):
    """Every tool's disk caches off or empty, and the driver's PTX cache off: a first run."""
    import os
    import tempfile
    return dict(os.environ, GPUREPLACE_CACHE="0", CUDA_CACHE_DISABLE="1",
                CUPY_CACHE_DIR=tempfile.mkdtemp(prefix="cupy-cold-"),
                TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="triton-cold-"),
                NUMBA_CACHE_DIR=tempfile.mkdtemp(prefix="numba-cold-"), **extra)


def run(code, **extra_env):
    import os
    import tempfile
    env = _cold_env(extra_env)
    with tempfile.TemporaryDirectory() as d:       # a file: Triton reads its kernels' source
        path = os.path.join(d, "first_kernel.py")
        with open(path, "w") as fh:
            fh.write(code)
        out = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1:]
    nums = out.stdout.split()[-3:]
    vals = [float(v) * 1000 for v in nums if _is_float(v)]
    return tuple(vals), None


def _is_float(text):
    try:
        float(text)
    except ValueError:
        return False
    return True


def warm_start():
    """First kernel in a fresh process whose disk cache already holds it (imports excluded)."""
    # Imports and CUDA's own start-up (which any GPU program pays) come before the clock starts.
    head = "t0 = time.perf_counter()\nimport math\nimport gpureplace\nfrom gpureplace import cuda"
    assert head in GPUREPLACE
    code = GPUREPLACE.replace(
        head, "import math\nimport gpureplace\nfrom gpureplace import cuda\n"
        "from gpureplace import probe\n"
        "if probe.available():\n    import cupy\n    cupy.zeros(1)\n"
        "t0 = time.perf_counter()")
    best = _warm_start("gpureplace", code, "GPUREPLACE_CACHE_DIR", field=-3)
    if best is None:
        raise RuntimeError("gpureplace's warm start failed (see above)")
    return best


# Warm start of the peers: a second process whose disk cache holds the kernel, timed from after
# the imports and CUDA's start-up to the kernel being ready (Triton: its first launch, where it
# looks up its cache).  numba-cuda caches only functions defined in files.
PEER_WARM = {
    "numba_cuda": (r'''
import time, math
import numpy as np
from numba import cuda
cuda.to_device(np.zeros(1))
t0 = time.perf_counter()
@cuda.jit("void(float32[:], float32)", cache=True)
def k1(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = math.sin(a * x[i])
print(time.perf_counter() - t0)
''', "NUMBA_CACHE_DIR"),
    "cupy_nvrtc": (r'''
import time
import cupy as cp
cp.zeros(1)
t0 = time.perf_counter()
k1 = cp.RawKernel(r"""extern "C" __global__ void k1(float* x, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) x[i] = sinf(a * x[i]); }""", "k1")
k1.compile()
print(time.perf_counter() - t0)
''', "CUPY_CACHE_DIR"),
    "triton": (r'''
import time
import torch
import triton
import triton.language as tl
x = torch.ones(1024, device="cuda")
t0 = time.perf_counter()
@triton.jit
def k1(x_ptr, a, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.sin(a * tl.load(x_ptr + offs, mask=m)), mask=m)
k1[(4,)](x, 1.0, 1024, BLOCK=256)
torch.cuda.synchronize()
print(time.perf_counter() - t0)
''', "TRITON_CACHE_DIR"),
}


def peer_warm_start(name):
    code, cache_var = PEER_WARM[name]
    return _warm_start(name, code, cache_var)


def _warm_start(name, code, cache_var, field=-1):
    """Best of three runs of ``code`` (a file, with ``cache_var`` naming a fresh disk cache that a
    first run fills): milliseconds from the ``field``-th number it prints; None if it fails."""
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "warm_kernel.py")
        with open(path, "w") as fh:
            fh.write(code)
        env = dict(os.environ, **{cache_var: os.path.join(d, "cache")})
        best = None
        for attempt in range(4):                  # the first run fills the cache
            out = subprocess.run([sys.executable, path], env=env, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{name} warm start: skipped: {out.stderr.strip().splitlines()[-1:]}",
                      file=sys.stderr)
                return None
            if attempt:
                ms = float(out.stdout.split()[field]) * 1000
                best = ms if best is None else min(best, ms)
    return best


def _median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5,
                    help="rounds; each round runs every tool's fresh processes once, one after "
                         "the other, so that a change in the host's load reaches all of them")
    args = ap.parse_args()
    # gpureplace_eager_init: with the start-up thread (GPUREPLACE_EAGER_INIT=1, off by default),
    # to show what starting CUDA while Numba is imported saves.
    compile_codes = {"gpureplace": (GPUREPLACE, {}),
                     "gpureplace_eager_init": (GPUREPLACE, {"GPUREPLACE_EAGER_INIT": "1"}),
                     "numba_cuda": (NUMBA, {}), "cupy_nvrtc": (CUPY, {}), "triton": (TRITON, {})}
    launch_codes = {"gpureplace": (GPUREPLACE_LAUNCH, {}),
                    "gpureplace_eager_init": (GPUREPLACE_LAUNCH, {"GPUREPLACE_EAGER_INIT": "1"}),
                    "numba_cuda": (NUMBA_LAUNCH, {}), "cupy_nvrtc": (CUPY_LAUNCH, {})}
    runs = {name: [] for name in compile_codes}       # per round: (first, second[, recompile])
    results = {name: [] for name in launch_codes}     # per round: first kernel's result
    skipped, no_launch = set(), set()
    for _ in range(args.repeat):
        for name, (code, env) in compile_codes.items():
            if name in skipped:
                continue
            res, err = run(code, **env)
            if res is None:
                print(f"{name}: skipped: {err}", file=sys.stderr)
                skipped.add(name)
                continue
            runs[name].append(res)
            if name in launch_codes and name not in no_launch:
                launch_code, launch_env = launch_codes[name]
                res, err = run(launch_code, **launch_env)
                if res is None:
                    print(f"{name} first launch: skipped: {err}", file=sys.stderr)
                    no_launch.add(name)
                    continue
                results[name].append(res[0])
    rows = {}
    fields = ("first_ms", "second_ms", "recompile_after_callee_redefinition_ms")
    for name, got in runs.items():
        if name in skipped or not got:
            continue
        rows[name] = {}
        for i, field in enumerate(fields[:len(got[0])]):
            vals = [r[i] for r in got]
            rows[name][field] = _median(vals)
            rows[name][field.replace("_ms", "_range_ms")] = [min(vals), max(vals)]
        if results.get(name) and name not in no_launch:
            rows[name]["first_result_ms"] = _median(results[name])
            rows[name]["first_result_range_ms"] = [min(results[name]), max(results[name])]
        rows[name]["rounds"] = len(got)
    if "triton" in rows:                  # Triton's first compile is its first launch
        rows["triton"]["first_result_ms"] = rows["triton"]["first_ms"]
    # The goals compare with CuPy in the same run: the ratio of each round, then their median.
    cupy = "cupy_nvrtc" if "first_result_ms" in rows.get("cupy_nvrtc", {}) else None
    for name in ("gpureplace", "gpureplace_eager_init"):
        if cupy and "first_result_ms" in rows.get(name, {}) and \
                len(results[name]) == len(results[cupy]) and len(runs[name]) == len(runs[cupy]):
            rows[name]["first_result_vs_cupy"] = round(_median(
                [a / b for a, b in zip(results[name], results[cupy])]), 3)
            rows[name]["second_vs_cupy"] = round(_median(
                [a[1] / b[1] for a, b in zip(runs[name], runs[cupy])]), 3)
    print(f"{'compiler':14s} {'first kernel ms':>16s} {'second kernel ms':>17s} "
          f"{'recompile after callee change ms':>33s}")
    for name, r in rows.items():
        re_ms = r.get("recompile_after_callee_redefinition_ms")
        re_txt = f"{re_ms:33.1f}" if re_ms is not None else f"{'n/a (cannot notice)':>33s}"
        print(f"{name:14s} {r['first_ms']:16.1f} {r['second_ms']:17.1f} {re_txt}")
    for name in ("gpureplace", "gpureplace_eager_init"):
        if "first_result_vs_cupy" in rows.get(name, {}):
            r = rows[name]
            print(f"{name}: first kernel's result {r['first_result_ms']:.0f} ms "
                  f"({r['first_result_vs_cupy']:.2f}x CuPy NVRTC's, median of the rounds' "
                  f"ratios), second kernel {r['second_vs_cupy']:.2f}x CuPy's")
    warm = warm_start()
    print(f"gpureplace warm start from the disk cache (imports excluded): {warm:.1f} ms")
    rows["gpureplace_warm_start_ms"] = warm
    peers = {}
    for name in PEER_WARM:
        ms = peer_warm_start(name)
        if ms is not None:
            peers[name] = ms
            print(f"{name} warm start from its disk cache (imports excluded): {ms:.1f} ms")
    rows["peer_warm_start_ms"] = peers
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
