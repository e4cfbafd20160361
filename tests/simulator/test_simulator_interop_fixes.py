"""The simulator's arguments where a tester found them apart from the GPU path's:

- a read-only host NumPy array that shares memory with an array the kernel writes: the GPU
  path gives it its own device copy, taken before the launch (``runtime/transfers.py``
  ``transfer_of``: the buffer key holds the read-only flag), as numba-cuda does, so the kernel
  reads what it held before, never its own writes through the other view;
- host NumPy arrays in prepared launches and graph captures, which the GPU path refuses by name
  (``runtime/arguments.py`` ``_numpy_array_handler``; ``jit/launching.py``
  ``_launch_with_transfers`` for a capture);
- a simulated device array of a dtype kernels cannot take (``cuda.device_array(n, '>f4')``,
  Python objects): refused by name, in the words a host array of that dtype is refused in;
- a ``__cuda_array_interface__`` with a NULL 'data' for elements, or a 'stream' of 0 or not an
  int (version 3 of the interface forbids both; ``runtime/streams.py``
  ``wait_for_interface_stream``), at a launch and in ``cuda.as_cuda_array``;
- a PyTorch tensor on the CPU, which the GPU path refuses by name
  (``runtime/arguments.py`` ``torch_handler``) and the simulator ran in place;
- a strided host view (``a[::2]``): the GPU path launches on a C-ordered staging copy, written
  back into the view (``runtime/transfers.py`` ``DeviceCopy``), so a kernel declared
  ``float32[::1]`` takes it; the simulator typed the view itself and refused it.
"""

import numpy as np
import pytest

import gpureplace
from gpureplace import LaunchError, cuda
from gpureplace.runtime.arguments import ArgumentError
from gpureplace.simulator import launch_args, runner


