"""Device arrays captured as kernel globals (issue 16), as numba-cuda captures them: used where
they are (the address is in the code, reads and writes reach the array), never written to the
disk cache (the address means nothing in another process), and rebinding the name recompiles
exactly the kernels that read it."""

import numpy as np
import pytest
from numba.core import types as nbt

from conftest import assemble
from gpureplace import cuda
from gpureplace.compiler import kernel_cache


class _DeviceArray:
    """A device array known only by its ``__cuda_array_interface__`` (a made-up address)."""

    def __init__(self, address, shape, dtype=np.float32, readonly=False):
        self.__cuda_array_interface__ = {
            "shape": shape, "typestr": np.dtype(dtype).str, "data": (address, readonly),
            "strides": None, "version": 3}


def _kernels(ns):
    exec("def reads(out):\n    out[0] = TABLE[1] + TABLE.shape[0]\n"
         "def writes(out):\n    TABLE[0] = out[0]\n"
         "def other(out):\n    out[0] = 1.0\n", ns)
    return cuda.jit(ns["reads"]), cuda.jit(ns["writes"]), cuda.jit(ns["other"])


SIG = (nbt.float32[::1],)


def test_the_address_is_in_the_code_and_a_rebinding_recompiles_only_readers():
    ns = {"cuda": cuda, "TABLE": _DeviceArray(0x7F0000001000, (8,))}
    reads, writes, other = _kernels(ns)
    spec, ospec = reads.compile(SIG), other.compile(SIG)
    ptx = reads.inspect_asm(SIG)
    assert str(0x7F0000001000 + 4) in ptx or hex(0x7F0000001000 + 4)[2:] in ptx.lower()
    assemble(ptx)
    assemble(writes.inspect_asm(SIG))
    assert kernel_cache.describe_for_disk(spec.compiled) is None     # never on disk
    ns["TABLE"] = _DeviceArray(0x7F0000002000, (16,))
    import gpureplace
    gpureplace.refresh()
    assert reads.compile(SIG) is not spec and other.compile(SIG) is ospec
    assert str(0x7F0000002000 + 4) in reads.inspect_asm(SIG) or \
        hex(0x7F0000002000 + 4)[2:] in reads.inspect_asm(SIG).lower()


def test_a_read_only_device_array_cannot_be_written():
    from gpureplace import CompileError
    ns = {"cuda": cuda, "TABLE": _DeviceArray(0x1000, (4,), readonly=True)}
    reads, writes, _ = _kernels(ns)
    reads.compile(SIG)
    with pytest.raises(CompileError):
        writes.compile(SIG)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_a_cupy_global_is_read_and_written_where_it_is():
    import cupy as cp
    ns = {"cuda": cuda, "TABLE": cp.arange(8, dtype=cp.float32)}
    reads, writes, _ = _kernels(ns)
    out = cp.zeros(1, cp.float32)
    reads[1, 1](out)
    assert out.get()[0] == 1 + 8
    out[0] = 42
    writes[1, 1](out)
    assert ns["TABLE"].get()[0] == 42
    ns["TABLE"][1] = 100              # changed in place: the same memory, no recompile needed
    reads[1, 1](out)
    assert out.get()[0] == 100 + 8


def test_the_simulators_device_arrays_are_globals_used_where_they_are(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    ns = {"cuda": cuda, "TABLE": cuda.to_device(np.arange(8, dtype=np.float32))}
    reads, writes, _ = _kernels(ns)
    out = np.zeros(1, np.float32)
    reads[1, 1](out)
    assert out[0] == 1 + 8
    out[0] = 42
    writes[1, 1](out)
    assert ns["TABLE"].copy_to_host()[0] == 42
