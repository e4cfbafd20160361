"""numba-cuda's own ``tests/cudapy`` suite, run against gpureplace with ``numba.cuda`` meaning
``gpureplace.cuda`` (issue 16's measure of "port by changing one import").

    python compat/numba_cuda/run.py --source PATH/TO/numba-cuda --backend simulator \
        --out compat/numba_cuda/results/simulator.json
    python compat/numba_cuda/run.py --clone ...          # git clone numba-cuda into a temp dir
    python compat/numba_cuda/run.py --suite doc_examples ...   # its documentation's examples

numba-cuda's files are copied into a temporary folder at measure time and never kept here; only
this harness and the numbers it writes are.  Each test file runs in a process of its own (a
crash, hang or leaked state stays in its file) with ``cudapy_shim`` installed by a ``conftest.py``.

Per file the report gives passed, failed, errors, skipped and "not applicable": a test that fails
only because it uses numba-cuda's internals (its NVVM pipeline, driver bindings, compiler passes
-- any module of numba-cuda's source tree that is not part of its API; the shim hands out
stand-ins that raise ``cudapy_shim.InternalModule`` when used) is not applicable, and so is every
test of a file that cannot even be imported for that reason; the note names the internals.  A
test that uses numba-cuda API gpureplace lacks (``MissingAPI``) fails.  A test skipped because it
checks numba-cuda's NVVM output with FileCheck is a skip.  A test that fails because gpureplace
differs on purpose (``DELIBERATE``: each with its reason, e.g. PTX that LLVM spells otherwise, a
float16 truncated as NumPy truncates, a limitation of numba-cuda's own simulator) is counted as a
deliberate difference, outside the share.  A test numba-cuda expects to fail
(``expectedFailure``, for a limitation of its own) that passes is counted as passed.  The share
that passes is passed / (passed + failed + errors).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = Path("numba_cuda", "numba", "cuda", "tests")
#: numba-cuda's test folders the harness runs: its kernel-language suite, and the examples of its
#: documentation (matmul, Laplace, Monte Carlo, random numbers, cooperative groups, ufuncs, ...)
SUITES = ("cudapy", "doc_examples")
CONFTEST = """\
import sys
sys.path.insert(0, {here!r})
import cudapy_shim
cudapy_shim.install()
"""


def _source(args):
    if args.source:
        root = Path(args.source)
    else:
        root = Path(tempfile.mkdtemp(prefix="numba-cuda-"))
        subprocess.run(["git", "clone", "-q", "--depth", "1",
                        "https://github.com/NVIDIA/numba-cuda", str(root)], check=True)
    tests = root / TESTS / args.suite
    if not tests.is_dir():
        sys.exit(f"run.py: {tests} is not numba-cuda's {args.suite} test folder (give --source "
                 f"the root of a numba-cuda checkout)")
    commit = args.commit or subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True).stdout.strip() or "unknown"
    return tests, commit


def _module_names(package):
    """Dotted names of every module and package under numba-cuda's ``numba/cuda`` folder."""
    names = set()
    for path in package.rglob("*"):
        rel = path.relative_to(package.parent.parent)          # numba/cuda/...
        if path.is_dir() and not path.name.startswith("__"):
            names.add(".".join(rel.parts))
        elif path.suffix == ".py" and path.name != "__init__.py":
            names.add(".".join(rel.with_suffix("").parts))
    return sorted(names)


def _prepare(tests, work):
    modules = _module_names(tests.parents[1])
    if len(modules) < 20:
        sys.exit(f"run.py: {tests.parents[1]} holds only tests; give --source the root of a "
                 f"whole numba-cuda checkout (its modules tell API from internals)")
    (work / "modules.txt").write_text("\n".join(modules) + "\n")
    dest = work / "cudapy"
    shutil.copytree(tests, dest, ignore=shutil.ignore_patterns("__pycache__"))
    if (tests.parent / "data").is_dir():      # the suite's data files (jitlink.ptx, *.cu)
        shutil.copytree(tests.parent / "data", work / "data",
                        ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "__init__.py").write_text("")     # numba-cuda's loads its whole test suite
    (work / "conftest.py").write_text(CONFTEST.format(here=str(HERE)))
    # Python processes the tests start (``python -c "from numba import cuda ..."``) see the
    # same numba.cuda: a sitecustomize on their PYTHONPATH installs the shim too
    site = work / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(CONFTEST.format(here=str(HERE)))
    return sorted(p for p in dest.glob("test_*.py"))


