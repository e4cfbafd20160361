"""The IPython layer as a notebook user meets it, through a real InteractiveShell (the
simulator): a ``%%cuda --fastmath`` cell leaves a decorator's ``fastmath=False`` alone, as it
does its ``context=``; a configured value the extension refuses never stops it loading; a cell's
helper reflects what the kernels calling it compiled, as a device function does; a launch given
a keyword argument is one block; ``%cuda_timeit`` shows a failing function's own frames, its
``-o`` result once, and says where a misplaced option goes; ``dispatch_report`` shows its
table; a kernel's raise is a warning naming ``Cell In[N], line L``."""

import re
import warnings

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")

from IPython.core.error import UsageError  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

from gpureplace.config import settings  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def ip(shell, monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    shell.user_ns.update(np=np, x=np.ones(16, np.float32), out=np.zeros(16, np.float32))
    return shell


def run(ip, src):
    """Run ``src`` as a cell: (result, stdout and stderr without colours, displayed objects)."""
    with capture_output() as cap:
        res = ip.run_cell(src, store_history=True)
    return res, ANSI.sub("", cap.stdout + cap.stderr), cap.outputs


def ok(ip, src):
    res, shown, outputs = run(ip, src)
    assert res.success, shown
    return shown, outputs


COPY = ("%%cuda\ndef k(x, out):\n    i = cuda.grid(1)\n    if i < out.size:\n"
        "        out[i] = x[i]\n")


# -- %%cuda --fastmath and a decorator's fastmath=False ------------------------------------------

PRECISE = ("@cuda.jit(fastmath=False)\ndef precise(x, out):\n"
           "    out[0] = math.sin(x[0]) / x[1]\n"
           "@cuda.jit\ndef loose(x, out):\n    out[0] = math.sin(x[0]) / x[1]\n")


@pytest.mark.parametrize("form", ["cell", "string"])
def test_a_decorators_fastmath_false_stands_against_the_cells_fastmath(ip, form):
    """As for ``--context``: the cell says its option does not apply, and the kernel keeps its
    decorator's value; a decorator that sets none gets the cell's.  (``string``: the body given
    to ``run_cell_magic`` as a string.)"""
    src = f"%%cuda --fastmath\n{PRECISE}" if form == "cell" else \
        f"get_ipython().run_cell_magic('cuda', '--fastmath', {PRECISE!r})"
    shown, _ = ok(ip, src)
    assert "gpureplace: %%cuda --fastmath (its decorator gives fastmath=False) does not apply " \
           "to precise" in shown
    assert "loose" not in shown
    precise, loose = ip.user_ns["precise"], ip.user_ns["loose"]
    assert precise.targetoptions["fastmath"] is False
    assert loose.targetoptions["fastmath"] is True
    sig = "void(float32[:], float32[:])"
    ptx = precise.compile(sig).ptx
    assert "sin.approx" not in ptx and "div.approx" not in ptx and ".ftz" not in ptx
    assert "sin.approx" in loose.compile(sig).ptx


def test_a_decorators_fastmath_true_and_a_cell_without_fastmath_are_as_before(ip):
    shown, _ = ok(ip, "%%cuda\n@cuda.jit(fastmath=True)\ndef fast(x, out):\n"
                      "    out[0] = math.sin(x[0])\n")
    assert "does not apply" not in shown
    assert ip.user_ns["fast"].targetoptions["fastmath"] is True
    shown, _ = ok(ip, "%%cuda --fastmath\n@cuda.jit(fastmath=True)\ndef fast2(x, out):\n"
                      "    out[0] = math.sin(x[0])\n")
    assert "does not apply" not in shown
    assert ip.user_ns["fast2"].targetoptions["fastmath"] is True


# -- a configured value refused ------------------------------------------------------------------

def test_reload_after_a_refused_config_value_loads_with_the_default(ip):
    res, shown, _ = run(ip, "%config GPUReplace.host_arrays = 'bogus'")    # refused, as before
    assert ip.config.GPUReplace.host_arrays == "bogus"     # (IPython keeps it in the shell)
    res, shown, _ = run(ip, "%reload_ext gpureplace")
    assert res.success, shown
    lines = shown.strip().splitlines()
    assert lines == ["gpureplace: ignoring the configured GPUReplace.host_arrays = 'bogus': "
                     "GPUReplace.host_arrays must be 'warn', 'copy' or 'error', got 'bogus'; "
                     "using 'warn'"], shown
    assert "cuda" in ip.magics_manager.magics["cell"]
    from gpureplace.ipython import extension
    assert extension.loaded().host_arrays == "warn" and settings.host_arrays == "warn"
    assert "host_arrays" not in ip.config.GPUReplace        # left out: said once
    res, shown, _ = run(ip, "%reload_ext gpureplace")
    assert res.success and "ignoring" not in shown
    ok(ip, COPY)
    ok(ip, "k[1, 16](x, out)")


def test_a_kernel_started_with_bad_config_loads_and_says_so_at_the_first_cell(ip):
    """``c.GPUReplace.host_arrays = 'bogus'`` (and a bad ``arch``) in a kernel's configuration:
    the extension loads outside any cell with the good values, and the first cell says, one
    line each, what it left out."""
    ip.run_line_magic("unload_ext", "gpureplace")
    ip.config.GPUReplace.host_arrays = "bogus"
    ip.config.GPUReplace.arch = "sm_bogus"
    ip.config.GPUReplace.low_occupancy_warnings = True
    with capture_output() as cap:
        ip.extension_manager.load_extension("gpureplace")      # (as --ext=gpureplace does)
    assert "ignoring" not in cap.stdout + cap.stderr
    assert "cuda" in ip.magics_manager.magics["cell"]
    from gpureplace.ipython import extension
    ext = extension.loaded()
    assert ext.host_arrays == "warn" and ext.arch == "" and ext.low_occupancy_warnings is True
    shown, _ = ok(ip, "a = 1")
    lines = shown.strip().splitlines()
    assert len(lines) == 2, shown
    assert lines[0].startswith("gpureplace: ignoring the configured GPUReplace.") and \
        "'bogus'" in shown and "'sm_bogus'" in shown
    shown, _ = ok(ip, "b = 2")
    assert "ignoring" not in shown


# -- a %%cuda cell's helper reflects like a device function -------------------------------------

HELPERS = ("%%cuda\nSC = 2.0\ndef helper(v):\n    return v * SC\n"
           "@cuda.jit(device=True)\ndef dev(v):\n    return v * SC\n"
           "def k2(x, out):\n    i = cuda.grid(1)\n    if i < out.size:\n"
           "        out[i] = helper(x[i]) + dev(x[i])\n")


def test_a_cell_helper_shows_what_the_kernels_calling_it_compiled(ip):
    ok(ip, HELPERS)
    ok(ip, "k2[1, 16](x, out)")
    helper, dev = ip.user_ns["helper"], ip.user_ns["dev"]
    assert not helper.device
    from numba.core import types
    assert list(helper.overloads) == list(dev.overloads) == [(types.float32,)]
    assert helper.signatures == [(types.float32,)]
    assert str(helper.nopython_signatures[0]) == "(float32,) -> float64"
    shown, _ = ok(ip, "%cuda_deps helper")
    assert shown.strip().splitlines() == ["helper(float32)", "  functions: helper",
                                          "  helper, line 4: SC"], shown
    _, outputs = ok(ip, "%cuda_ptx helper")
    assert len(outputs) == 1
    label, _, ptx = outputs[0].data["text/plain"].partition("\n")
    assert label.startswith("helper(float32) — PTX") and ".func" in ptx and ".entry" not in ptx
    # a signature with a return type: its compiles as a device function
    shown, _ = ok(ip, "%cuda_deps helper 'float64(float32)'")
    assert shown.strip().splitlines()[0] == "helper(float32)"
    _, outputs = ok(ip, "%cuda_llvm helper 'float64(float64)'")     # (compiled now)
    assert outputs[0].data["text/plain"].startswith("helper(float64) — LLVM IR")
    # what only kernels have leaves its device compiles out
    assert helper.inspect_sass() == {}
    # the kernel calling it reflects as before
    assert list(ip.user_ns["k2"].overloads) == [(types.Array(types.float32, 1, "C"),) * 2]


def test_a_kernel_nothing_calls_still_refuses_a_return_type(ip):
    ok(ip, COPY)
    ok(ip, "k[1, 16](x, out)")
    res, shown, _ = run(ip, "%cuda_deps k 'float64(float32[::1], float32[::1])'")
    assert isinstance(res.error_in_exec, UsageError)
    assert "k is a kernel, which returns nothing" in shown


def test_a_cell_helper_launched_as_a_kernel_too_lists_both(ip):
    ok(ip, "%%cuda\ndef fill(x):\n    x[0] = 1.0\n"
           "def caller(x):\n    fill(x[::2])\n")
    ok(ip, "fill[1, 1](x); caller[1, 1](x)")
    fill = ip.user_ns["fill"]
    variants = fill.inspect_all("ptx")
    # its kernel (of a contiguous array), and its compile as caller's device function (of a
    # strided one)
    assert [v.argtypes[0].layout for v in variants] == ["C", "A"]
    assert sum(".entry" in v.value for v in variants) == 1
    assert sum(".entry" not in v.value and ".func" in v.value for v in variants) == 1
    # (what only a kernel has: its kernel alone)
    assert len(fill._compiled_variants(calls=False)) == 1


# -- a keyword argument to a launch is one block ------------------------------------------------

def test_a_keyword_argument_to_a_launch_is_one_block_at_the_cell_line(ip):
    ok(ip, COPY)
    n = ip.execution_count
    res, shown, _ = run(ip, "k[1, 16](x, out, stream=0)")
    assert type(res.error_in_exec) is TypeError
    assert shown.strip().splitlines() == [
        "TypeError: k[blocks, threads]() got an unexpected keyword argument 'stream': kernels "
        "take their arguments by position, as numba-cuda's do",
        f"  at Cell In[{n}], line 1: k[1, 16](x, out, stream=0)"], shown
    # (a prepared launch takes device arrays, as on the GPU)
    from gpureplace import cuda
    ip.user_ns.update(dx=cuda.to_device(ip.user_ns["x"]), dout=cuda.to_device(ip.user_ns["out"]))
    res, shown, _ = run(ip, "p = k[1, 16].prepare(dx, dout)\np(dx)")
    assert type(res.error_in_exec) is TypeError
    assert shown.strip().splitlines()[-1] == f"  at Cell In[{n + 1}], line 2: p(dx)", shown
    assert "Traceback" not in shown and "launcher.py" not in shown
    # any other TypeError keeps IPython's traceback
    res, shown, _ = run(ip, "len(1)")
    assert "Traceback" in shown


def test_unloading_gives_ipython_its_traceback_and_warning_format_back(ip):
    assert "showtraceback" in ip.__dict__
    assert getattr(warnings.formatwarning, "_gpureplace", False)
    ip.run_line_magic("unload_ext", "gpureplace")
    assert "showtraceback" not in ip.__dict__
    assert not getattr(warnings.formatwarning, "_gpureplace", False)
    ip.run_line_magic("load_ext", "gpureplace")
    assert "showtraceback" in ip.__dict__


# -- %cuda_timeit --------------------------------------------------------------------------------

def test_an_error_of_the_users_function_shows_the_users_frames(ip):
    ok(ip, "def boom():\n    raise RuntimeError('user boom')\n")
    n = ip.execution_count - 1
    res, shown, _ = run(ip, "%cuda_timeit boom()")
    assert type(res.error_in_exec) is RuntimeError
    assert "gpureplace/" not in shown and "benchmark" not in shown, shown
    assert f"Cell In[{n}], line 2, in boom()" in shown
    assert shown.rstrip().endswith("RuntimeError: user boom")
    assert len(shown.strip().splitlines()) <= 14, shown


def test_dash_o_as_the_last_line_shows_the_result_once(ip):
    ok(ip, COPY)
    shown, outputs = ok(ip, "%cuda_timeit -o --max-runs 2 k[1, 16](x, out)")
    assert outputs == [] and shown.count("k[1, 16] on simulator") == 1, shown
    from gpureplace.benchmarking import BenchmarkResult
    assert isinstance(ip.user_ns["_"], BenchmarkResult)
    # assigned: shown all the same, once
    shown, outputs = ok(ip, "r = %cuda_timeit -o --max-runs 2 k[1, 16](x, out)")
    assert len(outputs) == 1 and "k[1, 16] on simulator" not in shown
    assert isinstance(ip.user_ns["r"], BenchmarkResult)
    # not the last line: shown where it runs
    shown, outputs = ok(ip, "%cuda_timeit -o --max-runs 2 k[1, 16](x, out)\n1")
    assert len(outputs) == 1
    # without -o: once, and nothing returned
    shown, outputs = ok(ip, "%cuda_timeit --max-runs 2 k[1, 16](x, out)")
    assert len(outputs) == 1 and "Out[" not in shown


@pytest.mark.parametrize("line, word", [
    ("--max-runs 2 k[1, 16](x, out) --flops 2", "--flops"),
    ("k[1, 16](x, out) -o", "-o"),
    ("k[1, 16](x, out) --warm", "--warm"),
    ("-o k[1, 16](x, out) --max-runs 2 --bytes 4", "--max-runs"),
])
def test_an_option_after_the_launch_says_options_go_before_it(ip, line, word):
    ok(ip, COPY)
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("cuda_timeit", line)
    assert str(info.value).startswith(
        f"%cuda_timeit: options go before the launch: {word} is written after "
        f"'k[1, 16](x, out)'"), str(info.value)


def test_values_and_launches_that_only_look_like_options_are_read_as_before(ip):
    ok(ip, COPY)
    for line in ("--flops 2 -o --max-runs 2 k[1, 16](x, out)",
                 "--flops 2 - 1 --max-runs 2 -o k[1, 16](x, out)"):
        with capture_output():
            r = ip.run_line_magic("cuda_timeit", line)
        assert r is not None and r.flops in (2, 1)
    with pytest.raises(UsageError, match="is not a launch"):
        ip.run_line_magic("cuda_timeit", "k[1, 16](x, out) - 1")


# -- dispatch_report -----------------------------------------------------------------------------

REPORTED = ("%%cuda\ndef helper3(v):\n    return math.sin(v)\n"
            "def k3(x, out):\n    i = cuda.grid(1)\n    out[i] = helper3(x[i])\n")
SIG = "void(float32[:], float32[:])"


def test_a_dispatch_report_shows_its_table_as_a_cells_value(ip):
    ok(ip, REPORTED)
    printed, _ = ok(ip, f"print(k3.dispatch_report('{SIG}'))")
    assert printed.splitlines()[0].split() == ["function", "line", "callable", "context",
                                               "layer", "implementation"]
    shown, _ = ok(ip, f"k3.dispatch_report('{SIG}')")
    assert "{" not in shown and "'function'" not in shown
    assert "k3(float32[:], float32[:])\n" + printed.strip() in shown, shown
    report = ip.user_ns["_"]
    assert isinstance(report, list) and len(report) == 3
    assert report == [dict(r) for r in report] and report[0]["function"] == "k3"
    html = report._repr_html_()
    assert "<table>" in html and "helper3" in html and "k3(float32[:], float32[:])" in html


def test_the_reports_of_every_specialisation_show_as_titled_tables(ip):
    ok(ip, REPORTED)
    ok(ip, f"k3.compile('{SIG}'); k3.compile('void(float64[:], float64[:])')")
    shown, _ = ok(ip, "k3.dispatch_report()")
    assert "{" not in shown and "'function'" not in shown
    assert "k3(float32[:], float32[:])\nfunction" in shown
    assert "k3(float64[:], float64[:])\nfunction" in shown
    reports = ip.user_ns["_"]
    assert isinstance(reports, dict) and len(reports) == 2
    assert all(isinstance(r, list) for r in reports.values())
    assert reports == dict(reports)
    assert reports._repr_html_().count("<table>") == 2


# -- a kernel's raise names the cell ------------------------------------------------------------

def test_a_kernels_raise_warning_names_the_cell_and_line(ip):
    ok(ip, "%%cuda\ndef raiser(x, out):\n    i = cuda.grid(1)\n    if i == 5:\n"
           "        raise ValueError('bad i')\n")
    n = ip.execution_count - 1
    from gpureplace.simulator.raises import KernelRaisedWarning
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ok(ip, "raiser[1, 16](x, out)")
    w = next(w for w in said if w.category is KernelRaisedWarning)
    text = warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line)
    assert text.startswith(f"Cell In[{n}], line 5: KernelRaisedWarning: raiser: 1 thread "
                           f"raised ValueError('bad i')"), text
    assert text.rstrip().endswith("raise ValueError('bad i')")
    # other warnings of a cell keep Python's format
    other = warnings.formatwarning("mine", UserWarning, w.filename, w.lineno)
    assert other.startswith(f"{w.filename}:{w.lineno}: UserWarning: mine")


