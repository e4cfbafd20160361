"""bench/codegen.py's benchmarks of the notebook kernels (codegen_kernels_notebook.py), one
function per kernel family, wired as codegen_runs.py's: each checks gpureplace and the CUDA C
against NumPy on a small size, times gpureplace, CUDA C and numba-cuda (when it runs the kernel)
on the full size, then checks the results against CUDA C.  Each row also records the rate of each
variant (GB/s, or pair interactions per second for n-body) under ``rates``.
"""

from __future__ import annotations

import math

import numpy as np

import gpureplace
from gpureplace import cuda

from codegen_harness import check_vs, compare, error_row, result_row
from codegen_kernels_notebook import (CONV_BLOCK, CONV_BX, CONV_BY, CONV_C, CONV_K, CONV_N,
                                      CONV_R, HALF_N, HALF_TPB, HISTOGRAM_C, HIST_BINS,
                                      HIST_N, NB_EPS2, NB_N, NB_TPB, NBODY_RSQRT_C, NBODY_SQRT_C,
                                      SCAN_TPB, SMX_COLS, SMX_ROWS, SMX_TPB, SOFTMAX_C, TR_N,
                                      TR_ROWS, TR_TILE, TRANSPOSE_C, WARP_N, WARP_SCAN_C,
                                      WARP_SUM_C, WARP_TPB, axpb_bf16, axpb_c, axpb_half, conv5x5,
                                      histogram256, nbody, nbody_rsqrt, softmax_rows,
                                      transpose_tiled, warp_scan, warp_sum)

WHO = ("gpureplace", "cuda_c", "numba_cuda")


def _add_numba(b, launches, kern, grid, block, args, label, fastmath=False):
    """numba-cuda's launch of the same kernel with ``args``, when it compiles and runs."""
    nk = b.numba_kernel(kern, fastmath=fastmath)
    if nk is None:
        return
    nl = nk[grid, block]
    nargs = b.nb_args(*args)
    fn = lambda: nl(*nargs)   # noqa: E731
    if b.try_first_launch(f"numba-cuda {label}", fn):
        launches["numba_cuda"] = fn


def _small(checks, who, got, ref, rtol, atol, what):
    ok, msg = compare(got, ref, rtol, atol)
    checks.append((ok, f"{who} vs NumPy ({what}): {msg}"))


def _vs_c(b, checks, outs, launches, rtol, atol):
    for who in ("gpureplace", "numba_cuda"):
        if who in launches:
            checks.append(check_vs(b.cp, outs[who], outs["cuda_c"], rtol, atol,
                                   f"{who} vs CUDA C"))


def _rates(times, amount, unit):
    """``{"unit": unit, who: amount / seconds}`` for each timed variant."""
    out = {"unit": unit}
    for who in WHO:
        if times.get(who):
            out[who] = amount / (times[who] * 1e-3)
    return out


# ---------------------------------------------------------------------------------------------
# Transpose


