"""A CUDA stream as numba-cuda code sees it (``cuda.stream()`` returns one), and what a consumer
of a ``__cuda_array_interface__`` owes the stream it names."""

from __future__ import annotations

import contextlib
import ctypes
import operator

from numba.core import config as numba_config

from .. import probe
from ..config import settings
from ..errors import LaunchError


class _Handle(ctypes.c_void_p):
    def __int__(self):
        return self.value or 0


class Stream:
    """A CUDA stream (numba-cuda's ``Stream``), wrapping a CuPy stream (``.cupy``).

    Launch configurations (``kernel[grid, block, stream]``), copies and events take it; ``with
    s:`` makes it CuPy's current stream; ``with s.auto_synchronize():`` also waits for it at the
    end of the block.  ``external``: created elsewhere (``cuda.external_stream``, or the stream a
    ``__cuda_array_interface__`` names), not owned here.
    """

    __slots__ = ("cupy", "external")

    def __init__(self, cupy_stream, external=False):
        self.cupy = cupy_stream
        self.external = external

    @property
    def ptr(self):
        return self.cupy.ptr

    @property
    def handle(self):
        """The ``cudaStream_t``: a ``ctypes.c_void_p`` that ``int()`` also converts (numba-cuda
        code does both: ``s.handle.value``, ``int(s.handle)``)."""
        return _Handle(self.cupy.ptr)

    def __int__(self):
        return int(self.cupy.ptr)

    def __cuda_stream__(self):
        """The CUDA stream protocol (as numba-cuda's and cuda.core's streams speak it):
        ``(0, handle)``, the version and the ``cudaStream_t`` as an int."""
        return (0, int(self.cupy.ptr))

    def synchronize(self):
        self.cupy.synchronize()

    def query(self):
        """True when everything queued on the stream has finished."""
        return bool(self.cupy.done)

    @contextlib.contextmanager
    def auto_synchronize(self):
        with self:
            yield self
        self.synchronize()

    def add_callback(self, callback, arg=None):
        """Call ``callback(stream, status, arg)`` (in a thread of the driver's) once the work
        queued on the stream so far has finished; status 0 when it succeeded."""
        self.cupy.add_callback(lambda _cupy, status, a: callback(self, status, a), arg)

    def async_done(self):
        """An ``asyncio`` future of the running loop that completes (with this stream) when the
        work queued so far has finished: ``await s.async_done()``."""
        return when_done(self, self.add_callback)

    def __enter__(self):
        self.cupy.__enter__()
        return self

    def __exit__(self, *exc):
        return self.cupy.__exit__(*exc)

    def __repr__(self):
        return f"<gpureplace.cuda.Stream {self.cupy.ptr:#x}>"


def protocol_handle(stream):
    """The ``cudaStream_t`` (an int) of ``stream`` where it speaks the CUDA stream protocol
    (``__cuda_stream__()`` returning ``(0, handle)``: cuda.core's streams, numba-cuda's,
    gpureplace's, recent CuPy's and PyTorch's), else None.  A protocol answer that is not
    ``(0, handle)`` is refused (LaunchError), as numba-cuda refuses it."""
    method = getattr(stream, "__cuda_stream__", None)
    if method is None:
        return None
    answer = method()
    handle = None
    if isinstance(answer, tuple) and len(answer) == 2 and type(answer[0]) is int \
            and answer[0] == 0 and not isinstance(answer[1], bool):
        try:
            handle = operator.index(answer[1])
        except TypeError:                   # cuda-bindings' CUstream: an object int() takes
            if hasattr(answer[1], "getPtr"):
                handle = int(answer[1])
    if handle is None:
        raise LaunchError(f"stream {stream!r}: its __cuda_stream__() must return (0, handle), "
                          f"the protocol's version 0 and an int handle, got {answer!r}")
    return handle


class _ProtocolHandle:
    """A bare ``cudaStream_t`` speaking the CUDA stream protocol, for CuPy's
    ``Stream.from_external``."""

    __slots__ = ("handle",)

    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def external_cupy_stream(cp, handle):
    """CuPy's stream over the foreign ``cudaStream_t`` ``handle`` (an int), not owned by CuPy:
    ``cupy.cuda.Stream.from_external`` over the CUDA stream protocol (CuPy 14; run on the H200
    with ordinary handles and the legacy and per-thread default streams, 1 and 2), else, in an
    older CuPy, ``cupy.cuda.ExternalStream`` (with CuPy 14's deprecation warning silenced,
    should a CuPy have both and a broken ``from_external``: never seen)."""
    from_external = getattr(getattr(cp.cuda, "Stream", None), "from_external", None)
    if from_external is not None:
        return from_external(_ProtocolHandle(handle))
    import warnings
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "ExternalStream is deprecated", DeprecationWarning)
        return cp.cuda.ExternalStream(handle)


def when_done(stream, add_callback):
    """``stream.async_done()``: a future of the running loop set by ``add_callback``'s call."""
    import asyncio
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def done(_stream, status, _arg):
        def settle():
            if future.done():
                return
            if status:
                future.set_exception(RuntimeError(f"the stream's work failed (status {status})"))
            else:
                future.set_result(stream)
        loop.call_soon_threadsafe(settle)
    add_callback(done, None)
    return future


def interface_stream_problem(cai):
    """Why the 'stream' of the ``__cuda_array_interface__`` ``cai`` names no stream (version 3
    of the interface forbids 0, ambiguous between the two default streams; a handle is an
    int), or None (None, or a handle).  The simulator refuses the same."""
    handle = cai.get("stream")
    if handle is None or not isinstance(handle, bool) and isinstance(handle, int) and handle:
        return None
    return (f"__cuda_array_interface__['stream'] must be None or a stream handle (a non-zero "
            f"int: 1 is the legacy default stream, 2 the per-thread one), got {handle!r}")


def wait_for_interface_stream(cai, sync=True):
    """What a consumer of a ``__cuda_array_interface__`` (version 3) owes its producer: when it
    names a stream, wait for the work queued there (unless
    ``settings.cuda_array_interface_sync`` is off).  Returns that stream (a ``Stream``), or None
    when it names none."""
    handle = cai.get("stream")
    if handle is None:
        return None
    problem = interface_stream_problem(cai)
    if problem is not None:
        raise ValueError(problem)
    s = Stream(external_cupy_stream(probe.cupy_module(), handle), external=True)
    # (numba-cuda's switch, NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0, is honoured too)
    if sync and settings.cuda_array_interface_sync and getattr(
            numba_config, "CUDA_ARRAY_INTERFACE_SYNC", True):
        s.synchronize()
    return s
