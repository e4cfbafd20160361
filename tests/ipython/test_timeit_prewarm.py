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
    ("--runs 2.5 saxpy[1, 64](2.0, x, y, out)", "--runs takes an int"),
    ("saxpy[1, 64](2.0, x, y", "is not a Python expression"),
])
def test_cuda_timeit_usage_errors_say_what_is_wrong(ip, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("cuda_timeit", line)


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
