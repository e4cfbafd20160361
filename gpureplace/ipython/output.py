"""Device ``printf`` output in the cell that launched the kernel: the CUDA driver writes it to file
descriptor 1 at synchronisation points, which in a notebook kernel is not the cell's stdout."""

from __future__ import annotations



class FdCapture:
    """Captures what the process writes to file descriptor 1 (where the CUDA driver prints device
    ``printf`` output, at synchronisation points), to hand it to the cell's own stdout.

    A notebook kernel's ``sys.stdout`` is a message stream, not fd 1: without this, device output
    would reach the Jupyter server's terminal (or another cell), not the cell that launched the
    kernel.
    """

    def __init__(self):
        self._saved = None
        self._file = None

    @staticmethod
    def _flush_c():
        import ctypes
        try:
            ctypes.CDLL(None).fflush(None)
        except (OSError, AttributeError):
            pass

    @property
    def active(self):
        return self._saved is not None

    def start(self):
        if self._saved is not None:
            return
        import os
        import sys
        import tempfile
        try:
            sys.stdout.flush()
        except (AttributeError, ValueError):
            pass
        self._flush_c()
        file = tempfile.TemporaryFile()
        saved = None
        try:
            saved = os.dup(1)
            os.dup2(file.fileno(), 1)
        except BaseException:
            if saved is not None:
                os.close(saved)
            file.close()
            raise
        self._file, self._saved = file, saved

    def stop(self):
        """Restore fd 1; return what was written meanwhile."""
        if self._saved is None:
            return ""
        import os
        self._flush_c()
        os.dup2(self._saved, 1)
        os.close(self._saved)
        self._saved = None
        self._file.seek(0)
        text = self._file.read().decode("utf-8", "replace")
        self._file.close()
        self._file = None
        return text
