"""bench/codegen.py's harness: the compile-only check (no GPU: compile every kernel, assemble it
with ptxas, optionally ``nvcc -ptx`` the CUDA C), and the GPU run's machinery: building the CUDA C
(NVRTC) and numba-cuda peers, timing a group of launches with CUDA events, and
checking and recording results.
"""

from __future__ import annotations

import glob
import json
import math
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
import types as pytypes

import numpy as np

from codegen_kernels import CUDA_C_FAST_OPTIONS, CUDA_C_OPTIONS, compile_plan, cuda_c_sources

# ---------------------------------------------------------------------------------------------
# Compile-only check (no GPU): every gpureplace kernel, both contexts where relevant


def _find_ptxas():
    from gpureplace.compiler.toolchain import find_tool
    return find_tool("ptxas")


def _ptx_stats(ptx):
    body = ptx.split(".entry", 1)[-1]
    return {"ptx_lines": body.count("\n"),
            "fma": body.count("fma.rn."),
            "approx": body.count(".approx."),
            "bar_sync": body.count("bar.sync") + body.count("barrier.sync"),
            "shared_ops": body.count(".shared."),
            "wide_accesses": body.count("ld.global.v4.") + body.count("st.global.v4."),
            "shared_v4": body.count("ld.shared.v4.") + body.count("st.shared.v4."),
            "shared_atomics": body.count("atom.shared.") + body.count("red.shared."),
            "global_atomics": body.count("atom.global.") + body.count("red.global."),
            "shfl": body.count("shfl.sync."),
            "sqrt_rn": body.count("sqrt.rn.f32"),
            "rsqrt": body.count("rsqrt.approx."),
            "half_ops": len(re.findall(r"\b(?:fma|mul|add)(?:\.rn)?\.(?:bf16|f16)\b", body)),
            "local_ops": body.count("ld.local.") + body.count("st.local.")}


def _ptxas_usage(stderr):
    """Registers and spill bytes from ``ptxas -v``'s report (None where it says nothing)."""
    regs = re.search(r"Used (\d+) registers", stderr)
    spills = [int(v) for v in re.findall(r"(\d+) bytes spill (?:stores|loads)", stderr)]
    return {"registers": int(regs.group(1)) if regs else None,
            "spill_bytes": sum(spills) if spills else None}


