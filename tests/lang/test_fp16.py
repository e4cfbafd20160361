"""cuda.fp16: numba-cuda's half-precision helpers beyond the arithmetic ones.

hsin ... hexp10, hsqrt, hrsqrt and hrcp compute in float32 and round once to half; hceil, hfloor,
htrunc and hrint stay in half (cvt.r?i.f16.f16); heq ... hlt are ordered half comparisons
(setp.<op>.f16) that return a bool.  The PTX is checked and assembled, the kernels run in the
simulator against NumPy references, and the GPU test runs one kernel using all of them on CuPy
float16 arrays.
"""

import numpy as np
import pytest

from conftest import assemble
from gpureplace import cuda, simulator
from gpureplace.errors import CompileError

# name -> float64 reference (rounded to float16 it is the correctly rounded half result)
TRANSCENDENTAL = {
    "hsin": np.sin, "hcos": np.cos, "hlog": np.log, "hlog2": np.log2, "hlog10": np.log10,
    "hexp": np.exp, "hexp2": np.exp2, "hexp10": lambda x: np.power(10.0, x),
}
ROOTS = {"hsqrt": np.sqrt, "hrsqrt": lambda x: 1.0 / np.sqrt(x), "hrcp": lambda x: 1.0 / x}
ROUNDING = {"hceil": ("rpi", np.ceil), "hfloor": ("rmi", np.floor),
            "htrunc": ("rzi", np.trunc), "hrint": ("rni", np.rint)}
UNARY = {**TRANSCENDENTAL, **ROOTS, **{n: f for n, (_, f) in ROUNDING.items()}}
COMPARISONS = {"heq": ("eq", np.equal), "hne": ("ne", lambda a, b: (a < b) | (a > b)),
               "hge": ("ge", np.greater_equal), "hgt": ("gt", np.greater),
               "hle": ("le", np.less_equal), "hlt": ("lt", np.less)}
# The exact ones: sqrt and 1/x of a half in float32 (IEEE), rounded to half, are correctly rounded.
EXACT = set(ROUNDING) | {"hsqrt", "hrcp"}

UNARY_SIG = "void(float16[::1], float16[::1])"
CMP_SIG = "void(float16[::1], float16[::1], boolean[::1])"


def _unary_kernel(fn):
    @cuda.jit
    def kernel(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = fn(x[i])
    return kernel


def _cmp_kernel(fn):
    @cuda.jit
    def kernel(a, b, out):
        i = cuda.grid(1)
        if i < a.size:
            out[i] = fn(a[i], b[i])
    return kernel


UNARY_KERNELS = {name: _unary_kernel(getattr(cuda.fp16, name)) for name in UNARY}
CMP_KERNELS = {name: _cmp_kernel(getattr(cuda.fp16, name)) for name in COMPARISONS}


def _inputs(seed=0, n=300):
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5,
               2.0 ** -24, -(2.0 ** -24), 2.0 ** -14, 6.1e-5, 65504.0, -65504.0, 11.0, 11.1,
               -17.0, 15.9, 4.0, 1e-3, 3.140625, 300.0, 1000.5, 0.0733]
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.standard_normal(n) * 4, rng.uniform(-60000, 60000, n // 4),
                        rng.uniform(-1, 1, n // 4) * 2.0 ** -12, special])
    return x.astype(np.float16)


def _reference(name, x):
    with np.errstate(all="ignore"):
        return UNARY[name](x.astype(np.float64)).astype(np.float16)


def _order(h):
    """float16 values as integers in the order of the values (+0 and -0 both 0): one apart for
    neighbouring halves, 65504 and inf included."""
    bits = h.view(np.uint16).astype(np.int32)
    return np.where(bits & 0x8000, -(bits & 0x7FFF), bits)


def assert_half_close(got, want, ulps=1, what=""):
    """Equal NaN positions; elsewhere within ``ulps`` units in the last place of float16."""
    got, want = np.asarray(got, np.float16), np.asarray(want, np.float16)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaNs")
    ok = ~np.isnan(want)
    dist = np.abs(_order(got[ok]) - _order(want[ok]))
    bad = np.nonzero(dist > ulps)[0]
    assert bad.size == 0, (f"{what}: {bad.size} values more than {ulps} ulp apart, e.g. "
                           f"x-index {bad[:5]}: got {got[ok][bad[:5]]}, want {want[ok][bad[:5]]}")


def assert_half_equal(got, want, what=""):
    """Bit for bit (signs of zero included), NaNs only by position."""
    got, want = np.asarray(got, np.float16), np.asarray(want, np.float16)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{what}: NaNs")
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok].view(np.uint16), want[ok].view(np.uint16),
                                  err_msg=what)


