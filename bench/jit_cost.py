"""Issue 17: what the driver's JIT of a new PTX costs (a further kernel's ~10 ms between compile
and launch), and whether a JIT option or its disk cache changes it.

Usage: python bench/jit_cost.py   (CUDA_CACHE_DISABLE=1 to see it without the driver's cache)

Run on the H200 (2026-12-03, bench/results/jit_cost.txt): a new small kernel's JIT costs 7.4-8.3 ms
whatever the JIT optimisation level (0-4) and whether the driver's cache is on, off, or in a fresh
directory; going through cuLink to a cubin costs the same, and loading that cubin 0.07 ms.  So the
JIT is ptxas's fixed cost, not the cache write: a cubin of ours would only save the driver's own
cache lookup on a warm start, and nothing for a kernel never compiled before.
"""

import ctypes
import os
import statistics
import time

import cupy as cp

from gpureplace import cuda, probe

KERNEL = '''
def scale_{n}(a, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + {n}.0
'''
SIG = "void(float32, float32[::1], float32[::1])"
CU_JIT_OPTIMIZATION_LEVEL = 7


def fresh_ptx(n):
    ns = {"cuda": cuda}
    exec(KERNEL.format(n=n), ns)
    return cuda.jit(ns[f"scale_{n}"]).compile(SIG).ptx.encode()


def main():
    cp.zeros(1)
    lib = probe.libcuda()
    fresh_ptx(0)
    rows = {"cupy Module.load (cuModuleLoadData)": [], "opt level 0": [], "opt level 1": [],
            "opt level 2": [], "opt level 3": [], "opt level 4": [],
            "cuLink PTX -> cubin": [], "load of that cubin": []}
    n = 1
    for _ in range(8):
        ptx = fresh_ptx(n)
        n += 1
        t = time.perf_counter()
        cp.cuda.function.Module().load(ptx)
        rows["cupy Module.load (cuModuleLoadData)"].append(time.perf_counter() - t)
        for level in range(5):
            ptx = fresh_ptx(n)
            n += 1
            handle = ctypes.c_void_p()
            opts = (ctypes.c_int * 1)(CU_JIT_OPTIMIZATION_LEVEL)
            vals = (ctypes.c_void_p * 1)(level)
            t = time.perf_counter()
            rc = lib.cuModuleLoadDataEx(ctypes.byref(handle), ctypes.c_char_p(ptx), 1, opts, vals)
            rows[f"opt level {level}"].append(time.perf_counter() - t)
            assert rc == 0, rc
            lib.cuModuleUnload(handle)
        ptx = fresh_ptx(n)
        n += 1
        state = ctypes.c_void_p()
        t = time.perf_counter()
        assert lib.cuLinkCreate_v2(0, None, None, ctypes.byref(state)) == 0
        assert lib.cuLinkAddData_v2(state, 1, ctypes.c_char_p(ptx), len(ptx), b"k.ptx", 0, None,
                                    None) == 0         # 1: CU_JIT_INPUT_PTX
        cubin, size = ctypes.c_void_p(), ctypes.c_size_t()
        assert lib.cuLinkComplete(state, ctypes.byref(cubin), ctypes.byref(size)) == 0
        data = ctypes.string_at(cubin, size.value)
        lib.cuLinkDestroy(state)
        t1 = time.perf_counter()
        handle = ctypes.c_void_p()
        assert lib.cuModuleLoadData(ctypes.byref(handle), ctypes.c_char_p(data)) == 0
        t2 = time.perf_counter()
        rows["cuLink PTX -> cubin"].append(t1 - t)
        rows["load of that cubin"].append(t2 - t1)
    print(f"CUDA_CACHE_DISABLE={os.environ.get('CUDA_CACHE_DISABLE', '0')}")
    for k, v in rows.items():
        print(f"  {k:38s} median {1e3 * statistics.median(v):6.2f} ms  min {1e3 * min(v):6.2f}")


if __name__ == "__main__":
    main()
