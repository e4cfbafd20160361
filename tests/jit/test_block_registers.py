"""A block of more threads than a kernel's registers allow is refused before it launches, on
both backends, with the numbers (the driver's CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, said as the
user can act on it): the GPU path asks the loaded kernel, the simulator ptxas -- as
``get_max_threads_per_block`` answers.  Blocks of 256 threads or fewer always fit and ask
nothing."""

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.errors import DriverRefusal

N = 48
SIG = "void(float64[:], float64[:])"


def _register_heavy():
    """A kernel that keeps 48 float64 values live across a loop: over 100 registers a thread
    for sm_90, so at most 512 threads a block."""
    lines = ["def heavy(a, out):", "    i = cuda.grid(1)"]
    lines += [f"    x{j} = a[{j}]" for j in range(N)]
    lines += ["    for it in range(int(a[0])):"]
    lines += [f"        x{j} = x{(j + 1) % N} * x{(j + 7) % N} + x{(j + 13) % N} / x{(j + 3) % N}"
              for j in range(N)]
    lines += ["    if i < out.size:",
              "        out[i] = " + " + ".join(f"x{j} * {j + 1}.5" for j in range(N))]
    ns = {"cuda": cuda}
    exec(compile("\n".join(lines) + "\n", "<heavy>", "exec"), ns)
    return cuda.jit(ns["heavy"])


def _arrays():
    # (device arrays on both backends: prepare() refuses host arrays, as on the GPU)
    return cuda.to_device(np.ones(N)), cuda.to_device(np.zeros(1024))


@pytest.mark.gpu
def test_a_block_its_registers_cannot_hold_is_refused_with_the_numbers():
    k = _register_heavy()
    most = k.get_max_threads_per_block(SIG)
    regs = k.get_regs_per_thread(SIG)
    assert most < 1024 and regs > 64
    a, out = _arrays()
    k[1, 256](a, out)                          # (fits: the launch after it takes the fast path)
    with pytest.raises(DriverRefusal) as info:
        k[1, 1024](a, out)
    said = str(info.value)
    assert "heavy[1, 1024]: a block of 1024 threads" in said
    assert f"its {regs} registers per thread allow at most {most}" in said
    assert "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in said
    with pytest.raises(DriverRefusal):         # (a 2-D block counts all its threads)
        k[1, (32, 32)](a, out)
    with pytest.raises(DriverRefusal):
        k[1, 1024].prepare(a, out)
