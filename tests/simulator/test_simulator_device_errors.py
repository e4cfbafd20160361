"""The simulator where the device's code meets an error or a special value: errors Numba's
compiled code raises itself (a ``range`` step of 0, a tuple index out of range, a division by
zero under ``debug=True``) stop the thread as a ``raise`` does, and are raised with numba-cuda's
prefix under ``debug=True``; float -> int conversions saturate as PTX's ``cvt.rzi`` does; device
math gives C's / libdevice's special values where Python's ``math`` raises.

Expected values come from the GPU and its documentation, not from the simulator: the PTX ISA (cvt:
"for float-to-integer conversions, the result is clamped to the destination range by default")
and, for a NaN, what an H200 gives (INT64_MIN for a 64-bit result: the hardware's choice, not the
0 the ISA describes); the CUDA Math API / libdevice documentation of each function's special
cases (every value of ``test_libdevice_special_values`` and the int conversions were also checked
on an H200)."""

import inspect
import math
import re
import warnings

import numpy as np
import pytest

from conftest import line_of
from gpureplace import cuda, libdevice
from gpureplace.simulator.raises import KernelRaisedWarning

INT64_MAX, INT64_MIN = 2**63 - 1, -2**63
INT32_MAX, INT32_MIN = 2**31 - 1, -2**31
INF, NAN = math.inf, math.nan


