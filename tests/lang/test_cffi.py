"""CFFI in device code, as Numba offers it: ``ffi.from_buffer(array)`` is a typed pointer to the
array's elements (compiled, and in the simulator)."""

import numpy as np
import pytest

from conftest import assemble
from gpureplace import CompileError, cuda
from gpureplace.config import settings

cffi = pytest.importorskip("cffi")
ffi = cffi.FFI()


@cuda.jit
def _through_a_pointer(x, value):
    p = ffi.from_buffer(x)
    p[1] = value
    p[2] = p[1] * 2


def test_from_buffer_compiles_to_a_pointer_and_runs_in_the_simulator(monkeypatch):
    ptx = _through_a_pointer.inspect_ptx("void(float32[::1], float32)")
    assert "st.global.b32" in ptx or "st.global.f32" in ptx
    assemble(ptx)
    monkeypatch.setattr(settings, "backend", "simulator")
    for dtype in (np.float32, np.int64):
        x = np.zeros(4, dtype)
        _through_a_pointer[1, 1](x, 21)
        assert x.tolist() == [0, 21, 42, 0]


def test_a_strided_array_is_refused_with_numbas_reason():
    with pytest.raises(CompileError, match="from_buffer\\(\\) unsupported on non-contiguous"):
        _through_a_pointer.compile("void(float32[:], float32)")
