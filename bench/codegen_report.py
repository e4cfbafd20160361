"""bench/codegen.py's report: the Markdown table (with the saxpy bandwidth and matmul TFLOP/s
lines, the notebook kernels' rates and the geometric mean) and the bar chart of ratios against
CUDA C.
"""

from __future__ import annotations

import math
import sys

import numpy as np

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
    lines.append("")
    sax = next((r for r in result["rows"] if r["kernel"].startswith("saxpy") and
                r.get("copy_GBps")), None)
    if sax:
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
    names = {"gpureplace": "gpureplace", "cuda_c": "CUDA C", "numba_cuda": "numba-cuda"}
    for r in result["rows"]:
        rates = r.get("rates")
        if rates and any(w in rates for w in names):
            lines.append(f"{r['kernel']}: " + ", ".join(
                f"{names[w]} {rates[w]:,.4g} {rates['unit']}" for w in names if w in rates) + ".")
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

