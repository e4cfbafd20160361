"""``cuda.vectorize`` / ``cuda.guvectorize`` calls with device operands and ``out=`` inside a
graph capture are captured on the capture's stream: their default ``stream=0`` named the legacy
default stream, which a capture refuses ("names its own stream (0)"), so they could not be
captured at all."""

import numpy as np
import pytest

import gpureplace
from gpureplace import cuda
from gpureplace.errors import LaunchError


@cuda.vectorize(["float32(float32, float32)"])
def add(a, b):
    return a + b


@cuda.guvectorize(["void(float32[:], float32[:])"], "(n)->(n)")
def cumulative(x, out):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i]
        out[i] = acc


def test_vectorize_and_guvectorize_are_captured_and_replayed():
    x = cuda.to_device(np.arange(4, dtype=np.float32))
    out = cuda.to_device(np.full(4, -1, np.float32))
    runs = cuda.to_device(np.ones((2, 4), np.float32))

    def step():
        add(x, x, out=out)
        cumulative(runs, out=runs)

    g = gpureplace.graph(step)
    assert out.copy_to_host().tolist() == [-1.0] * 4            # captured, not run
    g()
    assert out.copy_to_host().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert runs.copy_to_host().tolist() == [[1.0, 2.0, 3.0, 4.0]] * 2
    g()                                                          # replayed: runs again
    assert runs.copy_to_host().tolist() == [[1.0, 3.0, 6.0, 10.0]] * 2


def test_a_vectorize_call_on_another_stream_is_still_refused_in_a_capture():
    x = cuda.to_device(np.arange(4, dtype=np.float32))
    s = cuda.stream()
    with pytest.raises(LaunchError, match="names its own stream"):
        gpureplace.graph(lambda: add(x, x, out=x, stream=s))
