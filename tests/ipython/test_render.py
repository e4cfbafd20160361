"""What the notebook shows, through a real InteractiveShell: labelled, highlighted and folded code
listings; launch and simulator errors as one block naming the cell; magic usage errors; the
no-GPU notice once, where the user looks; %cuda_deps tables; dispatch-report lines; short
verbose messages."""

import re

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")

from IPython.core.error import UsageError  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

from gpureplace import config  # noqa: E402
from gpureplace.config import settings  # noqa: E402
from gpureplace.ipython import render  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SAXPY = ("%%cuda\n"
         "FACTOR = 2.0\n"
         "def scale(v):\n"
         "    return FACTOR * v\n"
         "def saxpy(a, x, y, out):\n"
         "    i = cuda.grid(1)\n"
         "    if i < out.size:\n"
         "        out[i] = scale(a) * x[i] + y[i] + math.sin(y[i])\n")
SIG32 = "void(float32, float32[::1], float32[::1], float32[::1])"
SIG64 = "void(float64, float64[::1], float64[::1], float64[::1])"


@pytest.fixture
def simulated(monkeypatch):
    """The simulator backend for the shell the extension loads into (set up before it; the
    settings read the environment again once it is restored)."""
    monkeypatch.setenv("GPUREPLACE_BACKEND", "simulator")
    settings.__init__()
    yield
    monkeypatch.undo()
    settings.__init__()


@pytest.fixture
def ip(simulated, shell):
    """conftest.py's shell, on the simulator."""
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


# -- 1. code listings ----------------------------------------------------------------------------

def _listings(outputs):
    return [o.data for o in outputs]


def test_each_ptx_listing_is_labelled_highlighted_and_folded(ip):
    ok(ip, SAXPY)
    ok(ip, f"saxpy.compile('{SIG32}'); saxpy.compile('{SIG64}')")
    _, outputs = ok(ip, "%cuda_ptx saxpy")
    shown = _listings(outputs)
    assert len(shown) == 2
    titles = ["saxpy(float32, float32[::1], float32[::1], float32[::1])",
              "saxpy(float64, float64[::1], float64[::1], float64[::1])"]
    for data, title in zip(shown, titles):
        label, _, text = data["text/plain"].partition("\n")
        n = len(text.splitlines())
        # the terminal: a one-line label above the full text
        assert label == f"{title} — PTX, {n} lines" and ".entry saxpy" in text
        assert text.rstrip() == ip.user_ns["saxpy"].inspect_ptx(
            SIG32 if "32" in title else SIG64).rstrip()
        # the notebook: folded (over 40 lines), the summary names it, the code highlighted
        html = data["text/html"]
        assert n > render.FOLD_LINES and html.startswith('<details class="gpureplace-listing">')
        summary = re.search(r"<summary[^>]*>(.*?)</summary>", html).group(1)
        assert f"{title} — PTX, {n} lines" in summary
        from gpureplace.compiler.toolchain import find_tool
        if find_tool("ptxas") is not None:
            assert re.search(r", \d+ registers, \d+ B shared memory", summary)
        assert "<span" in html and "ld.global" in html


def test_ptx_lexer_tells_directives_instructions_registers_comments_and_numbers():
    from pygments.token import Comment, Keyword, Name, Number
    ptx = ("// a comment\n.version 8.0\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n"
           "\t.reg .b32 \t%r<4>;\n\tld.global.b32 \t%r1, [%rd1+4];\n"
           "\tmul.rn.f32 \t%r2, %r1, 0f3F800000;\n\t@%p1 bra \t$L__BB0_2;\n$L__BB0_2:\n"
           "\tret;\n}\n")
    tokens = [(t, v) for t, v in render.PtxLexer().get_tokens(ptx) if v.strip()]
    kinds = {v: t for t, v in tokens}
    assert kinds["// a comment"] in Comment
    assert kinds[".version"] in Keyword and kinds[".entry"] in Keyword and kinds[".b32"] in Keyword
    assert kinds["ld.global.b32"] is Name.Builtin and kinds["mul.rn.f32"] is Name.Builtin
    assert kinds["bra"] is Name.Builtin and kinds["ret"] is Name.Builtin
    assert kinds["%r1"] is Name.Variable and kinds["@%p1"] is Name.Variable
    assert kinds["0f3F800000"] in Number and kinds["4"] in Number
    assert kinds["$L__BB0_2:"] is Name.Label
    assert "".join(v for _, v in render.PtxLexer().get_tokens(ptx)) == ptx


