"""Exceptions raised in the device code of a simulated kernel.

A thread that executes a ``raise`` (or fails an ``assert``) of the kernel's code stops there, as
on the GPU; so does one that meets an error Numba's compiled code raises itself: a ``range``
with a step of 0 (ValueError), a tuple indexed out of its range (IndexError), a division or
modulo by zero under Python's error model (``debug=True``: ZeroDivisionError).  After the launch
the first of them (in block, then thread order: threaded runs finish in any order) is either
reported in one ``KernelRaisedWarning`` or, for a ``debug=True`` kernel, raised with the
position a debug kernel on the GPU gives it (compiler/exceptions.py).  Any other error ends the
launch as an error of the simulator.
"""

from __future__ import annotations

import dis
import os
import threading
import warnings

import numpy as np

from ..errors import describe_location, render_as_one_block
from .arrays import wrap_int


class KernelRaisedWarning(RuntimeWarning):
    """Threads of a simulated kernel executed a raise (or failed an assert) and stopped."""


_RAISE_OPS = frozenset(dis.opmap[name] for name in ("RAISE_VARARGS", "RERAISE")
                       if name in dis.opmap)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_OPERATORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "operators.py")
_DEVICE_MARK = "_gpureplace_device_error"


def device_error(exc):
    """``exc``, marked as an exception the compiled device code raises itself (Numba's own
    checks, such as ``range()`` with a step of 0): raised from the simulator's code on behalf of
    the kernel's line, it stops the thread as a raise statement there would."""
    setattr(exc, _DEVICE_MARK, True)
    return exc


def _kernel_code(frame):
    """Whether ``frame`` runs the kernel's code as the simulator re-created it (its device
    functions and helpers too): not the simulator's, nor a library's that it calls as it is
    (Numba's, NumPy's, the standard library's: ``devicecode.is_library``)."""
    from .resolve import SimGlobals
    return isinstance(frame.f_globals, SimGlobals) and \
        not frame.f_code.co_filename.startswith(_PACKAGE_DIR)


def device_raise(exc):
    """(function, file, line) of the kernel's code (not the simulator's) where the device would
    raise ``exc`` -- a raise or assert statement, or an error Numba's compiled code raises
    itself -- or None for any other error (an error of the simulator, or of its user; or of a
    library's function that the kernel's code called, which failed on the simulator's values:
    the device runs Numba's compiled version of it instead)."""
    user, last = _innermost(exc)
    if user is None:
        return None
    code = user.tb_frame.f_code
    at = (code.co_name, code.co_filename, user.tb_lineno)
    if getattr(exc, _DEVICE_MARK, False):
        return at
    if last is user:                         # raised by the kernel's own line
        if 0 <= user.tb_lasti < len(code.co_code) and code.co_code[user.tb_lasti] in _RAISE_OPS:
            return at
        if type(exc) is IndexError and exc.args == ("tuple index out of range",):
            return at                        # t[i] out of range: Numba raises the same
        return None
    if isinstance(exc, ZeroDivisionError) and \
            os.path.abspath(last.tb_frame.f_code.co_filename) == _OPERATORS:
        return at                            # a division by zero under Python's error model
    return None


def _innermost(exc):
    """The traceback entries of ``exc``'s innermost frame of the kernel's code (or None) and of
    its innermost frame."""
    tb = exc.__traceback__
    user = last = None
    while tb is not None:
        if _kernel_code(tb.tb_frame):
            user = tb
        last = tb
        tb = tb.tb_next
    return user, last


def library_failure(exc):
    """``(library's place, kernel's place)``, each ``function (file:line)``, where ``exc`` was
    raised inside a library's code (not the simulator's) that the kernel's code called; else
    None.  Such an error is the library's or the simulator's, never a raise of the kernel's."""
    user, last = _innermost(exc)
    if user is None or last is user or \
            last.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        return None

    def place(entry):
        code, line = entry.tb_frame.f_code, entry.tb_lineno
        where = describe_location(code.co_filename, line, f"{code.co_filename}:{line}")
        return f"{code.co_name} ({where})"
    return place(last), place(user)


class Raises:
    """The raises of one launch: (thread order, exception, where, (tid, ctaid), function, file,
    line)."""

    def __init__(self, name):
        self.name = name
        self._lock = threading.Lock()
        self._records = []

    def note(self, exc, thread, where):
        """Whether ``exc`` is raised by the kernel's device code (``device_raise``; then it is
        noted for ``thread``, a ThreadState or None, and the thread simply stops)."""
        at = device_raise(exc)
        if at is None:
            return False
        order = (tuple(reversed(thread.bid)), thread.linear) if thread is not None else ()
        position = (list(thread.tid), list(thread.bid)) if thread is not None else None
        with self._lock:
            self._records.append((order, exc, where, position, *at))
        return True

    def _first(self):
        return min(self._records, key=lambda r: r[0]) if self._records else None

    def warn(self, py_func):
        """One warning naming the raise of the first thread, if threads raised."""
        first = self._first()
        if first is None:
            return
        _, exc, where, _, _, filename, line = first
        n = len(self._records)
        what = f"{type(exc).__name__}({', '.join(repr(_host_value(a)) for a in exc.args)})"
        warnings.warn_explicit(
            f"{self.name}: {n} thread{'s' * (n > 1)} raised {what} and stopped there (the first: "
            f"{where}); on the GPU a raised exception stops its thread just so, unreported "
            f"(numba-cuda reports it only with debug=True): to see it there, test the condition "
            f"with an if and write a flag into an array argument",
            KernelRaisedWarning, filename, line, module=py_func.__module__ or filename,
            registry=py_func.__globals__.setdefault("__warningregistry__", {}))

    def raise_first(self):
        """debug=True: the first thread's exception, raised after the launch with the thread's
        position, as a debug kernel's on the GPU."""
        first = self._first()
        if first is None:
            return
        _, exc, _, position, function, filename, line = first
        pos = f"tid={position[0]} ctaid={position[1]}" if position else ""
        args = tuple(_host_value(a) for a in exc.args)
        where = describe_location(filename, line, f"file {filename}, line {line}")
        # (the function whose line raised, a device function's too, as numba-cuda names it)
        prefix = f"In function {function!r}, {where}, {pos}"
        exc.args = (f"{prefix}: {args[0]}",) + tuple(args[1:]) if args else (prefix,)
        raise render_as_one_block(exc)


def _host_value(arg):
    """An argument of a raised exception as the host gets it from a debug kernel: the constant
    of the raise statement itself (the compiled code takes only constants, and numba-cuda
    raises the exception with them), where the simulator ran the statement with the constant
    as Numba types it (``devicecode.device_const``: ``3`` an int64, ``2.5`` a float64)."""
    cls = type(arg)
    if cls is _DEVICE_INT64:
        return int(arg)
    if cls is np.float64:
        return float(arg)
    if cls is np.complex128:
        return complex(arg)
    if cls is tuple:
        return tuple(_host_value(a) for a in arg)
    return arg


_DEVICE_INT64 = type(wrap_int(0, np.dtype(np.int64)))
