"""Process-wide settings (the IPython extension's ``%config GPUReplace.*`` writes these).

    gpureplace.config.settings.fastmath = True      # every kernel without an explicit context
    gpureplace.config.settings.arch = "sm_90"       # compile for this arch instead of the GPU's
    gpureplace.config.settings.default_context = my_context
    gpureplace.config.settings.verbose = True       # say what recompiles, why, and how long it took
    gpureplace.config.settings.backend = "simulator"  # "gpu", "simulator" or "auto"
"""

from __future__ import annotations

import os
import sys

_BACKENDS = ("auto", "gpu", "simulator")


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

    @property
    def arch(self):
        return self._arch

    @arch.setter
    def arch(self, value):
        self._arch = normalize_arch(value, "settings.arch", known=False) if value else None

    def launch_backend(self):
        backend = self.backend
        if backend not in _BACKENDS:
            raise ValueError(f"gpureplace backend must be one of {', '.join(_BACKENDS)}, got "
                             f"{backend!r} (GPUREPLACE_BACKEND or settings.backend)")
        if backend != "auto":
            return backend
        from .runtime import device
        if device.available():
            return "gpu"
        if not self._noticed:
            self._noticed = True
            print("gpureplace: no CUDA GPU found; kernels run in the CPU simulator "
                  "(GPUREPLACE_BACKEND=gpu to refuse instead)", file=sys.stderr)
        return "simulator"

    def context(self):
        from .dispatch.context import default_context
        return self.default_context or default_context


def normalize_arch(value, what, known=True):
    """``"sm_XX"`` from an architecture given as numba-cuda's ``(major, minor)`` tuple of ints or
    as an ``sm_XX`` string (checked by ``compiler.backend.arch_number``, as ``%config
    GPUReplace.arch`` is); anything else is refused with the accepted forms.  ``what`` names the
    option in the message (``"compile_ptx(cc=...)"``); ``known``: also refuse an architecture the
    compiler does not know (else that is said when a compile asks for it)."""
    forms = "a (major, minor) tuple of ints such as (9, 0), or a string such as 'sm_90'"
    if isinstance(value, tuple):
        if len(value) == 2 and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                   for v in value):
            return _known(f"sm_{value[0]}{value[1]}", what, known)
        hint = ""
        if 1 <= len(value) <= 3 and all(isinstance(v, int) for v in value):
            hint = f" (did you mean {(value + (0,))[:2]!r}?)"
        raise ValueError(f"{what} must be {forms}; got {value!r}{hint}")
    if isinstance(value, str):
        from .compiler.backend import arch_number
        try:
            arch_number(value)
        except ValueError:
            pass
        else:
            return _known(value, what, known)
    hint = ""
    digits = str(value).strip().lower().removeprefix("compute_").removeprefix("sm")
    if (isinstance(value, int) and not isinstance(value, bool)) or \
            (isinstance(value, str) and digits.isdigit()):
        hint = f" (did you mean 'sm_{digits}'?)"
    raise ValueError(f"{what} must be {forms}; got {value!r}{hint}")


def _known(arch, what, check):
    """``arch``, once the compiler knows it (``backend.arch_min_ptx`` decides, with the list of
    those it knows in its message) when ``check``."""
    if check:
        from .compiler.backend import arch_min_ptx
        from .errors import CompileError, UnknownArchitecture
        try:
            arch_min_ptx(arch)
        except CompileError as exc:
            raise UnknownArchitecture(f"{what}: {exc.reason}") from None
    return arch


settings = Settings()
