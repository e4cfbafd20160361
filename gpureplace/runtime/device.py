"""What GPU (if any) this process can use, asked through CuPy once and remembered."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def cupy_module():
    """CuPy, or None when it is not installed or cannot load its CUDA libraries."""
    try:
        import cupy
        return cupy
    except Exception:       # ImportError, or CUDA libraries missing
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
    except Exception:       # no driver, no device
        return 0


def available() -> bool:
    return device_count() > 0


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
    from ..compiler.backend import DEFAULT_ARCH
    return DEFAULT_ARCH

