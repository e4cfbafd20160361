"""A newcomer's first mistakes in the kernel language, said with what to write instead: Numba
refuses each at the right line, but in words that give no hint (``cuda.grid()`` "has no
implementation for argument types ()", "Unsupported array index type cuda.threadIdx", "Modified
builtin 'range'", "tuple index out of range", "failed to unpack int64", a kernel that "returns
Literal[int](1)"), and a list built in a kernel was refused at the line that used it, not the
one that built it.  Nothing here launches a kernel: each compiles only."""

import types

import pytest

from gpureplace import CompileError, cuda
from gpureplace.errors import KernelReturnsValue
from conftest import line_of

SIG = "void(float32[:])"
SIG2 = "void(float32[:, :])"

#: Numba's own words, which none of these messages may show any more.
NUMBA_WORDS = ("Literal[", "has no implementation", "Unsupported array index", "Unknown attribute",
               "Modified builtin", "failed to unpack", "wrong tuple length", "$")


def _refused(func, marker, sig=SIG):
    """The CompileError of compiling ``func`` for ``sig``: at the line holding ``marker``, in
    one line, with none of Numba's words."""
    with pytest.raises(CompileError) as info:
        cuda.jit(func).compile(sig)
    err = info.value
    assert err.lineno == line_of(func, marker), str(err)
    assert f"line {err.lineno}" in str(err)
    assert len(str(err).splitlines()) == 1, str(err)
    for word in NUMBA_WORDS:
        assert word not in err.reason, (word, str(err))
    return err


# =============================================================================================
# 1. cuda.grid() / cuda.gridsize() without the number of dimensions


def grid_without_ndim(x):
    x[cuda.grid()] = 1                               # <- grid()


def gridsize_without_ndim(x):
    n = cuda.gridsize()                              # <- gridsize()
    x[0] = n


def grid_with_two_arguments(x):
    x[cuda.grid(1, 2)] = 1                           # <- grid(1, 2)


def test_grid_without_its_number_of_dimensions_says_what_it_takes():
    # (was: "cuda.grid() has no implementation for argument types ()")
    err = _refused(grid_without_ndim, "<- grid()")
    assert err.reason.startswith("cuda.grid(ndim) takes the number of dimensions of the grid, "
                                 "a constant 1, 2 or 3 (it was given no argument)")
    assert "i = cuda.grid(1)" in err.reason and "i, j = cuda.grid(2)" in err.reason


def test_gridsize_without_its_number_of_dimensions_says_what_it_takes():
    err = _refused(gridsize_without_ndim, "<- gridsize()")
    assert err.reason.startswith("cuda.gridsize(ndim) takes the number of dimensions of the "
                                 "grid, a constant 1, 2 or 3 (it was given no argument)")
    assert "n = cuda.gridsize(1)" in err.reason


def test_grid_with_two_arguments_names_them_as_written():
    err = _refused(grid_with_two_arguments, "<- grid(1, 2)")
    assert "a constant 1, 2 or 3 (it was given 1, 2)" in err.reason


def test_a_grid_ndim_out_of_range_keeps_its_own_words():
    def grid_of_four(x):
        x[0] = cuda.grid(4)

    with pytest.raises(CompileError, match=r"ndim must be 1, 2 or 3, got 4"):
        cuda.jit(grid_of_four).compile(SIG)


# =============================================================================================
# 2. cuda.threadIdx (blockIdx, blockDim, gridDim) where a number is needed


def indexes_with_threadidx(x):
    x[cuda.threadIdx] = 1                            # <- threadIdx]


def multiplies_blockdim(x):
    x[0] = cuda.blockDim * 2                         # <- blockDim *


def ranges_over_griddim(x):
    for i in range(cuda.gridDim):                    # <- range(cuda.gridDim)
        x[i] = 1


def unpacks_blockidx(x):
    i, j, k = cuda.blockIdx                          # <- unpack
    x[i] = j + k


@pytest.mark.parametrize("func, marker, register, where", [
    (indexes_with_threadidx, "<- threadIdx]", "threadIdx", "block"),
    (multiplies_blockdim, "<- blockDim *", "blockDim", "block"),
    (ranges_over_griddim, "<- range(cuda.gridDim)", "gridDim", "grid"),
])
def test_a_register_used_as_a_number_says_to_read_x(func, marker, register, where):
    # (was: "Unsupported array index type cuda.threadIdx in [cuda.threadIdx]", "operator * is
    # not defined for cuda.blockDim and Literal[int](2)", "range() has no implementation ...")
    err = _refused(func, marker)
    assert err.reason == (f"cuda.{register} is used here as a number, but it holds three, one "
                          f"per dimension: write cuda.{register}.x (or .y, .z in a 2-D or 3-D "
                          f"{where})")


