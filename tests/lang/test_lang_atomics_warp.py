"""Atomics, warp primitives, bit intrinsics and device print().

CPU tests compile kernels and check that the PTX holds the instruction each feature must become
(and that ptxas accepts it); GPU tests launch them on CuPy arrays and compare with NumPy.
"""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.errors import CompileError
from conftest import assemble

FULL = 0xFFFFFFFF


def ptx_of(fn, sig):
    ptx = fn.compile(sig).ptx
    assemble(ptx)
    return ptx


def body(ptx):
    """The instructions of the entry point (no declarations, no comments)."""
    text = ptx.split(".entry", 1)[1]
    return "\n".join(line for line in text.splitlines() if not line.strip().startswith("//"))


def const_strings(ptx):
    """Decoded ``.const .b8 name[n] = {...}`` byte arrays of a PTX module (NUL stripped)."""
    out = []
    for m in re.finditer(r"\.const[^\n]*?\.b8\s+\S+\[\d+\]\s*=\s*\{([^}]*)\}", ptx):
        data = bytes(int(x) for x in m.group(1).split(","))
        out.append(data.rstrip(b"\x00").decode())
    return out


# =============================================================================================
# Atomics: PTX


@cuda.jit
def atomic_add_kernel(ary, vals):
    i = cuda.grid(1)
    if i < vals.size:
        cuda.atomic.add(ary, i % ary.size, vals[i])


@pytest.mark.parametrize("dtype,instr", [
    ("int32", "atom.global.add.u32"), ("uint32", "atom.global.add.u32"),
    ("int64", "atom.global.add.u64"), ("uint64", "atom.global.add.u64"),
    ("float32", "atom.global.add.f32"), ("float64", "atom.global.add.f64"),
])
def test_atomic_add_is_one_instruction(dtype, instr):
    ptx = ptx_of(atomic_add_kernel, f"void({dtype}[:], {dtype}[:])")
    assert instr in ptx
    assert "cas" not in body(ptx)        # no compare-and-swap loop for add


@cuda.jit
def atomic_sub_kernel(ary, v):
    cuda.atomic.sub(ary, 0, v)


@pytest.mark.parametrize("dtype,instr", [
    ("int32", "atom.global.add.u32"), ("int64", "atom.global.add.u64"),
    ("float32", "atom.global.add.f32"), ("float64", "atom.global.add.f64"),
])
def test_atomic_sub_adds_the_negation(dtype, instr):
    ptx = ptx_of(atomic_sub_kernel, f"void({dtype}[:], {dtype})")
    assert instr in ptx
    assert "neg" in body(ptx) or "sub" in body(ptx)


@cuda.jit
def atomic_minmax_kernel(ary, v):
    cuda.atomic.max(ary, 0, v)
    cuda.atomic.min(ary, 1, v)


@pytest.mark.parametrize("dtype,maxi,mini", [
    ("int32", "atom.global.max.s32", "atom.global.min.s32"),
    ("uint32", "atom.global.max.u32", "atom.global.min.u32"),
    ("int64", "atom.global.max.s64", "atom.global.min.s64"),
    ("uint64", "atom.global.max.u64", "atom.global.min.u64"),
])
def test_atomic_integer_max_min(dtype, maxi, mini):
    ptx = ptx_of(atomic_minmax_kernel, f"void({dtype}[:], {dtype})")
    assert maxi in ptx and mini in ptx


@pytest.mark.parametrize("dtype,bits", [("float32", "b32"), ("float64", "b64")])
def test_atomic_float_max_min_are_cas_loops(dtype, bits):
    ptx = ptx_of(atomic_minmax_kernel, f"void({dtype}[:], {dtype})")
    assert len(re.findall(rf"atom(\.\w+)*\.cas\.{bits}", ptx)) == 2
    assert "setp.nan" in ptx         # NaN check: a NaN leaves the element as it is


@cuda.jit
def atomic_nanminmax_kernel(ary, v):
    cuda.atomic.nanmax(ary, 0, v)
    cuda.atomic.nanmin(ary, 1, v)


def test_atomic_nanmax_nanmin_compile():
    ptx = ptx_of(atomic_nanminmax_kernel, "void(float64[:], float64)")
    assert len(re.findall(r"atom(\.\w+)*\.cas\.b64", ptx)) == 2
    ptx = ptx_of(atomic_nanminmax_kernel, "void(int32[:], int32)")
    assert "atom.global.max.s32" in ptx and "atom.global.min.s32" in ptx


@cuda.jit
def atomic_bitwise_kernel(ary, v):
    cuda.atomic.and_(ary, 0, v)
    cuda.atomic.or_(ary, 1, v)
    cuda.atomic.xor(ary, 2, v)
    cuda.atomic.exch(ary, 3, v)


