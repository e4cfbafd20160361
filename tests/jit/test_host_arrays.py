"""Host NumPy arrays given to a launch, as numba-cuda treats them (issue 16): copied to the device
before the launch and back after it, with a performance warning the first time per kernel;
``settings.host_arrays`` ("warn", "copy", "error", env ``GPUREPLACE_HOST_ARRAYS``, trait
``GPUReplace.host_arrays``) says whether to warn, copy quietly or refuse.  Prepared launches
and graph capture refuse them by name; the fast path of device arrays is not touched."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

import gpureplace
from gpureplace import LaunchError, cuda
from gpureplace.config import settings
from gpureplace.errors import PerformanceWarning


@cuda.jit
def twice(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 2 * x[i]


def _host_warnings(record):
    return [w for w in record if issubclass(w.category, PerformanceWarning)]


# -- the setting -----------------------------------------------------------------------------

def test_the_setting_takes_three_values_and_names_itself_when_wrong(monkeypatch):
    monkeypatch.setattr(settings, "_host_arrays", settings._host_arrays)
    for mode in ("copy", "ERROR ", "warn"):
        settings.host_arrays = mode
        assert settings.host_arrays == mode.strip().lower()
    with pytest.raises(ValueError, match=r"host_arrays must be one of warn, copy, error, got "
                                         r"'loud' \(GPUREPLACE_HOST_ARRAYS"):
        settings.host_arrays = "loud"
    assert settings.host_arrays == "warn"          # unchanged by the refused value


def test_the_environment_variable_sets_the_default_and_a_bad_one_is_named_at_launch():
    code = ("import numpy as np\nfrom gpureplace import cuda\nfrom gpureplace.config import "
            "settings\nprint(settings.host_arrays)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**_env(), "GPUREPLACE_HOST_ARRAYS": "error"})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "error"
    bad = code + ("@cuda.jit\ndef k(x):\n    x[0] = 1\nk[1, 1](np.zeros(1))\n")
    run = subprocess.run([sys.executable, "-c", bad.replace("print(settings.host_arrays)\n",
                                                            "")],
                         capture_output=True, text=True,
                         env={**_env(), "GPUREPLACE_HOST_ARRAYS": "sometimes"})
    assert run.returncode != 0
    assert "GPUREPLACE_HOST_ARRAYS" in run.stderr and "'sometimes'" in run.stderr


def _env():
    import os
    return {**os.environ, "GPUREPLACE_BACKEND": "simulator"}


# -- the simulator: host memory is the device's ---------------------------------------------

def test_the_simulator_runs_host_arrays_as_they_are_without_a_warning(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    x, out = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        twice[1, 8](x, out)
    assert out.tolist() == [0, 2, 4, 6, 8]
    assert not _host_warnings(record)          # nothing is copied: nothing to warn about


def test_error_mode_refuses_host_arrays_in_the_simulator_too(monkeypatch):
    """Strictness checked on the CPU holds on the GPU: the simulator's device arrays (from
    cuda.to_device / device_array) pass, plain NumPy arrays do not, and nothing runs."""
    monkeypatch.setattr(settings, "backend", "simulator")
    monkeypatch.setattr(settings, "_host_arrays", "error")
    x, out = np.arange(5, dtype=np.float32), np.full(5, 7, np.float32)
    with pytest.raises(LaunchError, match=r"twice: argument 0 \('x'\), 1 \('out'\) is a host "
                                          r"NumPy array, which settings.host_arrays = 'error' "
                                          r"refuses") as info:
        twice[1, 8](x, out)
    assert "cuda.to_device" in str(info.value)
    assert out.tolist() == [7] * 5
    d_x, d_out = cuda.to_device(x), cuda.device_array_like(out)
    twice[1, 8](d_x, d_out)
    assert d_out.copy_to_host().tolist() == [0, 2, 4, 6, 8]
    with pytest.raises(LaunchError, match=r"argument 1 \('out'\)"):
        twice[1, 8](d_x, out)


def test_the_extension_trait_sets_the_mode_and_refuses_bad_values(monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets import TraitError

    monkeypatch.setattr(settings, "_host_arrays", "warn")
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpureplace")
    try:
        magics = gpureplace.ipython.extension.loaded()
        shell.run_line_magic("config", "GPUReplace.host_arrays = 'error'")
        assert settings.host_arrays == "error"
        with pytest.raises(TraitError, match="host_arrays must be 'warn', 'copy' or 'error'"):
            magics.host_arrays = "never"
        assert settings.host_arrays == "error"
        magics.host_arrays = "copy"
        assert settings.host_arrays == "copy"
    finally:
        shell.run_line_magic("unload_ext", "gpureplace")


# -- the GPU: copies, the warning, refusals --------------------------------------------------

@pytest.mark.gpu
@pytest.mark.gpu_only
def test_host_arrays_are_copied_there_and_back_with_one_warning_per_kernel(monkeypatch):
    from numba.core.errors import NumbaPerformanceWarning
    monkeypatch.setattr(settings, "_host_arrays", "warn")

    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = 2 * x[i]

    x, out = np.arange(10, dtype=np.float32), np.zeros(10, np.float32)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        k[1, 16](x, out)                     # the launch waits: the result is there
        k[1, 16](x + 1, out)                 # said once per kernel
    assert out.tolist() == (2 * (x + 1)).tolist()
    said = _host_warnings(record)
    assert len(said) == 1
    assert issubclass(said[0].category, NumbaPerformanceWarning)
    text = str(said[0].message)
    assert "argument 0 ('x'), 1 ('out') is a host NumPy array" in text
    assert "Host array used in CUDA kernel will incur copy overhead" in text
    assert said[0].filename == __file__              # points at the user's launch


def test_an_empty_array_is_contiguous_whatever_strides_numpy_gave_it():
    # np.array([]) has strides (0,): typed as any other empty array (numba-cuda's reshape of
    # an empty array failed here as a strided 'A' array)
    from gpureplace.runtime import transfers
    for a in (np.array([]), np.zeros((1, 0, 2)), np.zeros((0, 3), order="F"), np.zeros(0)):
        key = transfers.host_array_argument(a)[0]
        assert key == ("array", a.dtype, a.ndim, "C"), (a.strides, key)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_views_records_read_only_and_empty_host_arrays(monkeypatch):
    import cupy as cp
    monkeypatch.setattr(settings, "_host_arrays", "copy")
    base = np.zeros(20, np.float32)
    view = base[::2]                                  # strided: written back through the view
    x = np.arange(10, dtype=np.float32)
    x.flags.writeable = False                         # read, never written back
    with warnings.catch_warnings():
        warnings.simplefilter("error")                # "copy": no warning
        twice[1, 16](x, view)
    assert base[::2].tolist() == (2 * x).tolist() and not base[1::2].any()
    twice[1, 16](np.zeros(0, np.float32), np.zeros(0, np.float32))
    twice[1, 16](np.array([], np.float32), np.zeros((1, 0), np.float32)[0])   # strides 0
    rec = np.dtype([("a", np.int32), ("b", np.float64)], align=True)

    @cuda.jit
    def fill(r):
        i = cuda.grid(1)
        if i < r.size:
            r[i].a = i
            r[i].b = 0.5 * i

    records = np.zeros(4, rec)
    fill[1, 4](records)
    assert records["a"].tolist() == [0, 1, 2, 3] and records["b"].tolist() == [0, .5, 1, 1.5]
    d_out = cp.zeros(10, np.float32)                  # mixed host and device arrays, a stream
    s = cp.cuda.Stream(non_blocking=True)
    twice[1, 16, s](np.ones(10, np.float32), d_out)
    s.synchronize()
    assert cp.asnumpy(d_out).tolist() == [2.0] * 10
    out = np.zeros(10, np.float32)
    twice.forall(10)(x, out)
    assert out.tolist() == (2 * x).tolist()

    @cuda.jit
    def in_tuples(pair, out):
        out[0] = pair[0][0] + pair[1][1]
        pair[0][1] = 7.0                              # written back through the tuple

    a, b, out = np.ones(2), np.full(2, 2.0), np.zeros(1)
    in_tuples[1, 1]((a, b), out)
    assert out[0] == 3.0 and a.tolist() == [1.0, 7.0]


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_refusals_and_the_device_fast_path(monkeypatch):
    import cupy as cp
    monkeypatch.setattr(settings, "_host_arrays", "copy")
    d_x, d_out = cp.arange(8, dtype=np.float32), cp.zeros(8, np.float32)
    twice[1, 8](d_x, d_out)
    fast = type(twice[1, 8]).__call__
    twice[1, 8](np.ones(8, np.float32), d_out)        # host path: the fast path stays
    assert type(twice[1, 8]).__call__ is fast
    twice[1, 8](d_x, d_out)
    assert cp.asnumpy(d_out).tolist() == (2 * np.arange(8)).tolist()
    with pytest.raises(LaunchError, match=r"twice: argument 0 \('x'\) is a host NumPy array: "
                                          r"prepared launches and CUDA graphs take device"):
        twice[1, 8].prepare(np.ones(8, np.float32), d_out)
    with pytest.raises(LaunchError, match=r"argument 1 \('out'\) \(a host NumPy array\) is "
                                          r"copied to or from the host around each launch, "
                                          r"which a CUDA graph cannot hold"):
        with gpureplace.capture():
            twice[1, 8](d_x, np.zeros(8, np.float32))
    monkeypatch.setattr(settings, "_host_arrays", "error")
    host_out = np.full(8, 3, np.float32)
    with pytest.raises(LaunchError, match=r"argument 1 \('out'\) is a host NumPy array, which "
                                          r"settings.host_arrays = 'error' refuses"):
        twice[1, 8](d_x, host_out)
    assert host_out.tolist() == [3] * 8


# -- numba-cuda's argument extensions --------------------------------------------------------

def _check_extensions():
    from gpureplace.runtime.hints import wrap_arg
    seen, after = [], []

    class DefaultIn:
        def prepare_args(self, ty, val, stream=0, retr=None):
            seen.append(str(ty))
            retr.append(lambda: after.append("done"))
            return ty, wrap_arg(val, default=cuda.In)

    @cuda.jit
    def set_three(arr):
        arr[0] = 3

    host = np.zeros(1, np.int64)
    set_three[1, 1](host)
    assert host[0] == 3                               # the default: copied there and back
    set_three.extensions.append(DefaultIn())          # takes effect on the very next launch
    for _ in range(2):
        host[0] = 0
        set_three[1, 1](host)
        assert host[0] == 0                           # cuda.In: never copied back
    assert seen == ["array(int64, 1d, C)"] * 2 and after == ["done"] * 2
    set_three.extensions.clear()
    set_three[1, 1](host)
    assert host[0] == 3
    with pytest.raises(TypeError, match="has no prepare_args"):
        cuda.jit(extensions=[object()])(lambda a: None)


def test_argument_extensions_in_the_simulator(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    _check_extensions()


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_argument_extensions_on_the_gpu(monkeypatch):
    monkeypatch.setattr(settings, "_host_arrays", "copy")
    _check_extensions()
