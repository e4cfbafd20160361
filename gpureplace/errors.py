"""Exceptions raised by gpureplace.

Every error a user can cause names the thing at fault: the Python function, its file (or notebook
cell) and line, and, for compile errors, the chain of calls from the kernel down to it.  The long
detail from the front end (Numba's own message) is kept on the exception for those who want it.
"""

from __future__ import annotations

import functools
import linecache
import os
import sys

#: Set by the IPython extension: (filename, line) -> "Cell In[3], line 5".
location_formatter = None
#: Set by the IPython extension: (filename, line) -> the line as the user typed it (a magic's
#: line rather than IPython's ``get_ipython().run_line_magic(...)``), or None.
source_formatter = None

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def describe_location(filename, lineno, plain=None):
    """How messages name a line of the user's code: ``Cell In[3], line 5`` for a notebook cell
    (the IPython extension's ``location_formatter``), else ``plain`` (default ``file, line 5``)."""
    fmt = location_formatter
    if fmt is not None:
        try:
            return fmt(filename, lineno)
        except Exception:            # naming a place must never fail the error that names it
            pass
    return plain if plain is not None else f"{filename}, line {lineno}"


def type_text(ty):
    """A Numba type as a signature writes it: ``float32[::1]`` for a C-contiguous array,
    ``float64[:, :]`` for any layout; other types as Numba prints them."""
    if type(ty).__name__ != "Array" or not hasattr(ty, "layout"):
        return str(ty)
    dims = [":"] * ty.ndim
    if dims and ty.layout == "C":
        dims[-1] = "::1"
    elif dims and ty.layout == "F":
        dims[0] = "::1"
    text = f"{ty.dtype}[{', '.join(dims)}]"
    return text if getattr(ty, "mutable", True) else f"readonly {text}"


def signature_text(name, argtypes):
    """``saxpy(float32, float32[::1], float32[::1])``: a specialisation as messages name it."""
    return f"{name}({', '.join(type_text(t) for t in argtypes)})"


def _in_package(filename):
    """gpureplace's own files, and the code it generates (``<gpureplace launcher>``,
    ``<cuda.reduce(sum)>``)."""
    if filename.startswith(("<gpureplace", "<cuda.")):
        return True
    return not filename.startswith("<") and os.path.abspath(filename).startswith(_PACKAGE_DIR)


