"""Launches in a process with two GPUs, on the CPU: a stand-in driver with two devices.

The launch paths (general, generated fast path, prepared launches) run with the driver call
recorded (tests/jit/test_launch_path.py's FakeLoaded) and ``probe`` reporting two devices, the
current one switched as ``cupy.cuda.Device(i)`` switches it.  The H200 pair runs the same
scenarios for real (tests/jit/test_multi_gpu.py, which skips with fewer than two GPUs).
"""

import contextlib
import gc
import weakref

import numpy as np
import pytest

import gpureplace
from gpureplace import cuda, probe
from gpureplace.runtime import arguments, placement
from gpureplace.runtime.arguments import ArgumentError

from fake_cupy import ndarray
from test_launch_path import FakeLoaded, fake_gpu  # noqa: F401  (the fixture)


class _TwoDevices:
    """``probe``'s view of a machine with GPUs 0 and 1, and CuPy's ``Device`` switching them."""

    def __init__(self):
        self.current = 0
        outer = self

        class Device:
            def __init__(self, i):
                self.id = i

            def __enter__(self):
                self.prev, outer.current = outer.current, self.id
                return self

            def __exit__(self, *exc):
                outer.current = self.prev

        self.cuda = type("cuda", (), {"Device": Device})

    @contextlib.contextmanager
    def on(self, i):
        with self.cuda.Device(i):
            yield


@pytest.fixture
def two_gpus(fake_gpu, monkeypatch):  # noqa: F811
    gpus = _TwoDevices()
    monkeypatch.setattr(probe, "device_count", lambda: 2)
    monkeypatch.setattr(probe, "current_device", lambda: gpus.current)
    monkeypatch.setattr(probe, "cupy_module", lambda: gpus)
    # device memory (not managed): CuPy's allocation device is where the memory is
    monkeypatch.setattr(placement, "_pointer_device", lambda ptr: ptr >> 24)
    return gpus, fake_gpu


def _kernel():
    ns = {"cuda": cuda}
    exec("def scale(v):\n    return v * 2.0\n"
         "@cuda.jit\ndef k(x, a):\n    i = cuda.grid(1)\n    if i < x.size:\n"
         "        x[i] = scale(a) * x[i]\n", ns)
    return ns


def _array(device, n=64, ptr=0x5000):
    return ndarray((n,), np.float32, ptr=(device << 24) | ptr, device=device)


def test_one_compile_one_module_per_device(two_gpus):
    gpus, loaded = two_gpus
    ns = _kernel()
    k = ns["k"]
    before = gpureplace.stats()["kernel_compiles"]
    k[2, 32](_array(0), 1.0)
    with gpus.on(1):
        k[2, 32](_array(1), 1.0)
        k[2, 32](_array(1), 2.0)                     # fast path, on device 1
    k[2, 32](_array(0), 3.0)                         # back on device 0: its module again
    assert gpureplace.stats()["kernel_compiles"] - before == 1
    assert [ld.device_id for ld in loaded] == [0, 1]
    assert loaded[0].spec is loaded[1].spec              # one compile, two loads
    assert [c[4] for c in loaded[0].calls] == [(0x5000, 64, 1.0), (0x5000, 64, 3.0)]
    assert [c[4][2] for c in loaded[1].calls] == [1.0, 2.0]


def test_an_argument_on_another_device_is_refused_by_name_on_every_path(two_gpus):
    gpus, loaded = two_gpus
    k = _kernel()["k"]
    with pytest.raises(ArgumentError, match=r"argument 0 \('x'\) is on device 1, but the "
                                            r"launch is on device 0") as info:
        k[2, 32](_array(1), 1.0)
    assert "cuda.gpus[1]" in str(info.value)
    assert loaded == [] or all(not ld.calls for ld in loaded)           # nothing launched
    k[2, 32](_array(0), 1.0)                         # builds the fast path for device 0
    k[2, 32](_array(0, ptr=0x6000), 1.0)             # (another array: taken, checked)
    for bad in (_array(1), _array(1, ptr=0x6000)):   # the fast path hands it over: refused
        with pytest.raises(ArgumentError, match="is on device 1"):
            k[2, 32](bad, 1.0)
    assert len(loaded[0].calls) == 2
    # a prepared launch checks its arguments when it binds
    with pytest.raises(ArgumentError, match="is on device 1"):
        k[2, 32].prepare(_array(1), 1.0)


