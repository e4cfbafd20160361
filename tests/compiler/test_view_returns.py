"""A device function may return a view of an array it was given (``def row(a, i): return a[i]``):
the caller's memory, nothing allocated.  Numba refuses every array return but an argument itself
when it has no runtime; gpureplace refuses only arrays that are not views of arguments (a local
array, a copy), naming the ``return``; an operation that makes a new array inside device code
(indexing by an array) names the user's line, not Numba's."""

import os

import numpy as np
import pytest
from numba.core import types as nbt

from conftest import assemble
import gpureplace
from gpureplace import CompileError, cuda
from gpureplace.cuda.extending import overload

HERE = os.path.abspath(__file__)


def row(a, i):
    return a[i]


def tail(a):
    return a[1:]


def transposed(a):
    return a.T


def flat(a):
    return a.reshape(a.size)


def first_of(pair):
    return pair[0]


def either(a, which):
    if which:
        return a[0]
    return a[1]


def dropped(a, n):
    for _ in range(n):
        a = a[1:]
    return a


@cuda.jit
def uses_views(m, v, out):
    out[0] = row(m, 1)[2]                    # m[1, 2]
    out[1] = tail(v)[0]                      # v[1]
    out[2] = transposed(m)[2, 1]             # m[1, 2]
    out[3] = flat(m)[5]                      # m[1, 2] (3 columns)
    out[4] = first_of((v, m[0]))[3]          # v[3]
    out[5] = either(m, out.size > 100)[1]    # m[1, 1]
    out[6] = dropped(v, 2)[0]                # v[2]


SIG = (nbt.float32[:, ::1], nbt.float32[::1], nbt.float32[::1])


def expected(m, v):
    return np.array([m[1, 2], v[1], m[1, 2], m[1, 2], v[3], m[1, 1], v[2]], np.float32)


def test_helpers_returning_views_of_their_arguments_compile():
    assemble(uses_views.compile(SIG).ptx)

    @cuda.jit
    def without_reshape(m, v, out):
        out[0] = row(m, 1)[2] + tail(v)[0] + transposed(m)[2, 1] + either(m, v[0] > 0)[1]
        out[1] = dropped(v, 2)[0] + first_of((v, m[0]))[3]

    ptx = without_reshape.compile(SIG).ptx
    assert ".local" not in ptx            # the views stay in registers: nothing in local memory
    assemble(ptx)


def test_helpers_returning_views_in_the_simulator(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = np.arange(10, 20, dtype=np.float32)
    out = np.zeros(7, np.float32)
    uses_views[1, 1](m, v, out)
    assert out.tolist() == expected(m, v).tolist()


def _fails(kernel, sig):
    with pytest.raises(CompileError) as info:
        kernel.compile(sig)
    return info.value


def test_a_returned_local_array_is_refused_at_its_return():
    def scratch():
        a = cuda.local.array(4, np.float32)
        a[0] = 1.0
        return a

    @cuda.jit
    def kernel(out):
        out[0] = scratch()[0]

    err = _fails(kernel, (nbt.float32[::1],))
    text = str(err)
    assert "neither one of its arguments nor a view of one" in text
    assert "a cuda.local.array ends with the function that made it" in text
    assert err.lineno == scratch.__code__.co_firstlineno + 3 and err.filename == HERE


def test_a_returned_copy_is_refused():
    def copied(a):
        return a.copy()

    @cuda.jit
    def kernel(a):
        a[0] = copied(a)[1]

    assert "nor a view of one" in str(_fails(kernel, (nbt.float32[::1],)))


def test_indexing_by_an_array_names_the_users_line():
    @cuda.jit
    def kernel(a, idx):
        picked = a[idx]
        a[0] = picked[0]

    err = _fails(kernel, (nbt.float32[::1], nbt.int64[::1]))
    assert "indexing an array by an array (or a list) makes a new array" in str(err)
    assert err.filename == HERE and err.lineno == kernel.py_func.__code__.co_firstlineno + 2
    assert "_allocate" not in str(err)


def test_an_overload_returning_a_view_of_its_argument():
    # numba-cuda's test_overload_array_return (an inline="always" overload)
    def slice_a(a):
        pass

    @overload(slice_a, inline="always")
    def slice_a_overload(a):
        def impl(a):
            return a[:, 0]
        return impl

    @cuda.jit
    def add(a):
        s = slice_a(a)
        s[0] += 1.0

    try:
        assemble(add.compile((nbt.float32[:, ::1],)).ptx)
    finally:        # (an override left in the default context would change later kernels' keys)
        gpureplace.default_context.remove_override(slice_a)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_helpers_returning_views_on_the_gpu():
    import cupy as cp
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = np.arange(10, 20, dtype=np.float32)
    out = cp.zeros(7, cp.float32)
    uses_views[1, 1](cp.asarray(m), cp.asarray(v), out)
    assert cp.asnumpy(out).tolist() == expected(m, v).tolist()
