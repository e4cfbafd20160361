"""float16 with an int8 or a bool stays in half precision, as numba-cuda types it (its
``_fp16_binary_operator``: the other operand converts to float16 safely); before, gpureplace
widened both to float32.  float16 with a uint8 or a wider integer is widened as Numba does
(uint8 reaches float16 only through int16, which does not convert safely)."""

import re

import numpy as np

from gpureplace import cuda

SIG = "void(float16[:], int8[:], boolean[:], uint8[:], float32[:], boolean[:])"


def _kernel():
    @cuda.jit
    def mixed(h, i8, b, u8, out, less):
        out[0] = h[0] + i8[0]          # float16
        out[1] = h[0] * b[0]           # float16
        out[2] = h[0] + u8[0]          # float32
        out[3] = i8[0] - h[0]          # float16
        less[0] = h[0] < i8[0]         # compared in half precision
    return mixed


def test_the_ptx_computes_in_half_where_numba_cuda_types_float16():
    ptx = _kernel().compile(SIG).ptx
    ops = re.findall(r"\b(add|sub|mul)\.(rn\.f16|f32)\b", ptx)
    assert sorted(ops) == sorted([("add", "rn.f16"), ("mul", "rn.f16"), ("add", "f32"),
                                  ("sub", "rn.f16")]), ops
    assert "setp.lt.f16" in ptx


def test_the_simulator_rounds_as_the_compiled_code_does():
    # 4096 + 1: float16 has no 4097 (its spacing is 4 there), float32 has
    h = np.array([4096.0], np.float16)
    i8, b, u8 = np.array([1], np.int8), np.array([True]), np.array([1], np.uint8)
    out, less = np.zeros(4, np.float32), np.zeros(1, np.bool_)
    _kernel()[1, 1](h, i8, b, u8, out, less)
    assert out[0] == 4096.0               # in half precision
    assert out[1] == 4096.0
    assert out[2] == 4097.0               # widened to float32
    assert out[3] == -4096.0              # 1 - 4096 = -4095: halfway, to even in half
    assert not less[0]
