"""A differential fuzzer (issue 14, part 7): random well-typed kernels from tests/kernelgen.py.

For each seed, kernelgen builds a program and renders it as a gpureplace kernel and as a NumPy
reference with the device's semantics spelt out.  On the CPU (CI):

  (a) the kernel compiles and ptxas assembles its PTX;
  (b) the simulator's results equal the reference's, bit for bit (NaNs equal whatever their
      payload; float accumulators compare with ==, since +0.0 and -0.0 may meet there in any
      order).

On a GPU (``-m gpu``; under GPUREPLACE_TEST_SIMULATOR=1 the "device" is the simulator again):

  (c) the device's results equal the simulator's: integers and booleans exactly, floats exactly
      too except the results of libdevice's approximate functions (sin, exp, pow...), which
      must lie within ``(CUDA's documented maximum ulp error + NUMPY_ULPS) * eps`` of each
      other, relative to the larger magnitude (plus as many ulps of the smallest subnormal);
      kernelgen's gpu mode keeps those results (and float products, which LLVM may contract
      into an FMA) away from anything that would magnify a difference (comparisons,
      conversions to integers, sums).

Counts: GPUREPLACE_FUZZ_EXAMPLES kernels per test (default 40 for (a)+(b), 25 for (c)), from
seed GPUREPLACE_FUZZ_SEED (default 0) on.  A failure prints the seed, the kernel and its
reference; ``GPUREPLACE_FUZZ_SEED=<seed> GPUREPLACE_FUZZ_EXAMPLES=1`` runs that one alone.
Each test prints a summary line (``pytest -s`` or ``-rA`` shows it).
"""

from __future__ import annotations

import importlib.util
import math
import os
import tempfile
import time

import numpy as np
import pytest

import kernelgen as kg
from conftest import SIMULATE, assemble, has_gpu
from gpureplace import cuda, simulator

EXAMPLES = os.environ.get("GPUREPLACE_FUZZ_EXAMPLES")
FIRST_SEED = int(os.environ.get("GPUREPLACE_FUZZ_SEED", "0"))
_MODULE_DIR = tempfile.mkdtemp(prefix="gpureplace-fuzz-")


def _count(default):
    return int(EXAMPLES) if EXAMPLES else default


