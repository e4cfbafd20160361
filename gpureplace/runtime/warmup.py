"""Start-up work done in a background thread while Python imports Numba.

A fresh process's first kernel waits for four slow things: importing Numba, starting the CUDA
driver, creating the device's context, and parsing libdevice.  The last three run mostly outside
the GIL (in the driver, and in LLVM through ctypes), so ``import gpureplace`` starts them in a
thread and imports Numba meanwhile; whatever needs their results later waits only for what is
left of them.  The context is made ahead only when the process sees exactly one GPU (with more,
the program may choose another one, and a context costs device memory).

Set ``GPUREPLACE_EAGER_INIT=0`` to do everything lazily instead (nothing touches the GPU before
the first launch or compile), e.g. in a process that forks workers before using CUDA.
"""

from __future__ import annotations

import os
import threading

_thread = None


def start():
    """Begin the background start-up once per process (no-op when disabled)."""
    global _thread
    if _thread is not None or os.environ.get("GPUREPLACE_EAGER_INIT", "1").strip() == "0":
        return
    # LLVM's target registry is set up here, in the importing thread, before anything else can
    # use LLVM; libdevice is then parsed into an LLVM context of its own (compiler/libdevice.py).
    from ..compiler import backend
    backend.initialize_llvm()
    gpu = os.environ.get("GPUREPLACE_BACKEND", "auto").strip().lower() != "simulator"
    _thread = threading.Thread(target=_work, args=(gpu,), name="gpureplace-warmup", daemon=True)
    _thread.start()


def _work(gpu):
    from ..compiler import libdevice
    try:
        libdevice.function_table()
    except Exception:       # not installed: the first kernel that needs it says so
        pass
    if not gpu:
        return
    from . import device
    try:
        if device.available():
            device.arch_of(device.current_device())
            device.driver_version()
            if device.device_count() == 1:
                device.cupy_module().cuda.runtime.free(0)     # creates the primary context
    except Exception:       # no usable GPU: launching says so
        pass


def wait(timeout=None):
    """Wait for the background start-up (tests and benchmarks)."""
    if _thread is not None:
        _thread.join(timeout)
