"""The background warm-up (gpureplace.prewarm): it compiles its own kernel through the whole
pipeline, leaves nothing in the disk cache or in stats(), never disturbs the session, and makes
the user's first compile cheap."""

import os
import subprocess
import sys

import pytest

SCRIPT = r'''
import os, sys, time
import gpureplace
from gpureplace import prewarm, cuda
import math
assert prewarm.start() is not None and prewarm.start() is None      # once per process
assert prewarm.wait(120)
report = prewarm.report()
assert "error" not in report and report["compile"] > 0, report
assert all(v == 0 for v in gpureplace.stats().values()), gpureplace.stats()
written = [f for _, _, files in os.walk(os.environ["GPUREPLACE_CACHE_DIR"]) for f in files
           if f.endswith((".ptx", ".json"))]
assert not written, written                                         # nothing on disk
@cuda.jit
def k(x):
    x[0] = math.cos(x[1])
t = time.perf_counter()
k.compile("void(float32[::1])")
print(time.perf_counter() - t)
print(gpureplace.stats()["kernel_compiles"], gpureplace.stats()["device_compiles"])
'''


def test_the_warm_up_leaves_no_trace_and_speeds_up_the_first_compile(tmp_path):
    env = dict(os.environ, GPUREPLACE_CACHE_DIR=str(tmp_path), GPUREPLACE_BACKEND="simulator",
               GPUREPLACE_PREWARM="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    seconds, counts = out.stdout.split("\n")[:2]
    assert counts == "1 1"
    # warmed: Numba's registries, the contexts, LLVM and libdevice are ready (cold: ~0.5 s)
    assert float(seconds) < 0.25, seconds
    assert "no CUDA GPU found" not in out.stderr     # the notice is for the user's first launch


def test_the_warm_up_can_be_turned_off():
    env = dict(os.environ, GPUREPLACE_PREWARM="0")
    code = "from gpureplace import prewarm; print(prewarm.start(), prewarm.wait(0))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.stdout.split() == ["None", "True"], out.stderr


COMPILER_ONLY = r'''
import sys
from gpureplace import prewarm
from gpureplace.runtime import prewarm as impl
started = []
impl._start_cuda = lambda spec, options: started.append(spec.name)
impl.start(cuda=sys.argv[1] == "1")
assert impl.wait(120)
report = prewarm.report()
assert "error" not in report and report["compile"] > 0, report
print(started)
'''


@pytest.mark.parametrize("cuda", [True, False])
def test_the_compiler_alone_can_be_warmed(tmp_path, cuda):
    """``start(cuda=False)`` warms the compiler and never asks for CUDA's start-up (the step
    itself spied on: without a GPU it would return at once)."""
    env = dict(os.environ, GPUREPLACE_CACHE_DIR=str(tmp_path), GPUREPLACE_PREWARM="1",
               GPUREPLACE_BACKEND="gpu")
    out = subprocess.run([sys.executable, "-c", COMPILER_ONLY, "1" if cuda else "0"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == (["['_warm_kernel']"] if cuda else ["[]"]), out.stdout


def test_gpureplace_prewarm_is_reachable_after_import_gpureplace_alone(tmp_path):
    """README: "In a script, ``gpureplace.prewarm.start()`` starts the same warm-up" -- after
    ``import gpureplace`` alone that was an AttributeError (only the extension imported it)."""
    from conftest import python_process
    out = python_process("import gpureplace, sys\n"
                         "assert 'gpureplace.prewarm' not in sys.modules   # (not at import)\n"
                         "gpureplace.prewarm.start(cuda=False)\n"
                         "print(gpureplace.prewarm.wait(120))\n",
                         GPUREPLACE_CACHE_DIR=str(tmp_path), GPUREPLACE_BACKEND="simulator")
    assert out.strip().splitlines()[-1] == "True"