def _check_unary(name, x, got):
    if name in EXACT:
        assert_half_equal(got, _reference(name, x), name)
    else:
        assert_half_close(got, _reference(name, x), 1, name)


def _check_cmp(name, a, b, got):
    np.testing.assert_array_equal(got, COMPARISONS[name][1](a, b), err_msg=name)


def _cmp_inputs():
    x = _inputs(1, 60)
    a = np.concatenate([x, x, x[::-1], [np.nan, np.nan, 1.0, 0.0]]).astype(np.float16)
    b = np.concatenate([x, np.roll(x, 3), x, [np.nan, 1.0, np.nan, -0.0]]).astype(np.float16)
    return a, b


def _grid(n):
    return (n + 127) // 128, 128


# ---------------------------------------------------------------------------------------------
# PTX


def _ir(spec):
    return "\n".join(t for cf in spec.compiled.closure() for t in cf.ir_texts())


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize("name", sorted(TRANSCENDENTAL))
def test_transcendental_ptx(name, arch):
    spec = UNARY_KERNELS[name].compile(UNARY_SIG, arch=arch)
    ptx = spec.ptx
    assemble(ptx, arch)
    # half -> float, libdevice's float32 function (not the double one), one rounding to half
    assert "cvt.f32.f16" in ptx and "cvt.rn.f16.f32" in ptx
    ir = _ir(spec)
    base = name[1:]
    assert f"__nv_{base}f" in ir and f"@__nv_{base}(" not in ir
    assert "cvt.f64.f16" not in ptx and "cvt.rn.f16.f64" not in ptx


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize("name", sorted(ROOTS))
def test_roots_ptx(name, arch):
    ptx = UNARY_KERNELS[name].compile(UNARY_SIG, arch=arch).ptx
    assemble(ptx, arch)
    assert "cvt.f32.f16" in ptx and "cvt.rn.f16.f32" in ptx
    assert ".approx" not in ptx                   # IEEE float32 sqrt.rn and division
    if name in ("hsqrt", "hrsqrt"):
        assert "sqrt.rn.f32" in ptx
    if name in ("hrcp", "hrsqrt"):
        assert "rcp.rn.f32" in ptx or "div.rn.f32" in ptx


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize("name", sorted(ROUNDING))
def test_rounding_ptx(name, arch):
    ptx = UNARY_KERNELS[name].compile(UNARY_SIG, arch=arch).ptx
    assemble(ptx, arch)
    mode = ROUNDING[name][0]
    assert f"cvt.{mode}.f16.f16" in ptx              # stays in half precision
    assert "cvt.f32.f16" not in ptx and "cvt.rn.f16.f32" not in ptx


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_comparison_ptx(name, arch):
    ptx = CMP_KERNELS[name].compile(CMP_SIG, arch=arch).ptx
    assemble(ptx, arch)
    op = COMPARISONS[name][0]
    assert f"setp.{op}.f16" in ptx                   # ordered: never setp.<op>u
    assert f"setp.{op}u." not in ptx and "cvt.f32.f16" not in ptx


