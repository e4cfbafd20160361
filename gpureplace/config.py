"""Process-wide settings (the IPython extension's ``%config GPUReplace.*`` writes these).

    gpureplace.config.settings.fastmath = True      # every kernel without an explicit context
    gpureplace.config.settings.arch = "sm_90"       # compile for this arch instead of the GPU's
    gpureplace.config.settings.default_context = my_context
    gpureplace.config.settings.verbose = True       # say what recompiles, why, and how long it took
    gpureplace.config.settings.backend = "simulator"  # "gpu", "simulator" or "auto"
    gpureplace.config.settings.host_arrays = "error"  # "warn", "copy" or "error"
    gpureplace.config.settings.cuda_array_interface_sync = False  # no wait for a CAI's stream
    gpureplace.config.settings.low_occupancy_warnings = True  # warn of grids under 128 blocks
"""

from __future__ import annotations

import os
import sys

from . import probe
from .arch import normalize_arch

_BACKENDS = ("auto", "gpu", "simulator")
#: What a launch does with a host NumPy array among its arguments (numba-cuda copies it).
HOST_ARRAYS = ("warn", "copy", "error")


class Settings:
    def __init__(self):
        self.fastmath = False
        self._arch = None               # None: the current GPU's, or sm_90 without one
        self.default_context = None     # None: gpureplace.default_context
        self.verbose = False
        #: Where launches run: "gpu", "simulator", or "auto" (the GPU when there is one, else the
        #: simulator, said once).  ``GPUREPLACE_BACKEND`` sets the default.
        self.backend = os.environ.get("GPUREPLACE_BACKEND", "auto").strip().lower() or "auto"
        self._noticed = False
        #: A host NumPy array given to a launch: "warn" (the default: copied to the device and
        #: back, with a performance warning the first time per kernel, as numba-cuda does),
        #: "copy" (the same, silently) or "error" (refused).  ``GPUREPLACE_HOST_ARRAYS`` sets
        #: the default (checked when a launch first needs it, as the backend's is).
        self._host_arrays = os.environ.get("GPUREPLACE_HOST_ARRAYS", "warn")
        #: A device array of another library whose ``__cuda_array_interface__`` names a stream
        #: (version 3): a launch or ``as_cuda_array`` waits for that stream first, as the
        #: interface asks of consumers (numba-cuda's CUDA_ARRAY_INTERFACE_SYNC).  False: the user
        #: orders the work.  ``GPUREPLACE_CAI_SYNC=0`` sets the default.
        self.cuda_array_interface_sync = os.environ.get(
            "GPUREPLACE_CAI_SYNC", "1").strip().lower() not in ("0", "false", "no", "off")
        #: A launch configuration of fewer than 128 blocks gets a performance warning (once per
        #: configuration of a kernel), as numba-cuda warns by default.  Off by default here:
        #: notebooks try kernels on small grids.  ``GPUREPLACE_LOW_OCCUPANCY_WARNINGS=1`` (or
        #: numba-cuda's ``NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=1``) sets the default.
        self.low_occupancy_warnings = _env_flag(("GPUREPLACE_LOW_OCCUPANCY_WARNINGS",
                                                 "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"), False)

    @property
    def arch(self):
        return self._arch

    @arch.setter
    def arch(self, value):
        self._arch = normalize_arch(value, "settings.arch", known=False) if value else None

    @property
    def host_arrays(self):
        return _host_arrays_mode(self._host_arrays)

    @host_arrays.setter
    def host_arrays(self, value):
        self._host_arrays = _host_arrays_mode(value)

    def launch_backend(self):
        backend = self.backend
        if backend not in _BACKENDS:
            raise ValueError(f"gpureplace backend must be one of {', '.join(_BACKENDS)}, got "
                             f"{backend!r} (GPUREPLACE_BACKEND or settings.backend)")
        if backend != "auto":
            return backend
        if probe.available():
            return "gpu"
        if not self._noticed:
            self._noticed = True
            print("gpureplace: no CUDA GPU found; kernels run in the CPU simulator "
                  "(GPUREPLACE_BACKEND=gpu to refuse instead)", file=sys.stderr)
        return "simulator"

def _env_flag(names, default):
    """The first of the environment variables ``names`` that is set, as a boolean."""
    for name in names:
        value = os.environ.get(name)
        if value is not None and value.strip():
            return value.strip().lower() not in ("0", "false", "no", "off")
    return default


def _host_arrays_mode(value):
    mode = str(value).strip().lower() or "warn"
    if mode not in HOST_ARRAYS:
        raise ValueError(f"gpureplace host_arrays must be one of {', '.join(HOST_ARRAYS)}, got "
                         f"{value!r} (GPUREPLACE_HOST_ARRAYS or settings.host_arrays)")
    return mode


settings = Settings()
