"""CUDA graphs of launches (gpureplace.graph / gpureplace.capture).

On the CPU, a stand-in driver (tests/jit/test_launch_path.py) and a stand-in CuPy stream capture
record what would be captured and replayed; under the simulator backend, capturing records the
launches and replaying runs them.  The tests marked gpu run real graphs on the H200.
"""

import itertools

import numpy as np
import pytest

import gpureplace
from gpureplace import cuda
from gpureplace.jit import graphs as cudagraph
from gpureplace.config import settings
from gpureplace import probe
from gpureplace.runtime import launch

from test_binder import ndarray
from test_launch_path import FakeLoaded, fake_gpu  # noqa: F401 - the fixture


class _Log:
    calls = []          # (fn_ptr, stream, values) of every launch, in order


class LoggedLoaded(FakeLoaded):
    def _record(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        super()._record(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
        _Log.calls.append((fn, stream, self.calls[-1][4]))


class FakeGraph:
    _ids = itertools.count(1)

    def __init__(self, nodes):
        self.nodes = nodes
        self.graph = next(FakeGraph._ids)
        self.graphExec = 1000 + self.graph
        self.uploaded = False

    def upload(self):
        self.uploaded = True


class FakeCupy:
    """The parts of CuPy a capture uses: streams that capture, graphs, graphLaunch."""

    def __init__(self):
        fake = self
        self.stack = []
        self.replays = []           # (graphExec, stream) per graphLaunch
        self.graphs = {}

        class Stream:
            _ptrs = itertools.count(500)

            def __init__(self, non_blocking=False):
                self.ptr = next(Stream._ptrs)
                self.start = None
                self.fail = False

            def __enter__(self):
                fake.stack.append(self)
                return self

            def __exit__(self, *exc):
                fake.stack.remove(self)

            def begin_capture(self):
                self.start = len(_Log.calls)

            def end_capture(self):
                captured = [c for c in _Log.calls[self.start:] if c[1] == self.ptr]
                del _Log.calls[self.start:]         # captured work did not run
                if self.fail:
                    raise RuntimeError("cudaErrorStreamCaptureInvalidated")
                g = FakeGraph(captured)
                fake.graphs[g.graphExec] = g
                return g

        def graph_launch(exec_handle, stream):
            fake.replays.append((exec_handle, stream))

        self.cuda = type("cuda", (), {"Stream": Stream})()
        self.cuda.runtime = type("runtime", (), {"graphLaunch": staticmethod(graph_launch)})()

    def current_ptr(self):
        return self.stack[-1].ptr if self.stack else 5


@pytest.fixture
def fake_capture(fake_gpu, monkeypatch):  # noqa: F811
    _Log.calls = []
    fake = FakeCupy()
    monkeypatch.setattr(launch, "LoadedKernel", LoggedLoaded)
    monkeypatch.setattr(probe, "cupy_module", lambda: fake)
    monkeypatch.setattr(launch, "current_stream",
                        lambda dev=-1: type("S", (), {"ptr": fake.current_ptr()})())
    monkeypatch.setattr(cudagraph, "_node_count", lambda g: len(g.nodes))
    return fake


def _module(src):
    ns = {"cuda": cuda, "__name__": "graph_test_module"}
    exec(src, ns)
    return ns


PIPELINE = """
def scale(v):
    return v * 2.0

@cuda.jit
def first(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = scale(a)

@cuda.jit
def second(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0

def step(x, a):
    first[1, 32](x, a)
    second[1, 32](x)
    second[1, 32](x)
"""


def test_capture_runs_nothing_and_a_replay_is_one_graph_launch(fake_capture):
    ns = _module(PIPELINE)
    x = ndarray((32,), np.float32, ptr=0x4000)
    g = gpureplace.graph(ns["step"], x, 1.5)
    assert _Log.calls == []                                   # nothing ran while capturing
    assert [name for name, _ in g.kernels] == ["first", "second", "second"]
    graph = fake_capture.graphs[g._exec]
    assert len(graph.nodes) == 3 and graph.uploaded
    assert graph.nodes[0][2] == (0x4000, 32, 1.5)             # bound at capture
    g()
    g.launch(stream=77)
    assert fake_capture.replays == [(g._exec, 5), (g._exec, 77)]
    # ordinary launches afterwards run on the current stream again, through a fast path
    ns["second"][1, 32](x)
    ns["second"][1, 32](x)
    assert [c[1] for c in _Log.calls] == [5, 5]
    cfg = ns["second"][1, 32]
    assert type(cfg).__call__ is not type(cfg).__mro__[1].__call__     # a generated fast path


def test_a_redefined_callee_recaptures_only_then(fake_capture):
    ns = _module(PIPELINE)
    x = ndarray((32,), np.float32)
    g = gpureplace.graph(ns["step"], x, 1.5)
    loaded = len(FakeLoaded.instances)
    gpureplace.refresh()                      # the world moves, nothing changed
    g()
    assert g.recaptures == 0 and len(FakeLoaded.instances) == loaded
    exec("def scale(v):\n    return v * 3.0\n", ns)
    gpureplace.refresh()
    g()
    assert g.recaptures == 1
    # only `first` (which calls scale) was compiled and loaded again
    assert len(FakeLoaded.instances) == loaded + 1
    assert FakeLoaded.instances[-1].spec.name.startswith("first")
    new_graph = fake_capture.graphs[g._exec]
    assert new_graph.nodes[0][0] == FakeLoaded.instances[-1].fn_ptr
    assert fake_capture.replays[-1] == (g._exec, 5) and len(fake_capture.replays) == 2


def test_with_form_captures_again_by_reissuing_its_launches(fake_capture):
    ns = _module(PIPELINE)
    x = ndarray((32,), np.float32)
    with gpureplace.capture() as g:
        ns["first"][1, 32](x, 2.0)
        ns["second"][1, 32](x)
    assert len(g) == 2 and _Log.calls == []
    exec("def scale(v):\n    return v - 1.0\n", ns)
    gpureplace.refresh()
    g()
    assert g.recaptures == 1
    assert [n[2] for n in fake_capture.graphs[g._exec].nodes] == [(x.data.ptr, 32, 2.0),
                                                                 (x.data.ptr, 32)]


def test_with_form_holding_other_work_refuses_to_replay_stale_code(fake_capture, monkeypatch):
    ns = _module(PIPELINE)
    x = ndarray((32,), np.float32)
    monkeypatch.setattr(cudagraph, "_node_count", lambda g: len(g.nodes) + 1)  # e.g. a CuPy op
    with gpureplace.capture() as g:
        ns["first"][1, 32](x, 2.0)
    exec("def scale(v):\n    return v - 1.0\n", ns)
    gpureplace.refresh()
    with pytest.raises(gpureplace.GraphStaleError, match="kernel first changed"):
        g()
    assert fake_capture.replays == []


def test_errors_inside_a_capture_leave_no_capture_behind(fake_capture):
    ns = _module(PIPELINE)
    x = ndarray((32,), np.float32)
    with pytest.raises(gpureplace.LaunchError, match="must use the current stream"):
        with gpureplace.capture():
            ns["second"][1, 32, 9](x)
    assert cudagraph.recorder() is None and fake_capture.stack == []

    def broken(x):
        ns["second"][1, 32](x)
        raise ValueError("user code failed")
    with pytest.raises(ValueError, match="user code failed"):
        gpureplace.graph(broken, x)
    assert cudagraph.recorder() is None and fake_capture.stack == []
    with pytest.raises(gpureplace.GraphCaptureError, match="cannot be nested"):
        with gpureplace.capture():
            gpureplace.graph(ns["step"], x, 1.0)
    ns["second"][1, 32](x)                                 # launches work as before
    assert _Log.calls[-1][1] == 5


def test_a_failed_capture_names_the_graph(fake_capture, monkeypatch):
    ns = _module(PIPELINE)
    x = ndarray((32,), np.float32)

    def syncs(x):
        ns["second"][1, 32](x)
        fake_capture.stack[-1].fail = True                 # e.g. x.get() while capturing
    with pytest.raises(gpureplace.GraphCaptureError, match="capturing .*syncs failed: .*Invalidated"):
        gpureplace.graph(syncs, x)


def test_prepared_launches_are_captured_and_return_to_their_stream(fake_capture):
    """A prepared launch replays a graph of its one launch; inside a capture it launches into
    the capture (each call binds again), then returns to a graph of its own on its stream."""
    ns = _module(PIPELINE)
    x = ndarray((32,), np.float32, ptr=0x4100)
    run = ns["second"][1, 32].prepare(x)
    assert run.uses_graph and _Log.calls == []              # captured, not run
    own = fake_capture.graphs[run._keep[2].graphExec]
    assert len(own.nodes) == 1 and own.uploaded               # (values: its own buffer)
    run()
    run()
    assert fake_capture.replays == [(own.graphExec, 5)] * 2
    with gpureplace.capture() as g:
        run()
        run()
    assert len(g) == 2 and len(fake_capture.graphs[g._exec].nodes) == 2
    run()
    assert run.uses_graph and len(fake_capture.replays) == 3
    assert fake_capture.replays[-1][1] == 5                 # its own stream again
    assert _Log.calls == []                                 # every launch went through graphs


def test_a_prepared_launch_whose_capture_fails_launches_directly(fake_capture):
    ns = _module(PIPELINE)
    x = ndarray((32,), np.float32)
    stream_class = fake_capture.cuda.Stream

    def refuse(self):
        raise RuntimeError("cudaErrorStreamCaptureUnsupported")
    stream_class.begin_capture, saved = refuse, stream_class.begin_capture
    try:
        run = ns["second"][1, 32].prepare(x)
    finally:
        stream_class.begin_capture = saved
    assert not run.uses_graph
    run()
    run()
    assert [c[1] for c in _Log.calls] == [5, 5] and fake_capture.replays == []


def test_simulator_graphs_record_then_run(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    ns = _module(PIPELINE)
    x = cuda.to_device(np.zeros(32, np.float32))
    g = gpureplace.graph(ns["step"], x, 1.5)
    assert not x.copy_to_host().any()                        # captured, not run
    g()
    np.testing.assert_array_equal(x.copy_to_host(), np.full(32, 5.0, np.float32))
    exec("def scale(v):\n    return v * 10.0\n", ns)
    gpureplace.refresh()
    g()
    np.testing.assert_array_equal(x.copy_to_host(), np.full(32, 17.0, np.float32))


def test_graph_needs_a_function():
    with pytest.raises(TypeError, match="takes the function"):
        gpureplace.graph(42)


# -- on the GPU (and, in CI, on the simulator through tests/simcupy.py) --------------------------

@pytest.mark.gpu
def test_graph_replays_and_follows_a_redefinition():
    import cupy as cp
    ns = _module(PIPELINE)
    x = cp.zeros(1000, cp.float32)
    g = gpureplace.graph(lambda: [ns["first"][4, 256](x, 1.5), ns["second"][4, 256](x)])
    cp.cuda.runtime.deviceSynchronize()
    assert not cp.asnumpy(x).any()
    g()
    np.testing.assert_array_equal(cp.asnumpy(x), np.full(1000, 4.0, np.float32))
    exec("def scale(v):\n    return v * 4.0\n", ns)
    gpureplace.refresh()
    g()
    np.testing.assert_array_equal(cp.asnumpy(x), np.full(1000, 7.0, np.float32))
    with gpureplace.capture() as g2:
        for _ in range(10):
            ns["second"][4, 256](x)
    g2()
    g2()
    np.testing.assert_array_equal(cp.asnumpy(x), np.full(1000, 27.0, np.float32))


@pytest.mark.gpu_only
def test_graph_with_cupy_work_inside():
    import cupy as cp
    ns = _module(PIPELINE)
    x = cp.zeros(256, cp.float32)
    y = cp.zeros(256, cp.float32)

    def body():
        ns["first"][1, 256](x, 1.0)
        y[...] = x * 2                       # CuPy's own kernel, captured too
    g = gpureplace.graph(body)
    with gpureplace.capture() as g2:
        body()
    assert not g2._complete and g._complete is False
    g()
    np.testing.assert_array_equal(cp.asnumpy(y), np.full(256, 4.0, np.float32))
    exec("def scale(v):\n    return v * 5.0\n", ns)
    gpureplace.refresh()
    g()                                      # calls body again: new code
    np.testing.assert_array_equal(cp.asnumpy(y), np.full(256, 10.0, np.float32))
    with pytest.raises(gpureplace.GraphStaleError, match="kernel first changed"):
        g2()