def test_managed_memory_and_scalars_pass(two_gpus, monkeypatch):
    gpus, loaded = two_gpus
    k = _kernel()["k"]
    monkeypatch.setattr(placement, "_pointer_device", lambda ptr: None)   # managed memory
    k[2, 32](_array(1), 1.0)
    assert len(loaded[0].calls) == 1
    # inside a tuple or a vector view too
    assert placement.elsewhere((_array(0), _array(1)), 0) is None
    assert placement.elsewhere(cuda.as_vectors(_array(1), 4), 0) is None


def test_arrays_inside_tuples_and_vector_views_are_checked(two_gpus):
    @cuda.jit
    def pair(xs, out):
        out[0] = xs[0][0] + xs[1][0]

    out = _array(0, ptr=0x9000)
    with pytest.raises(ArgumentError, match=r"argument 0 \('xs'\) is on device 1"):
        pair[1, 1]((_array(0), _array(1, ptr=0x7000)), out)
    pair[1, 1]((_array(0), _array(0, ptr=0x7000)), out)
    assert placement.elsewhere(cuda.as_vectors(_array(1), 4), 0) == 1


def test_other_array_kinds_say_their_device():
    class DLPackArray:
        def __init__(self, kind, dev):
            self.kind, self.dev = kind, dev

        def __dlpack__(self, stream=None):
            raise AssertionError("not needed to find the device")

        def __dlpack_device__(self):
            return (self.kind, self.dev)

    assert placement.elsewhere(DLPackArray(2, 1), 0) == 1              # kDLCUDA
    assert placement.elsewhere(DLPackArray(13, 1), 0) is None          # managed
    assert placement.elsewhere(DLPackArray(1, 0), 1) is None           # CPU memory
    assert placement.elsewhere(3.0, 0) is None
    assert placement.elsewhere(ndarray((0,), np.float32, device=1), 0) is None  # no memory


def test_the_fast_path_follows_the_current_device(two_gpus):
    gpus, loaded = two_gpus
    k = _kernel()["k"]
    x0, x1 = _array(0), _array(1)
    for _ in range(3):                               # alternate: each launch on its device
        k[2, 32](x0, 1.0)
        with gpus.on(1):
            k[2, 32](x1, 1.0)
    assert [len(ld.calls) for ld in loaded] == [3, 3]
    assert [ld.device_id for ld in loaded] == [0, 1]


def test_a_redefinition_unloads_the_old_code_on_every_device(two_gpus):
    gpus, loaded = two_gpus
    ns = _kernel()
    k = ns["k"]
    k[2, 32](_array(0), 1.0)
    with gpus.on(1):
        k[2, 32](_array(1), 1.0)
    old = [weakref.ref(ld) for ld in loaded]
    exec("def scale(v):\n    return v * 3.0\n", ns)
    gpureplace.refresh()
    k[2, 32](_array(0), 1.0)                         # recompiles; device 1's old module goes too
    assert {d for (_, d) in k._launch_cache} == {0}
    new = loaded[2]
    loaded.clear()                                   # (the fixture's list holds them too)
    gc.collect()
    assert [r() for r in old] == [None, None]
    with gpus.on(1):
        k[2, 32](_array(1), 1.0)
    assert [ld.device_id for ld in loaded] == [1] and loaded[0].spec is new.spec


def test_a_prepared_launch_stays_on_its_device(two_gpus, monkeypatch):
    gpus, loaded = two_gpus
    seen = []
    record = FakeLoaded._record
    monkeypatch.setattr(FakeLoaded, "_record",
                        lambda self, *a: (seen.append(gpus.current), record(self, *a)))
    ns = _kernel()
    k = ns["k"]
    with gpus.on(1):
        run = k[2, 32].prepare(_array(1), 1.0)
    assert run.device_id == 1
    run()                                            # device 0 is current: it runs on 1
    assert seen == [1] and gpus.current == 0
    exec("def scale(v):\n    return v * 3.0\n", ns)
    gpureplace.refresh()
    run()                                            # binds again, on device 1
    assert [ld.device_id for ld in loaded] == [1, 1]


def test_one_gpu_launches_skip_the_device_checks(fake_gpu, monkeypatch):  # noqa: F811
    monkeypatch.setattr(probe, "device_count", lambda: 1)
    k = _kernel()["k"]
    x = _array(0)
    k[2, 32](x, 1.0)
    fast = type(k[2, 32]).__call__
    assert "device" not in fast.source.replace("_current_stream(DEV)", "")
    assert not placement.multi_gpu()


def test_the_device_is_not_part_of_an_argument_key():
    # one compile serves every device
    assert arguments.value_key(_array(0))[0] == arguments.value_key(_array(1))[0]
