"""cuda.fp8: the 8-bit float types (fp8_e4m3, fp8_e5m2, fp8_e8m0) and the raw conversions,
against ml_dtypes (float8_e4m3fn / float8_e5m2 / float8_e8m0fnu, which round once to nearest
even and decode exactly) and exact power-of-two arithmetic for E8M0; in the simulator here and on
the GPU with ``-m gpu``; the PTX is assembled for sm_80 and sm_90."""

import math

import ml_dtypes
import numpy as np
import pytest

from conftest import assemble
from gpureplace import cuda, simulator
from gpureplace.compiler import fp8 as F
from gpureplace.cuda.fp8 import (cvt_bfloat16raw_to_fp8, cvt_double_to_fp8, cvt_e8m0_to_bf16raw,
                                 cvt_float_to_e8m0, cvt_float_to_fp8, fp8_e4m3, fp8_e5m2,
                                 fp8_e8m0, fp8_interpretation_t as I, saturation_t as S)
from gpureplace.cuda import float32, int32, uint8
from gpureplace.errors import CompileError

E4, E5, E8 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e8m0fnu
MAX = {"e4m3": 0x7E, "e5m2": 0x7B}


def test_every_code_decodes_as_ml_dtypes_does():
    codes = np.arange(256, dtype=np.uint8)
    for kind, dt in (("e4m3", E4), ("e5m2", E5), ("e8m0", E8)):
        want = codes.view(dt).astype(np.float32)
        got = np.array([F.fp8_to_f32(int(c), F._KIND[kind]) for c in codes],
                       np.uint32).view(np.float32)
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        assert same.all(), (kind, codes[~same][:5], got[~same][:5], want[~same][:5])


def _inputs(n=3000, seed=0):
    with np.errstate(all="ignore"):
        return _make_inputs(n, seed)


def _make_inputs(n, seed):
    rng = np.random.default_rng(seed)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.5, 448.0, 464.0, 465.0,
                        480.0, 57344.0, 61440.0, 61441.0, 2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11,
                        2.0 ** -16, 2.0 ** -17, 1.5 * 2.0 ** -17, 2.0 ** 127, 2.0 ** -127,
                        1e-40, 3.0, 5.0, 6.0, 0.75, 1e20], np.float64)
    f = np.concatenate([special, rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n),
                        rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
                        .view(np.float32)]).astype(np.float32)
    d = np.concatenate([special, rng.standard_normal(f.size - special.size) *
                        10.0 ** rng.integers(-8, 8, f.size - special.size)])
    i = rng.integers(-70000, 70000, f.size).astype(np.int64)
    return f, d, i


def _to_fp8(x, dt, kind, sat):
    """ml_dtypes' rounding (to nearest even; out of range: NaN for E4M3, infinity for E5M2),
    saturated as SATFINITE saturates."""
    with np.errstate(all="ignore"):
        codes = np.asarray(x).astype(dt).view(np.uint8).copy()
    if sat:
        big = np.isinf(np.asarray(x, np.float64)) | (
            ~np.isnan(np.asarray(x, np.float64)) & np.isnan(codes.view(dt).astype(np.float64))
            if kind == "e4m3" else np.isinf(codes.view(dt).astype(np.float64)))
        codes[big] = MAX[kind] | (np.signbit(np.asarray(x))[big] << 7)
    codes[np.isnan(np.asarray(x, np.float64))] = 0x7F
    return codes


def _e8m0(x, up, sat):
    out = []
    for v in map(float, x):
        if math.isnan(v):
            out.append(0xFF)
            continue
        a = abs(v)
        if math.isinf(a):
            out.append(0xFE if sat else 0xFF)
            continue
        if a == 0:
            out.append(0)
            continue
        m, e = math.frexp(a)
        k = e - 1 if (m == 0.5 or not up) else e
        code = k + 127
        out.append(0 if code < 0 else (0xFE if sat else 0xFF) if code > 254 else code)
    return np.array(out, np.uint8)


def _value(codes, dt):
    return codes.view(dt).astype(np.float32)


