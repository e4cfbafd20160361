"""Helpers in the kernel language: undecorated functions (here and in another module,
tests/helpers_mod.py) and device functions with keyword and default arguments.

Part of the Python subset of the kernel language, as Numba supports it.  Each feature has a kernel
below; CPU tests compile it (``kernel.compile(sig)``), assemble the PTX with ptxas and check the
PTX where it proves something; GPU tests (``@pytest.mark.gpu``) launch the same kernels on CuPy
arrays and compare with NumPy or with the plain Python semantics of the same code.  Shared helpers:
tests/lang_support.py.
"""


import numpy as np
import pytest

import helpers_mod
from gpureplace import cuda
from gpureplace.errors import CompileError
from lang_support import THREADS, _body, _compile, _cp, _grid, _line_of


# =============================================================================================
# Helpers: undecorated functions (here and in another module), device functions with keyword
# and default arguments


def scale_add(v, s=2.0):
    return v * s + helpers_mod.poly(v)


@cuda.jit(device=True)
def lerp(a, b, t=0.25):
    return a + (b - a) * t


@cuda.jit(device=True)
def lerp_twice(a, b, t):
    return lerp(lerp(a, b, t=t), b)


@cuda.jit
def helper_calls(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        out[0, i] = scale_add(x[i])
        out[1, i] = scale_add(x[i], s=0.5)
        out[2, i] = lerp(x[i], y[i])
        out[3, i] = lerp(a=x[i], b=y[i], t=0.75)
        out[4, i] = lerp(x[i], t=0.5, b=y[i])
        out[5, i] = lerp_twice(x[i], y[i], 0.5)
        out[6, i] = helpers_mod.clamp(x[i])
        out[7, i] = helpers_mod.clamp(x[i], hi=0.5)
        out[8, i] = helpers_mod.norm2(x[i], y[i])


def _helper_reference(x, y):
    lp = lerp.py_func
    rows = []
    for a, b in zip(x.tolist(), y.tolist()):
        rows.append([scale_add(a), scale_add(a, s=0.5), lp(a, b), lp(a=a, b=b, t=0.75),
                     lp(a, t=0.5, b=b), lp(lp(a, b, t=0.5), b),
                     helpers_mod.clamp(a), helpers_mod.clamp(a, hi=0.5),
                     helpers_mod.norm2(a, b)])
    return np.array(rows).T


def test_helpers_compile_and_are_device_functions():
    spec = _compile(helper_calls, "void(float64[::1], float64[::1], float64[:, ::1])")
    names = {cf.pyfunc.__qualname__ for cf in spec.compiled.closure()}
    assert {"scale_add", "poly", "_square", "lerp", "lerp_twice", "clamp",
            "norm2"} <= names
    modules = {cf.pyfunc.__module__ for cf in spec.compiled.closure()}
    assert "helpers_mod" in modules
    assert ".f32" not in _body(spec.ptx)


def test_helper_float32_keeps_float32():
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = lerp(x[i], np.float32(1.0), np.float32(0.5)) + helpers_mod.clamp(
                x[i], np.float32(0.0), np.float32(1.0))

    spec = _compile(k, "void(float32[::1], float32[::1])")
    assert ".f64" not in _body(spec.ptx)


@pytest.mark.gpu
def test_helpers_gpu():
    cp = _cp()
    rng = np.random.default_rng(12)
    x = rng.uniform(-1, 2, 300)
    y = rng.uniform(-1, 2, 300)
    out = cp.zeros((9, 300))
    helper_calls[_grid(300), THREADS](cp.asarray(x), cp.asarray(y), out)
    np.testing.assert_allclose(out.get(), _helper_reference(x, y), rtol=1e-14, atol=1e-15)


def test_device_function_bad_keyword_is_a_clear_error():
    def bad_kw(x):
        x[0] = lerp(x[0], x[1], w=3.0)

    with pytest.raises(CompileError) as info:
        cuda.jit(bad_kw).compile("void(float64[::1])")
    assert info.value.function.endswith("bad_kw")
    assert info.value.lineno == _line_of(bad_kw, "lerp(")


def test_device_function_missing_argument_is_a_clear_error():
    def missing(x):
        x[0] = lerp(x[0])

    with pytest.raises(CompileError) as info:
        cuda.jit(missing).compile("void(float64[::1])")
    assert info.value.function.endswith("missing")
    assert info.value.lineno == _line_of(missing, "lerp(")


# =============================================================================================
# Functions that call themselves (numba-cuda's recursion_usecases): with a signature, compiled
# as the decorator runs, before the module binds the name; without one, typed from the returns
# that do not recurse; undecorated helpers too.  Mutual recursion is refused by name.

_RECURSIVE_SOURCE = '''
from gpureplace import cuda

@cuda.jit("i8(i8)", device=True)
def fib_declared(n):
    if n < 2:
        return n
    return fib_declared(n - 1) + fib_declared(n - 2)

@cuda.jit(device=True)
def fib_inferred(n):
    if n < 2:
        return n
    return fib_inferred(n - 1) + fib_inferred(n - 2)

def factorial(n):
    if n <= 1:
        return 1.0
    return n * factorial(n - 1)

@cuda.jit
def recursive_calls(r, x):
    i = cuda.grid(1)
    if i < x.size:
        r[0, i] = fib_declared(x[i])
        r[1, i] = fib_inferred(x[i])
        r[2, i] = factorial(x[i])
'''


def _recursive_namespace(tmp_path, name):
    import importlib.util
    import sys
    path = tmp_path / f"{name}.py"
    path.write_text(_RECURSIVE_SOURCE)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)          # fib_declared compiles here, before it is bound
    return mod


