"""NumPy's reductions of whole arrays in device code: ``np.all``, ``any``, ``sum``, ``prod``,
``mean``, ``var``, ``std``, ``min``, ``max``, ``nanmin``, ``nanmax``, ``nansum``, ``nanprod``,
``nanmean``, ``count_nonzero`` (numba-cuda's test_array_reductions), on arrays of any layout,
global constant arrays included.  CPU: each compiles, assembles with ptxas and gives NumPy's
result in the simulator; GPU: the same kernels on the device."""

import numpy as np
import pytest
from numba.misc.literal import literal_unroll

from gpureplace import cuda
from gpureplace.errors import CompileError
from lang_support import _compile

REDUCTIONS = ("all", "any", "sum", "prod", "mean", "var", "std", "min", "max", "nanmin",
              "nanmax", "nansum", "nanprod", "nanmean", "count_nonzero")

CASES = (
    np.float64([1.0, 0.0, 2.5, -0.0, 1.0, -1.5]),
    np.float64([[1.0, 1.5], [np.inf, -2.0]]),
    np.float64([[0.0, -0.0], [1.5, 0.0]])[::-1],
    np.float64([np.nan, -1.5, 2.5, np.nan, 3.0]),
    np.float64([np.nan, np.nan]),
)
INT_CASE = np.int64([[3, 0, -7], [2, 0, 9]])


def _kernel(fn):
    ns = {"np": np, "cuda": cuda, "literal_unroll": literal_unroll, "CASES": CASES,
          "INT_CASE": INT_CASE}
    exec(f"def reduce_{fn}(out, arr):\n"
         f"    i = 0\n"
         f"    for case in literal_unroll(CASES):\n"
         f"        out[i] = np.{fn}(case)\n"
         f"        i += 1\n"
         f"    out[i] = np.{fn}(INT_CASE)\n"
         f"    out[i + 1] = np.{fn}(arr)\n", ns)
    return cuda.jit(ns[f"reduce_{fn}"])


class _quiet:
    """NumPy's RuntimeWarnings (an all-NaN slice, the mean of NaNs) are not what is tested."""

    def __enter__(self):
        import warnings
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        self._w.__exit__(*exc)


def _expected(fn, arr):
    with _quiet():
        return np.array([float(getattr(np, fn)(c)) for c in CASES + (INT_CASE, arr)])


_ARG = np.arange(12.0).reshape(3, 4)[:, ::2] - 3.0          # strided, 2-D


@pytest.mark.parametrize("fn", REDUCTIONS)
def test_reduction_compiles_and_assembles(fn):
    _compile(_kernel(fn), "void(float64[::1], float64[:, :])")


@pytest.mark.parametrize("fn", REDUCTIONS)
def test_reduction_in_the_simulator(fn, monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    out = np.zeros(len(CASES) + 2)
    with _quiet():
        _kernel(fn)[1, 1](out, _ARG)
    np.testing.assert_allclose(out, _expected(fn, _ARG), rtol=1e-15, equal_nan=True)


@pytest.mark.gpu
@pytest.mark.parametrize("fn", REDUCTIONS)
def test_reduction_gpu(fn):
    import cupy as cp
    out = cp.zeros(len(CASES) + 2)
    _kernel(fn)[1, 1](out, cp.asarray(_ARG))
    np.testing.assert_allclose(out.get(), _expected(fn, _ARG), rtol=1e-14, equal_nan=True)


def test_reductions_that_would_allocate_are_refused_by_name():
    @cuda.jit
    def cumulative(out, a):
        out[0] = np.cumsum(a)[0]

    with pytest.raises(CompileError) as info:
        cumulative.compile("void(float64[::1], float64[::1])")
    assert "np.cumsum() returns an array that is not one of its arguments, which device code " \
           "cannot allocate (there is no heap)" in str(info.value)
    assert info.value.lineno == cumulative.py_func.__code__.co_firstlineno + 2
