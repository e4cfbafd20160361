"""CUDA vector types (cuda.float32x4, cuda.int2, ...) as numba-cuda offers them."""

import re

import numpy as np
import pytest
from numba.core import types

from conftest import assemble
from corpus import bench_codegen
from gpureplace import CompileError, cuda
from gpureplace.compiler.intrinsics.vectors import vector_types


def _readout_kernel(vt):
    """A kernel building ``vt`` from exactly its number of scalars 0, 1, ... and storing its
    elements (numba-cuda's own test of every type)."""
    make, base = vt.user_facing_object, getattr(np, str(vt.element))
    source = {
        1: "def k(res):\n    v = make(base(0))\n    res[0] = v.x\n",
        2: "def k(res):\n    v = make(base(0), base(1))\n    res[0] = v.x\n    res[1] = v.y\n",
        3: "def k(res):\n    v = make(base(0), base(1), base(2))\n    res[0] = v.x\n"
           "    res[1] = v.y\n    res[2] = v.z\n",
        4: "def k(res):\n    v = make(base(0), base(1), base(2), base(3))\n    res[0] = v.x\n"
           "    res[1] = v.y\n    res[2] = v.z\n    res[3] = v.w\n",
    }[vt.count]
    ns = {"make": make, "base": base}
    exec(compile(source, f"<{vt.name}>", "exec"), ns)
    return cuda.jit(ns["k"])


def test_forty_types_with_numba_cudas_names_and_cuda_cs():
    assert len(vector_types) == 40
    assert cuda.float4 is cuda.float32x4 and cuda.double2 is cuda.float64x2
    assert cuda.short2 is cuda.int16x2 and cuda.uchar4 is cuda.uint8x4
    assert cuda.int3 is cuda.int32x3 and cuda.longlong1 is cuda.int64x1
    assert cuda.long4 is getattr(cuda, f"{np.dtype(np.int_).name}x4")
    for vt in vector_types.values():
        stub = getattr(cuda, vt.name)
        assert stub is vt.user_facing_object and stub.vector_type is vt
        assert vt.attr_names == ("x", "y", "z", "w")[:vt.num_elements]
        for alias in stub.aliases:
            assert getattr(cuda, alias) is stub
    from gpureplace.cuda import float2, ulonglong3                           # noqa: F401
    with pytest.raises(RuntimeError, match="only be used inside a kernel"):
        cuda.float32x2(1.0, 2.0)


def test_every_type_compiles_to_plain_registers():
    for vt in vector_types.values():
        ty = types.float64 if vt.element in (types.float32, types.float64) else types.int64
        ptx = _readout_kernel(vt).compile((ty[::1],)).ptx
        assemble(ptx)
        assert ".local" not in ptx, vt.name                  # no stack struct left


@cuda.jit(device=True)
def _swap(v):
    return cuda.float32x2(v.y, v.x)


@cuda.jit(device=True)
def _sum4(v):
    return v.x + v.y + v.z + v.w


@cuda.jit
def _fancy(res, a):
    one = np.float32(1)
    f2 = cuda.float2(a, 3)                       # 2 3: a scalar argument and a literal
    f1 = cuda.float1(one)
    f3 = cuda.float32x3(f2, f1)                  # 2 3 1
    res[0] = _sum4(cuda.float4(f1, f3))          # 1 + 2 + 3 + 1
    s = _swap(f2)
    res[1] = s.x
    res[2] = s.y
    f4 = cuda.float32x4(f2, f2)
    res[3] = f4.z * 10 + f4.w
    pair = (f2, cuda.float32x2(7, 8))
    res[4] = pair[1].y
    i2 = cuda.int2(a * 2.9, -a * 2.9)            # float -> int truncates
    res[5] = i2.x
    res[6] = i2.y
    u = cuda.uchar2(300, True)                   # wraps to 8 bits, a bool is 1
    res[7] = u.x + u.y


FANCY = [7, 3, 2, 23, 8, 5, -5, 45]


