"""numba-cuda's debugging aids that ported code relies on: Numba's DUMP_* switches print what
each stage produced (compiling afresh, past the memory and disk caches), a specialisation's
``_type_annotation``, and launches the driver would refuse raised as its errors."""

import os
import subprocess
import sys

import pytest
from numba.core import config

from gpureplace import LaunchError, cuda
from gpureplace.cuda import float64, int32, void


def simple(A, B):
    i = cuda.grid(1)
    B[i] = A[i] + 1.5


@pytest.mark.parametrize("switch, marker, absent", [
    ("DUMP_BYTECODE", "BINARY_OP(arg=0", "IR DUMP: simple"),
    ("DUMP_CFG", "CFG dominators", "LLVM DUMP simple"),
    ("DUMP_IR", "--IR DUMP: simple--", "ASSEMBLY simple"),
    ("DUMP_LLVM", "LLVM DUMP simple", "CFG dominators"),
    ("DUMP_ASSEMBLY", "ASSEMBLY simple", "IR DUMP: simple"),
])
def test_a_dump_switch_prints_its_stage_even_when_the_kernel_is_cached(capsys, monkeypatch,
                                                                      switch, marker, absent):
    cuda.jit((float64[:], float64[:]))(simple)          # compiled (and cached) before
    capsys.readouterr()
    monkeypatch.setattr(config, switch, True)
    cuda.jit((float64[:], float64[:]))(simple)
    out, err = capsys.readouterr()
    assert marker in out and absent not in out and not err
    if switch == "DUMP_ASSEMBLY":
        assert ".entry simple(" in out
    if switch == "DUMP_LLVM":
        assert "define ptx_kernel void @simple(" in out


def test_a_specialisation_has_numba_type_annotation_also_from_the_disk_cache(tmp_path):
    script = (
        "import numpy as np\n"
        "from gpureplace import cuda\n"
        "from gpureplace.cuda import int32, void\n"
        "@cuda.jit(void(int32[::1]))\n"
        "def f(x):\n"
        "    l = cuda.local.array(4, dtype=np.int16)\n"
        "    l[0] = x[0]\n"
        "    x[0] = l[0]\n"
        "spec = next(iter(f.overloads.values()))\n"
        "print(spec.from_disk, spec._type_annotation.typemap['l'].dtype)\n")
    env = dict(os.environ, GPUREPLACE_CACHE_DIR=str(tmp_path), GPUREPLACE_BACKEND="simulator")
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=env, timeout=300) for _ in range(2)]
    assert [r.stdout.split() for r in runs] == [["False", "int16"], ["True", "int16"]], \
        runs[1].stderr


def test_a_block_beyond_launch_bounds_is_refused_as_the_driver_would():
    @cuda.jit(launch_bounds=128)
    def f(x):
        x[0] = 1

    f[1, 128]                                           # within the bounds: configured
    with pytest.raises(LaunchError, match=r"at most 128 .*\(CUDA_ERROR_INVALID_VALUE\)") as info:
        f[1, 256]
    try:
        from cuda.core._utils.cuda_utils import CUDAError
    except ImportError:
        return
    assert isinstance(info.value, CUDAError)            # numba-cuda code catches that


def test_type_annotation_names_the_local_array_dtype():
    @cuda.jit(void(int32[::1]))
    def g(x):
        s = cuda.local.array(2, dtype=float64)
        s[0] = x[0]
        x[0] = int32(s[0])

    spec = next(iter(g.overloads.values()))
    assert spec._type_annotation.typemap["s"].dtype == float64