@pytest.mark.parametrize("dtype,width", [("int32", 32), ("uint32", 32), ("int64", 64),
                                         ("uint64", 64)])
def test_atomic_bitwise_and_exch(dtype, width):
    ptx = ptx_of(atomic_bitwise_kernel, f"void({dtype}[:], {dtype})")
    for op in ("and", "or", "xor", "exch"):
        assert f"atom.global.{op}.b{width}" in ptx, op


@cuda.jit
def atomic_exch_float_kernel(ary, v, out):
    out[0] = cuda.atomic.exch(ary, 0, v)


def test_atomic_exch_float():
    ptx = ptx_of(atomic_exch_float_kernel, "void(float32[:], float32, float32[:])")
    assert "atom.global.exch.b32" in ptx


@cuda.jit
def atomic_incdec_kernel(ary, v):
    cuda.atomic.inc(ary, 0, v)
    cuda.atomic.dec(ary, 1, v)


def test_atomic_inc_dec_uint32_are_atom_inc_dec():
    ptx = ptx_of(atomic_incdec_kernel, "void(uint32[:], uint32)")
    assert "atom.global.inc.u32" in ptx and "atom.global.dec.u32" in ptx


def test_atomic_inc_dec_uint64_are_cas_loops():
    ptx = ptx_of(atomic_incdec_kernel, "void(uint64[:], uint64)")
    assert len(re.findall(r"atom(\.\w+)*\.cas\.b64", ptx)) == 2


