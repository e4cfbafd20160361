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


# --- the disk cache ------------------------------------------------------------------------------

PROGRAM = r"""
import numpy as np, gpureplace
from gpureplace import cuda
def helper(v):
    return v * HELPER_SCALE
@cuda.vectorize(["float64(float64)"])
def vf(a):
    return helper(a) + ADD
@cuda.guvectorize(["void(float64[:], float64[:])"], "(n)->(n)")
def cum(x, out):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += helper(x[i])
        out[i] = acc
x = np.arange(4.0)
print([vf(x).tolist(), cum(x).tolist(), gpureplace.stats()["disk_hits"],
       gpureplace.stats()["kernel_compiles"]])
"""


def _run(tmp_path, scale, add):
    from conftest import python_process
    src = PROGRAM.replace("HELPER_SCALE", scale).replace("ADD", add)
    out = python_process(src, GPUREPLACE_CACHE_DIR=str(tmp_path / "cache"),
                         GPUREPLACE_BACKEND="simulator").strip().splitlines()[-1]
    return eval(out)                                   # noqa: S307 (our own print)


def test_vectorize_kernels_load_from_the_disk_cache_and_follow_redefinitions(tmp_path):
    """Their generated kernels had no module, so none was kept on disk: each process compiled
    them again.  Kept now, they still follow a changed element function or helper."""
    first = _run(tmp_path, "2.0", "1.0")
    assert first[:2] == [[1.0, 3.0, 5.0, 7.0], [0.0, 2.0, 6.0, 12.0]] and first[2] == 0
    again = _run(tmp_path, "2.0", "1.0")
    assert again[:2] == first[:2] and again[2] == 2 and again[3] == 0     # both from disk
    changed = _run(tmp_path, "2.0", "5.0")                 # vf's body changed: vf compiles
    assert changed[:2] == [[5.0, 7.0, 9.0, 11.0], [0.0, 2.0, 6.0, 12.0]] and changed[2] == 1
    helper = _run(tmp_path, "3.0", "5.0")                  # the helper changed: both compile
    assert helper[:2] == [[5.0, 8.0, 11.0, 14.0], [0.0, 3.0, 9.0, 18.0]] and helper[2] == 0
