"""What the compiled code refuses or converts, the simulator runs as the user meant it:

- ``breakpoint()`` / ``pdb.set_trace()`` in a kernel stop in the debugger in the simulator (the
  compile to PTX, which refuses them, is skipped for that kernel, as with
  ``GPUREPLACE_SIM_COMPILE=0``), at the kernel's line, in the thread that reached them;
- a float index of a 1-D array given to an atomic is converted to intp as the compiled code
  converts it (numba-cuda's ``(ary, intp, dtype)`` signature; PTX ``cvt.rzi``), not refused.
"""

import sys

import numpy as np
import pytest

from gpureplace import CompileError, cuda


def _stops(a):
    i = cuda.grid(1)
    if i == 1:
        breakpoint()
    a[i] = a[i] * 2.0


def test_breakpoint_stops_in_the_simulator_at_the_kernels_line(monkeypatch):
    seen = []

    def hook(*args, **kwargs):
        frame = sys._getframe(1)
        seen.append((frame.f_code.co_name, frame.f_lineno, int(frame.f_locals["i"])))
    monkeypatch.setattr(sys, "breakpointhook", hook)
    k = cuda.jit(_stops)
    a = np.arange(4, dtype=np.float32)
    k[1, 4](a)
    line = _stops.__code__.co_firstlineno + 3
    assert seen == [("_stops", line, 1)]            # the one thread that reached it, once
    assert a.tolist() == [0.0, 2.0, 4.0, 6.0]       # and the kernel ran on
    with pytest.raises(CompileError, match="only in the CPU simulator"):
        k.compile("void(float32[::1])")             # the PTX path still refuses it


def _histogram(h, x):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(h, x[i] // 0.5, 1)


def test_a_float_index_of_a_1d_atomic_is_truncated_as_the_compiled_code_does():
    k = cuda.jit(_histogram)
    h = np.zeros(4, np.int32)
    x = np.array([1.2, 0.3, 1.9, 0.7, 1.4])          # bins 2, 0, 3, 1, 2
    k[1, 8](h, x)
    assert h.tolist() == [1, 1, 2, 1]
    assert "cvt.rzi.s64.f64" in k.inspect_ptx("void(int32[::1], float64[::1])")
