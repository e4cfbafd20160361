"""Generated-code throughput: the same kernels as gpureplace Python, CUDA C (CuPy RawKernel / NVRTC)
and, when it imports and compiles, numba-cuda.

Kernels: saxpy (2**28 float32, with GB/s and % of the device-to-device copy bandwidth), chained
sin / exp / log in float32 and float64 (default and fast math), a shared-memory block reduction
(2**26 float32), a 2-D 5-point stencil (8192 x 8192 float32) and a shared-memory tiled matmul
(2048 x 2048 float32, 16 x 16 tiles).

Timing: CUDA events around back-to-back launches, queued behind one untimed launch so the GPU never
waits on the host inside the timed span (the host's launch overhead is bench/launch.py's subject,
not this one's); variants interleaved round by round; the median per launch is reported.  Every
result is checked against the CUDA C result and, on a small size, against NumPy.

    ratio = CUDA C ms / gpureplace ms      (>= 0.97 meets the goal)

Usage:
    python bench/codegen.py [--json PATH] [--png PATH] [--md PATH] [--only SUBSTR] [--budget S]
    python bench/codegen.py --check-compile [--json PATH] [--nvcc PATH]   (no GPU needed)

Fairness notes: the CUDA C is what a careful CUDA programmer writes for the same algorithm: plain
pointers (no ``__restrict__``), 64-bit linear indices in the 1-D kernels (what ``cuda.grid(1)``
gives), ``int`` coordinates in the 2-D ones.  NVRTC contracts ``a * b + c`` into FMA by default.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
import types as pytypes

import numpy as np
from numba import float32

import gpureplace
from gpureplace import cuda

# ---------------------------------------------------------------------------------------------
# Problem sizes and kernel constants (the CUDA C sources are generated from the same constants)

SAXPY_N = 2 ** 28
TRANS_N = 2 ** 24
TRANS_REPS = 16           # transcendental evaluations per element (chained, so none is hoisted)
RED_N = 2 ** 26
RED_TPB = 256
STENCIL_N = 8192
STENCIL_BLOCK = (32, 8)
MM_N = 2048
TILE = 16
TPB = 256                 # threads per block of the 1-D elementwise kernels

CUDA_C_OPTIONS = ("-O3",)
CUDA_C_FAST_OPTIONS = ("--use_fast_math",)


# ---------------------------------------------------------------------------------------------
# gpureplace kernels (plain numba-cuda kernel language: numba-cuda runs the same bytecode)


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_stride(a, x, y, out):
    """saxpy as a grid-stride loop over a grid sized to the GPU (several loads in flight)."""
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < out.size:
        out[i] = a * x[i] + y[i]
        i += stride


@cuda.jit
def saxpy_vec4(a, x, y, out):
    """saxpy on float32x4 vectors (the arrays passed as cuda.as_vectors(...)): one 16-byte load
    or store per array and thread, as CUDA C's float4 version."""
    i = cuda.grid(1)
    if i < out.size:
        u = x[i]
        v = y[i]
        out[i] = cuda.float32x4(a * u.x + v.x, a * u.y + v.y, a * u.z + v.z, a * u.w + v.w)


@cuda.jit
def chain_sin(x, out, step):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        acc = math.sin(v)
        for _ in range(TRANS_REPS - 1):
            v += step
            acc += math.sin(v)
        out[i] = acc


@cuda.jit
def chain_exp(x, out, step):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        acc = math.exp(v)
        for _ in range(TRANS_REPS - 1):
            v += step
            acc += math.exp(v)
        out[i] = acc


@cuda.jit
def chain_log(x, out, step):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        acc = math.log(v)
        for _ in range(TRANS_REPS - 1):
            v += step
            acc += math.log(v)
        out[i] = acc


