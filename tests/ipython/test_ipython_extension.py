"""The IPython extension through a real InteractiveShell: magics, configuration, hooks, errors."""

import re

import pytest

IPython = pytest.importorskip("IPython")

from IPython.utils.capture import capture_output  # noqa: E402

import gpureplace  # noqa: E402
from gpureplace.config import settings  # noqa: E402

SIG = "void(float64[:])"


@pytest.fixture
def ip(shell):
    """conftest.py's shell, under the name these tests use."""
    return shell


def cell(ip, src):
    with capture_output() as cap:
        res = ip.run_cell(src, store_history=True)
    if res.error_in_exec is not None or res.error_before_exec is not None:
        raise (res.error_in_exec or res.error_before_exec)
    return cap


def test_load_and_unload_leave_nothing_behind():
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    hooks_before = list(shell.events.callbacks["post_run_cell"])
    configurables_before = len(shell.configurables)
    shell.run_line_magic("load_ext", "gpureplace")
    assert "cuda" in shell.magics_manager.magics["cell"]
    assert "gpureplace" in shell.magics_manager.magics["cell"]
    assert "cuda_ptx" in shell.magics_manager.magics["line"]
    shell.run_line_magic("reload_ext", "gpureplace")
    from gpureplace.ipython import extension
    ext = extension.loaded()
    assert shell.events.callbacks["post_run_cell"].count(ext.post_run_cell) == 1
    assert shell.events.callbacks["post_execute"].count(ext.post_execute) == 1
    from gpureplace.ipython.cells import CudaCellTransformer
    assert len([t for t in shell.input_transformers_cleanup
                if isinstance(t, CudaCellTransformer)]) == 1
    with capture_output() as cap:
        shell.run_line_magic("unload_ext", "gpureplace")
    assert "extension unloaded: kernels no longer recompile by themselves" in cap.stdout
    assert shell.events.callbacks["post_run_cell"] == hooks_before
    assert ext.post_execute not in shell.events.callbacks["post_execute"]
    assert extension.loaded() is None
    assert not [t for t in shell.input_transformers_cleanup if isinstance(t, CudaCellTransformer)]
    assert not [c for c in shell.configurables if type(c).__module__.startswith("gpureplace")]
    assert len(shell.configurables) <= configurables_before + 1    # + IPython's ExtensionMagics
    for kind, name in (("cell", "cuda"), ("cell", "gpureplace"), ("line", "cuda_ptx"),
                       ("line", "cuda_deps"), ("line", "cuda_cache")):
        assert name not in shell.magics_manager.magics[kind]
    assert gpureplace.errors.location_formatter is None


def test_cuda_cell_defines_launchable_and_callable_functions(ip):
    cell(ip, "%%cuda\n"
             "def scale(v):\n"
             "    return 2.0 * v\n"
             "def saxpy(a, x, y, out):\n"
             "    i = cuda.grid(1)\n"
             "    if i < out.size:\n"
             "        out[i] = scale(a) * x[i] + y[i]\n")
    from gpureplace.jit import GPUFunction
    ns = ip.user_ns
    assert isinstance(ns["saxpy"], GPUFunction) and isinstance(ns["scale"], GPUFunction)
    spec = ns["saxpy"].compile("void(float32, float32[:], float32[:], float32[:])")
    assert [cf.pyfunc.__name__ for cf in spec.compiled.closure()] == ["saxpy", "scale"]
    cap = cell(ip, '%cuda_ptx saxpy')
    assert ".entry saxpy" in cap.stdout or any(".entry saxpy" in str(o.data) for o in cap.outputs)
    from gpureplace.compiler.toolchain import find_tool
    cap = cell(ip, '%cuda_sass saxpy')
    shown = cap.stdout + "".join(str(o.data) for o in cap.outputs) + str(cap.stderr)
    if find_tool("nvdisasm") is not None:
        assert ".text.saxpy" in shown and "EXIT" in shown
    else:
        assert "pip install nvidia-cuda-nvdisasm" in shown


