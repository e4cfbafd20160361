"""Streams and events (numba-cuda's ``cuda.stream()``, ``cuda.event()``), wrapping CuPy's (the
``Stream`` class is ``runtime/streams.py``'s: launches wait on streams too)."""

from __future__ import annotations


from ..errors import CudaDriverError, LaunchError
from ..runtime.launch import stream_ptr
from ..runtime.streams import (Stream, external_cupy_stream, protocol_handle,  # noqa: F401
                               wait_for_interface_stream)
from .common import cupy, sim, simulated


def checked_stream(stream, what):
    """``stream`` as the host API's ``what`` (``to_device``, ``copy_to_host`` ...) takes it: 0,
    None, an int handle or a stream object (gpureplace's, the simulator's, CuPy's, PyTorch's,
    or any speaking the CUDA stream protocol, ``__cuda_stream__``, as cuda.core's); anything
    else is refused as a launch refuses it (``k[1, 1, "x"]``), with ``what`` named, rather than
    kept on an array or ignored (the simulator runs everything at once, so it would never
    notice)."""
    if stream is None or type(stream) is int:
        return stream
    try:
        stream_handle(stream)               # (checks only, for anything but None: no CUDA)
    except LaunchError as exc:
        raise LaunchError(f"{what}: {exc}") from None
    return stream


def stream_handle(stream):
    """The ``cudaStream_t`` (an int) of ``stream``, a stream object or an int handle (None:
    the current stream's); LaunchError for anything else."""
    handle = protocol_handle(stream)
    return stream_ptr(stream) if handle is None else handle


def cupy_stream(stream):
    """CuPy's stream for numba-cuda's ``stream`` argument (0 or None: the current stream)."""
    if stream is None or (isinstance(stream, int) and not isinstance(stream, bool)
                          and stream == 0):
        return None
    if isinstance(stream, Stream):
        return stream.cupy
    if getattr(stream, "simulated", False):          # a simulator stream
        return None
    cp = cupy()
    if isinstance(stream, cp.cuda.Stream) or isinstance(
            stream, getattr(cp.cuda, "ExternalStream", ())):
        return stream
    return external_cupy_stream(cp, stream_handle(stream))


def stream():
    """A new CUDA stream (ordered with the legacy default stream, as numba-cuda's)."""
    if simulated():
        return sim().SimStream()
    return Stream(cupy().cuda.Stream(non_blocking=False))


def default_stream():
    """The default stream (the legacy one)."""
    return legacy_default_stream()


def legacy_default_stream():
    if simulated():
        return sim().SimStream(sim().LEGACY_DEFAULT_STREAM)
    return Stream(cupy().cuda.Stream.null)


def per_thread_default_stream():
    if simulated():
        return sim().SimStream(sim().PER_THREAD_DEFAULT_STREAM)
    return Stream(cupy().cuda.Stream.ptds)


def external_stream(ptr):
    """A stream created elsewhere (a ``cudaStream_t`` as an int), not owned by gpureplace."""
    if not isinstance(ptr, int) or isinstance(ptr, bool):
        raise TypeError(f"external_stream(ptr): ptr must be a stream handle (int), got {ptr!r}")
    if simulated():
        return sim().SimStream(ptr)
    return Stream(external_cupy_stream(cupy(), ptr), external=True)


class Event:
    """A CUDA event (numba-cuda's ``Event``), wrapping CuPy's (``.cupy``)."""

    __slots__ = ("cupy", "timing")

    def __init__(self, timing=True):
        self.cupy = cupy().cuda.Event(disable_timing=not timing)
        self.timing = bool(timing)

    def record(self, stream=0):
        checked_stream(stream, "Event.record")
        self.cupy.record(cupy_stream(stream))

    def synchronize(self):
        self.cupy.synchronize()

    def wait(self, stream=0):
        """Make ``stream`` wait for this event."""
        checked_stream(stream, "Event.wait")
        s = cupy_stream(stream)
        (s if s is not None else cupy().cuda.get_current_stream()).wait_event(self.cupy)

    def query(self):
        return bool(self.cupy.done)

    def elapsed_time(self, evtend):
        """Milliseconds from this event to ``evtend`` (both recorded, with timing).  The
        driver's refusal (an event made with ``timing=False``, or not recorded) is a
        ``CudaDriverError``, as numba-cuda's (its ``CudaAPIError`` is one; a RuntimeError
        too)."""
        if not (self.timing and getattr(evtend, "timing", True)):
            raise CudaDriverError("elapsed_time: both events must be created with timing=True "
                                  "(cuda.event(timing=False) makes one that cannot time) "
                                  "(CUDA_ERROR_INVALID_HANDLE)")
        cp = cupy()
        try:
            return cp.cuda.get_elapsed_time(self.cupy, evtend.cupy)
        except RuntimeError as exc:         # CuPy's CUDARuntimeError: not recorded, not done
            raise CudaDriverError(f"elapsed_time: {exc} (both events must have been recorded, "
                                  f"and the end event must have completed)") from exc


def event(timing=True):
    """A CUDA event; ``timing=False`` makes one that cannot time but costs less."""
    return sim().SimEvent(timing) if simulated() else Event(timing)


def event_elapsed_time(evtstart, evtend):
    """Milliseconds between two recorded events."""
    return evtstart.elapsed_time(evtend)


def synchronize():
    """Wait for all work on the current device."""
    if not simulated():
        cupy().cuda.runtime.deviceSynchronize()
    else:
        from ..jit.graphs import refuse_host_sync
        refuse_host_sync("cuda.synchronize()")
        sim().wait_for_callbacks()           # (stream callbacks run on a thread of their own)
