"""Barriers, fences and the memory-space arrays (shared / local / const, dynamic shared memory).

CPU tests compile kernels and check the PTX for the instructions and declarations that prove the
right thing was emitted, then assemble it with ptxas.  GPU tests run the same kernels with CuPy and
compare against NumPy.
"""

import re

import numpy as np
import pytest
from numba import float32, float64, int32, types

from gpureplace import CompileError, cuda
from conftest import assemble
from corpus import TABLE, TPB, WEIGHTS, block_sum, local_reverse, lookup  # the shared corpus

TILE = 16                 # tile edge of the transpose


def _entry(ptx):
    return ptx.split(".entry", 1)[1]


def _shared_decls(ptx):
    """{name: (align, bytes)} of the static .shared arrays in the PTX."""
    return {m.group(3): (int(m.group(1)), int(m.group(4))) for m in re.finditer(
        r"\.shared \.align (\d+) \.b8 ((_gpureplace_smem_\d+))\[(\d+)\]", ptx)}


# ---------------------------------------------------------------------------------------------
# Kernels (shared by the CPU and GPU tests; block_sum, local_reverse and lookup: tests/corpus.py)


@cuda.jit
def transpose(a, out):
    """out = a.T through a (TILE, TILE + 1) shared tile (padded against bank conflicts)."""
    tile = cuda.shared.array((TILE, TILE + 1), dtype=np.float32)   # arithmetic of constants
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    if row < a.shape[0] and col < a.shape[1]:
        tile[ty, tx] = a[row, col]
    cuda.syncthreads()
    orow = cuda.blockIdx.x * TILE + ty
    ocol = cuda.blockIdx.y * TILE + tx
    if orow < out.shape[0] and ocol < out.shape[1]:
        out[orow, ocol] = tile[tx, ty]


@cuda.jit
def local_2d(out):
    m = cuda.local.array((3, 4), dtype="float64")
    i = cuda.grid(1)
    for r in range(3):
        for c in range(4):
            m[r, c] = i * 100 + r * 10 + c
    if i < out.shape[0]:
        out[i] = m[i % 3, i % 4] + m.shape[0] + m.shape[1]


@cuda.jit
def dyn_scan(x, out, counts):
    """Reverse each block's chunk through dynamic shared memory; two views alias it."""
    buf = cuda.shared.array(0, float32)
    alias = cuda.shared.array(0, dtype=np.int32)
    t = cuda.threadIdx.x
    n = cuda.blockDim.x
    i = cuda.grid(1)
    buf[t] = x[i]
    cuda.syncthreads()
    out[i] = buf[n - 1 - t]
    cuda.syncthreads()
    if t == 0:
        alias[0] = 12345             # same bytes as buf[0]
    cuda.syncthreads()
    if t == 1:
        counts[cuda.blockIdx.x, 0] = buf.size
        counts[cuda.blockIdx.x, 1] = alias.size
        counts[cuda.blockIdx.x, 2] = alias[0]


@cuda.jit
def votes(x, out):
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    positive = x[i] > 0
    c = cuda.syncthreads_count(positive)
    a = cuda.syncthreads_and(positive)
    o = cuda.syncthreads_or(x[i] > 100)
    n = cuda.syncthreads_count(t % 3)            # integer predicates: nonzero is true
    if t == 0:
        out[cuda.blockIdx.x, 0] = c
        out[cuda.blockIdx.x, 1] = a
        out[cuda.blockIdx.x, 2] = o
        out[cuda.blockIdx.x, 3] = n


@cuda.jit
def warp_and_fences(x, out):
    i = cuda.grid(1)
    x[i] += 1
    cuda.threadfence_block()
    cuda.threadfence()
    cuda.threadfence_system()
    cuda.syncwarp()
    if cuda.threadIdx.x % 32 < 16:
        cuda.syncwarp(0xFFFF)                    # only the lanes named in the mask may call it
    cuda.syncwarp(mask=0xFFFFFFFF)
    out[i] = x[i ^ 1] if i < out.size else 0.0


