"""A kernel redefined under its name (its cell run again) reaches the graphs and prepared launches
made from the old definition: ``graph(fn)`` captures again by calling ``fn``, the ``with`` form
issues its launches again with the kernel as its name stands, a prepared launch runs the new
definition.  Before, all three kept running the old kernel (the old object's code was still
valid, so nothing looked again).  A redefinition with other parameters is said, not run."""

import numpy as np
import pytest

import gpureplace
from gpureplace import LaunchError, cuda
from gpureplace.config import settings
from test_binder import ndarray
from test_graph import _Log, _module, fake_capture  # noqa: F401 - the fixture
from test_launch_path import FakeLoaded, fake_gpu  # noqa: F401 - the fixture

KERNEL = """
@cuda.jit
def k(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = {value}

def step(x):
    k[1, 32](x)
"""


def _redefine(ns, value):
    exec(KERNEL.format(value=value).split("def step")[0], ns)     # k alone, as its cell
    gpureplace.refresh()


def test_simulator_graphs_and_prepared_launches_follow_a_redefined_kernel(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    ns = _module(KERNEL.format(value="1.0"))
    x = cuda.to_device(np.zeros(32, np.float32))    # (graphs and prepare() take device arrays)
    g = gpureplace.graph(ns["step"], x)
    with gpureplace.capture() as h:
        ns["k"][1, 32](x)
    p = ns["k"][1, 32].prepare(x)
    _redefine(ns, "2.0")
    for run in (g, h, p):
        x.copy_to_device(np.zeros(32, np.float32))
        run()
        np.testing.assert_array_equal(x.copy_to_host(), np.full(32, 2.0, np.float32))
    assert g.recaptures == 1 and h.recaptures == 1
    exec("@cuda.jit\ndef k(x, y):\n    x[0] = y\n", ns)               # other parameters
    gpureplace.refresh()
    for run in (g, h, p):
        with pytest.raises((LaunchError, TypeError), match=r"k|argument"):
            run()


def test_gpu_graphs_capture_again_with_the_redefined_kernel(fake_capture):  # noqa: F811
    ns = _module(KERNEL.format(value="1.0"))
    x = ndarray((32,), np.float32, ptr=0x4000)
    g = gpureplace.graph(ns["step"], x)
    with gpureplace.capture() as h:
        ns["k"][1, 32](x)
    first = fake_capture.graphs[g._exec].nodes[0][0]
    _redefine(ns, "2.0")
    g()
    h()
    assert g.recaptures == 1 and h.recaptures == 1
    new = FakeLoaded.instances[-1]
    assert "], 1073741824;" in new.spec.ptx                            # stores 2.0f
    assert fake_capture.graphs[g._exec].nodes[0][0] == new.fn_ptr != first
    assert fake_capture.graphs[h._exec].nodes[0][0] == new.fn_ptr


@pytest.mark.gpu
def test_prepared_launches_and_graphs_follow_a_redefined_kernel_on_the_device():
    import cupy as cp
    ns = _module(KERNEL.format(value="1.0"))
    x = cp.zeros(32, cp.float32)
    p = ns["k"][1, 32].prepare(x)
    g = gpureplace.graph(ns["step"], x)
    _redefine(ns, "3.0")
    for run in (p, g):
        x[:] = 0
        run()
        assert float(x.sum()) == 96.0
    with pytest.raises(TypeError, match=r"takes no arguments: they were bound by prepare"):
        p(x)


def test_the_simulator_refuses_host_synchronisation_while_capturing(monkeypatch):
    """``cuda.synchronize()`` or ``copy_to_host()`` inside a captured function ran in the
    simulator, and the same code failed its capture on a GPU."""
    from gpureplace import cuda
    from gpureplace.jit.graphs import GraphCaptureError
    monkeypatch.setattr(settings, "backend", "simulator")
    ns = _module(KERNEL.format(value="1.0"))
    d = cuda.to_device(np.zeros(32, np.float32))
    for sync, what in ((cuda.synchronize, r"cuda\.synchronize\(\)"),
                       (d.copy_to_host, r"copy_to_host\(\)")):
        def body():
            ns["k"][1, 32](d)
            sync()
        with pytest.raises(GraphCaptureError, match=what + r" while a graph is being captured"):
            gpureplace.graph(body)
    cuda.synchronize()                                   # outside a capture: as before
    assert (d.copy_to_host() == 0).all()                 # nothing ran


def test_a_simulated_prepared_launch_called_with_arguments_says_so(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    ns = _module(KERNEL.format(value="1.0"))
    x = cuda.to_device(np.zeros(32, np.float32))
    run = ns["k"][1, 32].prepare(x)
    with pytest.raises(TypeError, match=r"a prepared launch of k takes no arguments: they were "
                                        r"bound by prepare\(\)"):
        run(x)
    assert (x.copy_to_host() == 0).all()
    run()
    assert (x.copy_to_host() == 1).all()
