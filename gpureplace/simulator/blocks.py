"""One block of threads: its shared memory, its barrier and its warps' rendezvous.

Every synchronising operation of a block shares one condition variable, so the block knows at any
moment how many of its live threads are blocked; when all of them are (a ``syncthreads`` that some
thread never reaches, a warp operation whose mask names a lane that never calls it), that is a
deadlock on the device too, and the simulator says so instead of hanging.

A thread can also wait without blocking: a spin-wait on a flag that another thread sets (an atomic
that reads it in a loop, a fence, ``nanosleep``).  Volta and later GPUs guarantee that the other
threads, diverged lanes of its warp included, make progress meanwhile (independent thread
scheduling), so such a thread hands over at those points (``spin``: at every fence and nanosleep,
every few atomics).  One that spins with nothing else of its block left to
run, in the same state each time, waits for something no thread of its block can do: another block
(the launch then runs every block at once), or nothing at all (a clear error: the GPU would hang).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque

import numpy as np


class KernelDeadlock(RuntimeError):
    pass


class Abort(BaseException):
    """Unwinds the other threads of a block after one of them failed."""


class NeedThreads(BaseException):
    """A barrier or warp operation reached in a sequential run, or a thread that spins there
    waiting for another (the launch reruns with threads)."""


class NeedGrid(BaseException):
    """A thread spins waiting for what no thread of its block can do, in a run that takes the
    blocks one after another: it may wait for a later block (the launch reruns with every block
    at once, the simulator's grid mode)."""


#: a thread hands over once its spin points cost SPIN_BUDGET: an atomic that changed memory
#: costs 1, one that changed nothing (a read of a flag, a failed cas) SPIN_UNCHANGED, a fence or a
#: nanosleep the whole budget -- often enough for a spin loop, rarely enough for a histogram's
#: loop of atomics (each hand-over costs a switch of OS threads)
SPIN_BUDGET = 256
SPIN_UNCHANGED = 8
#: a thread that spins with nothing else of its block to run: its kernel frames' state is
#: compared every SPIN_CHECK_EVERY spins, and found the same SPIN_CHECKS times in a row, it waits
#: for something its block cannot do
SPIN_CHECK_EVERY = 256
SPIN_CHECKS = 4
#: in grid mode (every block at once) such a thread may wait for another block's plain stores,
#: which the simulator does not see: it is stuck only once nothing happened in the whole launch
#: (an atomic that changed memory, a barrier passed, a thread finished) for this long
GRID_SPIN_TIMEOUT_S = 20.0


class _Spin:
    """What a thread did at its spin points."""

    __slots__ = ("count", "alone", "state", "same", "since", "progress", "names")

    def __init__(self):
        self.count = 0           # what its spin points cost since it last handed over
        self.alone = 0           # spins with nothing else of its block to run
        self.state = None        # its state at the last check (frames, what it last saw)
        self.same = 0            # checks in a row that found the same state
        self.since = None        # grid mode: when the launch last did anything, as seen here
        self.progress = None
        self.names = set()       # the operations it spins at since it last handed over


class ThreadState:
    __slots__ = ("tid", "bid", "linear", "lane", "warp", "block", "gate", "finished", "spin",
                 "spinning")

    def __init__(self, tid, bid, linear, block, gate=None):
        self.tid = tid
        self.bid = bid
        self.linear = linear
        self.lane = linear & 31
        self.warp = linear >> 5
        self.block = block
        self.gate = gate          # the worker's turn: released by whoever hands over to it
        self.finished = False
        self.spin = None          # its _Spin, from its first spin point
        self.spinning = False     # at a spin point (elsewhere than any activemask call)


class _WarpGroup:
    __slots__ = ("mask", "arrived", "payload", "compute", "what", "waiters")

    def __init__(self, mask, compute, what):
        self.mask = mask
        self.arrived = 0
        self.payload = {}
        self.compute = compute
        self.what = what
        self.waiters = []


class Block:
    """Per-block state.

    ``threaded``: each thread of the block is a Python thread, but they run *cooperatively*: one
    at a time, handing over at barriers, warp operations, spin points (``spin``) and exits (one
    lock release per hand-over, no thundering herd, and a deterministic order).  A thread that
    must wait while no other thread can run is a deadlock.
    """

    def __init__(self, bid, block_dim, shared_bytes, threaded, launch=None):
        self.bid = bid
        self.launch = launch               # (runner.Launch: its progress, grid mode, names)
        self.nthreads = block_dim[0] * block_dim[1] * block_dim[2]
        self.shared = {}                   # call site -> SimArray (static shared memory)
        self.dynamic = bytearray(b"\xff") * shared_bytes    # (not yet written: lang/memory.py)
        self.dynamic_views = {}
        self.threaded = threaded
        self.lock = threading.Lock()       # bookkeeping once the block has been aborted
        self.live = self.nthreads
        self.runnable = deque()
        self.bar_waiters = []
        self.bar_count = 0
        self.bar_result = None
        self.bar_kind = None
        self.bar_before = None             # the waiters' before_release (a grid sync), or None
        self.bar_arriving = None           # the waiter that must run it (the others exited)
        nwarps = (self.nthreads + 31) // 32
        self.warp_live = [0] * nwarps
        for linear in range(self.nthreads):
            self.warp_live[linear >> 5] |= 1 << (linear & 31)
        self.groups = {}
        self.results = {}
        self.aborted = None                # None, or the exception that stopped the block
        self.done = threading.Event()
        self.on_done = None                # called when the block's last thread has exited
        self.threads = []
        self.spinner = None                # the running thread while it is at a spin point

    # -- scheduling -------------------------------------------------------------------------------
    def start(self, states):
        """Make ``states`` runnable and run the first (called by the launcher)."""
        self.threads = list(states)
        self.runnable.extend(self.threads)
        if self.threads:
            self.runnable.popleft().gate.release()
        else:
            self.done.set()

    def _switch(self, ts, what):
        """``ts`` waits: hand over to the next runnable thread, or report a deadlock."""
        if self.aborted is not None:
            raise Abort()
        if not self.runnable:
            self._deadlock(what)
        try:
            self.runnable.popleft().gate.release()
        except RuntimeError:
            # the launcher aborted the block from its own thread (an interrupt) and released
            # that gate first; this thread's own is released too, and it unwinds below
            pass
        ts.gate.acquire()
        if self.aborted is not None:
            raise Abort()

    def _waits(self):
        """What the block's blocked threads wait at, in words."""
        waiting = [f"{g.what} (warp {w}, mask {m:#010x}, {bin(g.arrived).count('1')} lane(s) "
                   f"arrived)" for (w, _, m), g in self.groups.items()]
        if self.bar_waiters:
            # (the thread that waits is among them: it joined before handing over)
            waiting.append(f"syncthreads ({len(self.bar_waiters)} thread(s) arrived)")
        return waiting

    def _deadlock(self, what):
        exc = KernelDeadlock(
            f"deadlock in block blockIdx={self.bid}: every live thread of the block is waiting "
            f"({'; '.join(self._waits()) or what}). A syncthreads() that not every live thread "
            f"of the block reaches, or a warp operation whose mask names lanes that never call "
            f"it (or that exited), hangs on the GPU too.")
        raise exc

    def _progress(self):
        """Something happened that a spinning thread of another block may wait for."""
        if self.launch is not None:
            self.launch.progress += 1

    # -- spin-waits ---------------------------------------------------------------------------------
    def spin(self, ts, what, seen=None, cost=SPIN_BUDGET):
        """``ts`` is at a spin point: an atomic (``what``: its name, ``seen``: the value it
        read, ``cost``: 1 or SPIN_UNCHANGED), a fence or a nanosleep (the whole budget).  A
        thread that repeats such operations may be waiting for another thread (a flag in a
        loop, a lock): every few of them it hands over to the next runnable thread of its block,
        as the other threads, diverged lanes of its warp too, run meanwhile on Volta and later
        GPUs.  A sequential run cannot hand over: a thread that keeps coming back there in the
        same state (where its frames are, their local variables) reruns the launch with
        threads."""
        sp = ts.spin
        if sp is None:
            sp = ts.spin = _Spin()
        sp.names.add(what)
        if not self.threaded:
            if self._same_state(sp, None):
                raise NeedThreads()
            return
        sp.count += cost
        if sp.count < SPIN_BUDGET:
            return
        sp.count = 0
        ts.spinning = True
        self.spinner = ts
        try:
            self._recheck_activemask(ts.warp)
            if self.runnable:
                sp.alone = sp.same = 0
                sp.names.clear()
                self.runnable.append(ts)
                self.spinner = None            # (it waits in the queue, still spinning)
                self._switch(ts, "a spin-wait")
            elif self._same_state(sp, seen):
                self._stuck(ts, sp)
            elif self.launch is not None and self.launch.grid_barrier is not None:
                time.sleep(0)                  # (every block at once: let the others run)
        finally:
            ts.spinning = False
            if self.spinner is ts:
                self.spinner = None

    def _same_state(self, sp, seen):
        """Whether the spinning thread was found in the same state (where its kernel frames
        are, their local variables, the value its atomic read) at the last SPIN_CHECKS checks:
        it repeats itself exactly, seeing the same memory each time."""
        sp.alone += 1
        if sp.alone % SPIN_CHECK_EVERY:
            return sp.same >= SPIN_CHECKS
        state = _frames_state()
        if state is not None:
            state.append(_state_value(seen))
        if state is not None and state == sp.state:
            sp.same += 1
        else:
            sp.state, sp.same = state, 0
        return sp.same >= SPIN_CHECKS

    def _stuck(self, ts, sp):
        """``ts`` spins in the same state while nothing else of its block can run."""
        launch = self.launch
        if launch is None:
            raise self._spin_error(ts, "")
        gx, gy, gz = launch.grid
        nblocks = gx * gy * gz
        barrier = launch.grid_barrier
        if barrier is None:
            # the blocks run one after another: the earlier ones have finished, and a later
            # one, which may be what it waits for, can run only with every block at once
            if self.bid == (gx - 1, gy - 1, gz - 1):
                raise self._spin_error(ts, " The GPU hangs here too.")
            if nblocks * self.nthreads <= launch.grid_mode_limit:
                raise NeedGrid()
            raise self._spin_error(ts, (
                f" It may wait for a later block, but the simulator runs the blocks of a launch "
                f"one after another when it has more than {launch.grid_mode_limit} threads "
                f"(this one has {nblocks * self.nthreads}), and CUDA does not guarantee that "
                f"blocks run at the same time either: a block that waits for a later one can "
                f"hang on the GPU too."))
        # every block at once: another block may still store what it waits for
        if len(barrier.finished) >= nblocks - 1:
            raise self._spin_error(ts, " The other blocks have finished: the GPU hangs here "
                                       "too.")
        now = time.monotonic()
        if sp.progress != launch.progress or sp.since is None:
            sp.progress, sp.since = launch.progress, now
        elif now - sp.since >= GRID_SPIN_TIMEOUT_S:
            raise self._spin_error(ts, (
                f" The other blocks run at the same time, and none of them changed memory "
                f"through an atomic, passed a barrier or finished for {GRID_SPIN_TIMEOUT_S:g} "
                f"s: the value it waits for does not come (the GPU would hang)."))
        time.sleep(0)

    def _spin_error(self, ts, tail):
        from .arrays import current_place
        names = sorted(ts.spin.names)
        others = "; ".join(self._waits())
        others = f"every other live thread of the block waits at {others}" if others else \
            "the other threads of the block have finished"
        return KernelDeadlock(
            f"thread threadIdx={ts.tid} of block blockIdx={ts.bid} spins without end in "
            f"{current_place()}: it repeats {' and '.join(names)}, seeing the same "
            f"memory each time, waiting for a change that no thread of its block can make; "
            f"{others}.{tail}")

    def abort(self, exc, me=None):
        """Stop the block: every other thread unwinds (or skips the kernel) at once.  In grid
        mode a block stopped by an error (a thread's exception, a deadlock of its own) stops
        the whole launch: it can never reach the grid barrier, which the other blocks would
        otherwise wait at for ever (``GridBarrier.fail``)."""
        with self.lock:
            if self.aborted is not None:
                return
            self.aborted = exc
            for ts in self.threads:
                if ts is not me and not ts.finished and ts.gate.locked():
                    try:
                        ts.gate.release()
                    except RuntimeError:
                        pass
        barrier = self.launch.grid_barrier if self.launch is not None else None
        if barrier is not None and not isinstance(exc, Abort):
            barrier.fail(self)

    # -- syncthreads ------------------------------------------------------------------------------
    def barrier(self, ts, kind, pred, before_release=None):
        """``kind``: None (syncthreads), 'count', 'and', 'or'; returns the reduction.
        ``before_release()`` runs in the last thread to arrive, before the others go on (the grid
        barrier waits for the other blocks there)."""
        if not self.threaded:
            if self.nthreads == 1 and before_release is None:
                return self._reduce(kind, 1 if pred else 0, 1)
            raise NeedThreads()
        if pred:
            self.bar_count += 1
        self.bar_kind = kind
        if len(self.bar_waiters) + 1 >= self.live:
            if before_release is not None:
                before_release()
            self._release_barrier(len(self.bar_waiters) + 1)
            return self.bar_result
        self.bar_waiters.append(ts)
        self.bar_before = before_release
        self._recheck_activemask(ts.warp)
        self._switch(ts, "syncthreads")
        if self.bar_arriving is ts:
            # the threads that had not arrived exited (they count as arrived, as on the GPU):
            # this one arrives for the block, as the last to arrive would have
            self.bar_arriving = None
            before_release()
            self._release_barrier(len(self.bar_waiters) + 1)
        return self.bar_result

    def _reduce(self, kind, count, n):
        if kind is None:
            return None
        if kind == "count":
            return count
        if kind == "and":
            return 1 if count == n else 0
        return 1 if count else 0

    def _release_barrier(self, n):
        self.bar_result = self._reduce(self.bar_kind, self.bar_count, n)
        self.bar_count = 0
        self.bar_before = None
        self.runnable.extend(self.bar_waiters)
        self.bar_waiters = []
        self._progress()

    # -- warps ------------------------------------------------------------------------------------
    def warp_op(self, ts, kind, mask, payload, compute, what):
        """Rendezvous of the lanes of ``ts``'s warp named in ``mask``; ``compute(group)`` returns
        ``{lane: result}`` once every live lane of the mask has arrived."""
        mask = int(mask) & 0xFFFFFFFF
        lane = ts.lane
        if not (mask >> lane) & 1:
            raise ValueError(f"{what}: the calling lane {lane} is not named in the mask "
                             f"{mask:#010x} (every lane that calls a warp operation must be "
                             f"in its mask)")
        if not self.threaded:
            if self.nthreads == 1:
                g = _WarpGroup(mask, compute, what)
                g.payload[lane] = payload
                g.arrived = 1 << lane
                return compute(g)[lane]
            raise NeedThreads()
        key = (ts.warp, kind, mask)
        g = self.groups.get(key)
        if g is None:
            g = self.groups[key] = _WarpGroup(mask, compute, what)
        g.payload[lane] = payload
        g.arrived |= 1 << lane
        rkey = (ts.warp, lane)
        if self._complete(key, g):
            self._release_group(key, g)
        else:
            g.waiters.append(ts)
            self._recheck_activemask(ts.warp)
            self._switch(ts, what)
        return self.results.pop(rkey)

    def _complete(self, key, g):
        need = g.mask & self.warp_live[key[0]]
        if _is_activemask(key):
            need &= ~self._blocked_lanes(key)
        return need & ~g.arrived == 0

    def _blocked_lanes(self, key):
        """Lanes of ``key``'s warp waiting at a barrier or in another warp operation (another
        activemask call site included), or spinning (``spin``)."""
        lanes = 0
        warp = key[0]
        for ts in self.bar_waiters:
            if ts.warp == warp:
                lanes |= 1 << ts.lane
        for ts in (*self.runnable, self.spinner):
            if ts is not None and ts.spinning and ts.warp == warp:
                lanes |= 1 << ts.lane
        for other, g in self.groups.items():
            if other[0] == warp and other != key:
                for ts in g.waiters:
                    lanes |= 1 << ts.lane
        return lanes

    def active_lanes(self, ts, site=None):
        """``cuda.activemask()`` at call site ``site``: the lanes of ``ts``'s warp that reach it
        together.

        Lanes run one at a time here, so the call is a rendezvous: it completes when every live
        lane of the warp has either called it or is waiting elsewhere (a barrier, another warp
        operation, activemask at another site: the other side of a branch) or has exited --
        those are the lanes a diverged warp would not have active.
        """
        return self.warp_op(ts, ("activemask", site), 0xFFFFFFFF, None,
                            lambda g: {lane: g.arrived for lane in range(32)
                                       if (g.arrived >> lane) & 1}, "cuda.activemask")

    def _recheck_activemask(self, warp):
        """A lane of ``warp`` started waiting: an activemask call may no longer wait for it."""
        for key, g in list(self.groups.items()):
            if key[0] == warp and _is_activemask(key) and key in self.groups and \
                    self._complete(key, g):
                self._release_group(key, g)

    def _release_group(self, key, g):
        del self.groups[key]
        out = g.compute(g)
        for lane, value in out.items():
            self.results[(key[0], lane)] = value
        self.runnable.extend(g.waiters)
        self._progress()

    # -- a thread ends ------------------------------------------------------------------------------
    def exit(self, ts):
        """``ts`` finished (or failed): wake whoever it was holding up, hand over."""
        if not self.threaded:
            return
        with self.lock:
            ts.finished = True
            self.live -= 1
            self.warp_live[ts.warp] &= ~(1 << ts.lane)
            self._progress()
            if self.aborted is not None:
                if self.live == 0:
                    self.done.set()
                return
            if self.bar_waiters and len(self.bar_waiters) >= self.live:
                if self.bar_before is None:
                    self._release_barrier(len(self.bar_waiters))
                else:
                    # a grid sync: the block arrives there in one of its threads, which waits
                    # for the other blocks (an exiting thread cannot wait for them)
                    self.bar_arriving = self.bar_waiters.pop()
                    self.runnable.append(self.bar_arriving)
            for key, g in list(self.groups.items()):
                if self._complete(key, g):
                    self._release_group(key, g)
            if self.live == 0:
                self.done.set()
                if self.on_done is not None:
                    self.on_done(self)
                return
            if self.runnable:
                self.runnable.popleft().gate.release()
                return
        # live threads remain, all of them waiting: a deadlock, reported by this thread
        try:
            self._deadlock("threads exited while others wait")
        except KernelDeadlock as exc:
            self.deadlock_error = exc
            self.abort(exc, ts)


def _is_activemask(key):
    return isinstance(key[1], tuple) and key[1][0] == "activemask"


def _frames_state():
    """Where the running thread's kernel frames are and what their local variables hold (a
    number by value, anything else by identity), or None where that cannot be told."""
    from .resolve import SimGlobals
    out = []
    f = sys._getframe(2)
    while f is not None:
        if isinstance(f.f_globals, SimGlobals):
            try:
                values = tuple((k, _state_value(v)) for k, v in f.f_locals.items())
            except Exception:                     # noqa: BLE001 (a value that cannot be told)
                return None
            out.append((f.f_code, f.f_lasti, values))
        f = f.f_back
    return out


_NUMBERS = (int, float, complex, bool, str, bytes, type(None), np.generic)


def _state_value(v):
    if isinstance(v, _NUMBERS):
        return v
    if type(v) is tuple:
        return tuple(_state_value(x) for x in v)
    return ("id", id(v))


class GridBarrier:
    """``cuda.cg.this_grid().sync()`` across the blocks of a launch that run at once (the
    simulator's grid mode): the last thread of each block to arrive waits here for the other
    blocks (threads of the block that exited count as arrived, as at a syncthreads).  A block
    that finishes while others wait (or before they arrive) can never arrive: on the GPU the
    grid hangs; here that is a ``KernelDeadlock``."""

    def __init__(self, nblocks):
        self.nblocks = nblocks
        self.arrived = 0
        self.generation = 0
        self.finished = []
        self.failed = None
        self.stopped = False           # a block failed: every thread unwinds (``fail``)
        self.blocks = []               # the launch's blocks (set by the launcher)
        self.cond = threading.Condition()

    def _deadlock(self):
        bid = self.finished[0]
        return KernelDeadlock(
            f"grid synchronisation deadlock: block blockIdx={bid} finished without reaching "
            f"cuda.cg.this_grid().sync(), which every block of the grid must reach (the GPU "
            f"hangs)")

    def arrive(self):
        with self.cond:
            if self.stopped:
                raise Abort()
            if self.failed is None and self.finished:
                self.failed = self._deadlock()
            if self.failed is not None:
                self.cond.notify_all()
                raise self.failed
            self.arrived += 1
            if self.arrived == self.nblocks:
                self.arrived = 0
                self.generation += 1
                self.cond.notify_all()
                return
            gen = self.generation
            while self.generation == gen and self.failed is None and not self.stopped:
                self.cond.wait()
            if self.stopped:
                raise Abort()
            if self.generation == gen:
                raise self.failed

    def fail(self, block):
        """``block`` stopped on an error (its thread's exception is the launch's error): it
        never arrives, so every other block stops too -- threads waiting here, or at their
        block's barrier behind one waiting here, or not yet there, unwind (``Abort``), and the
        launch ends with that error instead of hanging."""
        with self.cond:
            if self.stopped:
                return
            self.stopped = True
            self.cond.notify_all()
        for other in self.blocks:
            if other is not block:
                other.abort(Abort())

    def abort(self):
        """The launch is stopping (interrupted): threads waiting here unwind."""
        with self.cond:
            if self.failed is None:
                self.failed = Abort()
            self.cond.notify_all()

    def block_finished(self, block):
        with self.cond:
            self.finished.append(block.bid)
            if self.arrived and self.failed is None:
                self.failed = self._deadlock()
            self.cond.notify_all()
