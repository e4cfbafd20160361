"""The Python subset of the kernel language, as Numba supports it.

Each feature has a kernel below; CPU tests compile it (``kernel.compile(sig)``), assemble the PTX
with ptxas and check the PTX where it proves something (float32 stays float32, libdevice is used,
integer division is signed or unsigned...).  GPU tests (``@pytest.mark.gpu``) launch the same
kernels on CuPy arrays and compare with NumPy or with the plain Python semantics of the same code.
"""

import inspect
import math
import re

import numpy as np
import pytest
from numba import types, typeof

import helpers_mod
from conftest import assemble
from gpureplace import cuda
from gpureplace.errors import CompileError

THREADS = 128


def _compile(kernel, sig):
    """Compile ``kernel`` for ``sig``, assemble its PTX, return the specialisation."""
    spec = kernel.compile(sig)
    assemble(spec.ptx)
    return spec


def _body(ptx):
    """The PTX of the entry functions (without the header and parameter lists' comments)."""
    return ptx[ptx.index(".entry"):]


def _ir(spec):
    """LLVM IR of every function in the kernel's call graph, before linking and optimisation."""
    return "\n".join(t for cf in spec.compiled.closure() for t in cf.ir_texts())


def _calls(ir, name):
    """Whether LLVM IR text calls (or declares) function ``name``."""
    return f'@"{name}"(' in ir or f"@{name}(" in ir


def _widened_to_double(ir):
    """Lines of our own IR (libdevice not linked yet) that compute in double.

    Constants that the front end writes as ``fptrunc double <constant>`` are folded away and do
    not count.  (The PTX itself may still show f64 instructions inside libdevice's float32
    functions: sinf's argument reduction for huge inputs uses them, as in CUDA C.)
    """
    return [line for line in ir.splitlines()
            if re.search(r"\bdouble\b", line) and not re.search(r"fptrunc double [-0-9]", line)
            and not line.lstrip().startswith("declare")]


def _cp():
    import cupy
    return cupy


def _grid(n):
    return (n + THREADS - 1) // THREADS


def _line_of(func, marker):
    """Line number (in its file) of the first source line of ``func`` containing ``marker``."""
    lines, first = inspect.getsourcelines(func)
    for k, line in enumerate(lines):
        if marker in line:
            return first + k
    raise AssertionError(f"{marker!r} not in {func.__name__}")


