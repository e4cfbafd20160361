"""bench/codegen.py's kernels: each benchmark kernel in gpureplace Python and as the CUDA C that a
careful CUDA programmer writes for the same algorithm, the problem sizes both are generated from,
and the list of specialisations the benchmark launches (what ``--check-compile`` compiles).
The kernels people write in notebooks (transpose, histogram, warp shuffles, n-body, softmax,
float16 / bfloat16, convolution) are in codegen_kernels_notebook.py; ``compile_plan()`` and
``cuda_c_sources()`` list them too.

Imports only codegen_kernels_notebook: tests load it (through bench/codegen.py) to check the
generated code.
"""

from __future__ import annotations

import math

import numpy as np
from numba import float32

import gpureplace
from gpureplace import cuda

from codegen_kernels_notebook import notebook_plan, notebook_sources

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

#: The CUDA C twins' compiler options (NVRTC, bench/codegen_harness.py): none for the default-context
#: rows -- NVRTC's defaults are nvcc's (-ftz=false -prec-div=true -prec-sqrt=true -fmad=true; device
#: code is optimised, NVRTC takes no -O level) -- and fast math for the fast-math rows.
CUDA_C_OPTIONS = ()
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
    return out + notebook_sources()


# ---------------------------------------------------------------------------------------------
# The gpureplace specialisations the benchmark launches (compiled by --check-compile, no GPU)


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
    return plan + notebook_plan()