@cuda.jit
def fp8_kernel(xf, xd, xi, vals, raw, ints):
    k = cuda.grid(1)
    if k < xf.size:
        vals[0, k] = float32(fp8_e4m3(xf[k]))
        vals[1, k] = float32(fp8_e5m2(xf[k]))
        vals[2, k] = float32(fp8_e8m0(xf[k]))
        vals[3, k] = float32(fp8_e4m3(xd[k]))
        vals[4, k] = float32(fp8_e5m2(xd[k]))
        vals[5, k] = float32(fp8_e4m3(xi[k]))
        vals[6, k] = float32(fp8_e5m2(cuda.float16(xf[k])))
        vals[7, k] = float32(fp8_e8m0(xi[k]))
        raw[0, k] = cvt_float_to_fp8(xf[k], S.NOSAT, I.E4M3)
        raw[1, k] = cvt_float_to_fp8(xf[k], S.SATFINITE, I.E4M3)
        raw[2, k] = cvt_float_to_fp8(xf[k], S.NOSAT, I.E5M2)
        raw[3, k] = cvt_double_to_fp8(xd[k], S.SATFINITE, I.E5M2)
        raw[4, k] = cvt_float_to_e8m0(xf[k], S.NOSAT, 1)          # cudaRoundZero
        raw[5, k] = cvt_float_to_e8m0(xf[k], S.SATFINITE, 2)      # cudaRoundPosInf
        raw[6, k] = cvt_bfloat16raw_to_fp8(cvt_e8m0_to_bf16raw(uint8(k % 256)), S.NOSAT, I.E5M2)
        ints[0, k] = int32(fp8_e5m2(xf[k]))
        ints[1, k] = cuda.int8(fp8_e4m3(xf[k]))
        ints[2, k] = cuda.uint16(fp8_e5m2(xf[k]))


def _check(run):
    f, d, i = _inputs()
    vals = np.zeros((8, f.size), np.float32)
    raw = np.zeros((7, f.size), np.uint8)
    ints = np.zeros((3, f.size), np.int64)
    run(f, d, i, vals, raw, ints)
    sat_e4, sat_e5 = _to_fp8(f, E4, "e4m3", True), _to_fp8(f, E5, "e5m2", True)
    with np.errstate(over="ignore"):
        f16 = f.astype(np.float16)
    want_vals = [_value(sat_e4, E4), _value(sat_e5, E5), _value(_e8m0(f, True, True), E8),
                 _value(_to_fp8(d, E4, "e4m3", True), E4), _value(_to_fp8(d, E5, "e5m2", True), E5),
                 _value(_to_fp8(i.astype(np.float32), E4, "e4m3", True), E4),
                 _value(_to_fp8(f16, E5, "e5m2", True), E5),
                 _value(_e8m0(i, True, True), E8)]
    for row, want in enumerate(want_vals):
        got = vals[row]
        bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
        assert not bad.any(), (row, f[bad][:4], d[bad][:4], got[bad][:4], want[bad][:4])
    want_raw = [_to_fp8(f, E4, "e4m3", False), sat_e4, _to_fp8(f, E5, "e5m2", False),
                _to_fp8(d, E5, "e5m2", True), _e8m0(f, False, False), _e8m0(f, True, True)]
    for row, want in enumerate(want_raw):
        bad = raw[row] != want
        assert not bad.any(), (row, f[bad][:4], raw[row][bad][:4], want[bad][:4])
    powers = np.arange(f.size) % 256
    e8 = powers.astype(np.uint8).view(E8).astype(np.float64)
    np.testing.assert_array_equal(raw[6], _to_fp8(e8, E5, "e5m2", False))
    v5 = _value(sat_e5, E5).astype(np.float64)
    v4 = _value(sat_e4, E4).astype(np.float64)

    def sat_int(v, lo, hi):
        return np.where(np.isnan(v), 0, np.clip(np.trunc(np.nan_to_num(v, posinf=hi, neginf=lo)),
                                                lo, hi)).astype(np.int64)
    np.testing.assert_array_equal(ints[0], sat_int(v5, -2 ** 31, 2 ** 31 - 1))
    np.testing.assert_array_equal(ints[1], sat_int(v4, -128, 127))
    np.testing.assert_array_equal(ints[2], sat_int(v5, 0, 65535))