@cuda.jit
def block_sum(x, partial):
    """Grid-stride accumulation per thread, then a shared-memory tree; one partial per block."""
    buf = cuda.shared.array(RED_TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    acc = float32(0.0)
    while i < x.size:
        acc += x[i]
        i += stride
    buf[t] = acc
    cuda.syncthreads()
    s = RED_TPB // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = buf[0]


@cuda.jit
def stencil5(a, out, c0, c1):
    j, i = cuda.grid(2)
    n = a.shape[0]
    m = a.shape[1]
    if i < n and j < m:
        if i == 0 or j == 0 or i == n - 1 or j == m - 1:
            out[i, j] = a[i, j]
        else:
            out[i, j] = c0 * a[i, j] + c1 * (a[i - 1, j] + a[i + 1, j] + a[i, j - 1] + a[i, j + 1])


@cuda.jit
def matmul_tiled(A, B, C):
    """C = A @ B for square n x n with n a multiple of TILE (checked on the host)."""
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    n = A.shape[0]
    acc = float32(0.0)
    for t in range(n // TILE):
        sA[ty, tx] = A[row, t * TILE + tx]
        sB[ty, tx] = B[t * TILE + ty, col]
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    C[row, col] = acc


CHAINS = {"sin": chain_sin, "exp": chain_exp, "log": chain_log}

# ---------------------------------------------------------------------------------------------
# CUDA C versions

SAXPY_C = r'''
extern "C" __global__ void saxpy(float a, const float* x, const float* y, float* out, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
'''

SAXPY_STRIDE_C = r'''
extern "C" __global__ void saxpy_stride(float a, const float* x, const float* y, float* out,
                                        long long n)
{
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = a * x[i] + y[i];
}
'''

SAXPY_VEC4_C = r'''
extern "C" __global__ void saxpy_vec4(float a, const float4* x, const float4* y, float4* out,
                                      long long n4)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 u = x[i], v = y[i];
        out[i] = make_float4(a * u.x + v.x, a * u.y + v.y, a * u.z + v.z, a * u.w + v.w);
    }
}
'''

CHAIN_C = r'''
extern "C" __global__ void chain_@FN@_@T@(const @T@* x, @T@* out, @T@ step, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        @T@ v = x[i];
        @T@ acc = @CFN@(v);
        for (int k = 0; k < @REPS@ - 1; ++k) {
            v += step;
            acc += @CFN@(v);
        }
        out[i] = acc;
    }
}
'''

BLOCK_SUM_C = r'''
extern "C" __global__ void block_sum(const float* x, float* partial, long long n)
{
    __shared__ float buf[@TPB@];
    int t = threadIdx.x;
    long long i = (long long)blockIdx.x * blockDim.x + t;
    long long stride = (long long)gridDim.x * blockDim.x;
    float acc = 0.0f;
    while (i < n) {
        acc += x[i];
        i += stride;
    }
    buf[t] = acc;
    __syncthreads();
    for (int s = @TPB@ / 2; s > 0; s /= 2) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = buf[0];
}
'''.replace("@TPB@", str(RED_TPB))

STENCIL_C = r'''
extern "C" __global__ void stencil5(const float* a, float* out, float c0, float c1, int n, int m)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < n && j < m) {
        long long k = (long long)i * m + j;
        if (i == 0 || j == 0 || i == n - 1 || j == m - 1)
            out[k] = a[k];
        else
            out[k] = c0 * a[k] + c1 * (a[k - m] + a[k + m] + a[k - 1] + a[k + 1]);
    }
}
'''

MATMUL_C = r'''
extern "C" __global__ void matmul_tiled(const float* A, const float* B, float* C, int n)
{
    __shared__ float sA[@TILE@][@TILE@];
    __shared__ float sB[@TILE@][@TILE@];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * @TILE@ + ty;
    int col = blockIdx.x * @TILE@ + tx;
    float acc = 0.0f;
    for (int t = 0; t < n / @TILE@; ++t) {
        sA[ty][tx] = A[row * n + t * @TILE@ + tx];
        sB[ty][tx] = B[(t * @TILE@ + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < @TILE@; ++k)
            acc += sA[ty][k] * sB[k][tx];
        __syncthreads();
    }
    C[row * n + col] = acc;
}
'''.replace("@TILE@", str(TILE))


def chain_c(fn, dtype):
    t = "float" if np.dtype(dtype) == np.float32 else "double"
    cfn = fn + "f" if t == "float" else fn
    src = (CHAIN_C.replace("@FN@", fn).replace("@T@", t).replace("@CFN@", cfn)
           .replace("@REPS@", str(TRANS_REPS)))
    return src, f"chain_{fn}_{t}"


def cuda_c_sources():
    """(label, source, kernel name) of every CUDA C kernel."""
    out = [("saxpy", SAXPY_C, "saxpy"), ("saxpy_stride", SAXPY_STRIDE_C, "saxpy_stride"),
           ("saxpy_vec4", SAXPY_VEC4_C, "saxpy_vec4")]
    for fn in CHAINS:
        for dt in (np.float32, np.float64):
            src, name = chain_c(fn, dt)
            out.append((name, src, name))
    out += [("block_sum", BLOCK_SUM_C, "block_sum"), ("stencil5", STENCIL_C, "stencil5"),
            ("matmul_tiled", MATMUL_C, "matmul_tiled")]
    return out


# ---------------------------------------------------------------------------------------------
# Compile-only check (no GPU): every gpureplace kernel, both contexts where relevant


def compile_plan():
    """(label, kernel, signature) of every gpureplace specialisation the benchmark launches
    (array types are what CuPy's C-contiguous arrays map to)."""
    fast = gpureplace.fastmath_context
    plan = [("saxpy", saxpy, "void(float32, float32[::1], float32[::1], float32[::1])"),
            ("saxpy_stride", saxpy_stride,
             "void(float32, float32[::1], float32[::1], float32[::1])")]
    from numba import types as nbt

    from gpureplace.compiler.intrinsics.vectors import vector_types
    v4 = nbt.Array(vector_types["float32x4"], 1, "C")            # what cuda.as_vectors passes
    plan.append(("saxpy_vec4", saxpy_vec4, (nbt.float32, v4, v4, v4)))
    for fn, k in CHAINS.items():
        for ty in ("float32", "float64"):
            sig = f"void({ty}[::1], {ty}[::1], {ty})"
            tag = "f" + ty[len("float"):]
            plan.append((f"{fn} {tag}", k, sig))
            plan.append((f"{fn} {tag} fastmath", k.with_context(fast), sig))
    plan += [("block_sum", block_sum, "void(float32[::1], float32[::1])"),
             ("stencil5", stencil5, "void(float32[:, ::1], float32[:, ::1], float32, float32)"),
             ("matmul_tiled", matmul_tiled,
              "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])")]
    return plan


def _find_ptxas():
    from gpureplace.tools import find_tool
    return find_tool("ptxas")


def _ptx_stats(ptx):
    body = ptx.split(".entry", 1)[-1]
    return {"ptx_lines": body.count("\n"),
            "fma": body.count("fma.rn."),
            "approx": body.count(".approx."),
            "bar_sync": body.count("bar.sync") + body.count("barrier.sync"),
            "shared_ops": body.count(".shared."),
            "wide_accesses": body.count("ld.global.v4.") + body.count("st.global.v4.")}


def check_compile(args):
    ptxas = _find_ptxas()
    rows = []
    for label, kern, sig in compile_plan():
        row = {"kernel": label, "signature": str(sig), "ok": False}
        t0 = time.perf_counter()
        try:
            spec = kern.compile(sig, arch="sm_90")
            row["compile_s"] = round(time.perf_counter() - t0, 3)
            row.update(_ptx_stats(spec.ptx))
            row["ok"] = True
            if ptxas:
                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "k.ptx")
                    with open(path, "w") as fh:
                        fh.write(spec.ptx)
                    proc = subprocess.run([ptxas, "-arch=sm_90", "-o", path + ".cubin", path],
                                          capture_output=True, text=True)
                row["ptxas"] = proc.returncode == 0
                if proc.returncode != 0:
                    row["ok"] = False
                    row["error"] = "ptxas: " + proc.stderr.strip()[-800:]
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        rows.append(row)
        status = "OK  " if row["ok"] else "FAIL"
        extra = (f"ptx {row['ptx_lines']:5d} lines, fma {row['fma']:3d}, approx {row['approx']:3d}"
                 if "ptx_lines" in row else row.get("error", ""))
        print(f"{status} {label:22s} {str(sig):62s} {extra}")

    nvcc_rows = []
    nvcc = args.nvcc or os.environ.get("GPUREPLACE_BENCH_NVCC")
    if nvcc:
        for label, src, _ in cuda_c_sources():
            for opts in (CUDA_C_OPTIONS, CUDA_C_FAST_OPTIONS):
                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "k.cu")
                    with open(path, "w") as fh:
                        fh.write(src)
                    proc = subprocess.run([nvcc, "-ptx", "-arch=sm_90", *opts, "-o",
                                           os.path.join(tmp, "k.ptx"), path],
                                          capture_output=True, text=True)
                ok = proc.returncode == 0
                nvcc_rows.append({"kernel": label, "options": list(opts), "ok": ok,
                                  "error": None if ok else proc.stderr.strip()[-800:]})
                print(f"{'OK  ' if ok else 'FAIL'} CUDA C {label:18s} nvcc -ptx {' '.join(opts)}"
                      + ("" if ok else "\n" + proc.stderr))

    n_ok = sum(r["ok"] for r in rows)
    print(f"compiled {n_ok}/{len(rows)} gpureplace kernels"
          + (f" (assembled with {ptxas})" if ptxas else " (ptxas not found: not assembled)"))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"mode": "check-compile", "kernels": rows, "cuda_c": nvcc_rows}, fh,
                      indent=1)
    bad = n_ok != len(rows) or not all(r["ok"] for r in nvcc_rows)
    return 1 if bad else 0


