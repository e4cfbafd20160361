"""The launch configuration during a compile (``cuda.launchconfig``), launch-config-sensitive
kernels, and pre-launch callbacks, on the GPU launch path with a recording stand-in driver
(test_launch_path.py's ``fake_gpu``)."""

import pickle
import threading

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.cuda import launchconfig

from test_binder import ndarray
from test_launch_path import fake_gpu  # noqa: F401  (the fixture)


def _kernel():
    ns = {"cuda": cuda}
    exec("@cuda.jit\ndef k(x):\n    i = cuda.grid(1)\n    if i < x.size:\n        x[i] = 1\n", ns)
    return ns["k"]


def test_the_launch_configuration_is_known_while_a_launch_compiles(fake_gpu):  # noqa: F811
    k = _kernel()
    seen = []
    original = k._compile_for_args

    def wrapped(*args, **kws):
        seen.append((launchconfig.current_launch_config(), args))
        return original(*args, **kws)

    k._compile_for_args = wrapped
    x = ndarray((10,), np.int32, ptr=0x5000)
    assert launchconfig.current_launch_config() is None
    k[2, 32, 0, 16](x)
    (cfg, args), = seen
    assert cfg.dispatcher is k and args == (x,) and cfg.args[0] is x
    assert (cfg.griddim, cfg.blockdim, cfg.sharedmem) == ((2, 1, 1), (32, 1, 1), 16)
    k[2, 32, 0, 16](x)                         # compiled already: no compile, nothing seen
    assert len(seen) == 1 and len(fake_gpu) == 1
    assert launchconfig.current_launch_config() is None
    with pytest.raises(RuntimeError, match="No launch config"):
        launchconfig.ensure_current_launch_config()


def test_capture_compile_config_restores_the_method(fake_gpu):  # noqa: F811
    k = _kernel()
    original = k._compile_for_args
    with launchconfig.capture_compile_config(k) as seen:
        k[1, 8](ndarray((4,), np.int32, ptr=0x5000))
    assert seen["config"].dispatcher is k and seen["config"].blockdim == (8, 1, 1)
    assert "_compile_for_args" not in k.__dict__
    assert k._compile_for_args.__func__ is original.__func__
    with pytest.raises(TypeError, match="dispatcher"):
        with launchconfig.capture_compile_config(None):
            pass


def test_each_thread_sees_its_own_launch(fake_gpu):  # noqa: F811
    k = _kernel()
    configured = k[1, 1]
    barrier = threading.Barrier(2)
    seen, errors = [], []
    original = k._compile_for_args

    def wrapped(*args, **kws):
        cfg = launchconfig.ensure_current_launch_config()
        barrier.wait(timeout=5)
        seen.append(id(cfg.args[0]))
        return original(*args, **kws)

    k._compile_for_args = wrapped
    arrays = [ndarray((1,), np.int32, ptr=0x5000), ndarray((1,), np.int32, ptr=0x6000)]

    def run(a):
        try:
            configured(a)
        except BaseException as exc:        # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(a,)) for a in arrays]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and set(seen) == {id(a) for a in arrays}


def test_a_launch_config_sensitive_kernel_compiles_per_configuration(fake_gpu):  # noqa: F811
    k = _kernel()
    original = k._compile_for_args
    compiles = []

    def wrapped(*args, **kws):
        cfg = launchconfig.ensure_current_launch_config()
        cfg.dispatcher.mark_launch_config_sensitive()
        compiles.append(cfg.blockdim)
        return original(*args, **kws)

    k._compile_for_args = wrapped
    x = ndarray((64,), np.int32, ptr=0x5000)
    k[1, 32](x)
    spec = next(iter(k.overloads.values()))
    assert spec.launch_config_sensitive
    k[1, 32](x)                                 # the same configuration: the same kernel
    k[1, 64](x)                                 # another: compiled for it
    k[1, 64](x)
    k[1, 32](x)
    assert len(fake_gpu) == 2
    assert [len(f.calls) for f in fake_gpu] == [3, 2]
    assert [c[1] for c in fake_gpu[1].calls] == [(64, 1, 1)] * 2
    # (no fast launch: each launch checked its configuration)
    assert type(k[1, 32]).__call__ is type(k[1, 32]).__mro__[1].__call__


