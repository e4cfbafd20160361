"""Redefinition scenarios as notebook cells, run by tests/ipython/test_redefinition_modes.py three
ways: cold (one process, empty disk cache), warm (a second process on the disk cache the first
one filled, so every kernel of the set-up comes from disk) and after ``%reload_ext gpureplace``.

A scenario is a list of cells.  Cells before the ``COMPILED`` marker set the scene and compile
its kernels; the cells after it change something and assert, inside the shell, what a user must
then see.  The assertions are about behaviour (the constants in the PTX, errors, and on a GPU the
launched result), so they hold in every mode; what differs between the modes is only where the
set-up's kernels came from.

Run as a script: ``python redefinition_scenarios.py MODE OUT.json`` (MODE: cold, fill, warm,
reload) executes every scenario in a real IPython shell and writes ``{name: null | error}``.
"""

from __future__ import annotations

import json
import sys
import traceback

COMPILED = "# -- compiled --"

#: Defined in every scenario's namespace before its cells.
PRELUDE = r'''
import math, struct, types
import numpy as np
import gpureplace
from gpureplace import cuda, Context
SIG = "void(float64[:])"

def lit(value):
    """A float64 literal as PTX writes it."""
    return "0d%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]

def expect(kernel, value, result=None):
    """``kernel``'s code holds the constant ``value`` (and, on a GPU, launching it on [1.0]
    gives ``result``): what the user gets is the current definition, not an older one."""
    ptx = kernel.inspect_ptx(SIG)
    assert lit(value) in ptx, f"{kernel.__name__}: {value} is not in its PTX (stale code)"
    if result is not None and gpureplace.settings.launch_backend() == "gpu":
        import cupy
        out = cupy.ones(1, dtype=np.float64)
        kernel[1, 1](out)
        got = float(out.get()[0])
        assert got == result, f"{kernel.__name__} launched: {got}, expected {result}"

def expect_data(kernel, index, value, result=None):
    """``kernel`` reads a global array from device memory whose copy holds ``value`` at
    ``index`` (and, on a GPU, launching it on [1.0] gives ``result``)."""
    (_, data), = kernel.compile(SIG).device_arrays
    assert data[index] == value, f"{kernel.__name__}: its array holds {data[index]} (stale data)"
    if result is not None and gpureplace.settings.launch_backend() == "gpu":
        import cupy
        out = cupy.ones(1, dtype=np.float64)
        kernel[1, 1](out)
        assert float(out.get()[0]) == result

def refused(kernel, *words):
    """Compiling ``kernel`` now fails with a CompileError mentioning ``words``."""
    try:
        kernel.inspect_ptx(SIG)
    except gpureplace.CompileError as exc:
        for w in words:
            assert w in str(exc), f"{w!r} not in {exc}"
        return
    raise AssertionError(f"{kernel.__name__} compiled; expected an error about {words}")

def counts():
    s = gpureplace.stats()
    return s["kernel_compiles"], s["disk_hits"]
'''

