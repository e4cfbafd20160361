"""``cuda.vectorize`` / ``cuda.guvectorize``: the loop a scalar picks (numba-cuda's
``_resolve_signature``), empty batches and core dimensions, and the ``out=`` accepted (its dtype
by NumPy's ``same_kind`` rule, a 1-tuple, its shape), in the simulator."""

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.config import settings


@pytest.fixture(autouse=True)
def sim(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


def _add(sigs=("float32(float32, float32)", "float64(float64, float64)")):
    @cuda.vectorize(list(sigs))
    def add(a, b):
        return a + b
    return add


def test_a_scalar_takes_the_loop_the_arrays_match():
    add = _add()
    x = np.arange(4, dtype=np.float32)
    for scalar in (1.0, 1, True, np.float64(1.0), np.int64(1)):
        r = add(x, scalar)
        assert r.dtype == np.float32, scalar
        np.testing.assert_array_equal(r, x + 1)
    assert add(cuda.to_device(x), 2.0).copy_to_host().dtype == np.float32
    assert add(np.float32(1), np.arange(3.0)).dtype == np.float64
    # scalars alone: numba-cuda's exact match on NumPy's types for them
    assert type(add(1.25, 2.5)) is np.float64
    assert type(add(np.float32(1.25), np.float32(2.5))) is np.float32
    # several loops fit (numba-cuda: "ambiguous"): NumPy's safe-casting rule picks
    assert type(add(1, 2)) is np.float64


def test_an_exact_loop_wins_over_an_earlier_one_casting_safely():
    add = _add(("float64(float64, float64)", "float32(float32, float32)"))
    assert add(np.ones(3, np.float32), np.ones(3, np.float32)).dtype == np.float32
    assert add(np.ones(3, np.int32), np.ones(3, np.int32)).dtype == np.float64   # cast safely


def test_a_python_int_out_of_the_loops_range_overflows():
    add = _add(("int8(int8, int8)",))
    assert add(np.ones(3, np.int8), 5).tolist() == [6, 6, 6]
    with pytest.raises(OverflowError):
        add(np.ones(3, np.int8), 300)


def _scale():
    @cuda.guvectorize(["void(float32[:], float32, float32[:])"], "(n),()->(n)")
    def scale(x, a, out):
        for i in range(x.shape[0]):
            out[i] = x[i] * a
    return scale


@pytest.mark.parametrize("shape", [(0, 3), (2, 0), (0,), (0, 0), (2, 0, 3)])
def test_guvectorize_on_an_empty_batch_or_core_dimension(shape):
    scale = _scale()
    r = scale(np.zeros(shape, np.float32), 2.0)
    assert r.shape == shape and r.dtype == np.float32
    out = np.zeros(shape, np.float32)
    assert scale(np.zeros(shape, np.float32), 2.0, out=out) is out
    d = scale(cuda.to_device(np.zeros(shape, np.float32)), 2.0)
    assert d.copy_to_host().shape == shape
    assert scale(np.ones((2, 3), np.float32), 2.0).tolist() == [[2.0] * 3] * 2


def test_guvectorize_an_empty_batch_of_a_reduction():
    @cuda.guvectorize(["void(float64[:], float64[:], float64[:])"], "(n),(n)->()")
    def dot(a, b, res):
        s = 0.0
        for i in range(a.shape[0]):
            s += a[i] * b[i]
        res[0] = s

    assert dot(np.zeros((0, 3)), np.zeros((0, 3))).shape == (0,)
    assert dot(np.zeros((2, 0)), np.zeros((2, 0))).tolist() == [0.0, 0.0]


def test_an_out_of_a_dtype_numpy_refuses_raises():
    add = _add(("float32(float32, float32)",))
    x = np.full(3, 0.75, np.float32)
    msg = (r"Cannot cast ufunc 'add' output from dtype\('float32'\) to dtype\('int32'\) with "
           r"casting rule 'same_kind'")
    out = np.zeros(3, np.int32)
    with pytest.raises(TypeError, match=msg):
        add(x, x, out=out)
    assert out.tolist() == [0, 0, 0]
    d_out = cuda.to_device(np.zeros(3, np.int32))
    with pytest.raises(TypeError, match=msg):
        add(x, x, out=d_out)
    wide = np.zeros(3, np.float64)                      # same kind: cast, as NumPy does
    assert add(x, x, out=wide) is wide and wide.tolist() == [1.5] * 3
    scale = _scale()
    with pytest.raises(TypeError, match=r"Cannot cast ufunc 'scale' output from "
                                        r"dtype\('float32'\) to dtype\('int16'\)"):
        scale(x, 2.0, out=np.zeros(3, np.int16))
    wide = np.zeros(3, np.float64)
    assert scale(x, 2.0, out=wide) is wide and wide.tolist() == [1.5] * 3


def test_vectorize_out_as_a_one_tuple_and_its_shape():
    add = _add()
    x = np.arange(3, dtype=np.float32)
    out = np.zeros(3, np.float32)
    assert add(x, x, out=(out,)) is out and out.tolist() == [0.0, 2.0, 4.0]
    with pytest.raises(ValueError, match="out= is a tuple of 2 arrays; a vectorized function "
                                         "has 1 output"):
        add(x, x, out=(out, out))
    # numba-cuda refuses an out= of another shape (NumPy would broadcast the inputs to it)
    with pytest.raises(ValueError, match=r"out has shape \(2, 3\), the broadcast inputs "
                                         r"\(3,\): out= must have the inputs' broadcast shape"):
        add(x, x, out=np.zeros((2, 3), np.float32))
