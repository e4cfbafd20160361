"""Warm the compiler (and CUDA) in the background while the user types.

A notebook's first kernel pays for what nothing has done yet: Numba's typing and lowering
registries, the device's typing and target contexts, LLVM's NVPTX target, libdevice's bitcode,
CUDA's start-up and the first module load.  ``start()`` does all of it in a daemon thread, by
compiling (and, with a GPU, loading) a small kernel of this module's own, so that the user's first
``%%cuda`` kernel finds everything ready.  The IPython extension starts it when it loads
(``%config GPUReplace.prewarm = False`` before ``%load_ext``, or ``GPUREPLACE_PREWARM=0``, turns
it off), and so does a process that receives pickled gpureplace functions for a GPU (a Dask
worker), at the first one: its first kernels often come from the disk cache, and the first
redefinition to reach it would otherwise find its compiler cold (jit/pickling.py).
``gpureplace.prewarm`` is this module's public face.

After the warm-up, the same switch lets a worker run, in a thread of its own, the front end of
each kernel it loaded from the disk cache (``ahead``): the disk keeps PTX, not the lowered code a
relink reuses, and a redefined helper reaching the worker then costs the helper and a relink, as
where the kernel was compiled.  Not counted in ``stats()``; ``report()["ahead"]`` counts them.

What it leaves behind: nothing the user's kernels depend on (its kernel is private to this
module and never written to the disk cache) and nothing counted in ``gpureplace.stats()``.

Hazards, and how they are met:

* The thread holds the GIL while it compiles (about a second): a cell run meanwhile is slowed,
  not blocked; a compile the user starts meanwhile waits for the warm-up's compile lock, no longer
  than its own compile would have taken.
* With a GPU, CUDA is started in the process.  A child made by ``os.fork`` (multiprocessing's
  default start method on Linux) cannot use CUDA after its parent did, as with CuPy, PyTorch and
  numba-cuda; gpureplace says so in the child (``CudaDriverError``).  Use the "spawn" or
  "forkserver" start method, or turn the warm-up off.
* A fork *while* the thread runs would copy a lock it holds into the child, whose first compile
  would wait for it for ever: a fork waits for the warm-up to finish (up to 30 s; an
  ``os.register_at_fork`` hook in jit/function.py, which also lets compiles running in other
  threads finish first).
* A warning raised in the thread would be printed outside any cell (and, as Python warns once,
  never again).  The one it can meet, a disk cache directory gpureplace will not use, is held
  (its threads are named ``gpureplace-...``, compiler/diskcache.py) and raised by the user's
  first kernel compile, as without the warm-up; ``%cuda_cache stats`` says why meanwhile.
"""

from __future__ import annotations

import math
import os
import threading

from ..compiler.intrinsics.indexing import grid

_thread = None
_done = threading.Event()
_report = {}                 # what the warm-up did, and how long each step took (seconds)


def enabled():
    return os.environ.get("GPUREPLACE_PREWARM", "1").strip().lower() not in ("0", "false", "no",
                                                                          "off")


def start(cuda=True):
    """Begin the warm-up once per process; returns the thread (None when off or done).
    ``cuda=False``: the compiler only (no CUDA start-up, no module load)."""
    global _thread
    if _thread is not None or not enabled():
        return None
    _thread = threading.Thread(target=_warm, args=(cuda,), name="gpureplace-prewarm",
                               daemon=True)
    _thread.start()
    return _thread


def is_started():
    return _thread is not None


def wait(timeout=None):
    """Wait for the warm-up, and the front ends queued after it (``ahead``), to finish; True
    when they have (or never started)."""
    import time
    deadline = None if timeout is None else time.monotonic() + timeout
    if _thread is not None and not _done.wait(timeout):
        return False
    left = None if deadline is None else max(0.0, deadline - time.monotonic())
    return _idle.wait(left)


def wait_before_fork(timeout):
    """``wait()``, unless asked from the warm-up's or the queue's own thread (jit/function.py's
    fork hook: a fork while they run would copy the locks they hold into the child)."""
    me = threading.current_thread()
    if me is not _thread and me is not _ahead_thread:
        wait(timeout)


# Work queued to run after the warm-up, in a thread of its own: the front end of a kernel that a
# Dask worker loaded from the disk cache (jit/function.py), so that a later redefinition of one
# of its callees relinks it there as it would where the kernel was compiled.
_ahead = []
_ahead_lock = threading.Lock()
_ahead_thread = None
_idle = threading.Event()
_idle.set()


def ahead(job):
    """Run ``job()`` in the background once the warm-up is done (off with the warm-up)."""
    global _ahead_thread
    if not enabled():
        return False
    with _ahead_lock:
        _ahead.append(job)
        _idle.clear()
        if _ahead_thread is None:
            _ahead_thread = threading.Thread(target=_run_ahead, name="gpureplace-ahead",
                                             daemon=True)
            _ahead_thread.start()
    return True


#: Seconds the queued front ends wait before they start: a job is queued in the middle of a
#: task (a kernel loaded, about to launch), and a front end holding the GIL meanwhile slowed the
#: rest of that task by some 10 ms (H200 host, Dask workers).
AHEAD_DELAY = 0.1


def _run_ahead():
    import time
    global _ahead_thread
    if _thread is not None:
        _done.wait()
    time.sleep(AHEAD_DELAY)
    while True:
        with _ahead_lock:
            if not _ahead:
                _ahead_thread = None
                _idle.set()
                return
            job = _ahead.pop(0)
        try:
            job()
            _report["ahead"] = _report.get("ahead", 0) + 1
        except Exception as exc:       # background work must never disturb the session
            _report["ahead_error"] = f"{type(exc).__name__}: {exc}"


def report():
    """``{step: seconds}`` of the warm-up so far (``error``: what stopped it, if anything)."""
    return dict(_report)


def _warm_kernel(x, a):
    i = grid(1)
    if i < x.size:
        x[i] = math.sin(a * x[i]) + math.exp(x[i])


def _start_cuda(spec, options):
    """CUDA's start-up and the driver's first module load (of the warm-up's kernel); False
    without a GPU."""
    from .. import probe
    from . import launch
    if not probe.available():
        return False
    dev = probe.current_device()
    launch.ensure_context(dev)
    if probe.arch_of(dev) == options.arch:
        launch.LoadedKernel(spec, dev)
    return True


def _warm(cuda=True):
    import time
    try:
        t0 = time.perf_counter()
        from numba.core import types

        from .. import probe
        from ..compiler.compiled import Options
        from ..compiler.frontend import uncounted
        from ..compiler.pipeline import compile_kernel
        from ..config import settings
        from ..dispatch.context import current_default
        argtypes = (types.float32[::1], types.float32)
        options = Options(arch=settings.arch or probe.default_arch())
        _report["imports"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        # (straight through the pipeline: no disk cache, no specialisation table; its
        # front-end runs left out of stats(), which counts the user's work)
        with uncounted():
            spec = compile_kernel(_warm_kernel, argtypes, current_default(), options)
        _report["compile"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        # (not settings.launch_backend(): the no-GPU notice is for the user's first launch)
        if cuda and settings.backend in ("auto", "gpu") and _start_cuda(spec, options):
            _report["cuda"] = time.perf_counter() - t2
    except Exception as exc:           # a warm-up must never disturb the session
        _report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        _done.set()