def test_comparisons_return_bool():
    @cuda.jit(device=True)
    def f(a, b):
        return (cuda.fp16.heq(a, b), cuda.fp16.hne(a, b), cuda.fp16.hge(a, b),
                cuda.fp16.hgt(a, b), cuda.fp16.hle(a, b), cuda.fp16.hlt(a, b),
                cuda.fp16.hsin(a), cuda.fp16.hrint(b))

    from numba.core import types
    _, ret = cuda.compile_ptx(f, "(float16, float16)", device=True)
    assert ret == types.Tuple((types.boolean,) * 6 + (types.float16,) * 2)


# ---------------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("name", sorted(UNARY))
def test_other_real_arguments_convert_to_float16(name):
    # as numba-cuda: float32 (and int) arguments round to half at the call
    spec = _unary_kernel(getattr(cuda.fp16, name)).compile("void(float32[::1], float32[::1])")
    assert "cvt.rn.f16.f32" in spec.ptx


def test_literals_convert_to_float16_and_complex_is_an_error():
    from gpureplace import simulator

    @cuda.jit
    def k(x, out):
        out[0] = cuda.fp16.hmul(x[0], 2)
        out[1] = cuda.fp16.hadd(x[0], 2.5)
        out[2] = cuda.fp16.hmax(x[0], np.float32(0.25))

    x, out = np.array([1.5], np.float16), np.zeros(3, np.float16)
    simulator.run(k, 1, 1, x, out)
    assert out.tolist() == [3.0, 4.0, 1.5]
    assemble(k.compile("void(float16[::1], float16[::1])").ptx)

    @cuda.jit
    def bad(x, out):
        out[0] = cuda.fp16.hadd(x[0], 1j)
    with pytest.raises(CompileError) as info:
        bad.compile("void(float16[::1], float16[::1])")
    assert "cuda.fp16.hadd()" in str(info.value) and "complex128" in str(info.value)


def test_wrong_argument_count_is_an_error():
    @cuda.jit
    def k(x, out):
        out[0] = cuda.fp16.hexp(x[0], x[1])

    with pytest.raises(CompileError) as info:
        k.compile(UNARY_SIG)
    assert "cuda.fp16.hexp()" in str(info.value) and "1 float16 argument" in str(info.value)


def test_host_call_is_an_error():
    with pytest.raises(RuntimeError, match="cuda.fp16.hsin"):
        cuda.fp16.hsin(np.float16(1))


def test_simulator_without_type_checks_names_the_function():
    from gpureplace.simulator import hostmath
    with pytest.raises(TypeError, match=r"cuda\.fp16\.hlog\(\) needs float16"):
        hostmath.FP16["hlog"]("2")
    with pytest.raises(TypeError, match=r"cuda\.fp16\.hlt\(\) needs float16"):
        hostmath.FP16["hlt"](np.float16(2), 1j)


# ---------------------------------------------------------------------------------------------
# Simulator against NumPy


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_simulator(name):
    x = _inputs()
    out = np.zeros_like(x)
    simulator.run(UNARY_KERNELS[name], *_grid(x.size), x, out)
    _check_unary(name, x, out)


@pytest.mark.parametrize("name", sorted(COMPARISONS))
def test_comparison_simulator(name):
    a, b = _cmp_inputs()
    out = np.zeros(a.size, np.bool_)
    simulator.run(CMP_KERNELS[name], *_grid(a.size), a, b, out)
    _check_cmp(name, a, b, out)


def test_nan_comparisons_are_ordered():
    a = np.array([np.nan, np.nan, 1.0], np.float16)
    b = np.array([np.nan, 1.0, np.nan], np.float16)
    for name in COMPARISONS:
        out = np.ones(3, np.bool_)
        simulator.run(CMP_KERNELS[name], 1, 3, a, b, out)
        assert not out.any(), name                    # hne too, unlike Python's !=


