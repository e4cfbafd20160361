"""compat/numba_cuda's import shim: numba-cuda's test files see gpureplace.cuda as numba.cuda,
Numba's own modules under numba-cuda's names, and numba-cuda's internals as not applicable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys
sys.path.insert(0, {shim!r})
import cudapy_shim
cudapy_shim.install()
import gpureplace.cuda
from numba import cuda
from numba.cuda import types, config
from numba.cuda.testing import CUDATestCase, skip_on_cudasim, unittest
from numba.cuda.tests.support import override_config
import numba.core.types
assert cuda.jit is gpureplace.cuda.jit and cuda.random is gpureplace.cuda.random
assert types.float32 is numba.core.types.float32 and config.ENABLE_CUDASIM is True
assert numba.core.types.__name__ == "numba.core.types"          # the real module is untouched
import numba.cuda.compiler                     # numba-cuda's internals: a stand-in
from numba.cuda.cudadrv.driver import driver
for use in (lambda: numba.cuda.compiler.compile_ptx(None, ()), lambda: driver.get_device()):
    try:
        use()
    except cudapy_shim.InternalModule as exc:
        assert "numba.cuda.cudadrv.driver.driver.get_device is numba-cuda's internals" in \
            str(exc) or "numba.cuda.compiler.compile_ptx is numba-cuda's internals" in str(exc)
    else:
        raise AssertionError("an internal module was usable")
from numba.cuda.kernels.transpose import transpose   # gpureplace's
import gpureplace.cuda_transpose
assert transpose is gpureplace.cuda_transpose.transpose
from numba.cuda.fp8 import typing_registry          # API gpureplace lacks: fails when used
from numba.cuda import not_a_module_of_numba_cuda
from numba.cuda.types import not_a_type
for missing in (typing_registry, not_a_module_of_numba_cuda, not_a_type):
    try:
        missing()
    except cudapy_shim.InternalModule:
        raise AssertionError("missing API counted as not applicable")
    except cudapy_shim.MissingAPI as exc:
        assert "gpureplace has no numba.cuda." in str(exc)
    else:
        raise AssertionError("missing API was usable")
from numba.cuda.extending import overload, intrinsic   # gpureplace's extension API
import gpureplace.extending
assert overload is gpureplace.extending.overload
from numba.cuda.misc.special import literal_unroll   # Numba's own, under numba-cuda's name
import numba.misc.special
assert literal_unroll is numba.misc.special.literal_unroll
print("ok")
"""


def test_the_shim_maps_numba_cuda_to_gpureplace_and_names_internals(tmp_path):
    shim = str(ROOT / "compat" / "numba_cuda")
    modules = tmp_path / "modules.txt"           # numba-cuda's modules, as run.py lists them
    modules.write_text("numba.cuda.compiler\nnumba.cuda.cudadrv\nnumba.cuda.cudadrv.driver\n"
                       "numba.cuda.kernels\nnumba.cuda.kernels.transpose\nnumba.cuda.types\n")
    env = dict(os.environ, GPUREPLACE_BACKEND="simulator",
               GPUREPLACE_NUMBA_CUDA_MODULES=str(modules))
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(shim=shim)], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]


FAKE_TEST = '''
import subprocess, sys, unittest
from numba import cuda
from numba.cuda.testing import CUDATestCase, skip_on_cudasim
from numba.cuda.compiler import compile_ptx          # numba-cuda's internals: a stand-in


class TestFake(CUDATestCase):
    def test_passes(self):
        @cuda.jit
        def k(x):
            x[0] = 1
        import numpy as np
        a = np.zeros(1)
        k[1, 1](a)
        self.assertEqual(a[0], 1)

    def test_fails(self):
        self.assertEqual(1, 2)

    def test_internal(self):
        compile_ptx(None, ())

    def test_a_child_process_sees_the_same_numba_cuda(self):
        out = subprocess.run([sys.executable, "-c", "from numba import cuda; print(cuda.jit.__module__)"],
                             capture_output=True, text=True, check=True).stdout
        self.assertIn("gpureplace", out)

    @skip_on_cudasim("skipped on the simulator")
    def test_skipped(self):
        pass

    @unittest.expectedFailure           # numba-cuda's own limitation, which gpureplace lacks
    def test_unexpected_success(self):
        pass
'''


def test_run_py_counts_passed_failed_not_applicable_and_skipped(tmp_path):
    """run.py on a stand-in numba-cuda tree: one file, one test of each outcome."""
    import json
    pkg = tmp_path / "numba_cuda" / "numba" / "cuda"
    tests = pkg / "tests" / "cudapy"
    tests.mkdir(parents=True)
    (tests / "test_fake.py").write_text(FAKE_TEST)
    (tests / "test_stream_api.py").write_text(          # a deliberate difference (run.py lists it)
        "import unittest\n"
        "class TestStreamAPI(unittest.TestCase):\n"
        "    def test_external_stream_simulator_unavailable(self):\n"
        "        raise AssertionError('RuntimeError not raised')\n")
    for i in range(25):                               # numba-cuda's modules (run.py lists them)
        (pkg / f"module{i}.py").write_text("")
    (pkg / "compiler.py").write_text("")
    out = tmp_path / "report.json"
    env = dict(os.environ, GPUREPLACE_BACKEND="simulator")
    proc = subprocess.run([sys.executable, str(ROOT / "compat" / "numba_cuda" / "run.py"),
                           "--source", str(tmp_path), "--commit", "fake", "--backend",
                           "simulator", "--out", str(out), "--jobs", "1"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    row, = [r for r in report["files"] if r["file"] == "test_fake.py"]
    assert (row["passed"], row["failed"], row["not_applicable"], row["skipped"]) == \
        (3, 1, 1, 1), row
    other, = [r for r in report["files"] if r["file"] == "test_stream_api.py"]
    assert (other["failed"], other["deliberate"]) == (0, 1), other
    assert report["total"]["deliberate"] == 1 and report["total"]["failed"] == 1
    assert "external streams" in out.with_suffix(".md").read_text()
    assert "numba.cuda.compiler" in row["note"]
    assert out.with_suffix(".md").read_text().count("test_fake.py") == 1