def load_kernel(program, tag=""):
    """The kernel of ``program``, imported from a file (so that tracebacks show its lines)."""
    name = f"fuzz_{program.mode}_{program.seed}{tag}"
    path = os.path.join(_MODULE_DIR, name + ".py")
    with open(path, "w") as fh:
        fh.write(program.kernel_source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


def _signature(arrays):
    from numba import typeof
    return tuple(typeof(a) for a in arrays)


def _outputs(program, arrays):
    return {name: a for name, a in zip(kg.Program.KERNEL_PARAMS, arrays)
            if name.startswith(("out_", "acc_"))}


def compare(program, got, want, tolerances=False, limit=8):
    """Differences between two launches' outputs (lists as ``make_arrays`` orders them), as
    lines; ``tolerances``: the gpu comparison (approximate results within their bound)."""
    lines = []
    got, want = _outputs(program, got), _outputs(program, want)
    for name in got:
        a, b = np.asarray(got[name]), np.asarray(want[name])
        if a.dtype.kind == "f":
            both_nan = np.isnan(a) & np.isnan(b)
            if name.startswith("acc_"):
                same = (a == b) | both_nan
            else:
                bits = a.view(f"u{a.itemsize}") == b.view(f"u{b.itemsize}")
                same = bits | both_nan
                if tolerances:
                    same |= _within(program, name[4:], a, b)
        else:
            same = a == b
        for idx in zip(*np.nonzero(~same)):
            idx = tuple(int(i) for i in idx)
            where = f"thread {idx[0]}, slot {idx[1]}" if len(idx) == 2 else f"slot {idx[0]}"
            lines.append(f"{name}[{', '.join(map(str, idx))}] ({where}): got {a[idx]!r}, "
                         f"expected {b[idx]!r}")
    if len(lines) > limit:
        lines = lines[:limit] + [f"... and {len(lines) - limit} more"]
    return lines


def _within(program, t, a, b):
    """Where |a - b| is within the slot's bound (kernelgen's tolerance of what it stored)."""
    tol = np.zeros(a.shape[1])
    for (ty, slot), rel in program.tolerances.items():
        if ty == t and slot < len(tol) and rel:
            tol[slot] = rel + (kg.EPS[kg.F32] if t == kg.F32 else 0.0)
    tol = np.broadcast_to(tol, a.shape)
    with np.errstate(all="ignore"):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        mag = np.maximum(np.abs(a64), np.abs(b64))
        finite = np.isfinite(a64) & np.isfinite(b64)
        ulps_of_tiny = tol / kg.EPS[kg.F32 if t == kg.F32 else kg.F64]
        close = np.abs(a64 - b64) <= tol * mag + ulps_of_tiny * kg.TINY[t]
        # an overflow on one side only: the other is within the bound of the largest float
        big = np.finfo(a.dtype).max
        overflow = (np.isinf(a64) & (np.abs(b64) >= big * (1 - tol)) & (np.sign(a64) == np.sign(b64))) | \
                   (np.isinf(b64) & (np.abs(a64) >= big * (1 - tol)) & (np.sign(a64) == np.sign(b64)))
    return (tol > 0) & ((finite & close) | overflow)


def report(program, lines, what):
    return "\n".join([
        f"{what}: seed {program.seed} (mode {program.mode})",
        *lines,
        f"rerun: GPUREPLACE_FUZZ_SEED={program.seed} GPUREPLACE_FUZZ_EXAMPLES=1 "
        f".venv/bin/python -m pytest -q tests/fuzz/test_fuzz_differential.py",
        "--- kernel ---", program.kernel_source,
        "--- reference ---", program.reference_source])


def check_cpu(seed):
    """(a) and (b) for one seed; returns a failure report or None."""
    program = kg.generate(seed, "cpu")
    try:
        kernel = load_kernel(program)
        arrays = program.make_arrays()
        sim = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
        simulator.run(kernel, kg.GRID, kg.BLOCK, *sim, compile=True)
        assemble(kernel.compile(_signature(arrays)).ptx)
        want = kg.run_reference(program, arrays)
    except Exception:                         # noqa: BLE001 (reported with the seed)
        import traceback
        return report(program, [traceback.format_exc()], "kernel failed")
    lines = compare(program, sim, want)
    return report(program, lines, "simulator != NumPy reference") if lines else None


def test_fuzz_simulator_agrees_with_numpy_reference():
    n = _count(40)
    start = time.perf_counter()
    failures = []
    for seed in range(FIRST_SEED, FIRST_SEED + n):
        failure = check_cpu(seed)
        if failure:
            failures.append(failure)
    print(f"\nfuzz (a)+(b): {n} kernels compiled, assembled by ptxas and simulated against the "
          f"NumPy reference (seeds {FIRST_SEED}..{FIRST_SEED + n - 1}, {kg.NTHREADS} threads "
          f"each): {len(failures)} failed, {time.perf_counter() - start:.1f} s")
    if failures:
        heads = "\n".join(f.splitlines()[0] for f in failures)
        pytest.fail(f"{len(failures)} of {n} kernels failed:\n{heads}\nthe first:\n"
                    f"{failures[0]}", pytrace=False)


@pytest.mark.gpu
def test_fuzz_gpu_agrees_with_simulator():
    import cupy as cp
    n = _count(25)
    start = time.perf_counter()
    failures = []
    for seed in range(FIRST_SEED, FIRST_SEED + n):
        program = kg.generate(seed, "gpu")
        kernel = load_kernel(program)
        arrays = program.make_arrays()
        device = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in arrays]
        kernel[kg.GRID, kg.BLOCK](*device)
        cp.cuda.runtime.deviceSynchronize()
        got = [cp.asnumpy(d) if isinstance(a, np.ndarray) else a
               for d, a in zip(device, arrays)]
        sim = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
        simulator.run(kernel, kg.GRID, kg.BLOCK, *sim)
        lines = compare(program, got, sim, tolerances=True)
        if lines:
            failures.append(report(program, lines, "GPU != simulator"))
            continue
        lines = compare(program, sim, kg.run_reference(program, arrays))
        if lines:
            failures.append(report(program, lines, "simulator != NumPy reference"))
    what = "the simulator (GPUREPLACE_TEST_SIMULATOR)" if SIMULATE and not has_gpu() else "the GPU"
    print(f"\nfuzz (c): {n} kernels run on {what} and in the simulator (seeds "
          f"{FIRST_SEED}..{FIRST_SEED + n - 1}, {kg.NTHREADS} threads each): {len(failures)} "
          f"failed, {time.perf_counter() - start:.1f} s")
    if failures:
        heads = "\n".join(f.splitlines()[0] for f in failures)
        pytest.fail(f"{len(failures)} of {n} kernels failed:\n{heads}\nthe first:\n"
                    f"{failures[0]}", pytrace=False)


