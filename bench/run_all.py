"""Run every benchmark in its own process and collect one results folder.

    python bench/run_all.py --out results/  [--md bench/RESULTS.md] [--skip NAME ...]
                                            [--timeout 900] [--codegen-args "--budget 0.4"]

The folder gets, per benchmark, ``<name>.log`` (stdout + stderr) and ``<name>.json``; ``codegen.png``
(ratio bars) and ``launch.png`` when matplotlib imports; ``summary.json`` (everything, with exit
codes and wall times); and ``RESULTS.md`` (one Markdown report, also written to ``--md``).
A benchmark that fails, times out or prints something unexpected is recorded as such; the others
still run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_script(name, argv, out_dir, timeout):
    """Run bench/<script> with ``argv``; returns (record, stdout)."""
    log_path = os.path.join(out_dir, f"{name}.log")
    cmd = [sys.executable, os.path.join(HERE, argv[0]), *argv[1:]]
    t0 = time.perf_counter()
    rec = {"name": name, "command": " ".join(shlex.quote(c) for c in cmd)}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=REPO,
                              timeout=timeout)
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        stderr += f"\n[run_all: timed out after {timeout} s]"
        rc = "timeout"
    except Exception as exc:             # could not even start it
        stdout, stderr, rc = "", f"[run_all: {type(exc).__name__}: {exc}]", "not started"
    rec["returncode"] = rc
    rec["wall_s"] = round(time.perf_counter() - t0, 2)
    with open(log_path, "w") as fh:
        fh.write(f"$ {rec['command']}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}\n")
    rec["log"] = os.path.basename(log_path)
    rec["stderr_tail"] = stderr.strip().splitlines()[-8:]
    print(f"{name}: rc={rc} in {rec['wall_s']} s", file=sys.stderr)
    return rec, stdout


# -- parsers for the benchmarks' outputs -------------------------------------------------------

def parse_compile_latency(stdout):
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in compile_latency.py's output")


def parse_cell_hook(stdout):
    rows, array_rows = [], []
    for line in stdout.splitlines():
        m = re.match(r"\s*(\d+)\s+(\d+)\s+([0-9.]+)\s*$", line)
        if m:
            rows.append({"tracked": int(m.group(1)), "namespace": int(m.group(2)),
                         "ms_per_cell": float(m.group(3))})
        m = re.match(r"\s*(\d+)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s*$", line)
        if m:
            array_rows.append({"tracked": int(m.group(1)), "arrays": int(m.group(2)),
                               "array_bytes": int(m.group(3)), "ms_per_cell": float(m.group(4))})
    if not rows:
        raise ValueError("no result rows in cell_hook.py's output")
    return {"rows": rows, "array_rows": array_rows}


# -- Markdown --------------------------------------------------------------------------------

def md_launch(data):
    lines = ["| launcher | µs / launch | vs CuPy RawKernel |", "|---|---:|---:|"]
    for name, us in data["us_per_launch"].items():
        lines.append(f"| {name} | {us:.2f} | {data['ratio_to_cupy'][name]:.2f}x |")
    sweep = data.get("by_array_count")
    if sweep:
        lines += ["", "Launch cost by number of array arguments (each kernel also takes a scalar), "
                      "µs, and the ratio to CuPy RawKernel:", "",
                  "| arrays | CuPy RawKernel | gpureplace | numba-cuda | Triton |",
                  "|---:|---:|---:|---:|---:|"]
        for n, r in sweep.items():
            cells = []
            for who in ("gpureplace", "numba_cuda", "triton"):
                v = r.get(who)
                cells.append(f"{v:.2f} ({v / r['cupy']:.2f}x)" if v else "n/a")
            lines.append(f"| {n} | {r['cupy']:.2f} | " + " | ".join(cells) + " |")
    own = data.get("on_a_non_blocking_stream_us")
    if own:
        base = own.get("cupy_rawkernel")
        lines += ["", "The same launches on a non-blocking stream of their own:", "",
                  "| launcher | µs / launch | vs CuPy RawKernel |", "|---|---:|---:|"]
        for name, us in own.items():
            lines.append(f"| {name} | {us:.2f} | {us / base:.2f}x |")
    tr = data.get("tracked_bindings_ratio_to_cupy")
    if tr:
        lines.append(f"\nTracked bindings, measured against CuPy in the same rounds: "
                     f"{tr['untracked']:.2f}x CuPy with none, {tr['with_1000_tracked']:.2f}x with "
                     f"1,000 (a cached launch compares one integer, whatever is tracked).")
    return "\n".join(lines)


def md_compile_latency(data):
    lines = ["| compiler | first kernel compiled ms | first kernel's result ms | second kernel ms "
             "| recompile after a callee changed ms |", "|---|---:|---:|---:|---:|"]
    for name, r in data.items():
        if isinstance(r, dict) and "first_ms" in r:
            re_ms = r.get("recompile_after_callee_redefinition_ms")
            re_txt = f"{re_ms:.1f}" if re_ms is not None else "cannot notice the change"
            res_ms = r.get("first_result_ms")
            res_txt = f"{res_ms:.1f}" if res_ms is not None else "n/a"
            lines.append(f"| {name} | {r['first_ms']:.1f} | {res_txt} | {r['second_ms']:.1f} | "
                         f"{re_txt} |")
    lines.append("\nFirst kernel compiled: from a fresh process's start through imports and the "
                 "compile (numba-cuda and CuPy also load the module, which creates the CUDA "
                 "context; Triton compiles at its first launch, so its two columns are one). "
                 "First kernel's result: from the start to the first launch's "
                 "completion, on a 1,024-element array.")
    if "gpureplace_warm_start_ms" in data:
        peers = data.get("peer_warm_start_ms") or {}
        lines.append(f"\nWarm start from the disk cache in a new process (imports and CUDA start-up "
                     f"excluded): gpureplace {data['gpureplace_warm_start_ms']:.1f} ms"
                     + "".join(f", {k.replace('_', '-')} {v:.1f} ms" for k, v in peers.items())
                     + " (Triton: its first launch, where it looks its cache up).")
    lines.append("\nCold runs: every tool's disk cache empty or off and the driver's PTX cache "
                 "off (CUDA_CACHE_DISABLE=1).")
    return "\n".join(lines)


def md_cell_hook(data):
    lines = ["| tracked bindings | namespace size | ms / cell |", "|---:|---:|---:|"]
    for r in data["rows"]:
        lines.append(f"| {r['tracked']} | {r['namespace']} | {r['ms_per_cell']:.3f} |")
    if data.get("array_rows"):
        lines += ["", "| tracked bindings | of which global arrays | bytes each | ms / cell |",
                  "|---:|---:|---:|---:|"]
        for r in data["array_rows"]:
            lines.append(f"| {r['tracked']} | {r['arrays']} | {r['array_bytes']} | "
                         f"{r['ms_per_cell']:.3f} |")
    return "\n".join(lines)


def write_launch_png(data, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        print("launch.png: skipped (matplotlib):", exc, file=sys.stderr)
        return False
    names = list(data["us_per_launch"])
    vals = [data["us_per_launch"][n] for n in names]
    sweep = data.get("by_array_count") or {}
    fig, axes = plt.subplots(1, 2 if sweep else 1, figsize=(13 if sweep else 8,
                                                          0.45 * len(names) + 1.5),
                             gridspec_kw={"width_ratios": [3, 2]} if sweep else None)
    ax = axes[0] if sweep else axes
    ax.barh(names, vals, color=["tab:green" if n.startswith("gpureplace") else "tab:gray"
                                for n in names])
    ax.invert_yaxis()
    ax.set_xlabel("µs per cached launch (lower is better)")
    ax.set_title("Launch overhead (1 array + 1 scalar)")
    if sweep:
        counts = [int(n) for n in sweep]
        ax2 = axes[1]
        for who, color, label in (("cupy", "tab:gray", "CuPy RawKernel"),
                                  ("gpureplace", "tab:green", "gpureplace"),
                                  ("numba_cuda", "tab:blue", "numba-cuda"),
                                  ("triton", "tab:orange", "Triton")):
            pts = [(n, sweep[str(n)][who]) for n in counts if sweep[str(n)].get(who)]
            if pts:
                ax2.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color,
                         label=label)
        ax2.set_xlabel("array arguments (each kernel also takes a scalar)")
        ax2.set_ylabel("µs per launch")
        ax2.set_xticks(counts)
        ax2.set_ylim(bottom=0)
        ax2.set_yscale("symlog", linthresh=10)
        ax2.legend()
        ax2.set_title("By number of arrays")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _failure_md(rec):
    tail = "\n".join(rec.get("stderr_tail") or ["(no stderr)"])
    return (f"**failed** (exit {rec['returncode']}, see `{rec['log']}`):\n\n```\n{tail}\n```")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="results folder (created)")
    ap.add_argument("--md", help="also write the combined Markdown report here "
                                 "(e.g. bench/RESULTS.md)")
    ap.add_argument("--skip", nargs="*", default=[],
                    choices=["launch", "compile_latency", "cell_hook", "codegen"])
    ap.add_argument("--timeout", type=float, default=900, help="seconds per benchmark")
    ap.add_argument("--codegen-args", default="", help="extra arguments for codegen.py")
    args = ap.parse_args(argv)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)

    summary = {"started": datetime.datetime.now().isoformat(timespec="seconds"),
               "host": platform.node(), "python": sys.version.split()[0], "benchmarks": {}}
    sections = []

    def record(name, rec, data=None, error=None):
        rec = dict(rec)
        if error:
            rec["parse_error"] = error
        rec["data"] = data
        summary["benchmarks"][name] = rec
        if data is not None:
            with open(os.path.join(out, f"{name}.json"), "w") as fh:
                json.dump(data, fh, indent=1)

    # launch overhead
    if "launch" not in args.skip:
        path = os.path.join(out, "launch.json")
        rec, _ = run_script("launch", ["launch.py", "--json", path], out, args.timeout)
        body = None
        try:
            with open(path) as fh:
                data = json.load(fh)
            record("launch", rec, data)
            body = md_launch(data)
            if write_launch_png(data, os.path.join(out, "launch.png")):
                body += "\n\n![launch overhead](launch.png)"
        except Exception as exc:
            record("launch", rec, error=f"{type(exc).__name__}: {exc}")
            body = _failure_md(rec)
        sections.append(("Launch overhead (bench/launch.py)", body))

    def stdout_section(name, script, parse, render, title):
        """A benchmark whose results are parsed from its standard output."""
        if name in args.skip:
            return
        rec, stdout = run_script(name, [script], out, args.timeout)
        try:
            if rec["returncode"] != 0:
                raise RuntimeError(f"exit {rec['returncode']}")
            data = parse(stdout)
            record(name, rec, data)
            body = render(data)
        except Exception as exc:
            record(name, rec, error=f"{type(exc).__name__}: {exc}")
            body = _failure_md(rec)
        sections.append((title, body))

    stdout_section("compile_latency", "compile_latency.py", parse_compile_latency,
                   md_compile_latency, "Compile latency (bench/compile_latency.py)")
    stdout_section("cell_hook", "cell_hook.py", parse_cell_hook, md_cell_hook,
                   "Cell-hook cost (bench/cell_hook.py)")

    # generated-code throughput
    if "codegen" not in args.skip:
        jpath, mpath, ppath = (os.path.join(out, f) for f in
                               ("codegen.json", "codegen.md", "codegen.png"))
        for stale in (jpath, mpath, ppath):
            if os.path.exists(stale):
                os.remove(stale)
        rec, _ = run_script("codegen", ["codegen.py", "--json", jpath, "--md", mpath, "--png",
                                        ppath, *shlex.split(args.codegen_args)], out,
                            args.timeout)
        try:
            with open(jpath) as fh:
                data = json.load(fh)
            with open(mpath) as fh:
                body = fh.read().strip()
            record("codegen", rec, data)
            body = (f"Device: {data.get('device')} ({data.get('arch')}); CUDA C via NVRTC "
                    f"{data.get('cuda_c_options')} / fast math {data.get('cuda_c_fast_options')}."
                    f"\n\n{body}")
            if rec["returncode"] == 2:
                body += "\n\n**Some results did not match** (see `codegen.log`)."
            elif rec["returncode"] != 0:
                body += f"\n\n(exit {rec['returncode']}, see `codegen.log`)"
            if os.path.exists(ppath):
                body += "\n\n![generated-code throughput](codegen.png)"
        except Exception as exc:
            record("codegen", rec, error=f"{type(exc).__name__}: {exc}")
            body = _failure_md(rec)
        sections.append(("Generated-code throughput (bench/codegen.py)", body))

    summary["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    with open(os.path.join(out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1, default=str)

    md = ["# gpureplace benchmark results\n",
          f"Run {summary['started']} on {summary['host']} (Python {summary['python']}); "
          f"produced by `python bench/run_all.py`.\n"]
    for title, body in sections:
        md.append(f"## {title}\n\n{body}\n")
    text = "\n".join(md)
    with open(os.path.join(out, "RESULTS.md"), "w") as fh:
        fh.write(text)
    if args.md:
        # Images are relative to the results folder: point them there from the other location.
        md_dir = os.path.dirname(os.path.abspath(args.md))
        os.makedirs(md_dir, exist_ok=True)
        rel = os.path.relpath(out, md_dir)
        with open(args.md, "w") as fh:
            fh.write(re.sub(r"\]\((\w+\.png)\)", lambda m: f"]({rel}/{m.group(1)})", text))
    print(text)
    failed = [n for n, r in summary["benchmarks"].items()
              if r["returncode"] != 0 or r.get("parse_error")]
    if failed:
        print("not clean:", ", ".join(failed), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
