"""numba-cuda's host API in ``gpureplace.cuda``: device arrays, streams, events, devices, forall,
and the jit options max_registers / launch_bounds.

CPU tests run the numba-cuda tutorial flow on the simulator backend (host memory) and check the
PTX directives with ptxas; GPU tests run the same flow on CuPy.
"""

import numpy as np
import pytest

import gpureplace

from conftest import assemble
from gpureplace import LaunchError, cuda
from gpureplace.config import settings
from gpureplace.runtime import arguments


@cuda.jit
def add_strided(x, y, out):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        out[i] = x[i] + y[i]


@cuda.jit
def scale(x, factor):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= factor


def _tutorial(xp_check):
    """numba-cuda's introductory flow, unchanged but for the import."""
    n = 10000
    x = np.arange(n, dtype=np.float32)
    y = 2 * x
    d_x = cuda.to_device(x)
    d_y = cuda.to_device(y)
    d_out = cuda.device_array_like(d_x)
    s = cuda.stream()
    start, end = cuda.event(), cuda.event()
    start.record(s)
    add_strided[16, 128, s](d_x, d_y, d_out)
    end.record(s)
    out = d_out.copy_to_host(stream=s)
    s.synchronize()
    end.synchronize()
    np.testing.assert_array_equal(out, 3 * x)
    assert cuda.event_elapsed_time(start, end) >= 0
    assert cuda.is_cuda_array(d_out) and d_out.is_c_contiguous()
    # copy_to_host into an existing array, copy_to_device from host data
    into = np.zeros(n, np.float32)
    assert d_out.copy_to_host(into) is into
    np.testing.assert_array_equal(into, 3 * x)
    with s.auto_synchronize():
        d_x.copy_to_device(y, stream=s)
    np.testing.assert_array_equal(d_x.copy_to_host(), y)
    # to_device(..., to=existing) and forall
    cuda.to_device(x, to=d_x)
    scale.forall(n)(d_x, np.float32(3))
    cuda.synchronize()
    np.testing.assert_array_equal(d_x.copy_to_host(), 3 * x)
    pieces = d_x.split(4000)
    assert [p.shape[0] for p in pieces] == [4000, 4000, 2000]
    xp_check(d_x)
    return d_x


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


def test_tutorial_flow_in_the_simulator(simulated):
    d = _tutorial(lambda d: None)
    assert type(d).__name__ == "SimDeviceNDArray"
    assert isinstance(d + 1, np.ndarray) and type(d + 1) is np.ndarray


def test_device_arrays_keep_layout_dtype_and_strides(simulated):
    f = np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4))
    d = cuda.to_device(f)
    assert d.is_f_contiguous() and d.dtype == np.int16
    np.testing.assert_array_equal(d.copy_to_host(), f)
    e = cuda.device_array((3, 4), np.float64, order="F")
    assert e.is_f_contiguous() and e.dtype == np.float64
    assert cuda.device_array(5).dtype == np.float64                  # numba-cuda's default
    s = cuda.device_array((2, 3), np.float32, strides=(16, 4))
    assert s.strides == (16, 4) and not s.is_c_contiguous()
    with pytest.raises(ValueError, match="shape"):
        d.copy_to_host(np.zeros((4, 3), np.int16))
    with pytest.raises(ValueError, match="order"):
        cuda.device_array(3, order="K")
    assert cuda.to_device(np.zeros(4), copy=False).shape == (4,)


def test_mapped_and_pinned_arrays_in_the_simulator(simulated):
    m = cuda.mapped_array(64, np.float32)
    m[:] = 2
    scale[1, 64](m, np.float32(1.5))
    cuda.synchronize()
    assert (np.asarray(m) == 3).all()
    p = cuda.pinned_array((4, 4), np.int32, order="F")
    assert p.flags.f_contiguous and p.dtype == np.int32
    host = np.ones(8, np.float32)
    with cuda.mapped(host) as d:
        scale[1, 8](d, np.float32(4))
    assert (host == 4).all()


def test_managed_arrays_in_the_simulator(simulated):
    m = cuda.managed_array((4, 8), np.float32, order="F")
    m[:] = 2
    flat = m.reshape(-1, order="F")
    scale[1, 32](flat, np.float32(1.5))
    assert (np.asarray(m) == 3).all() and m.flags.f_contiguous


