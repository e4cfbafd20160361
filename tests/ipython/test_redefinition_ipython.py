"""Redefinition tracking through a real IPython InteractiveShell running cells."""


import math

import pytest

IPython = pytest.importorskip("IPython")

import gpureplace  # noqa: E402
import gpureplace.tracking.world  # noqa: E402
from gpureplace.tracking import bindings  # noqa: E402

SIG = "void(float64[:])"

# (they count compiles: a cache left by an earlier run would make some disk hits)
pytestmark = pytest.mark.usefixtures("own_disk_cache")


def run(ip, src):
    res = ip.run_cell(src, store_history=True)
    if res.error_in_exec is not None:
        raise res.error_in_exec
    return res


def compiles():
    return gpureplace.stats()["kernel_compiles"]


def test_cells_redefining_a_callee_recompile_only_its_dependents(shell):
    run(shell, """
from gpureplace import cuda
def scale(v):
    return 2.0 * v
def other(v):
    return v - 1.0
@cuda.jit
def k_scale(out):
    out[0] = scale(out[0])
@cuda.jit
def k_other(out):
    out[0] = other(out[0])
""")
    run(shell, f"a = k_scale.compile('{SIG}'); b = k_other.compile('{SIG}')")
    c = compiles()
    run(shell, "def scale(v):\n    return 3.0 * v")
    run(shell, f"a2 = k_scale.compile('{SIG}'); b2 = k_other.compile('{SIG}')")
    assert compiles() == c + 1
    ns = shell.user_ns
    assert ns["b2"] is ns["b"]           # the other kernel stayed cached
    assert ns["a2"] is not ns["a"]
    assert "0d4008000000000000" in ns["a2"].ptx    # 3.0
    # re-running an identical cell invalidates nothing
    run(shell, "def scale(v):\n    return 3.0 * v")
    run(shell, f"a3 = k_scale.compile('{SIG}')")
    assert compiles() == c + 1 and ns["a3"] is ns["a2"]


def test_changed_frozen_global_and_deleted_name(shell):
    run(shell, """
from gpureplace import cuda
FACTOR = 2.0
@cuda.jit
def k(out):
    out[0] = out[0] * FACTOR
""")
    run(shell, f"s1 = k.compile('{SIG}')")
    run(shell, "FACTOR = 5.0")
    run(shell, f"s2 = k.compile('{SIG}')")
    assert "0d4014000000000000" in shell.user_ns["s2"].ptx
    run(shell, "del FACTOR")
    res = shell.run_cell(f"k.compile('{SIG}')")
    assert isinstance(res.error_in_exec, gpureplace.CompileError)
    assert "'FACTOR'" in str(res.error_in_exec) and "no longer defined" in str(res.error_in_exec)


def test_unload_removes_the_hook(shell):
    from gpureplace.ipython import extension
    hook = extension.loaded().post_run_cell
    assert hook in shell.events.callbacks["post_run_cell"]
    shell.run_line_magic("unload_ext", "gpureplace")
    assert hook not in shell.events.callbacks["post_run_cell"]
    shell.run_line_magic("load_ext", "gpureplace")
    assert shell.events.callbacks["post_run_cell"].count(extension.loaded().post_run_cell) == 1


def test_hook_reports_exactly_the_changed_tracked_bindings():
    ns = {"__name__": "many"}
    try:
        for i in range(1000):
            ns[f"v{i}"] = float(i)
            bindings.track(ns, f"v{i}", ns[f"v{i}"], None)
        ns.update({f"junk{i}": i for i in range(1000)})     # untracked names are never looked at
        bindings.check()                               # settle other tests' namespaces

        def mine(changes):
            return sorted(c for c in changes if c[0] == "many")
        assert mine(bindings.check()) == []
        ns["v7"] = -1.0
        ns["junk3"] = "changed"
        del ns["v9"]
        age = gpureplace.tracking.world.age
        assert mine(bindings.check()) == [("many", "v7", "redefined"), ("many", "v9", "deleted")]
        assert gpureplace.tracking.world.age > age
        assert mine(bindings.check()) == []
    finally:
        bindings._tracked.pop(id(ns), None)


def test_compile_count_sequence_through_cells(shell, tmp_path):
    """GPUCompiler.jl's sequence, cell by cell, with the extension's hook doing the checking."""
    run(shell, """
import math, gpureplace
from gpureplace import cuda
N = 2.0
def leaf(v):
    return v + 1.0
def helper(v):
    return leaf(v) * 2.0
@cuda.jit(device=True)
def callee(v):
    return helper(v) + N
def unrelated(v):
    return v
@cuda.jit
def kern(out):
    out[0] = callee(out[0]) + math.sin(out[0])
""")
    steps = [
        ("", 1),                                                     # first compile
        ("", 1),                                                     # cached
        ("@cuda.jit\ndef kern(out):\n    out[0] = callee(out[0]) + math.sin(out[0]) + 0.5", 2),
        ("def unrelated(v):\n    return v * 3", 2),                  # unrelated function
        ("@cuda.jit(device=True)\ndef callee(v):\n    return helper(v) - N", 3),   # a callee
        ("def leaf(v):\n    return v + 100.0", 4),                   # two levels down
        ("def my_sin(x):\n    return x * 0.5\ngpureplace.override(math.sin, my_sin)", 5),
        ("N = 3.0", 6),                                              # frozen global
        ("N = 3.0", 6),                                              # identical cell
        ("gpureplace.default_context.remove_override(math.sin)", 7),
    ]
    base = compiles()
    for src, expected in steps:
        if src:
            run(shell, src)
        run(shell, f"_spec = kern.compile('{SIG}')")
        assert compiles() - base == expected, (src, compiles() - base)
    run(shell, "fast = gpureplace.Context('seq-fast', fastmath=True)")
    run(shell, f"_spec = kern.with_context(fast).compile('{SIG}')")
    assert compiles() - base == 8                                     # another context


