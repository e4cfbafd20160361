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
