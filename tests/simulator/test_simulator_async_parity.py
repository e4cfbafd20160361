"""The simulator's asynchronous host API as the GPU path behaves (everything the host can see):

- a graph capture records the device-memory operations made on its stream (copies, fills) and
  runs them at each replay in order with the launches, never at the capture; what a GPU capture
  cannot hold (a launch on another stream, a read of device memory on the host) is refused, and
  a ``with`` graph holding such work raises ``GraphStaleError`` after a redefinition;
- ``pre_launch_callbacks`` run before each launch of their configuration: plain launches,
  prepared launches (on the GPU path's generated call too) and graph replays, on both backends;
- ``Stream.add_callback`` runs the callback in a thread of its own after the work queued before
  it, an exception a warning, and ``synchronize()`` waits for it;
- each simulated stream has a handle of its own, which the ``__cuda_array_interface__`` of an
  array made on it names.

The GPU path's side runs on the CPU with tests/jit's stand-in driver and CuPy stream capture.
"""

import os
import sys
import threading
import warnings

import numpy as np
import pytest

import gpureplace
from gpureplace import cuda
from gpureplace.config import settings
from gpureplace.jit import graphs as cudagraph

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "jit"))
from test_binder import ndarray  # noqa: E402
from test_graph import _Log, fake_capture  # noqa: E402,F401 - the fixture
from test_launch_path import fake_gpu  # noqa: E402,F401 - the fixture


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


def _module(src):
    ns = {"cuda": cuda, "__name__": "async_parity_module"}
    exec(src, ns)
    return ns


KERNELS = """
def bump(v):
    return v + 1.0

@cuda.jit
def add1(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = bump(x[i])

@cuda.jit
def twice(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2.0
"""


def _host(d):
    return d.copy_to_host().tolist()


# -- 1. copies and fills inside a capture ---------------------------------------------------------

def test_a_captured_copy_and_fill_run_at_each_replay_and_not_at_the_capture(simulated):
    ns = _module(KERNELS)
    d = cuda.to_device(np.ones(4, np.float32))
    src = cuda.to_device(np.full(4, 10, np.float32))
    with gpureplace.capture() as g:
        d.copy_to_device(src)                    # device to device
        ns["add1"][1, 32](d)
    assert _host(d) == [1.0] * 4                 # nothing ran at the capture
    g()
    assert _host(d) == [11.0] * 4
    g()
    assert _host(d) == [11.0] * 4                # the copy ran again first
    assert len(g) == 1 and g.kernels == [("add1", g.kernels[0][1])]

    e = cuda.to_device(np.full(4, 7, np.float32))
    with gpureplace.capture() as g2:
        e[:] = 0                                  # a fill
        ns["add1"][1, 32](e)
        e[1] = 5                                  # after the launch, in its place
    assert _host(e) == [7.0] * 4
    g2()
    g2()
    assert _host(e) == [1.0, 5.0, 1.0, 1.0]


def test_copies_from_host_memory_are_refused_in_a_capture_as_the_gpu_refuses_them(simulated):
    # (on the H200, CuPy: "the current stream is capturing, so synchronous API calls are
    # disallowed", for d.copy_to_device(host array) and cuda.to_device(host array))
    d = cuda.device_array(3, np.float64)
    d.copy_to_device(np.zeros(3))
    host = np.array([1.0, 2.0, 3.0])
    with gpureplace.capture() as g:
        with pytest.raises(cudagraph.GraphCaptureError, match=r"d.copy_to_device\(host data\) "
                           "while a graph is being captured: a copy from host memory"):
            d.copy_to_device(host)
        with pytest.raises(cudagraph.GraphCaptureError, match="cuda.to_device"):
            cuda.to_device(host)
        with pytest.raises(cudagraph.GraphCaptureError):
            d.copy_to_device([7.0, 8.0, 9.0])
        src = cuda.to_device(host, stream=cuda.stream())   # (another stream: not the capture's)
        d.setitem(slice(0, 2), [0.5, 0.25])               # (a list's values, taken now)
    g()
    assert _host(d) == [0.5, 0.25, 0.0] and _host(src) == [1.0, 2.0, 3.0]


def test_operations_into_device_arrays_are_captured_as_cupys_kernels_are(simulated):
    # (on the H200: d += 1 in a capture ran at each replay, not at the capture)
    ns = _module(KERNELS)
    d = cuda.to_device(np.zeros(4, np.float32))
    with gpureplace.capture() as g:
        ns["add1"][1, 32](d)
        d += 1
        d *= 3.0
        np.add(d, d, out=d)
        with pytest.raises(ValueError):               # refused at its call, as CuPy's
            np.add(d, np.ones(3, np.float32), out=d)
    assert _host(d) == [0.0] * 4 and isinstance(d, type(cuda.to_device(np.zeros(1))))
    g()
    assert _host(d) == [12.0] * 4
    g()
    assert _host(d) == [84.0] * 4
    d += 1                                          # no capture: at once
    assert _host(d) == [85.0] * 4
    assert (d + 1).tolist() == [86.0] * 4 and type(d + 1) is np.ndarray


