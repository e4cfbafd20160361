"""Arrays in the kernel language: ndim 1-4, layouts C / F / A, attributes, indexing, slicing views,
``x.dtype``, reshaping inside kernels and 0-d arrays.

Part of the Python subset of the kernel language, as Numba supports it.  Each feature has a kernel
below; CPU tests compile it (``kernel.compile(sig)``), assemble the PTX with ptxas and check the
PTX where it proves something; GPU tests (``@pytest.mark.gpu``) launch the same kernels on CuPy
arrays and compare with NumPy or with the plain Python semantics of the same code.  Shared helpers:
tests/lang_support.py.
"""


import numpy as np
import pytest
from numba import types

from gpureplace import cuda
from lang_support import THREADS, _compile, _cp, _grid


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
# Reshaping inside kernels


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


def test_a_contiguous_reshape_keeps_its_shape_in_registers():
    """A C-contiguous array's reshape computes the view's strides from the new shape, with
    constant indices: no call of the no-copy helper, whose run-time indexing kept the shapes in
    a 544-byte local stack; an array of unknown layout still goes through the helper."""
    from lang_support import assemble
    contiguous = _compile(reshaped_views, (types.float64[:, ::1], types.float64[::1]))
    assert "numba_attempt_nocopy_reshape" not in contiguous.llvm_ir
    assert ".local" not in contiguous.ptx
    assert "0 bytes stack frame" in assemble(contiguous.ptx, verbose=True)
    fortran = _compile(_axes_added, (types.float64[::1, :], types.float64[:, :, ::1]))
    assert "numba_attempt_nocopy_reshape" in fortran.llvm_ir


@cuda.jit
def _reshaped_reads(a, out):
    i = cuda.grid(1)
    if i < a.size:
        flat = a.reshape(-1)
        out[0, i] = flat[i]
        b = a.reshape((a.shape[2], -1))
        out[1, i] = b[i // b.shape[1], i % b.shape[1]]
        c = a.reshape(1, a.size, 1)
        out[2, i] = c[0, i, 0]
        d = a.reshape((2, -1, 3))
        out[3, i] = d[i // (3 * d.shape[1]), (i // 3) % d.shape[1], i % 3]


@pytest.mark.gpu
def test_reshapes_read_what_numpy_reads():
    """A C-contiguous array reshaped with ``-1``, a vararg shape and axes of length 1 reads
    the elements NumPy's reshape gives."""
    cp = _cp()
    a = cp.arange(2 * 5 * 6, dtype=cp.float32).reshape(2, 5, 6) * 1.5
    out = cp.zeros((4, a.size), cp.float32)
    _reshaped_reads[1, 64](a, out)
    want = cp.asnumpy(a).reshape(-1)
    np.testing.assert_array_equal(cp.asnumpy(out), np.stack([want] * 4))


@cuda.jit
def _axes_added(a, out):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        out[0, i, j] = a.reshape((a.shape[0], 1, a.shape[1]))[i, 0, j]
        out[1, i, j] = a.reshape(1, a.shape[0], a.shape[1], 1)[0, i, j, 0]


@pytest.mark.gpu
def test_a_fortran_order_array_reshapes_through_the_no_copy_helper():
    """An F-order array's reshape (Numba reshapes C and F arrays only) still goes through the
    no-copy helper, which gives the strides of a view where NumPy's reshape makes one."""
    cp = _cp()
    a = cp.asfortranarray(cp.arange(5 * 6, dtype=cp.float64).reshape(5, 6))
    spec = _axes_added.compile((types.float64[::1, :], types.float64[:, :, ::1]))
    assert "numba_attempt_nocopy_reshape" in spec.llvm_ir
    out = cp.zeros((2, 5, 6))
    _axes_added[(1, 1), (8, 8)](a, out)
    np.testing.assert_array_equal(cp.asnumpy(out), np.stack([cp.asnumpy(a)] * 2))


@cuda.jit
def _reshape_empty(a, out):
    b = a.reshape((0, 4))
    out[0] = b.shape[0]
    out[1] = b.shape[1]
    out[2] = b.size


@pytest.mark.gpu
def test_an_empty_array_reshapes_as_in_numpy():
    cp = _cp()
    out = cp.full(3, -1, cp.int64)
    _reshape_empty[1, 1](cp.zeros(0, cp.float32), out)
    assert out.get().tolist() == [0, 4, 0]


# =============================================================================================
# 0-d arrays


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


# =============================================================================================
# np.ndenumerate and np.ndindex in device code


@cuda.jit
def _enumerated(a, out):
    total = 0.0
    for idx, v in np.ndenumerate(a):
        total += (idx[0] * 100 + idx[1] * 10 + idx[2]) * v
    out[0] = total
    n = 0
    for idx in np.ndindex(a.shape):
        n += idx[0] + idx[1] + idx[2]
    out[1] = n


def _enumerated_expected(a):
    return [sum((i * 100 + j * 10 + k) * v for (i, j, k), v in np.ndenumerate(a)),
            sum(sum(idx) for idx in np.ndindex(a.shape))]


@pytest.mark.parametrize("layout", [types.float64[:, :, ::1], types.float64[:, :, :]],
                         ids=["C", "A"])
def test_ndenumerate_and_ndindex_compile_and_run_in_the_simulator(layout, monkeypatch):
    from gpureplace.config import settings
    _compile(_enumerated, (layout, types.float64[::1]))
    monkeypatch.setattr(settings, "backend", "simulator")
    a = np.arange(24.0).reshape(2, 3, 4)[:, :, ::-1 if layout.layout == "A" else 1]
    out = np.zeros(2)
    _enumerated[1, 1](a, out)
    assert out.tolist() == _enumerated_expected(a)


@pytest.mark.gpu
def test_ndenumerate_and_ndindex_on_the_gpu():
    cp = _cp()
    base = cp.arange(24.0).reshape(2, 3, 4)
    for a in (base, base[:, :, ::-1], base.transpose(1, 0, 2)):
        out = cp.zeros(2)
        _enumerated[1, 1](a, out)
        assert out.get().tolist() == _enumerated_expected(cp.asnumpy(a))
