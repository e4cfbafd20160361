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
try:
    import numba.cuda.compiler
except cudapy_shim.InternalModule as exc:
    assert "numba.cuda.compiler is numba-cuda's internals" in str(exc)
else:
    raise AssertionError("an internal module imported")
try:
    from numba.cuda.extending import overload
except cudapy_shim.InternalModule:
    raise AssertionError("missing API counted as not applicable")
except ImportError as exc:
    assert "no numba.cuda.extending" in str(exc)
print("ok")
"""


def test_the_shim_maps_numba_cuda_to_gpureplace_and_names_internals():
    shim = str(ROOT / "compat" / "numba_cuda")
    env = dict(os.environ, GPUREPLACE_BACKEND="simulator")
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(shim=shim)], capture_output=True,
                          text=True, env=env)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
