"""A value that fails being looked at -- ``class AttrDict(dict): __getattr__ = dict.__getitem__``,
whose ``hasattr`` raises KeyError -- bound to a global a kernel reads, or given as an argument.

Before, rebinding such a global made the after-cell check fail with a warning, so nothing else
that cell changed was seen (a redefined helper kept running its old code); compiling a kernel
that read it failed with ``CompileError: 'py_func'``, and launching with it as an argument with
a bare ``KeyError`` from inside the launch.  Now the value is taken as redefined, every other
change of the cell is seen, and the errors name the global or the argument."""

import warnings

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.compiler.frontend import CompileError
from gpureplace.runtime.arguments import ArgumentError

CELL = '''
import numpy as np
from gpureplace import cuda

class AttrDict(dict):
    __getattr__ = dict.__getitem__

K = 1.0

def helper(v):
    return v + 1.0

@cuda.jit
def reads_k(out):
    i = cuda.grid(1)
    out[i] = K

@cuda.jit
def calls_helper(out):
    i = cuda.grid(1)
    out[i] = helper(i)

out = np.zeros(4)
reads_k[1, 4](out)
calls_helper[1, 4](out)
'''


def _cell(shell, src):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)     # (the failed check only warned)
        return shell.run_cell(src)


def test_a_global_rebound_to_such_a_value_hides_no_other_change_of_the_cell(shell):
    assert _cell(shell, CELL).error_in_exec is None
    result = _cell(shell, "K = AttrDict(scale=5.0)\n\ndef helper(v):\n    return v + 100.0\n")
    assert result.error_in_exec is None
    assert _cell(shell, "calls_helper[1, 4](out)").error_in_exec is None
    np.testing.assert_array_equal(shell.user_ns["out"], [100.0, 101.0, 102.0, 103.0])
    result = _cell(shell, "reads_k[1, 4](out)")
    assert isinstance(result.error_in_exec, CompileError)
    assert "K is a __main__.AttrDict object, which device code cannot read: looking at it " \
        "raised KeyError" in str(result.error_in_exec)
    np.testing.assert_array_equal(shell.user_ns["out"], [100.0, 101.0, 102.0, 103.0])
    # and back to a number: the kernel runs with it
    assert _cell(shell, "K = 7.0").error_in_exec is None
    assert _cell(shell, "reads_k[1, 4](out)").error_in_exec is None
    np.testing.assert_array_equal(shell.user_ns["out"], [7.0] * 4)


def test_a_kernel_reading_such_a_global_names_it_at_its_line():
    class AttrDict(dict):
        __getattr__ = dict.__getitem__

    ns = {"cuda": cuda, "K": AttrDict(a=1)}
    exec("def k(out):\n    out[0] = K\n", ns)
    kernel = cuda.jit(ns["k"])
    with pytest.raises(CompileError, match=r"K is a .*AttrDict object, which device code cannot "
                                           r"read: looking at it raised KeyError") as refused:
        kernel[1, 1](np.zeros(1))
    assert refused.value.lineno == 2


def test_such_an_argument_is_refused_by_name_before_the_launch_asks_it():
    class AttrDict(dict):
        __getattr__ = dict.__getitem__

    @cuda.jit
    def k(cfg, out):
        out[0] = 1

    out = np.zeros(1)
    with pytest.raises(ArgumentError, match=r"k: argument 0 \('cfg'\) is a .*AttrDict object, "
                                            r"which kernels cannot take: asking it for "
                                            r"__cuda_array_interface__ raised KeyError"):
        k[1, 1](AttrDict(x=1), out)
    assert out[0] == 0
    k[1, 1](3, out)                                    # (the kernel itself is fine)
    assert out[0] == 1


def test_the_fingerprint_of_such_a_value_is_none_not_an_error():
    from gpureplace.tracking.fingerprint import fingerprint

    class AttrDict(dict):
        __getattr__ = dict.__getitem__

    assert fingerprint(AttrDict(a=1)) is None
    assert fingerprint((1.0, AttrDict(a=1))) is None


def test_the_reflection_magics_say_the_last_compile_failed(shell):
    """After a redefinition made the kernel's code stale and compiling it again failed,
    ``%cuda_deps`` and ``%cuda_ptx`` said "has not been compiled yet"; they say it failed."""
    from IPython.utils.capture import capture_output
    assert _cell(shell, CELL).error_in_exec is None
    assert _cell(shell, "K = AttrDict(scale=5.0)").error_in_exec is None
    assert isinstance(_cell(shell, "reads_k[1, 4](out)").error_in_exec, CompileError)
    for magic in ("%cuda_deps reads_k", "%cuda_ptx reads_k"):
        with capture_output() as shown:
            assert shell.run_cell(magic).error_in_exec is None
        assert "reads_k has no current compiled code: its last compile failed (in reads_k " \
            in shown.stdout, shown.stdout
        assert "K is a __main__.AttrDict object" in shown.stdout
    assert _cell(shell, "K = 2.0\nreads_k[1, 4](out)").error_in_exec is None
    with capture_output() as shown:
        shell.run_cell("%cuda_deps reads_k")
    assert "last compile failed" not in shown.stdout and "K" in shown.stdout
