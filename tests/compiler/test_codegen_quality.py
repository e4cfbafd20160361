"""Properties of the generated code that the H200 benchmark depends on (bench/codegen.py), checked
on the PTX without a GPU.

Grid-stride loops (``while i < n: ...; i += cuda.gridsize(1)``) must be runtime-unrolled 4x as
NVVM does, without spending registers on it: the trip count needs a 64-bit division in the
preheader, which LLVM's default SCEV expansion budget refuses, leaving one load in flight per
iteration (the block reduction ran at 0.61x of CUDA C).  See backend.SCEV_EXPANSION_BUDGET,
backend.RUNTIME_UNROLL_MAX_COUNT and backend.LSR_DROP_UNPROFITABLE.

An if/else whose arms both store to the same element keeps a store in each arm, as NVVM does, so
that ptxas can predicate the arms (backend.SINK_COMMON_INSTRUCTIONS; the 5-point stencil).

Double-precision sine and cosine inline libdevice's slow argument reduction in loops (a kernel
without loops calls it, compiled once: trig_slowpath.py) and keep their quadrant branches as
branches (libdevice.tune_trig; sin f64 went from 0.92x to 1.03x of nvcc).
"""

import math
import re

import numpy as np
import pytest
from numba import float32

from conftest import assemble
from corpus import bench_codegen
from gpureplace import cuda

TPB = 256                 # bench/codegen_kernels.py's RED_TPB and TPB


@cuda.jit
def grid_stride_pairs(x, out, offset):
    i = cuda.grid(1) * 2 + offset
    stride = cuda.gridsize(1) * 2
    acc = float32(0.0)
    while i < x.size - 1:
        acc += x[i] * x[i + 1]
        i += stride
    out[cuda.grid(1)] = acc


@cuda.jit
def grid_stride_range(x, out):
    acc = float32(0.0)
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        acc += x[i]
    out[cuda.grid(1)] = acc


