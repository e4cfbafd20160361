"""Runtime on a real GPU: results against NumPy, array kinds, streams, seed cases (H200 host)."""

import math

import numpy as np
import pytest

from corpus import add_2d as add2d
from gpureplace import cuda

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cp():
    import cupy
    return cupy


def scale(v):
    return 2.0 * v


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = scale(a) * x[i] + math.sin(y[i])


@pytest.mark.gpu_only    # checks the loaded-module cache
def test_issue_example_matches_numpy(cp):
    x = cp.arange(1 << 20, dtype=cp.float32)
    y = cp.ones_like(x)
    out = cp.empty_like(x)
    saxpy[4096, 256](1.5, x, y, out)
    ref = 2.0 * 1.5 * cp.asnumpy(x).astype(np.float64) + np.sin(np.float32(1.0))
    np.testing.assert_allclose(cp.asnumpy(out), ref.astype(np.float32), rtol=1e-6)
    # one specialisation, loaded once on this device, reused by later launches
    saxpy[4096, 256](1.5, x, y, out)
    assert len(saxpy._launch_cache) == 1
    assert all(".entry saxpy" in ptx for ptx in saxpy.inspect_ptx().values())


@pytest.mark.parametrize("order", ["C", "F"])
def test_2d_grid_and_layouts(cp, order):
    a = cp.asarray(np.random.rand(67, 45), order=order)
    b = cp.asarray(np.random.rand(67, 45), order=order)
    out = cp.zeros((67, 45), order=order)
    add2d[(5, 3), (16, 16)](a, b, out)
    np.testing.assert_allclose(cp.asnumpy(out), cp.asnumpy(a) + cp.asnumpy(b))


def test_strided_views(cp):
    a = cp.arange(200, dtype=cp.float64).reshape(10, 20)[::2, 1::3]
    b = cp.ones((10, 20))[1::2, ::3]
    out = cp.zeros((5, 7))
    add2d[(1, 1), (8, 8)](a, b, out)
    np.testing.assert_allclose(cp.asnumpy(out), cp.asnumpy(a) + cp.asnumpy(b))


@cuda.jit
def fill(out, value):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = value


def test_torch_tensors_and_streams(cp):
    torch = pytest.importorskip("torch")
    t = torch.zeros(1000, device="cuda", dtype=torch.float32)
    s = torch.cuda.Stream()
    fill[4, 256, s](t, 2.5)
    s.synchronize()
    assert torch.all(t == 2.5).item()
    ti = torch.zeros(10, device="cuda", dtype=torch.int64)[::2]
    fill[1, 32](ti, 7)
    torch.cuda.synchronize()
    assert ti.tolist() == [7] * 5


def test_cupy_stream_and_numpy_scalars(cp):
    out = cp.zeros(300, dtype=cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    fill[2, 256, stream](out, np.float32(1.25))
    stream.synchronize()
    assert float(out.sum()) == 300 * 1.25
    assert any(t[1] == __import__("numba").float32 for t, _ in fill._specs)


class CAIOnly:
    def __init__(self, arr):
        self._arr = arr
        self.__cuda_array_interface__ = arr.__cuda_array_interface__


class DLPackOnly:
    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, **kw):
        return self._arr.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


@pytest.mark.gpu_only    # device array protocols
def test_cuda_array_interface_and_dlpack_objects(cp):
    a = cp.zeros(64, dtype=cp.int32)
    fill[1, 64](CAIOnly(a), 3)
    cp.cuda.runtime.deviceSynchronize()
    assert int(a.sum()) == 64 * 3
    b = cp.zeros(64, dtype=cp.float64)
    fill[1, 64](DLPackOnly(b), 0.5)
    cp.cuda.runtime.deviceSynchronize()
    assert float(b.sum()) == 32.0


@cuda.jit
def tuple_arg(out, t):
    out[0] = t[0] + t[1]
    out[1] = t[2]


def test_tuple_argument(cp):
    out = cp.zeros(2, dtype=cp.float64)
    tuple_arg[1, 1](out, (1.5, 2, 7.0))
    assert cp.asnumpy(out).tolist() == [3.5, 7.0]


