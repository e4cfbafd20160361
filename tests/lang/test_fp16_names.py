"""cuda.fp16 has every name of numba-cuda's ``numba.cuda.fp16`` (its ``__all__``), each compiled
and simulated with the device's rounding.

One kernel calls every function over arrays of inputs; its PTX is assembled by ptxas for sm_75
and sm_90, and the simulator's results are checked against references computed here from NumPy
float16 arithmetic and exact rounding (float64 holds every half, float32 and integer below 2**53
exactly; ties and fused multiply-adds are decided with ``Fraction``).  The GPU tests (``-m gpu``)
run the same kernel on the GPU: against the simulator, bit for bit where the operation is exact,
and over all 65,536 halves against the references.
"""

import math
import re
from fractions import Fraction

import numpy as np
import pytest

from conftest import assemble
from gpureplace import cuda, simulator
from gpureplace.errors import CompileError

# numba-cuda's numba/cuda/fp16.py __all__, less "typing_registry" and "target_registry" (its
# registries, no kernel-language names): hard-coded, numba-cuda is not imported.
NUMBA_CUDA_FP16 = (
    "__half", "__double2half", "__float2half", "__float2half_rd", "__float2half_rn",
    "__float2half_ru", "__float2half_rz", "__int2half_rd", "__int2half_rn", "__int2half_ru",
    "__int2half_rz", "__ll2half_rd", "__ll2half_rn", "__ll2half_ru", "__ll2half_rz",
    "__short2half_rd", "__short2half_rn", "__short2half_ru", "__short2half_rz", "__uint2half_rd",
    "__uint2half_rn", "__uint2half_ru", "__uint2half_rz", "__ull2half_rd", "__ull2half_rn",
    "__ull2half_ru", "__ull2half_rz", "__ushort2half_rd", "__ushort2half_rn", "__ushort2half_ru",
    "__ushort2half_rz", "__half2char_rz", "__half2float", "__half2int_rd", "__half2int_rn",
    "__half2int_ru", "__half2int_rz", "__half2ll_rd", "__half2ll_rn", "__half2ll_ru",
    "__half2ll_rz", "__half2short_rd", "__half2short_rn", "__half2short_ru", "__half2short_rz",
    "__half2uchar_rz", "__half2uint_rd", "__half2uint_rn", "__half2uint_ru", "__half2uint_rz",
    "__half2ull_rd", "__half2ull_rn", "__half2ull_ru", "__half2ull_rz", "__half2ushort_rd",
    "__half2ushort_rn", "__half2ushort_ru", "__half2ushort_rz", "__short_as_half",
    "__ushort_as_half", "__half_as_short", "__half_as_ushort", "habs", "__habs", "hadd", "__hadd",
    "__hadd_rn", "__hadd_sat", "hdiv", "__hdiv", "heq", "__heq", "__hequ", "hfma", "__hfma",
    "__hfma_relu", "__hfma_sat", "hge", "__hge", "__hgeu", "hgt", "__hgt", "__hgtu", "__hisinf",
    "__hisnan", "hle", "__hle", "__hleu", "hlt", "__hlt", "__hltu", "hmax", "__hmax",
    "__hmax_nan", "hmin", "__hmin", "__hmin_nan", "hmul", "__hmul", "__hmul_rn", "__hmul_sat",
    "hne", "__hne", "hneg", "__hneg", "__hneu", "hsub", "__hsub", "__hsub_rn", "__hsub_sat",
    "atomicAdd", "hceil", "hcos", "hexp", "hexp10", "hexp2", "hfloor", "hlog", "hlog10", "hlog2",
    "hrcp", "hrint", "hrsqrt", "hsin", "hsqrt", "htanh", "htanh_approx", "htrunc",
)

MODES = ("rn", "rz", "rd", "ru")
INTS = {"char": np.int8, "uchar": np.uint8, "short": np.int16, "ushort": np.uint16,
        "int": np.int32, "uint": np.uint32, "ll": np.int64, "ull": np.uint64}
F16 = np.float16


def _category(name):
    """What a name of numba-cuda's cuda.fp16 takes and gives (from CUDA C's cuda_fp16.h)."""
    rules = (("binary", r"(__)?h(add|sub|mul|div|max|min)(_rn|_sat|_nan)?"),
             ("ternary", r"(__)?hfma(_sat|_relu)?"),
             ("compare", r"(__)?h(eq|ne|ge|gt|le|lt)u?"),
             ("unary", r"(__)?h(abs|neg|ceil|floor|trunc|rint|sqrt|rsqrt|rcp|sin|cos|log|log2|"
                       r"log10|exp|exp2|exp10|tanh|tanh_approx)"),
             ("to_int", r"__half2(char|uchar|short|ushort|int|uint|ll|ull)_(rn|rz|rd|ru)"),
             ("from_int", r"__(short|ushort|int|uint|ll|ull)2half_(rn|rz|rd|ru)"),
             ("from_f32", r"__float2half(_rn|_rz|_rd|_ru)?"), ("from_f64", r"__double2half"),
             ("as_int", r"__half_as_u?short"), ("as_half", r"__u?short_as_half"),
             ("isnan", r"__hisnan"), ("isinf", r"__hisinf"), ("to_f32", r"__half2float"),
             ("type", r"__half"), ("atomic", r"atomicAdd"))
    for cat, pattern in rules:
        if re.fullmatch(pattern, name):
            return cat
    raise AssertionError(f"no category for {name}")


CATEGORY = {name: _category(name) for name in NUMBA_CUDA_FP16}
TRANSCENDENTAL = {"hsin", "hcos", "hlog", "hlog2", "hlog10", "hexp", "hexp2", "hexp10", "htanh"}


def _base(name):
    return name[2:] if name.startswith("__h") else name


# ---------------------------------------------------------------------------------------------
# names

