"""What every part of the host API needs: which backend the calls go to, and CuPy."""

from __future__ import annotations

from .. import probe
from ..errors import CudaDriverError
from ..jit.backends import simulated, simulator


def sim():
    """The simulator's twins of the host API (``simulator/host.py``)."""
    return simulator().host


def cupy():
    if probe.forked_after_cuda:
        raise CudaDriverError(
            "CUDA initialized before forking: this process was forked after its parent had "
            "used the GPU, and CUDA cannot work in it.  Start worker processes with the "
            "'spawn' (or 'forkserver') method: multiprocessing.get_context('spawn')")
    cp = probe.cupy_module()
    probe.cuda_used = True
    if cp is None:
        raise RuntimeError("CuPy is not available: the GPU host API needs it (the simulator "
                           "backend works without it: GPUREPLACE_BACKEND=simulator)")
    return cp


__all__ = ["cupy", "sim", "simulated"]