def test_constructors_conversions_and_raw_cvt_in_the_simulator():
    _check(lambda *a: simulator.run(fp8_kernel, (a[0].size + 127) // 128, 128, *a))


SIG = ("void(float32[::1], float64[::1], int64[::1], float32[:, ::1], uint8[:, ::1], "
       "int64[:, ::1])")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_kernel_assembles(arch):
    assemble(fp8_kernel.compile(SIG, arch=arch).ptx, arch)


@pytest.mark.gpu
@pytest.mark.gpu_only          # (the simulator runs the same check on fewer values)
def test_constructors_conversions_and_raw_cvt_on_the_gpu():
    import cupy as cp

    def run(*args):
        dev = [cp.asarray(a) for a in args]
        fp8_kernel[(args[0].size + 127) // 128, 128](*dev)
        for host, d in zip(args[3:], dev[3:]):
            host[...] = cp.asnumpy(d)
    _check(run)


def test_host_values_enums_and_errors():
    v = fp8_e4m3(1.5)
    assert float(v) == 1.5 and v.x == 0x3C and int(fp8_e5m2(-7.9)) == -8
    assert float(fp8_e8m0(3.0)) == 4.0 and fp8_e4m3.__name__ == "fp8_e4m3"
    assert int(S.SATFINITE) == 1 and int(I.E5M2) == 1
    assert cuda.is_fp8_supported()

    def adds(out):
        out[0] = float32(fp8_e4m3(1.0) + fp8_e4m3(2.0))
    with pytest.raises(CompileError):
        cuda.compile_ptx(adds, "void(float32[::1])")

    def bad(out):
        out[0] = cvt_float_to_fp8(1.0, 1.5, I.E4M3)
    with pytest.raises(CompileError, match=r"cuda\.fp8\.cvt_float_to_fp8\(\): saturate must be"):
        cuda.compile_ptx(bad, "void(uint8[::1])")


def test_a_second_kernel_reusing_a_conversion_links_its_helpers():
    """A conversion compiled for one kernel and reused by another brings along the helper
    functions it calls (found by numba-cuda's fp8 tests: the second kernel's link failed)."""
    @cuda.jit
    def first(r):
        r[0] = float32(fp8_e4m3(float32(1.5)))

    @cuda.jit
    def second(r, x):
        r[0] = float32(fp8_e5m2(x[0])) + float32(fp8_e4m3(x[0]))

    assemble(first.compile("void(float32[::1])").ptx)
    assemble(second.compile("void(float32[::1], float32[::1])").ptx)


class _IntEnumMeta(type):
    """Like cuda-python's enums (cudaRoundMode): int members, not an enum.Enum."""

    @property
    def __members__(cls):
        return {"cudaRoundZero": cls.cudaRoundZero, "cudaRoundPosInf": cls.cudaRoundPosInf}


class _Rounding(int, metaclass=_IntEnumMeta):
    def __repr__(self):
        return f"<rounding {int(self)}>"


_Rounding.cudaRoundZero, _Rounding.cudaRoundPosInf = _Rounding(1), _Rounding(2)


def test_int_enumerations_of_other_libraries_are_constants_in_device_code():
    @cuda.jit
    def kernel(r, x):
        r[0] = cvt_float_to_e8m0(x[0], S.NOSAT, _Rounding.cudaRoundPosInf)
        r[1] = cvt_float_to_e8m0(x[0], S.NOSAT, _Rounding.cudaRoundZero)
    assemble(kernel.compile("void(uint8[::1], float32[::1])").ptx)
    r = np.zeros(2, np.uint8)
    simulator.run(kernel, 1, 1, r, np.array([3.0], np.float32))
    assert r.tolist() == [128 + 1, 128]


def test_fp8_scalars_as_kernel_arguments():
    from gpureplace.runtime.arguments import numba_type_of_key, value_key
    from gpureplace.runtime.conversion import match_signature
    key, values = value_key(fp8_e5m2(-2.5))
    assert key == ("fp8", "e5m2") and values == (0xC1,) and numba_type_of_key(key) is fp8_e5m2
    keys, vals = match_signature([(fp8_e4m3,)], [("fp8", "e4m3")], [(0x7E,)])
    assert keys == [("fp8", "e4m3")] and vals == [0x7E]

    @cuda.jit
    def widen(out, v):
        out[0] = float32(v)
    assemble(widen.compile((cuda.float32[::1], fp8_e4m3)).ptx)
    out = np.zeros(1, np.float32)
    simulator.run(widen, 1, 1, out, fp8_e4m3(0.3))
    assert out[0] == np.float32(0.3).astype(E4).astype(np.float32)


def test_an_fp8_parameter_before_an_array_compiles():
    """A scalar parameter of an 8-bit float (or datetime64) type is rebuilt from its own
    kernel parameter: the parameters after it stay in place."""
    @cuda.jit
    def widen_first(v, out):
        out[0] = float32(v)
    assemble(widen_first.compile((fp8_e5m2, cuda.float32[::1])).ptx)
