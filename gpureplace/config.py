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
import re
import sys
import warnings

from . import probe
from .arch import normalize_arch
from .errors import signature_text

_BACKENDS = ("auto", "gpu", "simulator")
#: What a launch does with a host NumPy array among its arguments (numba-cuda copies it).
HOST_ARRAYS = ("warn", "copy", "error")


#: Called with no arguments when a setting that compiled code depends on changes (``fastmath``,
#: ``default_context``): the tracking layer moves the world there, so that cached launches look
#: again and compile for the new setting (config sits below tracking and cannot call it).
code_setting_listeners = []


#: Called with no arguments when ``low_occupancy_warnings`` changes: the kernels forget the
#: launch configurations they checked (the warning is given where one is checked),
#: jit/definitions.py.
launch_setting_listeners = []


def _notify(listeners):
    for listener in list(listeners):
        listener()


def _code_setting_changed():
    _notify(code_setting_listeners)


class Settings:
    #: options kept as plain attributes (the others are properties), and which of them are flags
    _PLAIN = frozenset({"verbose", "backend", "notice_stream", "cuda_array_interface_sync",
                        "low_occupancy_warnings"})
    _FLAGS = frozenset({"verbose", "cuda_array_interface_sync", "low_occupancy_warnings"})

    def __setattr__(self, name, value):
        # (a misspelt option -- settings.fastmat = True -- would otherwise do nothing, silently)
        if not (name.startswith("_") or name in self._PLAIN or
                isinstance(getattr(type(self), name, None), property)):
            known = sorted(n for n in dir(type(self)) if not n.startswith("_") and
                           isinstance(getattr(type(self), n), property)) + sorted(self._PLAIN)
            raise AttributeError(f"gpureplace.config.settings has no option {name!r}; its "
                                 f"options are {', '.join(sorted(known))}")
        if name in self._FLAGS:
            if isinstance(value, str) or not isinstance(value, (bool, int)) and \
                    type(value).__name__ not in ("bool", "bool_"):
                raise TypeError(f"settings.{name} must be True or False, got {value!r}")
            value = bool(value)
        changed = name == "low_occupancy_warnings" and \
            self.__dict__.get(name, value) != value
        object.__setattr__(self, name, value)
        if changed:
            _notify(launch_setting_listeners)

    def __init__(self):
        again = "_fastmath" in self.__dict__          # (reset: tests, %reload_ext)
        moved = again and (bool(self._fastmath) or self._default_context is not None)
        self._fastmath = False
        self._default_context = None
        if moved:
            _code_setting_changed()
        self._arch = None               # None: the current GPU's, or sm_90 without one
        self.verbose = False
        #: Where launches run: "gpu", "simulator", or "auto" (the GPU when there is one, else the
        #: simulator, said once).  ``GPUREPLACE_BACKEND`` sets the default.
        self.backend = os.environ.get("GPUREPLACE_BACKEND", "auto").strip().lower() or "auto"
        self._noticed = False           # (no_gpu_noticed)
        #: Where a launch gives that notice: "stderr", or "stdout" in a notebook (the extension
        #: sets it), where it stays in order with the cell's other output.
        self.notice_stream = "stderr"
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
        #: Folders NVRTC searches for the headers of CUDA C linked into kernels (``link=`` /
        #: ``cuda.declare_device(..., link=)`` of ``.cu`` files), after the file's own folder:
        #: a list, or one string of folders joined by ``os.pathsep`` (numba-cuda's
        #: ``CUDA_NVRTC_EXTRA_SEARCH_PATHS``).  ``GPUREPLACE_NVRTC_SEARCH_PATHS`` (or numba-cuda's
        #: ``NUMBA_CUDA_NVRTC_EXTRA_SEARCH_PATHS``) sets the default.
        self.nvrtc_search_paths = (os.environ.get("GPUREPLACE_NVRTC_SEARCH_PATHS")
                                   or os.environ.get("NUMBA_CUDA_NVRTC_EXTRA_SEARCH_PATHS") or "")

    @property
    def arch(self):
        return self._arch

    @property
    def fastmath(self):
        return self._fastmath

    @fastmath.setter
    def fastmath(self, value):
        changed = bool(value) != bool(self._fastmath)
        self._fastmath = value
        if changed:
            _code_setting_changed()

    @property
    def default_context(self):
        """The context of kernels without one of their own; None: gpureplace.default_context."""
        return self._default_context

    @default_context.setter
    def default_context(self, value):
        changed = value is not self._default_context
        self._default_context = value
        if changed:
            _code_setting_changed()

    @property
    def nvrtc_search_paths(self):
        return self._nvrtc_search_paths

    @nvrtc_search_paths.setter
    def nvrtc_search_paths(self, value):
        if value is None:
            value = ()
        if isinstance(value, (str, os.PathLike)):
            value = [p for p in str(value).split(os.pathsep) if p]
        if not all(isinstance(p, (str, os.PathLike)) for p in value):
            raise TypeError(f"settings.nvrtc_search_paths must be folders (a list of paths, or "
                            f"one string joined by {os.pathsep!r}), got {value!r}")
        self._nvrtc_search_paths = tuple(os.fspath(p) for p in value)

    @arch.setter
    def arch(self, value):
        self._arch = normalize_arch(value, "settings.arch", known=False) if value else None

    @property
    def no_gpu_noticed(self):
        """Whether the notice that launches run in the simulator was given (once per process:
        the IPython extension gives it where the notebook shows it, when it loads)."""
        return self._noticed

    @no_gpu_noticed.setter
    def no_gpu_noticed(self, value):
        self._noticed = bool(value)

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
        if not self.no_gpu_noticed:
            self.no_gpu_noticed = True
            if self.notice_stream == "stdout":
                print(NO_GPU_NOTICE, file=sys.stdout)
            else:
                print(f"{NO_GPU_NOTICE} (GPUREPLACE_BACKEND=gpu to refuse instead)",
                      file=sys.stderr)
        return "simulator"

    def gpu_surely_absent(self):
        """Whether launches will run in the simulator because no GPU can be used, when that is
        known without initialising CUDA (CuPy not installed, or no NVIDIA driver library): what
        the IPython extension asks when it loads (initialising CUDA there would make a later
        fork unusable).  False when a GPU might be there or the backend is not "auto"."""
        if self.backend != "auto":
            return False
        import importlib.util
        return importlib.util.find_spec("cupy") is None or probe.libcuda() is None


