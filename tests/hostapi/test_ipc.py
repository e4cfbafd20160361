"""CUDA IPC (``hostapi/ipc.py``): device memory shared with another process, as numba-cuda's
``get_ipc_handle`` / ``open_ipc_array`` share it.

CPU tests check what needs no GPU: handles pickle without their base, the simulator refuses IPC
by name, arguments are checked and named, and, with CuPy's and the driver's calls replaced, the
handle's offset from its allocation, the refusal to reopen, and open / close.  The GPU test
shares arrays (slices and foreign arrays too) with child processes started by 'spawn', as
numba-cuda's ``tests/cudapy/test_ipc.py`` does.
"""

import concurrent.futures
import multiprocessing as mp
import os
import pickle

import numpy as np
import pytest

from gpureplace import cuda, probe
from gpureplace.config import settings
from gpureplace.hostapi import ipc


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


def raw(seed):
    return bytes((seed + i) % 256 for i in range(64))


# --- handles pickle ---------------------------------------------------------------------------

def test_a_handle_pickles_its_bytes_size_offset_and_source_but_not_its_base():
    base = object()
    h = cuda.IpcHandle(base, raw(1), 80, {"pci_domain_id": 0, "pci_bus_id": 7,
                                          "pci_device_id": 0}, offset=512)
    back = pickle.loads(pickle.dumps(h))
    assert back.base is None and h.base is base
    assert back.handle.reserved == h.handle.reserved == raw(1)
    assert (back.size, back.offset, back.source_info) == (80, 512, h.source_info)
    assert back.handle == h.handle and bytes(back.handle) == raw(1)


def test_an_array_handle_pickles_its_layout():
    h = ipc.IpcArrayHandle(cuda.IpcHandle(object(), raw(2), 48),
                           {"shape": (2, 3), "strides": (8, 16), "dtype": np.dtype(np.float64)})
    back = pickle.loads(pickle.dumps(h))
    assert back._array_desc == h._array_desc
    assert back._ipc_handle.base is None and back._ipc_handle.handle.reserved == raw(2)


def test_handle_bytes_come_as_bytes_signed_ints_or_objects_holding_them():
    signed = tuple(b - 256 if b > 127 else b for b in raw(200))     # ctypes' c_byte values
    assert ipc.handle_bytes(signed) == raw(200)
    assert ipc.handle_bytes(bytearray(raw(3))) == raw(3)
    assert ipc.handle_bytes(cuda.IpcHandle(None, raw(4), 8)) == raw(4)
    assert ipc.handle_bytes(ipc.IpcMemHandle(raw(5))) == raw(5)


# --- the simulator ----------------------------------------------------------------------------

def test_the_simulator_refuses_ipc_by_name(simulated):
    d = cuda.to_device(np.arange(10))
    with pytest.raises(cuda.cudadrv.error.CudaSupportError, match="CUDA IPC.*simulator"):
        d.get_ipc_handle()
    with pytest.raises(RuntimeError, match="CUDA IPC.*simulator"):
        cuda.current_context().get_ipc_handle(d.gpu_data)
    with pytest.raises(RuntimeError, match="open_ipc_array: CUDA IPC.*simulator"):
        with cuda.open_ipc_array(raw(0), 10, np.intp):
            pass
    with pytest.raises(RuntimeError, match="CUDA IPC.*simulator"):
        cuda.IpcHandle(None, raw(0), 80).open(cuda.current_context())


def test_gpu_data_is_the_memory_of_the_elements(simulated):
    d = cuda.to_device(np.arange(10, dtype=np.int64))
    mem = d.gpu_data
    assert (mem.size, mem.owner) == (80, d) and mem.ptr == d.__cuda_array_interface__["data"][0]
    piece = d[3:8].gpu_data
    assert (piece.ptr - mem.ptr, piece.size) == (24, 40)
    backwards = d[8:2:-2].gpu_data                # elements 8, 6, 4: from 4's address up
    assert (backwards.ptr - mem.ptr, backwards.size) == (32, 40)
    assert int(mem.handle) == mem.device_pointer == mem.device_ctypes_pointer.value == mem.ptr
    assert mem.view(8, 16).ptr == mem.ptr + 8


