"""The simulator against the compiled code, where a tester found them apart:

- ``isinstance(x, float)`` / ``int`` / ``bool`` / ``np.int32`` in device code: Numba's typing
  answers whether x has exactly that Numba type (``as_numba_type``: ``float`` a float64, ``int``
  an int64), checked here against Numba's own CPU ``njit`` of the same function;
- a global NumPy record (``REC[0]``, an ``np.void``) read by field, ``R.x`` and ``R["y"]``: the
  compiled code folds its fields in as constants;
- the arguments of an exception a ``debug=True`` kernel raises: numba-cuda raises it with the
  raise statement's constants, Python's ``3`` and ``2.5`` (numba_cuda/dispatcher.py,
  ``exccls(*exc_args)`` from the call helper's table of constants);
- a slice of step 0: Numba's compiled slicing raises ``ValueError("slice step cannot be
  zero")`` (numba/cpython/slicing.py), a device exception that stops the thread;
- ``cuda.bf16.hfma`` of signed zeros: ``fma.rn.bf16`` gives IEEE's exact zero (-0.0 where the
  product and the addend are both -0.0); ``hfma_sat`` clamps with ``max.bf16(x, +0.0)``, where
  "if values of both inputs are 0.0, then +0.0 > -0.0" (PTX ISA, half precision ``max``), and
  ``hfma_relu`` with ``setp.lt`` / ``selp`` (-0.0 is not below 0.0, so it stays);
- a global namedtuple indexed or unpacked (``T[0]``, ``a, b = T``): the simulator took it for
  an object of a user's extension type (``ExtensionValue``), which has no items.
"""

import inspect
import math
import warnings

import ml_dtypes
import numba
import numpy as np
import pytest

from conftest import line_of
from gpureplace import CompileError, cuda
from gpureplace.simulator.raises import KernelRaisedWarning

BF = ml_dtypes.bfloat16

REC = np.zeros(2, dtype=[("x", "f8"), ("y", "f8"), ("n", "i4")])
REC[0] = (5.0, 6.0, 7)
REC[1] = (1.5, 2.5, 3)
R = REC[0]                 # a record global: np.void, a view of REC's first element
T = (REC[0], (REC[1],))     # records in a global tuple, one nested


@pytest.fixture(autouse=True)
def simulator(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")


# ---------------------------------------------------------------------------------------------
# isinstance with Python's and NumPy's classes


def _isinstance_checks(x, out):
    out[0] = isinstance(x, float)
    out[1] = isinstance(x, int)
    out[2] = isinstance(x, (int, float))
    out[3] = isinstance(x, bool)
    out[4] = isinstance(x, complex)
    out[5] = isinstance(x, np.int32)
    out[6] = isinstance(x, np.float64)
    out[7] = isinstance(x == x, bool)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.bool_,
                                   np.complex128])
def test_isinstance_of_builtin_classes_answers_as_numba(dtype):
    def kernel(a, out):
        _isinstance_checks(a[0], out)

    a = np.ones(1, dtype)
    out = np.full(8, -1, np.int64)
    cuda.jit(kernel)[1, 1](a, out)
    expected = np.full(8, -1, np.int64)
    numba.njit(_isinstance_checks)(a[0], expected)       # Numba's own typing of isinstance
    assert out.tolist() == expected.tolist()


def test_isinstance_float_and_int_of_their_own_types_is_true():
    @cuda.jit
    def k(a, out):
        out[0] = 1 if isinstance(a[0], float) else 2
        out[1] = 1 if isinstance(out.size, int) else 2
        out[2] = 1 if isinstance(a[0], (int, float)) else 2
        out[3] = 1 if isinstance(out[0], np.int64) else 2

    out = np.zeros(4, np.int64)
    k[1, 1](np.zeros(1), out)
    assert out.tolist() == [1, 1, 1, 1]


# ---------------------------------------------------------------------------------------------
# a global record


def test_global_record_fields_read_by_attribute_and_item():
    @cuda.jit
    def k(out):
        out[0] = R.x + R["y"]
        out[1] = R.n * 2

    out = np.zeros(2)
    k[1, 1](out)
    assert out.tolist() == [REC[0]["x"] + REC[0]["y"], REC[0]["n"] * 2]


def test_global_record_write_is_refused_by_field_and_line():
    @cuda.jit
    def k(out):
        R.x = 1.0
        out[0] = R.x

    with pytest.raises(CompileError) as info:         # (refused by the compile, as on a GPU)
        k[1, 1](np.zeros(1))
    msg = str(info.value)
    assert "global record" in msg and "'x'" in msg
    assert info.value.lineno == line_of(k.py_func, "R.x = 1.0")
    assert REC[0]["x"] == 5.0                 # the host's record is untouched


def test_records_in_a_global_tuple_are_read_by_field_and_refuse_writes():
    @cuda.jit
    def k(out):
        out[0] = T[0].x + T[1][0]["y"]

    @cuda.jit
    def w(out):
        T[0].x = 1.0
        out[0] = T[0].x

    out = np.zeros(1)
    k[1, 1](out)
    assert out[0] == REC[0]["x"] + REC[1]["y"]
    with pytest.raises(CompileError) as info:
        w[1, 1](np.zeros(1))
    assert "global record" in str(info.value)
    assert info.value.lineno == line_of(w.py_func, "T[0].x = 1.0")
    assert REC[0]["x"] == 5.0


# ---------------------------------------------------------------------------------------------
# a debug kernel's exception carries the raise statement's constants