def test_seed_cases_on_device(cp):
    from test_seed_cases import kw_kernel, many_args, type_first
    x = cp.arange(10, dtype=cp.float64)
    out = cp.zeros(10)
    kw_kernel[1, 32](out, x)
    xs = np.arange(10.0)
    ref = (2.0 * xs + 1.0) + (2.0 * xs + 0.5) + (3.0 * xs - 1.0)
    np.testing.assert_allclose(cp.asnumpy(out), ref)

    o = cp.zeros(1)
    many_args[1, 1](o, *[float(i) for i in range(33)])
    assert float(o[0]) == sum(range(33))

    oi = cp.zeros(1, dtype=cp.int64)
    type_first[1, 1](np.int64, oi, 3.7)
    assert int(oi[0]) == 3


@cuda.jit
def grid3(out):
    i, j, k = cuda.grid(3)
    ni, nj, nk = cuda.gridsize(3)
    if i < out.shape[0] and j < out.shape[1] and k < out.shape[2]:
        out[i, j, k] = i * 10000 + j * 100 + k + 0 * (ni + nj + nk)


def test_3d_grid(cp):
    out = cp.zeros((6, 5, 4), dtype=cp.int64)
    grid3[(2, 2, 2), (4, 4, 2)](out)
    i, j, k = np.indices((6, 5, 4))
    np.testing.assert_array_equal(cp.asnumpy(out), i * 10000 + j * 100 + k)


@pytest.mark.gpu_only
def test_nothing_launched_on_bad_arguments(cp):
    out = cp.full(4, 9.0)
    with pytest.raises(Exception, match=r"argument 0 \('out'\) has type builtins.str"):
        fill[1, 4]("out", 1.0)
    with pytest.raises(Exception, match="1024"):
        fill[1, 2048](out, 1.0)
    cp.cuda.runtime.deviceSynchronize()
    assert cp.asnumpy(out).tolist() == [9.0] * 4


@pytest.mark.gpu_only
def test_prepared_launch_on_the_device(cp):
    import gpureplace
    out = cp.zeros(300, dtype=cp.float32)
    run = fill[2, 256].prepare(out, 4.0)
    run()
    cp.cuda.runtime.deviceSynchronize()
    assert float(out.sum()) == 1200.0
    out[:] = 0
    gpureplace.refresh()             # the world moved: the next call revalidates and packs again
    run.launch()
    cp.cuda.runtime.deviceSynchronize()
    assert float(out.sum()) == 1200.0


@pytest.mark.gpu_only    # CUDA graphs
def test_prepared_launch_replays_its_graph_every_call_and_follows_a_redefinition(cp):
    import gpureplace
    ns = {"cuda": cuda}
    exec("def step(v):\n    return v + 1.0\n"
         "@cuda.jit\ndef bump(x):\n    i = cuda.grid(1)\n    if i < x.size:\n"
         "        x[i] = step(x[i])\n", ns)
    x = cp.zeros(1000, cp.float32)
    s = cp.cuda.Stream(non_blocking=True)
    run = ns["bump"][4, 256, s].prepare(x)
    assert run.uses_graph
    for _ in range(100):
        run()
    s.synchronize()
    assert (cp.asnumpy(x) == 100).all()                   # every replay ran, in order
    exec("def step(v):\n    return v + 10.0\n", ns)
    gpureplace.refresh()
    run()
    s.synchronize()
    assert (cp.asnumpy(x) == 110).all() and run.uses_graph  # the new code, a new graph


@pytest.mark.gpu_only    # the driver's JIT option
def test_a_kernel_with_line_info_is_loaded_keeping_it_and_runs(cp):
    lined = cuda.jit(lineinfo=True)(saxpy.py_func)
    x = cp.arange(1000, dtype=cp.float32)
    y = cp.ones_like(x)
    out = cp.empty_like(x)
    lined[4, 256](1.5, x, y, out)
    ref = 3.0 * cp.asnumpy(x).astype(np.float64) + np.sin(np.float32(1.0))
    np.testing.assert_allclose(cp.asnumpy(out), ref.astype(np.float32), rtol=1e-6)
    (entry,) = lined._launch_cache.values()
    assert type(entry.module).__name__ == "_LineInfoModule" and entry.fn_ptr
    assert lined.get_regs_per_thread(next(iter(lined.overloads))) > 0
