"""A long notebook session lets go of what it no longer uses (jit/collect.py): the compiled
code of a redefined helper, a global array a re-run cell replaced (and its snapshot), kernels
deleted, launch configurations beyond a bound -- while everything still in use stays compiled
and tracked (a helper redefined after a collection still recompiles its kernel)."""

import gc
import weakref

import numpy as np
import pytest

import gpureplace
from gpureplace import cuda
from gpureplace.compiler import frontend, resolve
from gpureplace.jit import collect
from gpureplace.jit.launcher import MAX_CONFIGURATIONS
from gpureplace.tracking import functions

IPython = pytest.importorskip("IPython")

CELL = """
def collect_helper(v):
    return v * {k}.0 + 1.0
@cuda.jit
def kern(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = collect_helper(x[i])
kern[1, 4](x, out)
"""


def run(ip, src):
    res = ip.run_cell(src, store_history=False)
    if res.error_in_exec is not None:
        raise res.error_in_exec
    return res


def settle(ip):
    """What a user's next cells do: the cyclic garbage of dropped definitions freed, and a cell
    that changes something (the extension collects after it)."""
    from gpureplace.jit import ahead
    ahead.wait(60)
    gc.collect()
    run(ip, "y = 1")
    assert collect.collect()


def test_a_redefined_helpers_old_compiled_code_is_let_go(shell):
    run(shell, "import numpy as np\nfrom gpureplace import cuda\n"
               "x = cuda.to_device(np.arange(4, dtype=np.float32)); out = cuda.device_array(4, np.float32)")
    run(shell, CELL.format(k=1))
    first = weakref.ref(shell.user_ns["collect_helper"])
    first_kernel = weakref.ref(shell.user_ns["kern"])
    for k in range(2, 12):
        run(shell, CELL.format(k=k))
    settle(shell)
    assert first() is None and first_kernel() is None
    ns = shell.user_ns

    def cells(fn):                        # (this test's helpers: other tests' live on)
        return fn.__name__ == "collect_helper" and fn.__globals__ is ns
    assert len([key for key in frontend._cache if cells(key[0])]) == 1
    assert len([key for key in resolve.DeviceFunctionType._instances if cells(key[0])]) == 1
    assert len([w for w, _ in functions._watched.values() if cells(w)]) == 1
    np.testing.assert_array_equal(shell.user_ns["out"].copy_to_host(), np.arange(4) * 11.0 + 1.0)
    # what is in use is still tracked: a redefinition of the helper alone recompiles the kernel
    before = gpureplace.stats()["kernel_compiles"] + gpureplace.stats()["disk_hits"]
    run(shell, "def collect_helper(v):\n    return v * 50.0 + 1.0")
    run(shell, "kern[1, 4](x, out)")
    np.testing.assert_array_equal(shell.user_ns["out"].copy_to_host(), np.arange(4) * 50.0 + 1.0)
    assert gpureplace.stats()["kernel_compiles"] + gpureplace.stats()["disk_hits"] == before + 1


def test_a_global_array_a_rerun_cell_replaced_is_let_go(shell):
    run(shell, "import numpy as np\nfrom gpureplace import cuda\n"
               "x = cuda.to_device(np.arange(4, dtype=np.float32)); out = cuda.device_array(4, np.float32)\n"
               "def scaled(v, i):\n    return v * DATA[i]\n"
               "@cuda.jit\ndef uses_data(x, out):\n    i = cuda.grid(1)\n"
               "    if i < x.size:\n        out[i] = scaled(x[i], i)\n")
    olds = []
    for k in range(6):
        run(shell, f"DATA = np.full(1 << 16, {k}.0, np.float32)")
        olds.append(weakref.ref(shell.user_ns["DATA"]))
        run(shell, "uses_data[1, 4](x, out)")
    settle(shell)
    assert [r() is not None for r in olds] == [False] * 5 + [True]
    np.testing.assert_array_equal(shell.user_ns["out"].copy_to_host(), np.arange(4) * 5.0)
    # the one in use is still watched: changed in place, the kernel sees it
    run(shell, "DATA[:] = 7.0")
    run(shell, "uses_data[1, 4](x, out)")
    np.testing.assert_array_equal(shell.user_ns["out"].copy_to_host(), np.arange(4) * 7.0)


def _kernel_reading(table):
    """A kernel factory: one kernel per lookup table (read through a closure)."""
    def helper(v):
        return v + table[0]

    @cuda.jit
    def k(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = helper(x[i])
    return k


def test_kernels_made_and_dropped_by_a_script_are_let_go():
    """A script sweeping parameters, without a cell hook: every ``collect.EVERY``-th
    specialisation collects what the dropped kernels read (the tables their closures hold)."""
    x = np.zeros(4, np.float32)
    tables = []
    for i in range(3 * collect.EVERY):
        table = np.full(4096, i, np.float32)
        tables.append(weakref.ref(table))
        k = _kernel_reading(table)
        k[1, 4](x)
        del k, table
        gc.collect()
    assert x[0] == sum(range(3 * collect.EVERY))
    alive = sum(r() is not None for r in tables)
    assert alive <= collect.EVERY, alive
    assert collect.collect()
    assert sum(r() is not None for r in tables) <= 1


def test_launch_configurations_kept_are_bounded():
    @cuda.jit
    def k(x):
        x[0] = 1

    x = np.zeros(1, np.float32)
    for n in range(1, MAX_CONFIGURATIONS + 20):
        k[n, 1](x)                  # (a new grid each time: a new configuration)
    assert len(k._configs) == MAX_CONFIGURATIONS
    assert x[0] == 1
