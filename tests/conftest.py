"""Shared test helpers: PTX assembly with the wheel's ptxas, GPU detection, fresh functions."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile

import pytest


def _find_ptxas():
    """ptxas from the nvidia-cuda-nvcc wheel (what CI installs); on a GPU host without the wheel,
    the toolkit's own (GPUREPLACE_PTXAS, CUDA_HOME or PATH)."""
    for base in sys.path:
        hits = glob.glob(os.path.join(base, "nvidia", "cu*", "bin", "ptxas")) + glob.glob(
            os.path.join(base, "nvidia", "cuda_nvcc", "bin", "ptxas"))
        if hits:
            return hits[0]
    if os.environ.get("CI"):
        return None          # CI must get ptxas from the wheel, never from a system toolkit
    explicit = os.environ.get("GPUREPLACE_PTXAS")
    if explicit:
        return explicit
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "bin", "ptxas")):
            return os.path.join(root, "bin", "ptxas")
    import shutil
    return shutil.which("ptxas")


PTXAS = _find_ptxas()


#: GPUREPLACE_TEST_SIMULATOR=1: run the GPU tests too, under the CPU simulator, with NumPy
#: standing in for CuPy (tests/simcupy.py); tests marked gpu_only (GPU internals) stay skipped.
SIMULATE = os.environ.get("GPUREPLACE_TEST_SIMULATOR", "") not in ("", "0")
if SIMULATE:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import simcupy
    sys.modules["cupy"] = simcupy

# Tests never touch the user's own disk cache, and start from an empty one: a directory given in
# GPUREPLACE_CACHE_DIR is not used (an earlier run's kernels there would be disk hits where the
# tests look at a compile: its counts, its LLVM IR, the functions it called).
os.environ["GPUREPLACE_CACHE_DIR"] = tempfile.mkdtemp(prefix="gpureplace-test-cache-")
# The background warm-up the IPython extension starts (gpureplace.prewarm) compiles in a thread
# while a test runs: off, but where a test turns it on to check it (tests/jit/test_prewarm.py,
# tests/ipython/test_timeit_prewarm.py).
os.environ.setdefault("GPUREPLACE_PREWARM", "0")


@pytest.fixture
def own_disk_cache(monkeypatch, tmp_path):
    """A disk cache of the test's own, empty, also for the processes it starts: for tests that
    count compiles, which a cache left by an earlier run (the same GPUREPLACE_CACHE_DIR given
    twice) would turn into disk hits."""
    from gpureplace.compiler import diskcache
    path = tmp_path / "gpureplace-cache"
    monkeypatch.setenv("GPUREPLACE_CACHE_DIR", str(path))
    monkeypatch.setattr(diskcache, "_explicit_dir", None)
    return path


def has_gpu():
    from gpureplace import probe
    return probe.available()


def pytest_collection_modifyitems(config, items):
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and CuPy")
    for item in items:
        if "gpu_only" in item.keywords or ("gpu" in item.keywords and not SIMULATE):
            item.add_marker(skip)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


#: The start of a program (``python_process``) that sends objects to other processes:
#: ``remote(obj, script)`` is ``script``'s output in a new process that unpickles ``obj`` as
#: ``f`` and never ran the program.
REMOTE_UNPICKLE = '''
import math, pickle, subprocess, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
import gpureplace
from gpureplace import Context, cuda
from gpureplace.dispatch.context import default_context
from dask.base import tokenize

def remote(obj, script):
    code = ("import math, pickle, sys, warnings, numpy as np\\n"
            "warnings.simplefilter('ignore')\\n"
            "from dask.base import tokenize\\n"
            "f = pickle.loads(sys.stdin.buffer.read())\\n" + script)
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(obj),
                          capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().split()
'''


def python_env(**env):
    """The environment of a new Python process of this checkout's gpureplace (this one's, with
    the checkout first on its path), with ``env`` set."""
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                **env)


def python_process(program, timeout=300, **env):
    """Run ``program`` in a new Python process of this checkout's gpureplace, with ``env`` set;
    its stdout (it must exit 0: else the test fails with its stderr)."""
    env = python_env(**env)
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def line_of(func, text):
    """The line number, in its file, of the first line of ``func``'s source holding ``text``."""
    import inspect
    lines, first = inspect.getsourcelines(func)
    return first + next(k for k, line in enumerate(lines) if text in line)


def assemble(ptx, arch="sm_90", verbose=False, relocatable=False):
    """Assemble PTX with ptxas from the nvidia-cuda-nvcc wheel; fail the test on any error.
    Returns True, or with ``verbose`` ptxas's ``-v`` report (registers, spills).
    ``relocatable``: ``ptxas -c``, for PTX that calls external functions (linked at load)."""
    if PTXAS is None:
        pytest.fail("ptxas not found: install the test extra (nvidia-cuda-nvcc wheel)")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as fh:
            fh.write(ptx)
        proc = subprocess.run([PTXAS, *(["-v"] if verbose else []),
                               *(["-c"] if relocatable else []), f"-arch={arch}", "-o",
                               os.path.join(tmp, "k.cubin"), src], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.fail(f"ptxas rejected the PTX:\n{proc.stderr}\n--- PTX ---\n{ptx}")
    return proc.stderr if verbose else True


@pytest.fixture
def ptxas_check():
    return assemble


@pytest.fixture
def shell():
    """The process's IPython shell with the extension loaded (tests/ipython); afterwards
    unloaded, the namespace reset, and what ``%config GPUReplace`` set forgotten (the shell keeps
    its config across loads, and the extension applies it to the process's settings)."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    from gpureplace.config import settings
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpureplace")
    yield ip
    ip.run_line_magic("unload_ext", "gpureplace")
    ip.reset(new_session=True)
    ip.config.pop("GPUReplace", None)
    settings.__init__()