def _assemble(ptxas, ptx):
    """(ok, ptxas stderr, registers / spill bytes) of ``ptx`` assembled for sm_90."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.ptx")
        with open(path, "w") as fh:
            fh.write(ptx)
        proc = subprocess.run([ptxas, "-arch=sm_90", "-v", "-o", path + ".cubin", path],
                              capture_output=True, text=True)
    return proc.returncode == 0, proc.stderr, _ptxas_usage(proc.stderr)


def check_compile(args):
    ptxas = _find_ptxas()
    rows = []
    for label, kern, sig in compile_plan():
        row = {"kernel": label, "signature": str(sig), "ok": False}
        t0 = time.perf_counter()
        try:
            spec = kern.compile(sig, arch="sm_90")
            row["compile_s"] = round(time.perf_counter() - t0, 3)
            row.update(_ptx_stats(spec.ptx))
            row["ok"] = True
            if ptxas:
                ok, err, usage = _assemble(ptxas, spec.ptx)
                row["ptxas"] = ok
                row.update(usage)
                if not ok:
                    row["ok"] = False
                    row["error"] = "ptxas: " + err.strip()[-800:]
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        rows.append(row)
        status = "OK  " if row["ok"] else "FAIL"
        extra = (f"ptx {row['ptx_lines']:5d} lines, fma {row['fma']:3d}, approx {row['approx']:3d}"
                 if "ptx_lines" in row else row.get("error", ""))
        if row.get("registers") is not None:
            extra += f", {row['registers']:3d} registers, {row['spill_bytes']} B spilled"
        print(f"{status} {label:22s} {str(sig)[:62]:62s} {extra}")

    nvcc_rows = []
    nvcc = args.nvcc or os.environ.get("GPUREPLACE_BENCH_NVCC")
    if nvcc:
        flags = shlex.split(getattr(args, "nvcc_flags", None) or "")
        for label, src, _ in cuda_c_sources():
            for opts in (CUDA_C_OPTIONS, CUDA_C_FAST_OPTIONS):
                usage = {}
                with tempfile.TemporaryDirectory() as tmp:
                    path = os.path.join(tmp, "k.cu")
                    with open(path, "w") as fh:
                        fh.write(src)
                    proc = subprocess.run([nvcc, "-ptx", "-arch=sm_90", *opts, *flags, "-o",
                                           os.path.join(tmp, "k.ptx"), path],
                                          capture_output=True, text=True)
                    if proc.returncode == 0 and ptxas:
                        with open(os.path.join(tmp, "k.ptx")) as fh:
                            usage = _assemble(ptxas, fh.read())[2]
                ok = proc.returncode == 0
                nvcc_rows.append({"kernel": label, "options": list(opts), "ok": ok, **usage,
                                  "error": None if ok else proc.stderr.strip()[-800:]})
                regs = (f", {usage['registers']:3d} registers, {usage['spill_bytes']} B spilled"
                        if usage.get("registers") is not None else "")
                print(f"{'OK  ' if ok else 'FAIL'} CUDA C {label:18s} nvcc -ptx {' '.join(opts)}"
                      + regs + ("" if ok else "\n" + proc.stderr))

    n_ok = sum(r["ok"] for r in rows)
    print(f"compiled {n_ok}/{len(rows)} gpureplace kernels"
          + (f" (assembled with {ptxas})" if ptxas else " (ptxas not found: not assembled)"))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"mode": "check-compile", "kernels": rows, "cuda_c": nvcc_rows}, fh,
                      indent=1)
    bad = n_ok != len(rows) or not all(r["ok"] for r in nvcc_rows)
    return 1 if bad else 0



# ---------------------------------------------------------------------------------------------
# GPU runs


def _cuda_include_dirs():
    """Folders with CUDA's cuda_fp16.h: the NVIDIA wheels' (nvidia/cu13/include,
    nvidia/cuda_runtime/include), then CUDA_PATH, CUDA_HOME and /usr/local/cuda."""
    dirs = []
    for base in sys.path:
        for pattern in (("nvidia", "cu*", "include"), ("nvidia", "cuda_runtime", "include")):
            dirs += sorted(glob.glob(os.path.join(base or ".", *pattern)), reverse=True)
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root:
            dirs.append(os.path.join(root, "include"))
    return [d for d in dict.fromkeys(dirs) if os.path.isfile(os.path.join(d, "cuda_fp16.h"))]


def _nvrtc_function(cp, src, name, options):
    """``src`` compiled by NVRTC to PTX for the current GPU with exactly ``options`` and loaded
    by the driver's JIT, as gpureplace's PTX is; its function ``name``.  (Not a cubin from
    NVRTC: cupy_backends' ``getCUBIN`` handed back another program's cubin on the H200.)"""
    from cupy_backends.cuda.libs import nvrtc
    cc = cp.cuda.Device().compute_capability
    prog = nvrtc.createProgram(src, f"{name}.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(prog, (f"-arch=compute_{cc}",) + tuple(options))
        except Exception as exc:
            raise RuntimeError(f"{exc}: {nvrtc.getProgramLog(prog).strip()[:500]}") from None
        ptx = nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    module = cp.cuda.function.Module()
    module.load(ptx if isinstance(ptx, bytes) else ptx.encode())
    return module.get_function(name)          # (the function keeps its module loaded)


class Bench:
    """Shared state of one GPU run: CuPy, the numba-cuda handle (or None) and the timing budget."""

    def __init__(self, cp, budget_s, verbose=True):
        self.cp = cp
        self.budget_s = budget_s
        self.verbose = verbose
        self.ncuda = None
        self.numba_note = None
        self.raw_notes = {}
        try:
            from numba import cuda as ncuda
            if not ncuda.is_available():
                raise RuntimeError("numba.cuda.is_available() is False")
            self.ncuda = ncuda
        except Exception as exc:
            self.numba_note = f"{type(exc).__name__}: {exc}"
            print("numba-cuda: skipped:", self.numba_note, file=sys.stderr)
        dev = cp.cuda.Device()
        self.sm_count = dev.attributes["MultiProcessorCount"]

    # -- building -------------------------------------------------------------------------------
    def raw(self, src, name, fast=False):
        """The CUDA C kernel compiled by NVRTC for this GPU and loaded (a CuPy
        ``Function``, called as a RawKernel is).  Not through ``cupy.RawKernel``: CuPy appends
        ``-ftz=true`` to every RawKernel's options, so its float32 code flushes denormals
        (rsqrtf then skips the denormal scaling, 1 / sqrtf uses ``.ftz`` instructions) where
        nvcc's default and gpureplace's default context keep them.  The twin is compiled with
        NVRTC's defaults (as nvcc's: no FTZ, IEEE division and square root, FMA contraction),
        or ``--use_fast_math`` for the fast-math rows, as gpureplace's fast-math context.  A
        source that includes CUDA's headers (cuda_fp16.h, cuda_bf16.h) gets ``-I`` for a folder
        that has them (recorded in raw_notes)."""
        opts = tuple(CUDA_C_FAST_OPTIONS if fast else CUDA_C_OPTIONS)
        tries = [opts]
        if "#include" in src:
            tries += [opts + (f"-I{d}",) for d in _cuda_include_dirs()]
        errors = []
        for t in tries:
            try:
                k = _nvrtc_function(self.cp, src, name, t)
            except Exception as exc:
                errors.append(f"{t}: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            if t != opts:
                self.raw_notes[name] = f"NVRTC options {' '.join(t)}"
            return k
        raise RuntimeError(f"NVRTC could not compile {name}: " + " | ".join(errors))

    def numba_kernel(self, gp_kernel, fastmath=False):
        """numba-cuda's compile of the same bytecode (its own ``cuda`` module in the globals);
        None when numba-cuda is unavailable.  Compilation happens at the first launch."""
        if self.ncuda is None:
            return None
        py = gp_kernel.py_func
        glb = dict(py.__globals__)
        glb["cuda"] = self.ncuda
        fn = pytypes.FunctionType(py.__code__, glb, py.__name__, py.__defaults__, py.__closure__)
        try:
            return self.ncuda.jit(fastmath=fastmath)(fn)
        except Exception as exc:
            print(f"numba-cuda: {py.__name__}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None

    def nb_args(self, *args):
        """numba-cuda views of the CuPy arrays, made once: launching numba-cuda with CuPy arrays
        makes it synchronise on the arrays' stream at every launch (CUDA Array Interface sync),
        which would leave the GPU idle inside the timed span."""
        out = []
        for a in args:
            if hasattr(a, "__cuda_array_interface__"):
                for kw in ({"sync": False}, {}):      # older numba-cuda: no sync argument
                    try:
                        a = self.ncuda.as_cuda_array(a, **kw)
                        break
                    except Exception:
                        continue
            out.append(a)
        return out

    def try_first_launch(self, label, launch):
        """Run a peer's launch once; a failure drops the peer from this row only."""
        try:
            launch()
            self.cp.cuda.Device().synchronize()
            return True
        except Exception as exc:
            print(f"{label}: skipped: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
            return False

    # -- timing ---------------------------------------------------------------------------------
    def time_group(self, launches, budget_s=None):
        """Median ms per launch of each ``name -> launch()``, interleaved round by round."""
        cp = self.cp
        budget_s = self.budget_s if budget_s is None else budget_s
        dev = cp.cuda.Device()
        est = {}
        for name, fn in launches.items():
            for _ in range(3):
                fn()
            dev.synchronize()
            s, e = cp.cuda.Event(), cp.cuda.Event()
            s.record()
            fn()
            e.record()
            e.synchronize()
            est[name] = max(cp.cuda.get_elapsed_time(s, e), 1e-3)
        # Each sample spans >= ~2 ms of GPU time (at most 50 launches); samples fill the budget.
        per = {n: max(1, min(50, math.ceil(2.0 / t))) for n, t in est.items()}
        round_ms = sum(est[n] * (per[n] + 1) for n in launches)
        samples = max(5, min(30, int(budget_s * 1e3 / max(round_ms, 1e-3))))
        times = {n: [] for n in launches}
        events = {n: (cp.cuda.Event(), cp.cuda.Event()) for n in launches}
        for _ in range(samples):
            for name, fn in launches.items():
                s, e = events[name]
                fn()                  # untimed: the start event queues behind it
                s.record()
                for _ in range(per[name]):
                    fn()
                e.record()
                e.synchronize()
                times[name].append(cp.cuda.get_elapsed_time(s, e) / per[name])
        return {n: float(np.median(v)) for n, v in times.items()}, {
            "samples": samples, "launches_per_sample": per}


# -- result checks -----------------------------------------------------------------------------

def compare(a, b, rtol, atol):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False, f"shape {a.shape} vs {b.shape}"
    if not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
        return False, "non-finite values"
    diff = np.abs(a - b)
    ok = bool(np.all(diff <= atol + rtol * np.abs(b)))
    rel = float(np.max(diff / np.maximum(np.abs(b), 1e-30))) if diff.size else 0.0
    return ok, f"max rel diff {rel:.2e}"


def check_vs(cp, got, ref, rtol, atol, what):
    """Compare device arrays (sampled when large, to keep host copies small)."""
    n = got.size
    if n > 2 ** 22:
        idx = cp.asarray(np.random.default_rng(0).integers(0, n, 2 ** 20))
        got, ref = got.ravel()[idx], ref.ravel()[idx]
    ok, msg = compare(cp.asnumpy(got), cp.asnumpy(ref), rtol, atol)
    return ok, f"{what}: {msg}"


def result_row(kernel, size, times, checks, notes=None, extra=None):
    gp = times.get("gpureplace")
    c = times.get("cuda_c")
    nb = times.get("numba_cuda")
    row = {"kernel": kernel, "size": size, "gpureplace_ms": gp, "cuda_c_ms": c, "numba_cuda_ms": nb,
           "ratio": (c / gp) if (c and gp) else None,
           "numba_ratio": (c / nb) if (c and nb) else None,
           "check_ok": all(ok for ok, _ in checks) if checks else None,
           "checks": [m if ok else "MISMATCH " + m for ok, m in checks]}
    if notes:
        row["notes"] = notes
    if extra:
        row.update(extra)
    return row


def free_memory(cp):
    cp.get_default_memory_pool().free_all_blocks()


def error_row(label, exc):
    print(f"{label}: FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
    traceback.print_exc()
    return {"kernel": label, "error": f"{type(exc).__name__}: {str(exc)[:500]}",
            "gpureplace_ms": None, "cuda_c_ms": None, "numba_cuda_ms": None, "ratio": None,
            "check_ok": False, "checks": []}

