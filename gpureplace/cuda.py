"""The kernel language, compatible with numba-cuda's ``numba.cuda``: change one import.

    from gpureplace import cuda

    @cuda.jit
    def saxpy(a, x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]

Every name is imported explicitly below, from where it is defined: the kernel language from
``compiler/intrinsics/`` (one module per group), ``cuda.jit`` and the compile-only entry points from
``jit/``, the host API from ``hostapi/``.  A name added to an intrinsics module's ``__all__`` is
added here too (a test checks that they agree).
"""
# ruff: noqa: F401  (this module is the namespace: every import is an export)

from numba.core.types import (b1, bool_, boolean, byte, c8, c16, char, complex64, complex128,
                              deferred_type, double, f4, f8, ffi, ffi_forced_object, float16,
                              float32, float64, i1, i2, i4, i8, int_, int8, int16, int32, int64,
                              intc, intp, long_, longlong, none, optional, short, size_t, ssize_t,
                              u1, u2, u4, u8, uchar, uint, uint8, uint16, uint32, uint64, uintc,
                              uintp, ulong, ulonglong, ushort, void)
# (numba.core.types' names, as numba-cuda's ``from numba.cuda.types import *`` offers them;
# ``cuda.bool`` too, set at the end so that this module's code keeps the builtin)

from . import cuda_random as random          # cuda.random ("gpureplace.cuda.random")
from . import cuda_types as types            # cuda.types ("gpureplace.cuda.types")
from . import libdevice                      # cuda.libdevice.X, as in numba-cuda
from .compiler.intrinsics.indexing import (blockDim, blockIdx, grid, gridDim, gridsize, laneid,
                                           threadIdx, warpsize)
from .compiler.intrinsics.sync import (nanosleep, syncthreads, syncthreads_and, syncthreads_count,
                                       syncthreads_or, syncwarp, threadfence, threadfence_block,
                                       threadfence_system)
from .compiler.intrinsics.memory import (local, shared)
from .compiler.intrinsics.constmem import const
from .compiler.intrinsics.atomics import atomic
from .compiler.intrinsics.warp import (activemask, all_sync, any_sync, ballot_sync, eq_sync,
                                       lanemask_lt, match_all_sync, match_any_sync, shfl_down_sync,
                                       shfl_sync, shfl_up_sync, shfl_xor_sync)
from .compiler.intrinsics.bits import (brev, cbrt, clz, ffs, fma, popc, selp)
from .compiler.intrinsics.fp16 import fp16
from .compiler.intrinsics.bf16 import bf16
from .compiler.intrinsics.fp8 import fp8
from .compiler.bfloat16 import bfloat16
from .compiler.intrinsics.cachehints import (ldca, ldcg, ldcs, ldcv, ldlu, stcg, stcs, stwb,
                                             stwt)
from .compiler.intrinsics.external import (Archive, Cubin, CUSource, declare_device, Fatbin,
                                           LinkableCode, LTOIR, Object, PTXSource)
from .compiler.intrinsics.cg import cg
from .compiler.intrinsics.vectors import (char1, char2, char3, char4, double1, double2, double3,
                                          double4, float1, float2, float3, float32x1, float32x2,
                                          float32x3, float32x4, float4, float64x1, float64x2,
                                          float64x3, float64x4, int1, int16x1, int16x2, int16x3,
                                          int16x4, int2, int3, int32x1, int32x2, int32x3, int32x4,
                                          int4, int64x1, int64x2, int64x3, int64x4, int8x1, int8x2,
                                          int8x3, int8x4, long1, long2, long3, long4, longlong1,
                                          longlong2, longlong3, longlong4, short1, short2, short3,
                                          short4, uchar1, uchar2, uchar3, uchar4, uint1, uint16x1,
                                          uint16x2, uint16x3, uint16x4, uint2, uint3, uint32x1,
                                          uint32x2, uint32x3, uint32x4, uint4, uint64x1, uint64x2,
                                          uint64x3, uint64x4, uint8x1, uint8x2, uint8x3, uint8x4,
                                          ulong1, ulong2, ulong3, ulong4, ulonglong1, ulonglong2,
                                          ulonglong3, ulonglong4, ushort1, ushort2, ushort3,
                                          ushort4)
from .hostapi import (as_cuda_array, as_vectors, close, current_context, default_stream,
                      defer_cleanup, detect, device_array, device_array_like, devicearray, event,
                      event_elapsed_time, external_stream, from_cuda_array_interface,
                      get_current_device, gpus, In, InOut, IpcHandle, is_cuda_array,
                      is_bfloat16_supported, is_float16_supported,
                      legacy_default_stream, list_devices, managed_array, mapped, mapped_array,
                      mapped_array_like, open_ipc_array, Out, per_thread_default_stream, pinned,
                      pinned_array, pinned_array_like, profile_start, profile_stop, profiling,
                      select_device, stream, synchronize, to_device)
from .cuda_reduce import Reduce, reduce
from .cuda_vectorize import guvectorize, vectorize
from . import extending                      # gpureplace.cuda.extending (numba-cuda's)
from .cuda_vectorize import register_numba_target as _register_numba_target
from .jit import (compile_all, compile_for_current_device, compile_ptx,
                  compile_ptx_for_current_device, jit)
from .jit import cuda_compile as compile     # noqa: A004  (numba-cuda's cuda.compile)
from .jit import launchconfig                # cuda.launchconfig (numba-cuda's)
from . import probe as _probe
from .errors import CudaDriverError, NoDeviceError as CudaSupportError   # numba-cuda's names
from numba import literal_unroll             # (numba-cuda re-exports it)
import sys as _sys