@cuda.jit
def atomic_cas_kernel(ary, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda.atomic.cas(ary, i, 0, i + 1)


@pytest.mark.parametrize("dtype,bits", [("int32", "b32"), ("uint32", "b32"), ("int64", "b64"),
                                        ("uint64", "b64")])
def test_atomic_cas(dtype, bits):
    ptx = ptx_of(atomic_cas_kernel, f"void({dtype}[:], {dtype}[:])")
    assert re.search(rf"atom(\.\w+)*\.global\.cas\.{bits}", ptx)


@cuda.jit
def compare_and_swap_kernel(ary, out):
    out[0] = cuda.atomic.compare_and_swap(ary, 0, 7)


def test_compare_and_swap():
    ptx = ptx_of(compare_and_swap_kernel, "void(int32[:], int32[:])")
    assert re.search(r"atom(\.\w+)*\.cas\.b32", ptx)


@cuda.jit
def atomic_2d_kernel(ary, out):
    i, j = cuda.grid(2)
    if i < ary.shape[0] and j < ary.shape[1]:
        out[i, j] = cuda.atomic.add(ary, (i, j), 1.0)


def test_atomic_2d_index_uses_strides():
    spec = atomic_2d_kernel.compile("void(float32[:, :], float32[:, :])")
    assemble(spec.ptx)
    assert "atom.global.add.f32" in spec.ptx
    # the element address is computed from both strides (parameters 3, 4 of the array)
    assert "atomic_2d_kernel_param_3" in spec.ptx and "atomic_2d_kernel_param_4" in spec.ptx


@cuda.jit
def atomic_3d_int32_index_kernel(ary, i, j, k):
    cuda.atomic.max(ary, (i, j, k), 5)


def test_atomic_3d_int32_indices():
    ptx = ptx_of(atomic_3d_int32_index_kernel, "void(int64[:, :, ::1], int32, int32, int32)")
    assert "atom.global.max.s64" in ptx


def test_atomic_returns_old_value_of_array_dtype():
    spec = atomic_exch_float_kernel.compile("void(float64[:], float64, float64[:])")
    assert spec.compiled.type_annotation is not None
    assert "atom.global.exch.b64" in spec.ptx


def test_atomic_via_imported_namespace():
    from gpureplace.cuda import atomic

    @cuda.jit
    def k(ary):
        atomic.add(ary, 0, 1)

    assert "atom.global.add.u32" in ptx_of(k, "void(int32[:])")


# ---------------------------------------------------------------------------------------------
# Atomics: errors


def _compile_error(fn, sig):
    with pytest.raises(CompileError) as info:
        fn.compile(sig)
    return str(info.value)


@cuda.jit
def bad_and_kernel(ary):
    cuda.atomic.and_(ary, 0, 1)


def test_atomic_bitwise_on_float_is_an_error():
    msg = _compile_error(bad_and_kernel, "void(float32[:])")
    assert "cuda.atomic.and_()" in msg and "unsupported array dtype float32" in msg
    assert "int32" in msg            # lists what is supported
    assert "bad_and_kernel" in msg   # names the kernel


@cuda.jit
def bad_add_kernel(ary):
    cuda.atomic.add(ary, 0, 1)


@pytest.mark.parametrize("dtype", ["int8", "int16", "uint8", "float16", "complex64"])
def test_atomic_add_on_unsupported_dtype_is_an_error(dtype):
    msg = _compile_error(bad_add_kernel, f"void({dtype}[:])")
    assert f"unsupported array dtype {dtype}" in msg
    assert "line" in msg


def test_atomic_wrong_index_arity_is_an_error():
    msg = _compile_error(bad_add_kernel, "void(int32[:, :])")
    assert "2-D array" in msg and "tuple of 2" in msg


@cuda.jit
def bad_tuple_index_kernel(ary):
    cuda.atomic.add(ary, (0, 1, 2), 1)


def test_atomic_too_many_indices_is_an_error():
    msg = _compile_error(bad_tuple_index_kernel, "void(int32[:, :])")
    assert "indexing a 2-D array with 3 indices" in msg


@cuda.jit
def bad_inc_kernel(ary):
    cuda.atomic.inc(ary, 0, 1)


def test_atomic_inc_on_signed_is_an_error():
    msg = _compile_error(bad_inc_kernel, "void(int32[:])")
    assert "cuda.atomic.inc()" in msg and "uint32, uint64" in msg


@cuda.jit
def bad_scalar_kernel(x):
    cuda.atomic.add(x, 0, 1)


def test_atomic_on_scalar_is_an_error():
    msg = _compile_error(bad_scalar_kernel, "void(int32)")
    assert "must be an array" in msg


@cuda.jit
def bad_cas_kernel(ary):
    cuda.atomic.cas(ary, 0, 1.0, 2.0)


def test_atomic_cas_on_float_is_an_error():
    msg = _compile_error(bad_cas_kernel, "void(float32[:])")
    assert "cuda.atomic.cas()" in msg and "float32" in msg


# =============================================================================================
# Warp primitives: PTX


@cuda.jit
def shuffle_kernel(ary):
    i = cuda.grid(1)
    v = ary[i]
    a = cuda.shfl_sync(FULL, v, 0)
    b = cuda.shfl_up_sync(FULL, v, 1)
    c = cuda.shfl_down_sync(FULL, v, 2)
    d = cuda.shfl_xor_sync(FULL, v, 4)
    ary[i] = a + b + c + d


@pytest.mark.parametrize("dtype,per_mode", [("int32", 1), ("uint32", 1), ("float32", 1),
                                            ("int64", 2), ("uint64", 2), ("float64", 2)])
def test_shuffles(dtype, per_mode):
    ptx = ptx_of(shuffle_kernel, f"void({dtype}[:])")
    for mode in ("idx", "up", "down", "bfly"):
        # 64-bit values travel as two 32-bit shuffles
        assert len(re.findall(rf"shfl\.sync\.{mode}\.b32", ptx)) == per_mode, mode


def test_shuffle_clamp_values():
    ptx = body(ptx_of(shuffle_kernel, "void(int32[:])"))
    assert re.search(r"shfl\.sync\.up\.b32\s+%r\d+, %r\d+, 1, 0, -1;", ptx)
    assert re.search(r"shfl\.sync\.down\.b32\s+%r\d+, %r\d+, 2, 31, -1;", ptx)


@cuda.jit
def vote_kernel(ary, out):
    i = cuda.grid(1)
    out[i, 0] = cuda.ballot_sync(FULL, ary[i] > 0)
    out[i, 1] = cuda.all_sync(FULL, ary[i] > 0)
    out[i, 2] = cuda.any_sync(FULL, ary[i])
    out[i, 3] = cuda.eq_sync(FULL, ary[i] > 0)
    out[i, 4] = cuda.activemask()
    out[i, 5] = cuda.lanemask_lt()
    out[i, 6] = cuda.match_any_sync(FULL, ary[i])
    mask, pred = cuda.match_all_sync(FULL, ary[i])
    out[i, 7] = mask
    out[i, 8] = pred


def test_votes_and_masks():
    ptx = ptx_of(vote_kernel, "void(int32[:], int64[:, :])")
    for instr in ("vote.sync.ballot.b32", "vote.sync.all.pred", "vote.sync.any.pred",
                  "vote.sync.uni.pred", "activemask.b32", "%lanemask_lt",
                  "match.any.sync.b32", "match.all.sync.b32"):
        assert instr in ptx, instr


def test_match_on_64_bit_values():
    ptx = ptx_of(vote_kernel, "void(float64[:], int64[:, :])")
    assert "match.any.sync.b64" in ptx and "match.all.sync.b64" in ptx


def test_warp_return_types():
    from numba.core import types

    @cuda.jit(device=True)
    def f(x):
        return (cuda.ballot_sync(FULL, x > 0), cuda.all_sync(FULL, x > 0),
                cuda.activemask(), cuda.lanemask_lt(), cuda.match_all_sync(FULL, x),
                cuda.shfl_sync(FULL, x, 0), cuda.match_any_sync(FULL, x))

    _, ret = cuda.compile_ptx(f, "(uint32,)", device=True)
    assert ret == types.Tuple((types.int32, types.boolean, types.uint32, types.uint32,
                               types.Tuple((types.int32, types.boolean)), types.uint32,
                               types.int32))


@cuda.jit
def bad_shuffle_kernel(ary):
    cuda.shfl_sync(FULL, ary, 0)


def test_shuffle_of_an_array_is_an_error():
    msg = _compile_error(bad_shuffle_kernel, "void(int32[:])")
    assert "cuda.shfl_sync()" in msg and "unsupported value type" in msg


# =============================================================================================
# Bits and arithmetic intrinsics: PTX


@cuda.jit
def bits_kernel(ary):
    i = cuda.grid(1)
    x = ary[i]
    ary[i] = cuda.popc(x) + cuda.clz(x) + cuda.brev(x) + cuda.ffs(x)


@pytest.mark.parametrize("dtype,w", [("uint32", 32), ("int32", 32), ("uint64", 64),
                                     ("int64", 64)])
def test_bit_intrinsics(dtype, w):
    ptx = ptx_of(bits_kernel, f"void({dtype}[:])")
    assert f"popc.b{w}" in ptx and f"clz.b{w}" in ptx and f"brev.b{w}" in ptx


@cuda.jit
def float_kernel(ary):
    i = cuda.grid(1)
    x = ary[i]
    ary[i] = cuda.fma(x, x, x) + cuda.cbrt(x) + cuda.selp(x > 0, x, -x)


@pytest.mark.parametrize("dtype,suffix", [("float32", "f32"), ("float64", "f64")])
def test_fma_cbrt_selp(dtype, suffix):
    spec = float_kernel.compile(f"void({dtype}[:])")
    assemble(spec.ptx)
    assert f"fma.rn.{suffix}" in spec.ptx
    assert "selp" in spec.ptx
    assert "call" not in body(spec.ptx)       # cbrt: libdevice, linked and inlined
    sym = "__nv_cbrtf" if dtype == "float32" else "__nv_cbrt("
    assert any(sym.rstrip("(") in t for cf in spec.compiled.closure() for t in cf.ir_texts())


def test_bit_return_types():
    from numba.core import types

    @cuda.jit(device=True)
    def f(x, y):
        return cuda.popc(x), cuda.clz(x), cuda.brev(x), cuda.ffs(x), cuda.ffs(y), cuda.brev(y)

    _, ret = cuda.compile_ptx(f, "(int32, uint64)", device=True)
    assert ret == types.Tuple((types.int32, types.int32, types.uint32, types.uint32,
                               types.uint32, types.uint64))


@cuda.jit
def fp16_kernel(a, out):
    i = cuda.grid(1)
    x = a[i]
    y = cuda.fp16.hadd(x, x)
    y = cuda.fp16.hmul(y, x)
    y = cuda.fp16.hsub(y, x)
    y = cuda.fp16.hfma(y, x, x)
    y = cuda.fp16.hdiv(y, cuda.fp16.habs(cuda.fp16.hneg(x)))
    out[i] = cuda.fp16.hmax(y, cuda.fp16.hmin(x, y))


def test_fp16_helpers():
    ptx = ptx_of(fp16_kernel, "void(float16[:], float16[:])")
    for instr in ("add.rn.f16", "mul.rn.f16", "sub.rn.f16", "fma.rn.f16", "max.f16", "min.f16"):
        assert instr in ptx, instr


@cuda.jit
def bad_popc_kernel(ary):
    ary[0] = cuda.popc(ary[0])


def test_popc_of_float_is_an_error():
    msg = _compile_error(bad_popc_kernel, "void(float32[:])")
    assert "cuda.popc()" in msg and "integer" in msg


# =============================================================================================
# print(): PTX


@cuda.jit
def print_kernel(a, f, u, flag):
    i = cuda.grid(1)
    print("value 100%", i, a[i], f[i], u[i], flag, None, (i, 2))


def test_print_calls_vprintf_with_a_format():
    ptx = print_kernel.compile("void(int32[:], float32[:], uint16[:], boolean)").ptx
    assemble(ptx)
    assert "vprintf" in ptx and re.search(r"call(\.uni)?\s+\(retval0\),\s+vprintf", ptx)
    fmts = const_strings(ptx)
    assert "value 100%% %lld %lld %f %llu %s None (%lld, 2)\n" in fmts
    assert "True" in fmts and "False" in fmts
    # float32 is promoted to double for printf
    assert "cvt.f64.f32" in ptx


@cuda.jit
def print_dim3_kernel():
    print(cuda.threadIdx, cuda.gridDim)


def test_print_of_thread_and_block_registers_is_a_tuple(capsys):
    ptx = print_dim3_kernel.compile("void()").ptx
    assemble(ptx)
    assert "(%lld, %lld, %lld) (%lld, %lld, %lld)\n" in const_strings(ptx)
    assert "mov.u32" in ptx and "%tid.z" in ptx and "%nctaid.y" in ptx
    from gpureplace import simulator
    simulator.run(print_dim3_kernel, (2, 1, 1), (1, 2, 1))
    lines = sorted(capsys.readouterr().out.splitlines())
    assert lines == ["(0, 0, 0) (2, 1, 1)", "(0, 0, 0) (2, 1, 1)",
                     "(0, 1, 0) (2, 1, 1)", "(0, 1, 0) (2, 1, 1)"]


@cuda.jit
def print_empty_kernel():
    print()


def test_print_without_arguments():
    ptx = print_empty_kernel.compile("void()").ptx
    assemble(ptx)
    assert "\n" in const_strings(ptx)


@cuda.jit
def print_array_kernel(a):
    print(a)


def test_print_of_an_array_is_an_error():
    msg = _compile_error(print_array_kernel, "void(float32[:])")
    assert "print()" in msg and "array" in msg and "print_array_kernel" in msg


# =============================================================================================
# GPU tests


@pytest.fixture
def cp():
    import cupy
    return cupy


@cuda.jit
def histogram_kernel(data, bins):
    i = cuda.grid(1)
    if i < data.size:
        cuda.atomic.add(bins, data[i], 1)


@pytest.mark.gpu
def test_gpu_histogram(cp):
    rng = np.random.default_rng(0)
    data = rng.integers(0, 64, size=100_000).astype(np.int32)
    bins = cp.zeros(64, dtype=np.int32)
    histogram_kernel[(data.size + 255) // 256, 256](cp.asarray(data), bins)
    np.testing.assert_array_equal(bins.get(), np.bincount(data, minlength=64))


@cuda.jit
def float_sum_kernel(x, out):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(out, 0, x[i])
        cuda.atomic.sub(out, 1, x[i])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_float_add_sub(cp, dtype):
    x = np.random.default_rng(1).random(10_000).astype(dtype)
    out = cp.zeros(2, dtype=dtype)
    float_sum_kernel[40, 256](cp.asarray(x), out)
    ref = x.astype(np.float64).sum()
    np.testing.assert_allclose(out.get(), [ref, -ref], rtol=1e-4)


@cuda.jit
def max_min_kernel(x, out):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.max(out, 0, x[i])
        cuda.atomic.min(out, 1, x[i])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64, np.float32,
                                   np.float64])
