"""Redefinition tracking through a real IPython InteractiveShell running cells."""


import pytest

IPython = pytest.importorskip("IPython")

import gpureplace  # noqa: E402
import gpureplace.tracking.world  # noqa: E402
from gpureplace.tracking import bindings  # noqa: E402

SIG = "void(float64[:])"


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpureplace")
    yield ip
    ip.run_line_magic("unload_ext", "gpureplace")
    ip.reset(new_session=True)


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
    assert extension._post_run_cell in shell.events.callbacks["post_run_cell"]
    shell.run_line_magic("unload_ext", "gpureplace")
    assert extension._post_run_cell not in shell.events.callbacks["post_run_cell"]
    shell.run_line_magic("load_ext", "gpureplace")
    assert shell.events.callbacks["post_run_cell"].count(extension._post_run_cell) == 1


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
