"""An override's implementation is its name, as a helper a kernel calls is: the cell that defines
``my_sin`` run again (``ctx.override(math.sin, my_sin)`` in another cell, not run again) makes the
kernels that use the override run the new definition, recompiling exactly them; defined again
the same way, nothing recompiles.  Before, the context kept the first function object and every
kernel ran the old implementation for the rest of the session."""

import numpy as np

import gpureplace

SETUP = '''
import math, numpy as np, gpureplace
from gpureplace import cuda, Context
impl_ctx = Context("impl_by_name")
'''
IMPLS = '''
def my_sin(x):
    return x + 1.0

def my_cos(x):
    return x + 10.0
'''
REGISTER = ('impl_ctx.override(math.sin, my_sin)\n'
            'impl_ctx.override(math.cos, my_cos, types=("float64",))\n')
KERNELS = '''
@cuda.jit(context=impl_ctx)
def uses_sin(out):
    out[0] = math.sin(out[0])

@cuda.jit(context=impl_ctx)
def uses_cos(out):
    out[0] = math.cos(out[0])

@cuda.jit(context=impl_ctx)
def plain(out):
    out[0] = out[0] * 2.0
'''
LAUNCH = '''
s, c, p = np.zeros(1), np.zeros(1), np.ones(1)
uses_sin[1, 1](s); uses_cos[1, 1](c); plain[1, 1](p)
'''


def _launch(shell):
    before = gpureplace.stats()
    assert shell.run_cell(LAUNCH).error_in_exec is None
    after = gpureplace.stats()
    ns = shell.user_ns
    return (float(ns["s"][0]), float(ns["c"][0]), float(ns["p"][0]),
            after["kernel_compiles"] - before["kernel_compiles"])


def test_the_cell_defining_an_implementation_run_again_reaches_its_kernels(shell, own_disk_cache):
    for cell in (SETUP, IMPLS, REGISTER, KERNELS):
        assert shell.run_cell(cell).error_in_exec is None
    assert _launch(shell) == (1.0, 10.0, 2.0, 3)
    ptx = shell.user_ns["uses_sin"].compile("void(float64[::1])").ptx
    # the same definitions again: nothing recompiles
    assert shell.run_cell(IMPLS).error_in_exec is None
    assert _launch(shell) == (1.0, 10.0, 2.0, 0)
    # the untyped override's implementation changed: its kernel alone compiles again
    assert shell.run_cell(IMPLS.replace("x + 1.0", "x + 2.0")).error_in_exec is None
    assert _launch(shell) == (2.0, 10.0, 2.0, 1)
    assert shell.user_ns["uses_sin"].compile("void(float64[::1])").ptx != ptx
    # the typed one's too
    assert shell.run_cell(IMPLS.replace("x + 1.0", "x + 2.0").replace("10.0", "20.0")) \
        .error_in_exec is None
    assert _launch(shell) == (2.0, 20.0, 2.0, 1)
    # (what %cuda_deps shows: the implementation's name among what the kernel read)
    deps, = shell.user_ns["uses_sin"].dependencies().values()
    assert any(g["name"] == "__main__.my_sin" and not g["library"] for g in deps["globals"])


def test_an_implementation_bound_to_another_name_is_not_followed(shell, own_disk_cache):
    """Only a name that holds a new definition of the implementation (the same function name)
    is followed: ``my_sin = other`` rebinds the name to another function, which the override
    does not take (registering it again does)."""
    for cell in (SETUP, IMPLS, REGISTER, KERNELS):
        assert shell.run_cell(cell).error_in_exec is None
    assert _launch(shell)[0] == 1.0
    assert shell.run_cell("def other(x):\n    return x + 5.0\nmy_sin = other").error_in_exec \
        is None
    assert _launch(shell)[0] == 1.0
    assert shell.run_cell("impl_ctx.override(math.sin, my_sin)").error_in_exec is None
    assert _launch(shell)[0] == 5.0
    np.testing.assert_array_equal(shell.user_ns["p"], [2.0])
