"""datetime64 / timedelta64 in kernels: arrays (host arrays are copied as raw int64 counts),
scalars as arguments (their int64 count), and Numba's datetime arithmetic and comparisons."""

import numpy as np

from conftest import assemble
from gpureplace import cuda, simulator
from numba.np.numpy_support import from_dtype

D = from_dtype(np.dtype("datetime64[D]"))
T = from_dtype(np.dtype("timedelta64[D]"))


@cuda.jit
def _difference(start, end, delta):
    for i in range(cuda.grid(1), delta.size, cuda.gridsize(1)):
        delta[i] = end[i] - start[i]


@cuda.jit
def _scalars(dates, target, delta, matches, shifted):
    for i in range(cuda.grid(1), matches.size, cuda.gridsize(1)):
        matches[i] = dates[i] == target
        shifted[i] = dates[i] - delta


def test_datetime_kernels_compile_and_assemble():
    assemble(_difference.compile((D[::1], D[::1], T[::1])).ptx)
    assemble(_scalars.compile((D[::1], D, T, cuda.boolean[::1], D[::1])).ptx)


def test_datetime_arguments_pass_their_int64_counts():
    from gpureplace.runtime.arguments import value_key
    key, values = value_key(np.datetime64("2005-02-06", "D"))
    assert key[0] == "scalar" and key[1] == np.dtype("datetime64[D]")
    assert values == (int(np.datetime64("2005-02-06", "D").view(np.int64)),)


def test_datetime_arithmetic_in_the_simulator():
    dates = np.arange("2005-02", "2006-02", dtype="datetime64[D]")
    later = dates + np.arange(dates.size) * 3
    delta = np.zeros_like(dates, dtype="timedelta64[D]")
    simulator.run(_difference, 1, 32, dates, later, delta)
    np.testing.assert_array_equal(delta, later - dates)
    matches = np.zeros(dates.size, np.bool_)
    shifted = np.zeros_like(dates)
    simulator.run(_scalars, 1, 32, dates, dates[5], dates[6] - dates[5], matches, shifted)
    assert list(np.flatnonzero(matches)) == [5]
    np.testing.assert_array_equal(shifted, dates - (dates[6] - dates[5]))


def test_vectorize_infers_the_return_type_of_argument_only_signatures(monkeypatch):
    """``vectorize([(datetime_t, datetime_t)])``: Numba's form without a return type; the
    function's (here a timedelta64) is used."""
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")

    @cuda.vectorize([(D, D), "float64(float64, float64)"])
    def timediff(start, end):
        return end - start
    assert timediff.types[0] == "MM->m"
    dates = np.arange("2005-02", "2005-03", dtype="datetime64[D]")
    later = dates + 7
    np.testing.assert_array_equal(timediff(dates, later), later - dates)
