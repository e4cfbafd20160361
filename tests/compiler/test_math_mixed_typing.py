"""A math function of a float32 and an integer computes in the type numba-cuda gives it: its
``math.atan2`` / ``hypot`` / ``copysign`` / ``fmod`` / ``remainder`` templates take the float32
and a bool, int8, uint8 or int16 in float32, and a wider integer (a literal's int64 included)
makes the call float64; ``math.pow``'s exponent also takes uint16 and int32 in float32
(numba-cuda declares pow(float32, int32)).  NumPy's functions and the builtin ``pow`` of scalars
stay float32 with any integer, as Numba types them.  Before, every mix of a float32 and an
integer computed in float32 -- in the PTX and in the simulator alike.  The expected types are
numba-cuda's (its typing context, asked for each pair)."""

import math

import numpy as np
import pytest
from numba import types

from gpureplace import cuda

INTS = ["boolean", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
SMALL = {"boolean", "int8", "uint8", "int16"}
EXPONENT = SMALL | {"uint16", "int32"}


def device(body):
    ns = {"math": math, "np": np}
    exec(f"def f(a, b):\n    return {body}\n", ns)
    return cuda.jit(device=True)(ns["f"])


def restype(body, *argtypes):
    return device(body).compile(argtypes).restype


@pytest.mark.parametrize("name", ["atan2", "hypot", "copysign", "fmod", "remainder"])
@pytest.mark.parametrize("first", [True, False], ids=["float32-first", "int-first"])
def test_math_of_a_float32_and_an_integer_is_typed_as_numba_cuda(name, first):
    for it in INTS:
        args = (types.float32, getattr(types, it))
        want = types.float32 if it in SMALL else types.float64
        got = restype(f"math.{name}(a, b)", *(args if first else args[::-1]))
        assert got == want, (name, it, first, got)


def test_math_pow_takes_int32_exponents_in_float32():
    for it in INTS:
        exponent = restype("math.pow(a, b)", types.float32, getattr(types, it))
        base = restype("math.pow(a, b)", getattr(types, it), types.float32)
        assert exponent == (types.float32 if it in EXPONENT else types.float64), it
        assert base == (types.float32 if it in SMALL else types.float64), it


def test_a_literal_integer_is_an_int64():
    f32 = types.float32
    assert restype("math.atan2(a, 1)", f32, f32) == types.float64
    assert restype("math.pow(a, 2)", f32, f32) == types.float64
    assert restype("math.hypot(a, True)", f32, f32) == types.float32


@pytest.mark.parametrize("body", ["np.arctan2(a, b)", "np.power(a, b)", "np.hypot(a, b)",
                                  "np.copysign(a, b)", "pow(a, b)", "a ** b"])
def test_numpy_functions_and_pow_of_a_float32_stay_float32(body):
    for it in ("int32", "int64", "uint64"):
        assert restype(body, types.float32, getattr(types, it)) == types.float32, (body, it)


def test_cuda_fma_follows_the_same_rule():
    f32 = types.float32
    ns = {"cuda": cuda}
    exec("def g(a, b):\n    return cuda.fma(a, b, a)\n", ns)
    g = cuda.jit(device=True)(ns["g"])
    assert g.compile((f32, types.int16)).restype == f32
    assert g.compile((f32, types.int32)).restype == types.float64


@cuda.jit
def mixed(out, x, n):
    out[0] = math.atan2(x[0], n[0])
    out[1] = math.hypot(x[0], n[0])
    out[2] = math.pow(x[0], n[0])
    out[3] = math.copysign(n[0], x[0])
    out[4] = np.arctan2(x[0], n[0])


def test_the_simulator_and_the_ptx_compute_in_those_types():
    x, n = np.array([1.5], np.float32), np.array([16], np.int32)
    out = np.zeros(5)
    mixed[1, 1](out, x, n)
    assert out[0] == math.atan2(1.5, 16.0)                  # float64: exact to the double
    assert out[1] == math.hypot(1.5, 16.0)
    assert out[2] == float(np.float32(656.8408355712891))   # pow(float32, int32): float32
    assert out[3] == 16.0
    assert out[4] == float(np.arctan2(np.float32(1.5), np.float32(16.0)))   # np: float32
    ptx = mixed.compile("void(float64[::1], float32[::1], int32[::1])").ptx
    assert "cvt.f64.f32" in ptx and "cvt.rn.f64.s32" in ptx


def test_float32_to_the_most_negative_int64_power_terminates():
    """float32 ** int computes by squaring, with huge exponents through pow; the most negative
    int64 negated stays negative, and its shifts never reach 0: the device looped forever.
    (The device function's Python form, run with NumPy's int64 arithmetic as on the device, in
    a process of its own so that a loop cannot hang the suite.)"""
    import subprocess
    import sys
    program = ("import numpy as np\n"
               "from gpureplace.compiler.intrinsics.devicemath import _make_float_int_power\n"
               "f = _make_float_int_power(np.float32, True)\n"
               "print(f(np.float32(1.0), np.int64(-2**63)), f(np.float32(2.0), np.int64(-3)))\n")
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", program], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1.0", "0.125"]
