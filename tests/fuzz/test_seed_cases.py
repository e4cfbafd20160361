"""The issue's seed cases: keyword arguments, 34 arguments, a type argument, a returned value."""

import numpy as np
import pytest
from numba.core import types

from gpureplace import CompileError, cuda
from conftest import assemble


@cuda.jit(device=True)
def axpb(x, a=2.0, b=0.5):
    return a * x + b


@cuda.jit
def kw_kernel(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = axpb(x[i], b=1.0) + axpb(x=x[i]) + axpb(x[i], 3.0, b=-1.0)


def test_device_function_with_keyword_and_default_arguments():
    spec = kw_kernel.compile("void(float64[:], float64[:])")
    assemble(spec.ptx)
    callee = [cf for cf in spec.compiled.closure() if cf.pyfunc is axpb.py_func]
    # Three call shapes fold to positional/omitted forms of axpb's signature.
    assert len(callee) >= 1
    assert all(len(cf.argtypes) == 3 for cf in callee)


_ARGS = ", ".join(f"a{i}" for i in range(33))
_BODY = " + ".join(f"a{i}" for i in range(33))
exec(f"""
@cuda.jit
def many_args(out, {_ARGS}):
    out[0] = {_BODY}
""")


def test_kernel_with_34_arguments():
    sig = (types.float64[:],) + (types.float64,) * 33
    spec = many_args.compile(sig)             # noqa: F821 (defined by the exec above)
    assemble(spec.ptx)
    assert spec.ptx.count(".param") >= 34
    # 1-D array: pointer, shape, stride; then 33 doubles
    assert spec.param_format == "@Qqq" + "d" * 33


@cuda.jit
def type_first(T, out, x):
    out[0] = T(x)


def test_kernel_whose_first_argument_is_a_type():
    import numba
    spec = type_first.compile((numba.typeof(np.int64), types.int64[:], types.float64))
    assemble(spec.ptx)
    assert "cvt.rzi.s64.f64" in spec.ptx
    # the type argument takes no kernel parameter
    assert spec.param_format == "@Qqqd"


@cuda.jit
def returns_value(x):
    return x[0] + 1


def test_kernel_returning_a_value_is_rejected_with_the_line():
    with pytest.raises(CompileError) as info:
        returns_value.compile("void(float32[:])")
    err = info.value
    assert "must have void return type" in str(err)
    assert err.function.endswith("returns_value")
    assert err.filename == __file__
    assert err.lineno == returns_value.py_func.__code__.co_firstlineno + 2