def test_a_register_unpacked_says_to_read_its_numbers_one_by_one():
    err = _refused(unpacks_blockidx, "<- unpack")
    assert err.reason.startswith("cuda.blockIdx cannot be unpacked")
    assert "cuda.blockIdx.x, cuda.blockIdx.y and cuda.blockIdx.z" in err.reason


# =============================================================================================
# 3. an axis misspelt: did you mean x?


def misspells_blockdim_x(x):
    x[cuda.blockDim.xx] = 1                          # <- xx


def capitalises_threadidx_x(x):
    x[cuda.threadIdx.X] = 1                          # <- X


@pytest.mark.parametrize("func, marker, register, attr", [
    (misspells_blockdim_x, "<- xx", "blockDim", "xx"),
    (capitalises_threadidx_x, "<- X", "threadIdx", "X"),
])
def test_a_misspelt_axis_gets_a_did_you_mean(func, marker, register, attr):
    # (was: "Unknown attribute 'xx' of type cuda.blockDim"; cuda.threadidx and cuda.atomic.ad
    # already had their "did you mean")
    err = _refused(func, marker)
    assert err.reason == (f"cuda.{register} has no attribute {attr!r} (did you mean x?): its "
                          f"attributes are x, y and z (cuda.{register}.x)")


# =============================================================================================
# 4. str.format(): string formatting, said as f-strings and % say it


def formats_a_string(x):
    print('i={}'.format(1))                          # <- format


def formats_with_percent(x):
    print('i=%d' % 1)                                # <- percent


def test_str_format_says_string_formatting_does_not_exist_in_device_code():
    # (was: "Unknown attribute 'format' of type Literal[str](i={})")
    err = _refused(formats_a_string, "<- format")
    assert err.reason.startswith("formatting a string with str.format() is not supported in "
                                 "device code (a string would need the heap)")
    assert 'print takes the values as arguments (print("bad", i))' in err.reason
    # the same words as % (and f-strings: "a string would need the heap")
    percent = _refused(formats_with_percent, "<- percent")
    assert percent.reason == err.reason.replace("str.format()", "%")


# =============================================================================================
# 5. a builtin's name rebound at module level


def loops_over_range(x):
    for j in range(3):                               # <- range(3)
        x[j] = 1


def test_range_rebound_in_the_module_says_what_it_is_bound_to():
    # (was: "Modified builtin 'range'"); the same code, in a module whose global range is 5
    rebound = types.FunctionType(loops_over_range.__code__,
                                 dict(loops_over_range.__globals__, range=5),
                                 "loops_over_range")
    err = _refused(rebound, "<- range(3)")
    assert err.reason.startswith("the global name 'range' is bound to 5 in the module of "
                                 "loops_over_range (")
    assert "so range() here is not Python's builtin range(): rename that global" in err.reason


# =============================================================================================
# 6. a kernel that returns a value: what it returns, in the user's terms


def returns_one(x):
    x[0] = 1
    return 1                                         # <- return 1


def returns_a_pair(x):
    return (1, 2)                                    # <- return (1, 2)


@pytest.mark.parametrize("func, marker, said", [
    (returns_one, "<- return 1", "it returns an int (1)"),
    (returns_a_pair, "<- return (1, 2)", "it returns a tuple of 2 values (1, 2)"),
])
def test_a_kernel_returning_a_constant_says_it_in_python_terms(func, marker, said):
    # (was: "it returns Literal[int](1)")
    err = _refused(func, marker)
    assert isinstance(err, KernelReturnsValue)
    assert err.reason.startswith(f"a kernel must have void return type ({said}); kernels "
                                 f"return nothing: write results into an array argument")


# =============================================================================================
# 7. an index past the end of a shape (or of a tuple)


def reads_shape_1_of_a_vector(x):
    x[0] = x.shape[1]                                # <- shape[1]


def reads_strides_2_of_a_matrix(x):
    x[0, 0] = x.strides[2]                           # <- strides[2]


def reads_past_a_tuple(x):
    t = (1.0, 2.0)
    x[0] = t[5]                                      # <- t[5]