# ---------------------------------------------------------------------------------------------
# CPU: PTX contents


def test_block_reduction_shared_array_and_barrier():
    ptx = block_sum.compile("void(float32[:], float32[:])").ptx
    decls = _shared_decls(ptx)
    assert list(decls.values()) == [(4, TPB * 4)], ptx
    body = _entry(ptx)
    assert re.search(r"\b(bar\.sync|barrier\.sync(\.aligned)?)\s+0;", body)
    assert "st.shared.b32" in body and "ld.shared.b32" in body
    assemble(ptx)


def test_2d_tile_has_row_padding():
    ptx = transpose.compile("void(float32[:, :], float32[:, :])").ptx
    assert list(_shared_decls(ptx).values()) == [(4, TILE * (TILE + 1) * 4)]
    # the row stride (TILE + 1) * 4 bytes appears as an address computation
    assert str((TILE + 1) * 4) in _entry(ptx)
    assemble(ptx)


def test_each_static_call_site_gets_its_own_storage():
    @cuda.jit
    def two(out):
        a = cuda.shared.array(32, np.float64)
        b = cuda.shared.array(32, np.float64)
        t = cuda.threadIdx.x
        a[t] = t
        b[t] = 2 * t
        cuda.syncthreads()
        out[t] = a[31 - t] + b[t]

    ptx = two.compile("void(float64[:])").ptx
    decls = _shared_decls(ptx)
    assert len(decls) == 2 and set(decls.values()) == {(8, 256)}
    assemble(ptx)


def _shared_in_device_function():
    buf = cuda.shared.array(64, int32)
    buf[cuda.threadIdx.x] = cuda.threadIdx.x
    cuda.syncthreads()
    return buf[63 - cuda.threadIdx.x]


def test_shared_array_in_a_device_function():
    @cuda.jit
    def k(out):
        out[cuda.threadIdx.x] = _shared_in_device_function()

    ptx = k.compile("void(int32[:])").ptx
    assert list(_shared_decls(ptx).values()) == [(4, 256)]
    assemble(ptx)


@pytest.mark.parametrize("dtype, itemsize", [
    (np.float32, 4), (float64, 8), ("int16", 2), (np.dtype("complex128"), 16), (np.uint8, 1),
    (types.boolean, 1),
])
def test_dtype_spellings(dtype, itemsize):
    @cuda.jit
    def k(out):
        s = cuda.shared.array(shape=(2, 5), dtype=dtype)
        s[0, cuda.threadIdx.x % 5] = out[0]
        cuda.syncthreads()
        out[1] = s[0, 4]

    argty = {1: "uint8", 2: "int16", 4: "float32", 8: "float64", 16: "complex128"}[itemsize]
    if dtype is types.boolean:
        argty = "boolean"
    ptx = k.compile(f"void({argty}[:])").ptx
    ((align, nbytes),) = _shared_decls(ptx).values()
    assert nbytes == 10 * itemsize
    assert align == min(itemsize, 8) or (itemsize == 16 and align in (8, 16))
    assemble(ptx)


def test_namespace_imported_on_its_own():
    from gpureplace.cuda import shared, local

    @cuda.jit
    def k(out):
        s = shared.array(8, float32)
        l = local.array(2, float32)
        t = cuda.threadIdx.x
        l[t % 2] = out[t]
        s[t % 8] = l[0]
        cuda.syncthreads()
        out[t] = s[7 - t % 8]

    ptx = k.compile("void(float32[:])").ptx
    assert list(_shared_decls(ptx).values()) == [(4, 32)]
    assemble(ptx)


def test_local_array_lives_in_local_memory():
    ptx = local_reverse.compile("void(int64[:], int64[:])").ptx
    body = _entry(ptx)
    assert re.search(r"\.local \.align 8 \.b8\s+__local_depot\d+\[64\]", body), body
    assert "st.local.b64" in body and "ld.local.b64" in body
    assert ".shared" not in ptx
    assemble(ptx)