def test_gpu_atomic_max_min(cp, dtype):
    rng = np.random.default_rng(2)
    x = (rng.random(5000) * 1e6).astype(dtype)
    out = cp.asarray(np.array([x[0], x[0]], dtype=dtype))
    max_min_kernel[20, 256](cp.asarray(x), out)
    np.testing.assert_array_equal(out.get(), [x.max(), x.min()])


@cuda.jit
def nan_max_kernel(out, v):
    cuda.atomic.max(out, 0, v[0])
    cuda.atomic.min(out, 1, v[0])
    cuda.atomic.nanmax(out, 2, v[0])
    cuda.atomic.nanmin(out, 3, v[0])


@pytest.mark.gpu
def test_gpu_atomic_max_min_nan_rules(cp):
    # NaN as the new value: max/min and nanmax/nanmin leave the element
    out = cp.asarray(np.array([5.0, 5.0, 5.0, 5.0]))
    nan_max_kernel[1, 1](out, cp.asarray(np.array([np.nan])))
    np.testing.assert_array_equal(out.get(), [5.0, 5.0, 5.0, 5.0])
    # NaN stored: max/min keep it, nanmax/nanmin replace it
    out = cp.asarray(np.full(4, np.nan))
    nan_max_kernel[1, 1](out, cp.asarray(np.array([3.0])))
    np.testing.assert_array_equal(out.get(), [np.nan, np.nan, 3.0, 3.0])


