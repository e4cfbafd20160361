"""bench/codegen.py's benchmarks, one function per kernel family: each builds its arrays, checks
gpureplace and the CUDA C against NumPy on a small size, times gpureplace, CUDA C and numba-cuda
on the full size (codegen_harness.Bench.time_group) and checks the results against CUDA C.  The
notebook kernels' benchmarks are in codegen_runs_notebook.py; ``BENCHES`` lists them all.
"""

from __future__ import annotations

import math

import numpy as np

import gpureplace
from gpureplace import cuda

from codegen_harness import check_vs, compare, error_row, free_memory, result_row
from codegen_kernels import (BLOCK_SUM_C, CHAINS, CUDA_C_FAST_OPTIONS, CUDA_C_OPTIONS, MATMUL_C,
                             MM_N, RED_N, RED_TPB, SAXPY_C, SAXPY_N, SAXPY_STRIDE_C, SAXPY_VEC4_C,
                             STENCIL_BLOCK, STENCIL_C, STENCIL_N, TILE, TPB, TRANS_N, TRANS_REPS,
                             block_sum, chain_c, matmul_tiled, saxpy, saxpy_stride, saxpy_vec4,
                             stencil5)
from codegen_runs_notebook import NOTEBOOK_BENCHES


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
        checks.append(compare(cp.asnumpy(o), ref, 1e-6, 1e-6))
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
            checks.append(check_vs(cp, outs[who], outs["cuda_c"], 1e-6, 1e-6,
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
        checks.append(check_vs(cp, outs[who], outs["cuda_c"], 1e-6, 1e-6,
                               f"{who} vs CUDA C"))
    extra["timing"] = meta
    size = f"2^{int(math.log2(n))}"
    vec4 = {"gpureplace": times["vec4_gpureplace"], "cuda_c": times["vec4_cuda_c"]}
    vec4_extra = {f"{k}_{w}": extra[f"{w}_{k}"] for w in ("vec4_gpureplace", "vec4_cuda_c")
                  for k in ("GBps", "pct_of_copy")}
    return [result_row("saxpy f32", size, times, checks, extra=extra),
            result_row("saxpy f32, 16-byte accesses (float4 / cuda.as_vectors)", size, vec4,
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
                    rows.append(error_row(label, exc))
        del x
        free_memory(cp)
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
        ok, msg = compare(cp.asnumpy(o), ref, rtol, 0)
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
            checks.append(check_vs(cp, outs[who], outs["cuda_c"], rtol, 0, f"{who} vs CUDA C"))
    notes = b.raw_notes.get(cname)
    return result_row(label, f"2^{int(math.log2(n))} x {TRANS_REPS}", times, checks, notes,
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
        ok, msg = compare([got], [ref], 1e-5, 0)
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
        ok, msg = compare([sums[who]], [exact], 1e-5, 0)
        checks.append((ok, f"{who} final sum vs float64 sum: {msg}"))
    for who in ("gpureplace", "numba_cuda"):
        if who in launches:
            ok, msg = compare(cp.asnumpy(parts[who]), cp.asnumpy(parts["cuda_c"]), 1e-5, 0)
            checks.append((ok, f"{who} partials vs CUDA C: {msg}"))
    extra = {"timing": meta, "blocks": blocks, "final_sums": sums, "float64_sum": exact}
    for who in times:
        extra[f"{who}_GBps"] = x.nbytes / times[who] / 1e6
    return [result_row("block reduction f32", f"2^{int(math.log2(n))}", times, checks, extra=extra)]


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
        ok, msg = compare(cp.asnumpy(o), ref, 1e-5, 1e-6)
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
            checks.append(check_vs(cp, outs[who], outs["cuda_c"], 1e-6, 1e-6,
                                   f"{who} vs CUDA C"))
    extra = {"timing": meta}
    for who in times:
        extra[f"{who}_GBps"] = 2 * a.nbytes / times[who] / 1e6
    return [result_row("5-point stencil f32", f"{n}x{n}", times, checks, extra=extra)]


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
        ok, msg = compare(cp.asnumpy(o), ref, 1e-4, 0)
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
            checks.append(check_vs(cp, outs[who], outs["cuda_c"], 1e-4, 0, f"{who} vs CUDA C"))
    extra = {"timing": meta}
    for who in times:
        extra[f"{who}_TFLOPs"] = 2 * n ** 3 / times[who] / 1e9
    return [result_row(f"tiled matmul f32 ({TILE}x{TILE} tiles)", f"{n}^2", times, checks,
                       extra=extra)]


# (key, benchmark): ``--only S`` runs those whose key contains S, and from those in ROW_FILTERED
# (called as fn(b, only)) the rows whose label contains S.
BENCHES = [("saxpy", bench_saxpy), ("chains", bench_chains), ("reduction", bench_reduction),
           ("stencil", bench_stencil), ("matmul", bench_matmul)] + NOTEBOOK_BENCHES
ROW_FILTERED = ("chains", "nbody")