def test_driver_copies_move_bytes_between_host_and_device_memory(simulated):
    d = cuda.to_device(np.arange(6, dtype=np.int32))
    out = np.zeros(4, np.int32)
    cuda.driver.device_to_host(out, d[2:].gpu_data, size=out.nbytes)
    np.testing.assert_equal(out, [2, 3, 4, 5])
    cuda.driver.host_to_device(d.gpu_data, np.array([9, 9], np.int32), size=8)
    np.testing.assert_equal(d.copy_to_host(), [9, 9, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="device_to_host\\(dst\\): 40 bytes do not fit"):
        cuda.driver.device_to_host(out, d.gpu_data, size=40)


# --- arguments --------------------------------------------------------------------------------

@pytest.mark.parametrize("handle, error, message", [
    (raw(0)[:63], ValueError, "open_ipc_array\\(handle\\): a CUDA IPC handle has 64 bytes, got 63"),
    ("x" * 64, TypeError, "open_ipc_array\\(handle\\): expected the 64 bytes"),
    (object(), TypeError, "open_ipc_array\\(handle\\): .*got object"),
    ([300] * 64, ValueError, "open_ipc_array\\(handle\\): the handle's values must be bytes"),
])
def test_open_ipc_array_names_a_bad_handle(simulated, handle, error, message):
    with pytest.raises(error, match=message):
        with cuda.open_ipc_array(handle, 10, np.intp):
            pass


def test_open_ipc_array_names_a_bad_layout(simulated):
    with pytest.raises(ValueError, match="open_ipc_array: strides must give one value per axis"):
        with cuda.open_ipc_array(raw(0), (2, 5), np.intp, strides=(8,)):
            pass
    with pytest.raises(TypeError, match="open_ipc_array: dtype 'no such' is not a NumPy dtype"):
        with cuda.open_ipc_array(raw(0), 10, "no such"):
            pass
    with pytest.raises(ValueError, match="open_ipc_array: shape \\(-1,\\) has a negative"):
        with cuda.open_ipc_array(raw(0), -1, np.intp):
            pass
    with pytest.raises(ValueError, match="open_ipc_array\\(offset\\): expected a byte offset"):
        with cuda.open_ipc_array(raw(0), 10, np.intp, offset=-8):
            pass


def test_open_array_refuses_an_array_larger_than_the_shared_memory():
    h = cuda.IpcHandle(None, raw(0), 40)
    with pytest.raises(ValueError, match="needs 80 bytes from offset 0; the shared memory has 40"):
        h.open_array(None, shape=10, dtype=np.int64)
    with pytest.raises(ValueError, match="needs 40 bytes from offset 8; the shared memory has 40"):
        h.open_array(None, shape=5, dtype=np.int64, offset=8)


def test_get_ipc_handle_names_what_is_not_memory():
    with pytest.raises(TypeError, match="get_ipc_handle\\(memory\\): expected device memory"):
        cuda.current_context().get_ipc_handle(np.arange(3).tolist())


def test_closing_an_unopened_handle_says_so():
    with pytest.raises(ValueError, match="IpcHandle not opened"):
        cuda.IpcHandle(None, raw(0), 8).close()


# --- the GPU path with CuPy's and the driver's calls replaced ---------------------------------

class FakeDevice:
    def __init__(self, devnum):
        self.id = devnum

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class FakeRuntime:
    class CUDARuntimeError(RuntimeError):
        pass

    def __init__(self, peer=True):
        self.calls, self.peer = [], peer

    def ipcGetMemHandle(self, ptr):
        self.calls.append(("get", ptr))
        return ptr.to_bytes(8, "little") * 8

    def ipcOpenMemHandle(self, handle, flags):
        self.calls.append(("open", handle, flags))
        return 0x7000_0000

    def ipcCloseMemHandle(self, ptr):
        self.calls.append(("close", ptr))

    def deviceSynchronize(self):
        pass

    def getDeviceProperties(self, devnum):
        return {"pciDomainID": 0, "pciBusID": 0x40 + devnum, "pciDeviceID": 0}

    def deviceCanAccessPeer(self, devnum, peer):
        return self.peer

    def memcpyPeer(self, dst, dst_dev, src, src_dev, size):
        self.calls.append(("memcpyPeer", dst, dst_dev, src, src_dev, size))

    def free(self, ptr):
        self.calls.append(("free", ptr))


class FakeLibcuda:
    """``cuMemGetAddressRange_v2``: allocations of 1 MiB from 0x5000_0000; ``status`` first."""

    def __init__(self, *statuses):
        self.statuses = list(statuses)

    def cuMemGetAddressRange_v2(self, start, size, ptr):
        if self.statuses:
            return self.statuses.pop(0)
        start._obj.value = ptr.value & ~0xFFFFF
        size._obj.value = 1 << 20
        return 0


@pytest.fixture
def fake_gpu(monkeypatch):
    runtime = FakeRuntime()

    class cuda_ns:          # noqa: N801 - cupy.cuda
        Device = FakeDevice

        @staticmethod
        def alloc(size):
            return ipc.DeviceMemory(0x9000_0000, size, device_id=0)

    cuda_ns.runtime = runtime

    class fake_cupy:        # noqa: N801
        cuda = cuda_ns

    monkeypatch.setattr(ipc, "simulated", lambda: False)
    monkeypatch.setattr(ipc, "cupy", lambda: fake_cupy)
    monkeypatch.setattr(probe, "libcuda", lambda: FakeLibcuda())
    monkeypatch.setattr(probe, "device_count", lambda: 2)
    return runtime


class Context:
    def __init__(self, devnum):
        self.device = FakeDevice(devnum)


def test_a_handle_names_the_allocation_and_the_memory_s_offset_in_it(fake_gpu):
    mem = ipc.DeviceMemory(0x5000_0000 + 0x300, 40, owner="array", device_id=1)
    h = ipc.context_ipc_handle(Context(0), mem)
    assert fake_gpu.calls == [("get", 0x5000_0000)]          # the allocation's start
    assert (h.offset, h.size, h.base) == (0x300, 40, mem)
    assert h.source_info == {"pci_domain_id": 0, "pci_bus_id": 0x41, "pci_device_id": 0}
    with pytest.raises(ValueError, match="opening IpcHandle from original process"):
        h.open(Context(0))
    with pytest.raises(ValueError, match="opening IpcHandle from original process"):
        pickle.loads(pickle.dumps(h)).open(Context(0))     # the bytes were made here


def test_another_process_maps_the_allocation_and_views_the_memory_at_its_offset(fake_gpu):
    source = {"pci_domain_id": 0, "pci_bus_id": 0x41, "pci_device_id": 0}
    h = pickle.loads(pickle.dumps(cuda.IpcHandle(None, raw(9), 40, source, offset=0x300)))
    mem = h.open(Context(0))
    assert fake_gpu.calls == [("open", raw(9), 1)]
    assert (mem.ptr, mem.size, mem.device_id) == (0x7000_0300, 40, 0)
    with pytest.raises(ValueError, match="IpcHandle is already opened"):
        h.open(Context(0))
    h.close()
    assert fake_gpu.calls[-1] == ("close", 0x7000_0000)      # the mapping, not the offset
    with pytest.raises(ValueError, match="IpcHandle not opened"):
        h.close()


def test_without_peer_access_the_memory_is_copied_through_the_source_device(fake_gpu):
    fake_gpu.peer = False
    source = {"pci_domain_id": 0, "pci_bus_id": 0x41, "pci_device_id": 0}
    h = cuda.IpcHandle(None, raw(10), 40, source, offset=0x300)
    mem = h.open(Context(0))
    assert fake_gpu.calls == [("open", raw(10), 1),
                              ("memcpyPeer", 0x9000_0000, 0, 0x7000_0300, 1, 40),
                              ("close", 0x7000_0000)]
    assert (mem.ptr, mem.size, mem.device_id) == (0x9000_0000, 40, 0)
    h.close()                                                # nothing left to unmap
    assert fake_gpu.calls[-1][0] == "close" and len(fake_gpu.calls) == 3


def test_a_handle_from_an_invisible_gpu_says_so(fake_gpu):
    h = cuda.IpcHandle(None, raw(11), 8, {"pci_domain_id": 3, "pci_bus_id": 0,
                                         "pci_device_id": 0})
    with pytest.raises(RuntimeError, match="not visible in this process"):
        h.open(Context(0))


def test_the_allocation_range_binds_a_context_when_the_thread_has_none(fake_gpu, monkeypatch):
    lib = FakeLibcuda(201)                          # CUDA_ERROR_INVALID_CONTEXT, then success
    monkeypatch.setattr(probe, "libcuda", lambda: lib)
    assert ipc.allocation_range(0x5001_2345) == (0x5000_0000, 1 << 20)
    assert fake_gpu.calls == [("free", 0)]
    monkeypatch.setattr(probe, "libcuda", lambda: FakeLibcuda(1, 1))
    with pytest.raises(cuda.cudadrv.error.CudaDriverError,
                       match="cuMemGetAddressRange\\(0x5001\\) failed with CUDA error 1"):
        ipc.allocation_range(0x5001)


# --- on the GPU: child processes ---------------------------------------------------------------

TIMEOUT = 120          # a spawned child imports gpureplace and starts CUDA


class ForeignArray:
    """Device memory of another library: only ``__cuda_array_interface__``."""

    def __init__(self, arr):
        self._arr = arr
        self.__cuda_array_interface__ = arr.__cuda_array_interface__


@cuda.jit
def _double(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2


def child_open_bytes(handle, size, offset, parent_pid):
    assert os.getpid() != parent_pid
    with cuda.open_ipc_array(handle, shape=size // 8, dtype=np.intp, offset=offset) as d:
        return d.copy_to_host()


def child_open_handle(handle, parent_pid):
    assert os.getpid() != parent_pid
    d = handle.open_array(cuda.current_context(), shape=handle.size // 8, dtype=np.intp)
    out = d.copy_to_host()
    handle.close()
    return out


def child_open_array_handle(handle, parent_pid):
    assert os.getpid() != parent_pid
    with handle as d:
        out = d.copy_to_host()
        with pytest.raises(ValueError, match="IpcHandle is already opened"):
            with handle:
                pass
        _double[1, 64](d)                           # the child writes the parent's memory
        cuda.synchronize()
    return out


def child_open_staged(handle, parent_pid):
    assert os.getpid() != parent_pid
    mem = handle.open_staged(cuda.devices.get_context())
    out = np.zeros(handle.size // 8, np.intp)
    cuda.driver.device_to_host(out, mem, size=handle.size)
    handle.close()
    return out


@pytest.fixture(scope="module")
def children():
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as exe:
        yield exe


def variants():
    for index in (None, slice(3, None), slice(3, 8), slice(None, 8), slice(None, None, -2)):
        for foreign in (False, True):
            yield index, foreign


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_child_processes_see_and_write_the_parent_s_arrays(children):
    pid = os.getpid()
    base = cuda.to_device(np.arange(10, dtype=np.intp))
    ipch = cuda.current_context().get_ipc_handle(base.gpu_data)
    got = children.submit(child_open_bytes, ipch.handle.reserved, ipch.size, ipch.offset,
                          pid).result(TIMEOUT)
    np.testing.assert_equal(got, np.arange(10))
    with pytest.raises(ValueError, match="original process"):
        pickle.loads(pickle.dumps(ipch)).open(cuda.current_context())
    got = children.submit(child_open_staged, ipch, pid).result(TIMEOUT)
    np.testing.assert_equal(got, np.arange(10))

    for index, foreign in variants():
        whole = cuda.to_device(np.arange(10, dtype=np.intp))
        d = whole if index is None else whole[index]
        if foreign:
            d = cuda.as_cuda_array(ForeignArray(d))
        expect = d.copy_to_host()
        what = f"index={index}, foreign={foreign}"

        ipch = cuda.current_context().get_ipc_handle(d.gpu_data)
        back = pickle.loads(pickle.dumps(ipch))
        assert back.base is None and (back.size, back.offset) == (ipch.size, ipch.offset)
        got = children.submit(child_open_handle, ipch, pid).result(TIMEOUT)
        first = (d.gpu_data.ptr - whole.gpu_data.ptr) // 8      # the memory, in address order
        np.testing.assert_equal(got, np.arange(10)[first:first + ipch.size // 8], err_msg=what)

        got = children.submit(child_open_array_handle, d.get_ipc_handle(), pid).result(TIMEOUT)
        np.testing.assert_equal(got, expect, err_msg=what)
        np.testing.assert_equal(d.copy_to_host(), expect * 2, err_msg=what)
