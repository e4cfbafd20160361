"""cuda.kernels.transpose.transpose: numba-cuda's tiled transpose, any dtype (records, bool,
complex) and any strides, into a new array or a given one; on the simulator here, on the GPU with
``-m gpu``."""

import numpy as np
import pytest

from conftest import assemble
from gpureplace import cuda
from gpureplace import cuda_transpose
from gpureplace.config import settings

REC = np.dtype([("i", np.int32), ("j", np.float32, (3, 2))])
CASES = [((5, 6), np.float64), ((40, 33), np.complex128), ((17, 16), np.bool_), ((3, 4), REC),
         ((33, 70), np.int16), ((7, 9), np.uint8), ((1, 65), np.float32), ((64, 1), np.int64)]


def _array(shape, dt):
    n = int(np.prod(shape))
    raw = np.random.default_rng(n).integers(0, 256, n * np.dtype(dt).itemsize, dtype=np.uint8)
    if np.dtype(dt) == np.bool_:
        raw %= 2
    x = raw.view(dt).reshape(shape)
    return np.nan_to_num(x) if np.dtype(dt).kind in "fc" else x


def _check(to_device, host):
    for shape, dt in CASES:
        x = _array(shape, dt)
        d = to_device(x)
        np.testing.assert_array_equal(host(cuda.kernels.transpose.transpose(d)), x.T)
        np.testing.assert_array_equal(host(cuda_transpose.transpose(d[::2, 1::3])),
                                      x[::2, 1::3].T)
        out = cuda.device_array_like(np.empty(shape[::-1], dt))
        assert cuda_transpose.transpose(d, out) is out
        np.testing.assert_array_equal(host(out), x.T)


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


def test_transpose_in_the_simulator(simulated):
    _check(cuda.to_device, lambda d: d.copy_to_host())
    host_out = np.zeros((3, 2))
    assert cuda_transpose.transpose(np.arange(6.0).reshape(2, 3), host_out) is host_out
    np.testing.assert_array_equal(host_out, np.arange(6.0).reshape(2, 3).T)


def test_bad_arguments_are_named(simulated):
    with pytest.raises(ValueError, match="a must be a 2-D array"):
        cuda_transpose.transpose(cuda.to_device(np.zeros(3)))
    with pytest.raises(ValueError, match=r"b must have shape \(3, 2\) and dtype float64"):
        cuda_transpose.transpose(cuda.to_device(np.zeros((2, 3))), cuda.device_array((2, 3)))


@pytest.mark.parametrize("word", ["uint8", "uint16", "uint32", "uint64"])
def test_the_kernels_assemble(word):
    kernel = cuda_transpose._kernel(np.dtype(word).type)
    spec = kernel.compile(f"void({word}[:, :, :], {word}[:, :, :])")
    assemble(spec.ptx)
    assert ".shared" in spec.ptx and "bar.sync" in spec.ptx


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_transpose_on_the_gpu():
    _check(cuda.to_device, lambda d: d.copy_to_host())
    s = cuda.stream()
    d = cuda.to_device(np.arange(12.0).reshape(3, 4), stream=s)
    t = cuda_transpose.transpose(d)
    assert t.stream is s
    np.testing.assert_array_equal(t.copy_to_host(), np.arange(12.0).reshape(3, 4).T)