def bench_transpose(b):
    cp = b.cp
    raw = b.raw(TRANSPOSE_C, "transpose_tiled")
    block = (TR_TILE, TR_ROWS)

    def grid(n, m):
        return ((m + TR_TILE - 1) // TR_TILE, (n + TR_TILE - 1) // TR_TILE)

    checks = []
    ns, ms = 67, 45
    As = np.random.default_rng(11).random((ns, ms), dtype=np.float32)
    for who in ("gpureplace", "cuda_c"):
        o = cp.zeros((ms, ns), cp.float32)
        if who == "gpureplace":
            transpose_tiled[grid(ns, ms), block](cp.asarray(As), o)
        else:
            raw(grid(ns, ms), block, (cp.asarray(As), o, np.int32(ns), np.int32(ms)))
        _small(checks, who, cp.asnumpy(o), As.T, 0, 0, f"{ns}x{ms}")

    n = TR_N
    a = cp.random.random((n, n), dtype=cp.float32)
    outs = {k: cp.empty((n, n), cp.float32) for k in WHO}
    g = grid(n, n)
    gl = transpose_tiled[g, block]
    launches = {"gpureplace": lambda: gl(a, outs["gpureplace"]),
                "cuda_c": lambda: raw(g, block, (a, outs["cuda_c"], np.int32(n), np.int32(n)))}
    _add_numba(b, launches, transpose_tiled, g, block, (a, outs["numba_cuda"]), "transpose")
    times, meta = b.time_group(launches)
    checks.append(check_vs(cp, outs["cuda_c"], a.T, 0, 0, "CUDA C vs a.T"))
    _vs_c(b, checks, outs, launches, 0, 0)
    return [result_row(f"transpose f32 ({TR_TILE}x{TR_TILE + 1} shared tile, {TR_TILE}x{TR_ROWS} "
                       f"threads)", f"{n}x{n}", times, checks,
                       extra={"timing": meta, "rates": _rates(times, 2 * a.nbytes / 1e9, "GB/s")})]


# ---------------------------------------------------------------------------------------------
# Histogram


def bench_histogram(b):
    cp = b.cp
    raw = b.raw(HISTOGRAM_C, "histogram256")
    blocks = b.sm_count * 8
    checks = []
    ns = 100_003
    ds = np.random.default_rng(12).integers(0, 256, ns, dtype=np.uint8)
    ref = np.bincount(ds, minlength=HIST_BINS)
    for who in ("gpureplace", "cuda_c"):
        h = cp.zeros(HIST_BINS, cp.uint32)
        if who == "gpureplace":
            histogram256[16, HIST_BINS](cp.asarray(ds), h)
        else:
            raw((16,), (HIST_BINS,), (cp.asarray(ds), h, np.int64(ns)))
        _small(checks, who, cp.asnumpy(h), ref, 0, 0, f"n={ns}")

    n = HIST_N
    data = cp.random.randint(0, 256, n, dtype=cp.uint8)
    outs = {k: cp.zeros(HIST_BINS, cp.uint32) for k in WHO}
    gl = histogram256[blocks, HIST_BINS]
    launches = {"gpureplace": lambda: gl(data, outs["gpureplace"]),
                "cuda_c": lambda: raw((blocks,), (HIST_BINS,), (data, outs["cuda_c"],
                                                                np.int64(n)))}
    _add_numba(b, launches, histogram256, blocks, HIST_BINS, (data, outs["numba_cuda"]),
               "histogram256")
    times, meta = b.time_group(launches)
    # The timed launches accumulated: one launch each into a cleared histogram for the checks.
    for who, fn in launches.items():
        outs[who][...] = 0
        fn()
    cp.cuda.Device().synchronize()
    exact = cp.asnumpy(cp.bincount(data.astype(cp.int32), minlength=HIST_BINS))
    for who in launches:
        ok, msg = compare(cp.asnumpy(outs[who]), exact, 0, 0)
        checks.append((ok, f"{who} vs cupy.bincount: {msg}"))
    _vs_c(b, checks, outs, launches, 0, 0)
    return [result_row(f"histogram {HIST_BINS} bins u8 (shared atomics)", f"2^{int(math.log2(n))}",
                       times, checks, extra={"timing": meta, "blocks": blocks,
                                             "rates": _rates(times, n / 1e9, "GB/s")})]


# ---------------------------------------------------------------------------------------------
# Warp-shuffle reduction and scan


def bench_warp(b):
    cp = b.cp
    rows = []
    # -- reduction: one partial per block, as bench_reduction's block_sum
    raw = b.raw(WARP_SUM_C, "warp_sum")
    blocks = b.sm_count * 8
    checks = []
    ns = 100_000
    xs = np.random.default_rng(13).random(ns, dtype=np.float32)
    for who in ("gpureplace", "cuda_c"):
        p = cp.zeros(64, cp.float32)
        if who == "gpureplace":
            warp_sum[64, WARP_TPB](cp.asarray(xs), p)
        else:
            raw((64,), (WARP_TPB,), (cp.asarray(xs), p, np.int64(ns)))
        _small(checks, who, [float(cp.asnumpy(p).astype(np.float64).sum())],
               [float(np.sum(xs, dtype=np.float64))], 1e-5, 0, f"n={ns}")
    n = WARP_N
    x = cp.random.random(n, dtype=cp.float32)
    parts = {k: cp.zeros(blocks, cp.float32) for k in WHO}
    gl = warp_sum[blocks, WARP_TPB]
    launches = {"gpureplace": lambda: gl(x, parts["gpureplace"]),
                "cuda_c": lambda: raw((blocks,), (WARP_TPB,), (x, parts["cuda_c"], np.int64(n)))}
    _add_numba(b, launches, warp_sum, blocks, WARP_TPB, (x, parts["numba_cuda"]), "warp_sum")
    times, meta = b.time_group(launches)
    exact = float(x.astype(cp.float64).sum())
    for who in launches:
        ok, msg = compare([float(parts[who].astype(cp.float64).sum())], [exact], 1e-5, 0)
        checks.append((ok, f"{who} final sum vs float64 sum: {msg}"))
    _vs_c(b, checks, parts, launches, 1e-5, 0)
    rows.append(result_row("warp-shuffle reduction f32 (shfl_down_sync)", f"2^{int(math.log2(n))}",
                           times, checks, extra={"timing": meta, "blocks": blocks,
                                                 "rates": _rates(times, x.nbytes / 1e9, "GB/s")}))

    # -- inclusive scan of each block's SCAN_TPB elements
    raw = b.raw(WARP_SCAN_C, "warp_scan")
    checks = []
    ns = 5000                                     # not a multiple of the block: a partial block
    xs = np.random.default_rng(14).random(ns, dtype=np.float32)
    ref = np.concatenate([np.cumsum(xs[k:k + SCAN_TPB], dtype=np.float64)
                          for k in range(0, ns, SCAN_TPB)])
    sb = (ns + SCAN_TPB - 1) // SCAN_TPB
    for who in ("gpureplace", "cuda_c"):
        o = cp.zeros(ns, cp.float32)
        if who == "gpureplace":
            warp_scan[sb, SCAN_TPB](cp.asarray(xs), o)
        else:
            raw((sb,), (SCAN_TPB,), (cp.asarray(xs), o, np.int64(ns)))
        _small(checks, who, cp.asnumpy(o), ref, 1e-5, 0, f"n={ns}")
    outs = {k: cp.empty(n, cp.float32) for k in WHO}
    blocks = (n + SCAN_TPB - 1) // SCAN_TPB
    gl = warp_scan[blocks, SCAN_TPB]
    launches = {"gpureplace": lambda: gl(x, outs["gpureplace"]),
                "cuda_c": lambda: raw((blocks,), (SCAN_TPB,), (x, outs["cuda_c"], np.int64(n)))}
    _add_numba(b, launches, warp_scan, blocks, SCAN_TPB, (x, outs["numba_cuda"]), "warp_scan")
    times, meta = b.time_group(launches)
    _vs_c(b, checks, outs, launches, 1e-6, 0)
    rows.append(result_row(f"warp-shuffle block scan f32 (shfl_up_sync, {SCAN_TPB} per block)",
                           f"2^{int(math.log2(n))}", times, checks,
                           extra={"timing": meta,
                                  "rates": _rates(times, 2 * x.nbytes / 1e9, "GB/s")}))
    return rows


# ---------------------------------------------------------------------------------------------
# n-body


def _nbody_ref(p, eps2):
    p = p.astype(np.float64)
    r = p[None, :, :3] - p[:, None, :3]                  # r[i, j] = p_j - p_i
    d2 = (r * r).sum(-1) + eps2
    s = p[None, :, 3] * d2 ** -1.5
    return np.concatenate([(r * s[..., None]).sum(1), np.zeros((p.shape[0], 1))], axis=1)


def _bodies(n, seed):
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.uniform(-1, 1, (n, 3)), rng.uniform(0.5, 1.5, (n, 1))], axis=1)
    return p.astype(np.float32)


