"""The simulator computes each operation in the type Numba gives it (the compiled code's): mixed
integer / float operands, float16 with other numbers, divmod, helpers written as lambdas, and
variables whose type Numba unifies across assignments.  Expected values come from Numba's njit
(the same typing rules on the CPU) or from the compiled kernel's own typing."""

import itertools
import operator

import numpy as np
import pytest
from numba import njit

from gpureplace import cuda, simulator
from gpureplace.compiler.target import compilers
from gpureplace.dispatch.context import current_default
from gpureplace.simulator import operators
from gpureplace.simulator.arrays import SimArray


def _ops():
    return operators.ops_for(compilers(current_default())[0])


def class_numba_type(cls):
    from gpureplace.simulator.valuetypes import class_numba_type as of
    return of(cls)


def _device(value):
    """``value`` as a kernel reads it from an array."""
    return SimArray(np.array([value]), None)[0]


def test_uint16_plus_float32_computes_in_float64():
    @cuda.jit
    def k(a, b, out):
        out[0] = a[0] + b[0]
        out[1] = a[0] - b[0]
        out[2] = a[0] * b[0]
        out[3] = b[0] / a[0]
        t = a[0]
        t += b[0]
        out[4] = t

    def ref(a, b):
        t = a
        t += b
        return np.array([a + b, a - b, a * b, b / a, t])
    a, b = np.array([5], np.uint16), np.array([1e-5], np.float32)
    out = np.zeros(5)
    simulator.run(k, 1, 1, a, b, out)
    want = njit(ref)(a[0], b[0])
    assert want.dtype == np.float64
    np.testing.assert_array_equal(out, want)


def test_lambda_helper_follows_numba_rules():
    both = lambda p, q: p + q          # noqa: E731 (the helper as a lambda, on purpose)
    power = lambda p, q: p ** q        # noqa: E731

    @cuda.jit
    def k(a, b, e, out):
        out[0] = both(a[0] > 0, b[0] > 0)
        out[1] = power(b[0], e[0])

    a, b = np.array([1.0]), np.array([1.1], np.float32)
    e = np.array([3], np.uint8)
    out = np.zeros(2)
    simulator.run(k, 1, 1, a, b, e, out)
    ref = njit(lambda x, y, n: np.array([(x > 0) + (y > 0), y ** n]))(a[0], b[0], e[0])
    assert out[0] == 2
    assert out[1] == ref[1]


def test_divmod_takes_numbas_types():
    @cuda.jit
    def k(a, b, x, y, out, fout):
        q, r = divmod(a[0], b[0])
        out[0], out[1] = q, r
        fq, fr = divmod(x[0], y[0])
        fout[0], fout[1] = fq, fr

    a, b = np.array([-128], np.int8), np.array([-1], np.int8)
    x, y = np.array([1.1], np.float32), np.array([3], np.uint16)
    out, fout = np.zeros(2, np.int64), np.zeros(2)
    simulator.run(k, 1, 1, a, b, x, y, out, fout)
    ref = njit(lambda p, q: divmod(p, q))
    assert tuple(out) == ref(a[0], b[0])
    assert tuple(fout) == ref(x[0], y[0])


def _unified(a, flag, out):
    t = a[0]
    if flag:
        t = 0.5
    out[0] = t * t
    m = False
    if flag:
        m = 1
    out[1] = ~m


def _helper_returns(x, flag):
    if flag:
        return 1
    return x * x


def _calls_helper(a, flag, out):
    out[0] = _helper_returns(a[0], flag) + np.float32(1e-8)


def test_unified_variable_types():
    a = np.array([1.1], np.float32)
    got, want = np.zeros(2), np.zeros(2)
    simulator.run(cuda.jit(_unified), 1, 1, a, False, got)
    njit(_unified)(a, False, want)
    np.testing.assert_array_equal(got, want)
    assert got[1] == -1


def test_unified_return_type():
    # the helper returns int64 on one path and float32 on the other: Numba unifies to float64
    a = np.array([1.1], np.float32)
    got, want = np.zeros(1), np.zeros(1)
    simulator.run(cuda.jit(_calls_helper), 1, 1, a, False, got)
    helper = njit(_helper_returns)
    want[0] = njit(lambda x, flag: helper(x, flag) + np.float32(1e-8))(a[0], False)
    np.testing.assert_array_equal(got, want)


_DTYPES = ["bool", "int8", "int64", "uint8", "uint16", "uint64", "float32", "float64"]
_VALUES = {"b": [True, False], "f": [1e-5, -2.5], "i": [-7, 3], "u": [7, 3]}
_BINARY = {"add": "a + b", "sub": "a - b", "mul": "a * b", "truediv": "a / b",
           "floordiv": "a // b", "mod": "a % b", "pow": "a ** b"}


def _values(dt):
    return [np.array([v]).astype(dt)[0] for v in _VALUES[np.dtype(dt).kind]]


def _njit(expr, args):
    ns = {"np": np}
    exec(f"def f({args}):\n    return np.array([{expr}])\n", ns)
    return njit(ns["f"])


def _same(got, want):
    assert str(class_numba_type(type(got))) == str(want.dtype), (got, want)
    g = np.array([got]).astype(want.dtype)[0]
    assert g == want[0] or (g != g and want[0] != want[0]), (got, want)


