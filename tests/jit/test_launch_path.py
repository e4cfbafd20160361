"""The GPU launch path on the CPU: a stand-in device and driver record what would be launched.

The general path (argument keys, compile, load, pack, launch), the generated fast path that
replaces it, revalidation after a redefinition, and prepared launches all run here with the
driver call replaced by a recorder; the H200 runs the same paths for real (tests marked gpu).
"""

import struct
import threading

import numpy as np
import pytest

import gpureplace
from gpureplace import cuda
from gpureplace.config import settings
from gpureplace import probe
from gpureplace.runtime import launch

from test_binder import ndarray      # a class shaped (and named) like CuPy's ndarray


class FakeLoaded:
    """What launch.LoadedKernel gives the launch paths, recording launches instead."""

    instances = []

    def __init__(self, spec, device_id, link=(), carveout=None):
        self.spec = spec
        self.device_id = device_id
        self.fn_ptr = 1000 + len(FakeLoaded.instances)
        self.packer = struct.Struct(spec.param_format)
        import ctypes
        self.buffer = ctypes.create_string_buffer(max(self.packer.size, 1))
        self.extra_ptr = 77
        self.lock = threading.Lock()
        self.packed_by = None
        self.calls = []
        self.launch_kernel = self._record
        self.free_shared = 48 * 1024
        FakeLoaded.instances.append(self)

    def _record(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        values = self.packer.unpack(self.buffer.raw[:self.packer.size]) if extra else None
        self.calls.append(((gx, gy, gz), (bx, by, bz), shared, stream, values))

    def allow_shared(self, shared):
        pass

    def attribute(self, name):
        # as LoadedKernel.attribute: the driver's CU_FUNC_ATTRIBUTE_<NAME> of the function
        driver = probe.cupy_module().cuda.driver
        return driver.funcGetAttribute(getattr(driver, f"CU_FUNC_ATTRIBUTE_{name.upper()}"),
                                       self.fn_ptr)

    def launch(self, grid, block, stream, shared, values):
        self.packed_by = None                     # as LoadedKernel.launch: the buffer is rewritten
        self.packer.pack_into(self.buffer, 0, *values)
        self._record(self.fn_ptr, *grid, *block, shared, stream, 0, self.extra_ptr)
        if self.spec.options.debug:               # as LoadedKernel.launch
            self.raise_device_exception(stream)

    def raise_device_exception(self, stream):
        self.checks = getattr(self, "checks", 0) + 1


@pytest.fixture
def fake_gpu(monkeypatch):
    FakeLoaded.instances.clear()
    monkeypatch.setattr(settings, "backend", "gpu")
    monkeypatch.setattr(probe, "available", lambda: True)
    monkeypatch.setattr(probe, "current_device", lambda: 0)
    monkeypatch.setattr(probe, "arch_of", lambda d: "sm_90")
    monkeypatch.setattr(probe, "driver_version", lambda: 13000)
    monkeypatch.setattr(launch, "LoadedKernel", FakeLoaded)
    monkeypatch.setattr(launch, "ensure_context", lambda dev: None)
    monkeypatch.setattr(launch, "current_stream", lambda dev=-1: type("S", (), {"ptr": 5})())
    monkeypatch.setattr(launch, "retry_errors", lambda: ())
    return FakeLoaded.instances


def test_general_then_fast_path_launch_the_same_parameters(fake_gpu):
    ns = {"cuda": cuda}
    exec("def scale(v):\n    return v * 2.0\n"
         "@cuda.jit\ndef k(x, a):\n    i = cuda.grid(1)\n    if i < x.size:\n"
         "        x[i] = scale(a) * x[i]\n", ns)
    k = ns["k"]
    x = ndarray((100,), np.float32, ptr=0x5000)
    k[4, 32](x, 1.5)                                   # general path: compile, load, launch
    assert len(fake_gpu) == 1
    k[4, 32](x, 2.5)                                   # generated fast path
    calls = fake_gpu[0].calls
    assert calls[0] == ((4, 1, 1), (32, 1, 1), 0, 5, (0x5000, 100, 1.5))
    assert calls[1] == ((4, 1, 1), (32, 1, 1), 0, 5, (0x5000, 100, 2.5))
    assert type(k[4, 32]).__call__ is not type(k[4, 32]).__mro__[1].__call__   # fast installed

    # a redefinition moves the world: the next launch recompiles and loads the new code
    exec("def scale(v):\n    return v * 3.0\n", ns)
    gpureplace.refresh()
    k[4, 32](x, 1.0)
    assert len(fake_gpu) == 2 and "0d4008000000000000" in fake_gpu[1].spec.ptx
    assert fake_gpu[1].calls[0][4] == (0x5000, 100, 1.0)

    # other argument types: another specialisation; the first one stays loaded
    k[1, 32](ndarray((10,), np.float64, ptr=0x6000), 1.0)
    assert len(fake_gpu) == 3


def test_prepared_launch_packs_once_and_rebinds_after_a_redefinition(fake_gpu):
    ns = {"cuda": cuda}
    exec("OFFSET = 1.0\n@cuda.jit\ndef k(x, a):\n    x[0] = a + OFFSET\n", ns)
    x = ndarray((4,), np.float32, ptr=0x7000)
    run = ns["k"][1, 1, 9].prepare(x, 3.0)
    run()
    run()
    assert len(fake_gpu) == 1
    assert [c[3] for c in fake_gpu[0].calls] == [9, 9]       # the explicit stream
    ns["OFFSET"] = 2.0
    gpureplace.refresh()
    run()
    assert len(fake_gpu) == 2


def test_a_prepared_launch_called_with_arguments_says_they_were_bound(fake_gpu):
    ns = {"cuda": cuda}
    exec("@cuda.jit\ndef k(x, a):\n    x[0] = a\n", ns)
    x = ndarray((4,), np.float32, ptr=0x7000)
    run = ns["k"][1, 1].prepare(x, 3.0)
    with pytest.raises(TypeError, match=r"a prepared launch of k takes no arguments: they were "
                                        r"bound by prepare\(\)"):
        run(x, 4.0)
    assert not fake_gpu[0].calls                             # nothing launched
    run()
    assert len(fake_gpu[0].calls) == 1


def test_debug_kernels_wait_and_check_after_every_launch(fake_gpu):
    """A debug kernel never takes the fast path nor a graph: each launch, plain or prepared,
    ends in the check that raises what a thread raised (compiler/exceptions.py)."""
    @cuda.jit(debug=True)
    def k(x, a):
        x[0] = a

    x = ndarray((4,), np.float32, ptr=0x7100)
    for _ in range(3):
        k[1, 1](x, 2.0)
    run = k[1, 1, 9].prepare(x, 3.0)
    run()
    run()
    loaded, = fake_gpu
    assert len(loaded.calls) == 5 and loaded.checks == 5
    assert not run.uses_graph


def test_bad_arguments_launch_nothing(fake_gpu):
    @cuda.jit
    def k(x, a):
        x[0] = a

    x = ndarray((4,), np.float32)
    with pytest.raises(gpureplace.LaunchError, match="argument 1 \\('a'\\)"):
        k[1, 1](x, object())
    with pytest.raises(gpureplace.LaunchError, match="takes 2 argument"):
        k[1, 1](x, 1.0, 2.0)
    assert all(not inst.calls for inst in fake_gpu)


def test_a_bfloat16_scalar_argument_takes_the_fast_path_too(fake_gpu):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    ns = {"cuda": cuda}
    exec("@cuda.jit\ndef axpb(a, x, out):\n    i = cuda.grid(1)\n    if i < x.size:\n"
         "        out[i] = a * x[i]\n", ns)
    k = ns["axpb"]
    x = ndarray((64,), ml_dtypes.bfloat16, ptr=0x5000)
    out = ndarray((64,), ml_dtypes.bfloat16, ptr=0x6000)
    two, three = ml_dtypes.bfloat16(2.0), ml_dtypes.bfloat16(3.0)
    k[1, 64](two, x, out)                              # general path, then the fast one is built
    k[1, 64](three, x, out)                            # the fast path
    calls = fake_gpu[0].calls
    assert len(fake_gpu) == 1 and len(calls) == 2
    # the scalar travels as its 16 bits (bfloat16 2.0 is 0x4000, 3.0 is 0x4040)
    assert calls[0][4][0] == 0x4000 and calls[1][4][0] == 0x4040
    assert type(k[1, 64]).__call__ is not type(k[1, 64]).__mro__[1].__call__
