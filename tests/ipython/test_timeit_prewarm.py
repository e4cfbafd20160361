"""``%cuda_timeit`` through a real InteractiveShell (the simulator here; the GPU's event timing
is checked in tests/jit/test_benchmark.py), and the warm-up the extension starts when it loads."""

import os
import subprocess
import sys

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")

from IPython.core.error import UsageError  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

from gpureplace.benchmarking import BenchmarkResult  # noqa: E402
from gpureplace.config import settings  # noqa: E402


@pytest.fixture
def ip(monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell
    monkeypatch.setattr(settings, "backend", "simulator")
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpureplace")
    shell.run_cell("%%cuda\ndef saxpy(a, x, y, out):\n    i = cuda.grid(1)\n"
                   "    if i < out.size:\n        out[i] = a * x[i] + y[i]\n")
    shell.user_ns.update(x=np.ones(64, np.float32), y=np.ones(64, np.float32),
                         out=np.zeros(64, np.float32), n=64)
    yield shell
    shell.run_line_magic("unload_ext", "gpureplace")
    shell.reset(new_session=True)


def test_cuda_timeit_times_the_launch_and_shows_the_result(ip):
    with capture_output() as cap:
        r = ip.run_line_magic("cuda_timeit", "-o --flops 2*n saxpy[1, 64](2.0, x, y, out)")
    assert isinstance(r, BenchmarkResult) and r.simulated and r.flops == 128
    assert r.name == "saxpy[1, 64]" and ip.user_ns["out"][0] == 3.0
    shown = cap.outputs[0].data
    assert "saxpy[1, 64] on simulator" in shown["text/plain"] and "no rates" in \
        shown["text/plain"]
    assert "<svg" in shown["text/html"]
    with capture_output():
        assert ip.run_line_magic("cuda_timeit", "saxpy[1, 64](2.0, x, y, out)") is None


@pytest.mark.parametrize("line, message", [
    ("", "no launch to time"),
    ("--flops", "needs a value"),
    ("--fast saxpy[1, 64](2.0, x, y, out)", "unknown option '--fast'"),
    ("saxpy[1, 64]", "is not a launch"),
    ("saxpy[1, 64](a=2.0)", "is not a launch"),
    ("saxpy[1, 64](2.0, x, y, missing)", "argument 'missing': NameError"),
    ("nokernel[1, 64](x)", "the launch 'nokernel\\[1, 64\\]': NameError"),
    ("--runs 2.5 saxpy[1, 64](2.0, x, y, out)", "--runs takes a positive int"),
    ("saxpy[1, 64](2.0, x, y", "is not a Python expression"),
])
def test_cuda_timeit_usage_errors_say_what_is_wrong(ip, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("cuda_timeit", line)



def timeit(ip, line):
    with capture_output():
        return ip.run_line_magic("cuda_timeit", "-o " + line)


@pytest.mark.parametrize("line, flops, bytes_", [
    ("--flops 2 * n saxpy[1, 64](2.0, x, y, out)", 128, 768),
    ("--bytes sum(a.nbytes for a in (x, y, out)) --flops n * 2 saxpy[1, 64](2.0, x, y, out)",
     128, 768),
    ('--flops "2 * n" --bytes \'x.nbytes + y.nbytes\' saxpy[1, 64](2.0, x, y, out)', 128, 512),
    ("--flops 2*n --bytes 7 --warm saxpy [1, 64] (2.0, x, y, out)", 128, 7),
    ("--flops n - 1 saxpy[1, 64](2.0, x, y, out)", 63, 768),
    ("--flops max(n, 3) saxpy[1, 64](2.0, x, y, out)", 64, 768),
])
def test_option_values_are_expressions_with_spaces_or_quoted(ip, line, flops, bytes_):
    r = timeit(ip, "--runs 1 --max-runs 1 " + line)
    assert (r.flops, r.bytes, r.name) == (flops, bytes_, "saxpy[1, 64]")


def test_a_value_ends_before_an_option_that_follows_it(ip):
    with capture_output():
        r = ip.run_line_magic("cuda_timeit", "--flops 2 -o --max-runs 1 saxpy[1, 64](2.0, x, y, "
                                             "out)")
    assert r.flops == 2 and len(r.times) == 1                 # (-o an option, not "2 - o")
    with pytest.raises(UsageError, match="unknown option '--fast'"):
        ip.run_line_magic("cuda_timeit", "--flops 2 --fast saxpy[1, 64](2.0, x, y, out)")


@pytest.mark.parametrize("line, message", [
    ("--flops 2 * --runs 3 saxpy[1, 64](2.0, x, y, out)",
     r"--flops '2 \*' is not a Python expression"),
    ('--min-time "0.1s" saxpy[1, 64](2.0, x, y, out)',
     r"""--min-time "0.1s": '0.1s' is not a Python expression"""),
    ("--min-time 0.1s saxpy[1, 64](2.0, x, y, out)", "--min-time '0.1s' is not a Python expr"),
    ("--flops 2 * n saxpy[1, 64](2.0, x, y, out", r"'saxpy\[1, 64\]\(2.0, x, y, out' is not a "
                                                  r"Python expression"),
    ("--flops 2 * n", "no launch to time"),
])
def test_values_that_are_no_expression_are_named_with_their_option(ip, line, message):
    with pytest.raises(UsageError, match=message) as info:
        ip.run_line_magic("cuda_timeit", line)
    assert "spaces allowed" in str(info.value)                 # (the usage text says how)


def test_runs_are_at_least_as_many_as_asked_in_the_simulator_too(ip):
    assert len(timeit(ip, "--runs 7 --min-time 0 saxpy[1, 64](2.0, x, y, out)").times) == 7
    assert len(timeit(ip, "--runs np.int64(5) --min-time 0 saxpy[1, 64](2.0, x, y, "
                          "out)").times) == 5
    # without --runs the simulator's minimum is 3, then runs go on until --min-time
    assert len(timeit(ip, "--min-time 0 saxpy[1, 64](2.0, x, y, out)").times) == 3


def test_max_runs_alone_bounds_the_runs_and_a_conflict_is_told_in_the_magics_words(ip):
    assert len(timeit(ip, "--max-runs 2 --min-time 10 saxpy[1, 64](2.0, x, y, out)").times) == 2
    with pytest.raises(UsageError, match="^%cuda_timeit: --runs 5 is more than --max-runs 2") \
            as info:
        ip.run_line_magic("cuda_timeit", "--runs 5 --max-runs 2 saxpy[1, 64](2.0, x, y, out)")
    assert "min_repeat" not in str(info.value) and "benchmark" not in str(info.value)


def test_counts_take_numpy_numbers_and_refuse_what_is_no_count_by_the_options_name(ip):
    r = timeit(ip, "--runs 1 --max-runs 1 --flops np.prod(x.shape) --bytes x.nbytes*np.int64(3) "
                   "saxpy[1, 64](2.0, x, y, out)")
    assert (r.flops, r.bytes) == (64, 768) and type(r.flops) is int
    ip.user_ns["seconds"] = "0.1s"
    for line, message in [
            ('--flops float("nan")', "--flops takes a non-negative finite number, got nan"),
            ("--flops float('inf')", "--flops takes a non-negative finite number, got inf"),
            ("--bytes -x.nbytes", "--bytes takes a non-negative finite number, got -256"),
            ("--flops True", "--flops takes a non-negative number, got True"),
            ("--min-time seconds", "--min-time takes a non-negative number of seconds, "
                                   "got '0.1s'"),
            ("--min-time -1", "--min-time takes a non-negative finite number of seconds"),
            ("--max-runs 0", "--max-runs takes a positive int, got 0")]:
        with pytest.raises(UsageError, match=f"^%cuda_timeit: {message}") as info:
            ip.run_line_magic("cuda_timeit", line + " saxpy[1, 64](2.0, x, y, out)")
        assert "benchmark(" not in str(info.value)


def test_simulated_results_give_no_rates(ip):
    r = timeit(ip, "--runs 1 --max-runs 1 --flops 2*n saxpy[1, 64](2.0, x, y, out)")
    assert r.simulated and r.bytes == 768 and r.flops == 128
    assert r.bandwidth is None and r.flop_rate is None


def test_a_prepared_launch_counts_its_bound_arrays(ip):
    from gpureplace import cuda
    # (device arrays: a prepared launch refuses host NumPy arrays, as on the GPU)
    ip.user_ns.update({k: cuda.to_device(ip.user_ns[k]) for k in ("x", "y", "out")})
    ip.run_cell("run = saxpy[1, 64].prepare(2.0, x, y, out)")
    r = timeit(ip, "--runs 1 --max-runs 1 run()")
    assert r.bytes == 768 and ip.user_ns["out"].copy_to_host()[0] == 3.0
    # labelled by its kernel and configuration, not by the name it is held under
    assert r.name == "saxpy[1, 64]", r.name


LOAD = r'''
import sys
from IPython.core.interactiveshell import InteractiveShell
from gpureplace import prewarm
ip = InteractiveShell.instance()
if len(sys.argv) > 1:
    ip.run_line_magic("config", "GPUReplace.prewarm = False")
ip.run_line_magic("load_ext", "gpureplace")
print(prewarm.wait(120), sorted(prewarm.report()))
'''


def test_loading_the_extension_starts_the_warm_up_unless_configured_off():
    env = dict(os.environ, GPUREPLACE_PREWARM="1", GPUREPLACE_BACKEND="simulator")
    on = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, env=env,
                        timeout=300)
    off = subprocess.run([sys.executable, "-c", LOAD, "off"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert on.stdout.strip().endswith("True ['compile', 'imports']"), on.stdout + on.stderr
    assert off.stdout.strip().endswith("True []"), off.stdout + off.stderr
