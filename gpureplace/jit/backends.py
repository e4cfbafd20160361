"""Where a launch runs: the GPU (this package, through ``runtime/``) or the CPU simulator.

``settings.launch_backend()`` decides for each launch.  The simulator sits above this layer (it
runs ``GPUFunction`` objects), so it is not imported here: the package root registers how to
load it (``set_simulator``), and it is imported the first time a launch needs it.  The host API
(``hostapi``) asks the same registry for the simulator's host-memory twins.
"""

from __future__ import annotations

from ..config import settings

_loader = None
_simulator = None


def simulated():
    """Whether launches and the host API go to the simulator now (``settings.backend``, or
    "auto" without a GPU): the one place that decides it."""
    return settings.launch_backend() == "simulator"


def set_simulator(loader):
    """``loader()`` returns the simulator backend: a module with ``launch(kernel, grid, block,
    stream, shared, args)``, ``check`` (the same arguments: what ``launch`` refuses before it
    runs, for prepared launches and graph captures) and the host API's twins in ``host``."""
    global _loader, _simulator
    _loader, _simulator = loader, None


def simulator():
    """The simulator backend (loaded on first use)."""
    global _simulator
    if _simulator is None:
        if _loader is None:
            raise RuntimeError("no simulator backend is registered (import gpureplace first)")
        _simulator = _loader()
    return _simulator
