"""``gpureplace.benchmark``: event-timed runs, bytes and FLOP rates as shares of the device's
peaks, the picture; in the simulator labelled as such.  The GPU path's logic runs here with
CuPy's events replaced (each run "takes" a known time); the H200 runs it for real."""

import numpy as np
import pytest

import gpureplace
from gpureplace import benchmarking, cuda, probe
from gpureplace.config import settings


def _saxpy():
    ns = {"cuda": cuda}
    exec("@cuda.jit\ndef saxpy(a, x, y, out):\n    i = cuda.grid(1)\n    if i < out.size:\n"
         "        out[i] = a * x[i] + y[i]\n", ns)
    return ns["saxpy"]


def test_in_the_simulator_times_are_labelled_and_give_no_rates(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    saxpy = _saxpy()
    n = 256
    x, y, out = (np.ones(n, np.float32) for _ in range(3))
    r = gpureplace.benchmark(saxpy[2, 128], 2.0, x, y, out, flops=2 * n)
    assert r.simulated and len(r.times) >= 3 and (r.times > 0).all()
    assert out[0] == 3.0
    assert r.bytes == 3 * n * 4 and r.flops == 2 * n
    text = repr(r)
    assert "saxpy[2, 128] on simulator" in text and "no rates" in text
    assert r.bandwidth_fraction is None and r.flop_fraction is None
    assert "<svg" in r._repr_html_() and "roofline" not in r._repr_html_()


def test_arguments_are_checked_by_name():
    saxpy = _saxpy()
    with pytest.raises(TypeError, match="configured kernel"):
        gpureplace.benchmark(42)
    with pytest.raises(TypeError, match=r"benchmark\(min_repeat=...\) takes a positive int"):
        gpureplace.benchmark(saxpy[1, 1], min_repeat=0)
    with pytest.raises(TypeError, match=r"benchmark\(flops=...\) takes a non-negative number"):
        gpureplace.benchmark(saxpy[1, 1], flops="many")
    with pytest.raises(ValueError, match="min_repeat \\(20\\) is more than max_repeat \\(5\\)"):
        gpureplace.benchmark(saxpy[1, 1], min_repeat=20, max_repeat=5)


def test_bytes_count_each_array_once():
    a = np.zeros(10, np.float64)
    b = np.zeros(3, np.int32)
    assert benchmarking.argument_bytes((1.0, a, b, a, (b, a))) == 80 + 12


class _FakeEvent:
    clock = [0.0]

    def record(self, stream=None):
        self.t = _FakeEvent.clock[0]

    def synchronize(self):
        pass


class _FakeCupy:
    """What _event_timed uses of CuPy: streams, events, an array to fill."""

    def __init__(self, run_seconds):
        self.run_seconds = run_seconds
        self.fills = 0
        fake = self

        class Stream:
            def __init__(self, ptr):
                self.ptr = ptr

            def synchronize(self):
                pass

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        class Scratch:
            def fill(self, value):
                fake.fills += 1

        class CudaNS:
            ExternalStream = Stream
            Event = _FakeEvent

            @staticmethod
            def get_elapsed_time(a, b):
                return (b.t - a.t) * 1e3

            @staticmethod
            def get_current_stream():
                return Stream(5)

        self.cuda = CudaNS
        self.int32 = np.int32
        self.empty = lambda n, dtype=None: Scratch()


def test_the_gpu_path_times_each_run_between_events_and_rates_it(monkeypatch):
    fake = _FakeCupy(run_seconds=2e-5)
    peaks = benchmarking.DevicePeaks("Test GPU", bandwidth=1e9, fp32_flops=1e13,
                                     l2_bytes=1 << 20)
    monkeypatch.setattr(benchmarking.backends, "simulated", lambda: False)
    monkeypatch.setattr(probe, "cupy_module", lambda: fake)
    monkeypatch.setattr(probe, "available", lambda: True)            # (a fake GPU)
    monkeypatch.setattr(benchmarking, "device_peaks", lambda device_id=None: peaks)
    launches = []

    def launch(*args):
        launches.append(args)
        _FakeEvent.clock[0] += fake.run_seconds

    x = np.zeros(1000, np.float32)                      # (as a device array's size)
    r = benchmarking.benchmark(launch, x, min_repeat=10, max_repeat=100, min_time=1e-3,
                               flops=8000, name="k")
    # 1 warm-up, then 10 runs, then doubling until 1 ms of runs: 10 + 10 + 20 + 40 = 80 >= 50
    assert len(launches) == 1 + 80 and len(r.times) == 80
    assert r.median == pytest.approx(2e-5)
    assert r.bandwidth == pytest.approx(4000 / 2e-5)
    assert r.bandwidth_fraction == pytest.approx(0.2)
    assert r.flop_fraction == pytest.approx(8000 / 2e-5 / 1e13)
    assert fake.fills == 80                              # the L2 flushed before each run
    text = repr(r)
    assert "k on Test GPU: median 20.00 µs" in text and "= 20% of 1 GB/s" in text
    assert "(L2 flushed before each)" in text and "host NumPy arrays" in text
    assert "roofline" in r._repr_html_()
    warm = benchmarking.benchmark(launch, min_repeat=3, max_repeat=3, flush_l2=False)
    assert len(warm.times) == 3 and "(warm L2)" in repr(warm) and warm.bandwidth is None


@pytest.mark.gpu
@pytest.mark.gpu_only        # (CUDA events and the driver's peaks; 16M threads in the simulator)
def test_saxpy_on_the_gpu_moves_a_plausible_share_of_the_peak_bandwidth():
    import cupy as cp
    saxpy = _saxpy()
    n = 1 << 24
    x, y, out = (cp.ones(n, cp.float32) for _ in range(3))
    r = gpureplace.benchmark(saxpy[n // 256, 256], 2.0, x, y, out, flops=2 * n)
    assert float(out[0]) == 3.0 and not r.simulated
    assert r.peaks.bandwidth and r.peaks.fp32_flops
    assert 0.2 < r.bandwidth_fraction < 1.05, repr(r)
    assert "roofline" in r._repr_html_()


def _doubler():
    ns = {"cuda": cuda}
    exec("@cuda.jit\ndef double(x, out):\n    i = cuda.grid(1)\n    out[i] = 2 * x[i]\n", ns)
    return ns["double"]


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


def test_in_the_simulator_min_repeat_is_honoured_and_the_default_is_small(simulated):
    saxpy = _saxpy()
    x, y, out = (np.ones(64, np.float32) for _ in range(3))
    assert len(gpureplace.benchmark(saxpy[1, 64], 2.0, x, y, out, min_repeat=12,
                                    min_time=0).times) == 12
    # without min_repeat, 3 runs at least (the simulator is slow), then until min_time
    assert len(gpureplace.benchmark(saxpy[1, 64], 2.0, x, y, out, min_time=0).times) == 3


def test_a_maximum_alone_bounds_the_runs_and_only_both_bounds_can_conflict(simulated):
    saxpy = _saxpy()
    x, y, out = (np.ones(64, np.float32) for _ in range(3))
    r = gpureplace.benchmark(saxpy[1, 64], 2.0, x, y, out, max_repeat=2, min_time=10)
    assert len(r.times) == 2
    r = gpureplace.benchmark(saxpy[1, 64], 2.0, x, y, out, max_repeat=1)
    assert len(r.times) == 1
    with pytest.raises(ValueError, match=r"^benchmark: min_repeat \(3\) is more than "
                                         r"max_repeat \(2\)$"):
        gpureplace.benchmark(saxpy[1, 64], 2.0, x, y, out, min_repeat=3, max_repeat=2)


def test_on_the_gpu_path_a_maximum_alone_lowers_the_default_minimum(monkeypatch):
    fake = _FakeCupy(run_seconds=1e-3)
    peaks = benchmarking.DevicePeaks("Test GPU", 1e9, 1e13, 1 << 20)
    monkeypatch.setattr(benchmarking.backends, "simulated", lambda: False)
    monkeypatch.setattr(probe, "cupy_module", lambda: fake)
    monkeypatch.setattr(probe, "available", lambda: True)            # (a fake GPU)
    monkeypatch.setattr(benchmarking, "device_peaks", lambda device_id=None: peaks)

    def launch():
        _FakeEvent.clock[0] += fake.run_seconds
    assert len(benchmarking.benchmark(launch, max_repeat=4, min_time=10).times) == 4
    # a minimum above the default maximum raises that maximum
    assert len(benchmarking.benchmark(launch, min_repeat=1200, min_time=0).times) == 1200
    assert len(benchmarking.benchmark(launch, min_time=0).times) == 10


def test_counts_take_any_real_number_and_refuse_what_is_no_count(simulated):
    saxpy = _saxpy()
    x, y, out = (np.ones(64, np.float32) for _ in range(3))
    r = gpureplace.benchmark(saxpy[1, 64], 2.0, x, y, out, flops=np.prod(x.shape),
                             bytes=np.int64(3) * x.nbytes, min_repeat=1, max_repeat=1)
    assert r.flops == 64 and type(r.flops) is int and r.bytes == 768 and type(r.bytes) is int
    assert "768 bytes and 64 FLOP a run" in repr(r)
    r = gpureplace.benchmark(saxpy[1, 64], 2.0, x, y, out, flops=np.float32(1.5e3),
                             min_repeat=1, max_repeat=1)
    assert r.flops == 1500.0 and type(r.flops) is float
    r = gpureplace.benchmark(saxpy[1, 64], 2.0, x, y, out, min_repeat=np.int64(2),
                             max_repeat=np.uint8(2), min_time=np.float32(0.0))
    assert len(r.times) == 2
    for what, value, shown in [("flops", float("nan"), "nan"), ("flops", float("inf"), "inf"),
                               ("bytes", -1, "-1"), ("bytes", np.float64(-2.0), "-2.0"),
                               ("flops", True, "True"), ("bytes", np.bool_(True), "True"),
                               ("flops", "many", "'many'")]:
        with pytest.raises(TypeError, match=rf"benchmark\({what}=...\) takes a non-negative "
                                            rf".*number, got .*{shown}"):
            gpureplace.benchmark(saxpy[1, 64], 2.0, x, y, out, **{what: value})
    for value in ("0.1s", -1, float("nan"), True):
        with pytest.raises(TypeError, match=r"benchmark\(min_time=...\) takes a non-negative "
                                            r".*number of seconds"):
            gpureplace.benchmark(saxpy[1, 64], 2.0, x, y, out, min_time=value)


def test_simulated_results_have_no_rates_but_keep_their_counts(simulated):
    saxpy = _saxpy()
    x, y, out = (np.ones(256, np.float32) for _ in range(3))
    r = gpureplace.benchmark(saxpy[2, 128], 2.0, x, y, out, flops=512, min_repeat=1,
                             max_repeat=2)
    assert r.simulated and r.bytes == 3 * 1024 and r.flops == 512
    assert r.bandwidth is None and r.flop_rate is None
    assert r.bandwidth_fraction is None and r.flop_fraction is None
    assert r.intensity == pytest.approx(512 / 3072)          # (counts only: no clock in it)


def test_a_prepared_launch_is_named_by_its_kernel_and_counts_its_bound_arrays(simulated):
    saxpy = _saxpy()
    # (device arrays: a prepared launch refuses host NumPy arrays, as on the GPU)
    x, y, out = (cuda.to_device(np.ones(256, np.float32)) for _ in range(3))
    prepared = saxpy[2, 128].prepare(2.0, x, y, out)
    r = gpureplace.benchmark(prepared, min_repeat=1, max_repeat=2)
    assert r.name == "saxpy[2, 128]" and r.bytes == 3 * 1024
    assert repr(r).startswith("saxpy[2, 128] on simulator") and "3.1 kB a run" in repr(r)
    assert out.copy_to_host()[0] == 3.0
    assert gpureplace.benchmark(prepared, min_repeat=1, max_repeat=1, name="mine").name == "mine"


def _two_launches(kernel, x, out):
    """(The second launch has one thread too many: out of bounds.)"""
    kernel[1, 7](x, out)
    kernel[1, 8](x, out)


def test_an_error_in_a_function_timed_names_the_launch_inside_it(simulated):
    """A gpureplace error (rendered as one block in IPython) from a launch inside the user's
    function names that launch's line, as calling the function directly does, not the line
    that called benchmark."""
    import inspect
    double = _doubler()
    x, out = np.arange(7, dtype=np.float32), np.zeros(7, np.float32)
    with pytest.raises(IndexError) as direct:
        _two_launches(double, x, out)
    with pytest.raises(IndexError) as timed:
        gpureplace.benchmark(_two_launches, double, x, out)
    line = inspect.getsourcelines(_two_launches)[1] + 3
    at = [text for text in timed.value._render_traceback_() if text.startswith("  at ")]
    assert at == [f"  at {__file__}, line {line}: kernel[1, 8](x, out)"]
    assert timed.value._render_traceback_() == direct.value._render_traceback_()


@pytest.fixture
def fake_gpu(monkeypatch):
    """The GPU path with CuPy's events replaced: each launch of ``fake_gpu.launch`` "takes"
    ``run_seconds``; the device's peaks are an H100's."""
    fake = _FakeCupy(run_seconds=1e-3)
    fake.peaks = benchmarking.DevicePeaks("Test GPU", 3.35e12, 67e12, 50 << 20)
    monkeypatch.setattr(benchmarking.backends, "simulated", lambda: False)
    monkeypatch.setattr(probe, "cupy_module", lambda: fake)
    monkeypatch.setattr(probe, "available", lambda: True)
    monkeypatch.setattr(benchmarking, "device_peaks", lambda device_id=None: fake.peaks)
    fake.launches = 0

    def launch(*args):
        fake.launches += 1
        _FakeEvent.clock[0] += fake.run_seconds
    fake.launch = launch
    return fake


def test_flops_without_bytes_show_the_flop_rate_and_say_why_there_is_no_roofline(fake_gpu):
    """A function timed as a whole moves no array the count sees: with flops= its result shows
    the FLOP rate (no FLOP per byte) and says the bytes are missing, not the FLOP."""
    import re
    r = benchmarking.benchmark(fake_gpu.launch, flops=6_700_000_000, name="run")
    assert r.bytes == 0 and r.intensity is None
    text = repr(r)
    assert "compute: 6,700,000,000 FLOP a run, 6,700.0 GFLOP/s = 10% of 67.0 TFLOP/s fp32" \
        in text and "FLOP/byte" not in text and "memory:" not in text
    shown = re.findall(r"<text[^>]*>([^<]*)</text>", r._repr_html_())[1:]
    assert shown == ["10% of peak fp32 FLOP/s", "no bytes counted: give bytes= for the roofline"]
    x = np.zeros(1000, np.float32)
    r = benchmarking.benchmark(fake_gpu.launch, x, name="run")
    shown = re.findall(r"<text[^>]*>([^<]*)</text>", r._repr_html_())[1:]
    assert shown == ["0% of peak bandwidth", "give flops= for the roofline"]
    r = benchmarking.benchmark(fake_gpu.launch, name="run")
    shown = re.findall(r"<text[^>]*>([^<]*)</text>", r._repr_html_())[1:]
    assert shown == ["no bytes counted: give bytes= and flops= for the roofline"]
    r = benchmarking.benchmark(fake_gpu.launch, x, flops=8000, name="run")
    assert "; 2.00 FLOP/byte" in repr(r) and "roofline: 2.00 FLOP/byte" in r._repr_html_()


class _Interface:
    """An array known only by its ``__cuda_array_interface__`` (another library's type)."""

    def __init__(self, array):
        self.array = array

    @property
    def __cuda_array_interface__(self):
        return self.array.__cuda_array_interface__


class _DLPack:
    """An array known only by DLPack."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_arrays_known_only_by_their_interfaces_are_counted(simulated):
    class Described:
        __cuda_array_interface__ = {"shape": (3, 5), "typestr": "<i2", "data": (0, False),
                                    "strides": None, "version": 3}
    host = np.zeros((4, 2), np.float64)
    assert benchmarking.argument_bytes((Described(), _DLPack(host))) == 30 + 64
    double = _doubler()
    x = cuda.to_device(np.ones(256, np.float32))
    out = cuda.to_device(np.zeros(256, np.float32))
    r = gpureplace.benchmark(double[1, 256], _Interface(x), _DLPack(out), min_repeat=1,
                             max_repeat=1)
    assert r.bytes == 2 * 1024 and out.copy_to_host()[0] == 2.0


def test_a_namedtuple_field_called_value_is_no_transfer_hint(fake_gpu):
    """Only cuda.In / Out / InOut are unwrapped: a namedtuple with a field ``value`` is a
    tuple of arguments, all counted, and its host array is no argument copied each launch."""
    import collections
    Params = collections.namedtuple("Params", "value data")
    scale, data = np.zeros(3, np.float64), np.zeros(1000, np.float32)
    assert benchmarking.argument_bytes((Params(2.0, data),)) == 4000
    assert benchmarking.argument_bytes((Params(scale, data), cuda.In(data))) == 24 + 4000
    r = benchmarking.benchmark(fake_gpu.launch, Params(scale, data), name="k")
    assert r.bytes == 4024 and "host NumPy arrays" not in repr(r)
    r = benchmarking.benchmark(fake_gpu.launch, cuda.InOut(data), name="k")
    assert r.bytes == 4000 and "host NumPy arrays" in repr(r)


def test_a_long_value_is_named_by_its_type_not_shown_whole():
    values = np.arange(1000.0)
    with pytest.raises(TypeError) as info:
        gpureplace.benchmark(lambda: None, flops=values)
    assert str(info.value) == ("benchmark(flops=...) takes a non-negative number, got ndarray "
                               "of shape (1000,)")
    with pytest.raises(TypeError) as info:
        gpureplace.benchmark(values)
    assert str(info.value).endswith("or a callable, got ndarray of shape (1000,)")
    with pytest.raises(TypeError, match=r"takes a positive int, got 'x'$"):
        gpureplace.benchmark(lambda: None, min_repeat="x")


def test_the_warm_up_is_the_same_on_both_backends_and_never_none(simulated, monkeypatch):
    """``warmup`` untimed runs, then the timed ones, on the GPU as in the simulator; none at all
    is refused on both (the first run may compile and load: it is never timed)."""
    calls = []

    def launch():
        calls.append(1)
    r = gpureplace.benchmark(launch, warmup=2, min_repeat=3, max_repeat=3)
    assert len(calls) == 2 + 3 and len(r.times) == 3 and r.simulated
    with pytest.raises(TypeError, match=r"^benchmark\(warmup=...\) takes a positive int, got 0$"):
        gpureplace.benchmark(launch, warmup=0)
    fake = _FakeCupy(run_seconds=1e-3)
    monkeypatch.setattr(benchmarking.backends, "simulated", lambda: False)
    monkeypatch.setattr(probe, "cupy_module", lambda: fake)
    monkeypatch.setattr(probe, "available", lambda: True)
    monkeypatch.setattr(benchmarking, "device_peaks",
                        lambda device_id=None: benchmarking.DevicePeaks("GPU", 1e9, 1e12, 1 << 20))
    calls.clear()
    r = gpureplace.benchmark(launch, warmup=2, min_repeat=3, max_repeat=3)
    assert len(calls) == 2 + 3 and len(r.times) == 3 and not r.simulated
    with pytest.raises(TypeError, match=r"^benchmark\(warmup=...\) takes a positive int, got 0$"):
        gpureplace.benchmark(launch, warmup=0)


def test_an_in_place_kernel_runs_once_per_warm_up_and_timed_run(simulated):
    """As documented: timing repeats what the launch does to its arrays."""
    ns = {"cuda": cuda}
    exec("@cuda.jit\ndef inc(x):\n    i = cuda.grid(1)\n    if i < x.size:\n"
         "        x[i] += 1\n", ns)
    x = cuda.to_device(np.zeros(64, np.float32))
    r = gpureplace.benchmark(ns["inc"][1, 64], x, warmup=2, min_time=0)
    assert x.copy_to_host()[0] == 2 + len(r.times)


def test_a_ufuncs_result_is_counted_where_no_out_is_given(simulated):
    import functools
    ns = {"cuda": cuda}
    exec("@cuda.vectorize(['float32(float32, float32)'])\ndef vadd(a, b):\n    return a + b\n",
         ns)
    vadd = ns["vadd"]
    x, y, o = (cuda.to_device(np.ones(1000, np.float32)) for _ in range(3))
    # (an out given, which the ufunc returns, counted once: as an argument)
    for launch, args in [(vadd, (x, y)), (vadd, (x, y, o)),
                         (functools.partial(vadd, out=o), (x, y)),
                         (functools.partial(vadd, x), (y,))]:
        r = gpureplace.benchmark(launch, *args, min_repeat=1, max_repeat=1)
        assert (r.bytes, r.name) == (12_000, "vadd"), (launch, args)        # (x, y and o)
    assert o.copy_to_host()[0] == 2.0