def test_llvm_types_sass_and_the_show_option_are_labelled_too(ip):
    from gpureplace.compiler.toolchain import find_tool
    ok(ip, SAXPY)
    ok(ip, f"saxpy.compile('{SIG32}')")
    title = "saxpy(float32, float32[::1], float32[::1], float32[::1])"
    for magic, word in (("cuda_llvm", "LLVM IR"), ("cuda_types", "typed IR")):
        _, outputs = ok(ip, f"%{magic} saxpy")
        (data,) = _listings(outputs)
        assert data["text/plain"].startswith(f"{title} — {word}, ")
        assert "<details" in data["text/html"] and "<span" in data["text/html"]
    if find_tool("nvdisasm") is not None:
        _, outputs = ok(ip, f'%cuda_sass saxpy "{SIG32}"')
        (data,) = _listings(outputs)
        assert data["text/plain"].startswith(f"{title} — SASS, ")
        if find_tool("ptxas") is not None:
            assert " registers, " in data["text/html"]
    # a short listing starts open; %%cuda --show labels what it shows
    ok(ip, "%%cuda --show llvm\ndef tiny(out):\n    out[0] = 1.0\n")
    _, outputs = ok(ip, "tiny.compile('void(float32[::1])')")
    (data,) = _listings(outputs)
    assert data["text/plain"].startswith("tiny(float32[::1]) — LLVM IR, ")
    assert data["text/html"].startswith('<details class="gpureplace-listing" open>')


def test_ptxas_report_is_cached_per_ptx_and_omitted_without_ptxas(ip, monkeypatch):
    from gpureplace.compiler import toolchain
    ok(ip, SAXPY)
    ptx = ip.user_ns["saxpy"].compile(SIG32).ptx
    first, second = ptx + "// first\n", ptx + "// second\n"      # texts not asked about yet
    find_tool = toolchain.find_tool
    monkeypatch.setattr(toolchain, "find_tool", lambda name: None)
    html = render.Listing("saxpy(...)", "ptx", first, first)._repr_html_()
    assert "registers" not in html and "PTX" in html         # no ptxas: no numbers, no failure
    calls = []
    monkeypatch.setattr(toolchain, "find_tool", lambda name: calls.append(name) or "/no/ptxas")
    html = render.Listing("saxpy(...)", "ptx", second, second)._repr_html_()
    assert "registers" not in html and "PTX" in html         # ptxas cannot run: the same
    render.Listing("again", "sass", "SASS text", second)._repr_html_()
    assert calls == ["ptxas"]                                 # asked once per PTX text
    monkeypatch.setattr(toolchain, "find_tool", find_tool)
    if find_tool("ptxas") is not None:
        regs, shared = render.ptxas_resources(ptx)
        assert regs > 0 and shared == 0


# -- 2. errors -----------------------------------------------------------------------------------

def _one_block(shown):
    assert "Traceback" not in shown and "gpureplace/" not in shown and "File " not in shown
    assert "<ipython-input" not in shown
    return shown


