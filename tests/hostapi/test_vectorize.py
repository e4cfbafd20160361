"""``cuda.vectorize`` / ``cuda.guvectorize`` (issue 16): numba-cuda's ufunc API, run in the
simulator on the CPU and on CuPy arrays on the GPU with the same checks; the element function is
tracked for redefinition like any helper a kernel calls."""

import numpy as np
import pytest
from numba import float32, float64, int32, void

from gpureplace import cuda
from gpureplace.config import settings
from gpureplace.cuda_vectorize import CUDAUFunc, parse_gufunc_signature


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


SIGS = ["int32(int32, int32)", "float32(float32, float32)", "float64(float64, float64)"]


def _check_vectorize(dev):
    """The same calls on either backend; ``dev`` makes a device array."""
    @cuda.vectorize(SIGS)
    def vadd(a, b):
        return a + b

    assert isinstance(vadd, CUDAUFunc) and vadd.__name__ == "vadd" and vadd.nin == 2
    assert vadd.types == ["ii->i", "ff->f", "dd->d"]
    assert vadd(1.25, 2.5) == 3.75                       # scalars in, a scalar out
    for dt in (np.float64, np.float32, np.int32):        # the output keeps the input's type
        x = np.arange(1000, dtype=dt)
        r = vadd(x, x)
        assert isinstance(r, np.ndarray) and r.dtype == dt
        np.testing.assert_array_equal(r, x + x)
    m = np.arange(24.0).reshape(2, 3, 4)                 # N-D, mixed layouts, broadcasting
    np.testing.assert_array_equal(vadd(m, np.asfortranarray(m)), 2 * m)
    np.testing.assert_array_equal(vadd(m, np.arange(4.0)), m + np.arange(4.0))
    np.testing.assert_array_equal(vadd(m[:, ::2], 1.5), m[:, ::2] + 1.5)
    np.testing.assert_array_equal(vadd([1, 2], (3, 4)), [4, 6])        # lists and tuples
    out = np.zeros(5, np.float32)                        # out=, written and returned
    assert vadd(np.ones(5, np.float32), np.ones(5, np.float32), out=out) is out
    assert out.tolist() == [2.0] * 5
    d_x = dev(np.arange(8, dtype=np.float32))            # a device input: a device result
    r = vadd(d_x, np.ones(8, np.float32))
    assert hasattr(r, "copy_to_host")
    np.testing.assert_array_equal(r.copy_to_host(), np.arange(8) + 1)
    vadd(d_x, d_x, out=d_x)                              # in place, on the device
    np.testing.assert_array_equal(d_x.copy_to_host(), 2 * np.arange(8))
    s = cuda.stream()
    r = vadd(d_x, d_x, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(r.copy_to_host(), 4 * np.arange(8))
    for n in (1, 8, 101, 1025):                          # pairwise reduction, odd lengths too
        assert vadd.reduce(np.arange(n, dtype=np.int32)) == n * (n - 1) // 2
    with pytest.raises(TypeError, match=r"vadd: no signature takes input types \(complex128, "
                                        r"complex128\) safely; it has ii->i, ff->f, dd->d"):
        vadd(np.ones(2, complex), np.ones(2, complex))
    with pytest.raises(ValueError, match=r"operands could not be broadcast together with "
                                         r"shapes \(3,\) \(4,\)"):
        vadd(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="both positional and keyword"):
        vadd(out, out, out, out=out)

    @cuda.vectorize                                      # no signatures: per input types
    def fma1(a, b):
        return a * b + 1

    np.testing.assert_array_equal(fma1(np.arange(3), np.arange(3.0)), [1.0, 2.0, 5.0])
    assert fma1.types == ["ld->d"]
    # a combination no loop so far takes safely compiles one more (as Numba's dynamic ufuncs);
    # one that casts safely to a loop it has uses that loop (as NumPy chooses)
    r = fma1(np.arange(3, dtype=np.complex64), np.ones(3, np.complex64))
    assert r.dtype == np.complex128 and r.tolist() == [1, 2, 3]     # (+ 1: an int64)
    r = fma1(np.arange(3, dtype=np.int32), np.ones(3, np.float32))
    assert r.dtype == np.float64 and r.tolist() == [1.0, 2.0, 3.0]
    assert fma1.types == ["ld->d", "FF->D"]

    @cuda.vectorize
    def diff(a, b):
        return a - b

    assert diff(np.arange(4, dtype=np.int32), np.ones(4, np.int32)).tolist() == [-1, 0, 1, 2]
    assert diff(np.arange(4.0), np.ones(4)).tolist() == [-1.0, 0.0, 1.0, 2.0]
    assert diff.types == ["ii->l", "dd->d"]


def _check_guvectorize(dev):
    @cuda.guvectorize([void(float32[:, :], float32[:, :], float32[:, :])], "(m,n),(n,p)->(m,p)")
    def matmul(a, b, c):
        m, n = a.shape
        n, p = b.shape
        for i in range(m):
            for j in range(p):
                c[i, j] = 0
                for k in range(n):
                    c[i, j] += a[i, k] * b[k, j]

    a = np.arange(3 * 2 * 4, dtype=np.float32).reshape(3, 2, 4)
    b = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    np.testing.assert_allclose(matmul(a, b), a @ b)
    np.testing.assert_allclose(matmul(a, b[0]), a @ b[0])                  # loop broadcast
    r = matmul(dev(a), b)
    np.testing.assert_allclose(r.copy_to_host(), a @ b)
    d_c = dev(np.zeros((3, 2, 5), np.float32))
    assert matmul(a, b, out=d_c) is d_c
    np.testing.assert_allclose(d_c.copy_to_host(), a @ b)
    with pytest.raises(ValueError, match=r"dimension 'n' is 4 and 3"):
        matmul(a, b[:, :3])

    @cuda.guvectorize(["void(int32, int32[:])"], "()->()")
    def twice(x, out):
        out[0] = 2 * x

    assert twice(10) == 20                               # a Python int fits int32 by value
    np.testing.assert_array_equal(twice(np.arange(5, dtype=np.int32)), 2 * np.arange(5))

    @cuda.guvectorize([void(float64[:], float64[:], float64[:])], "(n),(n)->()")
    def dot(x, y, r):
        s = 0.0
        for i in range(x.shape[0]):
            s += x[i] * y[i]
        r[0] = s

    x = np.arange(12.0).reshape(4, 3)
    np.testing.assert_allclose(dot(x, x), (x * x).sum(axis=1))

    @cuda.guvectorize([void(float32[:], float32[:], float32[:])], "(x)->(x),(x)")
    def copy_and_double(a, b, c):
        for i in range(a.size):
            b[i] = a[i]
            c[i] = 2 * a[i]

    b, c = copy_and_double(np.arange(4, dtype=np.float32))
    assert b.tolist() == [0, 1, 2, 3] and c.tolist() == [0, 2, 4, 6]
    with pytest.raises(TypeError, match="gufunc accepts 1 positional arguments or 3 positional "
                                        "arguments .* Got 2 positional arguments."):
        copy_and_double(b, c)


def test_vectorize_in_the_simulator(sim):
    _check_vectorize(cuda.to_device)


def test_guvectorize_in_the_simulator(sim):
    _check_guvectorize(cuda.to_device)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_vectorize_and_guvectorize_on_the_gpu():
    import cupy as cp
    _check_vectorize(cuda.to_device)
    _check_guvectorize(cuda.to_device)

    @cuda.vectorize(["float32(float32)"])
    def inc(x):
        return x + 1

    x = cp.arange(4, dtype=cp.float32)                   # CuPy in, CuPy memory out
    np.testing.assert_array_equal(cp.asnumpy(cp.asarray(inc(x))), [1, 2, 3, 4])

    class Foreign:                                       # only __cuda_array_interface__
        def __init__(self, arr):
            self._arr = arr
            self.__cuda_array_interface__ = arr.__cuda_array_interface__

    out = Foreign(cp.zeros(4, cp.float32))
    returned = inc(Foreign(x), out=out)
    assert returned.copy_to_host().tolist() == [1, 2, 3, 4]
    assert returned.__cuda_array_interface__["data"][0] == out._arr.data.ptr
    d, copied = cuda.devicearray.auto_device(np.arange(3))
    assert copied and d.copy_to_host().tolist() == [0, 1, 2]
    assert cuda.devicearray.auto_device(d)[1] is False


def test_definition_errors_name_what_is_wrong():
    with pytest.raises(TypeError, match="guvectorized functions cannot return values: the "
                                        "signature .* specifies int32 return type"):
        cuda.guvectorize([int32(int32[:], int32[:])], "(m)->(m)")(lambda a, b: None)
    with pytest.raises(TypeError, match=r"The following target options are not supported "
                                        r"\(Unrecognized options\): "
                                        "'what1'"):
        cuda.vectorize(["f8(f8)"], what1=True)(lambda x: x)
    with pytest.raises(KeyError, match="Unrecognized options"):      # (Numba's exception)
        cuda.vectorize(["f8(f8)"], nonexistent=2)(lambda x: x)
    with pytest.raises(TypeError, match=r"^The following target options are not supported: "
                                        r"'ever2', 'what1'$"):
        cuda.guvectorize(["void(f8[:], f8[:])"], "(n)->(n)", what1=1, ever2=0)(lambda a, b: None)
    with pytest.warns(RuntimeWarning, match="nopython kwarg for cuda target is redundant"):
        cuda.vectorize(["f8(f8)"], nopython=True)(lambda x: x)
    with pytest.raises(TypeError, match="nopython flag must be True"):
        cuda.vectorize(["f8(f8)"], nopython=False)(lambda x: x)
    with pytest.raises(TypeError, match="vectorize takes scalar element types"):
        cuda.vectorize(["void(float64[:])"])(lambda x: x)
    assert parse_gufunc_signature("(m, n),(n)->()") == ([("m", "n"), ("n",)], [()])
    with pytest.raises(ValueError, match="the layout must look like"):
        parse_gufunc_signature("(m,n)")


def test_numba_vectorize_with_target_cuda_builds_the_same_object(sim):
    import numba
    from numba.np.ufunc.decorators import Vectorize
    from gpureplace.cuda_vectorize import register_numba_target
    saved = dict(Vectorize.target_registry.ondemand), dict(Vectorize.target_registry)
    try:
        assert register_numba_target(replace=True)

        @numba.vectorize(["float64(float64)"], target="cuda")
        def sq(x):
            return x * x

        assert isinstance(sq, CUDAUFunc)
        assert sq(np.arange(4.0)).tolist() == [0, 1, 4, 9]
    finally:
        Vectorize.target_registry.ondemand.clear()
        Vectorize.target_registry.ondemand.update(saved[0])
        dict.clear(Vectorize.target_registry)
        dict.update(Vectorize.target_registry, saved[1])


def _bump(offset):
    ns = {"cuda": cuda, "OFFSET": offset}
    exec("def bump(x):\n    return x + OFFSET\n", ns)
    return ns, cuda.vectorize(["float64(float64)"])(ns["bump"])


def test_a_global_the_element_function_reads_recompiles_its_kernel_only():
    """The element function compiles into the generated kernel like any helper: a changed
    global it reads makes that kernel's compiled code stale (compiled without a GPU)."""
    import gpureplace
    from numba import types
    ns, bump = _bump(1.0)
    _, other = _bump(1.0)
    arr = types.Array(types.float64, 1, "C")
    kernel, kernel2 = bump._kernel((False,), 1), other._kernel((False,), 1)
    first, first2 = kernel.compile((arr, arr)), kernel2.compile((arr, arr))
    assert kernel.compile((arr, arr)) is first                    # cached
    ns["OFFSET"] = 5.0
    gpureplace.refresh()
    assert kernel.compile((arr, arr)) is not first                # recompiled
    assert kernel2.compile((arr, arr)) is first2                  # another kernel stays


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_redefining_what_the_element_function_reads_changes_the_result():
    import gpureplace
    ns, bump = _bump(1.0)
    assert bump(np.zeros(3)).tolist() == [1.0] * 3
    ns["OFFSET"] = 5.0
    gpureplace.refresh()
    assert bump(np.zeros(3)).tolist() == [5.0] * 3


def test_device_code_calling_a_ufunc_is_told_what_to_call_instead():
    from gpureplace.compiler.diagnostics import TypingCompileError

    @cuda.guvectorize(["void(int32[:], int32[:])"], "(n)->(n)")
    def gufunc_copy(a, b):
        for i in range(a.shape[0]):
            b[i] = a[i]

    @cuda.jit
    def calls_it(a, b):
        gufunc_copy(a, b)

    with pytest.raises(TypingCompileError, match=r"Untyped global name 'gufunc_copy': "
                                                 r"gufunc_copy is a cuda.guvectorize function.*"
                                                 r"cuda.jit\(device=True\)") as info:
        calls_it.compile("void(int32[::1], int32[::1])")
    assert info.value.lineno == calls_it.py_func.__code__.co_firstlineno + 2


def _scalar_as_array():
    @cuda.guvectorize(["void(int32[:], int32[:], int32[:])"], "(n),()->(n)")
    def add_first(x, y, res):
        for i in range(x.shape[0]):
            res[i] = x[i] + y[0]
    return add_first


def test_an_old_style_scalar_as_a_one_element_array_in_the_simulator(sim):
    # numba-cuda's issue 2579: a () input given as a 1-element array makes a loop dimension of
    # 1, which the output given may leave out; any other shape is still refused by name
    add_first = _scalar_as_array()
    a, b = np.arange(1, 5, dtype=np.int32), np.array([2], np.int32)
    res = np.zeros(4, np.int32)
    add_first(a, b, out=res)
    assert res.tolist() == [3, 4, 5, 6]
    d_res = cuda.to_device(np.zeros(4, np.int32))            # a device output, written in place
    add_first(cuda.to_device(a), cuda.to_device(b), out=d_res)
    assert d_res.copy_to_host().tolist() == [3, 4, 5, 6]
    m, bb = np.arange(8, dtype=np.int32).reshape(2, 4), np.array([2, 10], np.int32)
    out = np.zeros((2, 4), np.int32)
    add_first(m, bb, out=out)
    assert out.tolist() == [[2, 3, 4, 5], [14, 15, 16, 17]]
    with pytest.raises(ValueError, match=r"output 0 has shape \(4,\), expected \(2, 4\)"):
        add_first(m, bb, out=np.zeros(4, np.int32))
    with pytest.raises(ValueError, match=r"output 0 has shape \(1, 1, 4\), expected \(1, 4\)"):
        add_first(a, b, out=np.zeros((1, 1, 4), np.int32))


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_an_old_style_scalar_with_a_device_output_on_the_gpu():
    import cupy as cp
    add_first = _scalar_as_array()
    res = cp.zeros(4, cp.int32)
    add_first(cp.arange(1, 5, dtype=cp.int32), cp.array([2], cp.int32), out=res)
    assert cp.asnumpy(res).tolist() == [3, 4, 5, 6]


def test_a_lambda_vectorizes_as_any_function():
    """A lambda's name (``<lambda>``) is not an identifier: the generated kernels are named
    from it made one (a SyntaxError from the generated source before)."""
    x = np.arange(8, dtype=np.float32)
    double = cuda.vectorize(["float32(float32)"])(lambda a: a * 2)
    np.testing.assert_array_equal(double(x), x * 2)

    def body(a, out):
        for i in range(a.shape[0]):
            out[i] = a[i] + 1
    body.__name__ = "plus one"                    # (any name a function may have)
    plus = cuda.guvectorize(["void(float32[:], float32[:])"], "(n)->(n)")(body)
    np.testing.assert_array_equal(plus(x), x + 1)
    squared = cuda.guvectorize(["void(float32[:], float32[:])"], "(n)->(n)")(
        lambda a, out: _square_into(a, out))
    np.testing.assert_array_equal(squared(x), x * x)


def _square_into(a, out):
    for i in range(a.shape[0]):
        out[i] = a[i] * a[i]
