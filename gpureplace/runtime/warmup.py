"""Optional: CUDA start-up in a background thread while Python imports Numba.

A fresh process's first kernel waits for importing Numba and for CUDA's start-up: initialising
the driver and creating the device's primary context.  The driver calls run outside the GIL, so
with ``GPUREPLACE_EAGER_INIT=1`` ``import gpureplace`` makes them in a thread, through the driver
library directly (ctypes; no Python work that would compete with the import for the GIL), and
imports Numba meanwhile.  CuPy later finds the driver started and the primary context made.  On
the H200 host that takes 60-150 ms off the first kernel's result.

It is off by default, as CUDA start-up is in CuPy, PyTorch and numba-cuda: a process whose parent
started CUDA cannot use CUDA in children it forks (multiprocessing's default on Linux), and a
context holds device memory.  The context is made ahead only when the process sees exactly one GPU
(with more, the program may choose another one).
"""

from __future__ import annotations

import os
import threading

_thread = None


def enabled():
    return (os.environ.get("GPUREPLACE_EAGER_INIT", "0").strip() not in ("", "0")
            and os.environ.get("GPUREPLACE_BACKEND", "auto").strip().lower() != "simulator")


def start():
    """Begin the background start-up once per process (no-op when disabled)."""
    global _thread
    if _thread is not None or not enabled():
        return
    _thread = threading.Thread(target=_start_cuda, name="gpureplace-cuda-start", daemon=True)
    _thread.start()


def _start_cuda():
    import ctypes

    from ..probe import libcuda
    lib = libcuda()
    if lib is None:
        return                      # no driver: launching says so later
    try:
        if lib.cuInit(0) != 0:
            return
        count = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value != 1:
            return
        dev = ctypes.c_int(0)
        ctx = ctypes.c_void_p()
        if lib.cuDeviceGet(ctypes.byref(dev), 0) == 0:
            # The primary context, retained for the process's lifetime as CUDA's runtime (and so
            # CuPy) keeps it: creating it is most of CUDA's start-up.
            lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    except Exception:
        pass


def wait(timeout=None):
    """Wait for the background start-up (tests and benchmarks)."""
    if _thread is not None:
        _thread.join(timeout)