def test_captured_operations_are_refused_at_their_call_as_the_gpus_are(simulated):
    d = cuda.to_device(np.zeros(4, np.float32))
    five, doubles = cuda.to_device(np.zeros(5, np.float32)), cuda.to_device(np.zeros(4))
    with gpureplace.capture() as g:
        with pytest.raises(ValueError, match="incompatible shape"):
            d.copy_to_device(five)
        with pytest.raises(TypeError, match="incompatible dtype"):
            d.copy_to_device(doubles)
        with pytest.raises(IndexError):
            d[4] = 1.0
        with pytest.raises(ValueError, match="could not broadcast"):
            d[:] = np.ones(3, np.float32)
        with pytest.raises(ValueError):
            d[:] = "not a number"
    g()
    assert _host(d) == [0.0] * 4                 # nothing refused was recorded, nothing ran


def test_operations_on_another_stream_run_at_once_and_are_not_captured(simulated):
    s = cuda.stream()
    d = cuda.to_device(np.zeros(2, np.float32))
    bound = cuda.to_device(np.zeros(2, np.float32), stream=s)
    with gpureplace.capture() as g:
        d.copy_to_device(np.ones(2, np.float32), stream=s)   # s is not the capture's stream
        bound[:] = 3.0                                       # (an array of s: on s)
    s.synchronize()
    assert _host(d) == [1.0, 1.0] and _host(bound) == [3.0, 3.0]
    d[:] = 0
    bound[:] = 0
    g()
    assert _host(d) == [0.0, 0.0] and _host(bound) == [0.0, 0.0]


def test_a_with_graph_holding_copies_is_stale_after_a_redefinition_as_on_the_gpu(simulated):
    ns = _module(KERNELS)
    d = cuda.to_device(np.zeros(4, np.float32))
    with gpureplace.capture() as only_launches:
        ns["add1"][1, 32](d)
    with gpureplace.capture() as with_fill:
        d[:] = 1.0
        ns["add1"][1, 32](d)

    def step():
        d[:] = 1.0
        ns["add1"][1, 32](d)
    by_function = gpureplace.graph(step)
    gpureplace.refresh()                         # the world moves, nothing changed
    for g in (only_launches, with_fill, by_function):
        g()
        assert g.recaptures == 0
    exec("def bump(v):\n    return v + 10.0\n", ns)          # the kernel's helper redefined
    gpureplace.refresh()
    only_launches()                               # its launches issued again, new code
    assert only_launches.recaptures == 1 and _host(d) == [12.0] * 4
    by_function()                                 # step() called again: new code, its fill too
    assert by_function.recaptures == 1 and _host(d) == [11.0] * 4
    d[:] = 0
    with pytest.raises(gpureplace.GraphStaleError, match="kernel add1 changed"):
        with_fill()                               # never the old code, nor half the graph
    assert _host(d) == [0.0] * 4


# -- 2. pre-launch callbacks --------------------------------------------------------------------

def test_pre_launch_callbacks_run_before_each_launch_of_their_configuration(simulated):
    ns = _module(KERNELS)
    d = cuda.to_device(np.zeros(4, np.float32))
    cfg = ns["add1"][1, 32]
    seen = []
    cfg.pre_launch_callbacks.append(       # (np.asarray: a view, no read a capture refuses)
        lambda spec, config: seen.append((spec.argtypes[0].dtype.name, config is cfg,
                                          float(np.asarray(d)[0]))))
    cfg(d)
    ns["add1"][2, 32](d)                         # another configuration: none
    assert seen == [("float32", True, 0.0)]      # before the launch ran
    run = cfg.prepare(d)
    assert len(seen) == 1                        # preparing launches nothing
    run()
    run()
    assert [s[2] for s in seen] == [0.0, 2.0, 3.0]
    g = gpureplace.graph(cfg, d)
    assert len(seen) == 4                        # as the capture issued the launch
    g()
    g()
    assert len(seen) == 6 and _host(d) == [6.0] * 4