# ---------------------------------------------------------------------------------------------
# The generator itself

def test_generator_is_reproducible():
    a, b = kg.generate(1234), kg.generate(1234)
    assert a.kernel_source == b.kernel_source
    assert a.reference_source == b.reference_source
    for x, y in zip(a.make_arrays(), b.make_arrays()):
        np.testing.assert_array_equal(x, y)
    assert kg.generate(1235).kernel_source != a.kernel_source


def test_type_rules_match_the_compiler():
    """kernelgen's typing table is Numba's as gpureplace's typing context applies it."""
    import operator

    from numba.core import types

    from gpureplace.compiler.target import compilers
    from gpureplace.dispatch.context import default_context
    tc = compilers(default_context)[0]
    tc.refresh()
    nb = {kg.B: types.boolean, kg.I32: types.int32, kg.I64: types.int64, kg.U32: types.uint32,
          kg.U64: types.uint64, kg.F32: types.float32, kg.F64: types.float64}
    back = {v: k for k, v in nb.items()}

    def result(op, *args):
        return back[tc.resolve_function_type(op, tuple(nb[a] for a in args), {}).return_type]

    for a in kg.TYPES:
        for b in kg.TYPES:
            assert result(operator.add, a, b) == kg.arith_type(a, b), (a, b)
            assert result(operator.floordiv, a, b) == kg.arith_type(a, b), (a, b)
            assert result(operator.truediv, a, b) == kg.truediv_type(a, b), (a, b)
            assert back[tc.unify_types(nb[a], nb[b])] == kg.unify(a, b), (a, b)
            assert result(max, a, b) == kg.unify(a, b), (a, b)
            sig = tc.resolve_function_type(operator.lt, (nb[a], nb[b]), {})
            compared = back[sig.args[0]]
            want = kg.cmp_type(a, b)
            assert compared == want if want != "exact" else compared in kg.INTS, (a, b)
            if a != kg.B and b != kg.B:
                assert result(operator.pow, a, b) == kg.pow_type(a, b), (a, b)
            if kg.intlike(a) and kg.intlike(b):
                bitwise = result(operator.and_, a, b)
                assert bitwise == (kg.B if a == b == kg.B else kg.int_result(a, b)), (a, b)
                if a != kg.B:
                    assert result(operator.lshift, a, b) == kg.shift_type(a), (a, b)
        if a != kg.B:
            assert result(operator.neg, a) == kg.unary_type("-", a), a
        if kg.intlike(a):
            assert result(operator.invert, a) == kg.unary_type("~", a), a


# ---------------------------------------------------------------------------------------------
# Reproducers of the bugs the fuzzer found.  Simulator bugs (fixed in gpureplace/simulator):

G_SCALE = 1.5            # a global float: Numba freezes it as a float64


@cuda.jit
def _weak_scalars(x, i, out):
    t = cuda.grid(1)
    lt = cuda.threadIdx.x
    out[t, 0] = x[t] * G_SCALE               # float32 * float64 global: float64
    out[t, 1] = x[t] + lt                    # float32 + int32 index: float64
    out[t, 2] = x[t] * math.pi               # a module's float: float64
    s = x[t]
    for j in range(2):
        s = s + j                            # float32 + int64 loop index: float64
    out[t, 3] = s
    out[t, 4] = x[t] + round(x[t])           # round() is an int64: float64
    out[t, 5] = (lt * (i[t] << 40)) >> 60    # index * int64 wraps (it was a Python int)


def test_sim_python_scalars_are_typed_as_numba_types_them():
    """The simulator computed these in float32 (NumPy 2's "weak" Python scalars: a global
    float, threadIdx.x, a range() index, round()'s result were plain Python numbers) and did
    not wrap integer products of indices."""
    x = np.array([0.1, 1.1, 3.3, 2.6], np.float32)
    i = np.array([1 << 22, 3 << 21, 7, 1 << 23], np.int64)
    out = np.zeros((4, 6))
    simulator.run(_weak_scalars, 1, 4, x, i, out)
    x64 = x.astype(np.float64)
    lt = np.arange(4)
    np.testing.assert_array_equal(out[:, 0], x64 * 1.5)
    np.testing.assert_array_equal(out[:, 1], x64 + lt)
    np.testing.assert_array_equal(out[:, 2], x64 * math.pi)
    np.testing.assert_array_equal(out[:, 3], x64 + 0 + 1)
    np.testing.assert_array_equal(out[:, 4], x64 + np.rint(x64))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out[:, 5], (lt * (i << 40)) >> 60)