def test_redefinition_across_cells_recompiles_exactly_the_dependents(ip):
    cell(ip, "%%cuda\n"
             "def scale(v):\n    return 2.0 * v\n"
             "def k1(out):\n    out[0] = scale(out[0])\n"
             "def k2(out):\n    out[0] = out[0] + 1.0\n")
    cell(ip, f"a = k1.compile('{SIG}'); b = k2.compile('{SIG}')")
    ip.run_line_magic("config", "GPUReplace.verbose = True")
    c0 = gpureplace.stats()["kernel_compiles"]
    cap = cell(ip, "%%cuda\ndef scale(v):\n    return 3.0 * v\n")
    assert "scale redefined" in cap.stdout and "k1 will recompile on next launch" in cap.stdout
    assert "k2" not in cap.stdout
    cap = cell(ip, f"a2 = k1.compile('{SIG}'); b2 = k2.compile('{SIG}')")
    assert gpureplace.stats()["kernel_compiles"] == c0 + 1
    assert ip.user_ns["b2"] is ip.user_ns["b"]
    assert "gpureplace: k1(float64[:]) recompiled in" in cap.stdout
    assert all(len(line) < 100 for line in cap.stdout.splitlines()), cap.stdout
    assert "0d4008000000000000" in ip.user_ns["a2"].ptx


def test_config_changes_take_effect_immediately(ip):
    cell(ip, "%%cuda\ndef k(out, x):\n    out[0] = x[0] / x[1]\n")
    sig = "void(float32[:], float32[:])"
    cell(ip, f"p1 = k.compile('{sig}').ptx")
    ip.run_line_magic("config", "GPUReplace.fastmath = True")
    cell(ip, f"p2 = k.compile('{sig}').ptx")
    assert "div.rn.f32" in ip.user_ns["p1"] and "div.approx" in ip.user_ns["p2"]
    ip.run_line_magic("config", "GPUReplace.arch = 'sm_80'")
    cell(ip, f"p3 = k.compile('{sig}').ptx")
    assert ".target sm_80" in ip.user_ns["p3"]
    from traitlets import TraitError

    from gpureplace.ipython import extension
    with pytest.raises(TraitError, match="sm_90"):
        extension.loaded().arch = "ninety"
    assert settings.arch == "sm_80"             # a bad value is refused, the old one stays
    cell(ip, "import gpureplace, math\n"
             "mine = gpureplace.Context('cfgctx')\n"
             "mine.override(math.sqrt, lambda v: v * 29.0)")
    ip.run_line_magic("config", "GPUReplace.context = 'cfgctx'")
    cell(ip, "%%cuda\ndef r(out, x):\n    out[0] = math.sqrt(x[0])\n")
    cell(ip, "p4 = r.compile('void(float64[:], float64[:])').ptx")
    assert "0d403D000000000000" in ip.user_ns["p4"]


def test_compile_errors_show_the_cell_and_line_not_the_compiler(ip):
    n = ip.execution_count
    cell(ip, "%%cuda\ndef bad(out):\n    x = 1\n    out[0] = undefined_thing + x\n")
    with capture_output() as cap:
        res = ip.run_cell("bad.compile('void(float64[:])')", store_history=True)
    err = res.error_in_exec
    assert isinstance(err, gpureplace.CompileError)
    shown = cap.stdout + cap.stderr
    # line 4 of the cell as typed (line 1 is %%cuda), as IPython's own tracebacks count it
    assert "undefined_thing" in shown and f"(Cell In[{n}], line 4)" in shown
    assert "numba" not in shown.lower() and "Traceback" not in shown


def test_reflection_and_cache_magics(ip):
    cell(ip, "%%cuda\nFACTOR = 2.0\ndef k(out):\n    out[0] = out[0] * FACTOR\n")
    cell(ip, f"k.compile('{SIG}')")
    cap = cell(ip, "%cuda_deps k")
    assert "FACTOR" in cap.stdout and "(changed)" not in cap.stdout
    cell(ip, "FACTOR = 3.0")
    cap = cell(ip, "%cuda_deps k")
    assert "FACTOR (changed)" in cap.stdout
    cap = cell(ip, "%cuda_cache stats")
    assert "kernel_compiles" in cap.stdout and "disk cache" in cap.stdout
    cap = cell(ip, f"%cuda_llvm k {SIG}")
    assert "define ptx_kernel void @k" in (cap.stdout + "".join(str(o.data) for o in cap.outputs))


