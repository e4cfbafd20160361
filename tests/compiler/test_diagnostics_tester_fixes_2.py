"""Refusals found by testers, said in the user's terms at the user's line: a debugger's entry
(pdb.set_trace(), breakpoint()) on the PTX path, linear algebra (np.dot, @, np.linalg), array sort,
messages that named the wrong reason, the atomics' argument checks, and random seeds that do not
fit in 64 bits.  Nothing here launches a kernel: each compiles (or makes states) only."""

import functools
import importlib.util
import inspect
import operator
import pdb
import sys

import numpy as np
import pytest

from gpureplace import CompileError, cuda
from gpureplace.compiler import diagnostics
from gpureplace.cuda.random import create_xoroshiro128p_states

#: Words of Numba's (or the library's) own messages that must never reach the user.
INTERNALS = ("keyword-only", "make them ordinary parameters", "scipy", "ImportError",
             "return_value", "defined at None", "ufunc_pow", "len(args)", "'out'",
             "site-packages")


def _line_of(func, marker):
    """Line (in its file) of the first source line of ``func`` containing ``marker``."""
    lines, first = inspect.getsourcelines(func)
    return first + next(k for k, line in enumerate(lines) if marker in line)


def _refused(func, sig, marker):
    """The CompileError of compiling ``func`` for ``sig``, checked to name ``func`` and the line
    holding ``marker``, in one line with none of Numba's internals."""
    with pytest.raises(CompileError) as info:
        cuda.jit(func).compile(sig)
    err = info.value
    assert err.function == func.__qualname__, str(err)
    assert err.filename == __file__, str(err)
    assert err.lineno == _line_of(func, marker), str(err)
    assert f"line {err.lineno}" in str(err)
    for word in INTERNALS:
        assert word not in err.reason, (word, str(err))
    return err


# =============================================================================================
# 1. pdb.set_trace() / breakpoint(): the simulator stops there; compiled code cannot


def stops_in_pdb(a):
    i = cuda.grid(1)
    if i == 1:
        pdb.set_trace()                          # <- pdb
    a[i] = a[i] * 2


def stops_at_breakpoint(a):
    i = cuda.grid(1)
    if i == 1:
        breakpoint()                             # <- breakpoint
    a[i] = a[i] * 2


def _helper_with_pdb(x):
    pdb.set_trace()                              # <- helper pdb
    return x


def calls_a_helper_with_pdb(a):
    a[0] = _helper_with_pdb(a[0])


@pytest.mark.parametrize("func, marker, shown", [
    (stops_in_pdb, "<- pdb", "pdb.set_trace()"),
    (stops_at_breakpoint, "<- breakpoint", "breakpoint()"),
])
def test_debugger_entry_on_the_ptx_path_says_it_works_in_the_simulator_only(func, marker, shown):
    # (was: "set_trace has keyword-only parameters (header) ...: make them ordinary parameters",
    # which told the user to edit pdb)
    err = _refused(func, "void(float32[:])", marker)
    assert err.reason.startswith(shown), str(err)
    assert "only in the CPU simulator" in err.reason
    assert "GPUREPLACE_SIM_COMPILE=0" in err.reason
    # the mark a simulated launch's compile recognises (it runs the kernel as Python, where
    # pdb stops), kept on the error the user gets (a TypingError too, as numba-cuda's)
    assert err.simulator_only is True


def test_debugger_entry_in_a_helper_is_named_at_the_helpers_line():
    with pytest.raises(CompileError) as info:
        cuda.jit(calls_a_helper_with_pdb).compile("void(float32[:])")
    err = info.value
    assert err.function == "_helper_with_pdb"
    assert err.lineno == _line_of(_helper_with_pdb, "<- helper pdb")
    assert "pdb.set_trace()" in err.reason and "only in the CPU simulator" in err.reason
    assert err.chain == ("calls_a_helper_with_pdb", "_helper_with_pdb")
    assert err.simulator_only is True


def _unpatched_pdb():
    """The pdb module as Python defines it: under pytest, pdb.set_trace is pytest's own
    debugger's method (which device code reads as an untyped attribute), not pdb's function
    with its keyword-only parameter, which a compile outside pytest meets."""
    spec = importlib.util.find_spec("pdb")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pdbs_own_set_trace_is_a_debugger_entry_not_a_signature_to_fix():
    plain = _unpatched_pdb()
    assert inspect.isfunction(plain.set_trace)

    def stops(a):
        plain.set_trace()                        # <- plain pdb
    err = _refused(stops, "void(float32[:])", "<- plain pdb")
    assert err.reason.startswith("pdb.set_trace() stops in the debugger only in the CPU "
                                 "simulator"), str(err)
    assert err.simulator_only is True


