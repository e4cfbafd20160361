"""Interrupting a simulated launch (Ctrl-C, Jupyter's "Interrupt kernel"): KeyboardInterrupt comes
at once, every thread of the launch stops, host arrays are as they were, and the next launch runs.
"""

import _thread
import contextlib
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.config import settings

DELAY = 0.5
FOREVER = 10**9


@pytest.fixture(autouse=True)
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


@cuda.jit
def with_syncthreads(out, n):
    acc = 0.0
    for _ in range(n):
        acc += 1.0
        cuda.syncthreads()
    out[cuda.grid(1)] = acc


@cuda.jit
def without_barriers(out, n):                  # runs its threads one after another
    acc = 0.0
    for _ in range(n):
        acc += 1.0
        out[cuda.grid(1)] = acc


@cuda.jit
def long_loop_between_barriers(out, n):        # the running thread never reaches a barrier
    cuda.syncthreads()
    acc = 0.0
    for _ in range(n):
        acc += 1.0
        out[cuda.grid(1)] = acc
    cuda.syncthreads()


@cuda.jit
def with_grid_sync(out, n):                    # cooperative: every block at once
    g = cuda.cg.this_grid()
    acc = 0.0
    for _ in range(n):
        acc += 1.0
        out[cuda.grid(1)] = acc
        g.sync()


def _sigint():
    os.kill(os.getpid(), signal.SIGINT)


@contextlib.contextmanager
def _interrupted(send):
    """The block must end in KeyboardInterrupt: ``send`` interrupts it after ``DELAY``."""
    done = threading.Event()

    def fire():
        if not done.wait(DELAY):
            send()

    timer = threading.Thread(target=fire, daemon=True)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            yield
    finally:
        done.set()
        timer.join()


def _simulator_threads():
    return [t.name for t in threading.enumerate() if t.name.startswith("gpureplace-sim")]


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT through os.kill")
@pytest.mark.parametrize("send", [_sigint, _thread.interrupt_main], ids=["SIGINT", "interrupt_main"])
@pytest.mark.parametrize("kernel", [with_syncthreads, without_barriers, long_loop_between_barriers,
                                    with_grid_sync], ids=lambda k: k.__name__)
def test_an_interrupt_stops_the_launch_and_every_thread(kernel, send):
    grid, block = (4, 16) if kernel is with_grid_sync else (1, 64)
    n = grid * block
    kernel[grid, block](np.zeros(n), 3)          # compiled before the interrupted launch
    before = np.arange(n, dtype=np.float64)
    out = before.copy()
    start = time.monotonic()
    with _interrupted(send):
        kernel[grid, block](out, FOREVER)
    assert time.monotonic() - start < DELAY + 1.5
    assert _simulator_threads() == []
    np.testing.assert_array_equal(out, before)   # as the GPU leaves a host array
    time.sleep(0.1)
    np.testing.assert_array_equal(out, before)   # and no thread writes it afterwards
    again = np.zeros(n)
    kernel[grid, block](again, 3)
    np.testing.assert_array_equal(again, np.full(n, 3.0))
    assert _simulator_threads() == []


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT through os.kill")
def test_an_interrupted_launch_says_so_in_one_block():
    """(IPython showed 60-290 lines of the simulator's, the compiler's and Numba's frames)"""
    without_barriers[1, 64](np.zeros(64), 3)
    done = threading.Event()
    timer = threading.Thread(target=lambda: done.wait(DELAY) or _sigint(), daemon=True)
    timer.start()
    try:
        without_barriers[1, 64](np.zeros(64), FOREVER)
    except KeyboardInterrupt as exc:
        caught = exc
    finally:
        done.set()
        timer.join()
    assert str(caught) == "without_barriers[1, 64] interrupted while the simulator ran it"
    block = caught._render_traceback_()
    assert len(block) <= 3 and block[0].startswith("KeyboardInterrupt: without_barriers[1, 64]")


def test_an_interrupt_as_the_launch_holds_interrupts_back_leaves_ctrl_c_working(monkeypatch):
    """An interrupt that came just after ``interrupts_held`` set its handler, before its
    ``try``, left that handler set for ever: every later Ctrl-C went to a list nobody reads,
    and the next endless kernel could not be stopped (a CI run hung so)."""
    from gpureplace.simulator import stopping
    before = signal.getsignal(signal.SIGINT)
    real = signal.signal

    def interrupted_as_it_is_set(signum, handler):
        old = real(signum, handler)
        if handler is not before:
            raise KeyboardInterrupt             # (the interrupt arrives right then)
        return old
    monkeypatch.setattr(stopping.signal, "signal", interrupted_as_it_is_set)
    with pytest.raises(KeyboardInterrupt):
        with stopping.interrupts_held():
            pass
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGINT) is before