def test_every_numba_cuda_fp16_name_is_there():
    assert len(NUMBA_CUDA_FP16) == len(set(NUMBA_CUDA_FP16)) == 128
    missing = [n for n in NUMBA_CUDA_FP16 if not hasattr(cuda.fp16, n)]
    assert not missing, missing
    assert cuda.fp16.__half is cuda.float16
    assert sorted(n for n, _, _ in ROWS) == sorted(set(NUMBA_CUDA_FP16) - {"atomicAdd"})
    import importlib
    mod = importlib.import_module("gpureplace.cuda.fp16")     # numba-cuda: a module
    assert mod is cuda.fp16 and all(hasattr(mod, n) for n in NUMBA_CUDA_FP16)
    # the short names are the same functions as CUDA C's (numba-cuda's `__hadd as hadd`)
    for n in NUMBA_CUDA_FP16:
        if n.startswith("h") and hasattr(cuda.fp16, f"__{n}"):
            assert getattr(cuda.fp16, f"__{n}") is getattr(cuda.fp16, n), n


def test_names_import_from_the_module_as_in_numba_cuda():
    from gpureplace.cuda.fp16 import __hadd_sat, __half2int_rn, atomicAdd, htanh  # noqa: F401
    assert "cuda.fp16.__hadd_sat" in repr(__hadd_sat)
    with pytest.raises(RuntimeError, match=r"cuda\.fp16\.__half2int_rn\(\) can only be used"):
        __half2int_rn(F16(1.5))


# ---------------------------------------------------------------------------------------------
# the kernel: every function over arrays of inputs

def _rows():
    """(name, output array, expression) for each function called by the kernel: every name but
    atomicAdd, ``__half`` as a conversion of the float64 input."""
    rows = []
    ints = list(INTS)
    for name in NUMBA_CUDA_FP16:
        cat = CATEGORY[name]
        call = f"cuda.fp16.{name}"
        if cat in ("binary", "compare"):
            rows.append((name, "ob" if cat == "compare" else "oh", f"{call}(x, y)"))
        elif cat == "ternary":
            rows.append((name, "oh", f"{call}(x, y, z)"))
        elif cat in ("unary", "isnan"):
            rows.append((name, "ob" if cat == "isnan" else "oh", f"{call}(x)"))
        elif cat in ("to_int", "as_int", "isinf"):
            rows.append((name, "oi", f"{call}(x)"))
        elif cat == "to_f32":
            rows.append((name, "of", f"{call}(x)"))
        elif cat == "from_f32":
            rows.append((name, "oh", f"{call}(f[i])"))
        elif cat in ("from_f64", "type"):
            rows.append((name, "oh", f"{call}(d[i])"))
        elif cat in ("from_int", "as_half"):
            cname = name[2:].split("2half")[0].split("_as_half")[0]
            k = ints.index(cname)
            rows.append((name, "oh", f"{call}(cuda.{np.dtype(INTS[cname]).name}(ints[{k}, i]))"))
    return rows


ROWS = _rows()


def _layout():
    out, count = {}, {}
    for name, arr, _ in ROWS:
        out[name] = (arr, count.get(arr, 0))
        count[arr] = count.get(arr, 0) + 1
    return out, count


LAYOUT, COUNTS = _layout()


def _kernel():
    lines = ["def fp16_every(a, b, c, f, d, ints, oh, ob, oi, of):",
             "    i = cuda.grid(1)", "    if i >= a.size:", "        return",
             "    x = a[i]", "    y = b[i]", "    z = c[i]"]
    for name, arr, expr in ROWS:
        lines.append(f"    {arr}[{LAYOUT[name][1]}, i] = {expr}")
    ns = {"cuda": cuda}
    exec(compile("\n".join(lines), "<fp16_every>", "exec"), ns)
    return cuda.jit(ns["fp16_every"])


fp16_every = _kernel()
SIG = ("void(float16[::1], float16[::1], float16[::1], float32[::1], float64[::1], "
       "int64[:, ::1], float16[:, ::1], boolean[:, ::1], int64[:, ::1], float32[:, ::1])")


def _outputs(n):
    return {"oh": np.zeros((COUNTS["oh"], n), F16), "ob": np.zeros((COUNTS["ob"], n), np.bool_),
            "oi": np.zeros((COUNTS["oi"], n), np.int64),
            "of": np.zeros((COUNTS["of"], n), np.float32)}


def _grid(n):
    return (n + 127) // 128, 128


def _half_specials():
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, -3.5,
         0.25, 0.75, 0.999, 1.001, 65504.0, -65504.0, 2.0 ** -24, -(2.0 ** -24), 2.0 ** -14,
         -(2.0 ** -14), 6.1e-5, 3.0 * 2.0 ** -24, 127.5, 128.0, -128.5, -129.0, 255.5, 256.0,
         32767.0, 32768.0, -32768.0, 32770.0, -32800.0, 65535.0, 11.0, 11.1, 3.140625, 1000.5,
         0.0733, 2049.0, 4097.0]
    bits = np.array([0x7C01, 0xFE55, 0x7E00, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x3BFF,
                     0x3C01, 0x7BFF, 0xFBFF], np.uint16)
    with np.errstate(over="ignore"):
        return np.concatenate([np.array(v, np.float64).astype(F16), bits.view(F16)])


def _f32_specials():
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 65504.0, 65504.5, 65519.99, 65520.0,
         65536.0, -65519.99, -65520.0, 1e38, -1e38, 2.0 ** -24, 2.0 ** -25, -(2.0 ** -25),
         1.5 * 2.0 ** -25, 3e-8, -3e-8, 1e-40, -1e-40, 1 + 2.0 ** -11, 1 + 2.0 ** -11 + 2.0 ** -23,
         -(1 + 2.0 ** -11), 2049.0, 2051.0, 0.1, -0.1, 1e-5, -1e-5, 6.1e-5, 1.0001, 2.0 ** -14]
    return np.array(v, np.float64).astype(np.float32)


