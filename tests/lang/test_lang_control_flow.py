"""Booleans and control flow in the kernel language: and / or / not, range with 1-3 arguments,
for / while, break / continue, if / elif / else, and a raising thread that stops.

Part of the Python subset of the kernel language, as Numba supports it.  Each feature has a kernel
below; CPU tests compile it (``kernel.compile(sig)``), assemble the PTX with ptxas and check the
PTX where it proves something; GPU tests (``@pytest.mark.gpu``) launch the same kernels on CuPy
arrays and compare with NumPy or with the plain Python semantics of the same code.  Shared helpers:
tests/lang_support.py.
"""

import math

import numpy as np
import pytest
from numba import types

from gpureplace import cuda
from lang_support import RANGE_EDGES as _RANGE_EDGES, THREADS, _compile, _cp, _grid


# =============================================================================================
# Booleans


@cuda.jit
def bool_logic(a, b, x, flag, out, count):
    i = cuda.grid(1)
    if i < out.size:
        p = a[i] and not b[i]
        q = (x[i] > 0.5) != flag
        out[i] = p or q
        count[i] = a[i] + b[i] + flag


BOOL_SIG = (types.boolean[::1], types.boolean[::1], types.float64[::1], types.boolean,
            types.boolean[::1], types.int32[::1])


def test_bool_compiles():
    _compile(bool_logic, BOOL_SIG)


@pytest.mark.gpu
@pytest.mark.parametrize("flag", [True, False])
def test_bool_gpu(flag):
    cp = _cp()
    rng = np.random.default_rng(4)
    a, b = rng.random(300) < 0.5, rng.random(300) < 0.5
    x = rng.random(300)
    out = cp.zeros(300, dtype=np.bool_)
    count = cp.zeros(300, dtype=np.int32)
    bool_logic[_grid(300), THREADS](cp.asarray(a), cp.asarray(b), cp.asarray(x), flag, out, count)
    np.testing.assert_array_equal(out.get(), (a & ~b) | ((x > 0.5) != flag))
    np.testing.assert_array_equal(count.get(), a.astype(np.int32) + b + int(flag))


# =============================================================================================
# Control flow: range with 1-3 arguments, for / while, break / continue, if / elif / else


def control_body(n):
    """Plain Python: compiled as a helper in the kernel, run as-is for the host reference."""
    steps = 0
    v = n
    while True:
        if v == 1:
            break
        if v % 2 == 0:
            v //= 2
            steps += 1
            continue
        v = 3 * v + 1
        steps += 1
    acc = 0
    for k in range(n % 7):
        acc += k
    for k in range(2, n % 11):
        acc += 2 * k
    for k in range(n % 13, -1, -3):
        acc += 3 * k
    for k in range(20):
        if k == n % 5:
            continue
        if k > n % 17:
            break
        acc += 1
    j = 0
    while j < n % 9:
        j += 2
    if n % 3 == 0:
        c = 10
    elif n % 3 == 1:
        c = 20
    else:
        c = 30
    return steps, acc + j, c


@cuda.jit
def control_flow(ns, out):
    i = cuda.grid(1)
    if i >= ns.size:
        return
    steps, acc, c = control_body(ns[i])
    out[0, i] = steps
    out[1, i] = acc
    out[2, i] = c


def test_control_flow_compiles():
    _compile(control_flow, "void(int64[::1], int64[:, ::1])")


@pytest.mark.gpu
def test_control_flow_gpu():
    cp = _cp()
    ns = np.arange(1, 501, dtype=np.int64)
    out = cp.zeros((3, ns.size), dtype=np.int64)
    control_flow[_grid(ns.size), THREADS](cp.asarray(ns), out)
    ref = np.array([control_body(int(n)) for n in ns]).T
    np.testing.assert_array_equal(out.get(), ref)


# =============================================================================================
# Exceptions: a raising thread stops (numba-cuda without debug=True)


@cuda.jit
def raises_on_negative(x, out):
    i = cuda.grid(1)
    if i < x.size:
        if x[i] < 0:
            raise ValueError("negative")
        out[i] = math.sqrt(x[i])


def test_raise_compiles():
    _compile(raises_on_negative, "void(float64[::1], float64[::1])")


@pytest.mark.gpu
@pytest.mark.gpu_only    # the simulator raises the exception instead, naming the thread
def test_raise_stops_the_thread_gpu():
    cp = _cp()
    x = np.array([4.0, -1.0, 9.0, -2.0])
    out = cp.full(4, 7.0)
    raises_on_negative[1, 32](cp.asarray(x), out)
    np.testing.assert_array_equal(out.get(), [2.0, 7.0, 3.0, 7.0])


# range's count of values (compiler/rangeloops.py computes it as ceil(max(span, 0) / |step|) with
# an unsigned division, for ScalarEvolution): every sign and edge, int64 and int32, against Python.
@cuda.jit
def range_counts(starts, stops, steps, out):
    i = cuda.grid(1)
    if i < starts.size:
        n = 0
        total = 0
        for v in range(starts[i], stops[i], steps[i]):
            n += 1
            total += v % 1000
        out[0, i] = n
        out[1, i] = total


@cuda.jit
def range_counts32(starts, stops, steps, out):
    i = cuda.grid(1)
    if i < starts.size:
        n = 0
        for v in range(starts[i], stops[i], steps[i]):
            n += 1
        out[i] = n


def test_range_counts_compile():
    _compile(range_counts, "void(int64[::1], int64[::1], int64[::1], int64[:, ::1])")
    _compile(range_counts32, "void(int32[::1], int32[::1], int32[::1], int64[::1])")


@pytest.mark.gpu
def test_range_counts_gpu():
    cp = _cp()
    starts, stops, steps = (np.array(c, dtype=np.int64) for c in zip(*_RANGE_EDGES))
    out = cp.zeros((2, starts.size), dtype=np.int64)
    range_counts[_grid(starts.size), THREADS](cp.asarray(starts), cp.asarray(stops),
                                               cp.asarray(steps), out)
    got = out.get()
    for k, (a, b, c) in enumerate(_RANGE_EDGES):         # (each runs at most 21 values)
        assert (got[0, k], got[1, k]) == (len(range(a, b, c)),
                                          sum(v % 1000 for v in range(a, b, c))), (a, b, c)
    small = [(a, b, c) for a, b, c in _RANGE_EDGES if max(abs(a), abs(b), abs(c)) < 2**31]
    s32, e32, st32 = (np.array(c, dtype=np.int32) for c in zip(*small))
    out32 = cp.zeros(s32.size, dtype=np.int64)
    range_counts32[_grid(s32.size), THREADS](cp.asarray(s32), cp.asarray(e32),
                                             cp.asarray(st32), out32)
    assert out32.get().tolist() == [len(range(a, b, c)) for a, b, c in small]