def test_a_library_function_with_keyword_only_parameters_is_host_code():
    import json

    def dumps(a):
        json.dumps(a[0])                         # <- dumps
    err = _refused(dumps, "void(float32[:])", "<- dumps")
    assert err.reason.startswith("dumps() is a host function (from json) with no device "
                                 "implementation"), str(err)


def test_other_refusals_are_not_marked_for_the_simulator():
    def opens_a_file(a):
        open("x")                                # <- open
    err = _refused(opens_a_file, "void(float32[:])", "<- open")
    assert "host function" in err.reason
    assert not getattr(err, "simulator_only", False)


# =============================================================================================
# 2. Linear algebra: no device implementation (not SciPy's ImportError from Numba's lowering)


def dot_of_vectors(a, out):
    out[0] = np.dot(a, a)                        # <- dot


def matmul_of_vectors(a, out):
    out[0] = a @ a                               # <- matmul


def inverse(m, out):
    out[0] = np.linalg.inv(m)[0, 0]              # <- inv


def _dot_helper(a):
    return np.dot(a, a)                          # <- helper dot


def calls_a_dot_helper(a, out):
    out[0] = _dot_helper(a)


# (where SciPy is installed, Numba's BLAS check passes and the call fails further on)
no_scipy = pytest.mark.skipif(importlib.util.find_spec("scipy") is not None,
                              reason="SciPy installed: Numba's BLAS check passes")


@no_scipy
@pytest.mark.parametrize("func, sig, marker, shown", [
    (dot_of_vectors, "void(float64[:], float64[:])", "<- dot", "np.dot()"),
    (matmul_of_vectors, "void(float64[:], float64[:])", "<- matmul", "the @ operator"),
    (inverse, "void(float64[:, :], float64[:])", "<- inv", "np.linalg.inv()"),
])
def test_linear_algebra_has_no_device_implementation(func, sig, marker, shown):
    err = _refused(func, sig, marker)
    assert err.reason.startswith(shown), str(err)
    assert "linear algebra (BLAS/LAPACK) has no device implementation" in err.reason
    assert "for i in range(" in err.reason               # (write the loop)


@no_scipy
def test_linear_algebra_in_a_helper_is_named_at_the_helpers_line():
    with pytest.raises(CompileError) as info:
        cuda.jit(calls_a_dot_helper).compile("void(float64[:], float64[:])")
    err = info.value
    assert err.function == "_dot_helper"
    assert err.lineno == _line_of(_dot_helper, "<- helper dot")
    assert "np.dot(): linear algebra" in err.reason


# =============================================================================================
# 3. a.sort(): its line (not the def line), and sorting (not "lists")


def sorts_its_argument(a):
    i = cuda.grid(1)
    if i > 0:
        return
    a.sort()                                     # <- sort


def test_array_sort_is_named_at_its_line():
    err = _refused(sorts_its_argument, "void(float64[:])", "<- sort")
    assert err.reason.startswith("a.sort() has no device implementation"), str(err)
    assert "sort with a loop" in err.reason
    assert "use a tuple" not in err.reason           # (the advice for the user's own lists)


# =============================================================================================
# 4. Messages that named the line but not the reason


def dot_of_scalars(a):
    a[0] = np.dot(a[0], a[1])                    # <- dot


def reduce_of_a_tuple(a):
    a[0] = functools.reduce(operator.add, (1, 2, 3))   # <- reduce


def hash_of_an_int(a):
    a[0] = hash(3)                               # <- hash


def getattr_by_name(a):
    a[0] = getattr(a, "size")                    # <- getattr


def modular_pow(a):
    a[0] = pow(3, 4, 5)                          # <- pow


@pytest.mark.parametrize("func, marker, starts", [
    # the overload for np.dot(a, b, out) failing to bind two arguments is not the reason
    (dot_of_scalars, "<- dot", "np.dot() has no implementation for argument types (float64, "
                               "float64)"),
    # an assertion inside Numba's parfors typing of reduce is not either
    (reduce_of_a_tuple, "<- reduce", "functools.reduce() has no implementation for argument "
                                     "types"),
    # the strings and allocation are inside Numba's implementations, not the user's line
    (hash_of_an_int, "<- hash", "hash() has no device implementation"),
    (getattr_by_name, "<- getattr", "getattr() has no device implementation"),
    # the builtin the user called, not gpureplace's intrinsic for it
    (modular_pow, "<- pow", "pow() has no implementation for argument types"),
])
def test_reasons_name_what_the_line_calls(func, marker, starts):
    err = _refused(func, "void(float64[:])", marker)
    assert err.reason.startswith(starts), str(err)
    assert "strings are not supported" not in err.reason
    assert "this line needs Numba's runtime" not in err.reason