def test_launch_errors_are_one_block_naming_the_cell_and_line(ip):
    ok(ip, SAXPY)
    ok(ip, "import numpy as np\nx = np.ones(4, np.float32)\nout = np.zeros(4, np.float32)")
    n = ip.execution_count
    res, shown, _ = run(ip, "y = x\nsaxpy[1, 4](np.float32(2), x, y)")
    from gpureplace.errors import LaunchError
    assert isinstance(res.error_in_exec, LaunchError)
    _one_block(shown)
    assert shown.strip().splitlines() == [
        "LaunchError: saxpy() is missing argument(s) 'out': it takes 4 (a, x, y, out), 3 given",
        f"  at Cell In[{n}], line 2: saxpy[1, 4](np.float32(2), x, y)"]
    n = ip.execution_count
    res, shown, _ = run(ip, "saxpy[1, 4](np.float32(2), x, 'y', out)")
    from gpureplace.runtime.arguments import ArgumentError
    assert isinstance(res.error_in_exec, ArgumentError)
    assert _one_block(shown).startswith("ArgumentError: saxpy: argument 2 ('y') has type")
    assert f"  at Cell In[{n}], line 1: saxpy[1, 4]" in shown and len(shown.splitlines()) == 2
    # any gpureplace error met outside the compiler: one block, naming the user's call
    n = ip.execution_count
    res, shown, _ = run(ip, "saxpy.compile('void(bogus)')")
    from gpureplace.compiler.signature import SignatureParseError
    assert isinstance(res.error_in_exec, SignatureParseError)
    assert _one_block(shown).startswith("SignatureParseError: invalid signature 'void(bogus)'")
    assert shown.rstrip().endswith(f"  at Cell In[{n}], line 1: saxpy.compile('void(bogus)')")


def test_an_error_in_a_magics_launch_quotes_the_line_as_typed(ip):
    """IPython runs ``%cuda_timeit k[...](...)`` as ``get_ipython().run_line_magic(...)``: the
    error names the line the user typed."""
    ok(ip, SAXPY)
    ok(ip, "import numpy as np\nx = np.ones(4, np.float32)")
    n = ip.execution_count
    res, shown, _ = run(ip, "y = x\n%cuda_timeit saxpy[1, 4](np.float32(2), x, y)")
    _one_block(shown)
    assert shown.strip().splitlines()[-1] == \
        f"  at Cell In[{n}], line 2: %cuda_timeit saxpy[1, 4](np.float32(2), x, y)"
    assert "run_line_magic" not in shown


def test_simulator_errors_name_the_kernel_line_and_the_launch(ip):
    k = ip.execution_count
    ok(ip, "%%cuda\ndef oob(out):\n    i = cuda.grid(1)\n    out[i] = 1.0\n")
    ok(ip, "import numpy as np\nout = np.zeros(4, np.float32)")
    n = ip.execution_count
    res, shown, _ = run(ip, "oob[1, 8](out)")
    assert type(res.error_in_exec) is IndexError                 # still the IndexError it was
    _one_block(shown)
    assert shown.startswith("IndexError: index 4 is out of bounds for axis 0 with size 4")
    assert f"in oob at Cell In[{k}], line 4, thread threadIdx=(4, 0, 0)" in shown
    assert f"  at Cell In[{n}], line 1: oob[1, 8](out)" in shown
    assert len(shown.strip().splitlines()) == 2
    # a block run with threads (a barrier): the error crosses threads, and shows the same
    k = ip.execution_count
    ok(ip, "%%cuda\ndef oob_sync(out):\n    cuda.syncthreads()\n    out[cuda.threadIdx.x + 3] = 1.0\n")
    n = ip.execution_count
    res, shown, _ = run(ip, "oob_sync[1, 2](out)")
    assert type(res.error_in_exec) is IndexError
    assert f"in oob_sync at Cell In[{k}], line 4" in _one_block(shown)
    assert f"  at Cell In[{n}], line 1: oob_sync[1, 2](out)" in shown
    # a debug kernel's raise: the user's exception, where it was raised and the launch
    k = ip.execution_count
    ok(ip, "@cuda.jit(debug=True)\ndef raiser(out):\n    raise ValueError('no')\n")
    n = ip.execution_count
    res, shown, _ = run(ip, "raiser[1, 1](out)")
    assert type(res.error_in_exec) is ValueError
    assert f"In function 'raiser', Cell In[{k}], line 3, tid=[0, 0, 0]" in _one_block(shown)
    assert f"  at Cell In[{n}], line 1: raiser[1, 1](out)" in shown


