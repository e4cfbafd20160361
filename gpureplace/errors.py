"""Exceptions raised by gpureplace.

Every error a user can cause names the thing at fault: the Python function, its file (or notebook
cell) and line, and, for compile errors, the chain of calls from the kernel down to it.  The long
detail from the front end (Numba's own message) is kept on the exception for those who want it.
"""

from __future__ import annotations


#: Set by the IPython extension: (filename, line) -> "Cell In[3], line 5".
location_formatter = None


class GPUReplaceError(Exception):
    """Base class of every gpureplace error."""


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
                fmt = location_formatter
                loc = fmt(self.filename, self.lineno) if fmt else \
                    f"{self.filename}, line {self.lineno}"
                where += f" ({loc})"
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


_refusal_class = []


def driver_refusal(message, code="CUDA_ERROR_INVALID_VALUE"):
    """A ``DriverRefusal`` (also ``cuda.core``'s ``CUDAError`` where that is installed) whose
    message ends with the driver's error code."""
    if not _refusal_class:
        try:
            from cuda.core._utils.cuda_utils import CUDAError
        except Exception:           # cuda-core not installed (or another layout): ours alone
            cls = DriverRefusal
        else:
            cls = type("DriverRefusal", (DriverRefusal, CUDAError),
                       {"__doc__": DriverRefusal.__doc__, "__module__": __name__})
        _refusal_class.append(cls)
    return _refusal_class[0](f"{message} ({code})")


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
