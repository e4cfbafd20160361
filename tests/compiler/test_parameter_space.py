"""Arguments whose values take more bytes than a kernel's parameters may (ptxas's limit: 4,352
bytes up to PTX ISA 8.0, 32,764 from 8.1 on sm_70 and newer) are refused at the compile, naming
the largest parameters, on both backends: ptxas refused the PTX, and the simulator ran it."""

import numpy as np
import pytest
from numba.core import types

from gpureplace import CompileError, cuda
from gpureplace.compiler import backend


@cuda.jit
def total(t, out):
    s = 0.0
    for v in t:
        s += v
    out[0] = s


def _sig(n):
    return (types.UniTuple(types.float64, n), types.float64[::1])


def test_parameters_over_the_limit_are_refused_naming_the_largest(ptxas_check):
    with pytest.raises(CompileError) as info:
        total[1, 1](tuple(float(i) for i in range(600)), np.zeros(1))      # (4,816 bytes)
    said = str(info.value)
    assert "4,816 bytes of parameters, more than the 4,352 a kernel may have" in said
    assert "'t' (UniTuple(float64 x 600): 4,800 bytes)" in said
    out = np.zeros(1)
    total[1, 1](tuple(float(i) for i in range(500)), out)              # (4,016 bytes: fits)
    assert out[0] == sum(range(500))
    ptxas_check(total.inspect_ptx(_sig(500)))


def test_from_ptx_81_the_limit_is_32764_bytes(monkeypatch):
    monkeypatch.setattr(backend, "compile_ptx_isa", lambda arch: 88)
    from gpureplace.compiler import pipeline
    pipeline._check_parameter_space(total.py_func, _sig(600), total.compile(_sig(3)).options)
    with pytest.raises(CompileError, match="40,016 bytes of parameters, more than the 32,764"):
        pipeline._check_parameter_space(total.py_func, _sig(5000),
                                        total.compile(_sig(3)).options)