def test_cache_stats_says_why_an_unusable_directory_is_not_used(ip, tmp_path, monkeypatch):
    from gpureplace.compiler import diskcache
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("mine")
    monkeypatch.setattr(diskcache, "_explicit_dir", str(not_a_dir))
    cap = cell(ip, "%cuda_cache stats")
    assert f"disk cache: not used: {not_a_dir}: " in cap.stdout, cap.stdout
    assert "kernel_compiles" in cap.stdout
    assert not_a_dir.read_text() == "mine"


def test_cuda_magic_defers_to_an_existing_cuda_magic():
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()

    def other(line, cell):
        return "nvcc"
    shell.magics_manager.register_function(other, magic_kind="cell", magic_name="cuda")
    try:
        with pytest.warns(UserWarning, match="%%gpureplace"):
            shell.run_line_magic("load_ext", "gpureplace")
        assert shell.magics_manager.magics["cell"]["cuda"] is other
        assert "gpureplace" in shell.magics_manager.magics["cell"]
        with capture_output():
            res = shell.run_cell("%%cuda\nint main() { return 0; }\n")
            assert res.result == "nvcc"
            res = shell.run_cell("%%gpureplace\ndef alias_k(out):\n    out[0] = 1.0\n1 / 0\n")
        assert isinstance(res.error_in_exec, ZeroDivisionError)
        from gpureplace.jit import GPUFunction
        assert isinstance(shell.user_ns.pop("alias_k"), GPUFunction)
        shell.run_line_magic("unload_ext", "gpureplace")
        assert shell.magics_manager.magics["cell"]["cuda"] is other
    finally:
        shell.magics_manager.magics["cell"].pop("cuda", None)


def test_device_output_written_to_fd1_lands_in_the_launching_cell(ip):
    """What the CUDA driver writes to file descriptor 1 after a printing kernel's launch is
    handed to the cell's stdout when the cell ends (simulated here with os.write, no GPU)."""
    import os
    import sys

    from gpureplace.ipython import extension
    from gpureplace.runtime import launch
    if not hasattr(sys.stdout, "fileno"):
        pytest.skip("needs a real stdout")
    launch.note_printf()                       # what a printing kernel's launch does
    ext = extension.loaded()
    assert ext.capture.active
    os.write(1, b"hello from the device\n")
    with capture_output() as cap:
        ext.post_run_cell()
    assert not ext.capture.active
    assert "hello from the device" in cap.stdout


def test_cuda_cell_options(ip):
    cell(ip, "import gpureplace, math\nopt_ctx = gpureplace.Context('cellctx')\n"
             "opt_ctx.override(math.cos, lambda v: v * 31.0)")
    cell(ip, "%%cuda --context cellctx --arch sm_80 --fastmath --verbose\n"
             "def kc(out, x):\n    out[0] = math.cos(x[0]) + x[0] / x[1]\n")
    kc = ip.user_ns["kc"]
    assert kc.context is gpureplace.Context.named("cellctx")
    spec = kc.compile("void(float32[:], float32[:])")
    assert ".target sm_80" in spec.ptx and "div.approx" in spec.ptx
    assert "0d403F000000000000" in spec.ptx               # 31.0: the context's override
    cell(ip, "%%cuda --show ptx\ndef shown(out):\n    out[0] = 1.0\n")
    cap = cell(ip, "shown.compile('void(float32[:])')")
    text = cap.stdout + "".join(str(o.data) for o in cap.outputs)
    assert ".entry shown" in text
    with capture_output():
        res = ip.run_cell("%%cuda --context no_such_context\ndef z(out):\n    pass\n")
    assert isinstance(res.error_in_exec, IPython.core.error.UsageError)
    assert "no_such_context" in str(res.error_in_exec) and "z" not in ip.user_ns