def test_local_2d_array_and_its_shape():
    ptx = local_2d.compile("void(float64[:])").ptx
    assemble(ptx)


def test_const_array_is_in_constant_memory_with_its_values():
    ptx = lookup.compile("void(int64[:], float64[:])").ptx
    consts = re.findall(r"\.const \.align (\d+) \.b8 (_gpureplace_cmem_\w+)\[(\d+)\] = \{([^}]*)\}",
                        ptx)
    sizes = sorted(int(n) for _, _, n, _ in consts)
    assert sizes == [WEIGHTS.nbytes, TABLE.nbytes], ptx
    for align, _, n, data in consts:
        values = bytes(int(v) for v in data.split(","))
        values += bytes(int(n) - len(values))      # ptxas-style: trailing zeros may be left out
        ref = TABLE if int(n) == TABLE.nbytes else WEIGHTS
        assert values == ref.tobytes()
        assert int(align) >= ref.itemsize
    body = _entry(ptx)
    assert "ld.const.b64" in body and "ld.const.b32" in body
    assemble(ptx)


def test_const_array_is_read_only():
    @cuda.jit
    def k(out):
        t = cuda.const.array_like(TABLE)
        t[0] = 1.0

    with pytest.raises(CompileError) as info:
        k.compile("void(float64[:])")
    assert "readonly" in (str(info.value) + info.value.detail).lower()


SCALAR = np.array(5.0, np.float32)                  # 0-d
STRIDED = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]


def test_const_array_like_keeps_a_0d_or_strided_arrays_shape():
    """numba-cuda types array_like(arr) as arr's own type: a 0-d array stays 0-d (it was made
    1-d, so c[()] was an array), a strided one keeps its values in C order."""
    @cuda.jit
    def k(out):
        c = cuda.const.array_like(SCALAR)
        s = cuda.const.array_like(STRIDED)
        out[0] = c[()] + c.ndim
        out[1] = s[2, 1] + s.ndim * 100 + s.shape[1] * 1000

    out = np.zeros(2, np.float32)
    k[1, 1](out)
    assert list(out) == [5.0, 10.0 + 200 + 2000]
    assemble(k.compile("void(float32[:])").ptx)


def test_dynamic_shared_memory_declaration_and_size():
    ptx = dyn_scan.compile("void(float32[:], float32[:], int32[:, :])").ptx
    # one external declaration, aligned to 16, shared by both arrays
    decls = re.findall(r"\.extern \.shared \.align (\d+) \.b8 (\w+)\[\];", ptx)
    assert decls == [("16", "_gpureplace_dynamic_smem")], ptx
    assert not _shared_decls(ptx)
    body = _entry(ptx)
    assert "%dynamic_smem_size" in body
    assert re.search(r"shr\.u32\s+%r\d+, %r\d+, 2;", body)        # bytes // 4
    assemble(ptx)


def test_dynamic_and_static_shared_together():
    @cuda.jit
    def k(out):
        dyn = cuda.shared.array(0, np.float64)
        fixed = cuda.shared.array(4, np.float64)
        t = cuda.threadIdx.x
        fixed[t % 4] = t
        dyn[t] = t
        cuda.syncthreads()
        out[t] = dyn[dyn.size - 1 - t] + fixed[0]

    ptx = k.compile("void(float64[:])").ptx
    assert ".extern .shared .align 16 .b8 _gpureplace_dynamic_smem[];" in ptx
    assert list(_shared_decls(ptx).values()) == [(8, 32)]
    assert re.search(r"shr\.u32\s+%r\d+, %r\d+, 3;", _entry(ptx))  # bytes // 8
    assemble(ptx)


