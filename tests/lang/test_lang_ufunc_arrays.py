"""NumPy ufuncs on arrays in device code (issue 16): ``np.sin(x, out)``, ``np.add(a, b, out=c)``,
two-output ufuncs, broadcasting, and the operator-like ufuncs on scalars; the array form is a
loop over the Context's scalar meaning, so an override of the ufunc applies to it too."""

import numpy as np
import pytest
from numba.core import types as nbt

import gpureplace
from conftest import assemble
from gpureplace import CompileError, cuda
from gpureplace.config import settings


@cuda.jit
def _ufuncs(x, m, out, out2, frac, whole):
    np.sin(x, out)                          # 1-D
    np.add(x, 1.5, out=out2[0])             # a row of a 2-D array, out= as a keyword
    np.multiply(x, m, out2)                 # x broadcast over m's rows
    np.maximum(out2, m[1], out2)            # in place, a row broadcast
    np.modf(x, frac, whole)                 # two outputs
    whole[0] += np.add(2, 3) + np.floor_divide(7, 2) + np.negative(1)


def _inputs(xp):
    x = np.linspace(-1.5, 2.0, 5).astype(np.float64)
    m = np.arange(10, dtype=np.float64).reshape(2, 5) - 4
    return [xp(a) for a in (x, m, np.zeros(5), np.zeros((2, 5)), np.zeros(5), np.zeros(5))]


def _expected():
    x, m, *_ = _inputs(np.asarray)
    out2 = np.maximum(x * m, m[1])
    frac, whole = np.modf(x)
    whole[0] += 5 + 3 - 1
    return np.sin(x), out2, frac, whole


def _check(args, get):
    _ufuncs[1, 1](*args)
    sin, out2, frac, whole = _expected()
    np.testing.assert_allclose(get(args[2]), sin, rtol=1e-15)
    np.testing.assert_array_equal(get(args[3]), out2)
    np.testing.assert_array_equal(get(args[4]), frac)
    np.testing.assert_array_equal(get(args[5]), whole)


def test_ufuncs_on_arrays_compile_to_loops_that_assemble():
    a1, a2 = nbt.float64[::1], nbt.float64[:, ::1]
    sig = (a1, a2, a1, a2, a1, a1)
    _ufuncs.compile(sig)
    assemble(_ufuncs.inspect_asm(sig))