# ---------------------------------------------------------------------------------------------
# GPU runs


class Bench:
    """Shared state of one GPU run: CuPy, the numba-cuda handle (or None) and the timing budget."""

    def __init__(self, cp, budget_s, verbose=True):
        self.cp = cp
        self.budget_s = budget_s
        self.verbose = verbose
        self.ncuda = None
        self.numba_note = None
        self.raw_notes = {}
        try:
            from numba import cuda as ncuda
            if not ncuda.is_available():
                raise RuntimeError("numba.cuda.is_available() is False")
            self.ncuda = ncuda
        except Exception as exc:
            self.numba_note = f"{type(exc).__name__}: {exc}"
            print("numba-cuda: skipped:", self.numba_note, file=sys.stderr)
        dev = cp.cuda.Device()
        self.sm_count = dev.attributes["MultiProcessorCount"]

    # -- building -------------------------------------------------------------------------------
    def raw(self, src, name, fast=False):
        """A compiled cupy.RawKernel; falls back to NVRTC defaults if it rejects the options."""
        opts = CUDA_C_FAST_OPTIONS if fast else CUDA_C_OPTIONS
        try:
            k = self.cp.RawKernel(src, name, options=opts)
            k.compile()
            return k
        except Exception as exc:
            if fast:
                raise
            note = f"NVRTC rejected {opts}: {type(exc).__name__}: {str(exc)[:200]}; used defaults"
            self.raw_notes[name] = note
            print("CUDA C:", note, file=sys.stderr)
            k = self.cp.RawKernel(src, name)
            k.compile()
            return k

    def numba_kernel(self, gp_kernel, fastmath=False):
        """numba-cuda's compile of the same bytecode (its own ``cuda`` module in the globals);
        None when numba-cuda is unavailable.  Compilation happens at the first launch."""
        if self.ncuda is None:
            return None
        py = gp_kernel.py_func
        glb = dict(py.__globals__)
        glb["cuda"] = self.ncuda
        fn = pytypes.FunctionType(py.__code__, glb, py.__name__, py.__defaults__, py.__closure__)
        try:
            return self.ncuda.jit(fastmath=fastmath)(fn)
        except Exception as exc:
            print(f"numba-cuda: {py.__name__}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None

    def nb_args(self, *args):
        """numba-cuda views of the CuPy arrays, made once: launching numba-cuda with CuPy arrays
        makes it synchronise on the arrays' stream at every launch (CUDA Array Interface sync),
        which would leave the GPU idle inside the timed span."""
        out = []
        for a in args:
            if hasattr(a, "__cuda_array_interface__"):
                for kw in ({"sync": False}, {}):      # older numba-cuda: no sync argument
                    try:
                        a = self.ncuda.as_cuda_array(a, **kw)
                        break
                    except Exception:
                        continue
            out.append(a)
        return out

    def try_first_launch(self, label, launch):
        """Run a peer's launch once; a failure drops the peer from this row only."""
        try:
            launch()
            self.cp.cuda.Device().synchronize()
            return True
        except Exception as exc:
            print(f"{label}: skipped: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
            return False

    # -- timing ---------------------------------------------------------------------------------
    def time_group(self, launches, budget_s=None):
        """Median ms per launch of each ``name -> launch()``, interleaved round by round."""
        cp = self.cp
        budget_s = self.budget_s if budget_s is None else budget_s
        dev = cp.cuda.Device()
        est = {}
        for name, fn in launches.items():
            for _ in range(3):
                fn()
            dev.synchronize()
            s, e = cp.cuda.Event(), cp.cuda.Event()
            s.record()
            fn()
            e.record()
            e.synchronize()
            est[name] = max(cp.cuda.get_elapsed_time(s, e), 1e-3)
        # Each sample spans >= ~2 ms of GPU time (at most 50 launches); samples fill the budget.
        per = {n: max(1, min(50, math.ceil(2.0 / t))) for n, t in est.items()}
        round_ms = sum(est[n] * (per[n] + 1) for n in launches)
        samples = max(5, min(30, int(budget_s * 1e3 / max(round_ms, 1e-3))))
        times = {n: [] for n in launches}
        events = {n: (cp.cuda.Event(), cp.cuda.Event()) for n in launches}
        for _ in range(samples):
            for name, fn in launches.items():
                s, e = events[name]
                fn()                  # untimed: the start event queues behind it
                s.record()
                for _ in range(per[name]):
                    fn()
                e.record()
                e.synchronize()
                times[name].append(cp.cuda.get_elapsed_time(s, e) / per[name])
        return {n: float(np.median(v)) for n, v in times.items()}, {
            "samples": samples, "launches_per_sample": per}


# -- result checks -----------------------------------------------------------------------------

def _compare(a, b, rtol, atol):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False, f"shape {a.shape} vs {b.shape}"
    if not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
        return False, "non-finite values"
    diff = np.abs(a - b)
    ok = bool(np.all(diff <= atol + rtol * np.abs(b)))
    rel = float(np.max(diff / np.maximum(np.abs(b), 1e-30))) if diff.size else 0.0
    return ok, f"max rel diff {rel:.2e}"


def _check_vs(cp, got, ref, rtol, atol, what):
    """Compare device arrays (sampled when large, to keep host copies small)."""
    n = got.size
    if n > 2 ** 22:
        idx = cp.asarray(np.random.default_rng(0).integers(0, n, 2 ** 20))
        got, ref = got.ravel()[idx], ref.ravel()[idx]
    ok, msg = _compare(cp.asnumpy(got), cp.asnumpy(ref), rtol, atol)
    return ok, f"{what}: {msg}"


def _row(kernel, size, times, checks, notes=None, extra=None):
    gp = times.get("gpureplace")
    c = times.get("cuda_c")
    nb = times.get("numba_cuda")
    row = {"kernel": kernel, "size": size, "gpureplace_ms": gp, "cuda_c_ms": c, "numba_cuda_ms": nb,
           "ratio": (c / gp) if (c and gp) else None,
           "numba_ratio": (c / nb) if (c and nb) else None,
           "check_ok": all(ok for ok, _ in checks) if checks else None,
           "checks": [m if ok else "MISMATCH " + m for ok, m in checks]}
    if notes:
        row["notes"] = notes
    if extra:
        row.update(extra)
    return row


def _free(cp):
    cp.get_default_memory_pool().free_all_blocks()


# -- the kernels -------------------------------------------------------------------------------

def bench_saxpy(b):
    cp = b.cp
    a = np.float32(2.5)
    # small: against NumPy (n not a multiple of the block, to exercise the bounds check)
    checks = []
    raw = b.raw(SAXPY_C, "saxpy")
    ns = 1000
    rng = np.random.default_rng(1)
    xs, ys = rng.random(ns, dtype=np.float32), rng.random(ns, dtype=np.float32)
    ref = a.astype(np.float64) * xs + ys
    for who in ("gpureplace", "cuda_c"):
        o = cp.zeros(ns, cp.float32)
        if who == "gpureplace":
            saxpy[(ns + TPB - 1) // TPB, TPB](a, cp.asarray(xs), cp.asarray(ys), o)
        else:
            raw(((ns + TPB - 1) // TPB,), (TPB,), (a, cp.asarray(xs), cp.asarray(ys), o,
                                                   np.int64(ns)))
        checks.append(_compare(cp.asnumpy(o), ref, 1e-6, 1e-6))
        checks[-1] = (checks[-1][0], f"{who} vs NumPy (n={ns}): {checks[-1][1]}")

    n = SAXPY_N
    x = cp.random.random(n, dtype=cp.float32)
    y = cp.random.random(n, dtype=cp.float32)
    outs = {k: cp.empty(n, cp.float32) for k in ("gpureplace", "cuda_c", "numba_cuda")}
    blocks = (n + TPB - 1) // TPB
    gl = saxpy[blocks, TPB]
    launches = {"gpureplace": lambda: gl(a, x, y, outs["gpureplace"]),
                "cuda_c": lambda: raw((blocks,), (TPB,), (a, x, y, outs["cuda_c"], np.int64(n)))}
    nk = b.numba_kernel(saxpy)
    if nk is not None:
        nl = nk[blocks, TPB]
        nargs = b.nb_args(a, x, y, outs["numba_cuda"])
        fn = lambda: nl(*nargs)   # noqa: E731
        if b.try_first_launch("numba-cuda saxpy", fn):
            launches["numba_cuda"] = fn
    dst = cp.empty_like(x)
    # The same saxpy as a grid-stride loop over 16 blocks per SM, in both languages: how much of
    # the copy bandwidth the one-element-per-thread form leaves is the form's, not the compiler's.
    sblocks = 16 * b.sm_count
    sraw = b.raw(SAXPY_STRIDE_C, "saxpy_stride")
    sgl = saxpy_stride[sblocks, TPB]
    outs["stride_gpureplace"] = cp.empty(n, cp.float32)
    outs["stride_cuda_c"] = cp.empty(n, cp.float32)
    launches["stride_gpureplace"] = lambda: sgl(a, x, y, outs["stride_gpureplace"])
    launches["stride_cuda_c"] = lambda: sraw((sblocks,), (TPB,), (a, x, y, outs["stride_cuda_c"],
                                                                  np.int64(n)))
    # And with 16-byte accesses: float4 in CUDA C, float32x4 through cuda.as_vectors here.
    vraw = b.raw(SAXPY_VEC4_C, "saxpy_vec4")
    vblocks = (n // 4 + TPB - 1) // TPB
    vgl = saxpy_vec4[vblocks, TPB]
    outs["vec4_gpureplace"] = cp.empty(n, cp.float32)
    outs["vec4_cuda_c"] = cp.empty(n, cp.float32)
    vx, vy = cuda.as_vectors(x), cuda.as_vectors(y)
    vout = cuda.as_vectors(outs["vec4_gpureplace"])
    launches["vec4_gpureplace"] = lambda: vgl(a, vx, vy, vout)
    launches["vec4_cuda_c"] = lambda: vraw((vblocks,), (TPB,), (a, x, y, outs["vec4_cuda_c"],
                                                                np.int64(n // 4)))
    launches["copy_setitem"] = lambda: dst.__setitem__(Ellipsis, x)
    launches["copy_copyto"] = lambda: cp.copyto(dst, x)
    times, meta = b.time_group(launches)
    for who in ("gpureplace", "numba_cuda"):
        if who in launches:
            checks.append(_check_vs(cp, outs[who], outs["cuda_c"], 1e-6, 1e-6,
                                    f"{who} vs CUDA C"))
    copy_ms = min(times["copy_setitem"], times["copy_copyto"])
    copy_gbs = 2 * x.nbytes / copy_ms / 1e6
    extra = {"copy_ms": copy_ms, "copy_setitem_ms": times["copy_setitem"],
             "copy_copyto_ms": times["copy_copyto"], "copy_GBps": copy_gbs}
    for who in ("gpureplace", "cuda_c", "numba_cuda", "stride_gpureplace", "stride_cuda_c",
                "vec4_gpureplace", "vec4_cuda_c"):
        if who in times:
            gbs = 3 * x.nbytes / times[who] / 1e6
            extra[f"{who}_GBps"] = gbs
            extra[f"{who}_pct_of_copy"] = 100 * gbs / copy_gbs
    for who in ("stride_gpureplace", "stride_cuda_c", "vec4_gpureplace", "vec4_cuda_c"):
        checks.append(_check_vs(cp, outs[who], outs["cuda_c"], 1e-6, 1e-6,
                                f"{who} vs CUDA C"))
    extra["timing"] = meta
    size = f"2^{int(math.log2(n))}"
    vec4 = {"gpureplace": times["vec4_gpureplace"], "cuda_c": times["vec4_cuda_c"]}
    vec4_extra = {f"{k}_{w}": extra[f"{w}_{k}"] for w in ("vec4_gpureplace", "vec4_cuda_c")
                  for k in ("GBps", "pct_of_copy")}
    return [_row("saxpy f32", size, times, checks, extra=extra),
            _row("saxpy f32, 16-byte accesses (float4 / cuda.as_vectors)", size, vec4,
                 checks[-2:], extra=vec4_extra)]


def _chain_ref(x, step, fn, dtype):
    """NumPy reference with the kernel's own rounding of v (in dtype), sums in float64."""
    f = {"sin": np.sin, "exp": np.exp, "log": np.log}[fn]
    v = x.astype(dtype)
    acc = f(v.astype(np.float64))
    for _ in range(TRANS_REPS - 1):
        v = (v + dtype(step)).astype(dtype)
        acc = acc + f(v.astype(np.float64))
    return acc


def bench_chains(b, only=None):
    cp = b.cp
    rows = []
    n = TRANS_N
    for dtype in (np.float32, np.float64):
        tag = "f32" if dtype == np.float32 else "f64"
        x = (cp.random.random(n, dtype=dtype) + 1).astype(dtype)      # [1, 2): log stays > 0
        step = dtype(0.01)
        for fn, kern in CHAINS.items():
            for fast in (False, True):
                label = f"{fn} {tag}" + (" fastmath" if fast else "")
                if only and only not in label:
                    continue
                try:
                    rows.append(_bench_chain(b, label, x, step, fn, kern, dtype, fast))
                except Exception as exc:
                    rows.append(_error_row(label, exc))
        del x
        _free(cp)
    return rows


def _bench_chain(b, label, x, step, fn, kern, dtype, fast):
    cp = b.cp
    n = x.size
    gk = kern.with_context(gpureplace.fastmath_context) if fast else kern
    src, cname = chain_c(fn, dtype)
    raw = b.raw(src, cname, fast=fast)
    f32 = dtype == np.float32
    rtol = (5e-4 if fast else 2e-5) if f32 else 1e-12
    checks = []
    # small: against NumPy
    ns = 1000
    xs = np.random.default_rng(2).random(ns).astype(dtype) + dtype(1)
    ref = _chain_ref(xs, step, fn, dtype)
    for who in ("gpureplace", "cuda_c"):
        o = cp.zeros(ns, dtype)
        if who == "gpureplace":
            gk[(ns + TPB - 1) // TPB, TPB](cp.asarray(xs), o, step)
        else:
            raw(((ns + TPB - 1) // TPB,), (TPB,), (cp.asarray(xs), o, step, np.int64(ns)))
        ok, msg = _compare(cp.asnumpy(o), ref, rtol, 0)
        checks.append((ok, f"{who} vs NumPy (n={ns}): {msg}"))

    outs = {k: cp.empty(n, dtype) for k in ("gpureplace", "cuda_c", "numba_cuda")}
    blocks = (n + TPB - 1) // TPB
    gl = gk[blocks, TPB]
    launches = {"gpureplace": lambda: gl(x, outs["gpureplace"], step),
                "cuda_c": lambda: raw((blocks,), (TPB,), (x, outs["cuda_c"], step, np.int64(n)))}
    nk = b.numba_kernel(kern, fastmath=fast)
    if nk is not None:
        nl = nk[blocks, TPB]
        nargs = b.nb_args(x, outs["numba_cuda"], step)
        nf = lambda: nl(*nargs)   # noqa: E731
        if b.try_first_launch(f"numba-cuda {label}", nf):
            launches["numba_cuda"] = nf
    times, meta = b.time_group(launches)
    for who in ("gpureplace", "numba_cuda"):
        if who in launches:
            checks.append(_check_vs(cp, outs[who], outs["cuda_c"], rtol, 0, f"{who} vs CUDA C"))
    notes = b.raw_notes.get(cname)
    return _row(label, f"2^{int(math.log2(n))} x {TRANS_REPS}", times, checks, notes,
                {"timing": meta, "cuda_c_options": list(CUDA_C_FAST_OPTIONS if fast
                                                        else CUDA_C_OPTIONS)})


def bench_reduction(b):
    cp = b.cp
    raw = b.raw(BLOCK_SUM_C, "block_sum")
    blocks = b.sm_count * 8
    checks = []
    ns = 100_000
    xs = np.random.default_rng(3).random(ns, dtype=np.float32)
    ref = float(np.sum(xs, dtype=np.float64))
    for who in ("gpureplace", "cuda_c"):
        p = cp.zeros(64, cp.float32)
        if who == "gpureplace":
            block_sum[64, RED_TPB](cp.asarray(xs), p)
        else:
            raw((64,), (RED_TPB,), (cp.asarray(xs), p, np.int64(ns)))
        got = float(cp.asnumpy(p).astype(np.float64).sum())
        ok, msg = _compare([got], [ref], 1e-5, 0)
        checks.append((ok, f"{who} vs NumPy (n={ns}): {msg}"))

    n = RED_N
    x = cp.random.random(n, dtype=cp.float32)
    parts = {k: cp.zeros(blocks, cp.float32) for k in ("gpureplace", "cuda_c", "numba_cuda")}
    gl = block_sum[blocks, RED_TPB]
    launches = {"gpureplace": lambda: gl(x, parts["gpureplace"]),
                "cuda_c": lambda: raw((blocks,), (RED_TPB,), (x, parts["cuda_c"], np.int64(n)))}
    nk = b.numba_kernel(block_sum)
    if nk is not None:
        nl = nk[blocks, RED_TPB]
        nargs = b.nb_args(x, parts["numba_cuda"])
        nf = lambda: nl(*nargs)   # noqa: E731
        if b.try_first_launch("numba-cuda block_sum", nf):
            launches["numba_cuda"] = nf
    times, meta = b.time_group(launches)
    exact = float(x.astype(cp.float64).sum())
    sums = {}
    for who in launches:
        sums[who] = float(parts[who].astype(cp.float64).sum())
        ok, msg = _compare([sums[who]], [exact], 1e-5, 0)
        checks.append((ok, f"{who} final sum vs float64 sum: {msg}"))
    for who in ("gpureplace", "numba_cuda"):
        if who in launches:
            ok, msg = _compare(cp.asnumpy(parts[who]), cp.asnumpy(parts["cuda_c"]), 1e-5, 0)
            checks.append((ok, f"{who} partials vs CUDA C: {msg}"))
    extra = {"timing": meta, "blocks": blocks, "final_sums": sums, "float64_sum": exact}
    for who in times:
        extra[f"{who}_GBps"] = x.nbytes / times[who] / 1e6
    return [_row("block reduction f32", f"2^{int(math.log2(n))}", times, checks, extra=extra)]


def _stencil_ref(a, c0, c1):
    a = a.astype(np.float64)
    out = a.copy()
    out[1:-1, 1:-1] = c0 * a[1:-1, 1:-1] + c1 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2]
                                                 + a[1:-1, 2:])
    return out


def bench_stencil(b):
    cp = b.cp
    raw = b.raw(STENCIL_C, "stencil5")
    c0, c1 = np.float32(0.5), np.float32(0.125)
    bx, by = STENCIL_BLOCK

    def grid(n, m):
        return ((m + bx - 1) // bx, (n + by - 1) // by)

    checks = []
    ns, ms = 67, 45
    as_ = np.random.default_rng(4).random((ns, ms), dtype=np.float32)
    ref = _stencil_ref(as_, c0, c1)
    for who in ("gpureplace", "cuda_c"):
        o = cp.zeros((ns, ms), cp.float32)
        if who == "gpureplace":
            stencil5[grid(ns, ms), STENCIL_BLOCK](cp.asarray(as_), o, c0, c1)
        else:
            raw(grid(ns, ms), STENCIL_BLOCK, (cp.asarray(as_), o, c0, c1, np.int32(ns),
                                              np.int32(ms)))
        ok, msg = _compare(cp.asnumpy(o), ref, 1e-5, 1e-6)
        checks.append((ok, f"{who} vs NumPy ({ns}x{ms}): {msg}"))

    n = STENCIL_N
    a = cp.random.random((n, n), dtype=cp.float32)
    outs = {k: cp.empty((n, n), cp.float32) for k in ("gpureplace", "cuda_c", "numba_cuda")}
    g = grid(n, n)
    gl = stencil5[g, STENCIL_BLOCK]
    launches = {"gpureplace": lambda: gl(a, outs["gpureplace"], c0, c1),
                "cuda_c": lambda: raw(g, STENCIL_BLOCK, (a, outs["cuda_c"], c0, c1, np.int32(n),
                                                         np.int32(n)))}
    nk = b.numba_kernel(stencil5)
    if nk is not None:
        nl = nk[g, STENCIL_BLOCK]
        nargs = b.nb_args(a, outs["numba_cuda"], c0, c1)
        nf = lambda: nl(*nargs)   # noqa: E731
        if b.try_first_launch("numba-cuda stencil5", nf):
            launches["numba_cuda"] = nf
    times, meta = b.time_group(launches)
    for who in ("gpureplace", "numba_cuda"):
        if who in launches:
            checks.append(_check_vs(cp, outs[who], outs["cuda_c"], 1e-6, 1e-6,
                                    f"{who} vs CUDA C"))
    extra = {"timing": meta}
    for who in times:
        extra[f"{who}_GBps"] = 2 * a.nbytes / times[who] / 1e6
    return [_row("5-point stencil f32", f"{n}x{n}", times, checks, extra=extra)]


def bench_matmul(b):
    cp = b.cp
    raw = b.raw(MATMUL_C, "matmul_tiled")
    block = (TILE, TILE)
    checks = []
    ns = 4 * TILE
    rng = np.random.default_rng(5)
    As, Bs = rng.random((ns, ns), dtype=np.float32), rng.random((ns, ns), dtype=np.float32)
    ref = As.astype(np.float64) @ Bs.astype(np.float64)
    for who in ("gpureplace", "cuda_c"):
        o = cp.zeros((ns, ns), cp.float32)
        if who == "gpureplace":
            matmul_tiled[(ns // TILE, ns // TILE), block](cp.asarray(As), cp.asarray(Bs), o)
        else:
            raw((ns // TILE, ns // TILE), block, (cp.asarray(As), cp.asarray(Bs), o,
                                                  np.int32(ns)))
        ok, msg = _compare(cp.asnumpy(o), ref, 1e-4, 0)
        checks.append((ok, f"{who} vs NumPy ({ns}^2): {msg}"))

    n = MM_N
    assert n % TILE == 0
    A = cp.random.random((n, n), dtype=cp.float32)
    B = cp.random.random((n, n), dtype=cp.float32)
    outs = {k: cp.empty((n, n), cp.float32) for k in ("gpureplace", "cuda_c", "numba_cuda")}
    g = (n // TILE, n // TILE)
    gl = matmul_tiled[g, block]
    launches = {"gpureplace": lambda: gl(A, B, outs["gpureplace"]),
                "cuda_c": lambda: raw(g, block, (A, B, outs["cuda_c"], np.int32(n)))}
    nk = b.numba_kernel(matmul_tiled)
    if nk is not None:
        nl = nk[g, block]
        nargs = b.nb_args(A, B, outs["numba_cuda"])
        nf = lambda: nl(*nargs)   # noqa: E731
        if b.try_first_launch("numba-cuda matmul_tiled", nf):
            launches["numba_cuda"] = nf
    times, meta = b.time_group(launches)
    for who in ("gpureplace", "numba_cuda"):
        if who in launches:
            # sums of 2048 products: FMA contraction (or not) moves the last bits
            checks.append(_check_vs(cp, outs[who], outs["cuda_c"], 1e-4, 0, f"{who} vs CUDA C"))
    extra = {"timing": meta}
    for who in times:
        extra[f"{who}_TFLOPs"] = 2 * n ** 3 / times[who] / 1e9
    return [_row(f"tiled matmul f32 ({TILE}x{TILE} tiles)", f"{n}^2", times, checks, extra=extra)]


def _error_row(label, exc):
    print(f"{label}: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
    traceback.print_exc()
    return {"kernel": label, "error": f"{type(exc).__name__}: {str(exc)[:500]}",
            "gpureplace_ms": None, "cuda_c_ms": None, "numba_cuda_ms": None, "ratio": None,
            "check_ok": False, "checks": []}


BENCHES = [("saxpy", bench_saxpy), ("chains", None), ("reduction", bench_reduction),
           ("stencil", bench_stencil), ("matmul", bench_matmul)]


# ---------------------------------------------------------------------------------------------
# Output


def _fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def markdown(result):
    lines = ["| kernel | size | gpureplace ms | CUDA C ms | ratio (C / gpureplace) | "
             "numba-cuda ms | check |",
             "|---|---|---:|---:|---:|---:|---|"]
    for r in result["rows"]:
        ratio = r.get("ratio")
        mark = "" if ratio is None else (" ✅" if ratio >= 0.97 else " ❌")
        if r.get("error"):
            check = "ERROR: " + r["error"][:80].replace("|", "/")
        else:
            check = "ok" if r.get("check_ok") else "MISMATCH"
        lines.append(f"| {r['kernel']} | {r.get('size', '')} | {_fmt(r['gpureplace_ms'])} | "
                     f"{_fmt(r['cuda_c_ms'])} | {_fmt(ratio, '.3f')}{mark} | "
                     f"{_fmt(r.get('numba_cuda_ms'))} | {check} |")
    sax = next((r for r in result["rows"] if r["kernel"].startswith("saxpy") and
                r.get("copy_GBps")), None)
    if sax:
        lines.append("")
        lines.append("saxpy bandwidth (3 x 4 B per element): " + ", ".join(
            f"{who} {sax[who + '_GBps']:.0f} GB/s ({sax[who + '_pct_of_copy']:.1f}% of copy)"
            for who in ("gpureplace", "cuda_c", "numba_cuda", "stride_gpureplace",
                        "stride_cuda_c", "vec4_gpureplace", "vec4_cuda_c") if who + "_GBps" in sax)
            + f"; device-to-device copy {sax['copy_GBps']:.0f} GB/s "
              f"(best of `dst[...] = src` and `cupy.copyto`); stride_*: the same saxpy as a "
              f"grid-stride loop over 16 blocks per SM; vec4_*: on 16-byte vectors (CUDA C's "
              f"float4, gpureplace's float32x4 through cuda.as_vectors).")
    mm = next((r for r in result["rows"] if r["kernel"].startswith("tiled matmul") and
               r.get("gpureplace_TFLOPs")), None)
    if mm:
        lines.append("matmul: " + ", ".join(
            f"{who} {mm[who + '_TFLOPs']:.2f} TFLOP/s"
            for who in ("gpureplace", "cuda_c", "numba_cuda") if who + "_TFLOPs" in mm) + ".")
    if result.get("numba_cuda_note"):
        lines.append(f"numba-cuda column empty: {result['numba_cuda_note']}")
    ratios = [r["ratio"] for r in result["rows"] if r.get("ratio")]
    if ratios:
        geo = math.exp(sum(math.log(v) for v in ratios) / len(ratios))
        lines.append(f"geometric mean ratio {geo:.3f}; {sum(v >= 0.97 for v in ratios)}/"
                     f"{len(ratios)} kernels at >= 0.97.")
    return "\n".join(lines)


def write_png(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        print("png: skipped (matplotlib):", exc, file=sys.stderr)
        return False
    rows = [r for r in result["rows"] if r.get("ratio")]
    if not rows:
        return False
    names = [r["kernel"] for r in rows]
    gp = [r["ratio"] for r in rows]
    nb = [r.get("numba_ratio") or 0.0 for r in rows]
    has_nb = any(nb)
    fig, ax = plt.subplots(figsize=(max(8, 0.7 * len(rows) + 2), 5))
    xs = np.arange(len(rows))
    w = 0.4 if has_nb else 0.6
    ax.bar(xs - (w / 2 if has_nb else 0), gp, w, label="gpureplace",
           color=["tab:green" if v >= 0.97 else "tab:red" for v in gp])
    if has_nb:
        ax.bar(xs + w / 2, nb, w, label="numba-cuda", color="tab:gray")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.axhline(0.97, color="tab:orange", ls="--", lw=1, label="goal 0.97")
    ax.set_xticks(xs)
    ax.set_xticklabels(names, rotation=40, ha="right", fontsize=8)
    ax.set_ylabel("CUDA C time / kernel time (higher is faster)")
    ax.set_title("Generated-code throughput vs CUDA C (NVRTC)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


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
        if args.only and key != "chains" and args.only not in key:
            continue
        t0 = time.perf_counter()
        if key == "chains":
            rows += bench_chains(b, None if args.only in (None, "chains") else args.only)
        else:
            try:
                rows += fn(b)
            except Exception as exc:
                rows.append(_error_row(key, exc))
        _free(cp)           # the benchmark's arrays died with its frame: give the memory back
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
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--md", help="write the Markdown table here too")
    ap.add_argument("--only", help="run only kernels whose name contains this (e.g. saxpy, "
                                   "'sin f32', fastmath, stencil)")
    ap.add_argument("--budget", type=float, default=0.6,
                    help="seconds of timed GPU work per kernel row (default 0.6)")
    args = ap.parse_args(argv)
    if args.check_compile:
        return check_compile(args)
    return run_gpu(args)


if __name__ == "__main__":
    sys.exit(main())