def test_kernel_code_errors_in_the_simulator_name_the_kernel_line(ip, monkeypatch):
    from gpureplace import simulator
    monkeypatch.setattr(simulator.runner, "compile_kernels", False)   # the simulator alone
    k = ip.execution_count
    ok(ip, "%%cuda\ndef broken(out):\n    out[0] = undefined_name\n")
    ok(ip, "import numpy as np\nout = np.zeros(4)")
    n = ip.execution_count
    res, shown, _ = run(ip, "broken[1, 1](out)")
    assert type(res.error_in_exec) is NameError
    lines = _one_block(shown).strip().splitlines()
    assert lines[0] == "NameError: name 'undefined_name' is not defined"
    assert f"  in broken, Cell In[{k}], line 3: out[0] = undefined_name" in lines
    assert lines[-1] == f"  at Cell In[{n}], line 1: broken[1, 1](out)"


def test_magic_usage_errors_say_what_is_wrong_in_one_line(ip):
    ok(ip, SAXPY)
    ok(ip, f"saxpy.compile('{SIG32}')\n"
           "from gpureplace import cuda\n@cuda.jit(device=True)\ndef dev(v):\n    return v\n")
    for line, expected in (
            ("%cuda_ptx", "%cuda_ptx needs a kernel: %cuda_ptx KERNEL [SIGNATURE]"),
            ("%cuda_llvm nope", "%cuda_llvm: 'nope' is not defined in this notebook"),
            ("%cuda_types np", "%cuda_types: np is a module, not a gpureplace kernel"),
            ("%cuda_deps scale.py_func",
             "%cuda_deps: scale.py_func is a function, not a gpureplace kernel"),
            ('%cuda_ptx saxpy "void(float32, bogus)"',
             "%cuda_ptx: invalid signature 'void(float32, bogus)': unknown type name 'bogus'"),
            ("%cuda_sass dev", "%cuda_sass: Cannot inspect SASS of a device function"),
            ("%cuda_ptx 'saxpy", "%cuda_ptx: No closing quotation"),
            ("%cuda_cache bogus", "%cuda_cache: unknown action 'bogus'")):
        res, shown, _ = run(ip, line)
        assert isinstance(res.error_in_exec, UsageError), (line, shown)
        assert shown.startswith(f"UsageError: {expected}"), (line, shown)
        assert "Traceback" not in shown and "magics.py" not in shown


# -- 3. the no-GPU notice ------------------------------------------------------------------------

@pytest.fixture
def no_gpu(monkeypatch):
    from gpureplace import probe
    monkeypatch.delenv("GPUREPLACE_BACKEND", raising=False)
    monkeypatch.setattr(probe, "available", lambda: False)
    monkeypatch.setattr(config.Settings, "gpu_surely_absent", lambda self: True)
    settings.__init__()
    assert settings.backend == "auto"
    yield
    monkeypatch.undo()
    settings.__init__()


LAUNCH = ("import numpy as np\nfrom gpureplace import cuda\n"
          "@cuda.jit\ndef one(out):\n    out[0] = 1.0\n"
          "out = np.zeros(1)\nprint('before')\none[1, 1](out)\nprint('after')\n")


def test_the_no_gpu_notice_shows_once_when_the_extension_loads_in_a_cell(no_gpu):
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    try:
        with capture_output() as cap:
            assert shell.run_cell("%load_ext gpureplace").success
        assert cap.stdout == config.NO_GPU_NOTICE + "\n" and not cap.stderr
        with capture_output() as cap:
            assert shell.run_cell(LAUNCH).success
        assert cap.stdout == "before\nafter\n" and not cap.stderr      # not again
        with capture_output() as cap:
            shell.run_line_magic("reload_ext", "gpureplace")
        assert not cap.stdout and not cap.stderr
    finally:
        shell.run_line_magic("unload_ext", "gpureplace")
        shell.reset(new_session=True)
    assert settings.notice_stream == "stderr"


def test_loaded_at_start_the_notice_comes_with_the_first_launch_on_stdout(no_gpu):
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpureplace")       # as a kernelspec's --ext does
    try:
        with capture_output() as cap:
            assert shell.run_cell(LAUNCH).success
        assert cap.stdout == f"before\n{config.NO_GPU_NOTICE}\nafter\n" and not cap.stderr
        with capture_output() as cap:
            assert shell.run_cell(LAUNCH).success
        assert cap.stdout == "before\nafter\n"
    finally:
        shell.run_line_magic("unload_ext", "gpureplace")
        shell.reset(new_session=True)


