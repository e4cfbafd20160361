"""Dynamic shared memory over what a block can have on the device is refused by the launch,
naming the kernel, the bytes asked and the limit, on both backends (before: the simulator ran
it, the GPU answered a bare CUDA_ERROR_INVALID_VALUE); with the static shared arrays of the
specialisation counted where the driver says their size -- and in the simulator, where ptxas
(or the PTX's declarations) says it (before: the simulator left them out and ran the launch)."""

import types

import numpy as np
import pytest

from gpureplace import CompileError, LaunchError, cuda, probe, simulator
from gpureplace.compiler import toolchain
from gpureplace.config import settings
from gpureplace.simulator import runner

from test_launch_path import FakeLoaded, fake_gpu  # noqa: F401 - the fixture


def _kernel():
    @cuda.jit
    def dsm(o):
        s = cuda.shared.array(0, np.float32)
        s[0] = 1
        o[0] = s[0]
    return dsm


def _device_out():
    from test_binder import ndarray
    return ndarray((1,), np.float32, ptr=0x5000)


def test_the_simulator_refuses_more_than_an_sm_90_block_has(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    o, dsm = np.zeros(1, np.float32), _kernel()
    with pytest.raises(LaunchError, match=r"dsm\[1, 1, 0, 1000000000\]: 1,000,000,000 bytes of "
                                          r"dynamic shared memory is more than the 232,448 "
                                          r"bytes \(227 KiB\) a block can have on sm_90"):
        dsm[1, 1, 0, 10**9](o)
    assert o[0] == 0
    dsm[1, 1, 0, 227 * 1024](o)                       # the limit itself: runs
    assert o[0] == 1


def test_the_gpu_path_refuses_by_the_current_devices_architecture(fake_gpu, monkeypatch):  # noqa: F811
    o, dsm = _device_out(), _kernel()
    with pytest.raises(LaunchError, match=r"dsm\[1, 1, 0, 1000000000\]: .* 232,448 bytes "
                                          r"\(227 KiB\) a block can have on sm_90"):
        dsm[1, 1, 0, 10**9](o)
    dsm[1, 1, 0, 100_000](o)
    assert fake_gpu[0].calls[-1][2] == 100_000
    monkeypatch.setattr(probe, "arch_of", lambda d: "sm_75")     # 64 KiB there
    with pytest.raises(LaunchError, match=r"100,001 bytes .* 65,536 bytes \(64 KiB\) a block "
                                          r"can have on sm_75"):
        dsm[1, 1, 0, 100_001](o)                      # (another configuration: checked anew)
    assert len(fake_gpu[0].calls) == 1


def test_static_shared_arrays_count_where_the_driver_says_their_size(fake_gpu, monkeypatch):  # noqa: F811
    driver = types.SimpleNamespace(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES=1,
                                   funcGetAttribute=lambda attr, fn: 40_000)
    monkeypatch.setattr(probe, "cupy_module",
                        lambda: types.SimpleNamespace(cuda=types.SimpleNamespace(driver=driver)))
    o, dsm = _device_out(), _kernel()
    dsm[1, 1, 0, 150_000](o)                          # 190,000 in all: fits
    with pytest.raises(LaunchError, match=r"200,000 bytes of dynamic shared memory with 40,000 "
                                          r"bytes of static shared arrays is more than the "
                                          r"232,448 bytes"):
        dsm[1, 1, 0, 200_000](o)
    assert len(fake_gpu[0].calls) == 1


def _static_kernel():
    @cuda.jit
    def sdsm(o):
        s = cuda.shared.array(8192, np.float32)        # 32 KiB of static shared memory
        d = cuda.shared.array(0, np.float32)
        i = cuda.threadIdx.x
        s[i] = i
        d[i] = 2 * i
        cuda.syncthreads()
        o[i] = s[i] + d[i]
    return sdsm


def _refusal(k, shared, static=32_768):
    return (f"{k.__qualname__}[(1, 1, 1), (32, 1, 1), 0, {shared}]: {shared:,} bytes of dynamic "
            f"shared memory with {static:,} bytes of static shared arrays is more than the "
            f"232,448 bytes (227 KiB) a block can have on sm_90; give the launch's fourth value "
            f"(bytes of dynamic shared memory) at most {232_448 - static}, and keep larger data "
            f"in global memory")


def test_the_simulator_counts_the_static_shared_arrays_as_the_gpu_does(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    o, sdsm = np.full(32, -1, np.float32), _static_kernel()
    with pytest.raises(LaunchError) as refused:
        sdsm[1, 32, 0, 200 * 1024](o)                 # 200 KiB + 32 KiB > 227 KiB
    assert str(refused.value) == _refusal(sdsm, 200 * 1024)
    assert (o == -1).all()                            # refused before anything ran
    with pytest.raises(LaunchError) as refused:       # the simulator's own entry too
        simulator.run(sdsm, 1, 32, o, shared=199_681)
    assert str(refused.value) == _refusal(sdsm, 199_681)
    assert (o == -1).all()
    sdsm[1, 32, 0, 199_680](o)                        # the limit itself: runs
    np.testing.assert_array_equal(o, 3 * np.arange(32, dtype=np.float32))


def test_the_simulator_refuses_with_the_gpu_paths_message(fake_gpu, monkeypatch):  # noqa: F811
    if toolchain.find_tool("ptxas") is None:
        pytest.skip("needs ptxas: the driver's shared_size_bytes is its figure")
    driver = types.SimpleNamespace(
        CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES=1,
        funcGetAttribute=lambda attr, fn: toolchain.resources(
            fake_gpu[-1].spec.ptx, fake_gpu[-1].spec.name)["shared_size_bytes"])
    monkeypatch.setattr(probe, "cupy_module",
                        lambda: types.SimpleNamespace(cuda=types.SimpleNamespace(driver=driver)))
    from test_binder import ndarray
    with pytest.raises(LaunchError) as on_gpu:
        _static_kernel()[1, 32, 0, 200 * 1024](ndarray((32,), np.float32, ptr=0x5000))
    monkeypatch.setattr(settings, "backend", "simulator")
    with pytest.raises(LaunchError) as simulated:
        _static_kernel()[1, 32, 0, 200 * 1024](np.zeros(32, np.float32))
    assert str(simulated.value) == str(on_gpu.value) == _refusal(_static_kernel(), 200 * 1024)


def test_the_static_size_is_worked_out_once_a_specialisation_without_ptxas_too(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    asked = []
    monkeypatch.setattr(toolchain, "resources", lambda ptx, entry=None: asked.append(entry))
    o, sdsm = np.zeros(32, np.float32), _static_kernel()
    sdsm[1, 32, 0, 128](o)                            # no big dynamic size: nothing asked
    assert asked == []
    for _ in range(2):                                # (no ptxas: the PTX's declarations)
        with pytest.raises(LaunchError) as refused:
            sdsm[1, 32, 0, 200 * 1024](o)
        assert str(refused.value) == _refusal(sdsm, 200 * 1024)
    sdsm[1, 32, 0, 199_680](o)
    np.testing.assert_array_equal(o, 3 * np.arange(32, dtype=np.float32))
    assert len(asked) == 1


def test_the_ptx_declarations_give_ptxas_figure():
    if toolchain.find_tool("ptxas") is None:
        pytest.skip("needs ptxas")

    @cuda.jit(device=True)
    def row(i):
        t = cuda.shared.array((4, 100), np.float64)     # 8-byte aligned, after a 3-byte array
        t[0, i] = i
        cuda.syncthreads()
        return t[0, i]

    @cuda.jit
    def mixed(o):
        s = cuda.shared.array(1000, np.float32)
        c = cuda.shared.array(3, np.int8)
        d = cuda.shared.array(0, np.float32)
        i = cuda.threadIdx.x
        s[i] = i
        c[i % 3] = 1
        d[i] = i
        cuda.syncthreads()
        o[i] = s[i] + row(i) + c[i % 3] + d[i]
    spec = mixed.compile("void(float32[::1])")
    found = toolchain.resources(spec.ptx, spec.name)["shared_size_bytes"]
    assert found == toolchain.ptx_static_shared(spec.ptx) == runner.static_shared_bytes(spec)
    assert found > 4000 + 3 + 3200                    # (the padding counted)

    @cuda.jit
    def plain(o):
        o[0] = 1
    assert toolchain.ptx_static_shared(plain.compile("void(float32[::1])").ptx) == 0


def test_static_shared_arrays_over_the_limit_are_refused_as_on_the_gpu(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    o = np.full(32, -1, np.float32)

    @cuda.jit
    def big(o):
        s = cuda.shared.array(60000, np.float32)        # 240 KB of static shared memory
        i = cuda.threadIdx.x
        s[i] = i
        o[i] = s[i]
    with pytest.raises(CompileError, match=r"cuda.shared.array of 60,000 float32, 234.4 KiB, is "
                                           r"more than the 48 KiB of static shared memory"):
        big[1, 32](o)
    assert (o == -1).all()


@pytest.mark.gpu
def test_too_much_dynamic_shared_memory_on_the_device():
    o, dsm = cuda.to_device(np.zeros(1, np.float32)), _kernel()
    with pytest.raises(LaunchError, match=r"bytes of dynamic shared memory is more than"):
        dsm[1, 1, 0, 10**9](o)
    dsm[1, 1, 0, 64 * 1024](o)
    assert o.copy_to_host()[0] == 1


@pytest.mark.gpu
def test_static_and_dynamic_past_48_kib_run_on_the_device():
    """40 KiB of static arrays and 16 KiB of dynamic shared memory: 56 KiB, past the 48 KiB a
    block has without asking, though the dynamic bytes alone are under it.  The launch raises
    the function's limit first (the driver refused it before: CUDA_ERROR_INVALID_VALUE), on the
    general path and again through the fast one; over the device's limit it is refused by name."""
    @cuda.jit
    def both(out):
        s = cuda.shared.array(10240, np.float32)           # 40 KiB
        d = cuda.shared.array(0, np.float32)
        i = cuda.threadIdx.x
        s[i * 40] = i
        d[i * 16] = 2 * i
        cuda.syncthreads()
        out[i] = s[i * 40] + d[i * 16]

    want = 3 * np.arange(256, dtype=np.float32)
    for _ in range(3):                                     # the first launch, then cached ones
        out = cuda.to_device(np.zeros(256, np.float32))
        both[1, 256, 0, 16 * 1024](out)
        np.testing.assert_array_equal(out.copy_to_host(), want)
    out = cuda.to_device(np.zeros(256, np.float32))
    both[1, 64, 0, 4 * 1024](out)                          # under 48 KiB together: as before
    np.testing.assert_array_equal(out.copy_to_host()[:64], want[:64])
    with pytest.raises(LaunchError, match=r"with 40,960 bytes of static shared arrays"):
        both[1, 256, 0, 200 * 1024](out)


def test_the_simulator_refuses_at_prepare_and_capture_as_the_gpu_does(monkeypatch):
    """A prepared launch and a graph capture bind their launch when they are made: the GPU path
    refuses an over-limit launch there, and so does the simulator (it refused it only when the
    prepared launch was called or the graph replayed).  (A device array, as the GPU takes in
    both: a host array would be refused first, by name.)"""
    import gpureplace
    monkeypatch.setattr(settings, "backend", "simulator")
    o, sdsm = cuda.to_device(np.full(32, -1, np.float32)), _static_kernel()
    with pytest.raises(LaunchError) as refused:
        sdsm[1, 32, 0, 200 * 1024].prepare(o)
    assert str(refused.value) == _refusal(sdsm, 200 * 1024)
    with pytest.raises(LaunchError) as refused:
        with gpureplace.capture():
            sdsm[1, 32, 0, 200 * 1024](o)
    assert str(refused.value) == _refusal(sdsm, 200 * 1024)
    with pytest.raises(LaunchError) as refused:
        gpureplace.graph(lambda a: sdsm[1, 32, 0, 200 * 1024](a), o)
    assert str(refused.value) == _refusal(sdsm, 200 * 1024)
    assert (o.copy_to_host() == -1).all()             # nothing ran
    prepared = sdsm[1, 32, 0, 199_680].prepare(o)     # the limit itself: binds, runs when called
    assert (o.copy_to_host() == -1).all()
    prepared()
    np.testing.assert_array_equal(o.copy_to_host(), 3 * np.arange(32, dtype=np.float32))


def test_the_simulator_binds_a_prepared_launchs_arguments_when_it_is_made(monkeypatch):
    """A bad argument, a declared signature that does not match and a record are refused by
    ``prepare()`` in the simulator, as on the GPU, not at the first call.  (The arrays are
    device arrays, as prepare() takes: a host array would be refused first, by name.)"""
    from gpureplace.runtime.arguments import ArgumentError
    monkeypatch.setattr(settings, "backend", "simulator")
    o = cuda.to_device(np.zeros(4, np.float32))
    with pytest.raises(ArgumentError, match=r"dsm: argument 0 \('o'\) has type builtins.str"):
        _kernel()[1, 1].prepare("four")

    @cuda.jit("void(float64[:])")
    def declared(a):
        a[0] = 1

    with pytest.raises(Exception, match=r"declared|signature") as refused:
        declared[1, 1].prepare(o)
    assert "declared" in str(refused.value)
    assert "host NumPy array" not in str(refused.value)   # (the signature's refusal, reached)
    assert o.copy_to_host()[0] == 0
    rec = np.zeros(1, np.dtype([("a", np.float32), ("b", np.int32)]))

    @cuda.jit
    def of_record(r, out):
        out[0] = r.a

    with pytest.raises(LaunchError, match=r"of_record: prepare\(\) cannot bind a record "
                                          r"argument"):
        of_record[1, 1].prepare(rec[0], o)
