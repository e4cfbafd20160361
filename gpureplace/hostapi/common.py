"""What every part of the host API needs: which backend the calls go to, and CuPy."""

from __future__ import annotations

from .. import probe
from ..jit.backends import simulated, simulator


def sim():
    """The simulator's twins of the host API (``simulator/host.py``)."""
    return simulator().host


def cupy():
    cp = probe.cupy_module()
    if cp is None:
        raise RuntimeError("CuPy is not available: the GPU host API needs it (the simulator "
                           "backend works without it: GPUREPLACE_BACKEND=simulator)")
    return cp


__all__ = ["cupy", "sim", "simulated"]
