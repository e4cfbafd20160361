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