def user_stacklevel():
    """The ``stacklevel`` that makes ``warnings.warn``, called by the caller of this function,
    name the first frame outside gpureplace: the user's line that led there."""
    import sys
    frame, level = sys._getframe(1), 1
    while frame is not None and _in_package(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


@functools.lru_cache(maxsize=None)
def _library_dirs():
    import sysconfig
    paths = sysconfig.get_paths()
    return tuple(os.path.abspath(paths[k]) + os.sep
                 for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths)


def is_library_file(filename):
    """Whether ``filename`` is a file of the standard library or of an installed package (not
    the user's code: IPython's frames above a cell, ``math``, ``numpy``)."""
    return not filename.startswith("<") and os.path.abspath(filename).startswith(_library_dirs())


def _is_users(filename):
    """A frame of the user's code: neither gpureplace's nor library code."""
    return not _in_package(filename) and not is_library_file(filename)


def call_site(tb):
    """``(filename, lineno)`` of the line of the user's code that called into gpureplace (a launch,
    ``kernel.compile(...)``): along the traceback ``tb``, the last user frame before the first
    frame of the gpureplace package (the innermost user frame when none is gpureplace's), or
    None."""
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    first = next((i for i, (f, _) in enumerate(frames) if _in_package(f)), len(frames))
    users = [fl for fl in frames[:first] if _is_users(fl[0])]
    return users[-1] if users else None


def _inner_user_line(tb, outer):
    """``(function, filename, lineno)`` of the innermost user frame past the first gpureplace
    frame (kernel code the simulator ran, a user callback), or None."""
    found, entered = None, False
    while tb is not None:
        code = tb.tb_frame.f_code
        if _in_package(code.co_filename):
            entered = True
        elif entered and _is_users(code.co_filename) and \
                (code.co_filename, tb.tb_lineno) != outer:
            found = (code.co_name, code.co_filename, tb.tb_lineno)
        tb = tb.tb_next
    return found


def _source_line(filename, lineno):
    line = None
    if source_formatter is not None:
        try:
            line = source_formatter(filename, lineno)
        except Exception:            # quoting a line must never fail the error that quotes it
            line = None
    if line is None:
        line = linecache.getline(filename, lineno)
    line = line.strip()
    return f": {line}" if line else ""


def render_one_block(exc):
    """What IPython shows for an error of a launch (or another call into gpureplace): its type
    and message, and the user's line that made the call, instead of a traceback through
    gpureplace's own files (the lines of ``_render_traceback_``)."""
    lines = [f"{type(exc).__name__}: {exc}"]
    lines += [str(note) for note in getattr(exc, "__notes__", ()) or ()]
    outer = call_site(exc.__traceback__)
    inner = _inner_user_line(exc.__traceback__, outer)
    if inner is not None:
        where = describe_location(inner[1], inner[2])
        if where not in lines[0]:
            lines.append(f"  in {inner[0]}, {where}{_source_line(inner[1], inner[2])}")
    if outer is not None:
        lines.append(f"  at {describe_location(*outer)}{_source_line(*outer)}")
    cause = exc.__cause__
    if cause is not None and not isinstance(cause, GPUReplaceError):
        lines.append(f"  caused by {type(cause).__name__}: {cause}")
    return lines


def render_as_one_block(exc):
    """Give ``exc`` -- of any class, raised to the user by a launch: kernel code the simulator
    ran, an index out of bounds -- the rendering of ``render_one_block`` in IPython.  Its class
    stays what it is (code catches ``IndexError``); the method IPython looks for is set on the
    instance.  Returns ``exc``."""
    if getattr(exc, "_render_traceback_", None) is None:
        try:
            exc._render_traceback_ = functools.partial(render_one_block, exc)
        except (AttributeError, TypeError):   # a class without an instance dictionary
            pass
    return exc


class GPUReplaceError(Exception):
    """Base class of every gpureplace error.  In IPython each shows as one block: the type, the
    message and the user's line that called gpureplace (``render_one_block``), not a traceback
    through gpureplace's own files."""

    def _render_traceback_(self):
        return render_one_block(self)


class CompileError(GPUReplaceError):
    """A kernel or device function could not be compiled.

    Attributes
    ----------
    function : str      qualified name of the Python function at fault
    filename : str      its file, or the IPython cell name (``<ipython-input-..>``)
    lineno   : int      line in that file (0 when unknown)
    chain    : tuple    call chain from the kernel: ``("saxpy", "scale", ...)``
    reason   : str      short, readable reason
    detail   : str      the full front-end message, for debugging
    """

    def __init__(self, reason, *, function="", filename="", lineno=0, chain=(), detail=""):
        self.reason = reason
        self.function = function
        self.filename = filename
        self.lineno = lineno
        self.chain = tuple(chain)
        self.detail = detail
        super().__init__(self._message())

    def __str__(self):
        return self._message()

    def _message(self):
        where = ""
        if self.function:
            where = f"in {self.function}"
            if self.filename:
                where += f" ({describe_location(self.filename, self.lineno)})"
            where += ": "
        msg = f"{where}{self.reason}"
        if len(self.chain) > 1:
            msg += "\n  call chain: " + " -> ".join(self.chain)
        return msg

    def _render_traceback_(self):
        # IPython shows this instead of a traceback through the compiler's frames.
        return [f"{type(self).__name__}: {self._message()}"]


class UnknownArchitecture(CompileError, ValueError):
    """An architecture the compiler does not know (``sm_200``, ``sm_9``): a compile error, and a
    ``ValueError`` like the other malformed ``cc`` / ``arch`` values."""


class KernelReturnsValue(CompileError, TypeError):
    """A kernel whose body returns a value (a ``TypeError`` too, as numba-cuda raises)."""


class LaunchError(GPUReplaceError, ValueError):
    """A launch was refused before anything ran (bad configuration or arguments)."""


class DriverRefusal(LaunchError):
    """A launch the CUDA driver itself would refuse (``CUDA_ERROR_INVALID_VALUE`` ...), refused
    before it is made, with a message that says why.  Made by ``driver_refusal``: where
    cuda-python's ``cuda.core`` is installed, the class raised is also its ``CUDAError``, which
    numba-cuda code catches around launches."""


@functools.lru_cache(maxsize=None)
def _refusal_class():
    """DriverRefusal, made also cuda.core's CUDAError where cuda-core is installed (once)."""
    try:
        from cuda.core._utils.cuda_utils import CUDAError
    except Exception:           # cuda-core not installed (or another layout): ours alone
        return DriverRefusal
    return type("DriverRefusal", (DriverRefusal, CUDAError),
                {"__doc__": DriverRefusal.__doc__, "__module__": __name__})


def driver_refusal(message, code="CUDA_ERROR_INVALID_VALUE"):
    """A ``DriverRefusal`` (also ``cuda.core``'s ``CUDAError`` where that is installed) whose
    message ends with the driver's error code."""
    return _refusal_class()(f"{message} ({code})")


class SignatureError(LaunchError, TypeError):
    """Arguments that fit none of a kernel's declared signatures, or two equally."""


class LibdeviceNotFound(GPUReplaceError, FileNotFoundError):
    """No libdevice bitcode could be found."""


class NoDeviceError(GPUReplaceError, RuntimeError):
    """A launch needs a GPU (and CuPy) and none was found."""


class DeviceFunctionError(GPUReplaceError, TypeError, RuntimeError):
    """A device function used as a kernel (launched, or asked for a kernel's properties).  A
    TypeError, and a RuntimeError as numba-cuda raises for these."""


class CudaDriverError(GPUReplaceError, RuntimeError):
    """CUDA cannot be used here (numba-cuda's ``cudadrv.error.CudaDriverError``): e.g. in a
    process forked after its parent had initialised CUDA."""


class PerformanceWarning(UserWarning):
    """Code that works but costs more than it needs to (e.g. a host array copied around each
    launch).  The warnings gpureplace emits are also Numba's ``NumbaPerformanceWarning``, so
    filters written for numba-cuda keep working."""


def setting_hint(name, value):
    """How the user sets ``name`` to ``value`` where they are: ``%config GPUReplace.name = value``
    in a shell with the extension loaded, else ``gpureplace.config.settings.name = value``."""
    ext = sys.modules.get("gpureplace.ipython.extension")
    if ext is not None and ext.loaded() is not None:
        return f"%config GPUReplace.{name} = {value!r}"
    return f"gpureplace.config.settings.{name} = {value!r}"


def close_names(name, candidates):
    """`` (did you mean a, b, c?)`` naming up to three of ``candidates`` close to the misspelt
    ``name``, or "" where none is."""
    import difflib
    close = difflib.get_close_matches(name, list(candidates), n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""
