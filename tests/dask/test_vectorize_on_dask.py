"""``cuda.vectorize`` / ``cuda.guvectorize`` objects called on Dask arrays stay lazy, one task per
block, as NumPy's ufuncs do on Dask arrays: before, the whole array was computed into the client
and the function run there, returning a NumPy array."""

import numpy as np
import pytest

from gpureplace import cuda

da = pytest.importorskip("dask.array")
import dask  # noqa: E402


@cuda.vectorize(["float64(float64, float64)", "float32(float32, float32)"])
def axpy(v, w):
    return 2.0 * v + w


@cuda.guvectorize(["void(float64[:], float64[:])"], "(n)->(n)")
def doubled(a, out):
    for i in range(a.shape[0]):
        out[i] = 2.0 * a[i]


def test_vectorize_on_dask_arrays_is_lazy_and_blockwise(monkeypatch):
    calls = []
    original = axpy.__class__.__call__

    def counting(self, *args, **kw):
        calls.append(tuple(type(a).__name__ for a in args))
        return original(self, *args, **kw)

    monkeypatch.setattr(axpy.__class__, "__call__", counting)
    x = da.from_array(np.arange(12.0).reshape(3, 4), chunks=(1, 4))
    y = da.from_array(np.arange(4.0), chunks=4)
    got = axpy(x, y)                                   # broadcast (3, 4) with (4,)
    assert isinstance(got, da.Array) and got.shape == (3, 4) and got.dtype == np.float64
    calls.clear()
    with dask.config.set(scheduler="sync"):
        result = got.compute()
    np.testing.assert_array_equal(result, 2.0 * np.arange(12.0).reshape(3, 4) + np.arange(4.0))
    assert calls.count(("ndarray", "ndarray")) == 3       # one call per block
    # a scalar with a Dask array; the float32 loop kept
    z = axpy(da.from_array(np.ones(6, np.float32), chunks=2), np.float32(1))
    assert z.dtype == np.float32
    np.testing.assert_array_equal(z.compute(scheduler="sync"), np.full(6, 3.0, np.float32))


def test_guvectorize_on_dask_arrays_is_lazy():
    m = da.from_array(np.arange(20.0).reshape(4, 5), chunks=(2, 5))
    got = doubled(m)
    assert isinstance(got, da.Array) and got.shape == (4, 5)
    np.testing.assert_array_equal(got.compute(scheduler="sync"), 2.0 * np.arange(20.0).reshape(4, 5))


def test_out_with_dask_arrays_is_refused_by_name():
    x = da.ones(4, chunks=2)
    with pytest.raises(TypeError, match=r"axpy: out= is not taken with Dask arrays"):
        axpy(x, x, out=np.empty(4))
    with pytest.raises(TypeError, match=r"doubled: out= is not taken with Dask arrays"):
        doubled(da.ones((2, 3), chunks=(1, 3)), np.empty((2, 3)))


def test_vectorize_broadcasts_blocks_chunked_otherwise_and_numpy_operands():
    """(apply_gufunc refused "Dimension '__loopdim1__' with different chunksize present")"""
    xn = np.arange(12.0).reshape(3, 4)
    x = da.from_array(xn, chunks=(2, 3))
    row = np.arange(4.0)
    with dask.config.set(scheduler="sync"):
        for other, want in ((row, 2 * xn + row), (x.rechunk((3, 2)), 3 * xn),
                            (da.from_array(row, chunks=2), 2 * xn + row)):
            got = axpy(x, other)
            assert isinstance(got, da.Array)
            np.testing.assert_array_equal(got.compute(), want)


def test_a_dtype_no_signature_takes_is_refused_as_for_numpy_arrays():
    """(Dask's "dtype inference failed in apply_gufunc ... specify output_dtypes", a keyword
    the function does not take)"""
    z = da.from_array(np.ones(4, np.complex128), chunks=2)
    with pytest.raises(TypeError, match=r"axpy: no signature takes input types "
                                        r"\(complex128, float64\) safely"):
        axpy(z, np.ones(4))