def test_devices_streams_and_events_in_the_simulator(simulated):
    dev = cuda.get_current_device()
    assert dev.WARP_SIZE == 32 and dev.compute_capability == (9, 0)
    with pytest.raises(AttributeError, match="NO_SUCH"):
        dev.NO_SUCH
    assert len(cuda.gpus) == 1 and cuda.gpus[0].id == 0 and cuda.list_devices()
    # numba-cuda code walks the other GPUs as cuda.gpus[1:]
    assert cuda.gpus[1:] == [] and [g.id for g in cuda.gpus[0:]] == [0]
    assert cuda.gpus[np.int64(0)].id == 0 and cuda.gpus[-1].id == 0
    with pytest.raises(TypeError, match=r"indexed by int \(or a slice\), not str"):
        cuda.gpus["0"]
    with pytest.raises(IndexError, match="there are 1 GPU"):
        cuda.gpus[1]
    with pytest.raises(ValueError, match="one device"):
        cuda.select_device(1)
    free, total = cuda.current_context().get_memory_info()          # the host's memory
    assert 0 < free <= total
    e = cuda.event(timing=False)
    e.record()
    with pytest.raises(RuntimeError, match="timing=True"):
        e.elapsed_time(cuda.event())
    s = cuda.default_stream()
    scale[1, 4, s](np.ones(4, np.float32), np.float32(2))
    with cuda.defer_cleanup():
        pass
    assert isinstance(cuda.devicearray.DeviceNDArray, type)


def test_forall_covers_every_task(simulated):
    @cuda.jit
    def mark(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] += 1

    for n in (1, 127, 128, 1000):
        out = np.zeros(n, np.int32)
        mark.forall(n)(out)
        assert (out == 1).all(), n
        out[:] = 0
        mark.forall(n, tpb=32)(out)
        assert (out == 1).all(), n
    mark.forall(0)(np.zeros(0, np.int32))
    with pytest.raises(ValueError, match=r"Can't create ForAll with negative task count: "
                                         r"forall\(ntasks\) takes a non-negative int, got -1"):
        mark.forall(-1)                       # (a LaunchError, also numba-cuda's ValueError)
    with pytest.raises(LaunchError, match="forall: ntasks must be a non-negative int"):
        mark.forall(2.5)
    with pytest.raises(LaunchError, match="tpb"):
        mark.forall(10, tpb=1.5)


