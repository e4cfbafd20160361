"""``cuda.guvectorize`` functions that write into an input (an in-place row sort: numba-cuda
runs them, the writes reaching a device input, a host input being a copy), broadcast inputs such
a function would write from many threads at once (refused, naming the argument), and
``cuda.reduce``'s ``size`` / empty-array edges as numba-cuda's ``Reduce.__call__`` has them."""

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.config import settings


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


def _sort_rows():
    @cuda.guvectorize(["void(float64[:], float64[:])"], "(n)->()")
    def smallest_after_sort(a, out):
        for i in range(1, a.shape[0]):          # insertion sort of the row, in place
            v = a[i]
            j = i - 1
            while j >= 0 and a[j] > v:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = v
        out[0] = a[0]
    return smallest_after_sort


def _sort_and_scale():
    @cuda.guvectorize(["void(float64[:], float64, float64[:])"], "(n),()->()")
    def sort_and_scale(a, s, out):
        for i in range(1, a.shape[0]):
            v = a[i]
            j = i - 1
            while j >= 0 and a[j] > v:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = v
        out[0] = a[0] * s
    return sort_and_scale


def _add_row():
    @cuda.guvectorize(["void(float64[:], float64[:], float64[:])"], "(n),(n)->(n)")
    def add_row(a, b, out):                     # reads its inputs only
        for i in range(a.shape[0]):
            out[i] = a[i] + b[i]
    return add_row


def _host(d):
    return d.copy_to_host() if hasattr(d, "copy_to_host") else np.asarray(d)


def _check_inputs_written(dev):
    """The same calls on either backend; ``dev`` makes a device array."""
    f = _sort_rows()
    x = np.array([[3.0, 1.0, 2.0], [9.0, 7.0, 8.0]])
    # a host input: the function gets a copy (numba-cuda copies it to the device and not back)
    np.testing.assert_array_equal(f(x), [1.0, 7.0])
    np.testing.assert_array_equal(x, [[3.0, 1.0, 2.0], [9.0, 7.0, 8.0]])
    # a device input: written where it is
    d = dev(x)
    np.testing.assert_array_equal(_host(f(d)), [1.0, 7.0])
    np.testing.assert_array_equal(_host(d), [[1.0, 2.0, 3.0], [7.0, 8.0, 9.0]])
    # several loop dimensions of a strided device view: rows through a copy, written back
    y = np.arange(24.0)[::-1].reshape(2, 3, 4).copy()
    d = dev(y)
    view = d[:, ::2]
    np.testing.assert_array_equal(_host(f(view)), np.sort(y[:, ::2], axis=-1)[..., 0])
    want = y.copy()
    want[:, ::2] = np.sort(y[:, ::2], axis=-1)
    np.testing.assert_array_equal(_host(d), want)
    # loop dimensions of as many elements as the loop's ((3,) against (1, 3)): not a broadcast
    g = _add_row_and_bump()
    a = dev(np.zeros((3, 2)))
    r = g(a, np.ones((1, 3, 2)))
    np.testing.assert_array_equal(_host(r), np.ones((1, 3, 2)))
    np.testing.assert_array_equal(_host(a), np.full((3, 2), 5.0))


def _add_row_and_bump():
    @cuda.guvectorize(["void(float64[:], float64[:], float64[:])"], "(n),(n)->(n)")
    def add_and_bump(a, b, out):
        for i in range(a.shape[0]):
            out[i] = a[i] + b[i]
            a[i] = 5.0
    return add_and_bump