def test_launches_with_in_out_hints_and_host_arrays_run_callbacks(simulated):
    ns = _module(KERNELS)
    h = np.zeros(4, np.float32)
    cfg = ns["add1"][1, 32]
    seen = []
    cfg.pre_launch_callbacks.append(lambda spec, config: seen.append(float(h[0])))
    cfg(cuda.InOut(h))                           # before the launch ran
    cfg(cuda.In(h))                              # (its copy is not written back)
    cfg(h)
    assert seen == [0.0, 1.0, 1.0] and list(h) == [2.0] * 4
    cfg(cuda.Out(np.zeros(4, np.float32)))
    assert len(seen) == 4


def test_callbacks_asked_for_after_a_prepare_or_capture_still_run(simulated):
    ns = _module(KERNELS)
    d = cuda.to_device(np.zeros(4, np.float32))
    cfg = ns["twice"][1, 32]
    run = cfg.prepare(d)
    g = gpureplace.graph(cfg, d)
    seen = []
    cfg.pre_launch_callbacks.append(lambda spec, config: seen.append(config))
    run()
    g()
    assert seen == [cfg, cfg]


def test_the_gpu_paths_prepared_launches_and_graph_replays_run_callbacks(fake_capture):  # noqa: F811
    ns = _module(KERNELS)
    x = ndarray((32,), np.float32, ptr=0x4200)
    cfg = ns["twice"][1, 32]
    seen = []
    run = cfg.prepare(x)
    run()
    assert seen == [] and len(fake_capture.replays) == 1
    cfg.pre_launch_callbacks.append(lambda spec, config: seen.append(
        (spec.name, config is cfg, len(fake_capture.replays))))
    run()                                        # bound again, callbacks first
    run()
    assert [s[2] for s in seen] == [1, 2] and all(s[1] for s in seen)
    assert seen[0][0].startswith("twice")
    seen.clear()
    g = gpureplace.graph(cfg, x)
    assert len(seen) == 1                        # as the capture issued the launch
    g()
    g.launch(stream=77)
    assert [s[2] for s in seen] == [3, 3, 4]     # each before its cudaGraphLaunch
    seen.clear()
    plain = ns["add1"][1, 32]
    g2 = gpureplace.graph(plain, x)
    g2()
    plain.pre_launch_callbacks.append(lambda spec, config: seen.append(config))
    g2()                                         # a list asked for after the capture
    assert seen == [plain]


# -- 3. stream callbacks ------------------------------------------------------------------------

def test_a_callbacks_exception_is_a_warning_and_add_callback_returns(simulated):
    s = cuda.stream()

    def boom(stream, status, arg):
        raise ValueError("boom in callback")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s.add_callback(boom)                       # returns: the callback runs elsewhere
        s.synchronize()
    assert [str(w.message) for w in caught] == ["Exception in stream callback: boom in callback"]


def _within(seconds, fn):
    """Run ``fn`` in a thread; whether it ended within ``seconds`` (not: it hangs)."""
    done = threading.Event()

    def run():
        fn()
        done.set()
    threading.Thread(target=run, daemon=True).start()
    return done.wait(seconds)


def test_a_callback_runs_in_another_thread_after_the_lock_its_caller_holds(simulated):
    s = cuda.stream()
    lock = threading.Lock()
    got = []

    def callback(stream, status, arg):
        with lock:
            got.append((stream, status, arg, threading.get_ident()))

    def producer():
        with lock:                               # registers its completion callback under it
            s.add_callback(callback, "done")
        s.synchronize()
    assert _within(10, producer), "add_callback ran the callback in the caller's thread"
    (stream, status, arg, ident), = got
    assert stream is s and status == 0 and arg == "done" and ident != threading.get_ident()


def test_callbacks_run_in_order_and_synchronize_waits_for_them(simulated):
    ns = _module(KERNELS)
    s, other = cuda.stream(), cuda.stream()
    d = cuda.to_device(np.zeros(4, np.float32))
    order = []
    release = threading.Event()

    def slow(stream, status, arg):
        release.wait(10)
        order.append(arg)
    s.add_callback(slow, "first")
    s.add_callback(lambda stream, status, arg: order.append(arg), "second")
    assert not s.query() and other.query()       # queued, not run
    release.set()
    ns["add1"][1, 32, s](d)                      # after the callbacks queued on s before it
    assert order == ["first", "second"] and s.query()
    s.add_callback(lambda stream, status, arg: order.append(d.copy_to_host()[0]))
    s.synchronize()
    assert order == ["first", "second", 1.0]

    async def waited():
        return await s.async_done()
    import asyncio
    assert asyncio.run(waited()) is s


def test_a_replay_on_a_stream_comes_after_the_callbacks_queued_there(simulated):
    ns = _module(KERNELS)
    s = cuda.stream()
    d = cuda.to_device(np.zeros(4, np.float32))
    with gpureplace.capture() as g:
        ns["add1"][1, 32](d)
    seen = []
    release = threading.Event()

    def slow(stream, status, arg):
        release.wait(10)
        seen.append(np.asarray(d).tolist())
    s.add_callback(slow)
    threading.Timer(0.2, release.set).start()
    g.launch(stream=s)
    assert seen == [[0.0] * 4] and _host(d) == [1.0] * 4
    with pytest.raises(gpureplace.LaunchError, match="stream must be"):
        g.launch(stream="s")