#: Said once when launches run in the CPU simulator because no GPU was found.
NO_GPU_NOTICE = "gpureplace: no CUDA GPU found; kernels run in the CPU simulator"


def recompiled_message(name, argtypes, seconds, reason, ahead=False):
    """The verbose line of a recompile, under 100 characters where the names allow, the reason
    on its own indented line: ``gpureplace: saxpy(float32, float32[::1]) recompiled in 42 ms``
    then ``  because helper: 'scale' (line 3) was redefined``.  ``reason``: the ``Stale`` that
    said why (``module.function: what``), shown with the function's name alone.  ``ahead``:
    recompiled in the background before its launch ("recompiled ahead in 42 ms")."""
    how = "recompiled ahead" if ahead else "recompiled"
    head = f"gpureplace: {signature_text(name, argtypes)} {how} in {1e3 * seconds:.0f} ms"
    who, sep, what = str(reason).partition(": ")
    why = f"{who.rsplit('.', 1)[-1]}: {what}" if sep and " " not in who else str(reason)
    return f"{head}\n  because {why}"


def _env_flag(names, default):
    """The first of the environment variables ``names`` that is set, as a boolean."""
    for name in names:
        value = os.environ.get(name)
        if value is not None and value.strip():
            return value.strip().lower() not in ("0", "false", "no", "off")
    return default


#: Units of a size in an environment variable (``env_size``): K, M, G, T and KiB ... TiB are
#: powers of 1024; KB, MB, GB, TB powers of 1000; B bytes.
_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
               "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
               "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12}
_SIZE = re.compile(r"(\d(?:_?\d)*(?:\.\d*)?|\.\d+)(e[+-]?\d+)?\s*([a-z]*)\Z", re.I)
#: Forms ``env_size`` accepts, as its warning names them.
SIZE_FORMS = ("a whole number of bytes (268435456, or 1e9), or a number with a unit: K, M, G, "
              "T or KiB, MiB, GiB, TiB (powers of 1024: 256M, 1.5GiB), KB, MB, GB, TB "
              "(powers of 1000), in any case")
_warned_env = set()           # (variable, value) already warned about


def parse_size(text):
    """The number of bytes ``text`` says (``SIZE_FORMS``), or None when it is not such a size:
    not a whole, non-negative number of bytes below 2**63 in one of those forms."""
    from decimal import Decimal, InvalidOperation
    m = _SIZE.match(text.strip())
    if m is None or m.group(3).lower() not in _SIZE_UNITS:
        return None
    try:
        value = Decimal(m.group(1) + (m.group(2) or "")) * _SIZE_UNITS[m.group(3).lower()]
    except InvalidOperation:
        return None
    if not value.is_finite() or value >= 1 << 63 or value != value.to_integral_value():
        return None
    return int(value)


def size_text(nbytes):
    """``256 MiB``, ``8 KiB``, ``1000 bytes``: a size as messages write it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} bytes"


def env_size(name, default):
    """The size in bytes that the environment variable ``name`` sets, or ``default`` when it is
    unset or empty.  A value that is not a size (``parse_size``) costs one warning, naming the
    variable, its value and the forms accepted, and gives ``default``: a setting read while
    gpureplace is imported must never make the import fail."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    value = parse_size(raw)
    if value is not None:
        return value
    if (name, raw) not in _warned_env:
        _warned_env.add((name, raw))
        message = (f"gpureplace ignores {name}={raw!r}: it is not a size. Give {SIZE_FORMS}. "
                   f"Using the default, {size_text(default)}.")
        try:
            warnings.warn(message, UserWarning, stacklevel=_outside_stacklevel())
        except Warning:             # (-W error: said all the same, and the import goes on)
            print(f"UserWarning: {message}", file=sys.stderr)
    return default


def _outside_stacklevel():
    """The ``stacklevel`` that makes a warning of the caller of this function name the first
    frame outside gpureplace and the import machinery: the user's ``import gpureplace``."""
    from .errors import _in_package

    def machinery(frame):           # (what ``warnings`` itself skips, and does not count)
        name = frame.f_code.co_filename
        return "importlib" in name and "_bootstrap" in name
    frame, level = sys._getframe(1), 1
    while frame is not None and _in_package(frame.f_code.co_filename):
        frame = frame.f_back
        while frame is not None and machinery(frame):
            frame = frame.f_back
        level += 1
    return level


def _host_arrays_mode(value):
    mode = str(value).strip().lower() or "warn"
    if mode not in HOST_ARRAYS:
        raise ValueError(f"gpureplace host_arrays must be one of {', '.join(HOST_ARRAYS)}, got "
                         f"{value!r} (GPUREPLACE_HOST_ARRAYS or settings.host_arrays)")
    return mode


settings = Settings()