@cuda.jit
def row_sums(a, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        acc = float32(0.0)
        for j in range(a.shape[1]):
            acc += a[i, j]
        out[i] = acc


_BENCH = bench_codegen()         # bench/codegen.py, whose kernels these tests check as it runs them
stencil5 = _BENCH.stencil5
# The benchmark's block reduction (a grid-stride sum per thread, then a tree in shared memory over
# RED_TPB == TPB threads) and its grid-stride saxpy, as it runs them.
grid_stride_sum = _BENCH.block_sum
grid_stride_saxpy = _BENCH.saxpy_stride


def single_block_loops(ptx):
    """The bodies (lists of lines) of loops laid out straight: a label followed, with no other
    label in between, by a branch back to it (conditional exits on the way are allowed)."""
    bodies = []
    label, block = None, []
    for raw in ptx.splitlines():
        line = raw.strip()
        m = re.fullmatch(r"(\$L__\w+):", line)
        if m:
            label, block = m.group(1), []
            continue
        block.append(line)
        m = re.search(r"\bbra(?:\.uni)?\s+(\$L__\w+);", line)
        if m:
            if m.group(1) == label:
                bodies.append(block)
                label, block = None, []
            elif not line.startswith("@"):
                label, block = None, []           # an unconditional jump elsewhere
    return bodies


def loads_per_loop(ptx):
    return sorted(sum(line.startswith("ld.global") for line in body)
                  for body in single_block_loops(ptx))


def registers(ptx):
    return int(re.search(r"Used (\d+) registers", assemble(ptx, verbose=True)).group(1))


def test_loop_finder_on_a_known_shape():
    ptx = """
$L__BB0_2:
\tld.global.b32 \t%r1, [%rd1];
\t@%p1 bra \t$L__BB0_5;
\tld.global.b32 \t%r2, [%rd2];
$L__BB0_4:
\tld.global.b32 \t%r3, [%rd3];
\tld.global.b32 \t%r4, [%rd4];
\t@%p2 bra \t$L__BB0_4;
$L__BB0_6:
\tld.global.b32 \t%r5, [%rd5];
\t@%p3 bra \t$L__BB0_5;
\tbra.uni \t$L__BB0_6;
$L__BB0_5:
\tret;
"""
    assert loads_per_loop(ptx) == [1, 2]


def test_grid_stride_while_loop_is_unrolled_4x():
    ptx = grid_stride_sum.compile("void(float32[::1], float32[::1])", arch="sm_90").ptx
    assemble(ptx)
    # the 4x body and the remainder loop (at most 3 iterations), as nvcc makes them
    assert loads_per_loop(ptx) == [1, 4], ptx
    # the trip count is computed once, in the preheader (a 32-bit fast path and a 64-bit division)
    assert re.search(r"\bdiv\.u(32|64)\b", ptx)
    # registers stay within full occupancy for 256-thread blocks, 8 per SM (NVRTC: 26)
    assert registers(ptx) <= 32


def test_strided_start_and_bound_are_unrolled_too():
    ptx = grid_stride_pairs.compile("void(float32[::1], float32[::1], int64)",
                                    arch="sm_90").ptx
    assemble(ptx)
    assert max(loads_per_loop(ptx)) == 8, ptx         # 4 iterations of 2 loads


def test_unrolled_loop_over_three_arrays_keeps_few_registers():
    # Loop strength reduction would give each array and copy its own pointer (12 induction
    # variables, 40 registers); nvcc chains 3 pointers (24 registers).
    ptx = grid_stride_saxpy.compile("void(float32, float32[::1], float32[::1], float32[::1])",
                                    arch="sm_90").ptx
    assemble(ptx)
    assert max(loads_per_loop(ptx)) == 8, ptx
    assert registers(ptx) <= 32


def test_range_grid_stride_loop_is_unrolled_4x():
    ptx = grid_stride_range.compile("void(float32[::1], float32[::1])", arch="sm_90").ptx
    assemble(ptx)
    assert max(loads_per_loop(ptx)) == 4, ptx


def test_runtime_unroll_factor_is_4_as_nvvm():
    # LLVM's default would take 8 copies of this body
    ptx = row_sums.compile("void(float32[:, ::1], float32[::1])", arch="sm_90").ptx
    assemble(ptx)
    assert max(loads_per_loop(ptx)) == 4, ptx


@cuda.jit
def block_stride_copy(a, out):
    t = cuda.threadIdx.x
    for j in range(t, a.size, 256):
        out[j] = a[j]


@cuda.jit
def offset_stride_copy(a, out, start):
    for j in range(start + cuda.threadIdx.x, a.size, 256):      # a start of unknown sign
        out[j] = a[j]


def test_a_range_from_a_thread_index_needs_no_negative_index_correction():
    # range steps are nsw (compiler/rangeloops.py): j = t, t + 256, ... stays >= 0, so a[j]
    # needs no Python wraparound (nvcc's PTX has none either); with a start of unknown sign
    # the correction stays
    correction = re.compile(r"icmp slt i64 %[\w.]+, 0\b")
    spec = block_stride_copy.compile("void(float32[::1], float32[::1])", arch="sm_90")
    assemble(spec.ptx)
    assert not correction.search(spec.llvm_ir), spec.llvm_ir
    spec = offset_stride_copy.compile("void(float32[::1], float32[::1], int64)", arch="sm_90")
    assert correction.search(spec.llvm_ir)


def test_range_loops_still_step_as_python_does(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")

    @cuda.jit
    def walk(out, start, stop, step):
        k = 0
        for j in range(start, stop, step):
            out[k] = j
            k += 1
        out[k] = -999

    for args in ((0, 10, 3), (10, -1, -3), (5, 5, 1), (-7, 7, 5), (2**62, 2**63 - 1, 2**61)):
        out = np.zeros(16, np.int64)
        walk[1, 1](out, *args)
        expected = list(range(*args))
        assert out[:len(expected)].tolist() == expected and out[len(expected)] == -999
    ptx = walk.compile("void(int64[::1], int64, int64, int64)", arch="sm_90").ptx
    assemble(ptx)


def _nbody_ptx(variant="nbody"):
    from numba.core import types
    vt = cuda.float32x4.vector_type
    import codegen_kernels_notebook as notebook_kernels      # (on sys.path once _BENCH loaded)
    kernel = getattr(notebook_kernels, variant)
    return kernel.compile((vt[::1], vt[::1], types.float32), arch="sm_90").ptx


def test_a_long_constant_range_loop_is_unrolled_16x_and_grid_stride_loops_stay_4x():
    # bench/codegen.py's n-body: 256 steps of ~30 instructions over a shared-memory tile.  nvcc
    # unrolls it 8x (rsqrtf) to 16x (fast math); at 4x the rsqrt row ran 0.82x of CUDA C on the
    # H200, at 16x 1.04x (backend.CONSTANT_LOOP_MAX_COUNT)
    for variant, op in (("nbody", "sqrt.rn.f32"), ("nbody_rsqrt", "rsqrt.approx.f32")):
        ptx = _nbody_ptx(variant)
        assemble(ptx)
        bodies = [b for b in single_block_loops(ptx) if any("ld.shared" in line for line in b)]
        assert [sum(line.startswith(op) for line in b) for b in bodies] == [16], ptx
    # the wider budget was for that kernel alone: a grid-stride loop compiled next keeps 4 copies
    fresh = cuda.jit(grid_stride_sum.py_func)
    ptx = fresh.compile("void(float32[::1], float32[::1])", arch="sm_90").ptx
    assert loads_per_loop(ptx) == [1, 4], ptx


TILE_FOR_TEST = 256


def test_constant_range_loops_are_found_by_their_literal_bounds(own_disk_cache):   # (a spy on
    # the compile: a disk hit from an earlier run would compile nothing)
    from numba.core import types

    from gpureplace.compiler.rangeloops import constant_trip_counts
    seen = {}

    def spy(func_ir, typemap):
        seen[func_ir.func_id.func_name] = sorted(constant_trip_counts(func_ir, typemap))
        return constant_trip_counts(func_ir, typemap)

    tile = 48

    def loops(x, n):
        for k in range(TILE_FOR_TEST):                 # a global constant
            x[k] += 1
        for k in range(2, 64, 3):                     # literals
            x[k] += 1
        for k in range(tile):                         # a closure constant
            x[k] += 1
        for k in range(n):                            # run-time bound: not counted
            x[k] += 1
        for k in range(2, x.size):                    # run-time bound: not counted
            x[k] += 1

    import gpureplace.compiler.frontend as frontend
    old = frontend.constant_trip_counts
    frontend.constant_trip_counts = spy
    try:
        cuda.jit(loops).compile((types.float32[::1], types.int64), arch="sm_90")
    finally:
        frontend.constant_trip_counts = old
    assert seen["loops"] == [21, 48, 256]


def test_shared_memory_is_addressed_with_32_bit_pointers():
    # backend.SHORT_POINTERS: as nvcc, a shared tile's addresses are 32-bit registers (%r)
    ptx = _nbody_ptx()
    shared = [line for line in ptx.splitlines() if re.match(r"\s*(ld|st)\.shared", line)]
    assert shared and all(re.search(r"\[%r\d+(\+-?\d+)?\]", line) for line in shared), shared


@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 1, 3, 255, 256 * 8 - 1, 256 * 8 * 4 + 5, 100_003])
def test_unrolled_grid_stride_sum_is_exact(n):
    """Trip counts around the unroll factor and the remainder loop: the sum of small integers is
    exact in float32, so every element must be counted exactly once."""
    import cupy as cp
    blocks = 8
    x = cp.asarray((np.arange(n) % 7).astype(np.float32))
    partial = cp.zeros(blocks, cp.float32)
    grid_stride_sum[blocks, TPB](x, partial)
    assert float(cp.asnumpy(partial).sum()) == float((np.arange(n) % 7).sum())