def test_cuda_cell_options_reach_its_decorated_functions(ip):
    """``@cuda.jit`` functions a ``%%cuda`` cell defines get the cell's options where their
    decorator left them unset (a kernel and the device function it calls); where the decorator
    gives another context or architecture, the decorator's stands and a line says so."""
    cell(ip, "import gpureplace, math\ndeco_ctx = gpureplace.Context('decoctx')\n"
             "deco_ctx.override(math.cos, lambda v: v * 31.0)\n"
             "other_ctx = gpureplace.Context('decoother')")
    cell(ip, "%%cuda --context decoctx --arch sm_80 --fastmath\n"
             "@cuda.jit(device=True)\ndef dev(v):\n    return math.cos(v)\n"
             "@cuda.jit\ndef kd(out, x):\n    out[0] = dev(x[0]) + x[0] / x[1]\n")
    kd = ip.user_ns["kd"]
    assert kd.context is gpureplace.Context.named("decoctx")
    assert ip.user_ns["dev"].context is kd.context
    spec = kd.compile("void(float32[:], float32[:])")
    assert ".target sm_80" in spec.ptx and "div.approx" in spec.ptx
    assert "0d403F000000000000" in spec.ptx               # 31.0: the context's override
    cap = cell(ip, "%%cuda --context decoctx --arch sm_80\n"
                   "@cuda.jit(context=other_ctx)\n"
                   "def mine(out):\n    out[0] = 1.0\n")
    assert "--context decoctx (its decorator gives context='decoother') does not apply to " \
        "mine" in cap.stdout
    mine = ip.user_ns["mine"]
    assert mine.context is gpureplace.Context.named("decoother")
    assert ".target sm_80" in mine.compile("void(float32[:])").ptx
    cell(ip, "%%cuda --show ptx\n@cuda.jit\ndef shown_deco(out):\n    out[0] = 1.0\n")
    cap = cell(ip, "shown_deco.compile('void(float32[:])')")
    assert ".entry shown_deco" in cap.stdout + "".join(str(o.data) for o in cap.outputs)


def test_cuda_cell_arch_must_be_one_the_compiler_knows(ip):
    for line in ("%%cuda --arch sm_1", "%%cuda --arch sm_999"):
        with capture_output():
            res = ip.run_cell(line + "\ndef zz(out):\n    pass\n")
        assert isinstance(res.error_in_exec, IPython.core.error.UsageError)
        assert "unknown GPU architecture" in str(res.error_in_exec) and "sm_90" in \
            str(res.error_in_exec)
    from traitlets import TraitError

    from gpureplace.config import settings
    from gpureplace.ipython import extension
    before = settings.arch
    with pytest.raises(TraitError, match="unknown GPU architecture 'sm_1'"):
        extension.loaded().arch = "sm_1"
    assert settings.arch == before


# -- a %%cuda cell is the notebook's own cell: it fails like one and its code is named after it --

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def shown_run(ip, src):
    """Run ``src`` as a cell; (result, what it showed without colours)."""
    with capture_output() as cap:
        res = ip.run_cell(src, store_history=True)
    return res, ANSI.sub("", cap.stdout + cap.stderr)


BODY_RAISES = ("def early(out):\n    out[0] = 1.0\n"
               "raise ValueError('boom')\n"
               "def late(out):\n    out[0] = 2.0\n")


def test_a_failing_cuda_cell_fails_like_a_plain_cell(ip):
    plain, plain_shown = shown_run(ip, BODY_RAISES)
    n = ip.execution_count
    res, shown = shown_run(ip, "%%cuda\n" + BODY_RAISES)
    assert res.execution_count == n and ip.execution_count == n + 1
    assert isinstance(plain.error_in_exec, ValueError)
    assert isinstance(res.error_in_exec, ValueError) and res.error_before_exec is None
    assert not res.success and not ip.last_execution_succeeded
    # the user's code, once, with the line numbers of the cell as typed (line 1 is %%cuda)
    assert shown.count("Traceback (most recent call last)") == 1
    assert shown.count("ValueError: boom") == 1
    assert f"Cell In[{n}], line 4" in shown and "----> 4 raise ValueError('boom')" in shown
    assert "run_cell_magic" not in shown and "magics.py" not in shown
    assert "interactiveshell" not in shown
    assert plain_shown.count("File ") == shown.count("File ") == 0     # no frame but the cell's

    plain, plain_shown = shown_run(ip, "x = 1\ndef f(:\n    pass\n")
    n = ip.execution_count
    res, shown = shown_run(ip, "%%cuda\nx = 1\ndef f(:\n    pass\n")
    assert type(res.error_before_exec) is type(plain.error_before_exec) is SyntaxError
    assert res.error_in_exec is None and plain.error_in_exec is None
    assert f"Cell In[{n}], line 3" in shown and shown.count("SyntaxError") == 1
    assert "Traceback" not in shown and "Traceback" not in plain_shown