# =============================================================================================
# Integers: int8..int64, uint8..uint64

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@cuda.jit
def int_ops(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        out[0, i] = a + b
        out[1, i] = a - b
        out[2, i] = a * b
        out[3, i] = a // b
        out[4, i] = a % b
        out[5, i] = (a & b) | (a ^ b)
        out[6, i] = a << 2
        out[7, i] = a >> 1
        out[8, i] = -a if a < b else a


def _int_inputs(dtype, n=300):
    rng = np.random.default_rng(1)
    dt = np.dtype(dtype)
    if dt.kind == "i":
        x = rng.integers(-100, 101, n)
        y = rng.choice(np.r_[-7:0, 1:8], n)
    else:
        x = rng.integers(0, 201, n)
        y = rng.integers(1, 8, n)
    return x.astype(dt), y.astype(dt)


def _int_reference(x, y):
    two, one = x.dtype.type(2), x.dtype.type(1)
    return np.stack([x + y, x - y, x * y, x // y, x % y, (x & y) | (x ^ y),
                     np.left_shift(x, two), np.right_shift(x, one), np.where(x < y, -x, x)])


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_arithmetic_compiles(dtype):
    ty = getattr(types, dtype)
    spec = _compile(int_ops, (ty[::1], ty[::1], ty[:, ::1]))
    assert ".f32" not in spec.ptx and ".f64" not in spec.ptx


def test_int64_division_is_signed_and_uint64_unsigned():
    s = _body(_compile(int_ops, (types.int64[::1],) * 2 + (types.int64[:, ::1],)).ptx)
    assert "div.s64" in s and "shr.s64" in s      # (% is computed from the quotient)
    u = _body(_compile(int_ops, (types.uint64[::1],) * 2 + (types.uint64[:, ::1],)).ptx)
    assert "div.u64" in u and "shr.u64" in u
    assert "div.s64" not in u


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_arithmetic_gpu(dtype):
    cp = _cp()
    x, y = _int_inputs(dtype)
    out = cp.zeros((9, x.size), dtype=dtype)
    int_ops[_grid(x.size), THREADS](cp.asarray(x), cp.asarray(y), out)
    np.testing.assert_array_equal(out.get(), _int_reference(x, y))


# =============================================================================================
# Floats: float32 stays float32, float64 is float64, math goes to libdevice


@cuda.jit
def float_math(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        half = x.dtype.type(0.5)
        out[0, i] = a * b + half
        out[1, i] = math.sin(a) * math.cos(b)
        out[2, i] = math.exp(a * half) - math.log(b)
        out[3, i] = math.sqrt(b) + math.atan2(a, b)
        out[4, i] = b ** x.dtype.type(2.5)
        out[5, i] = a // x.dtype.type(0.75)
        out[6, i] = a % x.dtype.type(0.75)
        out[7, i] = math.floor(a) + math.ceil(b)
        out[8, i] = min(a, b) + max(a, b, half) + abs(a)
        out[9, i] = math.hypot(a, b) + math.tanh(a) + math.erf(b) + math.fabs(a)
        out[10, i] = b ** 3 + a / b
        out[11, i] = math.log10(b) + math.log2(b) + math.exp2(half) + math.expm1(half)


def _float_inputs(dtype, n=300):
    rng = np.random.default_rng(2)
    # a // 0.75 and a % 0.75 away from the integer boundaries, so rounding cannot flip them
    a = rng.integers(-20, 20, n) * 0.75 + rng.uniform(0.1, 0.6, n)
    b = rng.uniform(0.5, 4.0, n)
    return a.astype(dtype), b.astype(dtype)


def _float_reference(x, y):
    a, b = x.astype(np.float64), y.astype(np.float64)
    half = 0.5
    return np.stack([
        a * b + half, np.sin(a) * np.cos(b), np.exp(a * half) - np.log(b),
        np.sqrt(b) + np.arctan2(a, b), b ** 2.5, np.floor_divide(a, 0.75), np.mod(a, 0.75),
        np.floor(a) + np.ceil(b), np.minimum(a, b) + np.maximum(np.maximum(a, b), half) + abs(a),
        np.hypot(a, b) + np.tanh(a) + np.vectorize(math.erf)(b) + np.abs(a),
        b ** 3 + a / b, np.log10(b) + np.log2(b) + 2 ** half + np.expm1(half)])


@cuda.jit
def float_parts(x, mant, expo, frac, whole, scaled, deg, rad):
    i = cuda.grid(1)
    if i < x.size:
        m, e = math.frexp(x[i])
        mant[i] = m
        expo[i] = e
        f, w = math.modf(x[i])
        frac[i] = f
        whole[i] = w
        scaled[i] = math.ldexp(m, e + 3)
        deg[i] = math.degrees(x[i])
        rad[i] = np.radians(x[i])


def _float_parts_args(dtype, xp=np):
    x = np.array([3.5, -0.15625, 1e10, 0.0, -7.25, 1e-3, 2.0 ** -130, 123456.789], dtype)
    return [xp.asarray(x)] + [xp.zeros(x.size, np.int32 if k == 1 else dtype) for k in range(7)]


def _check_float_parts(x, mant, expo, frac, whole, scaled, deg, rad):
    dt = x.dtype.type
    for k, v in enumerate(x.tolist()):
        m, e = math.frexp(v)
        f, w = math.modf(v)
        assert (mant[k], expo[k]) == (m, e) and (frac[k], whole[k]) == (f, w), v
        assert scaled[k] == math.ldexp(m, e + 3)
        assert deg[k] == dt(v) * dt(180 / math.pi) and rad[k] == dt(v) * dt(math.pi / 180)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_frexp_modf_ldexp_degrees_radians(dtype):
    fty = typeof(dtype(0))
    spec = _compile(float_parts, (fty[::1], fty[::1], types.int32[::1]) + (fty[::1],) * 5)
    suffix = "f" if dtype is np.float32 else ""
    assert all(_calls(_ir(spec), f"__nv_{fn}{suffix}") for fn in ("frexp", "modf", "ldexp"))
    assert _widened_to_double(_ir(spec)) == [] or dtype is np.float64
    from gpureplace import simulator
    args = _float_parts_args(dtype)
    simulator.run(float_parts, 1, 32, *args)
    _check_float_parts(*args)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_frexp_modf_ldexp_degrees_radians_gpu(dtype):
    cp = _cp()
    args = _float_parts_args(dtype, cp)
    float_parts[1, 32](*args)
    _check_float_parts(*[a.get() for a in args])


F32_SIG = (types.float32[::1], types.float32[::1], types.float32[:, ::1])
F64_SIG = (types.float64[::1], types.float64[::1], types.float64[:, ::1])


def test_float32_math_stays_float32():
    spec = _compile(float_math, F32_SIG)
    body = _body(spec.ptx)
    assert re.search(r"(mul|fma)\.rn\.f32", body)
    ir = _ir(spec)
    assert _widened_to_double(ir) == [], "float32 code must not be widened to double"
    for fn in ("__nv_sinf", "__nv_cosf", "__nv_expf", "__nv_logf", "__nv_powf", "__nv_atan2f",
               "__nv_hypotf", "__nv_tanhf", "__nv_erff", "__nv_log10f", "__nv_log2f",
               "__nv_floorf", "__nv_ceilf"):
        assert _calls(ir, fn), fn
    for fn in ("__nv_sin", "__nv_pow", "__nv_exp", "__nv_log", "__nv_floor"):
        assert not _calls(ir, fn), fn
    # libdevice is linked in and inlined: no calls left
    assert "__nv_" not in spec.ptx


@cuda.jit
def float32_arith(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        out[i] = a * b + np.float32(0.5) - a / b + b ** 3 + a ** -2 + math.sqrt(b)


def test_float32_arithmetic_has_no_f64_instructions():
    spec = _compile(float32_arith, "void(float32[::1], float32[::1], float32[::1])")
    body = _body(spec.ptx)
    assert ".f64" not in body
    assert "mul.rn.f32" in body or "fma.rn.f32" in body
    assert "sqrt.rn.f32" in body


@pytest.mark.gpu
def test_float32_arithmetic_gpu():
    cp = _cp()
    rng = np.random.default_rng(13)
    x = rng.uniform(0.5, 2, 300).astype(np.float32)
    y = rng.uniform(0.5, 2, 300).astype(np.float32)
    out = cp.zeros(300, dtype=np.float32)
    float32_arith[_grid(300), THREADS](cp.asarray(x), cp.asarray(y), out)
    a, b = x.astype(np.float64), y.astype(np.float64)
    ref = a * b + 0.5 - a / b + b ** 3 + a ** -2.0 + np.sqrt(b)
    np.testing.assert_allclose(out.get(), ref, rtol=1e-5, atol=1e-5)


def test_float64_math_uses_double_libdevice():
    spec = _compile(float_math, F64_SIG)
    assert ".f64" in _body(spec.ptx)
    ir = _ir(spec)
    assert not re.search(r"\bfloat\b", ir), "float64 code must not be narrowed to float"
    assert _calls(ir, "__nv_sin") and _calls(ir, "__nv_pow") and not _calls(ir, "__nv_sinf")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,rtol", [("float32", 2e-5), ("float64", 1e-12)])
def test_float_math_gpu(dtype, rtol):
    cp = _cp()
    x, y = _float_inputs(dtype)
    out = cp.zeros((12, x.size), dtype=dtype)
    float_math[_grid(x.size), THREADS](cp.asarray(x), cp.asarray(y), out)
    np.testing.assert_allclose(out.get(), _float_reference(x, y), rtol=rtol,
                               atol=rtol * 10)


@cuda.jit
def float32_builtins(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = max(abs(x[i]), np.float32(0.5)) + min(x[i], np.float32(1.0))


def test_float32_builtins_stay_float32():
    body = _body(_compile(float32_builtins, "void(float32[::1], float32[::1])").ptx)
    assert ".f64" not in body and "abs.f32" in body


# =============================================================================================
# float16 (arithmetic in half precision as numba-cuda does; math computed in float32)


@cuda.jit
def half_ops(x, y, out):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        out[0, i] = a * b
        out[1, i] = a + b - a / b
        out[2, i] = -a if a < b else b
        out[3, i] = math.sin(a)
        out[4, i] = abs(a) + np.float16(1.5)
        out[5, i] = np.float16(np.float32(a) * np.float32(2.0))
        out[6, i] = math.sqrt(abs(b))


HALF_SIG = (types.float16[::1], types.float16[::1], types.float16[:, ::1])


def test_float16_arithmetic_is_half_precision():
    spec = _compile(half_ops, HALF_SIG)
    body = _body(spec.ptx)
    assert "mul.rn.f16" in body and "setp.lt.f16" in body and "neg.f16" in body
    assert "abs.f16" in body                       # abs(b): the sign bit, no float32 round trip
    assert "cvt.f32.f16" in body and "cvt.rn.f16.f32" in body     # sin computed in float32
    ir = _ir(spec)
    assert _calls(ir, "__nv_sinf")
    assert _widened_to_double(ir) == []


def test_float16_typing():
    text = half_ops.inspect_types(HALF_SIG)
    for expr in (r"a \* b", r"a \+ b", r"a / b"):
        assert re.search(expr + r"\s+:: float16", text), expr


@pytest.mark.gpu
def test_float16_gpu():
    cp = _cp()
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, 300).astype(np.float16)
    y = rng.uniform(0.5, 2, 300).astype(np.float16)
    out = cp.zeros((7, x.size), dtype=np.float16)
    half_ops[_grid(x.size), THREADS](cp.asarray(x), cp.asarray(y), out)
    f16 = np.float16
    ref = np.stack([x * y, x + y - x / y, np.where(x < y, -x, y), np.sin(x),
                    np.abs(x) + f16(1.5), (x.astype(np.float32) * 2).astype(f16),
                    np.sqrt(np.abs(y))]).astype(np.float32)
    np.testing.assert_allclose(out.get().astype(np.float32), ref, rtol=2e-3, atol=2e-3)


# =============================================================================================
# Booleans


@cuda.jit
def bool_logic(a, b, x, flag, out, count):
    i = cuda.grid(1)
    if i < out.size:
        p = a[i] and not b[i]
        q = (x[i] > 0.5) != flag
        out[i] = p or q
        count[i] = a[i] + b[i] + flag


BOOL_SIG = (types.boolean[::1], types.boolean[::1], types.float64[::1], types.boolean,
            types.boolean[::1], types.int32[::1])


def test_bool_compiles():
    _compile(bool_logic, BOOL_SIG)


@pytest.mark.gpu
@pytest.mark.parametrize("flag", [True, False])
def test_bool_gpu(flag):
    cp = _cp()
    rng = np.random.default_rng(4)
    a, b = rng.random(300) < 0.5, rng.random(300) < 0.5
    x = rng.random(300)
    out = cp.zeros(300, dtype=np.bool_)
    count = cp.zeros(300, dtype=np.int32)
    bool_logic[_grid(300), THREADS](cp.asarray(a), cp.asarray(b), cp.asarray(x), flag, out, count)
    np.testing.assert_array_equal(out.get(), (a & ~b) | ((x > 0.5) != flag))
    np.testing.assert_array_equal(count.get(), a.astype(np.int32) + b + int(flag))


# =============================================================================================
# Complex numbers


@cuda.jit
def complex_ops(x, y, s, out, mag):
    i = cuda.grid(1)
    if i < x.size:
        a = x[i]
        b = y[i]
        out[0, i] = a * b
        out[1, i] = a / b
        out[2, i] = a + b.conjugate() - s
        out[3, i] = a * a.real - b * b.imag
        mag[i] = abs(a)


C64_SIG = (types.complex64[::1], types.complex64[::1], types.complex64, types.complex64[:, ::1],
           types.float32[::1])
C128_SIG = (types.complex128[::1], types.complex128[::1], types.complex128,
            types.complex128[:, ::1], types.float64[::1])


def test_complex64_stays_single_precision():
    spec = _compile(complex_ops, C64_SIG)
    assert ".f64" not in _body(spec.ptx)
    assert _calls(_ir(spec), "__nv_hypotf")


def test_complex128_compiles():
    spec = _compile(complex_ops, C128_SIG)
    assert _calls(_ir(spec), "__nv_hypot")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,rtol", [("complex64", 1e-5), ("complex128", 1e-12)])
def test_complex_gpu(dtype, rtol):
    cp = _cp()
    rng = np.random.default_rng(5)
    x = (rng.normal(size=300) + 1j * rng.normal(size=300)).astype(dtype)
    y = (rng.normal(size=300) + 1j * rng.normal(size=300) + 0.5).astype(dtype)
    s = np.dtype(dtype).type(1.25 - 0.5j)
    out = cp.zeros((4, 300), dtype=dtype)
    mag = cp.zeros(300, dtype=x.real.dtype)
    complex_ops[_grid(300), THREADS](cp.asarray(x), cp.asarray(y), s, out, mag)
    ref = np.stack([x * y, x / y, x + np.conj(y) - s, x * x.real - y * y.imag])
    np.testing.assert_allclose(out.get(), ref, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(mag.get(), np.abs(x), rtol=rtol)


@pytest.mark.gpu
def test_python_complex_scalar_argument_gpu():
    cp = _cp()
    x = cp.asarray(np.array([1 + 2j, 3 - 1j]))
    out = cp.zeros((4, 2), dtype=np.complex128)
    mag = cp.zeros(2, dtype=np.float64)
    complex_ops[1, 32](x, x, 2 + 3j, out, mag)       # a Python complex is complex128
    xh = x.get()
    np.testing.assert_allclose(out.get()[2], xh + np.conj(xh) - (2 + 3j))


# =============================================================================================
# Tuples


@cuda.jit
def tuple_ops(t, pair, nested, arrs, out):
    a, b, c = t                               # unpacking an argument
    built = (a + 1, b * 2, c - 3)             # building
    s = 0
    for k in range(len(built)):               # indexing with a variable
        s += built[k]
    for v in t:                               # iterating
        s += v
    out[0] = s
    out[1] = t[-1]                            # negative constant index
    out[2] = pair[0] * pair[1]                # heterogeneous tuple
    (p, q), r = nested                        # nested unpacking
    out[3] = p * q + r
    x, y = arrs                               # tuple of arrays
    out[4] = x[0] + y[1]
    quo, rem = helpers_mod.divmod_pair(c, 2)  # tuple returned by a helper
    out[5] = quo * 10 + rem
    swapped = (b, a)
    out[6] = swapped[0] - swapped[1] + len(t)


TUPLE_SIG = (types.UniTuple(types.int64, 3), types.Tuple((types.float32, types.int32)),
             types.Tuple((types.UniTuple(types.int64, 2), types.float64)),
             types.UniTuple(types.float64[::1], 2), types.float64[::1])


def test_tuples_compile():
    spec = _compile(tuple_ops, TUPLE_SIG)
    # every leaf of every tuple argument is its own kernel parameter: 3 + 2 + 3 + 2 * 2 + 2
    # (a contiguous array is its pointer and its length; the kernel derives the stride)
    params = re.findall(r"\.param\s+\.\S+(?:\s+\.ptr)?(?:\s+\.align\s+\d+)?\s+tuple_ops_param_\d+",
                        spec.ptx)
    assert len(params) == 14


def test_tuple_index_out_of_range_is_a_clear_error():
    def bad_index(t, out):
        out[0] = t[5]

    with pytest.raises(CompileError) as info:
        cuda.jit(bad_index).compile((types.UniTuple(types.int64, 3), types.int64[::1]))
    err = info.value
    assert err.function.endswith("bad_index")
    assert err.lineno == _line_of(bad_index, "t[5]")
    assert "out of range" in err.reason or "index" in err.reason.lower()


@pytest.mark.gpu
def test_tuples_gpu():
    cp = _cp()
    x = cp.asarray(np.array([10.0, 20.0]))
    y = cp.asarray(np.array([1.0, 2.0]))
    out = cp.zeros(7, dtype=np.float64)
    tuple_ops[1, 1]((1, 2, 3), (np.float32(1.5), np.int32(4)), ((2, 3), 0.5), (x, y), out)
    np.testing.assert_array_equal(out.get(), [12.0, 3.0, 6.0, 6.5, 12.0, 11.0, 4.0])


# =============================================================================================
# Control flow: range with 1-3 arguments, for / while, break / continue, if / elif / else


def control_body(n):
    """Plain Python: compiled as a helper in the kernel, run as-is for the host reference."""
    steps = 0
    v = n
    while True:
        if v == 1:
            break
        if v % 2 == 0:
            v //= 2
            steps += 1
            continue
        v = 3 * v + 1
        steps += 1
    acc = 0
    for k in range(n % 7):
        acc += k
    for k in range(2, n % 11):
        acc += 2 * k
    for k in range(n % 13, -1, -3):
        acc += 3 * k
    for k in range(20):
        if k == n % 5:
            continue
        if k > n % 17:
            break
        acc += 1
    j = 0
    while j < n % 9:
        j += 2
    if n % 3 == 0:
        c = 10
    elif n % 3 == 1:
        c = 20
    else:
        c = 30
    return steps, acc + j, c


@cuda.jit
def control_flow(ns, out):
    i = cuda.grid(1)
    if i >= ns.size:
        return
    steps, acc, c = control_body(ns[i])
    out[0, i] = steps
    out[1, i] = acc
    out[2, i] = c


def test_control_flow_compiles():
    _compile(control_flow, "void(int64[::1], int64[:, ::1])")


@pytest.mark.gpu
def test_control_flow_gpu():
    cp = _cp()
    ns = np.arange(1, 501, dtype=np.int64)
    out = cp.zeros((3, ns.size), dtype=np.int64)
    control_flow[_grid(ns.size), THREADS](cp.asarray(ns), out)
    ref = np.array([control_body(int(n)) for n in ns]).T
    np.testing.assert_array_equal(out.get(), ref)


# =============================================================================================
# Arrays: ndim 1-4, layouts C / F / A, attributes, indexing, slicing views


@cuda.jit
def row_sums(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        s = 0.0
        for j in range(x.shape[1]):
            s += x[i, j]
        out[i] = s


@pytest.mark.parametrize("layout_ty", [types.float64[:, ::1], types.float64[::1, :],
                                       types.float64[:, :]], ids=["C", "F", "A"])
def test_layouts_compile(layout_ty):
    _compile(row_sums, (layout_ty, types.float64[::1]))


@pytest.mark.gpu
@pytest.mark.parametrize("make", [
    lambda cp, a: cp.asarray(a),                          # C
    lambda cp, a: cp.asfortranarray(cp.asarray(a)),       # F
    lambda cp, a: cp.asarray(np.repeat(a, 2, axis=1))[:, ::2],  # A: strided view
    lambda cp, a: cp.asarray(np.ascontiguousarray(a.T)).T,      # F through a transpose
], ids=["C", "F", "A", "T"])
def test_layouts_gpu(make):
    cp = _cp()
    a = np.random.default_rng(6).normal(size=(70, 33))
    x = make(cp, a)
    np.testing.assert_array_equal(x.get(), a)
    out = cp.zeros(70)
    row_sums[_grid(70), THREADS](x, out)
    np.testing.assert_allclose(out.get(), a.sum(axis=1), rtol=1e-12)


@cuda.jit
def array_attrs(x, out):
    out[0] = x.ndim
    out[1] = x.size
    out[2] = len(x)
    for d in range(x.ndim):
        out[3 + d] = x.shape[d]
        out[3 + x.ndim + d] = x.strides[d]


ATTR_TYPES = [types.float32[::1], types.float32[:], types.int16[:, ::1], types.float64[::1, :],
              types.float64[:, :, ::1], types.uint8[:, :, :], types.float64[:, :, :, ::1],
              types.complex64[:, :, :, :]]


@pytest.mark.parametrize("ty", ATTR_TYPES, ids=str)
def test_array_attributes_compile(ty):
    _compile(array_attrs, (ty, types.int64[::1]))


@pytest.mark.gpu
@pytest.mark.parametrize("shape,dtype,view", [
    ((7,), np.float32, None), ((9,), np.float32, (slice(None, None, 3),)),
    ((4, 5), np.int16, None), ((4, 6), np.float64, "F"), ((3, 4, 5), np.float64, None),
    ((3, 4, 5), np.uint8, (slice(None), slice(None, None, 2), slice(1, None))),
    ((2, 3, 4, 5), np.float64, None),
    ((2, 3, 4, 6), np.complex64, (slice(None), slice(None), slice(None), slice(None, None, 2))),
])
def test_array_attributes_gpu(shape, dtype, view):
    cp = _cp()
    x = cp.zeros(shape, dtype=dtype)
    if view == "F":
        x = cp.asfortranarray(x)
    elif view is not None:
        x = x[view]
    out = cp.full(3 + 2 * x.ndim, -1, dtype=np.int64)
    array_attrs[1, 1](x, out)
    expect = [x.ndim, x.size, x.shape[0], *x.shape, *x.strides]
    np.testing.assert_array_equal(out.get(), expect)


@cuda.jit
def weighted_sum4(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        s = 0.0
        for a in range(x.shape[1]):
            for b in range(x.shape[2]):
                for c in range(x.shape[3]):
                    idx = (i, a, b, c)                    # tuple index
                    s += x[idx] * (a + 1) - x[i, a, b, -1 - c]  # negative index
        out[i] = s


@cuda.jit
def shift3(x, out):
    i, j, k = cuda.grid(3)
    if i < x.shape[0] and j < x.shape[1] and k < x.shape[2]:
        out[i, j, k] = 2 * x[i, j, k] + x[-1, j, k]


def test_multidimensional_indexing_compiles():
    _compile(weighted_sum4, "void(float64[:, :, :, ::1], float64[::1])")
    _compile(weighted_sum4, "void(float64[:, :, :, :], float64[::1])")
    _compile(shift3, "void(float32[:, :, ::1], float32[:, :, ::1])")
    _compile(shift3, "void(float32[::1, :, :], float32[:, :, :])")


@pytest.mark.gpu
def test_multidimensional_indexing_gpu():
    cp = _cp()
    rng = np.random.default_rng(7)
    a = rng.normal(size=(5, 3, 4, 6))
    out = cp.zeros(5)
    weighted_sum4[1, 32](cp.asarray(a), out)
    w = np.arange(1, 4).reshape(1, 3, 1, 1)
    ref = (a * w).sum(axis=(1, 2, 3)) - a[..., ::-1].sum(axis=(1, 2, 3))
    np.testing.assert_allclose(out.get(), ref, rtol=1e-12)
    # the same through a strided, non-contiguous view
    big = cp.asarray(np.repeat(a, 2, axis=3))[..., ::2]
    out2 = cp.zeros(5)
    weighted_sum4[1, 32](big, out2)
    np.testing.assert_allclose(out2.get(), ref, rtol=1e-12)

    b = rng.normal(size=(4, 5, 6)).astype(np.float32)
    o3 = cp.zeros_like(cp.asarray(b))
    shift3[(1, 1, 1), (4, 8, 8)](cp.asfortranarray(cp.asarray(b)), o3)
    np.testing.assert_allclose(o3.get(), 2 * b + b[-1][None], rtol=1e-6)


@cuda.jit
def views(x, m, out, rows, cols, tail):
    i = cuda.grid(1)
    inner = x[1:-1]
    evens = x[::2]
    back = x[::-1]
    if i < len(inner):
        out[0, i] = inner[i]
    if i < evens.size:
        out[1, i] = evens[i]
    if i < back.shape[0]:
        out[2, i] = back[i] + x[-1]
    if i < m.shape[0]:
        r = m[i, :]                   # a row view
        s = 0.0
        for k in range(r.size):
            s += r[k]
        rows[i] = s
    if i < m.shape[1]:
        c = m[:, i]                   # a column view (strided)
        s = 0.0
        for k in range(len(c)):
            s += c[k] * (k + 1)
        cols[i] = s
    w = tail[2:]                      # writing through a view
    if i < w.size:
        w[i] = x[i] * 3


def test_slicing_views_compile():
    _compile(views, "void(float64[::1], float64[:, ::1], float64[:, ::1], float64[::1], "
                    "float64[::1], float64[::1])")
    _compile(views, "void(float64[:], float64[::1, :], float64[:, :], float64[:], "
                    "float64[:], float64[:])")


@pytest.mark.gpu
def test_slicing_views_gpu():
    cp = _cp()
    rng = np.random.default_rng(8)
    n = 50
    x = rng.normal(size=n)
    m = rng.normal(size=(20, 30))
    out = cp.zeros((3, n))
    rows, cols, tail = cp.zeros(20), cp.zeros(30), cp.zeros(n + 2)
    views[1, 64](cp.asarray(x), cp.asarray(m), out, rows, cols, tail)
    ref = np.zeros((3, n))
    ref[0, :n - 2] = x[1:-1]
    ref[1, :(n + 1) // 2] = x[::2]
    ref[2] = x[::-1] + x[-1]
    np.testing.assert_allclose(out.get(), ref, rtol=1e-12)
    np.testing.assert_allclose(rows.get(), m.sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(cols.get(), (m * np.arange(1, 21)[:, None]).sum(axis=0),
                               rtol=1e-12)
    expect_tail = np.zeros(n + 2)
    expect_tail[2:] = x * 3
    np.testing.assert_allclose(tail.get(), expect_tail, rtol=1e-12)


@cuda.jit
def dtype_cast(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x.dtype.type(x[i] * 1.5)


def test_dtype_attribute_compiles():
    spec = _compile(dtype_cast, "void(int32[::1], int32[::1])")
    assert "cvt.rzi.s32.f64" in spec.ptx or "cvt.rzi.s64.f64" in spec.ptx


@pytest.mark.gpu
def test_dtype_attribute_gpu():
    cp = _cp()
    x = np.arange(-50, 50, dtype=np.int32)
    out = cp.zeros(100, dtype=np.int32)
    dtype_cast[1, 128](cp.asarray(x), out)
    np.testing.assert_array_equal(out.get(), (x * 1.5).astype(np.int32))


# =============================================================================================
# Casts, builtins min / max / abs, powers, // and %


@cuda.jit
def casts(x, out_i, out_f):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out_i[0, i] = int(v)
        out_i[1, i] = np.int32(v)
        out_i[2, i] = np.int16(int(v) % 1000)
        out_i[3, i] = np.uint8(abs(int(v)) % 200)
        out_i[4, i] = int(np.float32(v))
        out_f[0, i] = np.float32(v)
        out_f[1, i] = float(int(v))
        out_f[2, i] = float(np.float32(v) * np.float32(3))
        out_f[3, i] = np.float64(np.int16(int(v)))
        out_f[4, i] = float(i)


def test_casts_compile():
    spec = _compile(casts, "void(float64[::1], int64[:, ::1], float64[:, ::1])")
    body = _body(spec.ptx)
    assert "cvt.rn.f32.f64" in body             # np.float32(v)
    assert "cvt.rzi.s64.f64" in body            # int(v) truncates toward zero


@pytest.mark.gpu
def test_casts_gpu():
    cp = _cp()
    x = np.random.default_rng(9).uniform(-900, 900, 300)
    out_i = cp.zeros((5, 300), dtype=np.int64)
    out_f = cp.zeros((5, 300))
    casts[_grid(300), THREADS](cp.asarray(x), out_i, out_f)
    t = np.trunc(x).astype(np.int64)
    ref_i = np.stack([t, x.astype(np.int32), np.mod(t, 1000).astype(np.int16),
                      (np.abs(t) % 200).astype(np.uint8), x.astype(np.float32).astype(np.int64)])
    f32 = x.astype(np.float32)
    ref_f = np.stack([f32.astype(np.float64), t.astype(np.float64),
                      (f32 * np.float32(3)).astype(np.float64), t.astype(np.int16).astype(float),
                      np.arange(300, dtype=np.float64)])
    np.testing.assert_array_equal(out_i.get(), ref_i)
    np.testing.assert_array_equal(out_f.get(), ref_f)


@cuda.jit
def builtins_minmax(xi, xf, out_i, out_f):
    i = cuda.grid(1)
    if i < xi.size:
        a = xi[i]
        f = xf[i]
        out_i[0, i] = min(a, 3)
        out_i[1, i] = max(a, -2, 7 - a)
        out_i[2, i] = abs(a)
        out_f[0, i] = min(f, 0.25)
        out_f[1, i] = max(f, np.float32(a))
        out_f[2, i] = abs(f)
        out_f[3, i] = min(a, f)


def test_builtins_compile():
    _compile(builtins_minmax, "void(int64[::1], float64[::1], int64[:, ::1], float64[:, ::1])")
    _compile(builtins_minmax, "void(int8[::1], float32[::1], int32[:, ::1], float32[:, ::1])")


@pytest.mark.gpu
def test_builtins_gpu():
    cp = _cp()
    rng = np.random.default_rng(10)
    xi = rng.integers(-10, 10, 300)
    xf = rng.normal(size=300)
    out_i = cp.zeros((3, 300), dtype=np.int64)
    out_f = cp.zeros((4, 300))
    builtins_minmax[_grid(300), THREADS](cp.asarray(xi), cp.asarray(xf), out_i, out_f)
    ref_i = np.stack([np.minimum(xi, 3), np.maximum(np.maximum(xi, -2), 7 - xi), np.abs(xi)])
    ref_f = np.stack([np.minimum(xf, 0.25), np.maximum(xf, xi), np.abs(xf), np.minimum(xi, xf)])
    np.testing.assert_array_equal(out_i.get(), ref_i)
    np.testing.assert_array_equal(out_f.get(), ref_f)


@cuda.jit
def powers(xi, xf, out_i, out_f):
    i = cuda.grid(1)
    if i < xi.size:
        a = xi[i]
        f = xf[i]
        out_i[0, i] = a ** 2
        out_i[1, i] = a ** (i % 4)
        out_i[2, i] = 3 ** (i % 5)
        out_f[0, i] = f ** 2.5
        out_f[1, i] = f ** -1
        out_f[2, i] = f ** (i % 3)
        out_f[3, i] = 2.0 ** f
        out_f[4, i] = a // 3 + a % 3 + f // 0.5 + f % 0.5


def test_powers_compile():
    spec = _compile(powers, "void(int64[::1], float64[::1], int64[:, ::1], float64[:, ::1])")
    assert _calls(_ir(spec), "__nv_pow")


@pytest.mark.gpu
def test_powers_gpu():
    cp = _cp()
    rng = np.random.default_rng(11)
    n = 300
    xi = rng.integers(-9, 10, n)
    xf = rng.integers(1, 40, n) * 0.5 + 0.2       # positive, away from multiples of 0.5
    out_i = cp.zeros((3, n), dtype=np.int64)
    out_f = cp.zeros((5, n))
    powers[_grid(n), THREADS](cp.asarray(xi), cp.asarray(xf), out_i, out_f)
    idx = np.arange(n)
    ref_i = np.stack([xi ** 2, xi ** (idx % 4), 3 ** (idx % 5)])
    ref_f = np.stack([xf ** 2.5, 1 / xf, xf ** (idx % 3), 2.0 ** xf,
                      xi // 3 + xi % 3 + np.floor_divide(xf, 0.5) + np.mod(xf, 0.5)])
    np.testing.assert_array_equal(out_i.get(), ref_i)
    np.testing.assert_allclose(out_f.get(), ref_f, rtol=1e-13)


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
# A type as the first kernel argument


@cuda.jit
def from_type(T, out):
    out[0] = T(3.7)
    out[1] = T(-2.5)


def test_type_argument_compiles():
    assert typeof(np.int64) == types.NumberClass(types.int64)
    _compile(from_type, (typeof(np.int64), types.int64[::1]))
    spec = _compile(from_type, (typeof(np.float32), types.float32[::1]))
    assert ".f64" not in _body(spec.ptx)
    # types take no kernel parameter: only the contiguous array's pointer and length
    assert len(re.findall(r"from_type_param_\d+,?\n", spec.ptx)) == 2


@pytest.mark.gpu
@pytest.mark.parametrize("T,expect", [(np.int64, [3, -2]), (np.float32, [3.7, -2.5]),
                                      (np.int32, [3, -2]), (np.float64, [3.7, -2.5])])
def test_type_argument_gpu(T, expect):
    cp = _cp()
    out = cp.zeros(2, dtype=T)
    from_type[1, 1](T, out)
    np.testing.assert_array_equal(out.get(), np.array(expect, dtype=T))


# =============================================================================================
# Exceptions: a raising thread stops (numba-cuda without debug=True)


@cuda.jit
def raises_on_negative(x, out):
    i = cuda.grid(1)
    if i < x.size:
        if x[i] < 0:
            raise ValueError("negative")
        out[i] = math.sqrt(x[i])


def test_raise_compiles():
    _compile(raises_on_negative, "void(float64[::1], float64[::1])")


@pytest.mark.gpu
@pytest.mark.gpu_only    # the simulator raises the exception instead, naming the thread
def test_raise_stops_the_thread_gpu():
    cp = _cp()
    x = np.array([4.0, -1.0, 9.0, -2.0])
    out = cp.full(4, 7.0)
    raises_on_negative[1, 32](cp.asarray(x), out)
    np.testing.assert_array_equal(out.get(), [2.0, 7.0, 3.0, 7.0])


# =============================================================================================
# What cannot work says so, naming the function and line


def _compile_error(pyfunc, sig):
    with pytest.raises(CompileError) as info:
        cuda.jit(pyfunc).compile(sig)
    return info.value


def test_list_is_a_clear_error():
    def uses_list(x):
        a = [1, 2, 3]
        x[0] = a[1]

    err = _compile_error(uses_list, "void(int64[::1])")
    assert "lists are not supported in device code" in str(err)
    assert err.function.endswith("uses_list")
    assert err.lineno in (_line_of(uses_list, "a = ["), _line_of(uses_list, "a[1]"))


def test_list_passed_to_len_is_a_clear_error():
    def list_len(x):
        x[0] = len([x[0], x[1]])

    err = _compile_error(list_len, "void(int64[::1])")
    assert "lists are not supported in device code" in str(err)
    assert err.lineno == _line_of(list_len, "len([")


def test_dict_is_a_clear_error():
    def uses_dict(x):
        d = {1: 2}
        x[0] = d[1]

    err = _compile_error(uses_dict, "void(int64[::1])")
    assert "dicts are not supported in device code" in str(err)
    assert err.function.endswith("uses_dict")
    assert err.lineno in (_line_of(uses_dict, "d = {"), _line_of(uses_dict, "d[1]"))


def test_array_allocation_is_a_clear_error():
    def allocates(x):
        tmp = np.zeros(3)
        x[0] = tmp[1]

    err = _compile_error(allocates, "void(float64[::1])")
    assert "np.zeros() allocates a new array" in str(err)
    assert err.function.endswith("allocates")
    assert err.lineno == _line_of(allocates, "np.zeros")


class _NotDeviceCode:
    def __call__(self, v):
        return v


_opaque = _NotDeviceCode()


def test_unknown_global_is_a_clear_error():
    def calls_object(x):
        x[0] = _opaque(x[0])

    err = _compile_error(calls_object, "void(float64[::1])")
    assert err.function.endswith("calls_object")
    assert err.lineno == _line_of(calls_object, "_opaque(")
    assert "_NotDeviceCode" in str(err)


def test_float16_mixed_with_complex_is_a_clear_error():
    def bad_half(x, out):
        out[0] = math.sin(x[0] * 1j)

    err = _compile_error(bad_half, "void(float16[::1], complex64[::1])")
    assert err.function.endswith("bad_half")
    assert err.lineno == _line_of(bad_half, "math.sin")


# =============================================================================================
# Precision: sqrt is IEEE by default and approximate only under fast math


def _sqrt_sin(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = math.sqrt(x[i]) + math.sin(x[i])


def test_sqrt_is_correctly_rounded_by_default():
    spec = _compile(cuda.jit(_sqrt_sin), "void(float32[::1], float32[::1])")
    assert "sqrt.rn.f32" in spec.ptx and "sqrt.approx" not in spec.ptx
    assert _calls(_ir(spec), "__nv_sinf")


def test_fastmath_uses_fast_variants():
    spec = _compile(cuda.jit(_sqrt_sin, fastmath=True), "void(float32[::1], float32[::1])")
    assert "sqrt.approx" in spec.ptx
    assert _calls(_ir(spec), "__nv_fast_sinf")


@cuda.jit
def named_fields(r1, r2, p, step):
    r1[0] = p.x
    r1[1] = p.y
    r2[0] = math.nextafter(p.r, step)


def test_namedtuple_arguments_keep_their_fields_and_nextafter():
    from collections import namedtuple

    from gpureplace import simulator
    from gpureplace.runtime import arguments
    Point = namedtuple("Point", ("x", "y", "r"))
    p = Point(1, 2, 2.5)
    key, vals = arguments.value_key(p)
    assert key[:2] == ("namedtuple", Point) and vals == (1, 2, 2.5)
    ty = arguments.numba_type_of_key(key)
    assert isinstance(ty, types.NamedTuple) and ty.instance_class is Point
    r1, r2 = np.zeros(2, np.int64), np.zeros(1, np.float64)
    simulator.run(named_fields, 1, 1, r1, r2, p, 3.0)
    assert r1.tolist() == [1, 2] and r2[0] == np.nextafter(2.5, 3.0)
    spec = _compile(named_fields, (types.int64[::1], types.float64[::1], ty, types.float64))
    assert "ld.param" in spec.ptx


@pytest.mark.gpu
def test_namedtuple_arguments_gpu():
    from collections import namedtuple
    cp = _cp()
    Point = namedtuple("Point", ("x", "y", "r"))
    r1, r2 = cp.zeros(2, cp.int64), cp.zeros(1, cp.float64)
    named_fields[1, 1](r1, r2, Point(4, 5, 1.5), 0.0)
    assert r1.get().tolist() == [4, 5] and r2.get()[0] == np.nextafter(1.5, 0.0)


@cuda.jit
def reshaped_views(a, out):
    b = a.reshape((3, 4))
    out[0] = b[1, 2]
    c = a.reshape(12)
    out[1] = c[7]
    d = a.reshape((2, -1, 3))
    out[2] = d[1, 1, 2]
    e = c.reshape((6, 2))
    e[5, 1] = -1.0                                # a view: writes reach a
    out[3] = a[3, 2]


def test_reshape_inside_kernels_links_the_no_copy_reshape_helper():
    from gpureplace import simulator
    spec = _compile(reshaped_views, (types.float64[:, ::1], types.float64[::1]))
    assert "numba_attempt_nocopy_reshape" not in spec.ptx or ".func" in spec.ptx
    assert ".extern" not in spec.ptx
    a = np.arange(12, dtype=np.float64).reshape(4, 3)
    out = np.zeros(4)
    simulator.run(reshaped_views, 1, 1, a, out)
    assert out.tolist() == [6.0, 7.0, 11.0, -1.0]


@pytest.mark.gpu
def test_reshape_inside_kernels_gpu():
    cp = _cp()
    a = cp.arange(12, dtype=cp.float64).reshape(4, 3)
    out = cp.zeros(4)
    reshaped_views[1, 1](a, out)
    assert out.get().tolist() == [6.0, 7.0, 11.0, -1.0]


@cuda.jit
def complex_powers(r, x, y):
    i = cuda.grid(1)
    if i < r.shape[0]:
        r[i, 0] = x[i] ** y[i]
        r[i, 1] = pow(x[i], y[i])
        r[i, 2] = np.power(x[i], y[i])
        z = x[i]
        z **= y[i]
        r[i, 3] = z
        r[i, 4] = x[i] ** 2                      # Numba squares instead of calling cpow


_CPOW_CASES = [(1 + 2j, 2 + 0j), (0.5 - 1j, 1.5 + 0.5j), (0j, 2 + 0j), (3j, -1 + 1j),
               (-2 + 0j, 0.5 + 0j), (1e-3 + 1e3j, 0.25 - 2j), (2 + 2j, 0j), (0j, 0j)]


def test_complex_power_links_the_device_cpow():
    """``complex ** complex`` lowers to Numba's C helper numba_cpow (numba_cpowf for complex64);
    the device version (runtime_helpers.py) is CPython's algorithm, linked in."""
    for ty in (types.complex128, types.complex64):
        spec = _compile(complex_powers, (ty[:, ::1], ty[::1], ty[::1]))
        assemble(spec.ptx)
        assert "numba_cpow" not in spec.ptx.replace("// .globl", "")   # linked and inlined
    from gpureplace.compiler.runtime_helpers import complex_pow as cpow
    for a, b in _CPOW_CASES:
        want = a ** b
        got = cpow(a, b)
        assert abs(got - want) <= 1e-12 * max(1.0, abs(want)), (a, b)
    assert all(math.isnan(v) for v in (cpow(0j, -1 + 0j).real, cpow(0j, 1j).imag))


@pytest.mark.gpu
def test_complex_power_gpu():
    cp = _cp()
    x = np.array([a for a, _ in _CPOW_CASES])
    y = np.array([b for _, b in _CPOW_CASES])
    for dt, tol in ((np.complex128, 1e-12), (np.complex64, 1e-5)):
        r = cp.zeros((len(x), 5), dt)
        complex_powers[1, 32](r, cp.asarray(x.astype(dt)), cp.asarray(y.astype(dt)))
        got = cp.asnumpy(r)
        want = np.array([complex(a) ** complex(b) for a, b in zip(x.astype(dt), y.astype(dt))])
        for col in range(4):
            np.testing.assert_allclose(got[:, col], want.astype(dt), rtol=tol, atol=tol)
        np.testing.assert_allclose(got[:, 4], (x.astype(dt) ** 2), rtol=tol, atol=tol)


@cuda.jit
def bit_counts(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i].bit_count()


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.uint64])
def test_int_bit_count(dtype):
    from gpureplace import simulator
    info = np.iinfo(dtype)
    x = np.array([0, 1, 7, info.max, info.min, info.max // 3], dtype)
    out = np.zeros(x.size, np.int64)
    simulator.run(bit_counts, 1, 8, x, out)
    assert out.tolist() == [int(v).bit_count() for v in x.tolist()]
    spec = _compile(bit_counts, (typeof(x), types.int64[::1]))
    assert "popc.b" in spec.ptx


@pytest.mark.gpu
def test_int_bit_count_gpu():
    cp = _cp()
    x = np.array([0, 1, -7, 2**31 - 1, -2**31], np.int32)
    out = cp.zeros(x.size, cp.int64)
    bit_counts[1, 8](cp.asarray(x), out)
    assert out.get().tolist() == [int(v).bit_count() for v in x.tolist()]


@cuda.jit
def _zero_d_total(acc, out, x, v):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(acc, (), x[i])
    if i == 0:
        out[()] = v * 2


def test_zero_dimensional_arrays_compile():
    zero_d = types.Array(types.float64, 0, "C")
    _compile(_zero_d_total, (zero_d, types.Array(types.int64, 0, "C"),
                             types.Array(types.float64, 1, "C"), types.int64))


@pytest.mark.gpu
def test_zero_dimensional_arrays():
    """``x[()]`` reads and writes a 0-d array; atomics take the empty index too."""
    cp = _cp()
    total = _zero_d_total
    x = cp.arange(300, dtype=cp.float64)
    acc = cp.zeros((), cp.float64)
    out = cp.zeros((), cp.int64)
    total[3, 128](acc, out, x, 21)
    total[3, 128](acc, out, x, 21)         # the cached launch path
    assert float(acc) == 2 * float(x.sum()) and int(out) == 42


@cuda.jit
def _round_to_digits(x, out, n):
    out[0] = round(x[0], n)


def test_round_of_a_float32_to_digits_is_computed_in_float64():
    """As numba-cuda: the float32 is rounded as a float64 and converted back once (Numba's CPU
    version rounds the scaled value to float32 first: round(float32(2.675), 2) = 2.68 there,
    2.67 here and in numba-cuda)."""
    ptx = _compile(_round_to_digits, "void(float32[::1], float32[::1], int64)").ptx
    assert "cvt.rni.f64.f64" in ptx and "cvt.rni.f32.f32" not in ptx