SCENARIOS = {
    "callee": [
        """
def scale(v):
    return v * 3.0
def other(v):
    return v * 11.0
@cuda.jit
def k_scale(out):
    out[0] = scale(out[0])
@cuda.jit
def k_other(out):
    out[0] = other(out[0])
""",
        "expect(k_scale, 3.0, 3.0); expect(k_other, 11.0, 11.0); spec_other = k_other.compile(SIG)",
        COMPILED,
        "def scale(v):\n    return v * 7654321.0",
        "expect(k_scale, 7654321.0, 7654321.0)",
        # the other kernel kept its code: nothing compiled or loaded for it
        "before = counts(); assert k_other.compile(SIG) is spec_other and counts() == before",
    ],
    "two_levels_down": [
        """
def leaf(v):
    return v + 5.0
def middle(v):
    return leaf(v) * 2.0
@cuda.jit
def k(out):
    out[0] = middle(out[0])
""",
        "expect(k, 5.0, 12.0)",
        COMPILED,
        "def leaf(v):\n    return v + 17.0",
        "expect(k, 17.0, 36.0)",
    ],
    "global_constant": [
        """
FACTOR = 2.5
@cuda.jit
def k(out):
    out[0] = out[0] * FACTOR
""",
        "expect(k, 2.5, 2.5)",
        COMPILED,
        "FACTOR = 4.25",
        "expect(k, 4.25, 4.25)",
    ],
    "deleted_then_defined_again": [
        """
def helper(v):
    return v + 9.0
@cuda.jit
def k(out):
    out[0] = helper(out[0])
""",
        "expect(k, 9.0, 10.0)",
        COMPILED,
        "del helper",
        "refused(k, 'helper', 'no longer defined')",
        "def helper(v):\n    return v + 19.0",
        "expect(k, 19.0, 20.0)",
    ],
    "device_function_callee": [
        """
@cuda.jit(device=True)
def dev(v):
    return v * 6.0
@cuda.jit
def k(out):
    out[0] = dev(out[0])
""",
        "expect(k, 6.0, 6.0)",
        COMPILED,
        "@cuda.jit(device=True)\ndef dev(v):\n    return v * 26.0",
        "expect(k, 26.0, 26.0)",
    ],
    "recursive_helpers": [
        """
@cuda.jit("float64(float64)", device=True)
def shrink(v):
    if v < 2.0:
        return v * 7.0
    return shrink(v * 0.5)
def grow(v):
    if v > 8.0:
        return v + 3.0
    return grow(v * 2.0)
@cuda.jit
def k(out):
    out[0] = shrink(out[0]) + grow(out[0])
""",
        "expect(k, 7.0, 7.0 + 19.0)",
        COMPILED,
        "def grow(v):\n    if v > 8.0:\n        return v + 5.0\n    return grow(v * 2.0)",
        "expect(k, 5.0, 7.0 + 21.0)",
        "@cuda.jit('float64(float64)', device=True)\ndef shrink(v):\n    if v < 2.0:\n"
        "        return v * 9.0\n    return shrink(v * 0.5)",
        "expect(k, 9.0, 9.0 + 21.0)",
    ],
    "kernel_redefined": [
        """
@cuda.jit
def k(out):
    out[0] = out[0] + 31.0
""",
        "expect(k, 31.0, 32.0)",
        COMPILED,
        "@cuda.jit\ndef k(out):\n    out[0] = out[0] + 41.0",
        "expect(k, 41.0, 42.0)",
    ],
    "override_redefined": [
        """
ctx = Context("modes_ctx")
@ctx.override(math.sin)
def my_sin(x):
    return x + 51.0
@cuda.jit(context=ctx)
def k(out):
    out[0] = math.sin(out[0])
""",
        "expect(k, 51.0, 52.0)",
        COMPILED,
        "@ctx.override(math.sin)\ndef my_sin(x):\n    return x + 61.0",
        "expect(k, 61.0, 62.0)",
        # the override's own helper, redefined
        "def bump(x):\n    return x + 71.0\n@ctx.override(math.sin)\ndef my_sin(x):\n"
        "    return bump(x)",
        "expect(k, 71.0, 72.0)",
        "def bump(x):\n    return x + 81.0",
        "expect(k, 81.0, 82.0)",
    ],
    "module_attribute": [
        """
import sys
lib = types.ModuleType("modes_lib")
sys.modules["modes_lib"] = lib
exec("OFFSET = 91.0\\ndef shift(v):\\n    return v + OFFSET\\n", lib.__dict__)
@cuda.jit
def k(out):
    out[0] = lib.shift(out[0])
""",
        "expect(k, 91.0, 92.0)",
        COMPILED,
        "lib.OFFSET = 93.0",
        "expect(k, 93.0, 94.0)",
    ],
    "global_array_changed_in_place": [
        """
G = np.array([1.0, 2.5, 3.0])
@cuda.jit
def k(out):
    out[0] = out[0] * G[1]
""",
        "expect(k, 2.5, 2.5)",
        COMPILED,
        "G[1] = 13.0",
        "expect(k, 13.0, 13.0)",
        "G = np.array([1.0, 17.0, 3.0])",
        "expect(k, 17.0, 17.0)",
    ],
    "large_global_array_changed_in_place": [
        """
BIG = np.arange(100_000, dtype=np.float64)
@cuda.jit
def k(out):
    out[0] = out[0] * BIG[3]
""",
        "expect_data(k, 3, 3.0, 3.0)",
        COMPILED,
        "BIG[3] = 21.0",
        "expect_data(k, 3, 21.0, 21.0)",
        "BIG = np.full(100_000, 23.0)",
        "expect_data(k, 3, 23.0, 23.0)",
    ],
    # a cell that changes what older kernels read and, before its end, compiles code that reads
    # the new value: the older kernels see the change too, in every later cell
    "same_cell_redefinition_and_compile": [
        """
def h(v):
    return v * 31.0
SCALE = 37.0
@cuda.jit
def k_old(out):
    out[0] = h(out[0])
@cuda.jit
def k_const(out):
    out[0] = out[0] * SCALE
""",
        "expect(k_old, 31.0, 31.0); expect(k_const, 37.0, 37.0)",
        COMPILED,
        """
def h(v):
    return v * 41.0
SCALE = 43.0
@cuda.jit
def k_new(out):
    out[0] = h(out[0]) * SCALE
expect(k_new, 41.0, 41.0 * 43.0)
""",
        "expect(k_old, 41.0, 41.0); expect(k_const, 43.0, 43.0)",
        "x = 1",
        "expect(k_old, 41.0, 41.0); expect(k_const, 43.0, 43.0)",
    ],
    # a NumPy record (a view of a structured array's element) compiled into the code as a
    # constant, changed in place through its array
    "global_record_changed_in_place": [
        """
REC = np.zeros(2, dtype=[("x", "f8"), ("y", "f8")])
REC[0] = (47.0, 53.0)
R = REC[0]
@cuda.jit
def k(out):
    out[0] = out[0] * (R["x"] + R["y"])
""",
        "expect(k, 100.0, 100.0)",
        COMPILED,
        "REC[0] = (59.0, 61.0)",
        "expect(k, 120.0, 120.0)",
        "R[\"x\"] = 67.0",         # (a record assigned to directly)
        "expect(k, 128.0, 128.0)",
    ],
    # reflection without a signature lists what a launch would run now, not the code compiled
    # before a redefinition
    "reflection_without_signature": [
        """
def h(v):
    return v * 71.0
@cuda.jit
def k(out):
    out[0] = h(out[0])
""",
        "expect(k, 71.0, 71.0)",
        COMPILED,
        "def h(v):\n    return v * 73.0",
        """
texts = list(k.inspect_ptx().values())
assert texts and all(lit(73.0) in t and lit(71.0) not in t for t in texts), texts
current = [v for v in k.inspect_all() if v.current]
assert current and all(lit(73.0) in v.text and v.text is v.value for v in current)
""",
    ],
    "unrelated_redefinition_compiles_nothing": [
        """
def used(v):
    return v * 8.0
def unused(v):
    return v
@cuda.jit
def k(out):
    out[0] = used(out[0])
""",
        "expect(k, 8.0, 8.0); spec = k.compile(SIG)",
        COMPILED,
        "def unused(v):\n    return v * 2.0",
        "before = counts(); assert k.compile(SIG) is spec and counts() == before",
        # re-running the identical definition of what it uses changes nothing either
        "def used(v):\n    return v * 8.0",
        "before = counts(); assert k.compile(SIG) is spec and counts() == before",
    ],
}


