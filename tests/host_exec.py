"""Run a compiled device function's LLVM IR on this machine's CPU (tests only).

The simulator runs a kernel's *Python* source, so a mistake in how the compiler lowers an
operation (a range's count, an integer division's rounding, a conversion) passes every CPU test
and shows only on a GPU.  For device functions of scalars that call nothing target-specific (device
functions they call are linked in), the IR our front end made before linking is plain LLVM: here it is given this machine's triple and
data layout, compiled by llvmlite's MCJIT and called through ctypes with Numba's calling
convention (``status = f(&result, args...)``; a non-zero status is a raised exception).  The
results are then compared with Python's in CI.

``host_function(devfn, "int64(int64, int64)")`` returns a Python callable; calling it raises
``DeviceRaised`` where the device function raises.
"""

from __future__ import annotations

import ctypes
import re

import llvmlite.binding as llvm
from numba.core import types

_CTYPES = {types.int8: ctypes.c_int8, types.int16: ctypes.c_int16, types.int32: ctypes.c_int32,
           types.int64: ctypes.c_int64, types.uint8: ctypes.c_uint8,
           types.uint16: ctypes.c_uint16, types.uint32: ctypes.c_uint32,
           types.uint64: ctypes.c_uint64, types.float32: ctypes.c_float,
           types.float64: ctypes.c_double, types.boolean: ctypes.c_bool}
_TARGET_LINES = re.compile(r"^target (?:triple|datalayout) = .*$", re.M)
_engines = []          # kept alive: a function's address is valid while its engine lives


class DeviceRaised(Exception):
    """The device function raised (Numba's status code was not 0)."""


def _ctype(ty):
    try:
        return _CTYPES[ty]
    except KeyError:
        raise TypeError(f"host_function: {ty} is not a scalar type it can pass") from None


def host_function(devfn, sig):
    """``devfn`` compiled for ``sig`` (a device function of scalars), as a host callable."""
    cf = devfn.compile(sig)
    texts = [t for c in cf.closure() for t in c.ir_texts()]      # it and what it calls
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod, *others = (llvm.parse_assembly(_TARGET_LINES.sub("", t)) for t in texts)
    for other in others:
        mod.link_in(other)
    mod.verify()
    gpu = [f.name for f in mod.functions if f.is_declaration and not f.name.startswith("llvm.")
           or f.name.startswith("llvm.nvvm.")]
    if gpu or re.search(r"addrspace", str(mod)):
        raise TypeError(f"host_function: {cf.qualname} needs the GPU target "
                        f"({', '.join(gpu) or 'address spaces'})")
    tm = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    _engines.append(engine)
    restype = _ctype(cf.restype)
    proto = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(restype),
                             *[_ctype(t) for t in cf.argtypes])
    fn = proto(engine.get_function_address(cf.mangled_name))

    def call(*args):
        result = restype()
        status = fn(ctypes.byref(result), *args)
        if status != 0:
            raise DeviceRaised(f"{cf.qualname}{tuple(args)} raised (status {status})")
        return result.value

    return call
