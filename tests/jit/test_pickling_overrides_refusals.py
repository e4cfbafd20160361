"""What cannot go to another process says so, and what to send instead: a prepared launch
(``kernel[grid, block].prepare(*args)``) is bound to this process's arguments and launch code,
and a graph (``gpureplace.graph`` / ``capture``) holds this process's launches.  Pickling one
failed inside pickle, naming neither: a prepared launch's class is its own ("it's not the same
object as ...PreparedLaunch"), and ``gpureplace.graph``'s body is a local function."""

import pickle

import numpy as np
import pytest

import gpureplace
from gpureplace import cuda
from numba import cloudpickle


@cuda.jit
def bump(a):
    a[0] += 1


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_a_prepared_launch_is_refused_by_name_with_what_to_send_instead(dumps):
    d = cuda.to_device(np.zeros(1, np.float32))
    run = bump[1, 1].prepare(d)
    with pytest.raises(TypeError, match=r"a prepared launch of bump cannot be pickled: .*send "
                                        r"the kernel \(or bump\[grid, block\]\) and its "
                                        r"arguments instead"):
        dumps(run)
    run()                                 # (still this process's to launch)
    assert d.copy_to_host()[0] == 1.0


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_a_graph_is_refused_by_name_with_what_to_send_instead(dumps):
    d = cuda.to_device(np.zeros(1, np.float32))
    made = gpureplace.graph(lambda: bump[1, 1](d))
    with gpureplace.capture() as captured:
        bump[1, 1](d)
    for graph in (made, captured):
        with pytest.raises(TypeError, match=r"<gpureplace Graph .*> cannot be pickled: .*send "
                                            r"the kernels and their arguments instead"):
            dumps(graph)
    made()                                # (still this process's to replay)
    captured()
    assert d.copy_to_host()[0] == 2.0