def test_shape_index_past_the_dimensions_says_how_many_there_are():
    # (was: "tuple index out of range")
    err = _refused(reads_shape_1_of_a_vector, "<- shape[1]")
    assert err.reason == ("x.shape[1] is out of range: x has 1 dimension, so x.shape has 1 "
                          "entry: x.shape[0]")
    err = _refused(reads_strides_2_of_a_matrix, "<- strides[2]", SIG2)
    assert err.reason == ("x.strides[2] is out of range: x has 2 dimensions, so x.strides has 2 "
                          "entries: x.strides[0] and x.strides[1]")


def test_tuple_index_past_the_end_says_how_many_values_it_has():
    err = _refused(reads_past_a_tuple, "<- t[5]")
    assert err.reason == "t[5] is out of range: t is a tuple of 2 values: t[0] and t[1]"


# =============================================================================================
# 8. cuda.grid(1) unpacked into two names (and grid(2) into three)


def unpacks_grid_1(x):
    i, j = cuda.grid(1)                              # <- grid(1)
    x[i] = j


def unpacks_grid_2_into_three(x):
    i, j, k = cuda.grid(2)                           # <- grid(2)
    x[i, j] = k


def unpacks_a_number(x):
    i, j = x[0]                                      # <- x[0]
    x[1] = i + j


def test_grid_1_unpacked_says_it_returns_one_int():
    # (was: "failed to unpack int64")
    err = _refused(unpacks_grid_1, "<- grid(1)")
    assert err.reason == ("cuda.grid(1) returns one int, which cannot be unpacked into 2 names: "
                          "write i = cuda.grid(1); cuda.grid(2) returns a tuple of two (i, j = "
                          "cuda.grid(2))")


def test_grid_2_unpacked_into_three_names_says_it_returns_two():
    # (was: "('wrong tuple length for $32call.4: ', 'expected 3, got 2')")
    err = _refused(unpacks_grid_2_into_three, "<- grid(2)", SIG2)
    assert err.reason.startswith("cuda.grid(2) returns a tuple of two ints, which cannot be "
                                 "unpacked into 3 names: write i, j = cuda.grid(2); "
                                 "cuda.grid(3) returns a tuple of three")


def test_a_number_unpacked_says_it_is_a_single_value():
    err = _refused(unpacks_a_number, "<- x[0]")
    assert err.reason == "cannot unpack float32, a single value, into 2 names"


# =============================================================================================
# 9. a list (dict, set) built in a kernel: refused where it is built, not where it is used


def builds_a_list_of_weights(x):
    weights = [0.25, 0.5, 0.25]                      # <- built
    i = cuda.grid(1)
    if 0 < i < x.size - 1:
        acc = 0.0
        for j in range(3):
            acc += weights[j] * x[i + j - 1]         # <- used
        x[i] = acc


def builds_a_dict(x):
    d = {1: 2.0}                                     # <- built
    x[0] = d[1]                                      # <- used


def builds_a_set(x):
    s = {1, 2}                                       # <- built
    x[0] = len(s)                                    # <- used


def appends_to_a_list(x):
    t = []                                           # <- built
    t.append(1.0)                                    # <- used
    x[0] = t[0]


def changes_a_list(x):
    w = [1.0, 2.0]                                   # <- built
    w[0] = 3.0                                       # <- used
    x[0] = w[0]


def test_a_list_is_refused_where_it_is_built_with_the_tuple_to_write():
    # (was: at the line of weights[j])
    err = _refused(builds_a_list_of_weights, "<- built")
    used = line_of(builds_a_list_of_weights, "<- used")
    assert err.reason == (f"the list weights is built here (and used on line {used}): lists are "
                          f"not supported in device code (they need a heap); use a tuple, an "
                          f"array argument, or cuda.local.array / cuda.shared.array (as a "
                          f"tuple: weights = (0.25, 0.5, 0.25))")


@pytest.mark.parametrize("func, kind", [
    (builds_a_dict, "dict"), (builds_a_set, "set"), (appends_to_a_list, "list"),
    (changes_a_list, "list"),
])
def test_dicts_sets_and_changed_lists_are_refused_where_they_are_built(func, kind):
    err = _refused(func, "<- built")
    name = {"dict": "d", "set": "s"}.get(kind, "t" if func is appends_to_a_list else "w")
    used = line_of(func, "<- used")
    assert err.reason.startswith(f"the {kind} {name} is built here (and used on line {used}): "
                                 f"{kind}s are not supported in device code (they need a heap)")
    assert "as a tuple" not in err.reason          # (a dict, a set, a list it changes)


def test_a_list_built_on_the_line_that_uses_it_stays_there():
    def sums_a_list(x):
        x[0] = len([x[0], x[1]])                     # <- len(

    err = _refused(sums_a_list, "<- len(")
    assert err.reason.startswith("lists are not supported in device code")
