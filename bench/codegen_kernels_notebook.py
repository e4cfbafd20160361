"""bench/codegen.py's notebook kernels: the kernels people write in notebooks, each in gpureplace
Python (the plain numba-cuda kernel language) and as the CUDA C that a careful CUDA programmer
writes for the same algorithm, with their problem sizes and the specialisations the benchmark
launches (``notebook_plan()``, part of codegen_kernels.compile_plan()).

A shared-memory tiled transpose, a 256-bin histogram with shared-memory atomics, a warp-shuffle
block reduction and inclusive block scan, an all-pairs n-body step (float4 positions; ``1 / sqrt``
in the default and fast-math contexts, and rsqrt), a row softmax (one block per row), float16 and
bfloat16 ``a * x + b`` and a 5 x 5 convolution with a halo tile in shared memory.

Imports no sibling module (codegen_kernels.py imports this one).
"""

from __future__ import annotations

import math

from numba import float32, uint32

import gpureplace
from gpureplace import cuda

# ---------------------------------------------------------------------------------------------
# Problem sizes and kernel constants (the CUDA C sources are generated from the same constants)

FULL_MASK = 0xFFFFFFFF
TR_N = 8192               # transpose: TR_N x TR_N float32
TR_TILE = 32
TR_ROWS = 8               # the block is TR_TILE x TR_ROWS threads, each moving TR_TILE / TR_ROWS
HIST_N = 2 ** 28          # histogram: uint8 values
HIST_BINS = 256           # == threads per block (each thread clears and merges one bin)
WARP_N = 2 ** 26          # warp-shuffle reduction and scan: float32 values
WARP_TPB = 256
SCAN_TPB = 1024           # scan: one element per thread, 32 warps (the first warp scans their sums)
NB_N = 2 ** 15            # n-body: bodies
NB_TPB = 256
NB_EPS2 = 0.01            # softening: |r|^2 + eps^2
SMX_ROWS = 8192           # softmax: SMX_ROWS x SMX_COLS float32, one block per row
SMX_COLS = 4096
SMX_TPB = 256
HALF_N = 2 ** 28          # float16 / bfloat16 a * x + b
HALF_TPB = 256
CONV_N = 8192             # convolution: CONV_N x CONV_N float32, 5 x 5 filter
CONV_R = 2                # filter radius
CONV_K = 2 * CONV_R + 1
CONV_BX = 32              # threads per block in x and y; each computes one output of the block's
CONV_BY = 8               #   CONV_BX x CONV_BY tile
CONV_BLOCK = (CONV_BX, CONV_BY)
CONV_TW = CONV_BX + 2 * CONV_R      # the shared input tile, halo included
CONV_TH = CONV_BY + 2 * CONV_R


# ---------------------------------------------------------------------------------------------
# gpureplace kernels