def length_of_a_string(a):
    a[0] = len(str(a[0]))                        # <- str


def test_the_builtin_that_builds_the_string_is_named_not_the_first_one():
    # (the heap refusal inside Numba's str() is said of str, not as len() having none)
    err = _refused(length_of_a_string, "void(float64[:])", "<- str")
    assert err.reason.startswith("str() builds a string"), str(err)


def test_getattr_suggests_the_attribute_itself():
    err = _refused(getattr_by_name, "void(float64[:])", "<- getattr")
    assert "a.size" in err.reason


def _returns_a_pair(x):
    return (x, x)                                # <- return


def test_declared_return_type_mismatch_names_both_types():
    with pytest.raises(CompileError) as info:
        cuda.jit("float32(float32)", device=True)(_returns_a_pair)
    err = info.value
    assert err.lineno == _line_of(_returns_a_pair, "<- return"), str(err)
    assert err.reason.startswith("_returns_a_pair returns UniTuple(float32 x 2), which cannot "
                                 "convert to float32"), str(err)
    assert "declares" in err.reason
    for word in ("$", "defined at None", "No conversion"):
        assert word not in err.reason


# =============================================================================================
# 5. Atomics: keyword arguments, and a float index of a 1-D array as numba-cuda converts it


def atomic_add_by_keyword(a):
    cuda.atomic.add(a, 0, val=1)                 # <- add


def atomic_cas_by_keyword(a):
    cuda.atomic.cas(a, 0, 1, val=2)              # <- cas


def atomic_compare_and_swap_by_keyword(a):
    cuda.atomic.compare_and_swap(a, 1, val=2)    # <- compare_and_swap


@pytest.mark.parametrize("func, marker, params", [
    (atomic_add_by_keyword, "<- add", "ary, idx, val"),
    (atomic_cas_by_keyword, "<- cas", "ary, idx, old, val"),
    (atomic_compare_and_swap_by_keyword, "<- compare_and_swap", "ary, old, val"),
])
def test_atomic_keyword_arguments_are_refused_as_keywords(func, marker, params):
    # (was "takes 3 arguments (ary, idx, val), got 3")
    err = _refused(func, "void(int32[:])", marker)
    assert "keyword arguments are not accepted (val=)" in err.reason, str(err)
    assert f"pass {params} by position" in err.reason
    assert "got" not in err.reason


def test_atomic_float_index_of_a_1d_array_converts_as_numba_cuda():
    def histogram(h, x):
        cuda.atomic.add(h, x[0] // 0.5, 1)       # a bin computed with //: a float
    ptx, _ = cuda.compile_ptx(histogram, "void(int32[:], float64[:])")
    assert "cvt.rzi.s64.f64" in ptx              # truncated toward zero, as numba-cuda's intp
    assert "atom.global.add.u32" in ptx


def test_atomic_one_float_index_of_a_2d_array_is_still_refused():
    def two_d(h, x):
        cuda.atomic.add(h, x[0], 1)              # <- 2d
    err = _refused(two_d, "void(int32[:, :], float64[:])", "<- 2d")
    assert "a 2-D array needs a tuple of 2 integer indices" in err.reason


# =============================================================================================
# 6. Random seeds outside 64 bits are refused, not wrapped


@pytest.mark.parametrize("seed", [2**64 + 1, 2**64, -2**63 - 1, 10**30, float("inf")])
def test_seed_outside_64_bits_is_refused(seed):
    with pytest.raises(ValueError, match=r"seed must fit in 64 bits"):
        create_xoroshiro128p_states(2, seed)


def test_subsequence_start_outside_64_bits_is_refused():
    with pytest.raises(ValueError, match=r"subsequence_start must fit in 64 bits"):
        create_xoroshiro128p_states(2, 1, subsequence_start=2**64)


def test_negative_seeds_wrap_as_numba_cudas_uint64():
    def states(seed):
        return np.asarray(create_xoroshiro128p_states(3, seed).copy_to_host())
    assert np.array_equal(states(-1), states(2**64 - 1))
    assert np.array_equal(states(-2**63), states(2**63))
    assert np.array_equal(states(np.uint64(2**64 - 1)), states(-1))
    assert not np.array_equal(states(1), states(2))


def test_debugger_entries_are_recognised():
    import builtins
    assert diagnostics.debugger_entry(pdb.set_trace) == "pdb.set_trace()"
    assert diagnostics.debugger_entry(builtins.breakpoint) == "breakpoint()"
    assert diagnostics.debugger_entry(sys.breakpointhook) == "sys.breakpointhook()"
    assert diagnostics.debugger_entry(len) is None
    assert diagnostics.debugger_entry(np.dot) is None