def test_marking_outside_a_launch_compile_is_refused(fake_gpu):  # noqa: F811
    k, other = _kernel(), _kernel()
    with pytest.raises(RuntimeError, match="No launch config"):
        k.mark_launch_config_sensitive()
    original = k._compile_for_args

    def wrapped(*args, **kws):
        other.mark_launch_config_sensitive()
        return original(*args, **kws)

    k._compile_for_args = wrapped
    with pytest.raises(RuntimeError, match="whose launch is compiling"):
        k[1, 1](ndarray((1,), np.int32, ptr=0x5000))


def test_direct_compile_for_args_selects_the_declared_signature():
    ns = {"cuda": cuda}
    exec("@cuda.jit('void(float64[::1], float64)')\ndef k(x, a):\n    x[0] = a\n", ns)
    k = ns["k"]
    spec = k._compile_for_args(np.zeros(2), 1)           # an int converts to the float64
    assert spec.argtypes == k.declared_signatures[0]
    with pytest.raises(TypeError, match="unexpected keyword"):
        k._compile_for_args(np.zeros(2), 1, stream=0)


def test_pre_launch_callbacks_run_before_each_launch_of_their_configuration(fake_gpu):  # noqa: F811
    k = _kernel()
    x = ndarray((8,), np.int32, ptr=0x5000)
    order = []
    cfg = k[2, 4]
    cfg.pre_launch_callbacks.append(lambda spec, c: order.append((spec.argtypes, c.griddim,
                                                                    len(fake_gpu))))
    cfg(x)
    cfg(x)
    k[1, 4](x)                                  # another configuration: no callbacks
    k[1, 4](x)
    assert [o[1] for o in order] == [(2, 1, 1), (2, 1, 1)]
    assert order[0][2] == 1                     # after the load, before the launch
    assert len(fake_gpu[0].calls) == 4
    with pytest.raises(pickle.PicklingError, match="pre-launch callbacks"):
        pickle.dumps(cfg)
    assert pickle.loads(pickle.dumps(k[1, 4])).blockdim == (4, 1, 1)


def test_a_small_grid_is_warned_of_when_asked_once_per_configuration(monkeypatch):
    import warnings

    from numba.core.errors import NumbaPerformanceWarning

    from gpureplace.config import settings
    k = _kernel()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k[1, 1]                                  # off by default: nothing said
    monkeypatch.setattr(settings, "low_occupancy_warnings", True)
    with pytest.warns(NumbaPerformanceWarning, match=r"Grid size 2 of .*k\[2, 32\] .*low "
                                                     r"occupancy") as record:
        k[2, 32]
    assert record[0].filename == __file__        # the user's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k[2, 32]                                 # the same configuration: said once
        k[256, 256]                              # enough blocks


def test_the_low_occupancy_setting_reads_numba_cudas_environment_variable():
    import os
    import subprocess
    import sys
    code = "from gpureplace.config import settings; print(settings.low_occupancy_warnings)"
    env = dict(os.environ, NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS="1")
    env.pop("GPUREPLACE_LOW_OCCUPANCY_WARNINGS", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "True"
    env["GPUREPLACE_LOW_OCCUPANCY_WARNINGS"] = "0"      # gpureplace's own name decides
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "False"


def test_a_configured_launch_shows_what_it_launches():
    """``kernel[grid, block]`` left as a cell's last value shows the kernel and configuration
    (not an object address); trailing 1s of the dimensions are left out, as written."""
    k = _kernel()
    assert repr(k[4, 256]) == "<launch of k[4, 256]>"
    assert repr(k[(2, 3), (16, 16, 1)]) == "<launch of k[(2, 3), (16, 16)]>"
    assert repr(k[1, 32, 0, 1024]) == "<launch of k[1, 32, stream=0, shared=1024]>"
