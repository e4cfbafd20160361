"""Structured scalars (``recs[i]`` of a record array) as kernel arguments, as numba-cuda takes them:
the kernel reads and writes the record's fields through a pointer to a device copy, and what it
wrote is copied back into the record after the launch."""

import numpy as np
import pytest
from numba import from_dtype

from conftest import assemble
from gpureplace import LaunchError, cuda, simulator

POINT = np.dtype([("x", np.float32), ("y", np.float64), ("n", np.int32)], align=True)


@cuda.jit
def shift(a, origin, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = a[i, 0] - origin.x + a[i, 1] - origin.y
    cuda.syncthreads()                       # one block: every read is done
    if i == 0:
        origin.n = a.shape[0] + origin.n
        origin["x"] = 0.5


SIG = (from_dtype(np.float32)[:, ::1], from_dtype(POINT), from_dtype(np.float32)[::1])


def _args(xp=np):
    pts = np.arange(8, dtype=np.float32).reshape(4, 2)
    recs = np.zeros(3, POINT)
    recs[1] = (1.0, 2.0, 10)
    return xp.asarray(pts), recs, xp.zeros(4, np.float32)


def _check(out, recs):
    np.testing.assert_array_equal(np.asarray(out), [-2.0, 2.0, 6.0, 10.0])
    assert recs[1].tolist() == (0.5, 2.0, 14)                 # written back
    assert recs[0].tolist() == (0.0, 0.0, 0) and recs[2].tolist() == (0.0, 0.0, 0)


def test_a_record_is_passed_as_one_pointer():
    spec = shift.compile(SIG)
    head = spec.ptx[spec.ptx.index(".entry"):spec.ptx.index("{", spec.ptx.index(".entry"))]
    assert head.count(".param") == 6                 # a: ptr + 2 dims; origin: ptr; out: 2
    assert spec.param_format == "@QqqQQq"
    assemble(spec.ptx)


def test_record_fields_are_read_and_written_back_in_the_simulator():
    pts, recs, out = _args()
    simulator.run(shift, 1, 32, pts, recs[1], out)
    _check(out, recs)


@pytest.mark.gpu
def test_record_fields_are_read_and_written_back_on_the_gpu():
    import cupy as cp
    pts, recs, out = _args(cp)
    shift[1, 32](pts, recs[1], out)
    _check(cp.asnumpy(out), recs)
    shift[1, 32](pts, recs[1], out)                        # again: the general path each time
    assert recs[1].tolist() == (0.5, 2.0, 18)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_records_cannot_be_prepared_or_captured():
    import cupy as cp

    import gpureplace
    pts, recs, out = _args(cp)
    with pytest.raises(LaunchError, match="record"):
        shift[1, 32].prepare(pts, recs[1], out)
    with pytest.raises(LaunchError, match="record"):
        gpureplace.graph(lambda: shift[1, 32](pts, recs[1], out))