# -- 4. what a capture refuses ------------------------------------------------------------------

def test_a_launch_on_its_own_stream_inside_a_capture_is_refused(simulated):
    ns = _module(KERNELS)
    d = cuda.to_device(np.zeros(4, np.float32))
    for stream in (cuda.stream(), 0):
        with pytest.raises(gpureplace.LaunchError, match="add1: a launch inside a graph capture "
                                                         "must use the current stream"):
            with gpureplace.capture():
                ns["add1"][1, 32, stream](d)
        assert cudagraph.recorder() is None
    with gpureplace.capture() as g:
        ns["add1"][1, 32, None](d)               # None: the current stream
    g()
    assert _host(d) == [1.0] * 4


@pytest.mark.parametrize("read", [lambda d: d[0], lambda d: list(d), lambda d: d.item(0),
                                  lambda d: d.tolist(), lambda d: d.getitem(1),
                                  lambda d: d.copy_to_host()],
                         ids=["element", "list", "item", "tolist", "getitem", "copy_to_host"])
def test_host_reads_of_device_memory_inside_a_capture_are_refused(simulated, read):
    ns = _module(KERNELS)
    d = cuda.to_device(np.arange(4, dtype=np.float32))
    with pytest.raises(gpureplace.GraphCaptureError, match="host synchronisation"):
        with gpureplace.capture():
            ns["add1"][1, 32](d)
            read(d)
    assert cudagraph.recorder() is None
    read(d)                                      # outside a capture: as ever


def test_views_and_rows_are_no_host_reads(simulated):
    m = cuda.to_device(np.zeros((2, 3), np.float32))
    ones = cuda.to_device(np.ones((1, 3), np.float32))
    with gpureplace.capture() as g:
        rows = list(m)                            # device arrays, as the GPU's views
        m[1:].copy_to_device(ones)
    g()
    assert [type(r).__name__ for r in rows] == ["SimDeviceNDArray"] * 2
    assert _host(m) == [[0.0] * 3, [1.0] * 3]


# -- 5. stream handles --------------------------------------------------------------------------

def test_each_simulated_stream_has_a_handle_of_its_own(simulated):
    from gpureplace.simulator import host
    s1, s2 = cuda.stream(), cuda.stream()
    assert int(s1) and int(s2) and int(s1) != int(s2)
    assert s1.handle.value == int(s1) == int(s1.handle) and s1.__cuda_stream__() == (0, int(s1))
    assert int(s1) not in (1, 2)
    assert int(host.SimStream(host.LEGACY_DEFAULT_STREAM)) == 1
    assert int(host.SimStream(host.PER_THREAD_DEFAULT_STREAM)) == 2
    assert cuda.external_stream(0x77).handle.value == 0x77
    assert f"{int(s1):#x}" in repr(s1)


def test_an_array_of_a_stream_names_it_in_its_interface(simulated):
    s = cuda.stream()
    made = [cuda.to_device(np.zeros(4, np.float32), stream=s),
            cuda.device_array(4, np.float32, stream=s), cuda.mapped_array(4, stream=s)]
    for d in made:
        assert d.stream is s and d.__cuda_array_interface__["stream"] == int(s)
        assert d[1:].__cuda_array_interface__["stream"] == int(s)    # a view keeps it
    assert cuda.to_device(np.zeros(2)).__cuda_array_interface__["stream"] is None
    # consumers of such arrays and of their interfaces in the simulator
    ns = _module(KERNELS)
    d = made[0]
    ns["add1"].specialize(d)[1, 32](d)
    back = cuda.from_cuda_array_interface(d.__cuda_array_interface__, owner=d)
    assert _host(back) == [1.0] * 4 and cuda.as_cuda_array(d).stream is s


def test_default_streams_have_their_handles_and_events_fail_as_the_driver_does():
    """The legacy and per-thread default streams are handles 1 and 2 in the simulator too; an
    event that cannot time fails with numba-cuda's driver error (a RuntimeError too)."""
    from gpureplace.errors import CudaDriverError
    assert int(cuda.legacy_default_stream().handle.value) == 1
    assert int(cuda.per_thread_default_stream().handle.value) == 2
    start, end = cuda.event(timing=False), cuda.event()
    start.record()
    end.record()
    with pytest.raises(CudaDriverError, match="timing=True"):
        cuda.event_elapsed_time(start, end)
