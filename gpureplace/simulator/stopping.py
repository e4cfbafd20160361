"""Ending a simulated launch's worker threads (simulator/runner.py): after it finished, and
after an interrupt (Ctrl-C, Jupyter's "Interrupt kernel"), when every thread must stop before
the launch puts the host arrays back."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import threading
import time
import warnings

from .blocks import Abort


def worker(work, arg):
    """A worker thread's body: ``work(arg)``, ended quietly by the Abort sent to stop it."""
    try:
        work(arg)
    except Abort:
        pass


def wait(event):
    """``event.wait()``, in short waits: an interrupt that comes as no signal (IPython's, through
    ``_thread.interrupt_main``; any on Windows) is seen only when the wait returns."""
    while not event.wait(0.05):
        pass


#: after an interrupt: how long threads still running kernel code get to reach a barrier before
#: they are sent an Abort, and how long the launch waits for them in all
STOP_GRACE_S = 0.1
STOP_WAIT_S = 2.0


def stop_workers(sim, workers, gates, blocks, grid_barrier=None):
    """End a launch's worker threads.  After a normal end they are all waiting for a turn that
    never comes; after an interrupt (KeyboardInterrupt in the launching thread) the blocks still
    running are aborted, so that threads waiting at a barrier unwind, and a thread still in the
    kernel's code after ``STOP_GRACE_S`` (a long loop, a spin-wait that would hang) is sent an
    Abort as an asynchronous exception.  A thread that would run on afterwards could change
    arrays that the failed launch has put back."""
    interrupted = [blk for blk in blocks if not blk.done.is_set()]
    for blk in interrupted:
        blk.abort(Abort())
    if interrupted and grid_barrier is not None:
        grid_barrier.abort()
    start = time.monotonic()
    sent = set()
    while True:
        alive = [w for w in workers if w.is_alive()]
        if not alive:
            return
        for gate in gates:                       # a turn that ends the worker (or unwinds it)
            if gate.locked():
                try:
                    gate.release()
                except RuntimeError:             # released by its block meanwhile
                    pass
        waited = time.monotonic() - start
        if waited > STOP_WAIT_S:
            break
        if interrupted and waited > STOP_GRACE_S:
            for w in alive:
                if w.ident in sim.in_kernel and w.ident not in sent and _send_abort(w):
                    sent.add(w.ident)
        alive[0].join(0.005)
    warnings.warn(f"{len(alive)} thread(s) of the interrupted simulated kernel {sim.name} did "
                  f"not stop (each is in a call that cannot be interrupted); they end when it "
                  f"returns", RuntimeWarning, stacklevel=2)


@contextlib.contextmanager
def interrupts_held():
    """Hold an interrupt (SIGINT: Ctrl-C, Jupyter's) back until the block is done, then raise it:
    a thread whose ``start()`` is interrupted may run or not, and one that runs would wait for
    its turn forever."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is None:     # (a handler Python did not set)
        yield
        return
    held = []
    previous = signal.getsignal(signal.SIGINT)
    try:
        # (set inside the try: an interrupt that comes just after the handler is set, before
        # the try, left it set for ever -- every later Ctrl-C went to a list nobody reads, and
        # the next endless kernel could not be stopped)
        signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held:
            signal.raise_signal(signal.SIGINT)


def _send_abort(thread):
    """Raise Abort in ``thread`` at its next Python instruction (CPython's asynchronous
    exception; False where that is not available)."""
    try:
        set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    except AttributeError:
        return False
    return set_async_exc(ctypes.c_ulong(thread.ident), ctypes.py_object(Abort)) == 1