def test_outside_ipython_the_notice_stays_on_stderr(no_gpu, capsys):
    assert settings.launch_backend() == "simulator"
    assert settings.launch_backend() == "simulator"
    out, err = capsys.readouterr()
    assert not out and err.count(config.NO_GPU_NOTICE) == 1
    assert "GPUREPLACE_BACKEND=gpu to refuse instead" in err


# -- 4. %cuda_deps -------------------------------------------------------------------------------

def test_cuda_deps_labels_merges_and_leaves_out_library_names(ip):
    ok(ip, SAXPY)
    ok(ip, "import helpers_records as hr")
    ok(ip, "%%cuda\ndef uses_module(out):\n    out[0] = hr.far(out[0]) + hr.OFFSET\n")
    ok(ip, f"saxpy.compile('{SIG32}'); saxpy.compile('{SIG64}')")
    shown, _ = ok(ip, "%cuda_deps saxpy")
    lines = shown.splitlines()
    assert lines[0] == "saxpy(float32, float32[::1], float32[::1], float32[::1])"
    assert "  functions: saxpy, scale" in lines
    assert any(re.fullmatch(r"  saxpy, line 8: scale", x) for x in lines)
    assert any(re.fullmatch(r"  scale, line 4: FACTOR", x) for x in lines)
    assert lines[-1] == ("  the same for: saxpy(float64, float64[::1], float64[::1], "
                         "float64[::1])")
    assert shown.count("functions:") == 1                  # identical tables once
    for library in ("cuda", "math", "bool", "grid", "sin", "builtin"):
        assert not re.search(rf"\b{library}\b", shown), library
    # a user module's attributes stay (the module binding itself does not)
    ok(ip, "uses_module.compile('void(float64[::1])')")
    shown, _ = ok(ip, "%cuda_deps uses_module")
    assert "uses_module, line 3: helpers_records.far" in shown
    assert "uses_module, line 3: helpers_records.OFFSET" in shown
    assert not re.search(r": hr\b", shown)
    ok(ip, "FACTOR = 5.0")
    shown, _ = ok(ip, "%cuda_deps saxpy")
    assert "  scale, line 4: FACTOR (changed)" in shown and shown.count("functions:") == 1
    shown, _ = ok(ip, f'%cuda_deps saxpy "{SIG64}"')         # (compiled again for the new value)
    assert shown.splitlines()[0] == "saxpy(float64, float64[::1], float64[::1], float64[::1])"
    assert "the same for" not in shown


