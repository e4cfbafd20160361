"""The IPython extension through a real InteractiveShell: magics, configuration, hooks, errors."""

import pytest

IPython = pytest.importorskip("IPython")

from IPython.utils.capture import capture_output  # noqa: E402

import gpureplace  # noqa: E402
from gpureplace.config import settings  # noqa: E402

SIG = "void(float64[:])"


@pytest.fixture
def ip():
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpureplace")
    yield shell
    shell.run_line_magic("unload_ext", "gpureplace")
    shell.reset(new_session=True)
    shell.config.pop("GPUReplace", None)
    settings.__init__()


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
    assert shell.events.callbacks["post_run_cell"].count(extension._post_run_cell) == 1
    shell.run_line_magic("unload_ext", "gpureplace")
    assert shell.events.callbacks["post_run_cell"] == hooks_before
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
    from gpureplace.kernel import GPUFunction
    ns = ip.user_ns
    assert isinstance(ns["saxpy"], GPUFunction) and isinstance(ns["scale"], GPUFunction)
    spec = ns["saxpy"].compile("void(float32, float32[:], float32[:], float32[:])")
    assert [cf.pyfunc.__name__ for cf in spec.compiled.closure()] == ["saxpy", "scale"]
    cap = cell(ip, '%cuda_ptx saxpy')
    assert ".entry saxpy" in cap.stdout or any(".entry saxpy" in str(o.data) for o in cap.outputs)
    from gpureplace.tools import find_tool
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
    assert "k1(array(float64, 1d, A)) recompiled in" in cap.stdout
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
        extension._state["config"].arch = "ninety"
    assert settings.arch == "sm_80"             # a bad value is refused, the old one stays
    cell(ip, "import gpureplace, math\n"
             "mine = gpureplace.Context('cfgctx')\n"
             "mine.override(math.sqrt, lambda v: v * 29.0)")
    ip.run_line_magic("config", "GPUReplace.context = 'cfgctx'")
    cell(ip, "%%cuda\ndef r(out, x):\n    out[0] = math.sqrt(x[0])\n")
    cell(ip, "p4 = r.compile('void(float64[:], float64[:])').ptx")
    assert "0d403D000000000000" in ip.user_ns["p4"]


def test_compile_errors_show_the_cell_and_line_not_the_compiler(ip):
    cell(ip, "%%cuda\ndef bad(out):\n    x = 1\n    out[0] = undefined_thing + x\n")
    with capture_output() as cap:
        res = ip.run_cell("bad.compile('void(float64[:])')", store_history=True)
    err = res.error_in_exec
    assert isinstance(err, gpureplace.CompileError)
    shown = cap.stdout + cap.stderr
    assert "undefined_thing" in shown and "Cell In[" in shown and "line 3" in shown
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
    assert extension._capture.active
    os.write(1, b"hello from the device\n")
    with capture_output() as cap:
        extension._post_run_cell()
    assert not extension._capture.active
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
    assert isinstance(res.error_in_exec, KeyError) and "no_such_context" in str(res.error_in_exec)