def _f64_specials():
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, 1 + 2.0 ** -11 + 2.0 ** -40,
         1 + 2.0 ** -11 - 2.0 ** -40, -(1 + 2.0 ** -11 + 2.0 ** -40), 1 + 2.0 ** -11,
         1 + 3 * 2.0 ** -11, 65519.99999999, 65520.0, 2.0 ** -25, 2.0 ** -25 + 2.0 ** -60,
         1e300, -1e-300, 0.1, 2049.0000001, 2.0 ** -24 * 1.5]
    return np.array(v, np.float64)


def _int_specials(t):
    info = np.iinfo(t)
    v = [0, 1, 2, 3, 2049, 2051, 4097, 65504, 65505, 65519, 65520, 65535, 65536, 70000,
         info.max, info.max - 1, info.min, info.min + 1, -1, -2049, -65520, -70000]
    return [x for x in v if info.min <= x <= info.max]


def _inputs(n, seed=0, halves=None):
    """a, b, c (float16), f (float32), d (float64), ints (int64 [8, m]) of m = len(a)."""
    rng = np.random.default_rng(seed)
    if halves is None:
        bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
        halves = np.concatenate([_half_specials(), bits.view(F16),
                                 (rng.standard_normal(n) * 3).astype(F16)])
    a = halves
    m = a.size
    b = np.roll(a, 7)
    b[::5] = a[::5]                                   # equal pairs for heq / hge / hle
    b[1::11] = -a[1::11]                              # (-x, x): signed zeros for the maxima
    c = rng.permutation(a)

    def fill(specials, make):
        out = np.concatenate([specials, make(max(m - specials.size, 0))])[:m]
        return out if out.size == m else np.resize(out, m)
    f = fill(_f32_specials(), lambda k: np.concatenate([
        (rng.standard_normal(k // 2) * 100).astype(np.float32),
        rng.integers(0, 1 << 32, size=k - k // 2, dtype=np.uint64).astype(np.uint32)
        .view(np.float32)]))
    with np.errstate(invalid="ignore", over="ignore"):     # doubles at and near ties of halves
        half_ulp = np.spacing(np.abs(a)).astype(np.float64) / 2
        near = a.astype(np.float64) + rng.choice([-1, 1], m) * half_ulp * \
            rng.choice([1, 1 + 2.0 ** -30, 1 - 2.0 ** -30, 0.5], m)
    d = fill(_f64_specials(), lambda k: np.where(np.isfinite(near[:k]), near[:k],
                                                 rng.standard_normal(k) * 1e3))
    ints = np.zeros((len(INTS), m), np.int64)
    for k, t in enumerate(INTS.values()):
        info = np.iinfo(t)
        lo, hi = (-(2 ** 63), 2 ** 63 - 1) if info.bits == 64 else (int(info.min), int(info.max))
        wide = rng.integers(lo, hi, size=m, dtype=np.int64, endpoint=True)
        small = rng.integers(max(lo, -70000), min(hi, 70000), size=m, dtype=np.int64,
                             endpoint=True)
        col = np.where(rng.random(m) < 0.5, wide, small)
        sp = _int_specials(t)
        col[:len(sp)] = [x if x < 2 ** 63 else x - 2 ** 64 for x in sp]   # (uint64 as int64)
        ints[k] = col
    return a, b, c, f, d, ints


def _run_simulator(inputs):
    outs = _outputs(inputs[0].size)
    simulator.run(fp16_every, *_grid(inputs[0].size), *inputs, *outs.values())
    return outs


def _run_gpu(inputs):
    import cupy as cp
    outs = _outputs(inputs[0].size)
    dev_in = [cp.asarray(v) for v in inputs]
    dev_out = {k: cp.asarray(v) for k, v in outs.items()}
    fp16_every[_grid(inputs[0].size)](*dev_in, *dev_out.values())
    return {k: cp.asnumpy(v) for k, v in dev_out.items()}


def _row(outs, name):
    arr, k = LAYOUT[name]
    return outs[arr][k]


# ---------------------------------------------------------------------------------------------
# references: NumPy float16 arithmetic and exact rounding

def round_exact(q, mode="rn"):
    """The exact number ``q`` (int, float or Fraction) rounded once to float16 in ``mode``, by
    integer arithmetic on its scaled value: overflow to inf where the mode rounds away from
    zero, else to 65504."""
    if isinstance(q, float) and not math.isfinite(q):
        return F16(q)
    if q == 0:
        return F16(q) if isinstance(q, float) else F16(0.0)      # (a float keeps its sign)
    q = Fraction(q)
    neg = q < 0
    a = -q if neg else q
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1                                       # 2**e <= a < 2**(e + 1)
    quantum = Fraction(2) ** (max(e, -14) - 10)      # 11 significant bits; subnormals below
    s = a / quantum
    n, rest = s.numerator // s.denominator, s - s.numerator // s.denominator
    away = {"rn": rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1),
            "rz": False, "rd": rest > 0 and neg, "ru": rest > 0 and not neg}[mode]
    n += away
    value = n * quantum
    if value > 65504:
        big = mode == "rn" or (mode == "rd" and neg) or (mode == "ru" and not neg)
        return F16(-np.inf if neg else np.inf) if big else F16(-65504.0 if neg else 65504.0)
    return F16(-float(value) if neg else float(value))


def round_f64(x, mode):
    """float64 values taken as exact (NaN, inf and the float64 of huge integers included),
    rounded once to float16 in ``mode``: NumPy's float64 -> float16 (to nearest even, one
    rounding) and a step to the neighbour where that lies on the wrong side."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        rn = x.astype(F16)
        if mode == "rn":
            return rn
        v = rn.astype(np.float64)
        above, below = v > x, v < x
        if mode == "rz":
            down, up = above & (x > 0), below & (x < 0)
        elif mode == "rd":
            down, up = above, np.zeros_like(above)
        else:
            down, up = np.zeros_like(below), below
        out = np.where(down, np.nextafter(rn, F16(-np.inf)), rn)
        return np.where(up, np.nextafter(rn, F16(np.inf)), out).astype(F16)


def _sat(r):
    r = np.asarray(r, F16)
    return np.where(r > 0, np.where(r < 1, r, F16(1)), F16(0)).astype(F16)


def _fma(a, b, c):
    """a * b + c rounded once: the float64 sum where it is exact (TwoSum), else Fraction."""
    x, y, z = (v.astype(np.float64) for v in (a, b, c))
    with np.errstate(all="ignore"):
        p = x * y                                    # exact: 22 significant bits
        s = p + z
        t = s - p
        err = (p - (s - t)) + (z - t)
        out = s.astype(F16)
    for i in np.flatnonzero(np.isfinite(s) & (err != 0)):
        out[i] = round_exact(Fraction(float(x[i])) * Fraction(float(y[i])) +
                             Fraction(float(z[i])))
    return out


def _maximum(x, y, larger):
    """max / min with NaN winning and -0.0 < +0.0 (cuda_fp16.h's __hmax_nan / __hmin_nan)."""
    with np.errstate(invalid="ignore"):
        pick = np.where(x > y, x, y) if larger else np.where(x < y, x, y)
        zeros = (x == 0) & (y == 0)
        sx, sy = np.signbit(x), np.signbit(y)
        zero = np.where((sx & sy) if larger else (sx | sy), F16(-0.0), F16(0.0))
        out = np.where(zeros, zero, pick)
        return np.where(np.isnan(x) | np.isnan(y), F16(np.nan), out).astype(F16)


def _to_int(h, t, mode):
    v = h.astype(np.float64)
    r = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[mode](v)
    info = np.iinfo(t)
    out = np.zeros(v.size, t)
    fin = np.isfinite(r)
    out[fin] = np.clip(r[fin], max(float(info.min), -1e5), min(float(info.max), 1e5)).astype(t)
    out[r == np.inf] = info.max
    out[r == -np.inf] = info.min
    out[np.isnan(r)] = np.uint64(1 << 63).astype(t) if info.bits == 64 else 0   # (NaN)
    return out.astype(np.int64)                      # (as the kernel stores it)


def references(a, b, c, f, d, ints):
    """name -> the expected row, for every function of the kernel."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    ref = {}
    with np.errstate(all="ignore"):
        arith = {"hadd": x + y, "hsub": x - y, "hmul": x * y, "hdiv": x / y}   # (+ - * exact)
        fma = _fma(a, b, c)
        unary = {"habs": np.abs(a), "hneg": -a, "hceil": np.ceil(a), "hfloor": np.floor(a),
                 "htrunc": np.trunc(a), "hrint": np.rint(a), "hsqrt": round_f64(np.sqrt(x), "rn"),
                 "hrcp": round_f64(1.0 / x, "rn"), "hrsqrt": round_f64(1.0 / np.sqrt(x), "rn"),
                 "hsin": np.sin(x), "hcos": np.cos(x), "hlog": np.log(x), "hlog2": np.log2(x),
                 "hlog10": np.log10(x), "hexp": np.exp(x), "hexp2": np.exp2(x),
                 "hexp10": np.power(10.0, x), "htanh": np.tanh(x), "htanh_approx": np.tanh(x)}
        cmp = {"eq": x == y, "ne": (x < y) | (x > y), "ge": x >= y, "gt": x > y, "le": x <= y,
               "lt": x < y}
        unordered = {"eq": ~((x < y) | (x > y)), "ne": x != y, "ge": ~(x < y), "gt": ~(x <= y),
                     "le": ~(x > y), "lt": ~(x >= y)}
        for name in NUMBA_CUDA_FP16:
            cat, base = CATEGORY[name], _base(name)
            if cat == "binary":
                op, _, suffix = base.partition("_")
                if op in arith:
                    r = round_f64(arith[op], "rn")
                    ref[name] = _sat(r) if suffix == "sat" else r
                elif suffix == "nan":
                    ref[name] = _maximum(a, b, op == "hmax")
                else:
                    ref[name] = (np.fmax if op == "hmax" else np.fmin)(a, b)
            elif cat == "ternary":
                ref[name] = {"hfma": fma, "hfma_sat": _sat(fma),
                             "hfma_relu": np.where(fma <= 0, F16(0), fma).astype(F16)}[base]
            elif cat == "compare":
                ref[name] = unordered[base[1:3]] if base.endswith("u") else cmp[base[1:]]
            elif cat == "unary":
                ref[name] = np.asarray(unary[base]).astype(F16)
            elif cat == "isnan":
                ref[name] = np.isnan(x)
            elif cat == "isinf":
                ref[name] = np.where(x == np.inf, 1, np.where(x == -np.inf, -1, 0))
            elif cat == "to_f32":
                ref[name] = a.astype(np.float32)
            elif cat == "to_int":
                cname, mode = name[len("__half2"):].split("_")
                ref[name] = _to_int(a, INTS[cname], mode)
            elif cat == "as_int":
                ref[name] = a.view(np.int16 if name.endswith("_short") else np.uint16) \
                    .astype(np.int64)
            elif cat == "from_f32":
                mode = name.rpartition("_")[2] if name != "__float2half" else "rn"
                ref[name] = round_f64(f.astype(np.float64), mode)
            elif cat in ("from_f64", "type"):
                ref[name] = round_f64(d, "rn")
            elif cat == "from_int":
                cname, mode = name[2:].split("2half_")
                k = list(INTS).index(cname)
                ref[name] = round_f64(ints[k].astype(INTS[cname]).astype(np.float64), mode)
            elif cat == "as_half":
                k = list(INTS).index(name[2:].split("_as_half")[0])
                ref[name] = ints[k].astype(np.int16).view(F16)
    return ref


def _order(h):
    bits = np.asarray(h, F16).view(np.uint16).astype(np.int32)
    return np.where(bits & 0x8000, -(bits & 0x7FFF), bits)


def _compare(name, got, want, how, ctx):
    """how: "bits" (bit for bit, NaN payloads too), "exact" (bit for bit, NaNs by position),
    "value" (+0.0 == -0.0, NaNs by position), ("ulps", k), ("approx", k, abs)."""
    if got.dtype != F16:
        bad = got != want
        if got.dtype.kind == "f":                    # (float32: bit for bit, NaNs by position)
            bad = (got.view(np.uint32) != np.asarray(want, got.dtype).view(np.uint32)) & \
                ~(np.isnan(got) & np.isnan(want))
        i = np.flatnonzero(bad)
        assert i.size == 0, (f"{ctx}{name}: {i.size} differ, e.g. at {i[:4]}: got {got[i[:4]]}, "
                             f"want {want[i[:4]]}")
        return
    want = np.asarray(want, F16)
    gnan, wnan = np.isnan(got), np.isnan(want)
    bad = gnan != wnan
    both = ~gnan & ~wnan
    if how == "bits":
        bad = got.view(np.uint16) != want.view(np.uint16)
    elif how == "exact":
        bad |= both & (got.view(np.uint16) != want.view(np.uint16))
    elif how == "value":
        bad |= both & (got != want)
    elif how[0] == "ulps":
        bad |= both & (np.abs(_order(got) - _order(want)) > how[1])
    else:                                            # an approximation: ulps or an absolute error
        with np.errstate(all="ignore"):
            far = np.abs(got.astype(np.float64) - want.astype(np.float64)) > how[2]
        bad |= both & (np.abs(_order(got) - _order(want)) > how[1]) & far
    i = np.flatnonzero(bad)
    assert i.size == 0, (f"{ctx}{name}: {i.size} differ, e.g. at {i[:4]}: got {got[i[:4]]} "
                         f"(bits {got[i[:4]].view(np.uint16)}), want {want[i[:4]]} "
                         f"(bits {want[i[:4]].view(np.uint16)})")


def _how_against_reference(name, device):
    """How a result compares with its reference: exact, but where it is not correctly rounded
    (the float32 transcendental functions, 1/sqrt: one ulp) or an approximation."""
    base = _base(name)
    if base in TRANSCENDENTAL or base == "hrsqrt":
        return ("ulps", 1)
    if base == "htanh_approx":
        # the simulator: tanh correctly rounded; the GPU: tanh.approx.f16 (PTX leaves its error
        # unspecified beyond "approximate"): a few ulps, or the subnormal range
        return ("approx", 4, 2.0 ** -14) if device else ("ulps", 1)
    if base in ("hmax", "hmin"):
        return "value"            # max.f16 / fmax of +0.0 and -0.0: either may come back
    if CATEGORY[name] in ("as_half",):
        return "bits"
    return "exact"


def _check_against_references(outs, inputs, ctx, device=False):
    ref = references(*inputs)
    for name, _, _ in ROWS:
        _compare(name, _row(outs, name), ref[name], _how_against_reference(name, device), ctx)


# ---------------------------------------------------------------------------------------------
# PTX


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_every_function_compiles_and_assembles(arch):
    ptx = fp16_every.compile(SIG, arch=arch).ptx
    assemble(ptx, arch)
    for instr in ("cvt.rz.f16.f32", "cvt.rm.f16.f32", "cvt.rp.f16.f32", "cvt.rn.f16.f32",
                  "cvt.rn.f16.f64", "cvt.rz.f16.s64", "cvt.rp.f16.u64", "cvt.rm.f16.s16",
                  "cvt.rz.f16.u32", "cvt.rni.s32.f16", "cvt.rmi.u16.f16", "cvt.rpi.s64.f16",
                  "cvt.rzi.u64.f16", "cvt.rzi.s8.f16", "cvt.rzi.u8.f16", "tanh.approx.f16",
                  "add.rn.f16", "sub.rn.f16", "mul.rn.f16", "fma.rn.f16", "setp.equ.f16",
                  "setp.ltu.f16", "setp.nan.f16", "cvt.f32.f16"):
        assert instr in ptx, (arch, instr)
    if arch == "sm_90":
        assert "max.NaN.f16" in ptx and "min.NaN.f16" in ptx and "max.f16" in ptx


def test_rn_operations_are_never_contracted_into_an_fma():
    @cuda.jit
    def k(a, out):
        out[0] = cuda.fp16.__hadd_rn(cuda.fp16.__hmul_rn(a[0], a[1]), a[2])
        out[1] = cuda.fp16.__hsub_rn(cuda.fp16.hmul(a[0], a[1]), a[2])

    ptx = k.compile("void(float16[::1], float16[::1])").ptx
    assert "fma" not in ptx and "mul.rn.f16" in ptx and "add.rn.f16" in ptx
    assemble(ptx)


def test_htanh_approx_is_the_instruction_from_sm_75_and_htanh_below():
    @cuda.jit
    def k(a, out):
        out[0] = cuda.fp16.htanh_approx(a[0])

    sig = "void(float16[::1], float16[::1])"
    assert "tanh.approx.f16" in k.compile(sig, arch="sm_75").ptx
    old = k.compile(sig, arch="sm_70")
    assert "tanh.approx" not in old.ptx
    assert "__nv_tanhf" in "\n".join(t for cf in old.compiled.closure() for t in cf.ir_texts())


def test_conversion_results_have_numba_cudas_types():
    from numba.core import types

    @cuda.jit(device=True)
    def f(h, x, i):
        return (cuda.fp16.__half2char_rz(h), cuda.fp16.__half2uchar_rz(h),
                cuda.fp16.__half2ushort_ru(h), cuda.fp16.__half2uint_rd(h),
                cuda.fp16.__half2ll_rn(h), cuda.fp16.__half2ull_rz(h), cuda.fp16.__hisinf(h),
                cuda.fp16.__hisnan(h), cuda.fp16.__hequ(h, h), cuda.fp16.__half2float(h),
                cuda.fp16.__half_as_short(h), cuda.fp16.__half_as_ushort(h),
                cuda.fp16.__float2half_rz(x), cuda.fp16.__ull2half_rd(i), cuda.fp16.__half(x))

    _, ret = cuda.compile_ptx(f, "(float16, float32, int64)", device=True)
    assert ret == types.Tuple((types.int8, types.uint8, types.uint16, types.uint32, types.int64,
                               types.uint64, types.int32, types.boolean, types.boolean,
                               types.float32, types.int16, types.uint16, types.float16,
                               types.float16, types.float16))


# ---------------------------------------------------------------------------------------------
# the simulator against the references


def test_every_function_in_the_simulator_against_the_references():
    inputs = _inputs(120)
    outs = _run_simulator(inputs)
    _check_against_references(outs, inputs, "simulator ")


def _one(name, *args, out=F16):
    """cuda.fp16.<name>(*args) computed in a one-thread simulated kernel."""
    ns = {"cuda": cuda}
    params = ", ".join(f"p{k}" for k in range(len(args)))
    loads = ", ".join(f"p{k}[0]" for k in range(len(args)))
    exec(f"def k(o, {params}):\n    o[0] = cuda.fp16.{name}({loads})\n", ns)
    res = np.zeros(1, out)
    simulator.run(cuda.jit(ns["k"]), 1, 1, res, *(np.array([a]) for a in args))
    return res[0]


def _bits(h):
    return int(np.asarray(h, F16).view(np.uint16))


def test_directed_conversions_at_the_edges():
    f32 = np.float32
    cases = [  # (function, argument, expected bits)
        ("__float2half_rz", f32(65519.99), 0x7BFF), ("__float2half_rn", f32(65519.99), 0x7BFF),
        ("__float2half_rn", f32(65520.0), 0x7C00), ("__float2half_rz", f32(1e38), 0x7BFF),
        ("__float2half_ru", f32(65504.5), 0x7C00), ("__float2half_rd", f32(-65504.5), 0xFC00),
        ("__float2half_rz", f32(-1e38), 0xFBFF), ("__float2half_ru", f32(-1e38), 0xFBFF),
        ("__float2half_rz", f32(np.inf), 0x7C00), ("__float2half_rd", f32(np.inf), 0x7C00),
        ("__float2half_ru", f32(1e-40), 0x0001), ("__float2half_rd", f32(1e-40), 0x0000),
        ("__float2half_rd", f32(-1e-40), 0x8001), ("__float2half_ru", f32(-1e-40), 0x8000),
        ("__float2half_rz", f32(-1e-40), 0x8000), ("__float2half_rn", f32(2.0 ** -25), 0x0000),
        ("__float2half_rn", f32(1.5 * 2.0 ** -25), 0x0001),
        ("__float2half_rn", f32(-0.0), 0x8000), ("__float2half_rz", f32(-0.0), 0x8000),
        ("__float2half", f32(1 + 2.0 ** -11), 0x3C00),               # tie: to even
        ("__float2half_rn", f32(1 + 3 * 2.0 ** -11), 0x3C02),
        ("__float2half_ru", f32(1 + 2.0 ** -23), 0x3C01),
        ("__float2half_rd", f32(-(1 + 2.0 ** -23)), 0xBC01),
        ("__float2half_rz", f32(-(1 + 2.0 ** -23)), 0xBC00),
        ("__double2half", 1 + 2.0 ** -11 + 2.0 ** -40, 0x3C01),   # once, not via float32
        ("__double2half", 65519.99999999, 0x7BFF), ("__double2half", 1e300, 0x7C00),
        ("__int2half_rn", np.int32(2049), 0x6800), ("__int2half_rn", np.int32(2051), 0x6802),
        ("__int2half_rz", np.int32(2049), 0x6800), ("__int2half_ru", np.int32(2049), 0x6801),
        ("__int2half_rd", np.int32(-2049), 0xE801), ("__int2half_rz", np.int32(-2049), 0xE800),
        ("__int2half_rz", np.int32(70000), 0x7BFF), ("__int2half_rn", np.int32(65520), 0x7C00),
        ("__int2half_rn", np.int32(65519), 0x7BFF), ("__uint2half_ru", np.uint32(65505), 0x7C00),
        ("__ull2half_rd", np.uint64(2 ** 64 - 1), 0x7BFF),
        ("__ull2half_ru", np.uint64(2 ** 64 - 1), 0x7C00),
        ("__ll2half_rz", np.int64(-(2 ** 63)), 0xFBFF), ("__ll2half_rd", np.int64(-(2 ** 63)),
                                                         0xFC00),
        ("__short2half_ru", np.int16(-32767), 0xF7FF), ("__short2half_rd", np.int16(-32767),
                                                        0xF800),
        ("__ushort2half_rz", np.uint16(65535), 0x7BFF), ("__ushort2half_rn", np.uint16(0), 0),
    ]
    bad = []
    for name, arg, want in cases:
        got = _bits(_one(name, arg))
        if got != want:
            bad.append(f"{name}({arg!r}) = 0x{got:04X}, want 0x{want:04X}")
        mode = name.rpartition("_")[2] if name[-3:-2] == "_" else "rn"
        assert _bits(round_exact(int(arg) if isinstance(arg, np.integer) else float(arg),
                                 mode)) == want, (name, arg)     # (the reference agrees)
    assert not bad, bad


def test_conversions_to_integers_at_the_edges():
    h = F16
    cases = [("__half2int_rn", h(2.5), 2), ("__half2int_rn", h(3.5), 4),
             ("__half2int_rn", h(-2.5), -2), ("__half2int_rd", h(-0.5), -1),
             ("__half2int_ru", h(-0.5), 0), ("__half2int_ru", h(0.25), 1),
             ("__half2int_rz", h(-1.75), -1), ("__half2int_rn", h(np.nan), 0),
             ("__half2int_rn", h(np.inf), 2 ** 31 - 1), ("__half2int_rz", h(-np.inf), -(2 ** 31)),
             ("__half2uint_rn", h(-1.0), 0), ("__half2uint_ru", h(np.inf), 2 ** 32 - 1),
             ("__half2uint_rd", h(np.nan), 0), ("__half2short_rz", h(65504), 32767),
             ("__half2short_rn", h(-65504), -32768), ("__half2ushort_ru", h(65504), 65504),
             ("__half2ushort_rd", h(-3.0), 0), ("__half2char_rz", h(-200), -128),
             ("__half2char_rz", h(127.9), 127), ("__half2uchar_rz", h(300), 255),
             ("__half2uchar_rz", h(-1.5), 0), ("__half2char_rz", h(np.nan), 0),
             ("__half2ll_rn", h(np.nan), -(2 ** 63)), ("__half2ll_rd", h(-65504), -65504),
             ("__half2ll_ru", h(np.inf), 2 ** 63 - 1), ("__half2ull_rn", h(np.nan), 2 ** 63),
             ("__half2ull_rz", h(np.inf), 2 ** 64 - 1), ("__half2ull_rd", h(-0.0), 0),
             ("__half2int_rn", h(2.0 ** -24), 0), ("__half2int_ru", h(2.0 ** -24), 1),
             ("__half2int_rd", h(-(2.0 ** -24)), -1)]
    bad = []
    for name, arg, want in cases:
        cname = name[len("__half2"):].split("_")[0]
        got = int(_one(name, arg, out=INTS[cname]))
        if got != want:
            bad.append(f"{name}({arg}) = {got}, want {want}")
    assert not bad, bad


def test_saturation_relu_and_nan_handling():
    h, nan = F16, F16(np.nan)
    assert _bits(_one("__hadd_sat", h(0.5), h(0.75))) == 0x3C00              # 1.0
    assert _bits(_one("__hsub_sat", h(-0.0), h(0.0))) == 0x0000              # -0.0: +0.0
    assert _bits(_one("__hmul_sat", h(-2.0), h(3.0))) == 0x0000
    assert _bits(_one("__hadd_sat", nan, h(1.0))) == 0x0000                  # NaN: +0.0
    assert _bits(_one("__hmul_sat", h(np.inf), h(0.0))) == 0x0000            # (inf * 0)
    assert _bits(_one("__hadd_sat", h(2.0 ** -24), h(0.0))) == 0x0001        # subnormal kept
    assert _bits(_one("__hfma_sat", h(0.5), h(0.5), h(0.75))) == 0x3C00
    assert _bits(_one("__hfma_sat", h(-1.0), h(2.0 ** -24), h(0.0))) == 0x0000
    assert _bits(_one("__hfma_relu", h(-1.0), h(1.0), h(0.5))) == 0x0000     # -0.5: +0.0
    assert _bits(_one("__hfma_relu", h(-1.0), h(0.0), h(-0.0))) == 0x0000    # -0.0: +0.0
    assert _bits(_one("__hfma_relu", h(2.0), h(3.0), h(0.5))) == _bits(h(6.5))
    assert np.isnan(_one("__hfma_relu", nan, h(1.0), h(0.0)))               # NaN stays
    assert np.isnan(_one("__hfma_relu", h(np.inf), h(0.0), h(1.0)))
    # fma rounds once: (1 + 2**-10)(1 + 2**-10) - 1 = 2**-9 + 2**-20 exactly, a tie (to even)
    assert _bits(_one("__hfma", h(1 + 2.0 ** -10), h(1 + 2.0 ** -10), h(-1.0))) == \
        _bits(round_exact(Fraction(2) ** -9 + Fraction(2) ** -20))
    assert _bits(_one("__hmax_nan", h(0.0), h(-0.0))) == 0x0000
    assert _bits(_one("__hmax_nan", h(-0.0), h(0.0))) == 0x0000
    assert _bits(_one("__hmin_nan", h(0.0), h(-0.0))) == 0x8000
    assert _bits(_one("__hmin_nan", h(-0.0), h(0.0))) == 0x8000
    for name in ("__hmax_nan", "__hmin_nan"):
        assert np.isnan(_one(name, nan, h(1.0))) and np.isnan(_one(name, h(1.0), nan))
    for name in ("hmax", "__hmax", "hmin", "__hmin"):
        assert _one(name, nan, h(1.0)) == 1.0 and _one(name, h(1.0), nan) == 1.0
    assert _one("__hisnan", nan, out=np.bool_) and not _one("__hisnan", h(np.inf), out=np.bool_)
    assert _one("__hisinf", h(np.inf), out=np.int32) == 1
    assert _one("__hisinf", h(-np.inf), out=np.int32) == -1
    assert _one("__hisinf", nan, out=np.int32) == 0
    assert _one("__hisinf", h(65504), out=np.int32) == 0
    for name, want in (("__hequ", True), ("__hneu", True), ("__hltu", True), ("__heq", False),
                       ("__hne", False), ("hlt", False)):
        assert bool(_one(name, nan, h(1.0), out=np.bool_)) is want, name
    assert not _one("__hneu", h(0.0), h(-0.0), out=np.bool_)


def test_bit_casts_keep_every_bit():
    assert _one("__half_as_short", F16(-0.0), out=np.int16) == -32768
    assert _one("__half_as_ushort", F16(np.inf), out=np.uint16) == 0x7C00
    assert _bits(_one("__short_as_half", np.int16(0x7C01))) == 0x7C01        # a signalling NaN
    assert _bits(_one("__ushort_as_half", np.uint16(0x0001))) == 0x0001      # a subnormal
    assert _bits(_one("__short_as_half", np.int16(-1))) == 0xFFFF


def test_other_arguments_convert_at_the_call_as_in_numba_cuda():
    # a float64 for __float2half_rz converts to float32 first (to nearest), an int to float16
    assert _bits(_one("__float2half_rz", 1 + 2.0 ** -11 + 2.0 ** -30)) == 0x3C00
    assert _bits(_one("__hadd_sat", 0.25, 0.5)) == _bits(F16(0.75))
    assert _one("__half2int_rn", np.float32(2.5), out=np.int32) == 2
    assert _bits(_one("__int2half_rz", np.int64(2 ** 32 + 2049))) == 0x6800   # wraps to int32
    assert _one("__half2float", F16(1.5), out=np.float32) == 1.5

    @cuda.jit
    def bad(x, out):
        out[0] = cuda.fp16.__hadd_sat(x[0], 1j)

    with pytest.raises(CompileError, match=r"cuda\.fp16\.__hadd_sat\(\).*complex128"):
        bad.compile("void(float16[::1], float16[::1])")

    @cuda.jit
    def count(x, out):
        out[0] = cuda.fp16.__int2half_rd(x[0], x[1])

    with pytest.raises(CompileError, match=r"cuda\.fp16\.__int2half_rd\(\): takes 1 argument"):
        count.compile("void(int32[::1], float16[::1])")


def test_half_is_the_float16_type():
    @cuda.jit
    def k(d, i, out):
        out[0] = cuda.fp16.__half(d[0])
        out[1] = cuda.fp16.__half(i[0])

    d = np.array([1 + 2.0 ** -11 + 2.0 ** -40])
    i = np.array([2051], np.int64)
    out = np.zeros(2, F16)
    simulator.run(k, 1, 1, d, i, out)
    assert out.view(np.uint16).tolist() == [0x3C01, 0x6802]
    ptx = k.compile("void(float64[::1], int64[::1], float16[::1])").ptx
    assert "cvt.rn.f16.f64" in ptx and "cvt.rn.f16.s64" in ptx
    assemble(ptx)


# ---------------------------------------------------------------------------------------------
# atomicAdd


@cuda.jit("void(CPointer(float16), float16[::1], float16[::1])")
def atomic_count(total, olds, memory):
    i = cuda.grid(1)
    if i < olds.size:
        olds[i] = cuda.fp16.atomicAdd(total, 1.0)


def test_atomic_add_in_the_simulator():
    memory = np.zeros(4, F16)
    olds = np.zeros(300, F16)
    simulator.run(atomic_count, 3, 100, memory.ctypes.data, olds, memory)
    assert memory[0] == 300                                  # (1.0 each: exact in half)
    assert sorted(olds.astype(np.float64)) == list(range(300))
    assert not memory[1:].any()


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_atomic_add_ptx(arch):
    ptx = atomic_count.compile("void(CPointer(float16), float16[::1], float16[::1])",
                               arch=arch).ptx
    assert re.search(r"atom(\.global)?\.add\.noftz\.f16", ptx)
    assemble(ptx, arch)


def test_atomic_add_below_sm_70_is_refused_at_the_users_line():
    @cuda.jit
    def k(p, v):
        v[0] = cuda.fp16.atomicAdd(p, v[1])

    line = k.py_func.__code__.co_firstlineno + 2          # (the decorator's line, the def's)
    with pytest.raises(CompileError) as info:
        k.compile("void(CPointer(float16), float16[::1])", arch="sm_60")
    msg = str(info.value)
    assert "cuda.fp16.atomicAdd()" in msg and "sm_70" in msg and "compiled for sm_60" in msg
    assert f"line {line}" in msg or f":{line}" in msg, msg


def test_atomic_add_needs_a_float16_pointer():
    @cuda.jit
    def k(a, v):
        v[0] = cuda.fp16.atomicAdd(a, v[1])

    with pytest.raises(CompileError, match=r"cuda\.fp16\.atomicAdd\(\): the address must be a "
                                           r"pointer to float16"):
        k.compile("void(float16[::1], float16[::1])")


# ---------------------------------------------------------------------------------------------
# GPU


def _gpu_against_simulator(gpu, sim):
    for name, _, _ in ROWS:
        base = _base(name)
        if base in TRANSCENDENTAL:
            how = ("ulps", 1)                    # libdevice's float32 function / exact tanh...
        elif base == "htanh_approx":
            how = ("approx", 4, 2.0 ** -14)      # tanh.approx.f16 / the exact tanh
        elif base in ("hmax", "hmin"):
            how = "value"
        elif CATEGORY[name] == "as_half":
            how = "bits"
        else:
            how = "exact"                        # the same rounding, bit for bit
        _compare(name, _row(gpu, name), _row(sim, name), how, "GPU vs simulator ")


@pytest.mark.gpu
@pytest.mark.gpu_only          # (compares the GPU with the simulator: never simulated)
def test_every_function_on_the_gpu_against_the_simulator():
    inputs = _inputs(120, seed=3)
    gpu = _run_gpu(inputs)
    sim = _run_simulator(inputs)
    _gpu_against_simulator(gpu, sim)
    _check_against_references(gpu, inputs, "GPU ", device=True)

    import cupy as cp
    memory = cp.zeros(4, dtype=F16)
    olds = cp.zeros(3000, dtype=F16)
    atomic_count[30, 100](memory.data.ptr, olds, memory)
    got = cp.asnumpy(memory)
    # 3000 additions of 1.0: exact up to 2048, where 2048 + 1 rounds to even (2048) each time
    assert got[0] == 2048.0 and not got[1:].any()
    seen = np.sort(cp.asnumpy(olds).astype(np.float64))
    assert list(seen[:2048]) == list(range(2048)) and (seen[2048:] == 2048).all()


@pytest.mark.gpu
@pytest.mark.gpu_only          # (the simulator runs the same check on fewer values)
def test_every_half_value_on_the_gpu_against_the_references():
    """All 65,536 halves as the first operand of every function."""
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(F16)
    inputs = _inputs(0, seed=4, halves=halves)
    _check_against_references(_run_gpu(inputs), inputs, "GPU (all halves) ", device=True)