@cuda.jit
def old_value_kernel(ary, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda.atomic.add(ary, 0, 1)


@pytest.mark.gpu
def test_gpu_atomic_add_returns_distinct_old_values(cp):
    n = 4096
    ary = cp.zeros(1, dtype=np.int64)
    out = cp.zeros(n, dtype=np.int64)
    old_value_kernel[n // 128, 128](ary, out)
    np.testing.assert_array_equal(np.sort(out.get()), np.arange(n))
    assert int(ary.get()[0]) == n


@cuda.jit
def cas_add_kernel(x, total):
    # lock-free add through a compare-and-swap loop
    i = cuda.grid(1)
    if i < x.size:
        old = total[0]
        while True:
            seen = cuda.atomic.cas(total, 0, old, old + x[i])
            if seen == old:
                break
            old = seen


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.uint64])
def test_gpu_cas_lock_free_update(cp, dtype):
    x = np.random.default_rng(3).integers(0, 100, size=3000).astype(dtype)
    total = cp.zeros(1, dtype=dtype)
    cas_add_kernel[12, 256](cp.asarray(x), total)
    assert int(total.get()[0]) == int(x.astype(np.int64).sum())


@cuda.jit
def cas_claim_kernel(slots, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda.atomic.cas(slots, (i % 2, 0), 0, i + 1)


@pytest.mark.gpu
def test_gpu_cas_claims_once(cp):
    n = 512
    slots = cp.zeros((2, 3), dtype=np.int32)
    out = cp.zeros(n, dtype=np.int32)
    cas_claim_kernel[4, 128](slots, out)
    s, o = slots.get(), out.get()
    for row in (0, 1):
        winners = [i for i in range(row, n, 2) if o[i] == 0]
        assert len(winners) == 1                  # exactly one thread saw the slot empty
        assert s[row, 0] == winners[0] + 1        # and its value is the one stored
    assert (s[:, 1:] == 0).all()


@cuda.jit
def incdec_kernel(ary, n, limit):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.inc(ary, 0, limit)
        cuda.atomic.dec(ary, 1, limit)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_gpu_atomic_inc_dec_wrap(cp, dtype):
    n, limit = 1000, 9
    ary = cp.zeros(2, dtype=dtype)
    incdec_kernel[4, 256](ary, n, dtype(limit))
    # inc cycles 0..limit, dec from 0 wraps to limit and counts down
    assert ary.get().tolist() == [n % (limit + 1), (-n) % (limit + 1)]


@cuda.jit
def bitwise_kernel(ary, x):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.or_(ary, 0, x[i])
        cuda.atomic.and_(ary, 1, x[i])
        cuda.atomic.xor(ary, 2, x[i])


@pytest.mark.gpu
def test_gpu_atomic_bitwise(cp):
    x = np.random.default_rng(4).integers(0, 2**32, size=1000, dtype=np.uint64).astype(np.uint32)
    ary = cp.asarray(np.array([0, 0xFFFFFFFF, 0], dtype=np.uint32))
    bitwise_kernel[4, 256](ary, cp.asarray(x))
    assert ary.get().tolist() == [int(np.bitwise_or.reduce(x)), int(np.bitwise_and.reduce(x)),
                                  int(np.bitwise_xor.reduce(x))]


@cuda.jit
def atomic_strided_kernel(ary):
    i, j = cuda.grid(2)
    if i < ary.shape[0] and j < ary.shape[1]:
        cuda.atomic.add(ary, (i, j), i * 10 + j)


@pytest.mark.gpu
def test_gpu_atomic_on_strided_view(cp):
    base = cp.zeros((8, 12), dtype=np.float64)
    view = base[::2, 1::3]                    # non-contiguous: 4 x 4
    atomic_strided_kernel[(1, 1), (8, 8)](view)
    ref = np.zeros((8, 12))
    ref[::2, 1::3] = np.add.outer(np.arange(4) * 10, np.arange(4))
    np.testing.assert_array_equal(base.get(), ref)


@cuda.jit
def warp_sum_kernel(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.size else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(out, 0, v)
        out[1 + i // 32] = v


@pytest.mark.gpu
def test_gpu_warp_reduction_with_shfl_down(cp):
    x = np.random.default_rng(5).random(1024)
    out = cp.zeros(1 + 1024 // 32)
    warp_sum_kernel[4, 256](cp.asarray(x), out)
    res = out.get()
    np.testing.assert_allclose(res[1:], x.reshape(-1, 32).sum(axis=1), rtol=1e-12)
    np.testing.assert_allclose(res[0], x.sum(), rtol=1e-12)


@cuda.jit
def shuffle_modes_kernel(x, out):
    i = cuda.grid(1)
    v = x[i]
    out[0, i] = cuda.shfl_sync(FULL, v, 3)
    out[1, i] = cuda.shfl_up_sync(FULL, v, 1)
    out[2, i] = cuda.shfl_down_sync(FULL, v, 1)
    out[3, i] = cuda.shfl_xor_sync(FULL, v, 5)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64, np.float32,
                                   np.float64])
def test_gpu_shuffle_modes(cp, dtype):
    n = 64
    rng = np.random.default_rng(6)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
    else:
        x = (rng.standard_normal(n) * 1e10).astype(dtype)   # uses all 64 bits for float64
    out = cp.zeros((4, n), dtype=dtype)
    shuffle_modes_kernel[1, n](cp.asarray(x), out)
    lane = np.arange(n) % 32
    warp0 = np.arange(n) - lane
    ref = np.stack([
        x[warp0 + 3],
        x[np.where(lane >= 1, np.arange(n) - 1, np.arange(n))],
        x[np.where(lane <= 30, np.arange(n) + 1, np.arange(n))],
        x[warp0 + (lane ^ 5)],
    ])
    np.testing.assert_array_equal(out.get(), ref)


@cuda.jit
def ballot_kernel(x, out):
    i = cuda.grid(1)
    pred = x[i] > 0
    # every lane of the mask must take part in a vote: vote first, then let lane 0 write
    mask = cuda.ballot_sync(FULL, pred)
    all_ = cuda.all_sync(FULL, pred)
    any_ = cuda.any_sync(FULL, pred)
    eq = cuda.eq_sync(FULL, pred)
    w = i // 32
    if cuda.laneid == 0:
        out[w, 0] = cuda.popc(mask)
        out[w, 1] = mask
        out[w, 2] = all_
        out[w, 3] = any_
        out[w, 4] = eq
    out2 = cuda.lanemask_lt()
    x[i] = cuda.popc(mask & out2)     # rank of this lane among the set ones (needs no pred)


@pytest.mark.gpu
def test_gpu_ballot_and_votes(cp):
    rng = np.random.default_rng(7)
    x = (rng.random(128) > 0.5).astype(np.int64)
    x[32:64] = 1       # warp 1: all set
    x[64:96] = 0       # warp 2: none set
    out = cp.zeros((4, 5), dtype=np.int64)
    dx = cp.asarray(x)
    ballot_kernel[1, 128](dx, out)
    res = out.get()
    w = x.reshape(4, 32)
    masks = [int(sum(1 << b for b in range(32) if row[b])) for row in w]
    np.testing.assert_array_equal(res[:, 0], w.sum(axis=1))
    assert [m & 0xFFFFFFFF for m in res[:, 1].tolist()] == masks   # int32 mask, as numba-cuda
    np.testing.assert_array_equal(res[:, 2], w.all(axis=1))
    np.testing.assert_array_equal(res[:, 3], w.any(axis=1))
    np.testing.assert_array_equal(res[:, 4], w.all(axis=1) | ~w.any(axis=1))
    ranks = np.concatenate([np.concatenate([[0], np.cumsum(row)[:-1]]) for row in w])
    np.testing.assert_array_equal(dx.get(), ranks)


@cuda.jit
def match_kernel(x, out):
    i = cuda.grid(1)
    out[i, 0] = cuda.match_any_sync(FULL, x[i])
    m, p = cuda.match_all_sync(FULL, x[i])
    out[i, 1] = m
    out[i, 2] = p
    out[i, 3] = cuda.activemask()


@pytest.mark.gpu
@pytest.mark.gpu_only    # the simulator cannot see divergence, so activemask() in a branch differs
def test_gpu_match_and_activemask(cp):
    x = (np.arange(64) % 4).astype(np.float64)
    x[32:] = 7.0     # second warp: all equal
    out = cp.zeros((64, 4), dtype=np.int64)
    match_kernel[1, 64](cp.asarray(x), out)
    res = out.get() & 0xFFFFFFFF
    for i in range(32):
        assert res[i, 0] == sum(1 << b for b in range(32) if b % 4 == i % 4)
        assert res[i, 1] == 0 and res[i, 2] == 0
    assert (res[32:, 0] == 0xFFFFFFFF).all()
    assert (res[32:, 1] == 0xFFFFFFFF).all() and (res[32:, 2] == 1).all()
    assert (res[:, 3] == 0xFFFFFFFF).all()


@cuda.jit
def bits_gpu_kernel(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        out[0, i] = cuda.popc(v)
        out[1, i] = cuda.clz(v)
        out[2, i] = cuda.brev(v)
        out[3, i] = cuda.ffs(v)


def _ref_bits(values, width):
    pop, clz, brev, ffs = [], [], [], []
    for v in (int(a) for a in values):
        pop.append(bin(v).count("1"))
        clz.append(width - v.bit_length())
        brev.append(int(format(v, f"0{width}b")[::-1], 2))
        ffs.append((v & -v).bit_length())
    return np.array([pop, clz, brev, ffs], dtype=np.uint64)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,width", [(np.uint32, 32), (np.uint64, 64)])
def test_gpu_bit_intrinsics(cp, dtype, width):
    rng = np.random.default_rng(8)
    x = rng.integers(0, np.iinfo(dtype).max, size=1000, dtype=dtype, endpoint=True)
    x[:4] = [0, 1, np.iinfo(dtype).max, 1 << (width - 1)]
    x[4:20] >>= rng.integers(0, width, size=16).astype(dtype)
    out = cp.zeros((4, x.size), dtype=dtype)
    bits_gpu_kernel[4, 256](cp.asarray(x), out)
    np.testing.assert_array_equal(out.get().astype(np.uint64), _ref_bits(x, width))


@cuda.jit
def float_gpu_kernel(a, b, c, out):
    i = cuda.grid(1)
    if i < a.size:
        out[0, i] = cuda.fma(a[i], b[i], c[i])
        out[1, i] = cuda.cbrt(a[i])
        out[2, i] = cuda.selp(a[i] > b[i], a[i], b[i])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpu_fma_cbrt_selp(cp, dtype):
    rng = np.random.default_rng(9)
    a, b, c = ((rng.standard_normal(1000) * 10).astype(dtype) for _ in range(3))
    out = cp.zeros((3, a.size), dtype=dtype)
    float_gpu_kernel[4, 256](cp.asarray(a), cp.asarray(b), cp.asarray(c), out)
    res = out.get()
    exact = (a.astype(np.float64) * b + c)
    np.testing.assert_allclose(res[0], exact.astype(dtype), rtol=1e-6 if dtype == np.float32
                               else 1e-15, atol=1e-6)
    np.testing.assert_allclose(res[1], np.cbrt(a), rtol=1e-6 if dtype == np.float32 else 1e-14)
    np.testing.assert_array_equal(res[2], np.maximum(a, b))


@cuda.jit
def fp16_gpu_kernel(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        out[0, i] = cuda.fp16.hadd(a[i], b[i])
        out[1, i] = cuda.fp16.hmul(a[i], b[i])
        out[2, i] = cuda.fp16.hsub(a[i], b[i])
        out[3, i] = cuda.fp16.hneg(a[i])
        out[4, i] = cuda.fp16.habs(b[i])
        out[5, i] = cuda.fp16.hmax(a[i], b[i])


@pytest.mark.gpu
def test_gpu_fp16(cp):
    rng = np.random.default_rng(10)
    a = rng.standard_normal(256).astype(np.float16)
    b = rng.standard_normal(256).astype(np.float16)
    out = cp.zeros((6, 256), dtype=np.float16)
    fp16_gpu_kernel[1, 256](cp.asarray(a), cp.asarray(b), out)
    ref = np.stack([a + b, a * b, a - b, -a, np.abs(b), np.maximum(a, b)])
    np.testing.assert_array_equal(out.get(), ref)


_PRINT_SCRIPT = textwrap.dedent("""
    import cupy as cp
    from gpureplace import cuda

    @cuda.jit
    def hello(a, f):
        i = cuda.grid(1)
        if i < a.size:
            print("item", i, a[i], f[i], a[i] > 1, "100%")

    hello[1, 4](cp.arange(3, dtype=cp.int32), cp.asarray([0.5, 1.25, -2.0], dtype=cp.float32))
    cp.cuda.runtime.deviceSynchronize()
    print("host done", flush=True)
""")


@pytest.mark.gpu
@pytest.mark.gpu_only    # device printf through the CUDA driver, in a subprocess
def test_gpu_print_reaches_stdout(tmp_path):
    script = tmp_path / "printing_kernel.py"
    script.write_text(_PRINT_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for expected in ("item 0 0 0.500000 False 100%", "item 1 1 1.250000 False 100%",
                     "item 2 2 -2.000000 True 100%"):
        assert expected in lines, proc.stdout
    assert "host done" in lines
    assert not any(line.startswith("item 3") for line in lines)


@cuda.jit(device=True)
def _apply_binop(op, ary, idx, val):
    op(ary, idx, val)


def _as_uint64(v):
    return np.uint64(v)


@cuda.jit
def atomics_through_arguments(ary, vals):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    idx = (tx, _as_uint64(ty))
    if tx > 100:                         # never: but (int64, uint64) unified with (int64, int64)
        idx = (idx[0] % ary.shape[0], idx[1] % ary.shape[1])     # types as (int64, float64)
    _apply_binop(cuda.atomic.add, ary, idx, vals[tx, ty])


def test_device_functions_and_intrinsics_passed_as_arguments():
    from gpureplace import simulator
    ary = np.zeros((4, 4), np.float64)
    vals = np.arange(16, dtype=np.float64).reshape(4, 4)
    simulator.run(atomics_through_arguments, 1, (4, 4), ary, vals)
    np.testing.assert_array_equal(ary, vals)
    spec = atomics_through_arguments.compile("void(float64[:, ::1], float64[:, ::1])")
    assert "atom.global.add.f64" in spec.ptx
    assemble(spec.ptx)


@pytest.mark.gpu
def test_device_functions_and_intrinsics_passed_as_arguments_gpu():
    import cupy as cp
    vals = cp.arange(16, dtype=cp.float64).reshape(4, 4)
    ary = cp.zeros((4, 4), cp.float64)
    atomics_through_arguments[1, (4, 4)](ary, vals)
    np.testing.assert_array_equal(cp.asnumpy(ary), cp.asnumpy(vals))