def test_a_cuda_cell_runs_its_hooks_and_history_once(ip):
    seen = []

    def pre(info):
        seen.append(("pre", info.raw_cell))

    def post(result):
        seen.append(("post", result.info.raw_cell))
    ip.events.register("pre_run_cell", pre)
    ip.events.register("post_run_cell", post)
    try:
        n = ip.execution_count
        src = "%%cuda\ndef once(out):\n    out[0] = 1.0\n"
        cell(ip, src)
        shown_run(ip, "%%cuda\n" + BODY_RAISES)
    finally:
        ip.events.unregister("pre_run_cell", pre)
        ip.events.unregister("post_run_cell", post)
    assert seen == [("pre", src), ("post", src), ("pre", "%%cuda\n" + BODY_RAISES),
                    ("post", "%%cuda\n" + BODY_RAISES)]
    assert ip.execution_count == n + 2
    assert ip.history_manager.input_hist_raw[n].rstrip("\n") == src.rstrip("\n")


def test_functions_defined_before_an_error_are_converted(ip):
    from gpureplace.jit import GPUFunction
    cell(ip, "%%cuda\ndef kept(out):\n    out[0] = 7.0\n")
    old_kept = ip.user_ns["kept"]
    res, _ = shown_run(ip, "%%cuda\n" + BODY_RAISES)
    assert isinstance(res.error_in_exec, ValueError)
    ns = ip.user_ns
    # what ran is defined and converted, as a plain cell's definitions before an error stay
    assert isinstance(ns["early"], GPUFunction) and "late" not in ns
    cell(ip, "import numpy as np\nout = np.zeros(1)\nearly[1, 1](out)")
    assert ip.user_ns["out"][0] == 1.0
    # a syntax error runs nothing: the namespace is as it was, kernels unchanged
    before = dict(ns)
    res, _ = shown_run(ip, "%%cuda\ndef kept(out):\n    out[0] = 8.0\ndef broken(:\n    pass\n")
    assert isinstance(res.error_before_exec, SyntaxError)
    assert ns["kept"] is old_kept and "broken" not in ns
    assert {k for k in ns if not k.startswith("_")} == {k for k in before if not k.startswith("_")}
    cell(ip, "kept[1, 1](out)")
    assert ip.user_ns["out"][0] == 7.0


def test_a_failing_cell_redefining_a_helper_invalidates_its_kernels(ip):
    cell(ip, "%%cuda\ndef scale(v):\n    return 2.0 * v\ndef k(out):\n    out[0] = scale(out[0])\n")
    cell(ip, f"first = k.compile('{SIG}')")
    res, _ = shown_run(ip, "%%cuda\ndef scale(v):\n    return 3.0 * v\n1 / 0\n")
    assert isinstance(res.error_in_exec, ZeroDivisionError)
    cell(ip, f"second = k.compile('{SIG}')")
    assert ip.user_ns["second"] is not ip.user_ns["first"]
    assert "0d4008000000000000" in ip.user_ns["second"].ptx          # 3.0: the new scale


def _compile_error(ip, src):
    res, shown = shown_run(ip, src)
    assert isinstance(res.error_in_exec, gpureplace.CompileError), shown
    return str(res.error_in_exec)