def _run_cells(ip, cells, upto_compiled=False):
    for src in cells:
        if src == COMPILED:
            if upto_compiled:
                return
            continue
        res = ip.run_cell(src, store_history=True)
        err = res.error_before_exec or res.error_in_exec
        if err is not None:
            raise err


def run_all(mode):
    """Every scenario in a fresh IPython shell; ``{name: None or the error's text}``.

    fill: only the set-up (to fill the disk cache); warm: all of it, checking that each set-up
    kernel came from the disk; reload: ``%reload_ext gpureplace`` between set-up and changes."""
    from IPython.core.interactiveshell import InteractiveShell

    import gpureplace
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "gpureplace")
    results = {}
    for name, cells in SCENARIOS.items():
        ip.reset(new_session=True)
        try:
            _run_cells(ip, [PRELUDE])
            setup = cells[:cells.index(COMPILED)]
            changes = cells[cells.index(COMPILED) + 1:]
            before = gpureplace.stats()
            _run_cells(ip, setup)
            after = gpureplace.stats()
            if mode == "warm":
                compiled = after["kernel_compiles"] - before["kernel_compiles"]
                loaded = after["disk_hits"] - before["disk_hits"]
                assert compiled == 0 and loaded > 0, (
                    f"the set-up should come from the disk cache: {compiled} compiled, "
                    f"{loaded} loaded")
            if mode == "reload":
                ip.run_line_magic("reload_ext", "gpureplace")
            if mode != "fill":
                _run_cells(ip, changes)
            results[name] = None
        except BaseException:     # noqa: B036 -- reported to the test, which fails with it
            results[name] = traceback.format_exc()
    return results


if __name__ == "__main__":
    mode, out = sys.argv[1], sys.argv[2]
    with open(out, "w") as fh:
        json.dump(run_all(mode), fh)
