"""bfloat16: the type in device code, its operators, and ``cuda.bf16`` (numba-cuda's names).

Every function is checked against an independent NumPy / ml_dtypes reference (ml_dtypes rounds
float64 to bfloat16 once), in the simulator here and on the GPU (``-m gpu``) with the same
kernel; the PTX is assembled by ptxas for sm_80 and sm_90, where the native instructions are
checked.
"""

import math

import ml_dtypes
import numpy as np
import pytest

from conftest import assemble
from gpureplace import cuda, simulator
from gpureplace.compiler.bfloat16 import bfloat16, bits_of, round_bits, value_of
from gpureplace.compiler.intrinsics import bf16 as bf16_impl
from gpureplace.cuda import compile_ptx
from gpureplace.errors import CompileError

BF = ml_dtypes.bfloat16

MODES = ("rn", "rz", "rd", "ru")
UNARY_EXACT = ("habs", "hneg", "htrunc", "hceil", "hfloor", "hrint", "hsqrt", "hrcp")
UNARY_CLOSE = ("hrsqrt", "hsin", "hcos", "htanh", "hlog", "hlog2", "hlog10", "hexp", "hexp2",
               "hexp10", "htanh_approx")
BINARY = ("hadd", "hsub", "hmul", "hdiv", "hadd_rn", "hsub_rn", "hmul_rn", "hadd_sat",
          "hsub_sat", "hmul_sat", "hmax", "hmin", "hmax_nan", "hmin_nan")
TERNARY = ("hfma", "hfma_sat", "hfma_relu")
CMP = ("heq", "hne", "hge", "hgt", "hle", "hlt", "hequ", "hneu", "hgeu", "hgtu", "hleu", "hltu")
INTS = {"char": np.int8, "uchar": np.uint8, "short": np.int16, "ushort": np.uint16,
        "int": np.int32, "uint": np.uint32, "ll": np.int64, "ull": np.uint64}
TO_INT = tuple(f"bfloat162{c}_{m}" for c in INTS for m in (("rz",) if c in ("char", "uchar")
                                                          else MODES))
FROM_INT = tuple(f"{c}2bfloat16_{m}" for c in INTS if c not in ("char", "uchar") for m in MODES)


# ---------------------------------------------------------------------------------------------
# the kernel: every function of cuda.bf16 over arrays of inputs

def _all_kernel_source():
    lines = ["def bf16_all(a, b, c, f, ints, ob, oflag, oint, oisinf):",
             "    i = cuda.grid(1)",
             "    if i >= a.size:",
             "        return",
             "    x = a[i]", "    y = b[i]", "    z = c[i]", "    r = 0"]
    for name in UNARY_EXACT + UNARY_CLOSE:
        lines.append(f"    ob[r, i] = cuda.bf16.{name}(x)"); lines.append("    r += 1")
    for name in BINARY:
        lines.append(f"    ob[r, i] = cuda.bf16.{name}(x, y)"); lines.append("    r += 1")
    for name in TERNARY:
        lines.append(f"    ob[r, i] = cuda.bf16.{name}(x, y, z)"); lines.append("    r += 1")
    for mode in MODES:
        lines.append(f"    ob[r, i] = cuda.bf16.float2bfloat16_{mode}(f[i])")
        lines.append("    r += 1")
    lines.append("    ob[r, i] = cuda.bf16.double2bfloat16(cuda.float64(f[i]) * 1.0000001)")
    lines.append("    r += 1")
    for k, name in enumerate(FROM_INT):
        cname = name.split("2")[0]
        lines.append(f"    ob[r, i] = cuda.bf16.{name}(cuda.{np.dtype(INTS[cname]).name}"
                     f"(ints[{list(INTS).index(cname)}, i]))")
        lines.append("    r += 1")
    lines.append("    ob[r, i] = x + y"); lines.append("    r += 1")
    lines.append("    ob[r, i] = x * y - z"); lines.append("    r += 1")
    lines.append("    ob[r, i] = -x / y"); lines.append("    r += 1")
    lines.append("    ob[r, i] = math.sqrt(x)"); lines.append("    r += 1")
    lines.append("    ob[r, i] = abs(y)"); lines.append("    r += 1")
    lines.append("    q = 0")
    for name in CMP:
        lines.append(f"    oflag[q, i] = cuda.bf16.{name}(x, y)"); lines.append("    q += 1")
    lines.append("    oflag[q, i] = cuda.bf16.hisnan(x)"); lines.append("    q += 1")
    for op in ("<", "<=", "==", "!=", ">", ">="):
        lines.append(f"    oflag[q, i] = x {op} y"); lines.append("    q += 1")
    lines.append("    oisinf[i] = cuda.bf16.hisinf(x)")
    for k, name in enumerate(TO_INT):
        lines.append(f"    oint[{k}, i] = cuda.bf16.{name}(x)")
    ns = {"cuda": cuda, "math": math}
    exec(compile("\n".join(lines), "<bf16_all>", "exec"), ns)
    return cuda.jit(ns["bf16_all"])