@pytest.fixture(autouse=True)
def simulator(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")


def _prefix(func_name, func, text, tid, ctaid):
    """numba-cuda's prefix of a debug kernel's exception (compiler/exceptions.py)."""
    return (f"In function '{func_name}', file {inspect.getsourcefile(func)}, line "
            f"{line_of(func, text)}, tid={tid} ctaid={ctaid}: ")


def _same(got, expected):
    got, expected = [float(v) for v in got], [float(v) for v in expected]
    return all((math.isnan(g) and math.isnan(e)) or
               (g == e and math.copysign(1, g) == math.copysign(1, e))
               for g, e in zip(got, expected)) and len(got) == len(expected)


# ---------------------------------------------------------------------------------------------
# float -> int: cvt.rzi saturates


def _int_of(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = int(x[i])


def _round_floor(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i, 0] = round(x[i])
        out[i, 1] = math.floor(x[i])
        out[i, 2] = math.trunc(x[i])


SPECIAL = [1.5, -1.9, INF, -INF, NAN, 1e300, -1e300]
SATURATED = [1, -1, INT64_MAX, INT64_MIN, INT64_MIN, INT64_MAX, INT64_MIN]   # (NaN: INT64_MIN)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_int_of_a_float_saturates_as_cvt_rzi(dtype):
    k = cuda.jit(_int_of)
    with np.errstate(over="ignore"):
        x = np.array(SPECIAL, dtype)
    out = np.zeros(x.size, np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # nothing raised, nothing warned
        k[1, 8](x, out)
    assert out.tolist() == SATURATED                  # (1e300 is inf in float32)
    # what the compiled code does: one cvt.rzi.s64 of the float
    ptx = k.inspect_ptx((cuda.float64[:] if dtype is np.float64 else cuda.float32[:],
                         cuda.int64[:]))
    assert f"cvt.rzi.s64.f{np.dtype(dtype).itemsize * 8}" in ptx


def test_round_floor_trunc_of_special_floats_saturate():
    x = np.array([INF, -INF, NAN, 1e300, -2.5, 2.5])
    out = np.zeros((x.size, 3), np.int64)
    cuda.jit(_round_floor)[1, 8](x, out)
    assert out[:, 0].tolist() == [INT64_MAX, INT64_MIN, INT64_MIN, INT64_MAX, -2, 2]  # half even
    assert out[:, 1].tolist() == [INT64_MAX, INT64_MIN, INT64_MIN, INT64_MAX, -3, 2]
    assert out[:, 2].tolist() == [INT64_MAX, INT64_MIN, INT64_MIN, INT64_MAX, -2, 2]


def _int_of_int(u, out):
    out[0] = int(u[0])          # Numba: int(x) of an integer is x, of its own type


def test_int_of_an_unsigned_integer_keeps_it_unsigned():
    u = np.array([2**64 - 1], np.uint64)
    out = np.zeros(1)
    cuda.jit(_int_of_int)[1, 1](u, out)
    assert out[0] == float(2**64 - 1)


# ---------------------------------------------------------------------------------------------
# device math: C's special values


def _math_specials(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i, 0] = math.gamma(x[i])
        out[i, 1] = math.lgamma(x[i])


def test_gamma_and_lgamma_give_cs_special_values():
    x = np.array([200.0, 0.0, -0.0, -3.0, 1e308, INF, -INF, 1.0])
    out = np.zeros((x.size, 2))
    cuda.jit(_math_specials)[1, 8](x, out)
    # tgamma: overflow +inf; +-0 -> +-inf; negative integers and -inf NaN; +inf +inf
    assert _same(out[:, 0], [INF, INF, -INF, NAN, INF, INF, NAN, 1.0])
    # lgamma: the poles (0, -0, negative integers) +inf; overflow +inf; +-inf +inf; lgamma(1) +0
    assert out[0, 1] == pytest.approx(857.9336698258575, rel=1e-14)   # (libdevice's, to an ulp)
    assert _same(out[1:, 1], [INF, INF, INF, INF, INF, INF, 0.0])
    with np.errstate(over="ignore"):
        x32 = x.astype(np.float32)
    out32 = np.zeros((x.size, 2), np.float32)
    cuda.jit(_math_specials)[1, 8](x32, out32)
    assert _same(out32[:, 0], [INF, INF, -INF, NAN, INF, INF, NAN, 1.0])
    assert out32[0, 1] == pytest.approx(857.9336698258575, rel=1e-6)
    assert _same(out32[1:, 1], [INF, INF, INF, INF, INF, INF, 0.0])


def _ldexp(x, e, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = math.ldexp(x[i], e[i])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ldexp_overflows_to_infinity(dtype):
    x = np.array([1.0, -1.0, 1.0, 0.0, -0.0, INF], dtype)
    e = np.array([2000, 2000, -2000, 2000, 2000, 5], np.int32)
    out = np.zeros(x.size, dtype)
    cuda.jit(_ldexp)[1, 8](x, e, out)
    assert _same(out, [INF, -INF, 0.0, 0.0, -0.0, INF])


def _libdevice_specials(x, y, out, iout):
    out[0] = libdevice.fdim(x[0], x[0])                  # fdim(inf, inf) = +0
    out[1] = libdevice.round(y[0])                       # half away from zero: 0.4999... -> 0
    out[2] = libdevice.fma(2.0, 1e308, -x[0])            # the exact product, then + -inf
    out[3] = libdevice.fma(2.0, 1e308, 0.0)              # overflow: +inf
    out[4] = libdevice.sinpi(1.0 + y[1])                 # sin(pi) exactly: 0
    out[5] = libdevice.cospi(0.5 + y[1])                 # cos(pi / 2) exactly: 0
    out[6] = libdevice.ldexp(1.0, 2000 + int(y[1]))
    iout[0] = libdevice.ilogb(y[1])                      # ilogb(0): INT_MIN
    iout[1] = libdevice.ilogb(x[0])                      # ilogb(inf): INT_MAX
    iout[2] = libdevice.ilogb(x[1])                      # ilogb(NaN): INT_MIN
    iout[3] = libdevice.ilogbf(np.float32(x[0]))


def test_libdevice_special_values():
    x = np.array([INF, NAN])
    y = np.array([0.49999999999999994, 0.0])
    out = np.zeros(7)
    iout = np.zeros(4, np.int32)
    cuda.jit(_libdevice_specials)[1, 1](x, y, out, iout)
    assert _same(out, [0.0, 0.0, -INF, INF, 0.0, 0.0, INF])
    assert iout.tolist() == [INT32_MIN, INT32_MAX, INT32_MIN, INT32_MAX]


# ---------------------------------------------------------------------------------------------
# errors Numba raises itself: the thread stops (a warning), or debug=True raises them


def _range_step(out, step):
    i = cuda.grid(1)
    c = 0
    for _ in range(0, 10, step[i]):
        c += 1
    out[i] = c


def test_range_with_step_zero_stops_the_thread_as_a_raise_does():
    out = np.full(4, -1, np.int64)
    with pytest.warns(KernelRaisedWarning, match=r"2 threads raised ValueError\('range\(\) arg "
                                                 r"3 must not be zero'\) and stopped there"):
        cuda.jit(_range_step)[1, 4](out, np.array([1, 0, 3, 0]))
    assert out.tolist() == [10, -1, 4, -1]


def test_range_with_step_zero_raises_with_the_prefix_under_debug():
    out = np.full(4, -1, np.int64)
    prefix = _prefix("_range_step", _range_step, "in range(0, 10", [1, 0, 0], [0, 0, 0])
    with pytest.raises(ValueError, match=re.escape(prefix) + "range\\(\\) arg 3 must not be "
                                                             "zero$"):
        cuda.jit(debug=True, opt=False)(_range_step)[1, 4](out, np.array([1, 0, 3, 0]))
    assert out.tolist() == [-1, -1, -1, -1]       # (the failed launch copies nothing back)


def _tuple_index(out, idx):
    t = (1.0, 2.0, 3.0)
    i = cuda.grid(1)
    out[i] = t[idx[i]]


def _shape_index(ary):
    i = cuda.threadIdx.x
    if cuda.blockIdx.x == 1 and i == 2:
        ary[0] = ary.shape[-i]


def test_tuple_index_out_of_range_stops_the_thread():
    out = np.zeros(4)
    with pytest.warns(KernelRaisedWarning, match=r"1 thread raised IndexError\('tuple index out "
                                                 r"of range'\)"):
        cuda.jit(_tuple_index)[1, 4](out, np.array([0, 1, 5, -1]))
    assert out.tolist() == [1.0, 2.0, 0.0, 3.0]          # negative indices count from the end


def test_tuple_index_out_of_range_raises_with_the_prefix_under_debug():
    # as tests/jit/test_debug_exceptions.py checks it on the GPU: threadIdx 2 of block 1
    prefix = _prefix("_shape_index", _shape_index, "ary.shape[-i]", [2, 0, 0], [1, 0, 0])
    with pytest.raises(IndexError, match=re.escape(prefix) + "tuple index out of range$"):
        cuda.jit(debug=True)(_shape_index)[2, 3](np.zeros(2))


def _zdiv(x, y):
    i = cuda.grid(1)
    x[i] = x[i] // y[i]


def _zmod(x, y):
    i = cuda.grid(1)
    x[i] = x[i] % y[i]


@pytest.mark.parametrize("func, text", [(_zdiv, "x[i] // y[i]"), (_zmod, "x[i] % y[i]")])
def test_integer_division_by_zero_raises_with_the_prefix_under_debug(func, text):
    x, y = np.array([4, 4]), np.array([2, 0])
    prefix = _prefix(func.__name__, func, text, [1, 0, 0], [0, 0, 0])
    with pytest.raises(ZeroDivisionError, match=re.escape(prefix) + ".*by zero$"):
        cuda.jit(debug=True, opt=False)(func)[1, 2](x, y)
    assert x.tolist() == [4, 4]                   # nothing copied back, as on the GPU
    # without debug: Numba's NumPy error model, 0 and no exception
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cuda.jit(func)[1, 2](x, y)
    assert x.tolist() == [2 if func is _zdiv else 0, 0]


def _raising_helper(v):
    if v < 0:
        raise ValueError("negative")
    return v


def _calls_helper(x):
    i = cuda.grid(1)
    x[i] = _raising_helper(x[i])


def test_debug_prefix_names_the_device_function_that_raised():
    prefix = _prefix("_raising_helper", _raising_helper, "raise ValueError", [1, 0, 0],
                     [0, 0, 0])
    with pytest.raises(ValueError, match=re.escape(prefix) + "negative$"):
        cuda.jit(debug=True, opt=False)(_calls_helper)[1, 2](np.array([1.0, -1.0]))


def _synced_range(out, step):
    sm = cuda.shared.array(4, np.int64)
    i = cuda.threadIdx.x
    c = 0
    for _ in range(0, 8, step[i]):
        c += 1
    sm[i] = c
    cuda.syncthreads()
    out[i] = sm[(i + 1) % 4]


def test_a_thread_stopped_by_an_implicit_error_counts_as_arrived_at_a_barrier():
    out = np.full(4, -1, np.int64)
    with pytest.warns(KernelRaisedWarning, match="1 thread raised ValueError"):
        cuda.jit(_synced_range)[1, 4](out, np.array([1, 2, 0, 4]))
    # thread 2 stopped in its range() and wrote nothing; the others went past the barrier
    # (out[1] reads thread 2's shared slot, never written)
    assert out[[0, 2, 3]].tolist() == [4, -1, 8]
