"""Recompile ahead on a GPU (gpureplace/jit/ahead.py, the IPython extension's round after a cell
that moved the world, here run directly): the stale kernels are compiled and loaded before
their launch, which then compiles and loads nothing and runs the new code."""

import numpy as np
import pytest

import gpureplace
from gpureplace.jit import ahead
from gpureplace.runtime import launch

pytestmark = [pytest.mark.gpu, pytest.mark.gpu_only]

HELPER = '''
from gpureplace import cuda
OFFSET = 1.5
def shifted(v):
    return v + OFFSET
@cuda.jit
def add_offset(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = shifted(x[i])
'''


def made():
    """Kernel specialisations made: compiled, or loaded from the disk cache."""
    stats = gpureplace.stats()
    return stats["kernel_compiles"] + stats["disk_hits"]


def counting_loads(monkeypatch):
    loads = []
    real = launch.LoadedKernel

    def load(spec, dev, *args):
        loads.append((spec.name, dev))
        return real(spec, dev, *args)

    monkeypatch.setattr(launch, "LoadedKernel", load)
    return loads


def test_a_redefined_helper_is_compiled_and_loaded_before_the_launch(monkeypatch):
    import cupy as cp
    ns = {"__name__": "notebook_like_helper"}    # (made here: the newest kernel, first in line)
    exec(HELPER, ns)
    add_offset = ns["add_offset"]
    x = cp.zeros(1000, cp.float32)
    add_offset[4, 256](x)
    assert float(x[0]) == 1.5
    ns["OFFSET"] = 2.25
    gpureplace.refresh()
    assert add_offset in [fn for fn, _ in ahead.pending()]
    assert ahead.run_round() >= 1
    loads = counting_loads(monkeypatch)
    compiles = made()
    add_offset[4, 256](x)
    assert np.all(cp.asnumpy(x) == 1.5 + 2.25)
    assert made() == compiles and loads == []
    assert add_offset not in [fn for fn, _ in ahead.pending()]


KERNEL = '''
from gpureplace import cuda
@cuda.jit
def scale_into(a, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + {c}
'''


def test_a_redefined_kernel_is_ready_for_the_old_ones_argument_types(monkeypatch):
    import cupy as cp
    ns = {"__name__": "notebook_like"}
    exec(KERNEL.format(c="0.0"), ns)
    x = cp.ones(512, cp.float32)
    out = cp.empty_like(x)
    ns["scale_into"][2, 256](np.float32(3.0), x, out)
    assert float(out[0]) == 3.0
    exec(KERNEL.format(c="0.5"), ns)                 # the cell run again, edited
    new = ns["scale_into"]
    assert new in [fn for fn, _ in ahead.pending()]
    assert ahead.run_round() >= 1
    loads = counting_loads(monkeypatch)
    compiles = made()
    new[2, 256](np.float32(3.0), x, out)
    assert float(out[0]) == 3.5
    assert made() == compiles and loads == []


def test_a_new_kernel_is_ready_for_the_types_its_parameter_names_had(monkeypatch):
    # a notebook's further kernel: defined in a cell (module __main__), launched after the user
    # typed the launch; its parameters were launched as those of an earlier kernel
    import cupy as cp
    from gpureplace.jit import guesses
    guesses.forget()
    ns = {"__name__": "__main__"}
    exec("from gpureplace import cuda\n@cuda.jit\ndef saxpy_nb(a, x, y, out):\n"
         "    i = cuda.grid(1)\n    if i < out.size:\n        out[i] = a * x[i] + y[i]\n", ns)
    x = cp.ones(512, cp.float32)
    out = cp.empty_like(x)
    ns["saxpy_nb"][2, 256](2.0, x, x, out)
    assert float(out[0]) == 3.0
    exec("@cuda.jit\ndef scale_nb(a, x, out):\n    i = cuda.grid(1)\n    if i < out.size:\n"
         "        out[i] = a * x[i]\n", ns)
    try:
        scale = ns["scale_nb"]
        assert scale in [fn for fn, _ in ahead.pending()]
        assert ahead.run_round() >= 1
        loads = counting_loads(monkeypatch)
        compiles = made()
        scale[2, 256](3.0, x, out)
        assert float(out[0]) == 3.0
        assert made() == compiles and loads == []
    finally:
        guesses.forget()