def _check_broadcast_inputs(dev):
    g = _add_row_and_bump()
    m = np.arange(6.0).reshape(3, 2)
    # one row for three calls, which write it: refused, whichever side it is on
    for row in (np.array([2.0, 1.0]), dev(np.array([2.0, 1.0]))):
        with pytest.raises(ValueError, match=r"argument 0 \(shape \(2,\)\) is broadcast over "
                                             r"the loop dimensions \(3,\).*writes it"):
            g(row, m)
    with pytest.raises(ValueError, match=r"argument 0 \(shape \(1, 2\)\) is broadcast over "
                                         r"the loop dimensions \(2, 3\)"):
        g(np.array([[2.0, 1.0]]), np.zeros((2, 3, 2)))
    with pytest.raises(ValueError, match=r"argument 0 .*broadcast.*\(4,\).*writes it"):
        _sort_and_scale()(np.array([3.0, 2.0, 1.0]), np.arange(4.0))
    # a broadcast input only read: as NumPy's broadcasting
    h = _add_row()
    np.testing.assert_array_equal(_host(h(np.array([10.0, 20.0]), m)), m + [10.0, 20.0])
    np.testing.assert_array_equal(_host(h(dev(np.array([10.0, 20.0])), dev(m))), m + [10, 20])
    # the written argument at the loop's shape, the other broadcast: fine
    row = dev(np.array([1.0, 1.0]))
    a = dev(np.zeros((3, 2)))
    np.testing.assert_array_equal(_host(g(a, row)), np.ones((3, 2)))
    np.testing.assert_array_equal(_host(a), np.full((3, 2), 5.0))
    np.testing.assert_array_equal(_host(row), [1.0, 1.0])


def test_a_gufunc_writing_its_input(sim):
    _check_inputs_written(cuda.to_device)


def test_a_broadcast_input_the_function_writes_is_refused(sim):
    _check_broadcast_inputs(cuda.to_device)


def test_a_device_input_converted_for_the_signature_cannot_be_written(sim):
    f = _sort_rows()
    d = cuda.to_device(np.array([[3, 1, 2]], np.float32))
    with pytest.raises(TypeError, match="argument 0 is a device array of float32.*float64"):
        f(d)
    np.testing.assert_array_equal(_host(f(np.array([[3, 1, 2]], np.float32))), [1.0])
    # one only read is converted as before
    h = _add_row()
    np.testing.assert_array_equal(_host(h(d, np.zeros(3))), [[3.0, 1.0, 2.0]])


def test_an_empty_loop_launches_nothing(sim):
    g = _add_row_and_bump()
    r = g(np.zeros((0, 2)), np.ones((1, 2)))
    assert r.shape == (0, 2)


@pytest.mark.gpu
def test_inputs_written_on_the_gpu():
    _check_inputs_written(cuda.to_device)
    _check_broadcast_inputs(cuda.to_device)


# -- cuda.reduce -----------------------------------------------------------------------------

def _add(a, b):
    return a + b


sum_reduce = cuda.reduce(_add)


def test_an_empty_reduction_returns_init_and_leaves_res(sim):
    res = cuda.to_device(np.array([-1.0]))
    out = sum_reduce(np.zeros(0), res=res, init=2.5)        # numba-cuda: ``return init``
    assert out == 2.5 and isinstance(out, np.float64)
    assert res.copy_to_host()[0] == -1.0
    x = np.arange(10.0)
    assert sum_reduce(x, size=0, res=res, init=4) == 4.0
    assert res.copy_to_host()[0] == -1.0
    r = sum_reduce(np.zeros(0, np.int32), init=3)
    assert r == 3 and isinstance(r, np.int32)
    # (a res of the wrong type is not looked at where nothing is reduced, as numba-cuda)
    assert sum_reduce(np.zeros(0), res=np.zeros(1, np.int32)) == 0.0


def test_size_is_a_slice_stop(sim):
    x = np.arange(600, dtype=np.float64)
    d = cuda.to_device(x)
    for arr in (x, d):
        assert sum_reduce(arr, size=601) == x.sum()          # numba-cuda: ``arr[:size]``
        assert sum_reduce(arr, size=10_000, init=1) == x.sum() + 1
        assert sum_reduce(arr, size=-100) == x[:-100].sum()
        assert sum_reduce(arr, size=-600, init=7) == 7.0
        assert sum_reduce(arr, size=np.int64(5)) == 10.0
        with pytest.raises(TypeError):
            sum_reduce(arr, size=2.0)
    res = cuda.device_array(1, np.float64)
    assert sum_reduce(d, size=700, res=res) is None and res.copy_to_host()[0] == x.sum()


def test_writable_args_are_refused_as_numba_cuda_does():
    """numba-cuda raises for ``writable_args`` (a device input is written where it is): accepted
    and ignored, it let a host input's writes vanish silently."""
    def sort_rows(a):
        a.sort()
    with pytest.raises(TypeError, match="writable_args are not supported"):
        cuda.guvectorize(["void(float64[:])"], "(n)", writable_args=(0,))(sort_rows)