@cuda.jit
def _bool_arithmetic(x, b, out):
    t = cuda.grid(1)
    c = b[t]
    out[t, 0] = ~c                           # ~ of a bool is "not", not -2
    out[t, 1] = -(x[t] > 0.5)                # -bool is an int64 (NumPy's bool refuses -)
    out[t, 2] = (x[t] > 0.5) + (x[t] > 0.25)  # bool + bool adds (NumPy's is a logical or)
    out[t, 3] = t / (x[t] > 2.0)             # int / False is inf (Python raised)
    out[t, 4] = c // (x[t] > 2.0)            # bool // False is 0 (Python raised)
    out[t, 5] = ~True                        # CPython folds this constant: -2, as compiled


def test_sim_bool_arithmetic_is_numbas():
    x = np.array([0.1, 0.3, 0.7, 0.9], np.float64)
    b = np.array([True, False, True, False])
    out = np.zeros((4, 6))
    simulator.run(_bool_arithmetic, 1, 4, x, b, out)
    np.testing.assert_array_equal(out[:, 0], ~b)
    np.testing.assert_array_equal(out[:, 1], -(x > 0.5).astype(int))
    np.testing.assert_array_equal(out[:, 2], (x > 0.5).astype(int) + (x > 0.25))
    np.testing.assert_array_equal(out[:, 3], [np.nan, np.inf, np.inf, np.inf])
    np.testing.assert_array_equal(out[:, 4], [0, 0, 0, 0])
    np.testing.assert_array_equal(out[:, 5], [-2] * 4)


@cuda.jit
def _powers_and_unification(x, n, out, outi):
    t = cuda.grid(1)
    out[t, 0] = x[t] ** 3                    # float32 ** int: x * (x * x) in float32
    out[t, 1] = x[t] ** n[t]                 # the same with a variable exponent
    out[t, 2] = x[t] ** -n[t]                # 1.0 / r computed in float64, rounded to float32
    out[t, 3] = max(np.int32(7), x[t]) // 2  # max(int32, float32) is a float64
    outi[t, 0] = n[t] ** 40                  # wraps (the simulator built a huge int)
    outi[t, 1] = (n[t] - n[t]) ** -1         # 0 ** -1: INT64_MIN (Numba's numpy error model)
    outi[t, 2] = ~max(np.int32(-3), False)   # max(int32, bool) is an int32 0: ~ of it is -1


def _float32_power(a, n):
    r, e = np.float32(1), abs(n)
    while e:
        if e & 1:
            r = np.float32(r * a)
        e >>= 1
        a = np.float32(a * a)
    return np.float32(1.0 / np.float64(r)) if n < 0 else r