def is_fp8_supported():
    """Whether the 8-bit float types (``cuda.fp8``) can be used: always, here (their conversions
    are integer code, on every architecture and in the simulator)."""
    return True


def is_available():
    """True when a CUDA GPU (and CuPy) can be used."""
    return _probe.available()

class _Runtime:
    """``cuda.runtime`` (numba-cuda's): the CUDA toolkit's version."""

    def get_version(self):
        """The CUDA runtime's version, ``(major, minor)``."""
        cp = _probe.cupy_module()
        if cp is None:
            raise CudaSupportError("cuda.runtime.get_version(): CuPy (which brings the CUDA "
                                   "runtime) is not installed")
        v = cp.cuda.runtime.runtimeGetVersion()
        return v // 1000, v % 1000 // 10

    def is_supported_version(self):
        """True for the CUDA versions gpureplace is tested with (12 and 13)."""
        return self.get_version()[0] in (12, 13)


runtime = _Runtime()


def is_supported_version():
    """``cuda.runtime.is_supported_version()``."""
    return runtime.is_supported_version()


def cuda_error():
    """None when CUDA can be used, else why not (numba-cuda's ``cuda.cuda_error()``)."""
    return None if _probe.available() else _probe.no_device_message()


_register_numba_target()     # numba.vectorize(target='cuda') without numba-cuda
_sys.modules.setdefault(__name__ + ".extending", extending)
_sys.modules.setdefault(__name__ + ".fp16", fp16)       # from gpureplace.cuda.fp16 import __hadd
_sys.modules.setdefault(__name__ + ".bf16", bf16)       # from gpureplace.cuda.bf16 import hadd
_sys.modules.setdefault(__name__ + ".fp8", fp8)         # from gpureplace.cuda.fp8 import fp8_e4m3
_sys.modules.setdefault(__name__ + ".launchconfig", launchconfig)


def _cudadrv():
    """``cuda.cudadrv``: where numba-cuda code finds the driver's classes (``isinstance(s,
    cuda.cudadrv.driver.Stream)``, ``cuda.cudadrv.devicearray.DeviceNDArray``): gpureplace's."""
    import types as pytypes
    from .hostapi import Device, Event, Stream
    from .hostapi.ipc import DeviceMemory, device_to_host, host_to_device
    pkg = pytypes.ModuleType(__name__ + ".cudadrv", _cudadrv.__doc__)
    pkg.__path__ = []
    pkg.driver = pytypes.ModuleType(pkg.__name__ + ".driver", "numba-cuda's driver classes")
    pkg.driver.Stream, pkg.driver.Event, pkg.driver.Device = Stream, Event, Device
    pkg.driver.IpcHandle, pkg.driver.MemoryPointer = IpcHandle, DeviceMemory
    pkg.driver.device_to_host, pkg.driver.host_to_device = device_to_host, host_to_device
    pkg.devices = pytypes.ModuleType(pkg.__name__ + ".devices", "numba-cuda's contexts")
    pkg.devices.get_context, pkg.devices.gpus = current_context, gpus
    pkg.devicearray = devicearray
    pkg.error = pytypes.ModuleType(pkg.__name__ + ".error", "numba-cuda's driver errors")
    pkg.error.CudaDriverError = CudaDriverError
    pkg.error.CudaSupportError = CudaSupportError       # no GPU (or CuPy) to use
    for mod in (pkg, pkg.driver, pkg.devices, pkg.error):
        _sys.modules.setdefault(mod.__name__, mod)
    return pkg


cudadrv = _cudadrv()
driver, devices = cudadrv.driver, cudadrv.devices     # cuda.driver / cuda.devices, as numba-cuda's


def _kernels():
    """``cuda.kernels``: numba-cuda's ready-made kernels (``kernels.transpose.transpose``,
    ``kernels.reduction.Reduce``)."""
    import types as pytypes
    from . import cuda_reduce, cuda_transpose
    pkg = pytypes.ModuleType(__name__ + ".kernels", _kernels.__doc__)
    pkg.__path__ = []                    # a package: its modules are imported by name
    pkg.transpose, pkg.reduction = cuda_transpose, cuda_reduce
    _sys.modules.setdefault(pkg.__name__, pkg)
    _sys.modules.setdefault(pkg.__name__ + ".transpose", cuda_transpose)
    _sys.modules.setdefault(pkg.__name__ + ".reduction", cuda_reduce)
    return pkg


kernels = _kernels()


def _descriptor():
    """``cuda.descriptor.cuda_target``: numba-cuda's handle on its typing and target contexts;
    here those of the default Context (the configured one when asked)."""
    import types as pytypes

    class _Target:
        @property
        def typing_context(self):
            from .compiler.target import compilers
            from .dispatch.context import current_default
            return compilers(current_default())[0]

        @property
        def target_context(self):
            from .compiler.target import compilers
            from .dispatch.context import current_default
            return compilers(current_default())[1]

    mod = pytypes.ModuleType(__name__ + ".descriptor", _descriptor.__doc__)
    mod.cuda_target = _Target()
    _sys.modules.setdefault(mod.__name__, mod)
    return mod


descriptor = _descriptor()

from numba.core.types import bool as _bool_type  # noqa: E402

globals()["bool"] = _bool_type       # cuda.bool, numba-cuda's alias of cuda.boolean