@pytest.mark.parametrize("cell, said", [
    ("@cuda.jit(devic=True)\ndef f(x):\n    x[0] = 1",
     "TypeError: cuda.jit() got unsupported option(s): devic"),
    ("@cuda.jit\nclass C:\n    pass",
     "TypeError: cuda.jit needs a Python function, got <class '__main__.C'>"),
    ("@cuda.jit(boundscheck=True)\ndef f(x):\n    x[0] = 1",
     "NotImplementedError: cuda.jit(boundscheck=True): compiled kernels do not check"),
])
def test_a_mistake_at_the_decorator_is_one_block_at_its_line(ip, cell, said):
    """(They showed a traceback of 21 to 35 lines through jit/decorators.py and function.py.)"""
    _one_block_at_its_first_line(ip, cell, said)


def _one_block_at_its_first_line(ip, cell, said):
    """``cell`` fails, shown as two lines: the error starting ``said``, and its first line."""
    ok(ip, "from gpureplace import cuda")
    n = ip.execution_count
    res, shown, _ = run(ip, cell)
    assert not res.success
    lines = shown.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith(said), shown
    assert lines[1] == f"  at Cell In[{n}], line 1: {cell.splitlines()[0]}", shown


@pytest.mark.parametrize("cell, said", [
    ("d = cuda.to_device(np.zeros(8, np.float32)); d.copy_to_host(np.zeros(4, np.float32))",
     "ValueError: incompatible shape: copy_to_host(ary)"),
    ("d = cuda.device_array(-1)", "ValueError: negative dimensions are not allowed"),
    ("d = cuda.to_device(np.zeros(8)); d[100]",
     "IndexError: index 100 is out of bounds for axis 0 with size 8"),
])
def test_a_host_api_refusal_is_one_block_at_the_users_line(ip, cell, said):
    """(They showed 15-27 lines through hostapi/ and simulator/host.py.)"""
    _one_block_at_its_first_line(ip, cell, said)


def test_an_error_of_the_users_code_called_by_the_host_api_keeps_its_traceback(ip):
    ok(ip, "from gpureplace import cuda\n"
           "class Bad:\n    def __array__(self, dtype=None, copy=None):\n"
           "        raise ValueError('bad array of mine')\n")
    res, shown, _ = run(ip, "cuda.to_device(Bad())")
    assert not res.success and "bad array of mine" in shown
    assert "Traceback" in shown and "__array__" in shown, shown
