"""``%cuda_timeit`` times launches: a call of a built-in, a class, a kernel without its launch
configuration or a device function is the same "is not a launch" usage error as a configuration
without arguments; a function of the user's that launches kernels is timed as a whole (the
simulator here, through a real InteractiveShell)."""

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
    shell.run_cell("%%cuda\ndef saxpy(a, x, y, out):\n    i = cuda.grid(1)\n"
                   "    if i < out.size:\n        out[i] = a * x[i] + y[i]\n")
    shell.run_cell("from gpureplace import cuda\n@cuda.jit(device=True)\n"
                   "def dev(v):\n    return v + 1.0\n"
                   "def h(v):\n    return v + 1\n")
    shell.user_ns.update(x=np.ones(64, np.float32), y=np.ones(64, np.float32),
                         out=np.zeros(64, np.float32))
    return shell


@pytest.mark.parametrize("line, words", [
    ("len(x)", "len is a built-in function, which runs on the host"),
    ("--flops 2 abs(1)", "abs is a built-in function"),
    ("np.add(x, y)", "np.add is a NumPy ufunc"),
    ("int(1)", "int is a Python class"),
    ("saxpy(2.0, x, y, out)", "saxpy is a kernel without its launch configuration: write "
                              "saxpy[blocks, threads](2.0, x, y, out)"),
    ("dev(1.0)", "dev is a device function, which only kernels call"),
])
def test_a_call_that_is_no_launch_is_refused_before_anything_runs(ip, line, words):
    with pytest.raises(UsageError, match="is not a launch") as info:
        ip.run_line_magic("cuda_timeit", line)
    assert words in str(info.value) and "usage: %cuda_timeit" in str(info.value)


def test_a_function_of_the_users_that_launches_kernels_is_timed_as_a_whole(ip):
    ip.run_cell("def step(a):\n    saxpy[1, 64](a, x, y, out)\n    saxpy[1, 64](a, x, y, out)\n")
    with capture_output():
        r = ip.run_line_magic("cuda_timeit", "-o --runs 2 --max-runs 3 step(2.0)")
    assert isinstance(r, BenchmarkResult) and r.simulated
    assert ip.user_ns["out"][0] == 3.0


@pytest.mark.parametrize("line", ["saxpy[1, 64](2.0, x, y, out)",
                                  "saxpy.forall(64)(2.0, x, y, out)",
                                  "saxpy[1, 64].prepare(2.0, x, y, out)()"])
def test_launches_of_every_kind_are_timed(ip, line):
    prepared = ".prepare(" in line
    if prepared:            # a prepared launch takes device arrays, as on the GPU
        from gpureplace import cuda
        ip.user_ns.update({k: cuda.to_device(ip.user_ns[k]) for k in ("x", "y", "out")})
    with capture_output():
        r = ip.run_line_magic("cuda_timeit", "-o --runs 2 --max-runs 3 " + line)
    assert isinstance(r, BenchmarkResult) and r.simulated
    out = ip.user_ns["out"].copy_to_host() if prepared else ip.user_ns["out"]
    assert out[0] == 3.0


def test_an_error_of_the_users_function_keeps_its_type_and_traceback(ip):
    """A function of the user's that fails raises its own error (as %timeit), not a UsageError
    that blames the magic's use; the magic's own checks stay usage errors."""
    ip.run_cell("def broken(n):\n    return np.arange(n).reshape(3, 3)\n")
    ip.user_ns["np"] = np
    with pytest.raises(ValueError, match="cannot reshape") as info:
        ip.run_line_magic("cuda_timeit", "--runs 2 broken(10)")
    assert not isinstance(info.value, UsageError)
    assert any(entry.name == "broken" for entry in info.traceback)
    with pytest.raises(UsageError, match="--runs takes a positive int"):
        ip.run_line_magic("cuda_timeit", "--runs 2.5 saxpy[1, 64](2.0, x, y, out)")



def test_a_bad_launch_inside_the_users_function_names_its_line_as_a_direct_call_does(ip):
    """The error of a launch inside a function the magic times names the launch's line in that
    function (as calling it directly does), not the magic's line."""
    import re
    ip.run_cell("%%cuda\ndef fill(out):\n    out[cuda.grid(1)] = 1.0\n", store_history=True)
    n = ip.execution_count
    ip.run_cell("def two():\n    fill[1, 64](out)\n    fill[1, 65](out)\n", store_history=True)
    shown = {}
    for source in ("two()", "%cuda_timeit --runs 1 two()"):
        with capture_output() as cap:
            res = ip.run_cell(source, store_history=True)
        assert type(res.error_in_exec) is IndexError
        shown[source] = re.sub(r"\x1b\[[0-9;]*m", "", cap.stdout + cap.stderr)
    assert f"  at Cell In[{n}], line 3: fill[1, 65](out)" in shown["two()"]
    assert shown["%cuda_timeit --runs 1 two()"] == shown["two()"]
    assert "cuda_timeit" not in shown["%cuda_timeit --runs 1 two()"]