def _fib(n):
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


_REC_X = np.array([0, 1, 2, 7, 10, 20], dtype=np.int64)   # 20: deeper than CUDA's 1 KiB stack
_REC_REF = np.stack([[_fib(int(v)) for v in _REC_X]] * 2 +
                    [[float(np.prod(np.arange(1, max(int(v), 1) + 1))) for v in _REC_X]])


def test_self_recursive_device_functions_compile_and_assemble(tmp_path):
    mod = _recursive_namespace(tmp_path, "gpr_recursion_compile")
    spec = _compile(mod.recursive_calls, "void(float64[:, ::1], int64[::1])")
    assert spec.ptx.count(".func") >= 3                  # fib_declared, fib_inferred, factorial
    assert "call" in _body(spec.ptx)
    # the loader gives such kernels a deeper stack (runtime/launch.py); others keep the default
    from gpureplace.runtime.launch import is_recursive
    assert is_recursive(spec.ptx)
    plain = ".func f(\n.param .b64 p\n)\n{\n\tret;\n}\n.func g(\n)\n{\n\tcall.uni f, (p);\n}\n"
    helpers = _compile(helper_calls, "void(float64[::1], float64[::1], float64[:, ::1])")
    assert not is_recursive(plain) and not is_recursive(helpers.ptx)
    assert is_recursive(plain.replace("call.uni f,", "call.uni g,"))


def test_self_recursive_device_functions_in_the_simulator(tmp_path, monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    mod = _recursive_namespace(tmp_path, "gpr_recursion_sim")
    r = np.zeros((3, _REC_X.size))
    mod.recursive_calls[1, 32](r, _REC_X)
    np.testing.assert_array_equal(r, _REC_REF)


@pytest.mark.gpu
def test_self_recursive_device_functions_gpu(tmp_path):
    cp = _cp()
    mod = _recursive_namespace(tmp_path, "gpr_recursion_gpu")
    r = cp.zeros((3, _REC_X.size))
    mod.recursive_calls[1, 32](r, cp.asarray(_REC_X))
    np.testing.assert_array_equal(r.get(), _REC_REF)


def test_runaway_recursion_is_a_typing_error_at_the_call():
    from numba.core.errors import TypingError

    @cuda.jit(device=True)
    def runaway(x):
        return runaway(x)

    @cuda.jit
    def calls_runaway(x):
        x[0] = runaway(1)

    with pytest.raises(TypingError, match="cannot type infer runaway recursion.*runaway calls "
                                          "itself on every path") as info:
        calls_runaway.compile("void(float64[::1])")
    assert isinstance(info.value, CompileError)


def test_a_self_call_typed_otherwise_than_the_function_returns_is_refused():
    def halves(n):
        if n < 1:
            return 1
        return halves(n - 1) + 0.5         # typed int64 from `return 1`; the function: float64

    @cuda.jit
    def calls_halves(x):
        x[0] = halves(3)

    with pytest.raises(CompileError, match=r"halves calls itself, and that call was typed as "
                                           r"returning int64 .* returns float64: give cuda.jit "
                                           r"a signature") as info:
        calls_halves.compile("void(float64[::1])")
    assert info.value.function.endswith("halves")


def _ping(n):
    return 0 if n <= 0 else _pong(n - 1)


def _pong(n):
    return 1 if n <= 0 else _ping(n - 1)


def test_mutual_recursion_is_refused_with_both_names():
    @cuda.jit
    def pingpong(x):
        x[0] = _ping(4)

    with pytest.raises(CompileError, match=r"mutually recursive device functions are not "
                                           r"supported \((_ping calls _pong|_pong calls _ping)"
                       ) as info:
        pingpong.compile("void(float64[::1])")
    caller = {"_ping": _ping, "_pong": _pong}[info.value.function]
    assert info.value.lineno == caller.__code__.co_firstlineno + 1