_INTERNAL = re.compile(r"InternalModule: (numba\.cuda[\w.]*) is numba-cuda's internals")
_INTERNAL_MODULE = re.compile(r"^numba\.cuda\.(?:core\.|cudadrv\.|typeconv\.)?\w+")


#: Tests that fail because gpureplace differs on purpose, each with the reason: they are counted
#: as "deliberate" (outside the share that passes), never silently as passed.  A test listed here
#: that passes counts as passed.
_PTX_ATOM = ("LLVM's NVPTX back end writes the global state space, atom.global.add.f64, where "
             "NVVM writes the generic atom.add.f64: the same operation")
_NVVM_DEBUG = ("numba-cuda warns that NVVM may crash with debug=True and optimisation; "
               "gpureplace's LLVM back end compiles both together, so there is nothing to warn of")
_REINTERPRET = ("a kernel given a signature takes arrays of its dtypes only (an int32 array "
                "for uint32[:] is refused with the signatures it has); numba-cuda launches its one "
                "overload without checking and reinterprets the memory")
_NUMPY_STRIDES = ("the transpose of a strided view, and an array like it, have NumPy's strides on "
                  "the GPU as in the simulator (CuPy's views); numba-cuda's GPU arrays give "
                  "another layout there (its issue #4974), its simulator NumPy's")
_LTOIR = ("asks for LTO-IR (output='ltoir'), NVVM's bitcode for nvJitLink: gpureplace compiles "
          "with LLVM's NVPTX back end, without NVVM, and emits PTX (whose device functions LLVM "
          "has already optimised together with the kernel)")
_CACHE_PLACE = ("counts the cache files beside the module (__pycache__); gpureplace keeps "
                "every kernel in one disk cache of its own (GPUREPLACE_CACHE_DIR), always on")
_CACHE_BY_CONTENT = ("expects a miss for a module copied to a new folder: gpureplace's disk "
                     "cache is keyed by what defines the kernel (its code and what it reads), "
                     "so the same kernel is a hit wherever its file lies")
_CACHE_DEVICE_ARRAYS = ("numba-cuda cannot cache a kernel that reads a device array global; "
                        "gpureplace compiles it (the array's contents read from device memory, "
                        "tracked), so no PicklingError comes")
