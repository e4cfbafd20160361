"""One block of threads: its shared memory, its barrier and its warps' rendezvous.

Every synchronising operation of a block shares one condition variable, so the block knows at any
moment how many of its live threads are blocked; when all of them are (a ``syncthreads`` that some
thread never reaches, a warp operation whose mask names a lane that never calls it), that is a
deadlock on the device too, and the simulator says so instead of hanging.
"""

from __future__ import annotations

import threading
from collections import deque


class KernelDeadlock(RuntimeError):
    pass


class Abort(BaseException):
    """Unwinds the other threads of a block after one of them failed."""


class NeedThreads(BaseException):
    """A barrier or warp operation reached in a sequential run (the launch reruns with threads)."""


class ThreadState:
    __slots__ = ("tid", "bid", "linear", "lane", "warp", "block", "gate", "finished")

    def __init__(self, tid, bid, linear, block, gate=None):
        self.tid = tid
        self.bid = bid
        self.linear = linear
        self.lane = linear & 31
        self.warp = linear >> 5
        self.block = block
        self.gate = gate          # the worker's turn: released by whoever hands over to it
        self.finished = False


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
    at a time, handing over at barriers, warp operations and exits (one lock release per
    hand-over, no thundering herd, and a deterministic order).  A thread that must wait while no
    other thread can run is a deadlock.
    """

    def __init__(self, bid, block_dim, shared_bytes, threaded):
        self.bid = bid
        self.nthreads = block_dim[0] * block_dim[1] * block_dim[2]
        self.shared = {}                   # call site -> SimArray (static shared memory)
        self.dynamic = bytearray(shared_bytes)
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

    def _deadlock(self, what):
        waiting = [f"{g.what} (warp {w}, mask {m:#010x}, {bin(g.arrived).count('1')} lane(s) "
                   f"arrived)" for (w, _, m), g in self.groups.items()]
        if self.bar_waiters:
            waiting.append(f"syncthreads ({len(self.bar_waiters) + 1} thread(s) arrived)")
        exc = KernelDeadlock(
            f"deadlock in block blockIdx={self.bid}: every live thread of the block is waiting "
            f"({'; '.join(waiting) or what}). A syncthreads() that not every live thread of the "
            f"block reaches, or a warp operation whose mask names lanes that never call it "
            f"(or that exited), hangs on the GPU too.")
        raise exc

    def abort(self, exc, me=None):
        """Stop the block: every other thread unwinds (or skips the kernel) at once."""
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
        activemask call site included)."""
        lanes = 0
        warp = key[0]
        for ts in self.bar_waiters:
            if ts.warp == warp:
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

    # -- a thread ends ------------------------------------------------------------------------------
    def exit(self, ts):
        """``ts`` finished (or failed): wake whoever it was holding up, hand over."""
        if not self.threaded:
            return
        with self.lock:
            ts.finished = True
            self.live -= 1
            self.warp_live[ts.warp] &= ~(1 << ts.lane)
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
        self.cond = threading.Condition()

    def _deadlock(self):
        bid = self.finished[0]
        return KernelDeadlock(
            f"grid synchronisation deadlock: block blockIdx={bid} finished without reaching "
            f"cuda.cg.this_grid().sync(), which every block of the grid must reach (the GPU "
            f"hangs)")

    def arrive(self):
        with self.cond:
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
            while self.generation == gen and self.failed is None:
                self.cond.wait()
            if self.generation == gen:
                raise self.failed

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
