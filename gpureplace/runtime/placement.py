"""Which device an argument's memory is on, and the launch's refusal of one on another device.

A kernel runs on the current device (``cuda.select_device``, ``with cuda.gpus[i]:``,
``cupy.cuda.Device(i)``, torch's current device) and reads arrays through plain pointers: an
array allocated on another GPU would be read through peer mappings that may not exist (an
illegal address that poisons the context) or, where they do, slowly and silently.  So a launch
refuses such an argument before anything launches, naming it and saying what to do; it does not
copy (a copy per launch would hide a mistake and cost a transfer every time).  Managed memory and
host memory the GPU can address (``cuda.mapped_array``, pinned) are reachable from every device
and pass.

Only a process that sees more than one GPU checks: with one, every device array is on it.
"""

from __future__ import annotations

from .. import probe
from .arguments import ArgumentError, VectorArray, cupy_handler, handler_of, torch_handler

#: ``__dlpack_device__`` device types (DLPack's DLDeviceType): CUDA device memory; managed and
#: host memory pass.
_DL_CUDA = 2


def multi_gpu() -> bool:
    """Whether this process sees more than one GPU (the checks below are skipped otherwise)."""
    return probe.device_count() > 1


def _pointer_device(ptr):
    """The device of device memory at ``ptr``; None for managed or host memory (or unknown)."""
    if not ptr:
        return None
    try:
        attrs = probe.cupy_module().cuda.runtime.pointerGetAttributes(ptr)
    except Exception:                      # not memory CUDA knows: the launch will say so
        return None
    return attrs.device if attrs.type == 2 else None       # cudaMemoryTypeDevice


def _leaves(value):
    """The values inside ``value``: itself, or the arrays of a tuple or a vector view."""
    if isinstance(value, VectorArray):
        yield from _leaves(value.array)
    elif isinstance(value, tuple):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _device(value):
    """The device of the device memory one argument value holds, or None (no device memory)."""
    handler = handler_of(value)
    if handler is cupy_handler:
        return value.data.device_id if value.size else None
    if handler is torch_handler:
        return value.device.index if value.is_cuda else None
    if hasattr(value, "__cuda_array_interface__"):
        return _pointer_device(value.__cuda_array_interface__["data"][0])
    if hasattr(value, "__dlpack_device__") and hasattr(value, "__dlpack__"):
        kind, dev = value.__dlpack_device__()
        return int(dev) if int(kind) == _DL_CUDA else None
    return None


def elsewhere(value, dev):
    """The device other than ``dev`` that ``value``'s memory is on, or None."""
    for leaf in _leaves(value):
        d = _device(leaf)
        if d is None or d == dev:
            continue
        # a CuPy array's allocation device: managed memory (cupy.cuda.malloc_managed) is
        # reachable from every device
        if handler_of(leaf) is cupy_handler and _pointer_device(leaf.data.ptr) in (None, dev):
            continue
        return d
    return None


def check_devices(kernel, args, dev):
    """Refuse, naming it, an argument of ``kernel``'s launch on device ``dev`` whose memory is on
    another device (called only where :func:`multi_gpu`)."""
    for i, a in enumerate(args):
        other = elsewhere(a, dev)
        if other is not None:
            names = list(kernel._pysig.parameters)
            name = names[i] if i < len(names) else i
            raise ArgumentError(
                f"{kernel.__qualname__}: argument {i} ({name!r}) is on device {other}, but the "
                f"launch is on device {dev} (the current device), and a kernel reads the memory "
                f"of the device it runs on: launch it under `with cuda.gpus[{other}]:` (or "
                f"cupy.cuda.Device({other})), or copy the array to device {dev} first "
                f"(cupy.asarray(a) under `with cupy.cuda.Device({dev}):`)")


def fast_check(v, handler):
    """The fast launch's inline test (binder.py) that argument ``{v}`` is on device ``DEV``, as
    a condition true when it is *not* (then the general path decides and says why); None where
    the general path's check is needed."""
    if handler is cupy_handler:
        return f"{v}.data.device_id != DEV"
    if handler is torch_handler:
        return f"{v}.device.index != DEV"
    return None
