"""What saxpy can reach on this GPU, written in CUDA C (CuPy RawModule) several ways, as a share of
the best device-to-device copy: the ceiling behind bench/codegen.py's "saxpy >= 90% of copy" goal.

One element per thread with 4-byte loads (the kernel numba-cuda's language expresses, and the one
bench/codegen.py compares) reaches about 82%; a grid-stride loop 86%; four elements per thread
88%; 16-byte float4 loads and stores 96-102%.  Usage: python bench/saxpy_ceiling.py
"""
import cupy as cp
N = 1 << 28
x = cp.random.rand(N, dtype=cp.float32); y = cp.random.rand(N, dtype=cp.float32)
out = cp.empty_like(x)
src = r'''
extern "C" __global__ void s1(const float* x, const float* y, float* o, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) o[i] = a * x[i] + y[i]; }
extern "C" __global__ void s_inplace(const float* x, float* y, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }
extern "C" __global__ void s_gs(const float* x, const float* y, float* o, float a, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) o[i] = a * x[i] + y[i]; }
extern "C" __global__ void s_v4(const float4* x, const float4* y, float4* o, float a, long n4) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n4) { float4 u = x[i], v = y[i]; o[i] = make_float4(a*u.x+v.x, a*u.y+v.y, a*u.z+v.z, a*u.w+v.w); } }
extern "C" __global__ void s_v4gs(const float4* x, const float4* y, float4* o, float a, long n4) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
    float4 u = x[i], v = y[i]; o[i] = make_float4(a*u.x+v.x, a*u.y+v.y, a*u.z+v.z, a*u.w+v.w); } }
extern "C" __global__ void s_cs(const float* x, const float* y, float* o, float a, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) __stcs(o + i, a * __ldcs(x + i) + __ldcs(y + i)); }
extern "C" __global__ void s_v4cs(const float4* x, const float4* y, float4* o, float a, long n4) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n4) { float4 u = __ldcs(x + i), v = __ldcs(y + i); __stcs(o + i, make_float4(a*u.x+v.x, a*u.y+v.y, a*u.z+v.z, a*u.w+v.w)); } }
extern "C" __global__ void s_x4(const float* x, const float* y, float* o, float a, long n) {
  long base = (blockIdx.x * (long)blockDim.x) * 4 + threadIdx.x;
  #pragma unroll
  for (int k = 0; k < 4; k++) { long i = base + k * blockDim.x; if (i < n) o[i] = a * x[i] + y[i]; } }
extern "C" __global__ void cp1(const float* x, float* o, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) o[i] = x[i]; }
extern "C" __global__ void cpv4(const float4* x, float4* o, long n4) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n4) o[i] = x[i]; }
'''
m = cp.RawModule(code=src)
def bench(f, reps=50):
    f(); cp.cuda.runtime.deviceSynchronize()
    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
    best = 1e9
    for _ in range(5):
        e0.record()
        for _ in range(reps): f()
        e1.record(); e1.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(e0, e1) / reps)
    return best
a = cp.float32(2.0); n = cp.int64(N); n4 = cp.int64(N // 4)
T = 256; B = (N + T - 1) // T; B4 = (N // 4 + T - 1) // T
sms = cp.cuda.Device().attributes["MultiProcessorCount"]
res = {}
res["copy_memcpy"] = (bench(lambda: cp.cuda.runtime.memcpyAsync(out.data.ptr, x.data.ptr, N * 4, 3, 0)), 2)
res["copy_kernel"] = (bench(lambda: m.get_function("cp1")((B,), (T,), (x, out, n))), 2)
res["copy_kernel_v4"] = (bench(lambda: m.get_function("cpv4")((B4,), (T,), (x, out, n4))), 2)
res["saxpy"] = (bench(lambda: m.get_function("s1")((B,), (T,), (x, y, out, a, n))), 3)
res["saxpy_inplace"] = (bench(lambda: m.get_function("s_inplace")((B,), (T,), (x, y, a, n))), 3)
for per in (4, 8, 16, 32):
    res[f"saxpy_gs_{per}perSM"] = (bench(lambda per=per: m.get_function("s_gs")((per * sms,), (T,), (x, y, out, a, n))), 3)
res["saxpy_v4"] = (bench(lambda: m.get_function("s_v4")((B4,), (T,), (x, y, out, a, n4))), 3)
for per in (8, 16, 32):
    res[f"saxpy_v4gs_{per}perSM"] = (bench(lambda per=per: m.get_function("s_v4gs")((per * sms,), (T,), (x, y, out, a, n4))), 3)
res["saxpy_cs"] = (bench(lambda: m.get_function("s_cs")((B,), (T,), (x, y, out, a, n))), 3)
res["saxpy_v4cs"] = (bench(lambda: m.get_function("s_v4cs")((B4,), (T,), (x, y, out, a, n4))), 3)
res["saxpy_x4"] = (bench(lambda: m.get_function("s_x4")(((N + 4 * T - 1) // (4 * T),), (T,), (x, y, out, a, n))), 3)
for T2 in (128, 512, 1024):
    res[f"saxpy_T{T2}"] = (bench(lambda T2=T2: m.get_function("s1")(((N + T2 - 1) // T2,), (T2,), (x, y, out, a, n))), 3)
copy_bw = max(2 * N * 4 / (res[k][0] * 1e-3) / 1e9 for k in ("copy_memcpy", "copy_kernel", "copy_kernel_v4"))
for k, (ms, words) in res.items():
    bw = words * N * 4 / (ms * 1e-3) / 1e9
    print(f"{k:24s} {ms:7.3f} ms {bw:7.0f} GB/s {100 * bw / copy_bw:5.1f}% of best copy")
