"""Running an override's cell again, or a named context's, with nothing changed invalidates
nothing (as a helper's cell run again does): before, each run moved the world and every kernel
that used the override compiled again (or was read back from the disk cache).  Changed, it still
recompiles exactly the kernels that use it."""

import numpy as np

import gpureplace

SETUP = "import numpy as np, math, gpureplace\nfrom gpureplace import cuda, Context\n"
OVERRIDE = "@gpureplace.override(math.cos)\ndef mycos(x):\n    return 5.0\n"
CONTEXT = ("fast = Context('fast_again', fastmath=True)\n\n@fast.override(math.sin)\n"
           "def mysin(x):\n    return 7.0\n")
KERNELS = '''
@cuda.jit
def uses_cos(out):
    i = cuda.grid(1)
    out[i] = math.cos(0.0)

@cuda.jit(context=fast)
def uses_sin(out):
    i = cuda.grid(1)
    out[i] = math.sin(0.0)

a = np.zeros(4)
b = np.zeros(4)
uses_cos[1, 4](a)
uses_sin[1, 4](b)
'''
LAUNCH = "uses_cos[1, 4](a)\nuses_sin[1, 4](b)\n"


def _compiles_after(shell, cell):
    before = gpureplace.stats()
    assert shell.run_cell(cell).error_in_exec is None
    assert shell.run_cell(LAUNCH).error_in_exec is None
    after = gpureplace.stats()
    return {k: after[k] - before[k] for k in ("kernel_compiles", "disk_hits", "invalidations")}


def test_an_override_or_context_cell_run_again_unchanged_keeps_the_compiled_kernels(
        shell, own_disk_cache):
    try:
        _run_again(shell)
    finally:                 # (the default context's override would outlive the test)
        import math
        gpureplace.default_context.remove_override(math.cos)


def _run_again(shell):
    for cell in (SETUP, OVERRIDE, CONTEXT, KERNELS):
        assert shell.run_cell(cell).error_in_exec is None
    np.testing.assert_array_equal(shell.user_ns["a"], [5.0] * 4)
    np.testing.assert_array_equal(shell.user_ns["b"], [7.0] * 4)
    nothing = {"kernel_compiles": 0, "disk_hits": 0, "invalidations": 0}
    assert _compiles_after(shell, OVERRIDE) == nothing
    assert _compiles_after(shell, CONTEXT) == nothing
    assert _compiles_after(shell, OVERRIDE + "\n" + CONTEXT) == nothing
    # changed: the kernel that uses it compiles again, the other one does not
    changed = _compiles_after(shell, OVERRIDE.replace("5.0", "6.0"))
    assert changed["kernel_compiles"] + changed["disk_hits"] == 1
    np.testing.assert_array_equal(shell.user_ns["a"], [6.0] * 4)
    changed = _compiles_after(shell, CONTEXT.replace("7.0", "8.0"))
    assert changed["kernel_compiles"] + changed["disk_hits"] == 1
    np.testing.assert_array_equal(shell.user_ns["b"], [8.0] * 4)
    # a context defined again without its override: the kernel falls back to math.sin
    changed = _compiles_after(shell, "fast = Context('fast_again', fastmath=True)\n")
    assert changed["kernel_compiles"] + changed["disk_hits"] == 1
    np.testing.assert_array_equal(shell.user_ns["b"], [0.0] * 4)
    # the same code reading another value through a global: still tracked
    assert shell.run_cell("C = 2.0\n" + OVERRIDE.replace("5.0", "C")).error_in_exec is None
    assert shell.run_cell(LAUNCH).error_in_exec is None
    np.testing.assert_array_equal(shell.user_ns["a"], [2.0] * 4)
    assert shell.run_cell("C = 3.0\n" + OVERRIDE.replace("5.0", "C")).error_in_exec is None
    assert shell.run_cell(LAUNCH).error_in_exec is None
    np.testing.assert_array_equal(shell.user_ns["a"], [3.0] * 4)


HELPER = "def activation(v):\n    return v if v > 0 else 0.0\n"
OVERRIDDEN = '''
own = Context("own_activation")

@own.override(activation)
def fast_activation(v):
    return 100.0

@own.override(activation, types=("float32",))
def fast_activation32(v):
    return 32.0

@cuda.jit
def act(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = activation(x[i])

x = np.array([-1.0, 2.0])
x32 = x.astype(np.float32)
plain, ctx64, ctx32 = np.zeros(2), np.zeros(2), np.zeros(2, np.float32)
def launch():
    act[1, 2](x, plain)
    act.with_context(own)[1, 2](x, ctx64)
    act.with_context(own)[1, 2](x32, ctx32)
launch()
'''


def test_an_overridden_helpers_cell_run_again_keeps_its_overrides(shell):
    """The override was given for the notebook's ``activation``: its cell run again (the helper
    fixed) defines the same name again, and the context's overrides, typed and untyped, apply
    to the new definition (they silently stopped applying: the kernels in the context called
    the plain helper); kernels outside the context run the new helper."""
    for cell in (SETUP, HELPER, OVERRIDDEN):
        assert shell.run_cell(cell).error_in_exec is None
    ns = shell.user_ns
    np.testing.assert_array_equal(ns["plain"], [0.0, 2.0])
    np.testing.assert_array_equal(ns["ctx64"], [100.0, 100.0])
    np.testing.assert_array_equal(ns["ctx32"], [32.0, 32.0])
    assert shell.run_cell(HELPER.replace("0.0", "0.5 * v")).error_in_exec is None
    assert shell.run_cell("launch()").error_in_exec is None
    np.testing.assert_array_equal(ns["plain"], [-0.5, 2.0])
    np.testing.assert_array_equal(ns["ctx64"], [100.0, 100.0])
    np.testing.assert_array_equal(ns["ctx32"], [32.0, 32.0])
    ctx = ns["own"]
    assert all(o.host is ns["activation"] for o in ctx.overrides()) and len(ctx.overrides()) == 2
    report = ns["act"].with_context(ctx).dispatch_report("void(float64[::1], float64[::1])")
    assert "fast_activation" in str(report)
    # removed by the name it has now
    assert ctx.remove_override(ns["activation"]) is True
    assert shell.run_cell("launch()").error_in_exec is None
    np.testing.assert_array_equal(ns["ctx64"], [-0.5, 2.0])
    np.testing.assert_array_equal(ns["ctx32"], [32.0, 32.0])
