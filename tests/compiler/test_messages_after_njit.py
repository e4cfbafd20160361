"""A notebook that mixes CPU and GPU code: once a CPU ``numba.njit`` function has compiled, Numba's
set operators are registered, and they refuse numbers in their own words ("All arguments must be
Sets, got (float64, int64)") -- which became the reason given for ``v ^= b[i]`` on a float,
speaking of sets the user never wrote.  The reason stays gpureplace's own."""

from conftest import python_process

PROGRAM = r"""
import numba
from gpureplace import cuda
from gpureplace.errors import CompileError

@cuda.jit
def kern(a, b, out):
    i = cuda.grid(1)
    v = a[i] * 0.5
    v ^= b[i]
    out[i] = v

def reason():
    try:
        kern.compile("void(int64[:], int64[:], float64[:])")
    except CompileError as exc:
        return str(exc).split(": ", 1)[1]

before = reason()
numba.njit(lambda x: x + 1)(1)
print(before)
print(reason())
"""


def test_the_reason_for_an_operator_on_floats_is_the_same_after_an_njit(tmp_path):
    out = python_process(PROGRAM, GPUREPLACE_CACHE_DIR=str(tmp_path),
                         GPUREPLACE_BACKEND="simulator").strip().splitlines()
    assert out[-2] == out[-1] == \
        "ixor() has no implementation for argument types (float64, int64)"