@pytest.mark.gpu
@pytest.mark.parametrize("n", [0, 5, 256 * 4 * 4 - 1, 256 * 4 * 4 + 3, 50_001])
def test_unrolled_grid_stride_saxpy_writes_every_element_once(n):
    import cupy as cp
    x = cp.asarray(np.arange(n, dtype=np.float32))
    y = cp.ones(n, cp.float32)
    out = cp.full(n, -1.0, cp.float32)
    grid_stride_saxpy[4, TPB](np.float32(2.0), x, y, out)
    np.testing.assert_array_equal(cp.asnumpy(out), 2.0 * np.arange(n, dtype=np.float32) + 1.0)


def test_if_else_arms_keep_their_own_store():
    """LLVM's SimplifyCFG would sink the two stores into one after the join (a phi of the two
    values): ptxas then puts a reconvergence barrier around the arms (0.952x of CUDA C on the
    H200 against 0.971x with a store in each arm)."""
    ptx = stencil5.compile("void(float32[:, ::1], float32[:, ::1], float32, float32)",
                           arch="sm_90").ptx
    assemble(ptx)
    assert ptx.count("st.global") == 2, ptx


def _stencil_ref(a, c0, c1):
    out = a.astype(np.float64)
    out[1:-1, 1:-1] = c0 * a[1:-1, 1:-1] + c1 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2]
                                                 + a[1:-1, 2:])
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (37, 70), (129, 33)])
def test_stencil_with_a_store_in_each_arm_is_right(shape):
    import cupy as cp
    a = np.random.default_rng(sum(shape)).random(shape, dtype=np.float32)
    out = cp.full(shape, np.nan, cp.float32)
    blocks = ((shape[1] + 31) // 32, (shape[0] + 7) // 8)
    stencil5[blocks, (32, 8)](cp.asarray(a), out, np.float32(0.5), np.float32(0.125))
    np.testing.assert_allclose(cp.asnumpy(out), _stencil_ref(a, 0.5, 0.125), rtol=1e-5, atol=1e-6)


@cuda.jit
def sin_cos_f64(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = math.sin(x[i]) + math.cos(x[i] * 3.0)


def test_libdevice_trig_is_tuned_where_it_is_expected():
    """The patterns tune_trig looks for are in this libdevice: a libdevice that no longer has them
    must be noticed here, not as a silent slowdown."""
    import llvmlite.binding as llvm

    from gpureplace.compiler import backend
    from gpureplace.compiler import libdevice_link as libdevice
    backend.initialize_llvm()
    names = frozenset({"__nv_sin", "__nv_cos", "__nv_sinf"})
    text = str(llvm.parse_bitcode(libdevice._prune(names, backend.reflect_values("sm_90", False))))
    slow = re.search(r"^define [^\n]*@__internal_trig_reduction_slowpathd\([^\n]*", text, re.M)
    group = re.search(r"#(\d+) \{$", slow.group(0))
    attrs = slow.group(0) if group is None else \
        re.search(r"^attributes #%s = \{[^\n]*" % group.group(1), text, re.M).group(0)
    assert "alwaysinline" in attrs and "noinline" not in attrs, attrs
    for fn in ("__nv_sin", "__nv_cos"):
        body = re.search(r"^define [^\n]*@%s\([\s\S]*?^}" % fn, text, re.M).group(0)
        assert body.count("!prof") >= 2, fn
    sinf = re.search(r"^define [^\n]*@__nv_sinf\([\s\S]*?^}", text, re.M).group(0)
    assert "!prof" not in sinf          # single precision is faster as LLVM leaves it
    assert re.search(r'^!\d+ = !\{!"branch_weights", i32 1, i32 2000\}', text, re.M)


@cuda.jit
def sin_cos_f64_loop(x, out, n):
    i = cuda.grid(1)
    if i < x.size:
        acc = 0.0
        for k in range(n):
            acc += math.sin(x[i] + k) + math.cos(x[i] * 3.0)
        out[i] = acc


def test_f64_sin_and_cos_have_no_quadrant_selects_and_inline_the_reduction_in_loops():
    """In a loop (bench/codegen.py's chains) the slow reduction is inlined: no call; in a kernel
    without loops it is the .func compiled once (compiler/trig_slowpath.py), its only call."""
    looped = sin_cos_f64_loop.compile("void(float64[::1], float64[::1], int64)",
                                      arch="sm_90").ptx
    assemble(looped)
    assert not re.search(r"^\s*call", looped, re.M), "the slow reduction must be inlined"
    straight = sin_cos_f64.compile("void(float64[::1], float64[::1])", arch="sm_90").ptx
    assemble(straight)
    calls = re.findall(r"^\s*call\S*\s+(?:\([^)]*\),\s*)?(\w+)", straight, re.M)
    assert calls and set(calls) == {"__internal_trig_reduction_slowpathd"}, calls
    for ptx in (looped, straight):
        # libdevice's own coefficient select is one per function; LLVM's speculation added two
        assert len(re.findall(r"selp\.f64", ptx.split(".entry", 1)[1])) <= 2, ptx


@pytest.mark.gpu
def test_f64_sin_and_cos_match_numpy_from_tiny_to_huge_arguments():
    """Huge arguments take the inlined Payne-Hanek reduction, the others the quadrant branches."""
    import cupy as cp
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-10, 10, 4000), rng.uniform(-1e6, 1e6, 2000),
                        rng.uniform(2.0**31, 2.0**60, 2000) * rng.choice([-1, 1], 2000),
                        [0.0, -0.0, 1e-300, np.pi, -np.pi / 2, 3 * np.pi / 2, 1e300]])
    out = cp.zeros(x.size, cp.float64)
    sin_cos_f64[(x.size + 127) // 128, 128](cp.asarray(x), out)
    np.testing.assert_allclose(cp.asnumpy(out), np.sin(x) + np.cos(x * 3.0), rtol=1e-12,
                               atol=1e-14)


@cuda.jit
def _halo_tile(a, out):
    tile = cuda.shared.array((12, 36), np.float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    for r in range(ty, 12, 8):            # at most 2 rows and 2 columns a thread
        for c in range(tx, 36, 32):
            tile[r, c] = a[r, c]
    cuda.syncthreads()
    out[ty, tx] = tile[ty + 2, tx + 2]


def backward_branches(ptx):
    """Branches to a label above them: the loops left in ``ptx``."""
    lines = [line.strip() for line in ptx.splitlines()]
    where = {line[:-1]: i for i, line in enumerate(lines) if re.fullmatch(r"\$L__\w+:", line)}
    return [line for i, line in enumerate(lines)
            if (m := re.search(r"\bbra(?:\.uni)?\s+(\$L__\w+);", line)) and where[m.group(1)] < i]


def test_a_halo_loop_bounded_by_its_range_is_unrolled_fully():
    # range's count is computed so that LLVM sees that these loops run at most twice
    # (rangeloops.range_getiter): they are unrolled fully by that bound (backend.UPPER_BOUND_UNROLL),
    # each copy guarded by its loop's test, with no loop left and no runtime remainder (which
    # would add copies: 5 loads and 5 shared stores before revision 10)
    ptx = _halo_tile.compile("void(float32[:, ::1], float32[:, ::1])").ptx
    assemble(ptx)
    assert backward_branches(ptx) == [], ptx
    assert len(re.findall(r"ld\.global", ptx)) == 4, ptx       # 2 rows x 2 columns at most
    assert len(re.findall(r"st\.shared", ptx)) == 4, ptx


def test_a_loop_with_a_larger_bound_stays_a_loop():
    # up to 16 steps (range(ty, 128, 8)): over LLVM's upper bound of 8, it stays a loop
    @cuda.jit
    def tall_tile(a, out):
        tile = cuda.shared.array((128, 32), np.float32)
        ty = cuda.threadIdx.y
        tx = cuda.threadIdx.x
        for r in range(ty, 128, 8):
            tile[r, tx] = a[r, tx]
        cuda.syncthreads()
        out[ty, tx] = tile[ty + 1, tx]

    ptx = tall_tile.compile("void(float32[:, ::1], float32[:, ::1])").ptx
    assert backward_branches(ptx), ptx


def _bench_conv():
    """The benchmark's 5 x 5 convolution (a halo tile loaded by loops of at most 2 steps each,
    unrolled fully) and its module's block shape and filter radius."""
    import codegen_kernels_notebook as nb                    # (on sys.path once _BENCH loaded)
    return nb.conv5x5, nb.CONV_BLOCK, nb.CONV_R


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1, 1), (3, 40), (8, 32), (9, 33), (37, 70), (130, 65)])
def test_the_benchmarks_convolution_with_unrolled_halo_loads_is_right(shape):
    cp = pytest.importorskip("cupy")
    conv, (bx, by), r = _bench_conv()
    k = 2 * r + 1
    rng = np.random.default_rng(7)
    a = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(k * k).astype(np.float32)
    out = cp.full(shape, np.nan, cp.float32)
    conv[((shape[1] + bx - 1) // bx, (shape[0] + by - 1) // by), (bx, by)](
        cp.asarray(a), cp.asarray(w), out)
    padded = np.pad(a, r)
    want = sum(w[dy * k + dx] * padded[dy:dy + shape[0], dx:dx + shape[1]]
               for dy in range(k) for dx in range(k))
    np.testing.assert_allclose(cp.asnumpy(out), want, rtol=1e-5, atol=1e-5)


def test_the_benchmarks_convolution_is_unrolled_fully():
    conv, _, _ = _bench_conv()
    ptx = conv.compile("void(float32[:, ::1], float32[::1], float32[:, ::1])").ptx
    # its halo loops by their bound, its 5 x 5 loops by their constant trip counts
    assert backward_branches(ptx) == [], ptx


def test_backward_branch_finder_on_a_known_shape():
    ptx = "$L__BB0_1:\n\t@%p1 bra \t$L__BB0_3;\n\tbra.uni \t$L__BB0_1;\n$L__BB0_3:\n\tret;\n"
    assert backward_branches(ptx) == ["bra.uni \t$L__BB0_1;"]
    assert backward_branches(ptx.replace("bra.uni \t$L__BB0_1;", "ret;")) == []


@cuda.jit
def _exp_sum(x, out):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]
        acc = math.exp(v)
        for _ in range(3):
            v += float32(0.5)
            acc += math.exp(v)
        out[i] = acc


def test_libdevice_float_operations_contract_with_the_callers():
    # libdevice's expf ends in a multiply; under CUDA C's -fmad=true NVVM fuses it with the
    # caller's add.  Without the contract flag on libdevice's operations the NVPTX back end
    # wrote mul.rn.f32 (never fused), one FMUL + FADD per call where nvcc has an FFMA.
    ptx = _exp_sum.compile("void(float32[::1], float32[::1])").ptx
    assemble(ptx)
    assert "ex2.approx" in ptx
    assert "mul.rn.f32" not in ptx, ptx
    assert "add.rn.f32" not in ptx