DELIBERATE = {
    "test_caching.py::CUDACachingTest::test_caching": _CACHE_PLACE,
    "test_caching.py::CUDACachingTest::test_many_locals": _CACHE_PLACE,
    "test_caching.py::CUDACachingTest::test_closure": _CACHE_PLACE,
    "test_caching.py::CUDAAndCPUCachingTest::test_cpu_and_cuda_targets": _CACHE_PLACE,
    "test_caching.py::CUDACachingTest::test_cache_reuse": _CACHE_BY_CONTENT,
    "test_caching.py::CUDACachingTest::test_cannot_cache_captured_device_array":
        _CACHE_DEVICE_ARRAYS,
    "test_caching.py::CUDACachingTest::test_cannot_cache_global_device_array":
        _CACHE_DEVICE_ARRAYS,
    "test_caching.py::CUDACachingTest::test_cannot_cache_linking_libraries":
        "link= files are linked when the module loads, not into the cached PTX, so a kernel "
        "with them is cached (numba-cuda refuses with RuntimeError)",
    "test_device_func.py::TestDeviceFunc::test_cpu_dispatcher_invalid":
        "expects a Numba CPU function given explicit signatures to be refused in device code; "
        "gpureplace compiles its Python source for the device as it does any Numba CPU "
        "function's",
    "test_caching.py::CUDACachingTest::test_recompile":
        "expects a kernel to keep a global's old value (Z) until recompile() is called; "
        "gpureplace tracks the globals kernels read and recompiles at the next launch",
    "test_compiler.py::TestCompile::test_compile_to_ltoir": _LTOIR,
    "test_compiler.py::TestCompile::test_compile_jitted_subroutine": _LTOIR,
    "test_inline.py::TestCudaInline::test_compile_forceinline": _LTOIR,
    "test_debug.py::TestDebugOutput::test_dump_llvm":
        "numba-cuda's LLVM dump is NVVM's input, where nvvm.annotations mark kernels (!\"kernel\""
        ", i32 1); LLVM 22's NVPTX back end marks them by the ptx_kernel calling convention "
        "(gpureplace's dump shows define ptx_kernel void @...)",
    "test_debug.py::TestDebugOutput::test_dump_assembly":
        "the PTX dumped is LLVM's NVPTX back end's (\"Generated by LLVM NVPTX Back-End\"), not "
        "NVVM's",
    "test_atomics.py::TestCudaAtomics::test_atomic_add_double_global": _PTX_ATOM,
    "test_atomics.py::TestCudaAtomics::test_atomic_add_double_global_2": _PTX_ATOM,
    "test_atomics.py::TestCudaAtomics::test_atomic_add_double_global_3": _PTX_ATOM,
    "test_casting.py::TestCasting::test_float16_to_int_ptx":
        "a float16 converted to an integer truncates, as NumPy and Python do; numba-cuda's "
        "cvt.rni rounds to the nearest",
    "test_casting.py::TestCasting::test_float16_to_uint_ptx":
        "a float16 converted to an unsigned integer truncates, as NumPy does (numba-cuda's "
        "cvt.rni rounds)",
    "test_casting.py::TestCasting::test_int_to_float16_ptx":
        "LLVM converts an 8-bit integer through 16 bits (cvt.rn.f16.s16): the same value",
    "test_casting.py::TestCasting::test_uint_to_float16_ptx":
        "LLVM converts an 8-bit integer through 16 bits (cvt.rn.f16.u16): the same value",
    "test_warning.py::TestWarnings::test_warn_on_debug_and_opt": _NVVM_DEBUG,
    "test_warning.py::TestWarnings::test_warn_on_debug_and_opt_default": _NVVM_DEBUG,
    "test_warning.py::TestWarnings::test_warn_on_debug_and_opt_with_config": _NVVM_DEBUG,
    "test_lineinfo.py::TestCudaLineInfo::test_debug_and_lineinfo_warning":
        "debug=True gives line information in gpureplace (NVVM cannot have both)",
    "test_atomics.py::TestCudaAtomics::test_atomic_sub3": _REINTERPRET,
    "test_warp_ops.py::TestCudaWarpOperations::test_vote_sync_const_mode_val": _REINTERPRET,
    "test_array.py::TestCudaArray::test_gpu_array_interleaved":
        "gpureplace copies a strided host array to the device (through a contiguous staging "
        "copy); numba-cuda's auto_device refuses it",
    "test_cuda_array_interface.py::TestCudaArrayInterface::test_negative_strided_copy_to_host":
        "gpureplace copies a device array with negative strides to the host (d[::-1]."
        "copy_to_host()); numba-cuda refuses it with NotImplementedError",
    "test_transpose.py::TestTranspose::test_transpose_view": _NUMPY_STRIDES,
    "test_array.py::TestCudaArray::test_array_like_2d_view_transpose_device": _NUMPY_STRIDES,
    # numba-cuda's simulator's own limitations, which gpureplace's simulator does not have
    "test_array_alignment.py::TestCudasimUnsupportedAlignment::test_local_unsupported":
        "numba-cuda's simulator refuses alignment=; gpureplace's honours it",
    "test_array_alignment.py::TestCudasimUnsupportedAlignment::test_shared_unsupported":
        "numba-cuda's simulator refuses alignment=; gpureplace's honours it",
    "test_stream_api.py::TestStreamAPI::test_external_stream_simulator_unavailable":
        "numba-cuda's simulator refuses external streams; gpureplace's accepts them (it runs "
        "each launch to the end, which orders it after anything on any stream)",
    "test_exception.py::TestException::test_zero_division_error_in_debug":
        "with debug=True gpureplace's simulator raises ZeroDivisionError, as the GPU does; "
        "numba-cuda's raises NumPy's FloatingPointError",
}