def test_debug_raise_arguments_are_the_python_constants():
    @cuda.jit(debug=True, opt=False)
    def k(a):
        raise ValueError("bad", 3, 2.5, (1, -2), 1 + 2j, True)

    with pytest.raises(ValueError) as info:
        k[1, 1](np.zeros(1))
    args = info.value.args[1:]
    assert args == (3, 2.5, (1, -2), 1 + 2j, True)
    assert [type(v) for v in args] == [int, float, tuple, complex, bool]
    assert [type(v) for v in args[2]] == [int, int]


def test_raise_without_debug_names_the_python_constants():
    @cuda.jit
    def k(a):
        raise ValueError("bad", 3, 2.5)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        k[1, 1](np.zeros(1))
    msgs = [str(w.message) for w in seen if issubclass(w.category, KernelRaisedWarning)]
    assert len(msgs) == 1 and "raised ValueError('bad', 3, 2.5)" in msgs[0]


# ---------------------------------------------------------------------------------------------
# a slice of step 0


def _slice_kernels():
    def view(a, step):
        if cuda.threadIdx.x == 0:
            b = a[::step]
            a[0] = b[0]
        a[1] = 7

    def store(a, step):
        if cuda.threadIdx.x == 0:
            a[::step] = 3
        a[1] = 7

    def rows(a, step):
        if cuda.threadIdx.x == 0:
            b = a[0, ::step]
            a[0, 0] = b[0]
        a[1, 1] = 7
    return {"view": (view, "b = a[::step]", (4,)), "store": (store, "a[::step] = 3", (4,)),
            "rows": (rows, "b = a[0, ::step]", (2, 2))}


@pytest.mark.parametrize("name", ["view", "store", "rows"])
def test_slice_step_zero_stops_the_thread(name):
    fn, _, shape = _slice_kernels()[name]
    a = np.zeros(shape)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        cuda.jit(fn)[1, 2](a, 0)
    msgs = [str(w.message) for w in seen if issubclass(w.category, KernelRaisedWarning)]
    assert len(msgs) == 1
    assert "1 thread raised ValueError('slice step cannot be zero')" in msgs[0]
    assert a.flat[shape[-1] + 1 if len(shape) == 2 else 1] == 7   # the other thread ran on
    assert a.flat[0] == 0


@pytest.mark.parametrize("name", ["view", "store", "rows"])
def test_slice_step_zero_debug_raises_with_position(name):
    fn, text, shape = _slice_kernels()[name]
    k = cuda.jit(debug=True, opt=False)(fn)
    with pytest.raises(ValueError) as info:
        k[1, 2](np.zeros(shape), 0)
    assert str(info.value) == (
        f"In function '{fn.__name__}', file {inspect.getsourcefile(fn)}, line "
        f"{line_of(fn, text)}, tid=[0, 0, 0] ctaid=[0, 0, 0]: slice step cannot be zero")


def test_slice_nonzero_step_still_views():
    @cuda.jit
    def k(a, step):
        b = a[::step]
        b[0] = 9

    a = np.zeros(4)
    k[1, 1](a, -1)
    assert a.tolist() == [0, 0, 0, 9]


# ---------------------------------------------------------------------------------------------
# bfloat16 fma of signed zeros


def _bits(v):
    return int(np.asarray(v, BF).view(np.uint16))


def _ieee_sum_sign_bit(x, y, z):
    """The sign of x * y + z's exact zero under IEEE's round-to-nearest (float64, where these
    are exact): set where the product and z are both -0.0."""
    return math.copysign(1.0, x * y + z) < 0


def test_bf16_hfma_keeps_ieee_sign_of_an_exact_zero():
    @cuda.jit
    def k(a, b, c, fma, sat, relu):
        i = cuda.grid(1)
        if i < a.size:
            fma[i] = cuda.bf16.hfma(a[i], b[i], c[i])
            sat[i] = cuda.bf16.hfma_sat(a[i], b[i], c[i])
            relu[i] = cuda.bf16.hfma_relu(a[i], b[i], c[i])

    cases = [(-0.0, 1.0, -0.0), (0.0, -1.0, -0.0), (-0.0, 1.0, 0.0), (0.0, 1.0, -0.0),
             (-1.0, 1.0, 1.0), (1.0, 1.0, -1.0), (-0.0, -1.0, -0.0)]
    a, b, c = (np.array([t[j] for t in cases], BF) for j in range(3))
    fma, sat, relu = (np.ones(len(cases), BF) for _ in range(3))
    k[1, 32](a, b, c, fma, sat, relu)
    for j, (x, y, z) in enumerate(cases):
        negative = _ieee_sum_sign_bit(x, y, z)
        assert float(fma[j]) == 0.0 and _bits(fma[j]) == (0x8000 if negative else 0), (x, y, z)
        # relu: setp.lt.bf16 + selp, and -0.0 < 0.0 is false: the fma's zero as it is
        assert _bits(relu[j]) == _bits(fma[j]), (x, y, z)
        # sat: max.bf16(x, +0.0) takes +0.0 over -0.0
        assert _bits(sat[j]) == 0, (x, y, z)


def test_bf16_saturating_add_of_negative_zeros_is_positive_zero():
    @cuda.jit
    def k(a, out):
        out[0] = cuda.bf16.hadd_sat(a[0], a[0])
        out[1] = cuda.bf16.hadd(a[0], a[0])

    out = np.ones(2, BF)
    k[1, 1](np.array([-0.0], BF), out)
    assert _bits(out[0]) == 0 and _bits(out[1]) == 0x8000


def test_a_global_namedtuple_is_indexed_and_unpacked_as_a_tuple():
    from collections import namedtuple
    Pair = namedtuple("Pair", "a b")
    pair = Pair(1, 2.5)

    @cuda.jit
    def use(out):
        first, second = pair
        out[0] = pair[0] / 2 + pair.b + first * second + len(pair)

    out = np.zeros(1)
    use[1, 1](out)
    assert out[0] == 0.5 + 2.5 + 2.5 + 2