@pytest.mark.parametrize("name", ["hmax", "hmin"])
def test_hmax_hmin_ignore_any_nan(name):
    nans = np.array([0x7E00, 0x7C01, 0xFE00, 0xFD55], np.uint16).view(np.float16)  # sNaN too
    a = np.concatenate([nans, np.ones(4, np.float16), nans]).astype(np.float16)
    b = np.concatenate([np.ones(4, np.float16), nans, nans]).astype(np.float16)
    out = np.zeros_like(a)
    simulator.run(_cmp_kernel(getattr(cuda.fp16, name)), 1, a.size, a, b, out)
    assert (out[:8] == 1).all() and np.isnan(out[8:]).all()


def test_rounding_ties_and_signed_zeros():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.25, 0.25, 1023.5, -0.0], np.float16)
    expected = {"hrint": [0, 2, 2, -0.0, -2, -2, -0.0, 0, 1024, -0.0],
                "hceil": [1, 2, 3, -0.0, -1, -2, -0.0, 1, 1024, -0.0],
                "hfloor": [0, 1, 2, -1, -2, -3, -1, 0, 1023, -0.0],
                "htrunc": [0, 1, 2, -0.0, -1, -2, -0.0, 0, 1023, -0.0]}
    for name, want in expected.items():
        out = np.zeros_like(x)
        simulator.run(UNARY_KERNELS[name], 1, x.size, x, out)
        assert_half_equal(out, np.array(want, np.float16), name)


def test_simulator_matches_numpy_float16_ufuncs():
    # numba-cuda's own tests compare with NumPy's float16 ufuncs (float32 loops): the same
    # results within half-precision rounding.
    rng = np.random.default_rng(1)
    x = rng.integers(1, 65505, size=256).astype(np.float16)
    small = rng.uniform(-10, 10, size=256).astype(np.float16)
    for name, ufunc, arg in (("hsin", np.sin, x), ("hcos", np.cos, x), ("hlog", np.log, x),
                             ("hlog2", np.log2, x), ("hlog10", np.log10, x),
                             ("hsqrt", np.sqrt, x), ("hrcp", np.reciprocal, x),
                             ("hceil", np.ceil, small), ("hfloor", np.floor, small),
                             ("htrunc", np.trunc, small), ("hrint", np.rint, small),
                             ("hexp", np.exp, small), ("hexp2", np.exp2, small)):
        out = np.zeros_like(arg)
        simulator.run(UNARY_KERNELS[name], *_grid(arg.size), arg, out)
        assert_half_close(out, ufunc(arg, dtype=np.float16), 1, name)


# ---------------------------------------------------------------------------------------------
# GPU: one kernel using all of them


@cuda.jit
def fp16_all_kernel(x, y, out, flags):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        out[0, i] = cuda.fp16.hsin(a)
        out[1, i] = cuda.fp16.hcos(a)
        out[2, i] = cuda.fp16.hlog(a)
        out[3, i] = cuda.fp16.hlog2(a)
        out[4, i] = cuda.fp16.hlog10(a)
        out[5, i] = cuda.fp16.hexp(a)
        out[6, i] = cuda.fp16.hexp2(a)
        out[7, i] = cuda.fp16.hexp10(a)
        out[8, i] = cuda.fp16.hsqrt(a)
        out[9, i] = cuda.fp16.hrsqrt(a)
        out[10, i] = cuda.fp16.hrcp(a)
        out[11, i] = cuda.fp16.hceil(a)
        out[12, i] = cuda.fp16.hfloor(a)
        out[13, i] = cuda.fp16.htrunc(a)
        out[14, i] = cuda.fp16.hrint(a)
        out[15, i] = cuda.fp16.hmax(a, b)
        out[16, i] = cuda.fp16.hmin(a, b)
        flags[0, i] = cuda.fp16.heq(a, b)
        flags[1, i] = cuda.fp16.hne(a, b)
        flags[2, i] = cuda.fp16.hge(a, b)
        flags[3, i] = cuda.fp16.hgt(a, b)
        flags[4, i] = cuda.fp16.hle(a, b)
        flags[5, i] = cuda.fp16.hlt(a, b)