#: Files whose tests numba-cuda writes for its GPU only (they import the bfloat16 / fp8 names only
#: off its simulator, which has neither); gpureplace's simulator computes in bfloat16 and fp8, so
#: on the simulator backend these run as the GPU's tests do (``GPUREPLACE_CUDAPY_CUDASIM=0``).
SIMULATOR_RUNS_GPU_TESTS = ("test_bfloat16.py", "test_bfloat16_bindings.py",
                            "test_fp8_bindings.py")


def _run_file(path, work, backend, timeout, logs=None):
    xml = work / f"{path.stem}.xml"
    pythonpath = os.pathsep.join(p for p in (str(work / "site"), os.environ.get("PYTHONPATH"))
                                 if p)
    env = dict(os.environ, GPUREPLACE_BACKEND=backend, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=pythonpath,
               GPUREPLACE_CUDAPY_DIR=str(work / "cudapy"),
               GPUREPLACE_NUMBA_CUDA_MODULES=str(work / "modules.txt"))
    if backend == "simulator" and path.name in SIMULATOR_RUNS_GPU_TESTS:
        env["GPUREPLACE_CUDAPY_CUDASIM"] = "0"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
           f"--junitxml={xml}", "--rootdir", str(work), str(path)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work,
                              timeout=timeout)
        out = proc.stdout + proc.stderr
        if proc.returncode < 0 or proc.returncode > 5:      # killed: no report was written
            out += f"\nthe test process died (exit status {proc.returncode})\n"
    except subprocess.TimeoutExpired as exc:
        out = f"timed out after {timeout} s\n{exc.stdout or ''}"
    if logs:
        (Path(logs) / f"{path.stem}.txt").write_text(out)
    row = {"file": path.name, "passed": 0, "failed": 0, "errors": 0, "skipped": 0,
           "not_applicable": 0, "deliberate": 0, "seconds": round(time.perf_counter() - t0, 1),
           "note": ""}
    deliberate = []
    internal = _INTERNAL.search(out)
    used = set()
    reasons = {}
    collected = False
    if xml.exists():
        root = ET.parse(xml).getroot()
        for case in root.iter("testcase"):
            by_tag = {child.tag: child for child in case}
            bad = by_tag.get("failure", by_tag.get("error"))
            text = "" if bad is None else (bad.get("message") or "") + (bad.text or "")
            if bad is not None and (bad.text or "").strip() == "Unexpected success":
                # numba-cuda marks the test expectedFailure for a limitation of its own (an
                # exception raised in a device function, say) that gpureplace does not share
                bad, by_tag = None, {}
            if bad is not None and bad.get("message") == "collection failure":
                row["errors"] += 1                   # the file: decided below
                continue
            collected = True
            key = f"{path.name}::{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
            if bad is not None and key in DELIBERATE:
                row["deliberate"] += 1
                deliberate.append(key.split("::", 1)[1])
                continue
            hit = _INTERNAL.search(text)
            if bad is not None and not hit:
                why = _reason(bad.get("message") or bad.text or "")
                reasons[why] = reasons.get(why, 0) + 1
            if hit:
                row["not_applicable"] += 1           # it used numba-cuda's internals
                used.add(_INTERNAL_MODULE.match(hit.group(1)).group(0))
            elif "failure" in by_tag:
                row["failed"] += 1
            elif "error" in by_tag:
                row["errors"] += 1
            elif "skipped" in by_tag:
                row["skipped"] += 1
            else:
                row["passed"] += 1
    row["reasons"] = dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:6])
    if deliberate:
        row["deliberate_tests"] = {t: DELIBERATE[f"{path.name}::{t}"] for t in deliberate}
    if used:
        row["note"] = "uses " + ", ".join(sorted(used))
    if internal and row["passed"] == row["failed"] == 0 and not collected:
        # the file could not be imported: numba-cuda's internals, not its API
        row["not_applicable"] = max(_count_tests(path), 1)
        row["errors"] = 0
        row["note"] = f"imports {internal.group(1)}"
    elif row["passed"] + row["failed"] + row["skipped"] == 0 and (
            row["errors"] <= 1 and ("ERROR collecting" in out or not xml.exists())):
        # the file could not be imported (or the run died): each of its tests is an error
        row["errors"] = max(_count_tests(path), 1)
        last_line = out.strip().splitlines()[-1] if out.strip() else ""
        row["note"] = _last_error(out) or last_line[:160]
    elif row["errors"] and not row["passed"] and not row["failed"] and not used:
        row["note"] = _last_error(out)
    return row