NBODY_VARIANTS = (("nbody f32 (1/sqrt)", nbody, NBODY_SQRT_C, "nbody", False),
                  ("nbody f32 (1/sqrt) fastmath", nbody, NBODY_SQRT_C, "nbody", True),
                  ("nbody f32 (rsqrt)", nbody_rsqrt, NBODY_RSQRT_C, "nbody_rsqrt", False))


def bench_nbody(b, only=None):
    rows = []
    for label, kern, src, cname, fast in NBODY_VARIANTS:
        if only and only not in label:
            continue
        try:
            rows.append(_bench_nbody(b, label, kern, src, cname, fast))
        except Exception as exc:
            rows.append(error_row(label, exc))
    return rows


def _bench_nbody(b, label, kern, src, cname, fast):
    """All-pairs accelerations; positions (x, y, z, mass) as float4 / float32x4 (cuda.as_vectors)
    -- numba-cuda is not run (gpureplace's vector arrays are not numba-cuda arrays)."""
    cp = b.cp
    gk = kern.with_context(gpureplace.fastmath_context) if fast else kern
    raw = b.raw(src, cname, fast=fast)
    eps2 = np.float32(NB_EPS2)
    checks = []
    ns = 1000                                      # not a multiple of the block
    ps = _bodies(ns, 15)
    ref = _nbody_ref(ps, float(eps2))
    scale = float(np.abs(ref).max())
    sb = (ns + NB_TPB - 1) // NB_TPB
    for who in ("gpureplace", "cuda_c"):
        pd = cp.asarray(ps).ravel()
        o = cp.zeros(4 * ns, cp.float32)
        if who == "gpureplace":
            gk[sb, NB_TPB](cuda.as_vectors(pd), cuda.as_vectors(o), eps2)
        else:
            raw((sb,), (NB_TPB,), (pd, o, eps2, np.int32(ns)))
        _small(checks, who, cp.asnumpy(o).reshape(ns, 4), ref, 1e-3, 1e-4 * scale, f"n={ns}")

    n = NB_N
    pos = cp.asarray(_bodies(n, 16)).ravel()
    outs = {k: cp.empty(4 * n, cp.float32) for k in ("gpureplace", "cuda_c")}
    blocks = (n + NB_TPB - 1) // NB_TPB
    gl = gk[blocks, NB_TPB]
    vpos, vout = cuda.as_vectors(pos), cuda.as_vectors(outs["gpureplace"])
    launches = {"gpureplace": lambda: gl(vpos, vout, eps2),
                "cuda_c": lambda: raw((blocks,), (NB_TPB,), (pos, outs["cuda_c"], eps2,
                                                             np.int32(n)))}
    times, meta = b.time_group(launches)
    scale = float(cp.abs(outs["cuda_c"]).max())
    _vs_c(b, checks, outs, launches, 1e-3, 1e-4 * scale)
    rates = _rates(times, n * n / 1e9, "G pair interactions/s")
    return result_row(label, f"2^{int(math.log2(n))} bodies", times, checks,
                      b.raw_notes.get(cname), {"timing": meta, "rates": rates,
                                               "cuda_c_inverse_sqrt": "1.0f / sqrtf(d2)"
                                               if cname == "nbody" else "rsqrtf(d2)"})