def test_ufuncs_on_arrays_in_the_simulator(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    _check(_inputs(np.asarray), np.asarray)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_ufuncs_on_arrays_on_the_gpu():
    import cupy as cp
    _check(_inputs(cp.asarray), cp.asnumpy)


def test_without_an_output_array_the_error_says_device_code_cannot_allocate():
    @cuda.jit
    def allocates(x):
        y = np.sin(x)          # noqa: F841

    with pytest.raises(CompileError, match=r"np.sin on arrays in device code needs its output "
                                           r"array given \(np.sin\(..., out\)\): device code "
                                           r"cannot allocate the result"):
        allocates.compile((nbt.float64[::1],))


def test_an_override_of_the_ufunc_applies_to_its_array_form(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    ctx = gpureplace.Context("ufunc-arrays", parent=gpureplace.default_context)
    ctx.override(np.sin, lambda v: 2.0 * v)

    @cuda.jit(context=ctx)
    def k(x, out):
        np.sin(x, out)

    x, out = np.arange(3.0), np.zeros(3)
    k[1, 1](x, out)
    assert out.tolist() == [0.0, 2.0, 4.0]
    sig = (nbt.float64[::1], nbt.float64[::1])
    assert "sin" not in k.inspect_llvm(sig).lower().replace("_sin", "")  # no libdevice sin


def test_operator_ufuncs_on_scalars_follow_numpy(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")

    @cuda.jit
    def k(out, a, b):
        out[0] = np.maximum(a, b)            # NaN propagates, as in NumPy
        out[1] = np.minimum(b, a)
        out[2] = np.logical_xor(a, b)
        out[3] = np.remainder(-7.0, 3.0)      # the divisor's sign
        out[4] = np.logaddexp(1.0, 1.0)

    out = np.zeros(5)
    k[1, 1](out, np.nan, 1.0)
    assert np.isnan(out[0]) and np.isnan(out[1]) and out[2] == 0.0
    assert out[3] == np.remainder(-7.0, 3.0)
    assert out[4] == pytest.approx(np.logaddexp(1.0, 1.0), rel=1e-15)
    sig = (nbt.float64[::1], nbt.float64, nbt.float64)
    k.compile(sig)
    assemble(k.inspect_asm(sig))


def test_integer_arrays_go_through_numpys_loop_types(monkeypatch):
    """np.arccos on int32 elements computes in float64, as NumPy's loop 'd->d' does."""
    monkeypatch.setattr(settings, "backend", "simulator")

    @cuda.jit
    def k(x, out, isum):
        np.arccos(x, out)
        np.add(x, x, isum)               # 'ii->i': no conversion

    x = np.array([0, 1, -1], np.int32)
    out, isum = np.zeros(3), np.zeros(3, np.int32)
    k[1, 1](x, out, isum)
    np.testing.assert_allclose(out, np.arccos(x), rtol=1e-15)
    assert isum.tolist() == [0, 2, -2]
    k.compile((nbt.int32[::1], nbt.float64[::1], nbt.int32[::1]))


def test_math_ufuncs_on_complex_numbers_go_through_cmath(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")

    @cuda.jit
    def k(x, out, r):
        np.arccos(x, out)
        r[0] = np.sqrt(x[0]) + np.sin(0.5)

    x = np.array([0.5 + 1j, -1 - 0.25j], np.complex128)
    out, r = np.zeros(2, np.complex128), np.zeros(1, np.complex128)
    k[1, 1](x, out, r)
    np.testing.assert_allclose(out, np.arccos(x), rtol=1e-14)
    np.testing.assert_allclose(r[0], np.sqrt(x[0]) + np.sin(0.5), rtol=1e-14)
    sig = (nbt.complex64[::1], nbt.complex64[::1], nbt.complex64[::1])
    k.compile(sig)
    assemble(k.inspect_asm(sig))


def test_complex_numbers_compare_as_numpy_orders_them(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")

    @cuda.jit
    def k(a, b, gt, mx, fm, lg):
        np.greater(a, b, gt)
        np.maximum(a, b, mx)
        np.fmin(a, b, fm)
        np.log2(a, lg)

    a = np.array([1 + 2j, 1 + 1j, complex(np.nan, 0), 3 + 0j])
    b = np.array([1 + 1j, 2 + 0j, 1 + 1j, 3 + 0j])
    outs = [np.zeros(4, bool), np.zeros(4, complex), np.zeros(4, complex), np.zeros(4, complex)]
    k[1, 1](a, b, *outs)
    with np.errstate(invalid="ignore"):               # NumPy's own reference, NaN included
        expected = np.greater(a, b), np.maximum(a, b), np.fmin(a, b)
    assert outs[0].tolist() == expected[0].tolist()
    np.testing.assert_array_equal(outs[1], expected[1])
    np.testing.assert_array_equal(outs[2], expected[2])
    np.testing.assert_allclose(outs[3][[0, 1, 3]], np.log2(a[[0, 1, 3]]), rtol=1e-14)
    sig = (nbt.complex128[::1],) * 2 + (nbt.boolean[::1],) + (nbt.complex128[::1],) * 3
    k.compile(sig)
    assemble(k.inspect_asm(sig))


# np.sign, np.reciprocal, np.spacing, np.gcd and np.lcm on scalars: NumPy's values and types

_NUMERIC_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "float32", "float64", "complex64", "complex128"]


def _numeric_cases():
    """(ufunc, argument dtypes) NumPy has a loop for, with the values to try."""
    out = []
    for name in _NUMERIC_TYPES:
        dt = np.dtype(name)
        out += [(np.sign, (dt,)), (np.reciprocal, (dt,))]
        if dt.kind in "iu" and dt.itemsize >= 2 or dt.kind == "f":
            out.append((np.spacing, (dt,)))
        if dt.kind in "iu":
            out += [(np.gcd, (dt, dt)), (np.lcm, (dt, dt))]
    return out


def _values(dt):
    if dt.kind == "u":
        return [0, 1, 2, 12, 18, 255]
    if dt.kind == "i":
        return [0, 1, -1, 2, -12, 18, 127]
    if dt.kind == "f":
        return [0.0, -0.0, 1.5, -2.0, 1e30, np.inf, -np.inf, np.nan, 3.0]
    return [0j, 3 + 4j, -1.5j, complex(np.nan, 1.0), 2 + 0j, complex(np.inf, 2.0),
            complex(1.0, -np.inf), complex(np.inf, np.inf), complex(np.inf, np.nan)]


def _numeric_kernel(uf, nargs):
    if nargs == 1:
        @cuda.jit
        def k(x, out):
            i = cuda.grid(1)
            if i < x.size:
                out[i] = uf(x[i])
    else:
        @cuda.jit
        def k(x, y, out):
            i = cuda.grid(1)
            if i < x.size:
                out[i] = uf(x[i], y[i])
    return k


def _numeric_operands(uf, dts):
    vals = _values(dts[0])
    if len(dts) == 1:
        return [np.array(vals, dts[0])]
    pairs = [(a, b) for a in vals for b in vals]
    return [np.array([a for a, _ in pairs], dts[0]), np.array([b for _, b in pairs], dts[1])]


@pytest.mark.parametrize("uf,dts", _numeric_cases(),
                         ids=lambda v: getattr(v, "__name__", None) or "-".join(map(str, v)))
def test_numeric_ufuncs_on_scalars_return_numpys_type_and_assemble(uf, dts):
    """Each compiles (ptxas accepts it) and a device function of it returns the type of NumPy's
    loop for those argument types; the simulator's values are NumPy's."""
    from numba.np import numpy_support
    argtypes = tuple(numpy_support.from_dtype(d) for d in dts)
    want = np.result_type(uf(*[np.zeros(1, d) for d in dts]))
    params = ", ".join(f"a{i}" for i in range(len(dts)))
    ns = {"uf": uf}
    exec(f"def f({params}):\n    return uf({params})\n", ns)
    dev = cuda.jit(device=True)(ns["f"])
    assert dev.compile_device(argtypes).restype == numpy_support.from_dtype(want)
    k = _numeric_kernel(uf, len(dts))
    sig = tuple(t[::1] for t in argtypes) + (numpy_support.from_dtype(want)[::1],)
    assemble(k.compile(sig).ptx)
    ops = _numeric_operands(uf, dts)
    with np.errstate(all="ignore"):
        expected = uf(*ops)
    nonzero = np.ones(len(ops[0]), bool)
    if uf is np.reciprocal and dts[0].kind in "iu":
        nonzero = ops[0] != 0                 # NumPy's 1 // 0 is its C compiler's business
    out = np.zeros(len(ops[0]), want)
    old = settings.backend
    settings.backend = "simulator"
    try:
        k[1, 64](*ops, out)
    finally:
        settings.backend = old
    np.testing.assert_array_equal(out[nonzero], expected[nonzero])


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_numeric_ufuncs_on_scalars_on_the_gpu():
    """The compiled code gives NumPy's values for every case above."""
    import cupy as cp
    for uf, dts in _numeric_cases():
        k = _numeric_kernel(uf, len(dts))
        ops = _numeric_operands(uf, dts)
        with np.errstate(all="ignore"):
            expected = uf(*ops)
        out = cp.zeros(len(ops[0]), expected.dtype)
        k[1, 64](*[cp.asarray(o) for o in ops], out)
        nonzero = np.ones(len(ops[0]), bool)
        if uf is np.reciprocal and dts[0].kind in "iu":
            nonzero = ops[0] != 0
        np.testing.assert_array_equal(cp.asnumpy(out)[nonzero], expected[nonzero],
                                      err_msg=f"{uf.__name__}{tuple(map(str, dts))}")


def test_a_sign_written_with_comparisons_compiles():
    """``(x > 0) - (x < 0)``: LLVM turns it into its three-way comparison intrinsic, which
    NVPTX selects (validation refused it as an unknown call)."""
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = (x[i] > 0) - (x[i] < 0)

    for ty in (nbt.int32, nbt.uint64, nbt.float32):
        assemble(k.compile((ty[::1], nbt.int64[::1])).ptx)


def test_a_numpy_function_given_types_it_has_no_loop_for_names_itself_and_them():
    """np.sign of a bool: NumPy has no loop for it (nor has the device meaning); the error names
    the function, the argument types and those it takes, at the user's line -- not "Cannot
    determine Numba type of <class 'numpy.ufunc'>".  np.reciprocal of a bool is NumPy's int8
    loop's."""
    @cuda.jit
    def sign_of(out, b):
        out[0] = np.sign(b[0])

    with pytest.raises(CompileError, match=r"numpy\.sign\(\) has no device meaning for "
                                           r"arguments \(bool\); it takes \(int8\), .*"
                                           r"\(complex128\)") as info:
        sign_of.compile("void(float64[::1], boolean[::1])")
    assert "line" in str(info.value) and "numpy.ufunc" not in str(info.value)

    @cuda.jit
    def reciprocal_of(out, b):
        out[0] = np.reciprocal(b[0])

    out = np.zeros(2, np.int8)
    reciprocal_of[1, 1](out, np.array([True]))
    assert out[0] == 1