def test_dependencies_mark_library_names_and_keep_them():
    from gpureplace import cuda
    import helpers_records as hr

    @cuda.jit
    def k(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = hr.far(float(i)) + np.float64(1.0)

    table = k.dependencies("void(float64[:])")
    library = {g["name"]: g["library"] for g in table["globals"]}
    assert library["cuda"] and library["gpureplace.cuda.grid"] and library["np"]
    assert library["hr"] and library["float"]
    assert not library["helpers_records.far"]


# -- 5. the dispatch report ----------------------------------------------------------------------

def test_dispatch_report_gives_each_call_site_its_own_line(ip):
    ok(ip, "%%cuda\n"                                  # line 1
           "def helper(v):\n"                          # 2
           "    return math.sqrt(v)\n"                 # 3
           "def k(out, x):\n"                          # 4
           "    i = cuda.grid(1)\n"                    # 5
           "    if i < out.size:\n"                    # 6
           "        a = math.sin(\n"                   # 7
           "            x[i])\n"                       # 8
           "        b = helper(x[i])\n"                # 9
           "        out[i] = a + b + math.sin(x[i]) + helper(\n"   # 10
           "            x[i])\n")                      # 11
    ok(ip, "r32 = k.dispatch_report('void(float32[:], float32[:])')\n"
           "r64 = k.dispatch_report('void(float64[:], float64[:])')")
    rows = {}
    for name in ("r32", "r64"):
        rows[name] = [(r["function"], r["line"], r["callable"]) for r in ip.user_ns[name]]
    assert rows["r32"] == rows["r64"]                  # the same call, the same line
    assert rows["r32"] == [("k", 5, "cuda.grid"), ("k", 7, "math.sin"),
                           ("k", 9, "__main__.helper"), ("k", 10, "__main__.helper"),
                           ("k", 10, "math.sin"), ("helper", 3, "math.sqrt")]


# -- 6. verbose messages -------------------------------------------------------------------------

def test_verbose_messages_keep_under_100_characters(ip):
    ip.run_line_magic("config", "GPUReplace.verbose = True")
    ok(ip, "%%cuda\nA_LONG_CONSTANT_NAME = 1.0\nANOTHER_LONG_CONSTANT_NAME = 2.0\n"
           "def scale(v):\n    return v * A_LONG_CONSTANT_NAME + ANOTHER_LONG_CONSTANT_NAME\n"
           "def saxpy_with_a_long_name(out):\n    out[0] = scale(out[0])\n"
           "def another_kernel_with_a_long_name(out):\n    out[0] = scale(out[0])\n")
    ok(ip, "saxpy_with_a_long_name.compile('void(float64[:])')\n"
           "another_kernel_with_a_long_name.compile('void(float64[:])')")
    shown, _ = ok(ip, "A_LONG_CONSTANT_NAME = 3.0; ANOTHER_LONG_CONSTANT_NAME = 4.0")
    lines = shown.strip().splitlines()
    assert lines == [
        "gpureplace: A_LONG_CONSTANT_NAME redefined, ANOTHER_LONG_CONSTANT_NAME redefined",
        "  another_kernel_with_a_long_name, saxpy_with_a_long_name will recompile on next launch"]
    assert all(len(x) < render.WIDTH for x in lines)
    ok(ip, "%%cuda\nF = 1.0\ndef k(out):\n    out[0] = F\n")
    ok(ip, "k.compile('void(float64[:])')")
    shown, _ = ok(ip, "F = 2.0")                         # short enough: one line, as before
    assert shown == "gpureplace: F redefined — k will recompile on next launch\n"


def test_verbose_names_a_kernel_whose_last_compile_failed_after_a_fix(ip):
    """A helper redefined so that its kernel fails to compile, then fixed: the kernel has no
    compiled code (its last compile failed), and the message said "no compiled kernel uses it"
    although the kernel compiles again, with the fix, at its next launch."""
    ip.run_line_magic("config", "GPUReplace.verbose = True")
    ok(ip, "import numpy as np\nfrom gpureplace import cuda\n"
           "def helper_v(v):\n    return v * 2.0\n"
           "@cuda.jit\ndef kv(x):\n    x[0] = helper_v(x[0])\n"
           "xv = np.ones(1)\nkv[1, 1](xv)")
    # (a kernel whose compile failed for its own reasons, not reading helper_v: not named)
    res, shown, _ = run(ip, "@cuda.jit\ndef other_v(x):\n    x[0] = missing_w\n"
                            "other_v[1, 1](xv)")
    assert not res.success and "missing_w" in shown
    ok(ip, "def helper_v(v):\n    return v * undefined_thing_v")
    res, shown, _ = run(ip, "kv[1, 1](xv)")
    assert not res.success and "undefined_thing_v" in shown

    shown, _ = ok(ip, "def helper_v(v):\n    return v * 3.0")
    assert shown.strip().splitlines() == [
        "gpureplace: helper_v redefined",
        "  no compiled kernel uses it; kv, whose last compile failed, compiles again at the next "
        "launch"], shown
    ok(ip, "kv[1, 1](xv)")
    assert ip.user_ns["xv"][0] == 6.0


def test_recompiled_message_is_two_short_lines():
    from numba.core import types
    argtypes = (types.float32, types.float32[::1], types.float32[::1], types.float32[::1])
    text = config.recompiled_message("saxpy", argtypes, 0.042,
                                     "__main__.scale: 'FACTOR' (line 4) was redefined")
    assert text.splitlines() == [
        "gpureplace: saxpy(float32, float32[::1], float32[::1], float32[::1]) recompiled in 42 ms",
        "  because scale: 'FACTOR' (line 4) was redefined"]
    assert all(len(x) < 100 for x in text.splitlines())
    assert render.redefinition_message([("scale", "redefined")], ["saxpy"]) == \
        "gpureplace: scale redefined — saxpy will recompile on next launch"


# -- 7. what a kernel cannot read, launch configurations, kernel signatures ----------------------

def test_a_class_attribute_read_in_a_kernel_is_said_as_such_at_the_cell_line(ip):
    ok(ip, "import numpy as np\nout = np.zeros(4, np.float32)\n"
           "class P:\n    scale = 2.0\nTABLE = {0: 1.0}\n")
    k = ip.execution_count
    ok(ip, "%%cuda\ndef k(out):\n    i = cuda.grid(1)\n    out[i] *= P.scale\n"
           "def d(out):\n    out[0] = TABLE[0]\n")
    from gpureplace.errors import CompileError
    for launch, expected in (
            ("k[1, 4](out)", f"CompileError: in k (Cell In[{k}], line 4): P.scale reads an "
                             f"attribute of the class P: reading the attributes of Python "
                             f"classes or their objects is not supported in device code; "
                             f"bind the value to a module global (SCALE = P.scale)"),
            ("d[1, 1](out)", f"CompileError: in d (Cell In[{k}], line 6): TABLE is a global "
                             f"dict, which device code cannot read")):
        res, shown, _ = run(ip, launch)
        assert isinstance(res.error_in_exec, CompileError)
        assert _one_block(shown).startswith(expected), shown


def test_a_float_grid_is_refused_in_one_block_even_after_the_int_launch(ip):
    ok(ip, "%%cuda\ndef k(out):\n    out[cuda.grid(1)] = 1.0\n")
    ok(ip, "import numpy as np\nout = np.zeros(32, np.float32)\nk[1, 32](out)")
    n = ip.execution_count
    res, shown, _ = run(ip, "k[1.0, 32](out)")
    from gpureplace.errors import LaunchError
    assert isinstance(res.error_in_exec, LaunchError)
    assert _one_block(shown).strip().splitlines() == [
        "LaunchError: k[1.0, 32]: grid must be an int or a tuple of 1 to 3 ints, got 1.0 "
        "(a float)", f"  at Cell In[{n}], line 1: k[1.0, 32](out)"]


def test_reflection_magics_refuse_a_kernel_signature_with_a_return_type(ip):
    ok(ip, SAXPY)
    for line in ("%cuda_ptx saxpy int32(float32, float32[::1], float32[::1], float32[::1])",
                 '%cuda_llvm saxpy "int32(float32, float32[::1], float32[::1], float32[::1])"',
                 "%cuda_deps saxpy int32(float32, float32[::1], float32[::1], float32[::1])"):
        res, shown, _ = run(ip, line)
        magic = line.split()[0]
        assert isinstance(res.error_in_exec, UsageError), (line, shown)
        assert shown.startswith(
            f"UsageError: {magic}: invalid signature 'int32(float32, float32[::1], "
            f"float32[::1], float32[::1])': saxpy is a kernel, which returns nothing: its "
            f"signature's return type must be void, not int32: write void(float32, "
            f"float32[::1], float32[::1], float32[::1])"), (line, shown)
        assert "Traceback" not in shown
    _, outputs = ok(ip, f'%cuda_ptx saxpy "{SIG32}"')            # void: as before
    assert len(outputs) == 1


def test_a_signature_of_the_wrong_kind_is_one_block_at_the_cell_line(ip):
    """``dispatch_report(123)``, ``inspect_ptx([1])``: the same one block as a signature string
    that does not parse, not a traceback through the reflection and signature code."""
    ok(ip, SAXPY)
    for call, said in (("saxpy.dispatch_report(123)", "not int (123)"),
                       ("saxpy.inspect_ptx([1])", "argument type 0 of the signature [1] is int")):
        res, shown, _ = run(ip, call)
        assert isinstance(res.error_in_exec, TypeError), shown
        assert shown.startswith("SignatureTypeError: ") and said in shown.splitlines()[0], shown
        assert "at Cell In[" in shown and call in shown and "Traceback" not in shown, shown