def test_importlib_reload_of_a_module_is_a_redefinition(shell, tmp_path, monkeypatch):
    import sys
    mod = tmp_path / "reloadme.py"
    mod.write_text("def helper(v):\n    return v * 2.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    run(shell, f"""
import importlib, reloadme
from gpureplace import cuda
@cuda.jit
def k(out):
    out[0] = reloadme.helper(out[0])
s1 = k.compile('{SIG}')
""")
    mod.write_text("def helper(v):\n    return v * 4.0\n\n\n")          # a different size
    run(shell, "importlib.reload(reloadme)")
    run(shell, f"s2 = k.compile('{SIG}')")
    assert shell.user_ns["s2"] is not shell.user_ns["s1"]
    assert "0d4010000000000000" in shell.user_ns["s2"].ptx             # 4.0
    sys.modules.pop("reloadme", None)


def lit(value):
    """A float64 literal as PTX writes it."""
    import struct
    return "0d%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


CONTEXT_CELL = """
import math, numpy as np, gpureplace
from gpureplace import cuda
nb_ctx = gpureplace.Context("nb_redefined"{options})
def my_sin(x):
    return x + {offset}
nb_ctx.override(math.sin, my_sin)
"""


def test_a_context_created_again_in_a_cell_redefines_it(shell):
    """Cell A creates a named context with an override; kernels are compiled in it (the object
    given to cuda.jit, a with_context variant, %%cuda --context NAME, %config GPUReplace.context
    NAME); cell A is run again, changed: every one of them compiles with the new definition."""
    ns = shell.user_ns
    run(shell, CONTEXT_CELL.format(options="", offset="5.25"))
    run(shell, """
@cuda.jit(context=nb_ctx)
def k_held(out):
    out[0] = math.sin(out[0])
@cuda.jit
def k_plain(out):
    out[0] = math.sin(out[0])
k_variant = k_plain.with_context(nb_ctx)
""")
    run(shell, "%%cuda --context nb_redefined\ndef k_cell(out):\n    out[0] = math.sin(out[0])")
    held = ns["nb_ctx"]

    def ptx():
        run(shell, f"_p = [k.inspect_ptx('{SIG}') for k in (k_held, k_variant, k_cell)]")
        return ns["_p"]
    assert all(lit(5.25) in p for p in ptx())
    run(shell, "out = np.ones(1); k_held[1, 1](out); r5 = float(out[0])")
    assert ns["r5"] == 6.25
    run(shell, CONTEXT_CELL.format(options="", offset="7.25"))          # cell A again, changed
    assert all(lit(7.25) in p and lit(5.25) not in p for p in ptx()), "kept the old context"
    assert ns["nb_ctx"] is held and gpureplace.Context.named("nb_redefined") is held
    run(shell, "out = np.ones(1); k_held[1, 1](out); r7 = float(out[0])")
    assert ns["r7"] == 8.25
    # the default context of the notebook named after it
    run(shell, "%config GPUReplace.context = 'nb_redefined'")
    run(shell, f"_d = k_plain.inspect_ptx('{SIG}')")
    assert lit(7.25) in ns["_d"]
    run(shell, CONTEXT_CELL.format(options="", offset="9.25"))
    run(shell, f"_d = k_plain.inspect_ptx('{SIG}')")
    assert lit(9.25) in ns["_d"] and lit(7.25) not in ns["_d"]
    run(shell, "%config GPUReplace.context = 'default'")
    # created again without the override, and with fast math: sin is the built-in one again
    run(shell, "nb_ctx = gpureplace.Context('nb_redefined', fastmath=True)")
    assert ns["nb_ctx"] is held and held.fastmath
    assert held.lookup(math.sin) is gpureplace.builtin_context.lookup(math.sin)
    for p in ptx():
        assert lit(9.25) not in p
    run(shell, "_fast = [k.options().fastmath for k in (k_held, k_variant, k_cell)]")
    assert ns["_fast"] == [True, True, True]


def test_a_context_of_the_same_name_made_elsewhere_is_another_context(shell):
    """A library module's context of a name the notebook then uses is not redefined by the
    notebook: the notebook gets a new context, with a warning that names both, and kernels
    holding the library's keep it."""
    import types, sys
    lib = types.ModuleType("gr_ctx_library")
    sys.modules["gr_ctx_library"] = lib
    try:
        exec("import math, gpureplace\nctx = gpureplace.Context('nb_shared')\n"
             "def lib_sin(x):\n    return x + 3.0\nctx.override(math.sin, lib_sin)\n",
             lib.__dict__)
        shell.user_ns["lib"] = lib
        run(shell, f"""
import math
from gpureplace import cuda
@cuda.jit(context=lib.ctx)
def k_lib(out):
    out[0] = math.sin(out[0])
_p = k_lib.inspect_ptx('{SIG}')
""")
        res = shell.run_cell("import gpureplace, warnings\nwith warnings.catch_warnings(record=True) as _w:\n"
                             "    warnings.simplefilter('always')\n"
                             "    mine = gpureplace.Context('nb_shared')\n"
                             "_messages = [str(w.message) for w in _w]")
        assert res.error_in_exec is None
        ns = shell.user_ns
        assert ns["mine"] is not lib.ctx and gpureplace.Context.named("nb_shared") is ns["mine"]
        assert any("gr_ctx_library" in m and "nb_shared" in m for m in ns["_messages"])
        assert lib.ctx.lookup(math.sin) is not None
        run(shell, f"_q = k_lib.inspect_ptx('{SIG}')")
        assert lit(3.0) in ns["_q"]
    finally:
        sys.modules.pop("gr_ctx_library", None)