def test_errors_name_the_cell_the_code_was_typed_in(ip):
    bad = "def bad(out):\n    x = 1\n    out[0] = undefined_thing + x\n"
    n = ip.execution_count
    cell(ip, "%%cuda\n" + bad)
    cell(ip, "from gpureplace import cuda\n@cuda.jit\n" + bad.replace("bad", "bad_plain"))
    assert f"in bad (Cell In[{n}], line 4)" in _compile_error(ip, f"bad.compile('{SIG}')")
    assert f"in bad_plain (Cell In[{n + 1}], line 5)" in _compile_error(
        ip, f"bad_plain.compile('{SIG}')")
    # the same cell run twice: the second run's code is the one compiled
    m = ip.execution_count
    cell(ip, "%%cuda\n" + bad)
    cell(ip, "%%cuda\n" + bad)
    assert f"in bad (Cell In[{m + 1}], line 4)" in _compile_error(ip, f"bad.compile('{SIG}')")
    # a stale dependency (deleted helper) names where the kernel reads it
    k = ip.execution_count
    cell(ip, "%%cuda\nFACTOR = 2.0\ndef helper(v):\n    return v * FACTOR\n"
             "def uses(out):\n    out[0] = helper(out[0])\n")
    cell(ip, f"uses.compile('{SIG}')")
    cell(ip, "del helper")
    err = _compile_error(ip, f"uses.compile('{SIG}')")
    assert "'helper'" in err and "no longer defined" in err and f"(Cell In[{k}], line 6)" in err
    # after %reload_ext
    ip.run_line_magic("reload_ext", "gpureplace")
    r = ip.execution_count
    cell(ip, "%%cuda\n" + bad)
    assert f"in bad (Cell In[{r}], line 4)" in _compile_error(ip, f"bad.compile('{SIG}')")
    # a cell that follows a %%cuda cell keeps its own number
    q = ip.execution_count
    cell(ip, "%%cuda\ndef fine(out):\n    out[0] = 1.0\n")
    cell(ip, "@cuda.jit\n" + bad.replace("bad", "bad_next"))
    assert f"in bad_next (Cell In[{q + 1}], line 4)" in _compile_error(
        ip, f"bad_next.compile('{SIG}')")


def test_cuda_cell_keeps_ipython_syntax_and_terminal_behaviour(ip):
    from gpureplace.jit import GPUFunction
    # the terminal waits for the blank line that ends a cell magic
    assert ip.check_complete("%%cuda\ndef f(out):\n    out[0] = 1.0\n")[0] == "incomplete"
    # IPython syntax in the body, and the value of the last line, as in any cell
    with capture_output() as cap:
        res = ip.run_cell("%%cuda\nnames = %who_ls\ndef g(out):\n    out[0] = 1.0\n40 + 2\n",
                          store_history=True)
    assert res.success and res.result == 42 and "42" in cap.stdout
    assert isinstance(ip.user_ns["g"], GPUFunction)
    # an empty body is IPython's usage error, as for any cell magic
    res, shown = shown_run(ip, "%%cuda")
    assert res.error_in_exec is not None and "cell body is empty" in shown
    # called directly, the magic runs the body it is given; its errors propagate
    cell(ip, "get_ipython().run_cell_magic('cuda', '', 'def direct(out):\\n    out[0] = 1.0\\n')")
    assert isinstance(ip.user_ns["direct"], GPUFunction)
    res, _ = shown_run(ip, "get_ipython().run_cell_magic('cuda', '', 'def d2(out):\\n"
                           "    out[0] = 1.0\\nraise KeyError(5)\\n')")
    assert isinstance(res.error_in_exec, KeyError) and isinstance(ip.user_ns["d2"], GPUFunction)