@pytest.fixture(autouse=True)
def simulator(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")


@cuda.jit
def chain(dst, src):
    # one thread, in order: each element written is read by the next step through ``src``
    # when the two views overlap in place
    if cuda.grid(1) == 0:
        for i in range(dst.size):
            dst[i] = src[i] + 1


@cuda.jit
def chain_src_first(src, dst):
    if cuda.grid(1) == 0:
        for i in range(dst.size):
            dst[i] = src[i] + 1


@cuda.jit
def chain_tuple(dst, pair):
    if cuda.grid(1) == 0:
        for i in range(dst.size):
            dst[i] = pair[0][i] + pair[1][i]


@cuda.jit
def inc(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


def _read_only(a):
    a.flags.writeable = False
    return a


class _Interface:
    """Another library's array, known only by its ``__cuda_array_interface__``."""

    def __init__(self, **desc):
        self.__cuda_array_interface__ = dict({"typestr": "<f4", "version": 3}, **desc)


# ---------------------------------------------------------------------------------------------
# 1. a read-only host array overlapping a written one: its own copy, taken before the launch


def test_a_read_only_view_of_written_memory_reads_what_it_held_before_the_launch():
    base = np.zeros(6, np.float32)
    chain[1, 1](base[1:], _read_only(base[:5]))
    assert base.tolist() == [0, 1, 1, 1, 1, 1]          # as cuda.In(base[:5]) gives it
    base = np.zeros(6, np.float32)
    chain[1, 1](base[1:], cuda.In(base[:5]))
    assert base.tolist() == [0, 1, 1, 1, 1, 1]


def test_the_copy_is_taken_whatever_the_order_of_the_arguments_and_in_tuples():
    base = np.zeros(6, np.float32)
    chain_src_first[1, 1](_read_only(base[:5]), base[1:])
    assert base.tolist() == [0, 1, 1, 1, 1, 1]
    base = np.zeros(6, np.float32)
    ones = np.ones(5, np.float32)
    chain_tuple[1, 1](base[1:], (_read_only(base[:5]), ones))
    assert base.tolist() == [0, 1, 1, 1, 1, 1]


def test_a_strided_read_only_view_is_copied_with_its_elements_in_place():
    base = np.arange(12, dtype=np.float32)
    src = _read_only(base[::2][:5])               # 0, 2, 4, 6, 8
    chain[1, 1](base[2:7], src)
    assert base[:7].tolist() == [0, 1, 1, 3, 5, 7, 9]   # (in place: 0, 1, 1, 2, 5, 7, 9)
    assert src.tolist() == [0, 1, 5, 9, 8] and not src.flags.writeable


def test_only_a_read_only_array_that_may_share_written_memory_is_copied():
    sim = runner.Launch("k", (1, 1, 1), (1, 1, 1), 0)
    conv = launch_args.LaunchArguments(sim)
    apart = _read_only(np.zeros(4, np.float32))
    conv.add(np.zeros(4, np.float32), "k: argument 0 ('dst')")
    conv.add(apart, "k: argument 1 ('src')")
    assert conv.shared_read_only() == {}
    assert conv.values[1]._a is apart                  # read in place: nothing to copy


def test_a_read_only_device_array_is_read_in_place_as_on_the_gpu():
    # (another library's array whose interface marks it read-only: device memory, which the
    # GPU reads where it is, so the kernel sees its own writes through the other view)
    d = cuda.to_device(np.zeros(6, np.float32))
    ptr = d.__cuda_array_interface__["data"][0]
    view = _Interface(shape=(5,), data=(ptr, True), owner=None)
    chain[1, 1](d[1:], view)
    assert d.copy_to_host().tolist() == [0, 1, 2, 3, 4, 5]


# ---------------------------------------------------------------------------------------------
# 2. host arrays in prepared launches and graph captures: refused by name, as on the GPU


@cuda.jit
def add_to(a, v):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = a[i] + v


def test_a_prepared_launch_refuses_a_host_array_by_name():
    h = np.zeros(4, np.float32)
    with pytest.raises(ArgumentError, match=r"add_to: argument 0 \('a'\) is a host NumPy array: "
                                            r"prepared launches and CUDA graphs take device "
                                            r"arrays \(cupy.asarray\(a\), or "
                                            r"cuda.to_device\(a\)\); only a plain launch copies"):
        add_to[1, 32].prepare(h, 1.0)
    assert h.tolist() == [0] * 4
    with pytest.raises(ArgumentError, match=r"chain_tuple: argument 1 \('pair'\), item pair\[0\], "
                                            r"is a host NumPy array"):
        chain_tuple[1, 1].prepare(cuda.device_array(4, np.float32),
                                  (np.zeros(4, np.float32), cuda.device_array(4, np.float32)))


def test_a_graph_capture_refuses_a_host_array_by_name():
    h = np.zeros(4, np.float32)
    with pytest.raises(LaunchError, match=r"add_to: argument 0 \('a'\) \(a host NumPy array\) is "
                                          r"copied to or from the host around each launch, "
                                          r"which a CUDA graph cannot hold"):
        gpureplace.graph(lambda: add_to[1, 32](h, 1.0))
    assert h.tolist() == [0] * 4


def test_device_arrays_and_plain_views_of_their_memory_still_bind():
    d = cuda.to_device(np.zeros(4, np.float32))
    run = add_to[1, 32].prepare(d, 1.0)
    run()
    g = gpureplace.graph(lambda: add_to[1, 32](d, 1.0))
    g()
    # (a plain NumPy view of simulated device memory, as gpureplace's own modules hand it)
    add_to[1, 32].prepare(np.asarray(d), 1.0)()
    assert d.copy_to_host().tolist() == [3] * 4
    h = np.zeros(4, np.float32)
    add_to[1, 32](h, 1.0)                              # a plain launch takes host arrays
    assert h.tolist() == [1] * 4


# ---------------------------------------------------------------------------------------------
# 3. a simulated device array of a dtype kernels cannot take


def test_a_big_endian_device_array_is_refused_by_name_at_the_launch():
    out = cuda.device_array_like(np.arange(4, dtype=">f4"))
    with pytest.raises(ArgumentError, match=r"inc: argument 0 \('a'\) has dtype >f4 \(big-endian, "
                                            r"not this machine's byte order\); pass "
                                            r"a.astype\('<f4'\)"):
        inc[1, 32](out)
    with pytest.raises(ArgumentError, match=r"argument 1 \('pair'\), item pair\[1\], has dtype "
                                            r">f4"):
        chain_tuple[1, 1](cuda.device_array(4, np.float32),
                          (cuda.device_array(4, np.float32), cuda.device_array(4, ">f4")))


def test_a_device_array_of_python_objects_is_refused_by_name_at_the_launch():
    with pytest.raises(ArgumentError, match=r"inc: argument 0 \('a'\) has dtype object, whose "
                                            r"Python objects have no device form"):
        inc[1, 32](cuda.device_array(2, object))


# ---------------------------------------------------------------------------------------------
# 4. a NULL 'data' for elements


def test_a_null_data_pointer_for_elements_is_refused_by_name():
    with pytest.raises(ArgumentError, match=r"inc: argument 0 \('a'\) has a "
                                            r"__cuda_array_interface__ whose 'data' is \(0, "
                                            r"False\), a NULL address, for the 8 elements"):
        inc[1, 32](_Interface(shape=(8,), data=(0, False)))
    with pytest.raises(ValueError, match=r"as_cuda_array: .*'data' is \(0, False\), a NULL "
                                         r"address"):
        cuda.as_cuda_array(_Interface(shape=(2, 3), data=(0, False)))


def test_an_empty_array_may_have_a_null_data_pointer():
    empty = _Interface(shape=(0,), data=(0, False))
    inc[1, 32](empty)
    assert cuda.as_cuda_array(empty).shape == (0,)


# ---------------------------------------------------------------------------------------------
# 5. an interface 'stream' that names no stream


@pytest.mark.parametrize("stream", [0, "not-a-stream", True, 1.0])
def test_an_interface_stream_that_is_no_handle_is_refused(stream):
    d = cuda.to_device(np.zeros(4, np.float32))
    foreign = _Interface(shape=(4,), data=(d.__cuda_array_interface__["data"][0], False),
                         stream=stream)
    said = (r"__cuda_array_interface__\['stream'\] must be None or a stream handle \(a non-zero "
            r"int: 1 is the legacy default stream, 2 the per-thread one\), got ")
    with pytest.raises(ValueError, match=r"inc: argument 0 \('a'\) has an interface that names "
                                         r"no stream: " + said):
        inc[1, 32](foreign)
    with pytest.raises(ValueError, match=said):
        cuda.as_cuda_array(foreign)
    assert d.copy_to_host().tolist() == [0] * 4


def test_an_interface_stream_handle_or_none_is_taken():
    d = cuda.to_device(np.zeros(4, np.float32))
    ptr = d.__cuda_array_interface__["data"][0]
    for stream in (None, 1, 2, 0x5100_0000):
        foreign = _Interface(shape=(4,), data=(ptr, False), stream=stream)
        inc[1, 32](foreign)
        cuda.as_cuda_array(foreign)
    assert d.copy_to_host().tolist() == [4] * 4


# ---------------------------------------------------------------------------------------------
# misaligned arrays: refused by name, as the GPU path refuses them (its fault ends the context)

def test_misaligned_device_views_and_packed_record_copies_are_refused_by_name():
    from gpureplace.runtime.arguments import ArgumentError

    @cuda.jit
    def inc(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = a[i] + 1

    raw = cuda.to_device(np.zeros(17, np.uint8))
    with pytest.raises(ArgumentError, match=r"inc: argument 0 \('a'\) starts at device address "
                                            r"0x[0-9a-f]+, which is not a multiple of 4 bytes"):
        inc[1, 32](raw[1:17].view(np.float32))
    odd = cuda.device_array((4,), np.float32, strides=(6,))
    with pytest.raises(ArgumentError, match=r"stride of 6 bytes along axis 0, not a multiple "
                                            r"of 4"):
        inc[1, 32](odd)
    aligned = raw[4:16].view(np.float32)                # (an aligned view runs)
    inc[1, 32](aligned)
    assert aligned.copy_to_host().tolist() == [1.0, 1.0, 1.0]

    @cuda.jit
    def bump(r):
        i = cuda.grid(1)
        if i < r.size:
            r[i].a += 1

    packed = np.zeros(4, [("a", "f8"), ("b", "i4")])     # 12 bytes: every other 'a' at 4 mod 8
    with pytest.raises(ArgumentError, match=r"bump: argument 0 \('r'\) has a stride of 12 bytes"
                                            r".*align=True"):
        bump[1, 32](packed)
    padded = np.zeros(4, np.dtype([("a", "f8"), ("b", "i4")], align=True))
    bump[1, 32](padded)
    assert padded["a"].tolist() == [1.0] * 4
    # a host view at any address or stride is copied to the device on the GPU: it runs
    host = np.zeros(20, np.uint8)
    odd_host = host[1:17].view(np.float32)              # at an odd address, on the host
    inc[1, 32](odd_host)
    assert odd_host.tolist() == [1.0] * 4


def test_a_scalar_beyond_a_declared_float32_is_inf_without_numpys_warning():
    """The GPU path packs 1e300 for a float32 parameter as inf, silently; the simulator printed
    NumPy's "overflow encountered in cast" RuntimeWarning, naming its own file."""
    import warnings

    @cuda.jit("void(float32[:], float32)")
    def put(x, v):
        x[0] = v

    x = np.zeros(1, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        put[1, 1](x, 1e300)
    assert np.isinf(x[0])


class _CPUTensor:
    """What the launch reads of a PyTorch tensor on the CPU (torch is not installed here)."""
    __module__ = "torch"
    is_cuda = False

    def __init__(self, values):
        self.values = values

    def data_ptr(self):
        return self.values.ctypes.data

    def stride(self):
        return tuple(s // self.values.itemsize for s in self.values.strides)

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self.values


def test_a_cpu_torch_tensor_is_refused_as_on_the_gpu():
    @cuda.jit
    def inc(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += 1

    values = np.zeros(4, np.float32)
    with pytest.raises(LaunchError) as err:
        inc[1, 4](_CPUTensor(values))
    assert "argument 0 ('x')" in str(err.value)
    assert "PyTorch tensor on the CPU" in str(err.value) and "t.cuda()" in str(err.value)
    assert (values == 0).all()                # nothing ran


def test_a_strided_host_view_is_staged_in_c_order_and_written_back():
    @cuda.jit("void(float32[::1], float32[::1])")
    def scaled(out, x):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = 2 * x[i]

    a = np.arange(8, dtype=np.float32)
    src = np.arange(16, dtype=np.float32)
    scaled[1, 4](a[::2], src[::4])                        # both views strided
    assert a.tolist() == [0, 1, 8, 3, 16, 5, 24, 7]      # the view's elements only

    ro = src[1::4]
    ro.flags.writeable = False                           # read-only: staged, not written back
    scaled[1, 4](a[1::2], ro)
    assert a.tolist() == [0, 2, 8, 10, 16, 18, 24, 26]

    @cuda.jit
    def inc(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += 1

    b = np.zeros((4, 4), np.float32)
    inc[1, 4](b[:, 1])                               # lazily compiled: the copy's type, C order
    assert [str(t[0]) for t in inc.signatures] == ["array(float32, 1d, C)"]
    assert b[:, 1].tolist() == [1, 1, 1, 1] and b.sum() == 4


def test_a_strided_view_given_twice_is_one_staged_array():
    # one staging copy per view of the memory (the GPU's buffer key): two copies, the second
    # written back last, lost the kernel's writes through the first
    @cuda.jit
    def write_then_read(x, y):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = 1.0
            cuda.syncthreads()
            y[i] = y[i] + 1.0                # reads what x wrote: the same memory

    for given in (lambda v: (v, v), lambda v: (cuda.InOut(v), v), lambda v: (v, v.view())):
        a = np.zeros(8)
        write_then_read[1, 4](*given(a[::2]))
        assert a.tolist() == [2, 0, 2, 0, 2, 0, 2, 0]
