"""What GPU (if any) this process can use, asked through CuPy once and remembered."""

from __future__ import annotations

import functools
import os

from .arch import DEFAULT_ARCH


#: What failed on the way to a GPU: "cupy", "devices" -> the exception, without its traceback
#: (whose frames reach the caller's: the first launch's, whose locals would live on)
_why_not = {}


@functools.lru_cache(maxsize=None)
def cupy_module():
    """CuPy, or None when it is not installed or cannot load its CUDA libraries."""
    try:
        import cupy
        return cupy
    except Exception as exc:       # ImportError, or CUDA libraries missing
        _why_not["cupy"] = exc.with_traceback(None)
        return None


@functools.lru_cache(maxsize=None)
def libcuda():
    """The CUDA driver library through ctypes (for the few calls CuPy does not bind), or None."""
    import ctypes
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


@functools.lru_cache(maxsize=None)
def device_count() -> int:
    cp = cupy_module()
    if cp is None:
        return 0
    try:
        return cp.cuda.runtime.getDeviceCount()
    except Exception as exc:       # no driver, no device
        _why_not["devices"] = exc.with_traceback(None)
        return 0


def unavailable_reason() -> str:
    """Why no GPU can be used, in words ("" when one can): no CuPy, no driver, no device."""
    if available():
        return ""
    if cupy_module() is None:
        exc = _why_not.get("cupy")
        if isinstance(exc, ImportError) and getattr(exc, "name", None) == "cupy":
            return "CuPy is not installed (pip install cupy-cuda12x, or cupy-cuda13x)"
        return f"CuPy could not load its CUDA libraries ({exc})"
    if libcuda() is None:
        return "no NVIDIA driver was found (libcuda.so.1 cannot be loaded)"
    exc = _why_not.get("devices")
    return "the NVIDIA driver reports no CUDA GPU" + (f" ({exc})" if exc else "")


def no_device_message(what="kernels cannot be launched") -> str:
    """The whole story when a GPU is needed and there is none: why, and how to run anyway."""
    from .errors import setting_hint
    return (f"no CUDA GPU was found ({unavailable_reason()}), so {what} on the GPU backend: "
            f"run them in the CPU simulator instead ({setting_hint('backend', 'simulator')} "
            f"or 'auto', or GPUREPLACE_BACKEND=simulator); kernels can still be compiled and "
            f"inspected without a GPU (kernel.compile(sig), inspect_ptx)")


def available() -> bool:
    return device_count() > 0


#: True in a process forked from one that had initialised CUDA: CUDA cannot work in it (the
#: driver's state does not survive fork); the host API says so instead of CuPy's errors.
forked_after_cuda = False
#: Set where gpureplace first makes CUDA work (the host API's CuPy, a kernel's module load).
cuda_used = False


def _after_fork_in_child():
    global forked_after_cuda
    # (device_count's cache is filled only once CUDA was asked for devices: initialised)
    if cuda_used or (device_count.cache_info().currsize and device_count() > 0):
        forked_after_cuda = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@functools.lru_cache(maxsize=None)
def driver_version():
    """CUDA version of the installed driver (e.g. 13000), or None without one."""
    if not available():
        return None
    return cupy_module().cuda.runtime.driverGetVersion()


def current_device() -> int:
    return cupy_module().cuda.runtime.getDevice()


@functools.lru_cache(maxsize=None)
def arch_of(device_id: int) -> str:
    cc = cupy_module().cuda.Device(device_id).compute_capability    # e.g. "90"
    return f"sm_{cc}"


def default_arch() -> str:
    """The current device's ``sm_XX``; ``sm_90`` without a GPU."""
    if available():
        return arch_of(current_device())
    return DEFAULT_ARCH