@cuda.jit
def transpose_tiled(a, out):
    """out = a.T through a 32 x 33 shared tile (the padding column keeps the column reads free of
    bank conflicts); 32 x 8 threads, each moving four elements in and four out."""
    tile = cuda.shared.array((TR_TILE, TR_TILE + 1), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    n = a.shape[0]
    m = a.shape[1]
    x = cuda.blockIdx.x * TR_TILE + tx
    y = cuda.blockIdx.y * TR_TILE + ty
    for k in range(0, TR_TILE, TR_ROWS):
        if y + k < n and x < m:
            tile[ty + k, tx] = a[y + k, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TR_TILE + tx
    y = cuda.blockIdx.x * TR_TILE + ty
    for k in range(0, TR_TILE, TR_ROWS):
        if y + k < m and x < n:
            out[y + k, x] = tile[tx, ty + k]


@cuda.jit
def histogram256(data, hist):
    """Per-block histogram of uint8 values in shared memory (atomics there), merged into the
    global one with one atomic per non-empty bin; blockDim.x == HIST_BINS, grid-stride loop."""
    local = cuda.shared.array(HIST_BINS, uint32)
    t = cuda.threadIdx.x
    local[t] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < data.size:
        cuda.atomic.add(local, data[i], 1)
        i += stride
    cuda.syncthreads()
    c = local[t]
    if c > 0:
        cuda.atomic.add(hist, t, c)


@cuda.jit
def warp_sum(x, partial):
    """Grid-stride sum per thread, a shfl_down_sync tree per warp, the warps' sums through shared
    memory, summed by the first warp; one partial per block."""
    sums = cuda.shared.array(WARP_TPB // 32, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    warp = t // 32
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    acc = float32(0.0)
    while i < x.size:
        acc += x[i]
        i += stride
    off = 16
    while off > 0:
        acc += cuda.shfl_down_sync(FULL_MASK, acc, off)
        off //= 2
    if lane == 0:
        sums[warp] = acc
    cuda.syncthreads()
    if warp == 0:
        acc = sums[lane] if lane < WARP_TPB // 32 else float32(0.0)
        off = WARP_TPB // 64
        while off > 0:
            acc += cuda.shfl_down_sync(FULL_MASK, acc, off)
            off //= 2
        if lane == 0:
            partial[cuda.blockIdx.x] = acc


@cuda.jit
def warp_scan(x, out):
    """Inclusive scan of each block's SCAN_TPB elements: a shfl_up_sync scan per warp, the
    warps' totals scanned the same way by the first warp (through shared memory), added back."""
    totals = cuda.shared.array(SCAN_TPB // 32, float32)
    t = cuda.threadIdx.x
    lane = t % 32
    warp = t // 32
    i = cuda.grid(1)
    v = x[i] if i < x.size else float32(0.0)
    off = 1
    while off < 32:
        u = cuda.shfl_up_sync(FULL_MASK, v, off)
        if lane >= off:
            v += u
        off *= 2
    if lane == 31:
        totals[warp] = v
    cuda.syncthreads()
    if warp == 0:
        s = totals[lane]
        off = 1
        while off < 32:
            u = cuda.shfl_up_sync(FULL_MASK, s, off)
            if lane >= off:
                s += u
            off *= 2
        totals[lane] = s
    cuda.syncthreads()
    if warp > 0:
        v += totals[warp - 1]
    if i < x.size:
        out[i] = v


@cuda.jit
def nbody(pos, acc, eps2):
    """Accelerations of all pairs (GPU Gems 3, ch. 31): positions (x, y, z, mass) as float32x4,
    staged through shared memory a block at a time; 1 / sqrt(|r|^2 + eps2) per pair."""
    sh = cuda.shared.array(NB_TPB, cuda.float32x4)
    n = pos.size
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    zero = cuda.float32x4(0.0, 0.0, 0.0, 0.0)
    p = pos[i] if i < n else zero
    ax = float32(0.0)
    ay = float32(0.0)
    az = float32(0.0)
    for base in range(0, n, NB_TPB):
        j = base + t
        sh[t] = pos[j] if j < n else zero
        cuda.syncthreads()
        for k in range(NB_TPB):
            q = sh[k]
            rx = q.x - p.x
            ry = q.y - p.y
            rz = q.z - p.z
            d2 = rx * rx + ry * ry + rz * rz + eps2
            inv = float32(1.0) / math.sqrt(d2)
            s = q.w * (inv * inv * inv)
            ax += rx * s
            ay += ry * s
            az += rz * s
        cuda.syncthreads()
    if i < n:
        acc[i] = cuda.float32x4(ax, ay, az, 0.0)


@cuda.jit
def nbody_rsqrt(pos, acc, eps2):
    """nbody with the reciprocal square root asked for by name (CUDA C's rsqrtf)."""
    sh = cuda.shared.array(NB_TPB, cuda.float32x4)
    n = pos.size
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    zero = cuda.float32x4(0.0, 0.0, 0.0, 0.0)
    p = pos[i] if i < n else zero
    ax = float32(0.0)
    ay = float32(0.0)
    az = float32(0.0)
    for base in range(0, n, NB_TPB):
        j = base + t
        sh[t] = pos[j] if j < n else zero
        cuda.syncthreads()
        for k in range(NB_TPB):
            q = sh[k]
            rx = q.x - p.x
            ry = q.y - p.y
            rz = q.z - p.z
            d2 = rx * rx + ry * ry + rz * rz + eps2
            inv = cuda.libdevice.rsqrtf(d2)
            s = q.w * (inv * inv * inv)
            ax += rx * s
            ay += ry * s
            az += rz * s
        cuda.syncthreads()
    if i < n:
        acc[i] = cuda.float32x4(ax, ay, az, 0.0)


@cuda.jit
def softmax_rows(a, out):
    """Softmax of each row, one block per row: the row's max and then its sum of exp(x - max),
    each reduced by a tree in shared memory, then out = exp(x - max) / sum."""
    buf = cuda.shared.array(SMX_TPB, float32)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    m = a.shape[1]
    v = float32(-math.inf)
    for j in range(t, m, SMX_TPB):
        v = max(v, a[row, j])
    buf[t] = v
    cuda.syncthreads()
    s = SMX_TPB // 2
    while s > 0:
        if t < s:
            buf[t] = max(buf[t], buf[t + s])
        cuda.syncthreads()
        s //= 2
    mx = buf[0]
    cuda.syncthreads()
    acc = float32(0.0)
    for j in range(t, m, SMX_TPB):
        acc += math.exp(a[row, j] - mx)
    buf[t] = acc
    cuda.syncthreads()
    s = SMX_TPB // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    inv = float32(1.0) / buf[0]
    for j in range(t, m, SMX_TPB):
        out[row, j] = math.exp(a[row, j] - mx) * inv


@cuda.jit
def axpb_half(a, x, b, out):
    """out = a * x + b in float16 (float16 scalars and arrays)."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + b


@cuda.jit
def axpb_bf16(a, x, b, out):
    """out = a * x + b in bfloat16 (bfloat16 scalars and arrays)."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + b


@cuda.jit
def conv5x5(a, w, out):
    """out = a correlated with the 5 x 5 filter w (zero outside a): each block loads its
    (32 + 4) x (8 + 4) input tile, halo included, into shared memory, then each thread computes
    one output from it."""
    tile = cuda.shared.array((CONV_TH, CONV_TW), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    n = a.shape[0]
    m = a.shape[1]
    x0 = cuda.blockIdx.x * CONV_BX - CONV_R
    y0 = cuda.blockIdx.y * CONV_BY - CONV_R
    for r in range(ty, CONV_TH, CONV_BY):
        for c in range(tx, CONV_TW, CONV_BX):
            gy = y0 + r
            gx = x0 + c
            if 0 <= gy < n and 0 <= gx < m:
                tile[r, c] = a[gy, gx]
            else:
                tile[r, c] = 0.0
    cuda.syncthreads()
    i = cuda.blockIdx.y * CONV_BY + ty
    j = cuda.blockIdx.x * CONV_BX + tx
    if i < n and j < m:
        acc = float32(0.0)
        for dy in range(CONV_K):
            for dx in range(CONV_K):
                acc += w[dy * CONV_K + dx] * tile[ty + dy, tx + dx]
        out[i, j] = acc


# ---------------------------------------------------------------------------------------------
# CUDA C versions

TRANSPOSE_C = r'''
extern "C" __global__ void transpose_tiled(const float* a, float* out, int n, int m)
{
    __shared__ float tile[@T@][@T@ + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int x = blockIdx.x * @T@ + tx;
    int y = blockIdx.y * @T@ + ty;
    for (int k = 0; k < @T@; k += @R@)
        if (y + k < n && x < m) tile[ty + k][tx] = a[(long long)(y + k) * m + x];
    __syncthreads();
    x = blockIdx.y * @T@ + tx;
    y = blockIdx.x * @T@ + ty;
    for (int k = 0; k < @T@; k += @R@)
        if (y + k < m && x < n) out[(long long)(y + k) * n + x] = tile[tx][ty + k];
}
'''.replace("@T@", str(TR_TILE)).replace("@R@", str(TR_ROWS))

HISTOGRAM_C = r'''
extern "C" __global__ void histogram256(const unsigned char* data, unsigned int* hist, long long n)
{
    __shared__ unsigned int local[@B@];
    int t = threadIdx.x;
    local[t] = 0;
    __syncthreads();
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + t; i < n; i += stride)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();
    unsigned int c = local[t];
    if (c > 0) atomicAdd(&hist[t], c);
}
'''.replace("@B@", str(HIST_BINS))

WARP_SUM_C = r'''
extern "C" __global__ void warp_sum(const float* x, float* partial, long long n)
{
    __shared__ float sums[@TPB@ / 32];
    int t = threadIdx.x, lane = t % 32, warp = t / 32;
    long long stride = (long long)gridDim.x * blockDim.x;
    float acc = 0.0f;
    for (long long i = (long long)blockIdx.x * blockDim.x + t; i < n; i += stride)
        acc += x[i];
    for (int off = 16; off > 0; off /= 2)
        acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) sums[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < @TPB@ / 32 ? sums[lane] : 0.0f;
        for (int off = @TPB@ / 64; off > 0; off /= 2)
            acc += __shfl_down_sync(0xffffffffu, acc, off);
        if (lane == 0) partial[blockIdx.x] = acc;
    }
}
'''.replace("@TPB@", str(WARP_TPB))

WARP_SCAN_C = r'''
extern "C" __global__ void warp_scan(const float* x, float* out, long long n)
{
    __shared__ float totals[@TPB@ / 32];
    int t = threadIdx.x, lane = t % 32, warp = t / 32;
    long long i = (long long)blockIdx.x * blockDim.x + t;
    float v = i < n ? x[i] : 0.0f;
    for (int off = 1; off < 32; off *= 2) {
        float u = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= off) v += u;
    }
    if (lane == 31) totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float s = totals[lane];
        for (int off = 1; off < 32; off *= 2) {
            float u = __shfl_up_sync(0xffffffffu, s, off);
            if (lane >= off) s += u;
        }
        totals[lane] = s;
    }
    __syncthreads();
    if (warp > 0) v += totals[warp - 1];
    if (i < n) out[i] = v;
}
'''.replace("@TPB@", str(SCAN_TPB))

NBODY_C = r'''
extern "C" __global__ void @NAME@(const float4* pos, float4* acc, float eps2, int n)
{
    __shared__ float4 sh[@TPB@];
    int t = threadIdx.x;
    int i = blockIdx.x * blockDim.x + t;
    float4 p = i < n ? pos[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (int base = 0; base < n; base += @TPB@) {
        int j = base + t;
        sh[t] = j < n ? pos[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        __syncthreads();
        for (int k = 0; k < @TPB@; ++k) {
            float4 q = sh[k];
            float rx = q.x - p.x, ry = q.y - p.y, rz = q.z - p.z;
            float d2 = rx * rx + ry * ry + rz * rz + eps2;
            float inv = @INV@;
            float s = q.w * (inv * inv * inv);
            ax += rx * s;
            ay += ry * s;
            az += rz * s;
        }
        __syncthreads();
    }
    if (i < n) acc[i] = make_float4(ax, ay, az, 0.0f);
}
'''.replace("@TPB@", str(NB_TPB))
NBODY_SQRT_C = NBODY_C.replace("@NAME@", "nbody").replace("@INV@", "1.0f / sqrtf(d2)")
NBODY_RSQRT_C = NBODY_C.replace("@NAME@", "nbody_rsqrt").replace("@INV@", "rsqrtf(d2)")

SOFTMAX_C = r'''
extern "C" __global__ void softmax_rows(const float* a, float* out, int m)
{
    __shared__ float buf[@TPB@];
    int t = threadIdx.x;
    const float* x = a + (long long)blockIdx.x * m;
    float* y = out + (long long)blockIdx.x * m;
    float v = __int_as_float(0xff800000);   // -inf (NVRTC has no INFINITY without math.h)
    for (int j = t; j < m; j += @TPB@) v = fmaxf(v, x[j]);
    buf[t] = v;
    __syncthreads();
    for (int s = @TPB@ / 2; s > 0; s /= 2) {
        if (t < s) buf[t] = fmaxf(buf[t], buf[t + s]);
        __syncthreads();
    }
    float mx = buf[0];
    __syncthreads();
    float acc = 0.0f;
    for (int j = t; j < m; j += @TPB@) acc += expf(x[j] - mx);
    buf[t] = acc;
    __syncthreads();
    for (int s = @TPB@ / 2; s > 0; s /= 2) {
        if (t < s) buf[t] += buf[t + s];
        __syncthreads();
    }
    float inv = 1.0f / buf[0];
    for (int j = t; j < m; j += @TPB@) y[j] = expf(x[j] - mx) * inv;
}
'''.replace("@TPB@", str(SMX_TPB))

AXPB_C = r'''
#include <@HDR@>
extern "C" __global__ void @NAME@(@T@ a, const @T@* x, @T@ b, @T@* out, long long n)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = @EXPR@;
}
'''

CONV_C = r'''
extern "C" __global__ void conv5x5(const float* a, const float* w, float* out, int n, int m)
{
    __shared__ float tile[@BY@ + 2 * @R@][@BX@ + 2 * @R@];
    int tx = threadIdx.x, ty = threadIdx.y;
    int x0 = blockIdx.x * @BX@ - @R@, y0 = blockIdx.y * @BY@ - @R@;
    for (int r = ty; r < @BY@ + 2 * @R@; r += @BY@)
        for (int c = tx; c < @BX@ + 2 * @R@; c += @BX@) {
            int gy = y0 + r, gx = x0 + c;
            tile[r][c] = (gy >= 0 && gy < n && gx >= 0 && gx < m) ? a[(long long)gy * m + gx]
                                                                 : 0.0f;
        }
    __syncthreads();
    int i = blockIdx.y * @BY@ + ty, j = blockIdx.x * @BX@ + tx;
    if (i < n && j < m) {
        float acc = 0.0f;
        for (int dy = 0; dy < @K@; ++dy)
            for (int dx = 0; dx < @K@; ++dx)
                acc += w[dy * @K@ + dx] * tile[ty + dy][tx + dx];
        out[(long long)i * m + j] = acc;
    }
}
'''.replace("@BX@", str(CONV_BX)).replace("@BY@", str(CONV_BY)).replace(
    "@R@", str(CONV_R)).replace("@K@", str(CONV_K))


def axpb_c(kind):
    """(source, kernel name) of a * x + b in CUDA C for ``kind`` "f16" or "bf16": the operators of
    cuda_fp16.h / cuda_bf16.h, as the Python kernel writes it."""
    hdr, t = {"f16": ("cuda_fp16.h", "__half"), "bf16": ("cuda_bf16.h", "__nv_bfloat16")}[kind]
    name = {"f16": "axpb_half", "bf16": "axpb_bf16"}[kind]
    src = (AXPB_C.replace("@HDR@", hdr).replace("@NAME@", name).replace("@T@", t)
           .replace("@EXPR@", "a * x[i] + b"))
    return src, name


def notebook_sources():
    """(label, source, kernel name) of every CUDA C notebook kernel."""
    out = [("transpose_tiled", TRANSPOSE_C, "transpose_tiled"),
           ("histogram256", HISTOGRAM_C, "histogram256"), ("warp_sum", WARP_SUM_C, "warp_sum"),
           ("warp_scan", WARP_SCAN_C, "warp_scan"), ("nbody", NBODY_SQRT_C, "nbody"),
           ("nbody_rsqrt", NBODY_RSQRT_C, "nbody_rsqrt"),
           ("softmax_rows", SOFTMAX_C, "softmax_rows")]
    for kind in ("f16", "bf16"):
        src, name = axpb_c(kind)
        out.append((name, src, name))
    out.append(("conv5x5", CONV_C, "conv5x5"))
    return out


def notebook_plan():
    """(label, kernel, signature) of every notebook specialisation the benchmark launches."""
    from numba import types as nbt

    from gpureplace.compiler.intrinsics.vectors import vector_types
    v4 = nbt.Array(vector_types["float32x4"], 1, "C")            # what cuda.as_vectors passes
    nbody_sig = (v4, v4, nbt.float32)
    return [
        ("transpose_tiled", transpose_tiled, "void(float32[:, ::1], float32[:, ::1])"),
        ("histogram256", histogram256, "void(uint8[::1], uint32[::1])"),
        ("warp_sum", warp_sum, "void(float32[::1], float32[::1])"),
        ("warp_scan", warp_scan, "void(float32[::1], float32[::1])"),
        ("nbody", nbody, nbody_sig),
        ("nbody fastmath", nbody.with_context(gpureplace.fastmath_context), nbody_sig),
        ("nbody_rsqrt", nbody_rsqrt, nbody_sig),
        ("softmax_rows", softmax_rows, "void(float32[:, ::1], float32[:, ::1])"),
        ("axpb_half", axpb_half, "void(float16, float16[::1], float16, float16[::1])"),
        ("axpb_bf16", axpb_bf16, "void(bfloat16, bfloat16[::1], bfloat16, bfloat16[::1])"),
        ("conv5x5", conv5x5, "void(float32[:, ::1], float32[::1], float32[:, ::1])"),
    ]
