"""Host arrays around one launch: copied into device memory before it and back after it.

Two ways in: numba-cuda's hints (``cuda.In`` / ``Out`` / ``InOut``, ``runtime/hints.py``) and a
plain host NumPy array given to a kernel, which numba-cuda treats as ``InOut`` with a performance
warning (``settings.host_arrays`` says whether to warn, copy quietly or refuse).  The device copy
is raw device memory described by ``__cuda_array_interface__`` (a ``DeviceCopy``), not a CuPy
array, so every dtype a kernel takes travels, records included; the copies and the kernel go on
the launch's stream and the launch waits for the copies back.  Only the general launch path
comes here: the generated fast path never sees a host array.
"""

from __future__ import annotations

import warnings

import numpy as np
from numba.core.errors import NumbaPerformanceWarning

from .. import probe
from ..compiler.abi import contiguous_strides
from ..errors import PerformanceWarning, user_stacklevel
from . import arguments


class HostArrayWarning(PerformanceWarning, NumbaPerformanceWarning):
    """A host NumPy array was copied to the device and back around a launch."""


class DeviceCopy:
    """Device memory holding one host array for one launch."""

    __slots__ = ("host", "staging", "mem", "copy_out")

    def __init__(self, host, copy_in, copy_out, stream):
        # One memcpy each way needs contiguous host memory: a strided view goes through a
        # contiguous staging copy (written back into the view afterwards).
        contiguous = host.flags.c_contiguous or host.flags.f_contiguous
        staging = host if contiguous else np.ascontiguousarray(host)
        self.host, self.staging, self.copy_out = host, staging, copy_out
        cp = probe.cupy_module()
        self.mem = cp.cuda.alloc(staging.nbytes) if staging.nbytes else None
        if copy_in and self.mem is not None:
            rt = cp.cuda.runtime
            rt.memcpyAsync(self.mem.ptr, staging.ctypes.data, staging.nbytes,
                           rt.memcpyHostToDevice, stream)

    @property
    def ptr(self):
        return 0 if self.mem is None else self.mem.ptr

    @property
    def __cuda_array_interface__(self):
        s = self.staging
        return {"shape": s.shape, "typestr": s.dtype.str, "descr": s.dtype.descr,
                "data": (self.ptr, False), "version": 3,
                "strides": None if s.flags.c_contiguous else s.strides}


def _device_copy_argument(c):
    s = c.staging
    return arguments.array_argument(s.dtype, c.ptr, s.shape, s.strides)


arguments.register_handler(DeviceCopy, _device_copy_argument)


def host_array_argument(a):
    """(key, values) a host array will launch with once copied: its layout as the copy has it
    (a strided view is copied into C order), at address 0."""
    if a.flags.c_contiguous or a.flags.f_contiguous:
        return arguments.array_argument(a.dtype, 0, a.shape, a.strides)
    return arguments.array_argument(a.dtype, 0, a.shape,
                                    contiguous_strides(a.shape, a.dtype.itemsize))


def copy_back(copies, stream):
    """Write the device copies that go back into their host arrays; returns once they have
    (and so once the kernel before them on ``stream`` has finished)."""
    rt = probe.cupy_module().cuda.runtime
    for c in copies:
        if c.copy_out and c.mem is not None:
            rt.memcpyAsync(c.staging.ctypes.data, c.mem.ptr, c.staging.nbytes,
                           rt.memcpyDeviceToHost, stream)
    rt.streamSynchronize(stream)
    for c in copies:
        if c.copy_out and c.staging is not c.host:
            c.host[...] = c.staging


def is_host_array(a):
    """A NumPy array in host memory that the GPU cannot address (a mapped array can: it has a
    ``__cuda_array_interface__``; so can the simulator's device arrays, which have
    ``copy_to_host``)."""
    return isinstance(a, np.ndarray) and not hasattr(a, "__cuda_array_interface__") and \
        not hasattr(a, "copy_to_host")


def holds_host_array(a):
    """A host array, or a tuple holding one (at any depth)."""
    if isinstance(a, tuple):
        return any(holds_host_array(x) for x in a)
    return is_host_array(a)


def stage_tuple(tup, copy, stream, copies):
    """``tup`` with each host array in it (at any depth) replaced by a device copy (appended to
    ``copies``); a namedtuple keeps its class."""
    items = []
    for x in tup:
        if isinstance(x, tuple):
            items.append(stage_tuple(x, copy, stream, copies))
        elif is_host_array(x):
            c = DeviceCopy(x, True, copy and x.flags.writeable, stream)
            copies.append(c)
            items.append(c)
        else:
            items.append(x)
    return type(tup)(*items) if hasattr(type(tup), "_fields") else tuple(items)


def host_array_names(args, names):
    """``"0 ('x'), 2 ('out')"``: the host arrays among ``args``."""
    return ", ".join(f"{i} ({names[i]!r})" if i < len(names) else str(i)
                     for i, a in enumerate(args) if holds_host_array(a))


def refuse_host_arrays(kernel, args, names, simulated):
    where = " (the simulator's device arrays come from cuda.to_device / cuda.device_array)" \
        if simulated else ""
    raise arguments.ArgumentError(
        f"{kernel}: argument {host_array_names(args, names)} is a host NumPy array, which "
        f"settings.host_arrays = 'error' refuses (GPUREPLACE_HOST_ARRAYS, or %config "
        f"GPUReplace.host_arrays): pass device arrays (cupy.asarray(a), or "
        f"cuda.to_device(a)){where}")


def warn_host_arrays(kernel, args, names):
    """numba-cuda's performance warning for host arrays given to a launch, naming them and the
    user's line that launched."""
    which = host_array_names(args, names)
    warnings.warn(HostArrayWarning(
        f"{kernel}: argument {which} is a host NumPy array. Host array used in CUDA kernel will "
        f"incur copy overhead to and from the device: it is copied before the launch and back "
        f"after it, and the launch waits for the kernel. Pass device arrays (cupy.asarray(a), "
        f"cuda.to_device(a)) to keep data on the GPU, or set GPUREPLACE_HOST_ARRAYS=copy to "
        f"copy without this warning (=error to refuse host arrays)."),
        stacklevel=user_stacklevel())