# ---------------------------------------------------------------------------------------------
# Row softmax


def bench_softmax(b):
    cp = b.cp
    raw = b.raw(SOFTMAX_C, "softmax_rows")
    checks = []
    rs, ms = 37, 1000
    As = (np.random.default_rng(17).standard_normal((rs, ms)) * 4).astype(np.float32)
    e = np.exp(As.astype(np.float64) - As.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    for who in ("gpureplace", "cuda_c"):
        o = cp.zeros((rs, ms), cp.float32)
        if who == "gpureplace":
            softmax_rows[rs, SMX_TPB](cp.asarray(As), o)
        else:
            raw((rs,), (SMX_TPB,), (cp.asarray(As), o, np.int32(ms)))
        _small(checks, who, cp.asnumpy(o), ref, 1e-5, 0, f"{rs}x{ms}")

    rows, m = SMX_ROWS, SMX_COLS
    a = (cp.random.standard_normal((rows, m), dtype=cp.float32) * 4).astype(cp.float32)
    outs = {k: cp.empty((rows, m), cp.float32) for k in WHO}
    gl = softmax_rows[rows, SMX_TPB]
    launches = {"gpureplace": lambda: gl(a, outs["gpureplace"]),
                "cuda_c": lambda: raw((rows,), (SMX_TPB,), (a, outs["cuda_c"], np.int32(m)))}
    _add_numba(b, launches, softmax_rows, rows, SMX_TPB, (a, outs["numba_cuda"]),
               "softmax_rows")
    times, meta = b.time_group(launches)
    _vs_c(b, checks, outs, launches, 1e-5, 0)
    return [result_row("row softmax f32 (one block per row)", f"{rows}x{m}", times, checks,
                       extra={"timing": meta,
                              "rates": _rates(times, 2 * a.nbytes / 1e9, "GB/s")})]


# ---------------------------------------------------------------------------------------------
# float16 and bfloat16 a * x + b


def _bf16_dtype():
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


def _as_f32(cp, arr, kind):
    """A float32 copy of a float16 / bfloat16 device array (bfloat16: its bits, shifted)."""
    if kind == "f16":
        return arr.astype(cp.float32)
    return (arr.view(cp.uint16).astype(cp.uint32) << 16).view(cp.float32)


def bench_half(b):
    rows = []
    for kind in ("f16", "bf16"):
        try:
            rows.append(_bench_axpb(b, kind))
        except Exception as exc:
            rows.append(error_row(f"a*x+b {kind}", exc))
    return rows


def _bench_axpb(b, kind):
    cp = b.cp
    dt = np.dtype(np.float16) if kind == "f16" else _bf16_dtype()
    kern = axpb_half if kind == "f16" else axpb_bf16
    src, cname = axpb_c(kind)
    raw = b.raw(src, cname)
    a, c = dt.type(1.5), dt.type(0.25)
    ca, cc = (np.asarray(v, dt).view(np.uint16)[()] for v in (a, c))   # CUDA C: the bits
    ulp = 2.0 ** -10 if kind == "f16" else 2.0 ** -7
    rtol = 2 * ulp                 # one rounding apart (a * x + b rounded once or twice)
    checks = []
    ns = 1000
    xs = (np.random.default_rng(18).random(ns) + 1).astype(dt)
    ref = (float(a) * xs.astype(np.float64) + float(c)).astype(dt).astype(np.float64)
    for who in ("gpureplace", "cuda_c"):
        xd = cp.asarray(xs.view(np.uint16)).view(dt)
        o = cp.zeros(ns, cp.uint16).view(dt)
        if who == "gpureplace":
            kern[(ns + HALF_TPB - 1) // HALF_TPB, HALF_TPB](a, xd, c, o)
        else:
            raw(((ns + HALF_TPB - 1) // HALF_TPB,), (HALF_TPB,), (ca, xd, cc, o, np.int64(ns)))
        _small(checks, who, cp.asnumpy(_as_f32(cp, o, kind)), ref, rtol, 0, f"n={ns}")

    n = HALF_N
    # x in [1, 2): float32 values cut to the type (bfloat16: the upper 16 bits)
    x32 = cp.random.random(n, dtype=cp.float32) + 1
    x = (x32.astype(cp.float16) if kind == "f16" else
         (x32.view(cp.uint32) >> 16).astype(cp.uint16).view(dt))
    del x32
    outs = {k: cp.empty(n, cp.uint16).view(dt) for k in WHO}
    blocks = (n + HALF_TPB - 1) // HALF_TPB
    gl = kern[blocks, HALF_TPB]
    launches = {"gpureplace": lambda: gl(a, x, c, outs["gpureplace"]),
                "cuda_c": lambda: raw((blocks,), (HALF_TPB,), (ca, x, cc, outs["cuda_c"],
                                                               np.int64(n)))}
    _add_numba(b, launches, kern, blocks, HALF_TPB, (a, x, c, outs["numba_cuda"]),
               f"a*x+b {kind}")
    times, meta = b.time_group(launches)
    f32 = {who: _as_f32(cp, outs[who], kind) for who in launches}
    _vs_c(b, checks, f32, launches, rtol, 0)
    name = "float16" if kind == "f16" else "bfloat16"
    return result_row(f"a*x+b {name}", f"2^{int(math.log2(n))}", times, checks,
                      b.raw_notes.get(cname),
                      {"timing": meta, "rates": _rates(times, 2 * x.nbytes / 1e9, "GB/s")})


# ---------------------------------------------------------------------------------------------
# 5 x 5 convolution


def _conv_ref(a, w):
    n, m = a.shape
    p = np.zeros((n + 2 * CONV_R, m + 2 * CONV_R))
    p[CONV_R:CONV_R + n, CONV_R:CONV_R + m] = a
    out = np.zeros((n, m))
    for dy in range(CONV_K):
        for dx in range(CONV_K):
            out += float(w[dy * CONV_K + dx]) * p[dy:dy + n, dx:dx + m]
    return out


def bench_conv(b):
    cp = b.cp
    raw = b.raw(CONV_C, "conv5x5")
    w_host = np.random.default_rng(19).uniform(-1, 1, CONV_K * CONV_K).astype(np.float32)
    w = cp.asarray(w_host)

    def grid(n, m):
        return ((m + CONV_BX - 1) // CONV_BX, (n + CONV_BY - 1) // CONV_BY)

    checks = []
    ns, ms = 67, 45
    As = np.random.default_rng(20).random((ns, ms), dtype=np.float32)
    ref = _conv_ref(As.astype(np.float64), w_host)
    for who in ("gpureplace", "cuda_c"):
        o = cp.zeros((ns, ms), cp.float32)
        if who == "gpureplace":
            conv5x5[grid(ns, ms), CONV_BLOCK](cp.asarray(As), w, o)
        else:
            raw(grid(ns, ms), CONV_BLOCK, (cp.asarray(As), w, o, np.int32(ns), np.int32(ms)))
        _small(checks, who, cp.asnumpy(o), ref, 1e-4, 1e-5, f"{ns}x{ms}")

    n = CONV_N
    a = cp.random.random((n, n), dtype=cp.float32)
    outs = {k: cp.empty((n, n), cp.float32) for k in WHO}
    g = grid(n, n)
    gl = conv5x5[g, CONV_BLOCK]
    launches = {"gpureplace": lambda: gl(a, w, outs["gpureplace"]),
                "cuda_c": lambda: raw(g, CONV_BLOCK, (a, w, outs["cuda_c"], np.int32(n),
                                                      np.int32(n)))}
    _add_numba(b, launches, conv5x5, g, CONV_BLOCK, (a, w, outs["numba_cuda"]), "conv5x5")
    times, meta = b.time_group(launches)
    _vs_c(b, checks, outs, launches, 1e-5, 1e-5)
    return [result_row("5x5 convolution f32 (halo tile in shared memory, filter argument)",
                       f"{n}x{n}", times, checks,
                       extra={"timing": meta,
                              "rates": _rates(times, 2 * a.nbytes / 1e9, "GB/s")})]


NOTEBOOK_BENCHES = [("transpose", bench_transpose), ("histogram", bench_histogram),
                    ("warp", bench_warp), ("nbody", bench_nbody), ("softmax", bench_softmax),
                    ("half", bench_half), ("conv", bench_conv)]