def _reason(message):
    """A failure's first line, without addresses, paths or numbers that differ between runs."""
    line = message.strip().splitlines()[0] if message.strip() else "?"
    line = re.sub(r"0x[0-9a-f]+", "0x…", line)
    line = re.sub(r" \(/[^)]*\)", "", line)
    return line[:140]


def _count_tests(path):
    """How many tests a file defines (for one that cannot be imported)."""
    return len(re.findall(r"^\s+def test_\w+\(self", path.read_text(), re.M)) or \
        len(re.findall(r"^def test_\w+\(", path.read_text(), re.M))


def _last_error(out):
    lines = [ln for ln in out.splitlines()
             if re.match(r"E\s+[\w.]*(Error|Exception|MissingAPI|InternalModule)\b", ln)]
    text = lines[-1][1:].strip() if lines else ""
    return re.sub(r" \(/[^)]*\)", "", text)[:160]       # no paths of the measuring machine


def _report(rows, meta, out):
    total = {k: sum(r.get(k, 0) for r in rows) for k in
             ("passed", "failed", "errors", "skipped", "not_applicable", "deliberate")}
    ran = total["passed"] + total["failed"] + total["errors"]
    total["pass_share"] = round(total["passed"] / ran, 4) if ran else None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "total": total, "files": rows}, indent=1) + "\n")
    suite = meta.get("suite", "cudapy")
    lines = [f"# numba-cuda's {suite} tests against gpureplace ({meta['backend']})", "",
             f"numba-cuda {meta['numba_cuda_commit']}, {meta['date']}; "
             f"`python compat/numba_cuda/run.py` (see its docstring for how tests are counted).",
             "", f"**{total['passed']} of {ran} tests that ran pass "
             f"({100 * (total['pass_share'] or 0):.1f} %)**; {total['skipped']} skipped, "
             f"{total['not_applicable']} not applicable (numba-cuda's internals), "
             f"{total['deliberate']} deliberate differences (listed below, with reasons).", "",
             "| file | passed | failed | errors | skipped | n/a | deliberate | note |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        note = r["note"].replace("|", "\\|")
        lines.append(f"| {r['file']} | {r['passed']} | {r['failed']} | {r['errors']} | "
                     f"{r['skipped']} | {r['not_applicable']} | {r.get('deliberate', 0)} | "
                     f"{note} |")
    listed = [(r["file"], t, why) for r in rows for t, why in r.get("deliberate_tests", {}).items()]
    if listed:
        lines += ["", "## Deliberate differences", ""]
        lines += [f"- `{f}::{t}`: {why}" for f, t, why in listed]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--source", help="root of a numba-cuda checkout")
    where.add_argument("--clone", action="store_true", help="git clone numba-cuda first")
    ap.add_argument("--commit", help="numba-cuda's commit, when --source is not a git checkout")
    ap.add_argument("--backend", choices=("simulator", "gpu"), default="simulator")
    ap.add_argument("--suite", choices=SUITES, default="cudapy",
                    help="numba-cuda's test folder to run (tests/<suite>)")
    ap.add_argument("--out", required=True, help="JSON report (a .md is written beside it)")
    ap.add_argument("--only", help="run only test files whose name contains this")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per test file")
    ap.add_argument("--logs", help="folder for each test file's pytest output (<file>.txt)")
    args = ap.parse_args()
    tests, commit = _source(args)
    if args.logs:
        Path(args.logs).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cudapy-") as tmp:
        work = Path(tmp)
        files = [f for f in _prepare(tests, work) if not args.only or args.only in f.name]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(lambda f: _run_file(f, work, args.backend, args.timeout,
                                                       args.logs),
                                 files))
    meta = {"backend": args.backend, "suite": args.suite, "numba_cuda_commit": commit,
            "date": time.strftime("%Y-%m-%d"), "python": sys.version.split()[0]}
    total = _report(rows, meta, Path(args.out))
    print(json.dumps(total))


if __name__ == "__main__":
    main()