def test_sim_powers_and_min_max_are_numbas():
    x = np.array([0.1, 1.1, 3.3, 2.6], np.float32)
    n = np.array([3, 5, 7, 2], np.int64)
    out, outi = np.zeros((4, 4)), np.zeros((4, 3), np.int64)
    simulator.run(_powers_and_unification, 1, 4, x, n, out, outi)
    np.testing.assert_array_equal(out[:, 0], [_float32_power(v, 3) for v in x])
    np.testing.assert_array_equal(out[:, 1], [_float32_power(v, k) for v, k in zip(x, n)])
    np.testing.assert_array_equal(out[:, 2], [_float32_power(v, -k) for v, k in zip(x, n)])
    np.testing.assert_array_equal(out[:, 3], np.maximum(7.0, x.astype(np.float64)) // 2)
    np.testing.assert_array_equal(outi[:, 0], [pow(int(v), 40, 1 << 64) - (1 << 64)
                                               * (pow(int(v), 40, 1 << 64) >> 63) for v in n])
    np.testing.assert_array_equal(outi[:, 1], [np.iinfo(np.int64).min] * 4)
    np.testing.assert_array_equal(outi[:, 2], [-1] * 4)


@cuda.jit
def _unsigned_mixed(u, i, out, outb, outf):
    t = cuda.grid(1)
    out[t, 0] = u[t] // i[t]             # uint64 // int64: both as int64 (2**63 + 1 is negative)
    out[t, 1] = u[t] % i[t]
    outb[t, 0] = u[t] == i[t]            # uint64 == int64: compared in float64
    outb[t, 1] = i[t] < u[t]
    outf[t] = math.pow(np.float32(u[t] & 1) - math.inf, 0.5)   # pow(-inf, 0.5) is +inf


def test_sim_unsigned_mixed_with_signed_is_numbas():
    """uint64 with int64: the simulator divided the exact values and compared them exactly;
    Numba converts both to int64 for // and %, and compares in float64.  And pow(x, 0.5) took
    NumPy's scalar sqrt shortcut (NaN for -inf, where C's pow gives +inf)."""
    u = np.array([(1 << 63) + 1, 7, (1 << 64) - 1], np.uint64)
    i = np.array([-2, 2, (1 << 63) - 1], np.int64)
    out, outb, outf = np.zeros((3, 2), np.int64), np.zeros((3, 2), np.bool_), np.zeros(3)
    simulator.run(_unsigned_mixed, 1, 3, u, i, out, outb, outf)
    signed = u.view(np.int64).tolist()
    np.testing.assert_array_equal(out[:, 0], [a // b for a, b in zip(signed, i.tolist())])
    np.testing.assert_array_equal(out[:, 1], [a % b for a, b in zip(signed, i.tolist())])
    np.testing.assert_array_equal(outb[:, 0], [False, False, False])
    np.testing.assert_array_equal(outb[:, 1], [True, True, True])
    np.testing.assert_array_equal(outf, [np.inf] * 3)
    u[0] = 1 << 63                      # 2**63 and 2**63 - 1 are one float64
    simulator.run(_unsigned_mixed, 1, 3, u, np.full(3, (1 << 63) - 1), out, outb, outf)
    assert outb[0, 0]


@cuda.jit
def _joined_types(x, b, out):
    t = cuda.grid(1)
    if b[t]:
        z = np.int32(-2147483648)
    else:
        z = 5                                # z is an int64 after the if (int32 and int64 unify)
    out[t, 0] = -z                           # so -z is 2147483648, not int32's -2147483648
    y = x[t] if b[t] else np.float64(0.5)    # float32 and float64 unify to float64
    out[t, 1] = y * x[t]                     # a float64 product, not a float32 one


def test_sim_variables_take_their_unified_type_after_a_join():
    """A variable, or conditional expression, whose branches give it different types has
    their unified type in the compiled code; the simulator kept the type of the branch taken
    (simulator/devicecode.py's joins convert it now)."""
    x = np.array([0.1, 0.3], np.float32)
    b = np.array([True, False])
    out = np.zeros((2, 2))
    simulator.run(_joined_types, 1, 2, x, b, out)
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(out[:, 0], [2147483648.0, -5.0])
    np.testing.assert_array_equal(out[:, 1], [x64[0] * x64[0], 0.5 * x64[1]])


# Python's float % (and //, through Numba's divmod) lowers to LLVM's frem, which NVPTX expands
# to x - trunc(x / y) * y: the quotient is rounded, so the result was wrong once x / y is large
# (1e10 % 3.0 gave 256.0 on the device instead of 1.0).  The compiler now calls libdevice's exact
# fmod instead (backend.exact_remainders), as CUDA C's fmodf is.

@cuda.jit
def _float_modulo(x, y, out):
    out[0] = x[0] % y[0]
    out[1] = x[0] // y[0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_modulo_lowers_to_an_exact_remainder(dtype, ptxas_check):
    from numba.core import types
    spec = _float_modulo.compile((getattr(types, dtype)[::1],) * 3)
    assert " frem " not in spec.llvm_ir
    ptxas_check(spec.ptx)


@pytest.mark.gpu
def test_float_modulo_is_exact_on_the_device():
    import cupy as cp
    x, y = cp.asarray(np.array([1e10], np.float32)), cp.asarray(np.array([3.0], np.float32))
    out = cp.zeros(2, np.float32)
    _float_modulo[1, 1](x, y, out)
    np.testing.assert_array_equal(cp.asnumpy(out), np.array([1.0, 3333333333.0], np.float32))
    # Python's signs: the remainder takes the divisor's, and -0.0 where it is zero
    xs = np.array([-7.5, 7.5, -7.5, 6.0, -6.0, 1e300], np.float64)
    ys = np.array([2.0, -2.0, -2.0, -3.0, 3.0, 7.0], np.float64)
    for a, b in zip(xs, ys):
        got = cp.zeros(2)
        _float_modulo[1, 1](cp.asarray([a]), cp.asarray([b]), got)
        want = np.array([a % b, a // b])
        np.testing.assert_array_equal(cp.asnumpy(got), want)
        assert np.signbit(cp.asnumpy(got)[0]) == np.signbit(want[0]), (a, b)