def test_max_registers_and_launch_bounds_become_ptx_directives():
    @cuda.jit(max_registers=40, launch_bounds=(256, 2))
    def bounded(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = x[i] * 2.0 + 1.0

    ptx = bounded.inspect_ptx("void(float32[::1])")
    head = ptx[ptx.index(".entry"):ptx.index("{", ptx.index(".entry"))]
    assert ".maxnreg 40" in head and ".maxntid 256, 1, 1" in head and ".minnctapersm 2" in head
    assemble(ptx)
    plain = cuda.jit(bounded.py_func).inspect_ptx("void(float32[::1])")
    assert ".maxnreg" not in plain and ".maxntid" not in plain
    with pytest.raises(LaunchError, match="at most 256 threads"):
        bounded[1, 512]
    bounded[1, (16, 16)]                                         # 256 threads: allowed


def test_jit_option_errors_are_clear():
    def f(x):
        pass
    with pytest.raises(ValueError, match="max_registers"):
        cuda.jit(max_registers=0.5)(f)
    with pytest.raises(ValueError, match="max_registers"):
        cuda.jit(max_registers=256)(f)
    with pytest.raises(ValueError, match="launch_bounds"):
        cuda.jit(launch_bounds=(2048,))(f)
    with pytest.raises(TypeError, match="unsupported option"):
        cuda.jit(maxregs=3)(f)
    # flags take True or False ("no" was true), fastmath also numba-cuda's set of LLVM flags
    for option in ("fastmath", "lineinfo", "debug"):
        with pytest.raises(ValueError, match=rf"cuda.jit\({option}=...\) takes True or False"):
            cuda.jit(**{option: "no"})(f)
    with pytest.raises(ValueError, match="fastt is no fast-math flag"):
        cuda.jit(fastmath={"fastt"})(f)
    assert cuda.jit(fastmath={"nsz", "arcp"})(f)._fastmath
    with pytest.raises(ValueError, match=r"/etc/passwd is not a file device code links with: "
                                         r"its name must end in \.cu, \.ptx"):
        cuda.jit(link=["/etc/passwd"])(f)


def test_mapped_arrays_are_device_arrays_to_kernels_numpy_arrays_are_not():
    from gpureplace.hostapi import MappedNDArray
    m = np.zeros(4, np.int32).view(MappedNDArray)
    assert arguments.handler_of(m) is arguments._cai_handler
    assert arguments.handler_of(np.zeros(4)) is arguments._numpy_array_handler


# -- on the GPU ---------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.gpu_only
def test_tutorial_flow_on_the_gpu():
    import cupy as cp

    def check(d):
        assert isinstance(d, cp.ndarray) and type(d).__name__ == "DeviceNDArray"
        assert arguments.handler_of(d) is arguments.cupy_handler
        assert float(cp.sum(d)) == float(np.sum(3 * np.arange(10000, dtype=np.float32)))
    _tutorial(check)
    # a CuPy array of another library's making is a device array as it is
    c = cp.arange(5, dtype=cp.float32)
    v = cuda.as_cuda_array(c)
    assert v.data.ptr == c.data.ptr and cuda.to_device(c).data.ptr == c.data.ptr
    with pytest.raises(TypeError, match="not a device array"):
        cuda.as_cuda_array(np.zeros(3))


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_managed_arrays_and_foreign_interfaces_on_the_gpu():
    import cupy as cp
    from gpureplace.hostapi import ManagedNDArray
    m = cuda.managed_array(1000, np.float32)
    assert isinstance(m, ManagedNDArray) and arguments.handler_of(m) is arguments._cai_handler
    m[:] = 2                                   # the host writes it as a NumPy array
    scale[4, 256](m, np.float32(1.5))          # the kernel takes it as a device array
    cuda.synchronize()
    assert (np.asarray(m) == 3).all()
    assert m.__cuda_array_interface__["data"][0] == m.ctypes.data
    h = cuda.managed_array(16, np.int32, attach_global=False)
    h[:] = 7
    assert int(h.sum()) == 112
    c = cp.arange(6, dtype=cp.float64)
    d = cuda.from_cuda_array_interface(c.__cuda_array_interface__, owner=c)
    assert d.data.ptr == c.data.ptr and d.copy_to_host().tolist() == list(range(6))
    # np.asarray / np.testing copy a DeviceNDArray to the host, as numba-cuda's does
    np.testing.assert_equal(d, np.arange(6.0))
    assert type(np.asarray(d)) is np.ndarray and np.asarray(d, np.int32).dtype == np.int32
    with pytest.raises(ValueError, match="without a copy"):
        np.asarray(d, copy=False)
    # an element is a host number (numba-cuda's), a slice a device view; iteration gives numbers
    assert d[2] == 2.0 and isinstance(d[2], np.float64) and isinstance(d[-1], np.generic)
    assert type(d[1:]).__name__ == "DeviceNDArray" and d[1:].data.ptr == d.data.ptr + 8
    assert [float(v) for v in d] == list(range(6)) and all(isinstance(v, np.float64) for v in d)
    m2 = cuda.to_device(np.arange(6.0).reshape(2, 3))
    assert type(m2[1]).__name__ == "DeviceNDArray" and m2[1, 2] == 5.0
    assert [r.copy_to_host().tolist() for r in m2] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(TypeError, match="0-d"):
        iter(cuda.to_device(np.float64(3.0)))
    with pytest.raises(TypeError, match="__cuda_array_interface__ dictionary"):
        cuda.from_cuda_array_interface({"shape": (3,)})


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_mapped_pinned_and_devices_on_the_gpu():
    import cupy as cp
    m = cuda.mapped_array(256, np.float32)
    m[:] = 2
    scale[1, 256](m, np.float32(1.5))
    cuda.synchronize()
    assert (np.asarray(m) == 3).all()
    p = cuda.pinned_array(1 << 16, np.float32)
    p[:] = 7
    s = cuda.stream()
    d = cuda.to_device(p, stream=s)
    back = cuda.pinned_array_like(p)
    d.copy_to_host(back, stream=s)
    s.synchronize()
    assert (back == 7).all()
    host = np.ones(32, np.float32)
    with cuda.mapped(host) as dm:
        scale[1, 32](dm, np.float32(5))
    assert (host == 5).all()
    dev = cuda.get_current_device()
    assert dev.WARP_SIZE == 32 and dev.MULTIPROCESSOR_COUNT > 0
    assert dev.compute_capability == tuple(int(c) for c in
                                           cp.cuda.Device().compute_capability[:2])
    assert dev.name and len(cuda.gpus) >= 1
    free, total = cuda.current_context().get_memory_info()
    assert 0 < free <= total
    assert cuda.select_device(0) == cuda.get_current_device()


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_forall_and_bounded_kernels_on_the_gpu():
    import cupy as cp

    @cuda.jit(max_registers=32, launch_bounds=256)
    def bump(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] += 1

    out = cp.zeros(100003, cp.int32)
    bump.forall(out.size)(out)
    bump[(out.size + 255) // 256, 256](out)
    assert int(out.min()) == 2 and int(out.max()) == 2
    with pytest.raises(LaunchError, match="at most 256"):
        bump[1, 1024](out)


@cuda.jit
def reverse_in_shared(x, out):
    buf = cuda.shared.array(0, np.float32)
    i = cuda.threadIdx.x
    n = x.size
    for k in range(i, n, cuda.blockDim.x):
        buf[k] = x[k]
    cuda.syncthreads()
    for k in range(i, n, cuda.blockDim.x):
        out[k] = buf[n - 1 - k]


@pytest.mark.gpu
def test_dynamic_shared_memory_over_48_kib():
    import cupy as cp
    n = 40 * 1024                                   # 160 KiB of float32: over the default 48
    x = cp.arange(n, dtype=cp.float32)
    out = cp.zeros_like(x)
    reverse_in_shared[1, 256, 0, n * 4](x, out)
    np.testing.assert_array_equal(cp.asnumpy(out), np.arange(n, dtype=np.float32)[::-1])
    out[:] = 0
    reverse_in_shared[1, 256, 0, n * 4].prepare(x, out)()
    np.testing.assert_array_equal(cp.asnumpy(out), np.arange(n, dtype=np.float32)[::-1])


_TABLE = np.arange(16, dtype=np.float32)


@cuda.jit
def uses_every_memory(x):
    s = cuda.shared.array(64, np.float32)
    scratch = cuda.local.array(40, np.float32)
    c = cuda.const.array_like(_TABLE)
    i = cuda.grid(1)
    for j in range(40):
        scratch[j] = x[(i + j) % x.size]
    s[i % 64] = scratch[i % 40] + c[i % 16]
    cuda.syncthreads()
    x[i] = s[(i + 1) % 64]


@cuda.jit("void(float32[::1])", launch_bounds=(128,))
def bounded(x):
    x[0] = 1.0


ATTRIBUTES = ("regs_per_thread", "shared_mem_per_block", "local_mem_per_thread",
              "const_mem_size", "max_threads_per_block")


def test_without_a_gpu_function_attributes_come_from_ptxas(simulated, monkeypatch):
    sig = "void(float32[::1])"
    uses_every_memory.compile(sig)
    got = {a: getattr(uses_every_memory, f"get_{a}")(sig) for a in ATTRIBUTES}
    assert 0 < got["regs_per_thread"] <= 255
    assert got["shared_mem_per_block"] == 256 and got["const_mem_size"] == 64
    assert got["local_mem_per_thread"] >= 160 and got["max_threads_per_block"] == 1024
    assert bounded.get_max_threads_per_block() == 128          # .maxntid
    from gpureplace import probe
    from gpureplace.compiler import toolchain
    from gpureplace.errors import NoDeviceError
    never_asked = cuda.jit(uses_every_memory.py_func)      # (ptxas's answers are kept)
    never_asked.compile(sig)
    monkeypatch.setattr(probe, "available", lambda: False)
    monkeypatch.setattr(toolchain, "find_tool", lambda name: None)
    with pytest.raises(NoDeviceError, match="pip install nvidia-cuda-nvcc"):
        never_asked.get_regs_per_thread()


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_ptxas_reports_what_the_driver_does():
    from gpureplace.compiler import toolchain
    for kernel, sig in ((uses_every_memory, "void(float32[::1])"),
                        (bounded, "void(float32[::1])"),
                        (reverse_in_shared, "void(float32[::1], float32[::1])")):
        spec = kernel.compile(sig)
        assembled = toolchain.resources(spec.ptx, spec.name)
        driver = {a: getattr(kernel, f"get_{a}")(sig) for a in ATTRIBUTES}
        assert {a: assembled[n] for a, n in zip(ATTRIBUTES, (
            "num_regs", "shared_size_bytes", "local_size_bytes", "const_size_bytes",
            "max_threads_per_block"))} == driver, kernel.__name__


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_function_attributes_from_the_driver():
    import cupy as cp
    sig = "void(float32[::1], float32[::1])"
    reverse_in_shared.compile(sig)
    regs = reverse_in_shared.get_regs_per_thread(sig)
    assert 0 < regs <= 255
    assert reverse_in_shared.get_shared_mem_per_block(sig) == 0          # all dynamic
    assert reverse_in_shared.get_local_mem_per_thread(sig) == 0
    assert 0 < reverse_in_shared.get_max_threads_per_block(sig) <= 1024
    every = reverse_in_shared.get_regs_per_thread()
    assert isinstance(every, dict) and regs in every.values()
    assert cp is not None and reverse_in_shared.inspect_asm(sig) == reverse_in_shared.inspect_ptx(sig)
    assert list(reverse_in_shared.overloads)


@pytest.mark.gpu
def test_record_arrays_and_generator_states_round_trip():
    from gpureplace.cuda.random import create_xoroshiro128p_states
    recs = np.zeros(5, np.dtype([("a", np.int32), ("b", np.float64)], align=True))
    recs["a"] = np.arange(5)
    recs["b"] = 0.5
    d = cuda.to_device(recs)
    back = d.copy_to_host()
    assert back.dtype == recs.dtype and back.tolist() == recs.tolist()
    states = create_xoroshiro128p_states(64, seed=7)
    host = states.copy_to_host()
    assert host.shape == (64,) and host.dtype.names == ("s0", "s1")
    assert len(set(host["s0"].tolist())) == 64


@cuda.jit
def bump_record(r):
    r.a = r.a + 3
    r.b = r.b * 2.0


def _device_record_round_trip():
    recs = np.zeros(2, np.dtype([("a", np.int32), ("b", np.float64)], align=True))
    recs[1] = (4, 1.25)
    d = cuda.to_device(recs[1])
    assert d.shape == () and d.dtype == recs.dtype
    assert d["a"] == 4 and d["b"] == 1.25
    bump_record[1, 1](d)
    bump_record[1, 1](d)                  # in device memory: each launch sees the last's writes
    assert d["a"] == 10 and d["b"] == 5.0
    assert recs[1].tolist() == (4, 1.25)  # the host record was copied, not shared
    assert d.copy_to_host().tolist() == (10, 5.0)
    with pytest.raises(KeyError, match="no field 'c'"):
        d["c"]
    bump_record[1, 1](recs[1])            # a host record: copied in and back around the launch
    assert recs[1].tolist() == (7, 2.5)
    return d


def test_to_device_of_a_record_is_a_device_record_kernels_take_by_reference(simulated):
    assert type(_device_record_round_trip()).__name__ == "SimDeviceRecord"


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_to_device_of_a_record_is_a_device_record_on_the_gpu():
    assert type(_device_record_round_trip()).__name__ == "DeviceRecord"


def test_debug_true_is_an_option_that_keeps_line_information():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # nothing to warn about any more
        k = cuda.jit(debug=True)(lambda x: None)
    assert k.options().debug and k.options().lineinfo
    assert not cuda.jit(lambda x: None).options().debug


def test_specialize_fixes_the_argument_types(simulated):
    x = np.ones(4, np.float32)
    fixed = scale.specialize(x, np.float32(2))
    assert fixed.specialized and not scale.specialized
    assert [tuple(str(t) for t in sig) for sig in fixed.overloads] == [
        ("array(float32, 1d, C)", "float32")]
    fixed[1, 4](x, np.float32(3))
    assert (x == 3).all()
    # numba-cuda launches its one kernel and converts scalars to its types (a Python float,
    # an int, a NumPy float64): nothing new compiles
    compiles = gpureplace.stats()["kernel_compiles"]
    for value in (2.5, 4, np.float64(1.25)):
        x[:] = 1
        fixed[1, 4](x, value)
        assert (x == np.float32(value)).all()
    assert gpureplace.stats()["kernel_compiles"] == compiles
    with pytest.raises(LaunchError, match=r"specialized for \(array\(float32, 1d, C\), float32\)"):
        fixed[1, 4](np.ones(4), 2.0)                # an array of another dtype: refused
    with pytest.raises(LaunchError, match=r"specialized for"):
        fixed[1, 4](x, 1 + 2j)                      # a complex into a float32: refused
    with pytest.raises(LaunchError, match="missing"):
        scale.specialize(x)
    assert scale.specialize(x, np.float32(5)) is fixed          # one per argument types
    with pytest.raises(RuntimeError, match="Dispatcher already specialized.*by specialize"):
        fixed.specialize(x, np.float32(2))
    assert list(scale.specializations.values()) == [fixed]
    # numba-cuda: a kernel given its signatures in cuda.jit is specialized already
    signed = cuda.jit("void(float32[::1], float32)")(scale.py_func)
    assert signed.specialized
    with pytest.raises(RuntimeError, match="Dispatcher already specialized.*signatures"):
        signed.specialize(x, np.float32(2))


def test_numba_cuda_type_names_and_options_are_there():
    for name in ("float16", "float32", "float64", "int8", "int32", "uint64", "boolean",
                 "complex64", "void"):
        assert getattr(cuda, name) is getattr(__import__("numba").core.types, name)
    cuda.jit(lto=True)(lambda x: None)           # numba-cuda's option: accepted


def test_like_arrays_of_strided_views_keep_the_views_order(simulated):
    view = cuda.device_array((10, 12), np.float64, order="F")[::2, ::2]
    assert cuda.device_array_like(view).strides == (8, 40)      # NumPy's empty_like order='K'
    assert cuda.pinned_array_like(view).strides == (8, 40)
    row_view = cuda.device_array((10, 12), np.float64)[::2, ::2]
    assert cuda.device_array_like(row_view).strides == (48, 8)


def test_device_functions_have_ptx_too():
    @cuda.jit(device=True)
    def fma_one(a, b):
        return a * b + 1.0
    ptx = fma_one.inspect_ptx("(float32, float32)")
    assert ".func" in ptx and fma_one.inspect_asm("(float32, float32)") == ptx


def test_shared_memory_carveout_values():
    def f(x):
        pass
    for value, code in (("MaxL1", 0), ("maxshared", 100), ("default", -1), (25, 25)):
        assert cuda.jit(shared_memory_carveout=value)(f)._carveout == code
    with pytest.raises(ValueError, match="shared_memory_carveout"):
        cuda.jit(shared_memory_carveout=150)(f)
    with pytest.raises(ValueError, match="shared_memory_carveout"):
        cuda.jit(shared_memory_carveout="most")(f)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_shared_memory_carveout_is_set_on_the_function():
    import cupy as cp

    @cuda.jit(shared_memory_carveout="MaxShared")
    def fill(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = i
    x = cp.zeros(64, cp.int32)
    fill[1, 64](x)
    assert int(x[63]) == 63
    assert fill.get_regs_per_thread() and fill._function_attribute(
        None, "preferred_shared_memory_carveout") == {
            k: 100 for k in fill.overloads}


@cuda.jit
def _in_out(a, b, c):
    i = cuda.grid(1)
    if i < a.size:
        b[i] = a[i] * 2
        c[i] += a[i]
        a[i] = -1                         # the device copy only: a is In


def _check_transfer_hints():
    a = np.arange(10, dtype=np.float32)
    b = np.zeros(10, np.float32)
    c = np.ones(10, np.float32)
    _in_out[1, 16](cuda.In(a), cuda.Out(b), cuda.InOut(c))
    assert (a == np.arange(10)).all()
    assert (b == 2 * np.arange(10)).all() and (c == 1 + np.arange(10)).all()
    strided = np.zeros(20, np.float32)[::2]                    # copied back through its view
    _in_out[1, 16](cuda.In(a), cuda.Out(strided), cuda.InOut(c))
    assert (strided == 2 * np.arange(10)).all() and (c == 1 + 2 * np.arange(10)).all()
    with pytest.raises(arguments.ArgumentError,
                       match=r"argument 0 \('a'\) is In\(list\); cuda.In\(\) takes a NumPy array"):
        _in_out[1, 16](cuda.In([1.0]), b, c)
    with pytest.raises(arguments.ArgumentError, match=r"prepare: argument 1 \('b'\) is Out"):
        _in_out[1, 16].prepare(a, cuda.Out(b), c)
    assert repr(cuda.InOut(1)) == "cuda.InOut(1)"


def test_in_out_inout_hints_copy_around_a_launch_in_the_simulator(monkeypatch):
    """numba-cuda's cuda.In / Out / InOut around host arrays, under the simulator."""
    monkeypatch.setattr(settings, "backend", "simulator")
    _check_transfer_hints()


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_in_out_inout_hints_on_the_gpu():
    import cupy as cp
    _check_transfer_hints()
    a, b = np.arange(10, dtype=np.float32), np.zeros(10, np.float32)
    dev_c = cp.zeros(10, np.float32)
    s = cp.cuda.Stream(non_blocking=True)
    _in_out[1, 16, s](cuda.In(a), cuda.Out(b), cuda.InOut(dev_c))      # a device array: as is
    assert (b == 2 * a).all() and (cp.asnumpy(dev_c) == a).all()
    import gpureplace
    with pytest.raises(LaunchError, match="a CUDA graph cannot hold"):
        with gpureplace.capture():
            _in_out[1, 16](cuda.In(a), cuda.Out(b), dev_c)


def test_numba_cuda_call_forms_of_the_host_api_in_the_simulator(monkeypatch, capsys):
    """Forms numba-cuda code uses: NumPy integers as counts, inspect_types(file) and
    signature=, reshape / ravel refusing a copy."""
    import io

    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")

    @cuda.jit
    def ones(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = 1.0

    d = cuda.to_device(np.zeros(100))
    ones.forall(np.int64(100))(d)
    assert d.copy_to_host().sum() == 100
    assert len(cuda.to_device(np.zeros(8)).split(np.int64(2))) == 4
    sig = ones.signatures[0]
    buf = io.StringIO()
    assert ones.inspect_types(buf) is None and "ones" in buf.getvalue()
    assert "define" in ones.inspect_llvm(signature=sig)
    assert ones.inspect_types(signature=sig) == ones.inspect_types(sig)
    m = cuda.to_device(np.zeros((4, 4)))
    assert m[:, :2].reshape(4, 2).shape == (4, 2) and m.reshape(16).shape == (16,)
    for copying in (lambda: m[:, :2].reshape(8), lambda: m[:, :2].ravel(),
                    lambda: m.T.reshape(16)):
        with pytest.raises(NotImplementedError, match="operation requires copying"):
            copying()
    ones[1, 8](m[1].reshape(4))               # a view: the kernel's writes reach m
    assert m.copy_to_host()[1].tolist() == [1.0] * 4


def _stream_callbacks():
    import asyncio
    s = cuda.stream()
    x = cuda.to_device(np.arange(64, dtype=np.float32))
    scale[1, 64, s](x, 2.0)
    got = []
    s.add_callback(lambda stream, status, arg: got.append((stream, status, arg)), "after scale")
    s.synchronize()
    assert got == [(s, 0, "after scale")]

    async def waited():
        scale[1, 64, s](x, 0.5)
        return await s.async_done()
    assert asyncio.run(waited()) is s
    assert x.copy_to_host().tolist() == list(range(64))


def test_stream_callbacks_and_async_done_in_the_simulator(simulated):
    _stream_callbacks()


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_stream_callbacks_and_async_done_on_the_gpu():
    _stream_callbacks()
    assert cuda.runtime.get_version()[0] >= 12 and cuda.is_supported_version()
    assert cuda.cuda_error() is None


def test_numba_cudas_error_and_runtime_names(simulated, monkeypatch):
    from gpureplace import probe
    from gpureplace.errors import NoDeviceError
    assert cuda.CudaSupportError is NoDeviceError is cuda.cudadrv.error.CudaSupportError
    assert cuda.CudaDriverError is cuda.cudadrv.error.CudaDriverError
    monkeypatch.setattr(probe, "cupy_module", lambda: None)
    with pytest.raises(cuda.CudaSupportError, match="get_version"):
        cuda.runtime.get_version()
    monkeypatch.setattr(probe, "available", lambda: False)
    assert "no CUDA GPU" in cuda.cuda_error()