bf16_all = _all_kernel_source()
N_BF = len(UNARY_EXACT + UNARY_CLOSE + BINARY + TERNARY) + 5 + len(FROM_INT) + 5
N_FLAG = len(CMP) + 1 + 6


def _specials():
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 3.5, 255.0, 256.0,
         257.0, 1e38, -1e38, 3.3895e38, 1e-38, 9.2e-41, -9.2e-41, 0.75, 0.25, 2.0, 1.25, -1.5,
         32767.0, 32768.0, -32768.0, 65535.0, 65536.0, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 63,
         2.0 ** 64, 3.140625, -0.4375]
    return np.array(v, np.float64).astype(BF)


def _inputs(n, seed=0):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    a = np.concatenate([_specials(), bits.view(BF), (rng.standard_normal(n) * 3).astype(BF)])
    m = a.size
    b = np.concatenate([a[1:], a[:1]])
    c = rng.permutation(a)
    f = np.concatenate([rng.standard_normal(m // 2).astype(np.float32) * 100,
                        rng.integers(0, 1 << 32, size=m - m // 2, dtype=np.uint64)
                        .astype(np.uint32).view(np.float32)])
    ints = np.zeros((len(INTS), m), np.int64)
    for k, (cname, t) in enumerate(INTS.items()):
        info = np.iinfo(t)
        lo, hi = max(info.min, -(2 ** 62)), min(info.max, 2 ** 62)
        col = rng.integers(lo, hi, size=m, dtype=np.int64, endpoint=True)
        col[:6] = [0, 1, 789, min(info.max, 2 ** 62), max(info.min, 0), 257 % (hi + 1)]
        ints[k] = col
    return a, b, c, f, ints


def _run(run, a, b, c, f, ints, to_device=None):
    m = a.size
    outs = (np.zeros((N_BF, m), BF), np.zeros((N_FLAG, m), np.bool_),
            np.zeros((len(TO_INT), m), np.int64), np.zeros(m, np.int32))
    run(a, b, c, f, ints, *outs)
    return outs


# ---------------------------------------------------------------------------------------------
# references (NumPy / ml_dtypes only)

def _f64(x):
    return x.astype(np.float64)


def _bf(x):
    """float64 -> bfloat16 rounded once to nearest even, whatever ml_dtypes' version does
    (older ones go through float32 and round twice): first to float32 rounding to odd (the
    value truncated, its last bit set when inexact), which the second rounding to nearest
    even cannot get wrong, as float32 keeps more than two bits beyond bfloat16's."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        y = x.astype(np.float32)
        wide = np.abs(y.astype(np.float64)) > np.abs(x)
        y = np.where(wide & np.isfinite(x), np.nextafter(y, np.float32(0)), y)
        bits = y.view(np.uint32)
        inexact = (y.astype(np.float64) != x) & np.isfinite(x)
        y = np.where(inexact, (bits | np.uint32(1)).view(np.float32), y)
        return y.astype(BF)


def _sat(x):
    x = _f64(x)
    return _bf(np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0)))


def _next(v, up):
    """The neighbouring bfloat16 of finite v, up or down."""
    bits = v.view(np.uint16).astype(np.int32)
    neg = (bits & 0x8000) != 0
    mag = bits & 0x7FFF
    is_zero = mag == 0
    step_away = np.where(neg, ~up, up)
    mag2 = np.where(step_away, mag + 1, mag - 1)
    out = np.where(neg, mag2 | 0x8000, mag2)
    out = np.where(is_zero & up, 0x0001, np.where(is_zero & ~up, 0x8001, out))
    return out.astype(np.uint16).view(BF)


def _directed(exact_f64_or_obj, rn, mode):
    """Directed rounding from the nearest one: step to the neighbour where rn lies on the wrong
    side of the exact value (compared exactly: Python numbers)."""
    out = rn.copy()
    for i, (x, r) in enumerate(zip(exact_f64_or_obj, rn)):
        if isinstance(x, float) and math.isnan(x):
            continue
        rv = float(r)
        if math.isinf(rv) and not (isinstance(x, float) and math.isinf(x)):
            rv = math.copysign(3.3895313892515355e38, rv)     # overflowed: the largest finite
            r = BF(rv)
        below, above = (rv < x), (rv > x)      # (int vs float compares exactly in Python)
        if mode == "rz":
            step = (above and x > 0) or (below and x < 0)
            if step:
                r = _next(np.array([r]), np.array([x < 0]))[0]
        elif mode == "rd" and above:
            r = _next(np.array([r]), np.array([False]))[0]
        elif mode == "ru" and below:
            r = _next(np.array([r]), np.array([True]))[0]
        elif mode in ("rd", "ru") and rv != float(rn[i]):
            pass
        if math.isinf(float(rn[i])) and not (isinstance(x, float) and math.isinf(x)):
            away = mode == ("rd" if x < 0 else "ru")
            r = rn[i] if away else r
        out[i] = r
    return out


def _to_int(x, name):
    cname, mode = name[len("bfloat162"):].rsplit("_", 1)
    info = np.iinfo(INTS[cname])
    v = _f64(x)
    rnd = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[mode](v)
    out = []
    for r in map(float, rnd):                  # (Python floats compare exactly with ints)
        out.append(0 if math.isnan(r) else int(min(max(r, info.min), info.max)) if
                   math.isfinite(r) else (info.max if r > 0 else info.min))
    return np.array([v & (2 ** 64 - 1) for v in out], np.uint64).view(np.int64)   # (as stored)


def _references(a, b, c, f, ints):
    x, y, z = _f64(a), _f64(b), _f64(c)
    with np.errstate(all="ignore"):
        exact = {"habs": _bf(np.abs(x)), "hneg": _bf(-x), "htrunc": _bf(np.trunc(x)),
                 "hceil": _bf(np.ceil(x)), "hfloor": _bf(np.floor(x)), "hrint": _bf(np.rint(x)),
                 "hsqrt": _bf(np.sqrt(x)), "hrcp": _bf(1.0 / x)}
        close = {"hrsqrt": 1 / np.sqrt(x), "hsin": np.sin(x), "hcos": np.cos(x),
                 "htanh": np.tanh(x), "hlog": np.log(x), "hlog2": np.log2(x),
                 "hlog10": np.log10(x), "hexp": np.exp(x), "hexp2": np.exp2(x),
                 "hexp10": np.power(10.0, x), "htanh_approx": np.tanh(x)}
        binary = {"hadd": x + y, "hsub": x - y, "hmul": x * y, "hdiv": x / y}
        for n in ("hadd", "hsub", "hmul"):
            binary[f"{n}_rn"] = binary[n]
        rows = [exact[n] for n in UNARY_EXACT] + [_bf(close[n]) for n in UNARY_CLOSE]
        for n in BINARY:
            if n.endswith("_sat"):
                rows.append(_sat(_bf(binary[n[:-4]])))
            elif n in ("hmax", "hmin"):
                rows.append(_bf((np.fmax if n == "hmax" else np.fmin)(x, y)))
            elif n in ("hmax_nan", "hmin_nan"):
                rows.append(_bf((np.maximum if n == "hmax_nan" else np.minimum)(x, y)))
            else:
                rows.append(_bf(binary[n]))
        fma = np.array([value_of(round_bits(_exact_fma(p, q, r))) if _all_finite(p, q, r)
                        else p * q + r for p, q, r in zip(x, y, z)])
        rows += [_bf(fma), _sat(_bf(fma)), _bf(np.where(_bf(fma).astype(np.float64) < 0, 0.0,
                                                        _bf(fma).astype(np.float64)))]
        f64 = f.astype(np.float64)
        rn = f.astype(BF)
        for mode in MODES:
            rows.append(rn if mode == "rn" else _directed(list(map(float, f64)), rn, mode))
        rows.append(_bf((f64 * 1.0000001)))
        for name in FROM_INT:
            cname, mode = name.split("2bfloat16_")
            k = list(INTS).index(cname)
            t = INTS[cname]
            vals = [int(v) for v in ints[k].astype(t)]
            rn_int = np.array([value_of(round_bits(v)) for v in vals]).astype(BF)
            rows.append(rn_int if mode == "rn" else _directed(vals, rn_int, mode))
        rows += [_bf(x + y), _bf(_f64(_bf(x * y)) - z), _bf(-x / y), _bf(np.sqrt(x)),
                 _bf(np.abs(y))]
        flags = [x == y, (x < y) | (x > y), x >= y, x > y, x <= y, x < y,
                 ~((x < y) | (x > y)), ~(x == y), ~(x < y), ~(x <= y), ~(x > y), ~(x >= y),
                 np.isnan(x), x < y, x <= y, x == y, x != y, x > y, x >= y]
        isinf = np.where(np.isposinf(x), 1, np.where(np.isneginf(x), -1, 0))
        to_int = [_to_int(a, n) for n in TO_INT]
    return np.array(rows), np.array(flags), np.array(to_int), isinf


def _exact_fma(p, q, r):
    from fractions import Fraction
    return Fraction(p) * Fraction(q) + Fraction(r)


def _all_finite(*v):
    return all(math.isfinite(t) for t in v)


def _ulps(got, want):
    g = got.view(np.uint16).astype(np.int32)
    w = want.view(np.uint16).astype(np.int32)
    order = lambda b: np.where(b & 0x8000, -(b & 0x7FFF), b)       # noqa: E731
    return np.abs(order(g) - order(w))


def _check(outs, refs, ctx=""):
    ob, oflag, oint, oisinf = outs
    rb, rflag, rint, risinf = refs
    names = list(UNARY_EXACT + UNARY_CLOSE + BINARY + TERNARY) + \
        [f"float2bfloat16_{m}" for m in MODES] + ["double2bfloat16"] + list(FROM_INT) + \
        ["x + y", "x * y - z", "-x / y", "math.sqrt", "abs"]
    assert len(names) == N_BF
    for row, name in enumerate(names):
        got, want = ob[row], rb[row]
        gnan, wnan = np.isnan(_f64(got)), np.isnan(_f64(want))
        bad = gnan != wnan
        both = ~gnan & ~wnan
        if name in UNARY_CLOSE:
            tol = 2 if name == "htanh_approx" else 1
            bad |= both & (_ulps(got, want) > tol)
        elif name in ("hmax", "hmin", "hmax_nan", "hmin_nan", "hfma_relu", "hadd_sat",
                      "hsub_sat", "hmul_sat", "hfma_sat"):
            bad |= both & (_f64(got) != _f64(want))      # (signed zeros may differ)
        else:
            bad |= both & (got.view(np.uint16) != want.view(np.uint16))
        i = np.flatnonzero(bad)
        assert i.size == 0, (f"{ctx}{name}: {i.size} differ, e.g. at {i[:3]}: "
                             f"got {got[i[:3]]} want {want[i[:3]]}")
    cmp_names = list(CMP) + ["hisnan", "<", "<=", "==", "!=", ">", ">="]
    for row, name in enumerate(cmp_names):
        i = np.flatnonzero(oflag[row] != rflag[row])
        assert i.size == 0, f"{ctx}{name}: {i.size} differ, e.g. at {i[:3]}"
    for row, name in enumerate(TO_INT):
        i = np.flatnonzero(oint[row] != rint[row])
        assert i.size == 0, (f"{ctx}{name}: {i.size} differ, e.g. at {i[:3]}: "
                             f"got {oint[row][i[:3]]} want {rint[row][i[:3]]}")
    np.testing.assert_array_equal(oisinf, risinf)


def _grid(n):
    return (n + 127) // 128, 128


def test_all_functions_simulator():
    a, b, c, f, ints = _inputs(160)
    outs = _run(lambda *args: simulator.run(bf16_all, *_grid(a.size), *args), a, b, c, f, ints)
    _check(outs, _references(a, b, c, f, ints), "simulator ")


def _on_the_gpu(*args):
    """bf16_all on the GPU over host inputs; its outputs (the arguments after the five inputs)
    copied back into the host arrays."""
    import cupy as cp
    dev = [cp.asarray(v) for v in args]
    bf16_all[_grid(args[0].size)](*dev)
    for host, d in zip(args[5:], dev[5:]):
        host[...] = cp.asnumpy(d)


@pytest.mark.gpu
@pytest.mark.gpu_only          # (the simulator runs the same check on fewer values)
def test_all_functions_gpu():
    a, b, c, f, ints = _inputs(6000, seed=1)

    outs = _run(_on_the_gpu, a, b, c, f, ints)
    _check(outs, _references(a, b, c, f, ints), "GPU ")


@pytest.mark.gpu
@pytest.mark.gpu_only          # (the simulator runs the same check on fewer values)
def test_every_bfloat16_value_on_the_gpu():
    """All 65,536 bfloat16 values through every function, GPU against the reference."""
    a = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(BF)
    b = a[::-1].copy()
    _, _, c, f, ints = _inputs(a.size - 37, seed=2)
    c, f, ints = c[:a.size], f[:a.size], ints[:, :a.size]

    outs = _run(_on_the_gpu, a, b, c, f, ints)
    _check(outs, _references(a, b, c, f, ints), "GPU (all values) ")


# ---------------------------------------------------------------------------------------------
# PTX

SIG = ("void(bfloat16[::1], bfloat16[::1], bfloat16[::1], float32[::1], int64[:, ::1], "
       "bfloat16[:, ::1], boolean[:, ::1], int64[:, ::1], int32[::1])")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_all_functions_ptx_assembles(arch):
    ptx = bf16_all.compile(SIG, arch=arch).ptx
    assemble(ptx, arch)
    assert "fma.rn.bf16" in ptx and "max.NaN.bf16" in ptx and "cvt.rn.bf16.f32" in ptx
    if arch == "sm_90":
        for instr in ("add.rn.bf16", "mul.rn.bf16", "sub.rn.bf16", "max.bf16", "min.bf16",
                      "cvt.rn.bf16.f64", "setp.lt.bf16", "abs.bf16", "neg.bf16"):
            assert instr in ptx, instr


def _sum(x, y):
    return x + y


@pytest.mark.parametrize("other, result", [("bfloat16", "bfloat16"), ("int8", "bfloat16"),
                                           ("uint8", "bfloat16"), ("boolean", "bfloat16"),
                                           ("int16", "float32"), ("float16", "float32"),
                                           ("float32", "float32"), ("int32", "float64"),
                                           ("int64", "float64"), ("float64", "float64")])
def test_arithmetic_types_as_numba_cuda_and_ml_dtypes(other, result):
    _, restype = compile_ptx(_sum, f"(bfloat16, {other})", device=True)
    assert str(restype) == result
    # ... and the simulator's values (ml_dtypes scalars) promote alike
    x = BF(1.5)
    y = np.dtype(other if other != "boolean" else "bool").type(1)
    assert np.dtype(type(x + y)).name == result


def test_math_functions_stay_bfloat16():
    def f(x):
        return math.sqrt(x) + math.exp(x)
    _, restype = compile_ptx(f, "(bfloat16,)", device=True)
    assert restype == bfloat16


def test_constants_round_once_to_nearest_even():
    def f(out):
        # just above a midpoint: 1 + 2**-7 (not 1.0)
        out[0] = cuda.bf16.bfloat16_as_short(cuda.bf16.bfloat16(1.0 + 2.0 ** -8 + 2.0 ** -30))
    ptx, _ = compile_ptx(f, "void(int16[::1])")
    assert "st.global.b16 \t[%rd2], 16257;" in ptx
    assert bits_of(1.0 + 2.0 ** -8 + 2.0 ** -30) == 0x3F81
    assert bits_of(1.0 + 2.0 ** -8) == 0x3F80                       # tie: to even
    assert round_bits(3.4e38, "rz") == 0x7F7F and round_bits(3.4e38, "ru") == 0x7F80


def test_round_bits_matches_ml_dtypes_from_float64():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(3000) * 10.0 ** rng.integers(-45, 39, 3000),
                        rng.integers(0, 1 << 63, 3000, dtype=np.uint64).view(np.float64)])
    want = x.astype(BF).view(np.uint16)
    got = np.array([bits_of(v) for v in x], np.uint16)
    ok = np.isnan(x) | (got == want)
    assert ok.all(), x[~ok][:5]


def test_isinstance_and_conversions_in_device_code():
    @cuda.jit
    def k(out, h):
        a = cuda.bf16.bfloat16(3.14)
        out[0] = 1 if isinstance(a, cuda.bf16.bfloat16) else 0
        out[1] = cuda.int16(a)                # truncates: 3
        out[2] = cuda.float32(cuda.float16(a))
        out[3] = float(a) * cuda.bf16.bfloat16(2)
        out[4] = int(a * cuda.bf16.bfloat16(3))
        out[5] = cuda.float32(cuda.bf16.bfloat16(h))
    out = np.zeros(6, np.float32)
    simulator.run(k, 1, 1, out, np.float16(2.5))
    np.testing.assert_array_equal(out, [1, 3, 3.140625, 6.28125, 9, 2.5])


def test_scalar_and_array_arguments():
    from gpureplace.runtime.arguments import numba_type_of_key, value_key
    from gpureplace.runtime.conversion import match_signature
    key, values = value_key(BF(1.5))
    assert key == ("bfloat16",) and values == (0x3FC0,)
    assert numba_type_of_key(key) == bfloat16
    key, _ = value_key(np.zeros(3, BF)) if False else (("array", np.dtype(BF), 1, "C"), None)
    assert str(numba_type_of_key(key)) == "array(bfloat16, 1d, C)"
    keys, vals = match_signature([(bfloat16,)], [("float64",)], [(1.0 + 2.0 ** -8 + 1e-9,)])
    assert keys == [("bfloat16",)] and vals == [0x3F81]

    @cuda.jit("void(bfloat16[::1], bfloat16)")
    def scale(x, s):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = x[i] * s
    x = np.array([1, 2, 3], np.float32).astype(BF)
    simulator.run(scale, 1, 32, x, 2.5)
    np.testing.assert_array_equal(x.astype(np.float32), [2.5, 5, 7.5])


def test_bad_arguments_name_the_function():
    def f(out):
        out[0] = cuda.bf16.hadd(cuda.bf16.bfloat16(1))
    with pytest.raises(CompileError, match=r"cuda\.bf16\.hadd\(\): takes 2 argument"):
        compile_ptx(f, "void(float32[::1])")

    def g(out, z):
        out[0] = cuda.bf16.hsqrt(z)
    with pytest.raises(CompileError, match=r"cuda\.bf16\.hsqrt\(\): needs bfloat16"):
        compile_ptx(g, "void(float32[::1], complex64)")
    with pytest.raises(RuntimeError, match="only be used inside a kernel"):
        cuda.bf16.hadd(1, 2)


def test_numba_cuda_names_and_module_import():
    import gpureplace.cuda.bf16 as mod
    from gpureplace.cuda.bf16 import bfloat16_to_int16_rn, hfma_relu, nv_bfloat16  # noqa: F401
    assert mod is cuda.bf16 and nv_bfloat16 is bfloat16
    assert mod.int32_to_bfloat16_rz is mod.int2bfloat16_rz
    assert set(bf16_impl.SIGNATURES) >= set(UNARY_EXACT + UNARY_CLOSE + BINARY + TERNARY + CMP +
                                            TO_INT + FROM_INT)
    assert cuda.is_bfloat16_supported() in (True, False)
    assert cuda.bf16.bfloat16(2.5) == BF(2.5) and type(cuda.bf16.bfloat16(1)) is BF


def test_import_gpureplace_does_not_import_ml_dtypes():
    import subprocess
    import sys
    code = ("import sys, gpureplace, gpureplace.cuda; from gpureplace.cuda import compile_ptx\n"
            "def f(x): return x * x\n"
            "compile_ptx(f, '(bfloat16,)', device=True)\n"
            "print('ml_dtypes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_import_gpureplace_does_not_import_decimal():
    # fractions (for the exact bfloat16 rounding of constants) imports decimal: ~40 ms of every
    # process's import, paid only where a bfloat16 constant is rounded
    import subprocess
    import sys
    code = "import sys, gpureplace, gpureplace.cuda\nprint('decimal' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    assert cuda.bf16.bfloat16(1 / 3) == BF(1 / 3)          # the rounding still imports it


def test_a_host_bfloat16_array_is_taken_as_a_process_first_bfloat16():
    """A host ml_dtypes.bfloat16 array passed before anything else in the process used
    bfloat16: Numba knows the dtype only once gpureplace registers it, which the launch's
    check of host arrays asked about first (it was refused as a dtype kernels cannot take)."""
    from conftest import python_process
    program = (
        "import numpy as np, ml_dtypes\n"
        "from gpureplace import cuda\n"
        "@cuda.jit\n"
        "def k(out, a):\n"
        "    i = cuda.grid(1)\n"
        "    if i < a.size:\n"
        "        out[i] = a[i] * 2\n"
        "a = np.arange(4, dtype=np.float32).astype(ml_dtypes.bfloat16)\n"
        "out = np.zeros(4, np.float32)\n"
        "k[1, 4](out, a)\n"
        "print(out.tolist())\n")
    out = python_process(program, GPUREPLACE_BACKEND="simulator")
    assert out.strip().splitlines()[-1] == "[0.0, 2.0, 4.0, 6.0]"