ALL_UNARY = ["hsin", "hcos", "hlog", "hlog2", "hlog10", "hexp", "hexp2", "hexp10", "hsqrt",
             "hrsqrt", "hrcp", "hceil", "hfloor", "htrunc", "hrint"]
ALL_CMP = ["heq", "hne", "hge", "hgt", "hle", "hlt"]
ALL_SIG = "void(float16[::1], float16[::1], float16[:, ::1], boolean[:, ::1])"


def _all_inputs():
    x = _inputs(2)
    y = np.roll(x, 1)
    y[::3] = x[::3]                                   # equal pairs for heq / hge / hle
    return x, y


def _check_all(x, y, out, flags):
    for row, name in enumerate(ALL_UNARY):
        _check_unary(name, x, out[row])
    with np.errstate(invalid="ignore"):
        # NaN-ignoring, as fmax / fmin; of 0 and -0 either may come back
        assert_half_close(out[15], np.fmax(x, y), 0, "hmax")
        assert_half_close(out[16], np.fmin(x, y), 0, "hmin")
    for row, name in enumerate(ALL_CMP):
        _check_cmp(name, x, y, flags[row])


def test_all_kernel_ptx_and_simulator():
    spec = fp16_all_kernel.compile(ALL_SIG)
    assemble(spec.ptx)
    assemble(fp16_all_kernel.compile(ALL_SIG, arch="sm_80").ptx, "sm_80")
    x, y = _all_inputs()
    out = np.zeros((len(ALL_UNARY) + 2, x.size), np.float16)
    flags = np.zeros((len(ALL_CMP), x.size), np.bool_)
    simulator.run(fp16_all_kernel, *_grid(x.size), x, y, out, flags)
    _check_all(x, y, out, flags)


@pytest.mark.gpu
def test_all_fp16_functions_gpu():
    import cupy as cp
    x, y = _all_inputs()
    out = cp.zeros((len(ALL_UNARY) + 2, x.size), dtype=np.float16)
    flags = cp.zeros((len(ALL_CMP), x.size), dtype=np.bool_)
    fp16_all_kernel[_grid(x.size)](cp.asarray(x), cp.asarray(y), out, flags)
    _check_all(x, y, cp.asnumpy(out), cp.asnumpy(flags))


from numba.types import float16, float32  # noqa: E402  (cast functions in the kernel below)


def _float_and_int(out, h, f):
    out[0] = float(h) * float16(1000)       # float(float16) stays half: 2.5 * 1000 rounds in half
    out[1] = int(h * float16(3))            # 7.5 truncates to 7
    out[2] = float(f) * float32(10)         # float(float32) stays float32: 3e38 * 10 -> inf
    out[3] = float(3)                       # float(int) is a float64


def test_float_and_int_of_half_values_as_numba_cuda_types_them(monkeypatch):
    from numba.core import types as t
    sig = (t.float64[::1], t.float16, t.float32)
    text = cuda.jit(_float_and_int).inspect_types(sig)
    assert ":: (float16,) -> float16" in text and ":: (float16,) -> int64" in text
    assert ":: (float32,) -> float32" in text
    ptx = cuda.jit(_float_and_int).compile(sig).ptx
    assemble(ptx)
    assert "cvt.rzi.s64.f16" in ptx and "mul.rn.f16" in ptx
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    out = np.zeros(4)
    cuda.jit(_float_and_int)[1, 1](out, np.float16(2.5), np.float32(3e38))
    assert out[0] == float(np.float16(2.5) * np.float16(1000)) and out[1] == 7
    assert np.isinf(out[2]) and out[3] == 3.0
