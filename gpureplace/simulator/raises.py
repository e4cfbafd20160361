"""Raise statements executed by threads of a simulated kernel.

A thread that executes a ``raise`` (or fails an ``assert``) of the kernel's code stops there, as
on the GPU.  After the launch the first of them (in block, then thread order: threaded runs
finish in any order) is either reported in one ``KernelRaisedWarning`` or, for a
``debug=True`` kernel, raised with the position a debug kernel on the GPU gives it
(compiler/exceptions.py).  Any other error ends the launch as an error of the simulator.
"""

from __future__ import annotations

import dis
import os
import threading
import warnings

from ..errors import describe_location, render_as_one_block


class KernelRaisedWarning(RuntimeWarning):
    """Threads of a simulated kernel executed a raise (or failed an assert) and stopped."""


_RAISE_OPS = frozenset(dis.opmap[name] for name in ("RAISE_VARARGS", "RERAISE")
                       if name in dis.opmap)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def raise_statement(exc):
    """(file, line) of the raise or assert statement in the kernel's code (not the
    simulator's) that raised ``exc``, or None for any other error."""
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    if code.co_filename.startswith(_PACKAGE_DIR) or not 0 <= tb.tb_lasti < len(code.co_code):
        return None
    if code.co_code[tb.tb_lasti] not in _RAISE_OPS:
        return None
    return code.co_filename, tb.tb_lineno


class Raises:
    """The raises of one launch: (thread order, exception, where, (tid, ctaid), file, line)."""

    def __init__(self, name):
        self.name = name
        self._lock = threading.Lock()
        self._records = []

    def note(self, exc, thread, where):
        """Whether ``exc`` comes from a raise statement of the kernel's code (then it is noted
        for ``thread``, a ThreadState or None, and the thread simply stops)."""
        at = raise_statement(exc)
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
        _, exc, where, _, filename, line = first
        n = len(self._records)
        what = f"{type(exc).__name__}({', '.join(map(repr, exc.args))})"
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
        _, exc, _, position, filename, line = first
        pos = f"tid={position[0]} ctaid={position[1]}" if position else ""
        args = exc.args
        where = describe_location(filename, line, f"file {filename}, line {line}")
        prefix = f"In function {self.name!r}, {where}, {pos}"
        exc.args = (f"{prefix}: {args[0]}",) + tuple(args[1:]) if args else (prefix,)
        raise render_as_one_block(exc)
