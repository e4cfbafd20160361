"""bench/codegen.py's kernels compile (and assemble) without a GPU: the benchmark cannot fail on
the GPU host because a kernel no longer compiles."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPECTED = {"saxpy", "saxpy_stride", "saxpy_vec4", "block_sum", "stencil5", "matmul_tiled"} | {
    f"{fn} {tag}{fast}" for fn in ("sin", "exp", "log") for tag in ("f32", "f64")
    for fast in ("", " fastmath")}
# The kernels people write in notebooks (bench/codegen_kernels_notebook.py)
NOTEBOOK = {"transpose_tiled", "histogram256", "warp_sum", "warp_scan", "nbody", "nbody fastmath",
            "nbody_rsqrt", "softmax_rows", "axpb_half", "axpb_bf16", "conv5x5"}
EXPECTED |= NOTEBOOK


def test_codegen_kernels_compile(tmp_path):
    out = tmp_path / "compile.json"
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               GPUREPLACE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("GPUREPLACE_BENCH_NVCC", None)       # the project must not depend on nvcc
    proc = subprocess.run([sys.executable, os.path.join(REPO, "bench", "codegen.py"),
                           "--check-compile", "--json", str(out)],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path),
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(out.read_text())
    rows = {r["kernel"]: r for r in report["kernels"]}
    assert set(rows) == EXPECTED
    bad = {k: r.get("error") for k, r in rows.items() if not r["ok"]}
    assert not bad, bad
    for name, r in rows.items():
        assert r["ptx_lines"] > 0, name
    # What the PTX must show for the comparison to mean anything:
    assert rows["block_sum"]["bar_sync"] > 0 and rows["block_sum"]["shared_ops"] > 0
    assert rows["matmul_tiled"]["bar_sync"] >= 2 and rows["matmul_tiled"]["shared_ops"] > 0
    assert rows["saxpy_vec4"]["wide_accesses"] == 3          # two 16-byte loads, one store
    assert rows["saxpy"]["wide_accesses"] == 0
    for fn in ("sin", "exp", "log"):           # fast math takes the approximate instructions
        assert rows[f"{fn} f32 fastmath"]["approx"] > 0, fn
    assert f"compiled {len(EXPECTED)}/{len(EXPECTED)}" in proc.stdout

    # The notebook kernels: the shape of the code their CUDA C twins compile to (nvcc -ptx).
    for name in NOTEBOOK:
        r = rows[name]
        assert r["local_ops"] == 0, name                     # nothing in local memory
        if r.get("registers") is not None:                  # (ptxas -v: found and run)
            assert r["spill_bytes"] == 0, name
    assert rows["transpose_tiled"]["bar_sync"] == 1
    assert rows["transpose_tiled"]["shared_ops"] == 8        # 4 stores and 4 loads per thread
    assert rows["histogram256"]["shared_atomics"] > 0
    assert rows["histogram256"]["global_atomics"] == 1       # one merge per bin
    assert rows["warp_sum"]["shfl"] == 8                     # both shuffle trees unrolled: 5 + 3
    assert rows["warp_scan"]["shfl"] == 10                   # 5 + 5
    for name in ("nbody", "nbody fastmath", "nbody_rsqrt"):  # float4 staged as 16-byte accesses
        assert rows[name]["shared_v4"] > 0, name
    # 1 / sqrt(d2): sqrt.rn and a division by default, rsqrt.approx in fast math (as
    # --use_fast_math); rsqrtf by name: rsqrt.approx in both
    assert rows["nbody"]["sqrt_rn"] > 0 and rows["nbody"]["rsqrt"] == 0
    assert rows["nbody fastmath"]["rsqrt"] > 0 and rows["nbody fastmath"]["sqrt_rn"] == 0
    assert rows["nbody_rsqrt"]["rsqrt"] > 0 and rows["nbody_rsqrt"]["sqrt_rn"] == 0
    assert rows["softmax_rows"]["bar_sync"] >= 2
    for name in ("axpb_half", "axpb_bf16"):                 # native half arithmetic, not float32
        assert rows[name]["half_ops"] >= 2, name
    assert rows["conv5x5"]["fma"] == 25 and rows["conv5x5"]["bar_sync"] == 1
