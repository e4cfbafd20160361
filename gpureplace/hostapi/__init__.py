"""numba-cuda's host API on CuPy: device arrays, pinned and mapped memory, streams, events,
devices.  Offered in ``gpureplace.cuda``, so scripts written for ``numba.cuda`` port by changing
the import::

    d_x = cuda.to_device(x)                 # a DeviceNDArray: a CuPy array with numba's methods
    d_out = cuda.device_array_like(d_x)
    s = cuda.stream()
    kernel[blocks, threads, s](d_x, d_out)
    out = d_out.copy_to_host(stream=s)
    s.synchronize()

``DeviceNDArray`` is a subclass of ``cupy.ndarray``: everything CuPy does works on it, and every
CuPy array can be passed where numba-cuda takes a device array.  Streams and events wrap CuPy's
(``.cupy``).

Without a GPU (the simulator backend) the same calls work on host memory: device arrays are
NumPy arrays with the same methods (``SimDeviceNDArray``), streams and events stand-ins whose
timings come from the host clock (``simulator/host.py``).

    streams.py    Stream, Event, stream(), event(), synchronize()
    arrays.py     DeviceNDArray, to_device, device_array, as_cuda_array, as_vectors
    memory.py     pinned, mapped and managed host memory
    devices.py    Device, gpus, select_device, contexts, profiling
    ipc.py        CUDA IPC: device memory shared with other processes (get_ipc_handle,
                  open_ipc_array)
"""


from ..runtime.hints import In, InOut, Out  # noqa: F401  (numba-cuda's transfer hints)
from .arrays import (as_cuda_array, as_vectors, device_array, device_array_like,  # noqa: F401
                     devicearray, from_cuda_array_interface, is_cuda_array, to_device)
from .devices import (Device, MemoryInfo, close, current_context, defer_cleanup,  # noqa: F401
                      detect, get_current_device, gpus, is_bfloat16_supported,
                      is_float16_supported, list_devices, profile_start, profile_stop, profiling,
                      select_device)
from .ipc import IpcHandle, open_ipc_array  # noqa: F401
from .memory import (ManagedNDArray, MappedNDArray, managed_array, mapped,  # noqa: F401
                     mapped_array, mapped_array_like, pinned, pinned_array, pinned_array_like)
from .streams import (Event, Stream, default_stream, event, event_elapsed_time,  # noqa: F401
                      external_stream, legacy_default_stream, per_thread_default_stream, stream,
                      synchronize)

__all__ = ["to_device", "device_array", "device_array_like", "pinned_array", "pinned_array_like",
           "mapped_array", "mapped_array_like", "managed_array", "pinned", "mapped",
           "as_cuda_array", "from_cuda_array_interface", "is_cuda_array", "synchronize",
           "stream", "default_stream", "legacy_default_stream", "per_thread_default_stream",
           "external_stream", "event", "event_elapsed_time", "get_current_device",
           "select_device", "list_devices", "gpus", "current_context", "close", "detect",
           "defer_cleanup", "profile_start", "profile_stop", "profiling", "is_float16_supported",
           "is_bfloat16_supported",
           "devicearray", "In", "Out", "InOut", "as_vectors", "IpcHandle", "open_ipc_array"]