def test_constructors_take_scalars_and_vectors_in_any_combination_simulated(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    res = np.zeros(8, np.float32)
    _fancy[1, 1](res, np.float32(2))
    assert res.tolist() == FANCY


@pytest.mark.gpu
def test_constructors_take_scalars_and_vectors_in_any_combination():
    import cupy as cp
    res = cp.zeros(8, np.float32)
    _fancy[1, 1](res, np.float32(2))
    assert cp.asnumpy(res).tolist() == FANCY


@pytest.mark.gpu
def test_every_type_reads_back_what_it_was_built_from():
    import cupy as cp
    for vt in vector_types.values():
        res = cp.zeros(vt.num_elements, np.float64)
        _readout_kernel(vt)[1, 1](res)
        assert cp.asnumpy(res).tolist() == list(range(vt.num_elements)), vt.name


def _compile_error(src, match):
    ns = {"cuda": cuda, "np": np}
    exec(compile(src, "<cell>", "exec"), ns)
    with pytest.raises(CompileError, match=match):
        cuda.jit(ns["k"]).compile("void(float32[:])")


def test_clear_errors_name_the_type_and_line():
    _compile_error("def k(r):\n    v = cuda.float4(1.0, 2.0, 3.0)\n    r[0] = v.x\n",
                   r"line 2\): cuda.float32x4\(\): needs 4 element\(s\) in all, got 3")
    _compile_error("def k(r):\n    v = cuda.float4(cuda.int2(1, 2), 3.0, 4.0)\n",
                   r"line 2\): cuda.float32x4\(\): a vector argument must have float32 "
                   r"elements, got int32x2")
    _compile_error("def k(r):\n    v = cuda.float3(1, 2, 3)\n    r[0] = v.w\n",
                   r"line 3\): Unknown attribute 'w' of type float32x3")
    _compile_error("def k(r):\n    v = cuda.float2(1, 2)\n    v.x = 3.0\n",
                   r"line 3\): float32x2 values cannot be changed \(v.x = ...\): build a new "
                   r"one, such as cuda.float32x2\(new, v.y\)")
    _compile_error("def k(r):\n    v = cuda.float2(r, 2)\n",
                   r"line 2\): cuda.float32x2\(\): takes float32 scalars and float32 vectors, "
                   r"got array")


# -- arrays of vectors: cuda.as_vectors --------------------------------------------------------

# the benchmark's float32x4 saxpy, saxpy_vec4 in bench/codegen_kernels.py
_saxpy4 = bench_codegen().saxpy_vec4


@cuda.jit
def _swap_pairs(m):
    i, j = cuda.grid(2)
    if i < m.shape[0] and j < m.shape[1]:
        p = m[i, j]
        m[i, j] = cuda.double2(p.y, p.x)


def test_vector_arrays_load_and_store_with_one_wide_access():
    v4 = types.Array(vector_types["float32x4"], 1, "C")
    ptx = _saxpy4.compile((types.float32, v4, v4, v4)).ptx
    assemble(ptx)
    assert ptx.count("ld.global.v4.") == 2 and ptx.count("st.global.v4.") == 1
    d2 = types.Array(vector_types["float64x2"], 2, "C")
    ptx = _swap_pairs.compile((d2,)).ptx
    assemble(ptx)
    assert "ld.global.v2." in ptx and "st.global.v2." in ptx


def _check_as_vectors(xp):
    x = xp.arange(40, dtype=np.float32)
    y = xp.ones(40, dtype=np.float32)
    out = xp.zeros(40, dtype=np.float32)
    _saxpy4[1, 16](np.float32(2), cuda.as_vectors(x), cuda.as_vectors(y), cuda.as_vectors(out))
    assert (_host(out) == 2 * np.arange(40) + 1).all()
    m = xp.arange(24, dtype=np.float64).reshape(3, 8)
    _swap_pairs[(1, 1), (4, 4)](cuda.as_vectors(m, 2))
    expect = np.arange(24, dtype=np.float64).reshape(3, 4, 2)[..., ::-1].reshape(3, 8)
    assert (_host(m) == expect).all()
    with pytest.raises(Exception, match=r"not aligned to 16 bytes"):
        _saxpy4[1, 16](np.float32(2), cuda.as_vectors(x[1:37]), cuda.as_vectors(y[:36]),
                       cuda.as_vectors(out[:36]))
    with pytest.raises(Exception, match=r"last axis \(38 elements\) is not a multiple of 4"):
        _saxpy4[1, 16](np.float32(2), cuda.as_vectors(x[:38]), cuda.as_vectors(y[:36]),
                       cuda.as_vectors(out[:36]))
    with pytest.raises(Exception, match=r"must be C-contiguous"):
        _saxpy4[1, 16](np.float32(2), cuda.as_vectors(x[::2]), cuda.as_vectors(y[:20]),
                       cuda.as_vectors(out[:20]))


def _host(a):
    return a if isinstance(a, np.ndarray) else a.get()


class _SimulatedDevice:
    """The simulator's device arrays, made as ``xp.arange`` / ``ones`` / ``zeros``."""

    def __getattr__(self, name):
        make = getattr(np, name)
        return lambda *args, **kw: cuda.to_device(make(*args, **kw))


def test_as_vectors_in_the_simulator(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    _check_as_vectors(_SimulatedDevice())
    with pytest.raises(IndexError, match=r"index 10 is out of bounds for axis 0 with size 10: "
                                         r"index \(10,\) of a float32x4 array"):
        x = cuda.to_device(np.zeros(40, np.float32))

        @cuda.jit
        def past(v):
            v[cuda.grid(1)] = cuda.float32x4(1, 2, 3, 4)
        past[1, 11](cuda.as_vectors(x))


def test_as_vectors_of_a_host_array_is_refused_as_on_the_gpu(monkeypatch):
    # vectors view device memory: the GPU path never took a host array there, the simulator
    # ran it in place (and a strided host view, staged for the launch, even as C-contiguous)
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    x = np.zeros(40, np.float32)
    for host in (x, x[::2]):
        with pytest.raises(Exception, match=r"argument 1 \('x'\): as_vectors\(a, 4\): a is a host "
                                            r"NumPy array; .*as_vectors\(cuda.to_device\(a\), 4\)"):
            _saxpy4[1, 16](np.float32(2), cuda.as_vectors(host), cuda.as_vectors(host),
                           cuda.as_vectors(host))


def test_as_vectors_refuses_what_it_cannot_view():
    with pytest.raises(ValueError, match="n must be 1, 2, 3 or 4"):
        cuda.as_vectors(np.zeros(8, np.float32), 5)
    with pytest.raises(TypeError, match=r"dtype complex64; vector types hold"):
        cuda.as_vectors(np.zeros(8, np.complex64))
    with pytest.raises(TypeError, match=r"dtype None"):
        cuda.as_vectors([1.0, 2.0])


@pytest.mark.gpu
@pytest.mark.gpu_only     # the eager alignment check is the GPU backend's
def test_as_vectors_on_the_gpu():
    import cupy as cp
    _check_as_vectors(cp)
    with pytest.raises(Exception, match=r"as_vectors\(a, 4\): the data address .* is not "
                                        r"aligned to 16 bytes"):
        cuda.as_vectors(cp.zeros(40, np.float32)[1:37])            # refused when made


def test_a_vector_array_of_a_cupy_array_is_checked_once_per_shape():
    from gpureplace.runtime import arguments
    from fake_cupy import ndarray
    a = ndarray((8, 12), np.float32, ptr=0x10000)
    v = cuda.as_vectors(a, 4)                                   # checked when made
    key, values = arguments.value_key(v)
    assert key == ("vectors", np.dtype(np.float32), 4, 2) and values == (0x10000, 8, 3)
    assert arguments.numba_type_of_key(key) == types.Array(vector_types["float32x4"], 2, "C")
    assert arguments.value_key(v) == (key, values) and v._cached is not None
    a.shape, a.strides = (4, 24), (96, 4)                       # CuPy's in-place reshape
    assert arguments.value_key(v)[1] == (0x10000, 4, 6)
    a.shape, a.strides = (4, 22), (88, 4)                       # (a length that does not fit)
    with pytest.raises(TypeError, match=r"last axis \(22 elements\) is not a multiple of 4"):
        arguments.value_key(v)
    with pytest.raises(TypeError, match="not aligned to 16 bytes"):
        cuda.as_vectors(ndarray((8,), np.float32, ptr=0x10004))
    assert arguments.value_key(cuda.as_vectors(ndarray((6,), np.float32, ptr=0x10004), 3))[1] \
        == (0x10004, 2)                                          # 12-byte vectors: 4-byte aligned


@cuda.jit
def _through_shared(x, out):
    i = cuda.grid(1)
    tile = cuda.shared.array(64, cuda.float32x4)
    loc = cuda.local.array(2, cuda.float32x4)
    tile[i] = x[i]
    loc[0] = cuda.float32x4(1, 2, 3, 4)
    loc[1] = tile[i]
    cuda.syncthreads()
    u = tile[63 - i]
    w = loc[0]
    out[i] = cuda.float32x4(u.x + w.x, u.y + w.y, u.z + w.z, u.w + loc[1].w)


def _through_shared_expected(x):
    rows = x.reshape(64, 4)
    want = rows[::-1] + np.array([1, 2, 3, 0], np.float32)
    want[:, 3] = rows[::-1, 3] + rows[:, 3]
    return want.reshape(-1)


def test_shared_and_local_arrays_of_vectors(monkeypatch):
    v4 = types.Array(vector_types["float32x4"], 1, "C")
    ptx = _through_shared.compile((v4, v4)).ptx
    assemble(ptx)
    assert "st.shared.v4." in ptx and "ld.shared.v4." in ptx       # aligned to 16 bytes
    assert re.search(r"\.shared \.align 16 \.b8 \w+\[1024\]", ptx)
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    x = np.arange(256, dtype=np.float32)
    out = cuda.to_device(np.zeros(256, np.float32))
    _through_shared[1, 64](cuda.as_vectors(cuda.to_device(x)), cuda.as_vectors(out))
    assert (out.copy_to_host() == _through_shared_expected(x)).all()


@pytest.mark.gpu
def test_shared_and_local_arrays_of_vectors_on_the_gpu():
    import cupy as cp
    x = cp.arange(256, dtype=np.float32)
    out = cp.zeros(256, np.float32)
    _through_shared[1, 64](cuda.as_vectors(x), cuda.as_vectors(out))
    assert (cp.asnumpy(out) == _through_shared_expected(cp.asnumpy(x))).all()