def test_barrier_reductions():
    ptx = votes.compile("void(float32[:], int32[:, :])").ptx
    body = _entry(ptx)
    assert len(re.findall(r"bar(rier)?\.red\.popc\.u32", body)) == 2
    assert re.search(r"bar(rier)?\.red\.and\.pred", body)
    assert re.search(r"bar(rier)?\.red\.or\.pred", body)
    assemble(ptx)


@pytest.mark.parametrize("fn", [cuda.syncthreads_count, cuda.syncthreads_and,
                                cuda.syncthreads_or])
def test_barrier_reductions_return_int32(fn):
    def dev(p):
        return fn(p)

    ptx, restype = cuda.compile_ptx(dev, "(int32,)", device=True)
    assert restype == types.int32
    ptx, restype = cuda.compile_ptx(dev, "(boolean,)", device=True)
    assert restype == types.int32


def test_syncwarp_and_fences():
    ptx = warp_and_fences.compile("void(float32[:], float32[:])").ptx
    body = _entry(ptx)
    masks = re.findall(r"bar\.warp\.sync\s+(-?\d+);", body)
    assert sorted(int(m) & 0xFFFFFFFF for m in masks) == [0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF]
    for fence in ("membar.cta", "membar.gl", "membar.sys"):
        assert fence in body, body
    # in program order: block, device, system
    assert body.index("membar.cta") < body.index("membar.gl") < body.index("membar.sys")
    assemble(ptx)


def test_syncwarp_with_a_runtime_mask():
    @cuda.jit
    def k(masks):
        cuda.syncwarp(masks[0])

    ptx = k.compile("void(uint32[:])").ptx
    assert re.search(r"bar\.warp\.sync\s+%r\d+;", ptx)
    assemble(ptx)


def test_stubs_refuse_host_calls():
    with pytest.raises(RuntimeError, match="only be used inside a kernel"):
        cuda.syncthreads()
    with pytest.raises(RuntimeError, match="only be used inside a kernel"):
        cuda.shared.array(4, np.float32)
    assert {"shared", "local", "const", "syncthreads", "syncwarp", "threadfence"} <= set(dir(cuda))


# ---------------------------------------------------------------------------------------------
# CPU: errors


def _compile_error(kernel, sig):
    with pytest.raises(CompileError) as info:
        kernel.compile(sig)
    err = info.value
    return err, str(err) + "\n" + (err.detail or "")


HALF_WARP = 16


@cuda.jit(device=True)
def _scratch_sum(x, i):
    tmp = cuda.local.array(shape=HALF_WARP * 2 - 1, dtype=np.float64)    # keyword, arithmetic
    for j in range(HALF_WARP * 2 - 1):
        tmp[j] = x[(i + j) % x.size]
    s = 0.0
    for j in range(HALF_WARP * 2 - 1):
        s += tmp[(j * 7 + i) % (HALF_WARP * 2 - 1)]       # a run-time index: stays in memory
    return s


