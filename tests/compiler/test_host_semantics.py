"""The compiled code of device functions, run on this CPU (tests/host_exec.py), against Python.

The simulator runs Python source, so these are the CPU suite's only check that what the
compiler *lowers* computes what Python computes: range counts (compiler/rangeloops.py, whose
first unsigned form miscounted ranges whose stop - start exceeds int64, found on the H200),
integer floor division and remainder, conversions.
"""

import math
import random

import pytest

from gpureplace import cuda
from host_exec import DeviceRaised, host_function
from lang_support import RANGE_EDGES

I64 = 2**63


@cuda.jit(device=True)
def range_count(a, b, c):
    n = 0
    for _ in range(a, b, c):
        n += 1
    return n


@cuda.jit(device=True)
def range_checksum(a, b, c):
    # every value, in order: a weighted sum that a wrong first value, step or count changes
    s = 0
    k = 1
    for v in range(a, b, c):
        s += (v % 1000003) * k
        k += 1
    return s


def _py_checksum(a, b, c):
    return sum((v % 1000003) * k for k, v in enumerate(range(a, b, c), 1))


def _random_ranges(n, seed, bits):
    """Ranges of at most 40 values with starts, steps and spans up to 2**bits, in int64."""
    rng = random.Random(seed)
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    out = []
    while len(out) < n:
        a, c = rng.randint(lo, hi), rng.choice([1, -1]) * rng.randint(1, 2 ** (bits - 1))
        b = a + c * rng.randint(-3, 40) + rng.randint(-abs(c) + 1, abs(c) - 1)
        if lo <= b <= hi and -(2**63) <= c < 2**63:
            out.append((a, b, c))
    return out


@pytest.mark.parametrize("ty,bits", [("int64", 64), ("int32", 32)])
def test_range_counts_compiled_equal_python(ty, bits):
    count = host_function(range_count, f"int64({ty}, {ty}, {ty})")
    checksum = host_function(range_checksum, f"int64({ty}, {ty}, {ty})")
    lim = 2 ** (bits - 1)
    edges = [r for r in RANGE_EDGES if all(-lim <= v < lim for v in r)]
    cases = edges + _random_ranges(400, 7, bits) + _random_ranges(200, 8, 12)
    for a, b, c in cases:
        assert count(a, b, c) == len(range(a, b, c)), (ty, a, b, c)
        assert checksum(a, b, c) == _py_checksum(a, b, c), (ty, a, b, c)


def test_range_of_step_zero_raises_in_compiled_code():
    count = host_function(range_count, "int64(int64, int64, int64)")
    with pytest.raises(DeviceRaised):
        count(0, 10, 0)
    assert count(0, 10, 1) == 10


@cuda.jit(device=True)
def floordiv(a, b):
    return a // b


@cuda.jit(device=True)
def remainder(a, b):
    return a % b


@pytest.mark.parametrize("ty,bits", [("int64", 64), ("int32", 32)])
def test_integer_floor_division_and_remainder_compiled_equal_python(ty, bits):
    div = host_function(floordiv, f"{ty}({ty}, {ty})")
    rem = host_function(remainder, f"{ty}({ty}, {ty})")
    lim = 2 ** (bits - 1)
    rng = random.Random(3)
    values = [0, 1, -1, 2, -2, 3, -3, 7, -7, lim - 1, -lim, -lim + 1]
    values += [rng.randint(-lim, lim - 1) for _ in range(60)]
    values += [rng.randint(-100, 100) for _ in range(40)]
    for a in values:
        for b in values:
            if b == 0 or (a == -lim and b == -1):      # a ZeroDivisionError; an overflow
                continue
            assert div(a, b) == a // b, (ty, a, b)
            assert rem(a, b) == a % b, (ty, a, b)


@cuda.jit(device=True)
def to_int(x):
    return int(x)


def test_float_to_integer_conversion_compiled_equals_python():
    conv = host_function(to_int, "int64(float64)")
    rng = random.Random(5)
    xs = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.0**52 + 0.5, -(2.0**53), 1e18, -1e18]
    xs += [rng.uniform(-1e6, 1e6) for _ in range(200)]
    for x in xs:
        assert conv(x) == int(x), x


@cuda.jit(device=True)
def uses_libdevice(x):
    return math.floor(x)


def test_host_function_refuses_code_for_the_gpu_target():
    with pytest.raises(TypeError, match="__nv_floor"):
        host_function(uses_libdevice, "int64(float64)")