def test_errors_in_gpureplace_hooks_are_warnings_and_keep_the_users_error(ip, monkeypatch):
    import sys

    from gpureplace.ipython import extension
    from gpureplace.tracking import bindings

    def broken():
        raise RuntimeError("hook bug")
    monkeypatch.setattr(bindings, "check", broken)
    with pytest.warns(RuntimeWarning, match="redefinition check failed.*hook bug"):
        res, shown = shown_run(ip, "ok = 1")
    assert res.success and "Error in callback" not in shown
    with pytest.warns(RuntimeWarning, match="hook bug"):
        res, shown = shown_run(ip, "raise ValueError('mine')")
    assert isinstance(res.error_in_exec, ValueError) and sys.last_value is res.error_in_exec
    assert "hook bug" not in shown and "ValueError: mine" in shown
    monkeypatch.undo()

    magics = extension.loaded()

    def broken_convert(opened):
        raise RuntimeError("convert bug")
    monkeypatch.setattr(magics, "_convert", broken_convert)
    with pytest.warns(RuntimeWarning, match="converting the %%cuda cell's functions.*"
                                            "convert bug"):
        res, shown = shown_run(ip, "%%cuda\ndef h(out):\n    out[0] = 1.0\nraise ValueError('x')\n")
    assert isinstance(res.error_in_exec, ValueError) and sys.last_value is res.error_in_exec
    assert not magics._open_cells
    monkeypatch.undo()

    # the device-output capture starts inside the user's launch: failing, it must not fail it
    from gpureplace.runtime import launch

    def broken_start():
        raise OSError("no fd 1")
    monkeypatch.setattr(extension.loaded().capture, "start", broken_start)
    with pytest.warns(RuntimeWarning, match="cannot capture device output.*no fd 1"):
        launch.note_printf()
    launch.clear_printf_pending()


def test_a_cuda_magic_registered_after_ours_gets_its_cells(ip):
    def other(line, cell):
        return "nvcc"
    ip.magics_manager.register_function(other, magic_kind="cell", magic_name="cuda")
    with capture_output():
        res = ip.run_cell("%%cuda\nint main() { return 0; }\n")
    assert res.result == "nvcc"


def test_a_cuda_cell_helper_called_on_the_host_says_how_to_run_it(ip):
    cell(ip, "%%cuda\ndef sq(v):\n    return v * v\n")
    with capture_output():
        res = ip.run_cell("sq(3)")
    assert isinstance(res.error_in_exec, gpureplace.LaunchError)
    text = str(res.error_in_exec)
    assert "sq[blocks, threads](...)" in text and "sq.py_func(...)" in text
    cell(ip, "nine = sq.py_func(3)")
    assert ip.user_ns["nine"] == 9


def test_a_cuda_cell_launches_what_it_defines_in_the_same_cell(ip, monkeypatch):
    """A ``def`` of a ``%%cuda`` cell is a gpureplace function from its definition on: the cell
    launches it below (with the cell's options), a helper defined after the kernel is found,
    and the traceback of an error still shows the cell's lines as typed."""
    from gpureplace.config import settings
    from gpureplace.jit import GPUFunction
    monkeypatch.setattr(settings, "backend", "simulator")
    cell(ip, "import numpy as np, gpureplace, math\nsame_ctx = gpureplace.Context('samecell')\n"
             "same_ctx.override(math.cos, lambda v: v * 31.0)")
    cell(ip, "%%cuda --context samecell\n"
             "def fill(out):\n    i = cuda.grid(1)\n    if i < out.size:\n"
             "        out[i] = twice(i) + math.cos(1.0)\n"
             "def twice(v):\n    return 2 * v\n"
             "res = np.zeros(4)\nfill[1, 32](res)\n")
    assert ip.user_ns["res"].tolist() == [31.0, 33.0, 35.0, 37.0]
    fill = ip.user_ns["fill"]
    assert isinstance(fill, GPUFunction) and fill.context is gpureplace.Context.named("samecell")
    assert fill.__qualname__ == "fill" and fill.py_func.__name__ == "fill"
    res, shown = shown_run(ip, "%%cuda\ndef broken(out):\n    out[0] = 1.0\n"
                               "broken[1, 1](None)\n")
    assert res.error_in_exec is not None and "broken[1, 1](None)" in shown
    assert isinstance(ip.user_ns["broken"], GPUFunction)



def test_unloading_says_kernels_no_longer_follow_redefinitions_and_reloading_does_not():
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpureplace")
    with capture_output() as cap:
        shell.run_cell("%reload_ext gpureplace")
        shell.run_cell("pass")
    assert "extension unloaded" not in cap.stdout
    with capture_output() as cap:
        shell.run_cell("%unload_ext gpureplace")
    assert cap.stdout.count("extension unloaded: kernels no longer recompile by themselves "
                            "when a cell redefines what they use; call gpureplace.refresh()") == 1
    with capture_output() as cap:
        shell.run_cell("pass")
    assert "extension unloaded" not in cap.stdout            # said once
