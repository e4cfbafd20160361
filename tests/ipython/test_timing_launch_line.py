"""``%cuda_timeit``'s launch line is read as Python reads a call: ``*args`` and keyword
arguments (a GPU ufunc's ``out=``, counted), a trailing ``;`` ignored; a wrong option value is
named by its type, not shown whole (the simulator, through a real InteractiveShell)."""

import re

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")

from IPython.core.error import UsageError  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

from gpureplace.benchmarking import BenchmarkResult  # noqa: E402
from gpureplace.config import settings  # noqa: E402


@pytest.fixture
def ip(shell, monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    shell.run_cell("from gpureplace import cuda\n"
                   "@cuda.jit\ndef inc(x, a):\n    i = cuda.grid(1)\n    if i < x.size:\n"
                   "        x[i] += a\n"
                   "@cuda.vectorize(['float32(float32, float32)'])\n"
                   "def vadd(a, b):\n    return a + b\n")
    shell.user_ns.update(np=np, **{name: np.ones(1000, np.float32) for name in "xyo"})
    return shell


def timeit(ip, line):
    with capture_output():
        return ip.run_line_magic("cuda_timeit", "-o --runs 1 --max-runs 1 " + line)


def test_starred_arguments_are_spliced_in(ip):
    ip.user_ns["args"] = (ip.user_ns["x"], np.float32(2))
    r = timeit(ip, "inc[1, 1000](*args)")
    assert r.name == "inc[1, 1000]" and r.bytes == 4000
    assert ip.user_ns["x"][0] == 1 + 2 * 2                  # (a warm-up and a timed run)
    r = timeit(ip, "inc[1, 1000](*args[:1], *[np.float32(1)])")
    assert ip.user_ns["x"][0] == 5 + 2
    ip.user_ns["n"] = 3
    with pytest.raises(UsageError, match=r"^%cuda_timeit: argument '\*n': TypeError: "):
        ip.run_line_magic("cuda_timeit", "inc[1, 1000](x, *n)")


@pytest.mark.parametrize("call", ["vadd(x, y, out=o)", "vadd(x, y, o)", "vadd(x, y)",
                                  "vadd(x, y, **{'out': o})", "vadd(*(x, y), out=o)"])
def test_a_ufunc_is_timed_with_out_or_without_and_its_output_counted(ip, call):
    ip.user_ns["o"][:] = 0
    r = timeit(ip, call)
    assert isinstance(r, BenchmarkResult) and r.name == "vadd"
    assert r.bytes == 3 * 4000                              # (x and y read, the output written)
    assert ip.user_ns["o"][0] == (0 if call == "vadd(x, y)" else 2)


@pytest.mark.parametrize("line, message", [
    ("inc[1, 1000](x, a=1.0)", "'inc[1, 1000](x, a=1.0)' is not a launch: a kernel takes its "
                               "arguments by position, not a=1.0"),
    ("vadd(x, y, out=missing)", "argument 'out=missing': NameError"),
    ("vadd(x, y, **{1: o})", "argument '**{1: o}': keywords must be strings"),
    ("vadd(x, y, out=o, **{'out': o})", "argument \"**{'out': o}\": 'out' is given twice"),
])
def test_keyword_arguments_a_launch_cannot_take_are_usage_errors(ip, line, message):
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("cuda_timeit", line)
    assert str(info.value).startswith(f"%cuda_timeit: {message}"), str(info.value)


def run(ip, source):
    with capture_output() as cap:
        res = ip.run_cell(source, store_history=True)
    assert res.success, cap.stdout + cap.stderr
    shown = [o.data["text/plain"] for o in cap.outputs] + [cap.stdout]
    return sum(text.count("inc[1, 1000] on simulator") for text in shown)


def test_a_trailing_semicolon_is_ignored_and_the_result_shown_once(ip):
    assert run(ip, "%cuda_timeit --max-runs 1 inc[1, 1000](x, 1.0);") == 1
    assert run(ip, "%cuda_timeit -o --max-runs 1 inc[1, 1000](x, 1.0);") == 1
    assert isinstance(ip.user_ns["_"], BenchmarkResult)
    assert run(ip, "r = %cuda_timeit -o --max-runs 1 inc[1, 1000](x, 1.0) ;") == 1
    assert isinstance(ip.user_ns["r"], BenchmarkResult)


def test_a_wrong_option_value_is_named_by_its_type_on_one_line(ip):
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("cuda_timeit", "--flops x inc[1, 1000](x, 1.0)")
    assert str(info.value) == ("%cuda_timeit: --flops takes a non-negative number, got ndarray "
                               "of shape (1000,)")
    with pytest.raises(UsageError, match=re.escape("--runs takes a positive int, got 'x'")):
        ip.run_line_magic("cuda_timeit", "--runs \"'x'\" inc[1, 1000](x, 1.0)")
