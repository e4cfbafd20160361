"""Cache-hinted loads and stores (issue 16): ``cuda.ldca`` ... ``ldcv``, ``cuda.stcg`` ...
``stwt`` compile to ``ld.global.<op>.b<bits>`` / ``st.global.<op>.b<bits>`` that ptxas
assembles, on arrays (1-D or N-D with a tuple index) and pointers; the simulator reads and
writes the element."""

import numpy as np
import pytest
from numba.core import types as t

from conftest import assemble
from gpureplace import CompileError, cuda
from gpureplace.config import settings

LOADS = [(cuda.ldca, "ca"), (cuda.ldcg, "cg"), (cuda.ldcs, "cs"), (cuda.ldlu, "lu"),
         (cuda.ldcv, "cv")]
STORES = [(cuda.stcg, "cg"), (cuda.stcs, "cs"), (cuda.stwb, "wb"), (cuda.stwt, "wt")]


@pytest.mark.parametrize("op, mod", LOADS + STORES, ids=[m for _, m in LOADS + STORES])
def test_each_operator_emits_its_cache_policy_for_every_width(op, mod):
    store = op.__name__.startswith("st")
    if store:
        def body(r, x):
            for i in range(len(r)):
                op(r, i, x[i])
    else:
        def body(r, x):
            for i in range(len(r)):
                r[i] = op(x, i)
    f = cuda.jit(body)
    for ty in (t.int8, t.uint16, t.float16, t.int32, t.float32, t.int64, t.float64):
        sig = (t.Array(ty, 1, "C"),) * 2
        ptx = f.inspect_asm(sig)
        assert f"{'st' if store else 'ld'}.global.{mod}.b{ty.bitwidth}" in ptx, (mod, ty)
        assemble(ptx)


def test_tuple_indices_and_pointers():
    @cuda.jit
    def copy2d(r, x):
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                cuda.stcs(r, (i, j), cuda.ldcg(x, (i, j)))

    sig = (t.float64[:, ::1], t.float64[:, ::1])
    ptx = copy2d.inspect_asm(sig)
    assert "ld.global.cg.b64" in ptx and "st.global.cs.b64" in ptx
    assemble(ptx)

    def from_pointer(ptr, r, n):
        for i in range(n):
            r[i] = cuda.ldcs(ptr, i)

    ptx, _ = cuda.compile_ptx(from_pointer, (t.CPointer(t.int32), t.int32[::1], t.intp))
    assert "ld.global.cs.b32" in ptx


def _scalar_index_2d(r, x):
    r[0] = cuda.ldcs(x, 0)


def test_wrong_arguments_are_named():
    @cuda.jit
    def bad(r, x):
        r[0] = cuda.ldcs(x, (0, 1))

    with pytest.raises(CompileError, match=r"cuda.ldcs: Expected 1 indices, got 2: index .* "
                                           r"does not address one element"):
        bad.compile((t.float32[::1], t.float32[::1]))

    @cuda.jit
    def bad_kind(r, x):
        r[0] = cuda.ldcs(x, (0, 1.5))

    with pytest.raises(CompileError, match=r"cuda.ldcs: float64 is not a valid index"):
        bad_kind.compile((t.float32[::1], t.float32[:, ::1]))
    with pytest.raises(CompileError, match=r"Expected 2 indices, got a scalar"):
        cuda.jit(_scalar_index_2d).compile(
            (t.float32[::1], t.float32[:, ::1]))

    @cuda.jit
    def bad_type(r, x):
        r[0] = cuda.ldca(x, 0)

    with pytest.raises(CompileError, match="ldca requires array of integer or float type: "
                                           "elements of complex128 have no cache-hinted access"):
        bad_type.compile((t.complex128[::1], t.complex128[::1]))


def _check(xp, get):
    @cuda.jit
    def copy(r, x):
        i = cuda.grid(1)
        if i < x.size:
            cuda.stwt(r, i, cuda.ldlu(x, i) + 1)

    x = xp(np.arange(40, dtype=np.int16))
    r = xp(np.zeros(40, np.int16))
    copy[1, 64](r, x)
    assert get(r).tolist() == list(range(1, 41))


def test_in_the_simulator(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    _check(np.asarray, np.asarray)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_on_the_gpu():
    import cupy as cp
    _check(cp.asarray, cp.asnumpy)