@cuda.jit
def folded_shapes(x, out):
    pairs = cuda.shared.array((HALF_WARP // 2, -(-HALF_WARP // 3), 2 ** 1), float32)  # (8, 6, 2)
    t = cuda.threadIdx.x
    if t < 96:
        pairs[t // 12, (t // 2) % 6, t % 2] = t
    cuda.syncthreads()
    i = cuda.grid(1)
    u = 95 - t % 96
    if i < out.size:
        out[i] = _scratch_sum(x, i) + pairs[u // 12, (u // 2) % 6, u % 2]


def _folded_reference(x, n):
    out = np.zeros(n)
    for i in range(n):
        out[i] = sum(x[(i + j) % x.size] for j in range(31)) + (95 - (i % 128) % 96)
    return out


def test_constant_arithmetic_in_shapes_is_folded():
    """``(TILE, TILE + 1)``, ``N * 2 - 1``: Numba types arithmetic of constants as a run-time
    int; gpureplace evaluates it before typing (numba-cuda refuses it)."""
    from gpureplace import simulator
    spec = folded_shapes.compile("void(float64[::1], float64[::1])")
    assemble(spec.ptx)
    assert list(_shared_decls(spec.ptx).values()) == [(4, 8 * 6 * 2 * 4)]
    assert re.search(r"\.local \.align 8 \.b8\s+__local_depot\d+\[%d\]" % (31 * 8), spec.ptx)
    x = np.arange(40, dtype=np.float64)
    out = np.zeros(200)
    simulator.run(folded_shapes, 2, 128, x, out)
    np.testing.assert_allclose(out, _folded_reference(x, 200))


@pytest.mark.gpu
def test_gpu_folded_shapes(cp):
    x = np.arange(40, dtype=np.float64)
    out = cp.zeros(200)
    folded_shapes[2, 128](cp.asarray(x), out)
    np.testing.assert_allclose(cp.asnumpy(out), _folded_reference(x, 200))


def test_non_constant_shape_is_refused():
    @cuda.jit
    def k(out, n):
        s = cuda.shared.array(n, float32)
        s[0] = 1
        out[0] = s[0]

    err, text = _compile_error(k, "void(float32[:], int64)")
    assert err.function.endswith("k")
    assert err.lineno == k.py_func.__code__.co_firstlineno + 2
    assert "shape must be an int or a tuple of ints known at compile time" in text
    assert "only known at run time" in text


def test_non_constant_tuple_shape_is_refused():
    @cuda.jit
    def k(out, n):
        s = cuda.local.array((4, n), float32)
        out[0] = s[0, 0]

    _, text = _compile_error(k, "void(float32[:], int64)")
    assert "cuda.local.array" in text and "is not a constant" in text
    assert "known only at run time" in text


@pytest.mark.parametrize("dtype", ["3", "WEIGHTS", "'not_a_dtype'", "np.sin"])
def test_bad_dtype_is_refused(dtype):
    ns = {"cuda": cuda, "np": np, "WEIGHTS": WEIGHTS}
    exec(f"def k(out):\n    s = cuda.shared.array(4, {dtype})\n    out[0] = s[0]\n", ns)
    err, text = _compile_error(cuda.jit(ns["k"]), "void(float32[:])")
    assert "cuda.shared.array" in text
    assert "dtype" in text.lower()


def test_zero_sized_local_array_is_refused():
    @cuda.jit
    def k(out):
        s = cuda.local.array(0, float32)
        out[0] = s[0]

    _, text = _compile_error(k, "void(float32[:])")
    assert "cuda.local.array" in text and "positive size" in text


def test_const_array_like_needs_a_global_array():
    @cuda.jit
    def k(x, out):
        c = cuda.const.array_like(x)
        out[0] = c[0]

    _, text = _compile_error(k, "void(float32[:], float32[:])")
    assert "global or closure variable" in text


def test_bad_predicate_is_refused():
    @cuda.jit
    def k(x, out):
        out[0] = cuda.syncthreads_count(x[0])

    _, text = _compile_error(k, "void(float32[:], int32[:])")
    assert "predicate must be an integer or a boolean" in text


def test_error_reason_is_the_template_message():
    @cuda.jit
    def k(out, n):
        s = cuda.shared.array(n, float32)
        out[0] = s[0]

    with pytest.raises(CompileError) as info:
        k.compile("void(float32[:], int64)")
    assert "shape must be an int or a tuple of ints known at compile time" in info.value.reason


# ---------------------------------------------------------------------------------------------
# GPU: results against NumPy


@pytest.fixture(scope="module")
def cp():
    import cupy
    return cupy


@pytest.mark.gpu
def test_gpu_block_sum(cp):
    n = 10_000
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    blocks = (n + TPB - 1) // TPB
    out = cp.zeros(blocks, dtype=cp.float32)
    block_sum[blocks, TPB](cp.asarray(x), out)
    padded = np.zeros(blocks * TPB, np.float32)
    padded[:n] = x
    ref = padded.reshape(blocks, TPB).astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(cp.asnumpy(out), ref, rtol=1e-5)


@pytest.mark.gpu
def test_gpu_transpose(cp):
    a = np.random.default_rng(1).random((70, 45), dtype=np.float32)
    out = cp.zeros((45, 70), dtype=cp.float32)
    grid = ((45 + TILE - 1) // TILE, (70 + TILE - 1) // TILE)
    transpose[grid, (TILE, TILE)](cp.asarray(a), out)
    np.testing.assert_array_equal(cp.asnumpy(out), a.T)


@pytest.mark.gpu
def test_gpu_local_arrays(cp):
    x = np.random.default_rng(2).integers(0, 1000, 64 * 8).astype(np.int64)
    out = cp.zeros_like(cp.asarray(x))
    local_reverse[2, 32](cp.asarray(x), out)
    np.testing.assert_array_equal(cp.asnumpy(out), x.reshape(-1, 8)[:, ::-1].ravel())

    out2 = cp.zeros(50, dtype=cp.float64)
    local_2d[2, 32](out2)
    i = np.arange(50)
    np.testing.assert_array_equal(cp.asnumpy(out2), i * 100 + (i % 3) * 10 + (i % 4) + 7)


@pytest.mark.gpu
def test_gpu_const_arrays(cp):
    idx = np.arange(100, dtype=np.int64) * 7
    out = cp.zeros(100, dtype=cp.float64)
    lookup[1, 128](cp.asarray(idx), out)
    ref = TABLE[idx % TABLE.size] + WEIGHTS[idx % 2, idx % 3]
    np.testing.assert_array_equal(cp.asnumpy(out), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("stream", [0, None])
def test_gpu_dynamic_shared(cp, stream):
    threads, blocks = 64, 3
    x = np.arange(threads * blocks, dtype=np.float32)
    out = cp.zeros_like(cp.asarray(x))
    counts = cp.zeros((blocks, 3), dtype=cp.int32)
    nbytes = threads * 4
    dyn_scan[blocks, threads, stream, nbytes](cp.asarray(x), out, counts)
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), x.reshape(blocks, threads)[:, ::-1].ravel())
    np.testing.assert_array_equal(cp.asnumpy(counts),
                                  np.array([[threads, threads, 12345]] * blocks))


@pytest.mark.gpu
def test_gpu_dynamic_shared_size_follows_the_launch(cp):
    @cuda.jit
    def size_of(out):
        a = cuda.shared.array(0, np.float64)
        b = cuda.shared.array(0, np.int16)
        if cuda.grid(1) == 0:
            out[0] = a.size
            out[1] = b.size

    out = cp.zeros(2, dtype=cp.int64)
    size_of[1, 32, 0, 1000](out)
    np.testing.assert_array_equal(cp.asnumpy(out), [1000 // 8, 1000 // 2])
    size_of[1, 32](out)
    np.testing.assert_array_equal(cp.asnumpy(out), [0, 0])


@pytest.mark.gpu
def test_gpu_barrier_reductions(cp):
    threads, blocks = 96, 4
    rng = np.random.default_rng(3)
    x = rng.normal(size=threads * blocks).astype(np.float32)
    x[:threads] = np.abs(x[:threads]) + 1          # block 0: every value positive
    x[2 * threads + 5] = 500                       # block 2: one value over 100
    out = cp.zeros((blocks, 4), dtype=cp.int32)
    votes[blocks, threads](cp.asarray(x), out)
    xb = x.reshape(blocks, threads)
    t = np.arange(threads)
    ref = np.stack([(xb > 0).sum(axis=1), (xb > 0).all(axis=1), (xb > 100).any(axis=1),
                    np.full(blocks, (t % 3 != 0).sum())], axis=1).astype(np.int32)
    np.testing.assert_array_equal(cp.asnumpy(out), ref)


@pytest.mark.gpu
def test_gpu_warp_sync_and_fences(cp):
    x = np.arange(64, dtype=np.float32)
    xd = cp.asarray(x)
    out = cp.zeros(64, dtype=cp.float32)
    warp_and_fences[2, 32](xd, out)
    np.testing.assert_array_equal(cp.asnumpy(xd), x + 1)
    np.testing.assert_array_equal(cp.asnumpy(out), (x + 1)[np.arange(64) ^ 1])


@cuda.jit
def sleepy_spin(flag, out):
    i = cuda.grid(1)
    tries = 0
    while cuda.atomic.add(flag, 0, 0) == 0 and tries < 5:
        cuda.nanosleep(200)                     # back off between polls
        tries += 1
    out[i] = tries


def test_nanosleep_is_a_ptx_nanosleep_and_a_no_op_in_the_simulator():
    spec = sleepy_spin.compile("void(int32[::1], int32[::1])")
    assert "nanosleep.u32" in spec.ptx
    assemble(spec.ptx)
    from gpureplace import simulator
    out = np.zeros(8, np.int32)
    simulator.run(sleepy_spin, 1, 8, np.zeros(1, np.int32), out)
    assert (out == 5).all()

    @cuda.jit
    def bad(x):
        cuda.nanosleep(1.5)
    with pytest.raises(CompileError, match="nanosleep"):
        bad.compile("void(float32[::1])")


@pytest.mark.gpu
def test_nanosleep_on_the_gpu():
    import cupy as cp
    out = cp.zeros(64, cp.int32)
    sleepy_spin[2, 32](cp.ones(1, cp.int32), out)
    assert int(out.max()) == 0
    sleepy_spin[2, 32](cp.zeros(1, cp.int32), out)
    assert int(out.min()) == 5


# -- alignment= of shared and local arrays (numba-cuda's keyword) --------------------------------

@cuda.jit
def _aligned_arrays(addresses, n):
    i = cuda.grid(1)
    loc = cuda.local.array((2, 3), np.uint8, alignment=64)
    sh = cuda.shared.array(50, np.uint64, alignment=256)
    plain = cuda.shared.array(7, np.uint8)
    loc[0, 0] = n
    sh[i] = loc[0, 0]
    plain[i % 7] = n
    if i == 0:
        addresses[0] = loc.ctypes.data
        addresses[1] = sh.ctypes.data
        addresses[2] = plain[0]


def test_alignment_of_shared_and_local_arrays_reaches_the_ptx():
    ptx = _aligned_arrays.compile("void(uint64[::1], uint8)").ptx
    assemble(ptx)
    assert re.search(r"\.local \.align 64 ", ptx)
    assert re.search(r"\.shared \.align 256 \.b8 \w+\[400\]", ptx)
    assert re.search(r"\.shared \.align 1 \.b8 \w+\[7\]", ptx)       # no request: natural


@pytest.mark.gpu
def test_aligned_arrays_sit_at_aligned_addresses():
    import cupy as cp
    addresses = cp.zeros(3, np.uint64)
    _aligned_arrays[1, 32](addresses, np.uint8(5))
    loc, sh, _ = (int(a) for a in cp.asnumpy(addresses))
    assert loc % 64 == 0 and sh % 256 == 0


def test_invalid_alignments_are_errors_at_the_line():
    for bad, message in ((3, r"alignment=3\): Alignment must be a positive power of two"),
                         (0, r"alignment=0\): Alignment must be a positive power of two"),
                         ("16", r"alignment=\.\.\.\): alignment must be a constant integer "
                                r".*got Literal\[str\]"),
                         (1.5, r"alignment=\.\.\.\): alignment must be a constant integer "
                               r".*got float64")):
        for which in ("local", "shared"):
            ns = {"cuda": cuda, "np": np, "bad": bad}
            exec(f"def k(d):\n    x = cuda.{which}.array(4, np.uint8, alignment=bad)\n"
                 f"    d[0] = x[0]\n", ns)
            with pytest.raises(CompileError, match=rf"line 2\): cuda.{which}.array\(\.\.\., "
                                                   + message):
                cuda.jit(ns["k"]).compile("void(uint8[:])")