@pytest.mark.parametrize("name", list(_BINARY))
def test_binary_operators_against_njit(name):
    ops, ref = _ops(), _njit(_BINARY[name], "a, b")
    for ta, tb in itertools.product(_DTYPES, _DTYPES):
        for a, b in itertools.product(_values(ta), _values(tb)):
            if name == "pow" and (b < 0 or b > 8):
                continue
            try:
                want = ref(a, b)
            except Exception:                  # noqa: BLE001 (untyped in Numba: not compared)
                continue
            _same(getattr(ops, name)(_device(a), _device(b)), want)


@pytest.mark.parametrize("name,expr", [("neg", "-a"), ("pos", "+a"), ("invert", "~a")])
def test_unary_operators_against_njit(name, expr):
    ops, ref = _ops(), _njit(expr, "a")
    for ta in _DTYPES:
        for a in _values(ta):
            try:
                want = ref(a)
            except Exception:                  # noqa: BLE001
                continue
            _same(getattr(ops, name)(_device(a)), want)


_FP16_PAIRS = [("float16", "int8"), ("float16", "int32"), ("uint16", "float16"),
               ("float16", "bool"), ("float16", "uint8"), ("float16", "float32"),
               ("float16", "float16")]


@pytest.mark.parametrize("ta,tb", _FP16_PAIRS)
def test_float16_with_other_numbers_as_compiled(ta, tb):
    def f(a, b):
        return a + b
    _, restype = cuda.compile_ptx(f, f"({ta}, {tb})", device=True)
    a = _device(np.array([0.1]).astype(ta)[0])
    b = _device(np.array([3]).astype(tb)[0])
    got = _ops().add(a, b)
    assert class_numba_type(type(got)) == restype
    assert got == restype.cast_python_value(float(a) + float(b)) or \
        got == np.dtype(str(restype)).type(np.dtype(str(restype)).type(a) +
                                             np.dtype(str(restype)).type(b))


def test_float16_plus_int8_in_a_kernel():
    @cuda.jit
    def k(a, b, out):
        out[0] = a[0] + b[0]

    a, b = np.array([0.1], np.float16), np.array([3], np.int8)
    out = np.zeros(1)
    simulator.run(k, 1, 1, a, b, out)
    _, restype = cuda.compile_ptx(lambda x, y: x + y, "(float16, int8)", device=True)
    dt = np.dtype(str(restype)).type
    assert out[0] == dt(dt(a[0]) + dt(b[0]))
    assert dt is np.float16                  # (numba-cuda's rule: int8 converts safely)


def test_debug_integer_division_by_zero_in_lambda_raises():
    div = lambda p, q: p // q          # noqa: E731

    @cuda.jit(debug=True)
    def k(a, b, out):
        out[0] = div(a[0], b[0])

    with pytest.raises(ZeroDivisionError):
        simulator.run(k, 1, 1, np.array([5]), np.array([0]), np.zeros(1, np.int64))


def test_operator_plans_are_cached_per_operand_types():
    ops = _ops()
    x, y = _device(np.uint16(5)), _device(np.float32(1e-5))
    first = ops.add(x, y)
    assert ops.add(x, y) == first and type(first) is np.float64
    assert operator.add(np.float64(x), np.float64(y)) == first


_NUMPY_CALLS = {
    "round": (lambda v: np.round(v) / np.float32(3.0)),
    "round1": (lambda v: np.round(v, 1) / np.float32(3.0)),
    "sinc": (lambda v: np.sinc(v) / np.float32(3.0)),
}


@pytest.mark.parametrize("name", sorted(_NUMPY_CALLS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_numpy_functions_on_numbers_give_numbas_types(name, dtype):
    """np.round of a float32 is a float64 in Numba (as compiled): the simulator computed it in
    NumPy's float32, and the division after it in float32."""
    fn = _NUMPY_CALLS[name]
    try:
        want = njit(fn)(dtype(2.25))
    except Exception:                                   # (Numba types no such call)
        pytest.skip(f"Numba has no np.{name} for {dtype.__name__}")

    @cuda.jit
    def k(x, out):
        out[0] = fn(x[0])

    x = np.full(1, 2.25, dtype)
    out = np.zeros(1)
    k[1, 1](x, out)
    assert out[0] == want, (name, dtype, out[0], want)


SIGN_SOURCE = '''
from gpureplace import cuda

@cuda.jit
def sign_of(x, out):
    out[0] = (x[0] > 0) - (x[0] < 0)
    out[1] = -(x[0] < 1.0)
'''


def test_a_copy_without_source_does_not_stand_for_the_files_function(tmp_path, monkeypatch):
    """Code objects compare equal across files: the simulator's rewritten code (Numba's types)
    was cached by code object, so a copy exec'd from a string (no source to rewrite) ran first
    made the file's function run with NumPy's rules too (-(a < b) refused on a NumPy bool)."""
    import importlib
    import warnings
    (tmp_path / "sign_module.py").write_text(SIGN_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    ns = {}
    exec(compile(SIGN_SOURCE, "<no file>", "exec"), ns)
    x = np.array([-2.0])
    out = np.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ns["sign_of"][1, 1](x, out)            # (NumPy's rules: may refuse, see README)
        except Exception:                          # noqa: BLE001
            pass
    module = importlib.import_module("sign_module")
    out = np.zeros(2)
    module.sign_of[1, 1](x, out)
    assert list(out) == [-1.0, -1.0]
