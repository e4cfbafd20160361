"""A simulated launch: arguments in, the grid run block by block, results back.

A kernel whose call graph uses no barrier or warp operation runs its threads one after another in
a plain loop.  Otherwise each block's threads run as Python threads, so ``syncthreads`` is a real
barrier and warp operations a real rendezvous of the 32 lanes of a warp.  Should a sequential run
reach a barrier after all (a call the static scan could not see), or a thread spin there waiting
for another (``blocks.Block.spin``), the arguments are restored from a snapshot and the launch
runs again with threads; should a thread of a threaded run spin waiting for what its block cannot
do (a later block), again with every block at once.  An interrupt (Ctrl-C, Jupyter's
"Interrupt kernel") ends the launch in KeyboardInterrupt, every thread of it stopped and host
arrays as they were, as after any failed launch.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
import weakref

import numpy as np

from ..compiler.bfloat16 import register_dtype
from ..compiler.constructs import refuse_as_kernel
from ..errors import CompileError, DeviceFunctionError, LaunchError, render_as_one_block
from ..jit import GPUFunction, graphs
from ..jit.launcher import check_block_registers, check_dynamic_shared
from ..runtime.launch import (SIMULATED_GRID_THREADS, assembled_resource, dynamic_shared_size,
                              normalize_dims, simulated_cooperative_blocks)
from .launch_args import LaunchArguments, match_explicit, refuse_captured_host_arrays
from .stopping import interrupts_held, stop_workers, wait, worker
from .blocks import Abort, Block, GridBarrier, NeedGrid, NeedThreads, ThreadState
from . import operators
from .lang import device_format
from .lang.overloads import running
from .raises import KernelRaisedWarning, Raises, library_failure  # noqa: F401  (the warning)
from .resolve import Resolver, compiled_reads

#: Type-check and compile each kernel (to PTX) before simulating it, as a GPU launch would.
compile_kernels = os.environ.get("GPUREPLACE_SIM_COMPILE", "1").lower() not in ("0", "false",
                                                                                "no", "off")

_print_lock = threading.Lock()
#: Global memory's atomics are atomic across the whole device: across launches running at once
#: (host threads, streams) too, so one lock for every launch's atomics.
_atomic_lock = threading.Lock()
#: A stream runs its launches one after another: launches from several host threads on one
#: stream (the legacy default stream included) take turns here, by the stream's handle.
_stream_locks = {}
_stream_locks_lock = threading.Lock()


class Launch:
    """The state of one simulated launch."""

    def __init__(self, name, grid, block, shared_bytes):
        self.name = name
        self.grid = grid
        self.block = block
        self.shared_bytes = shared_bytes
        self.static_shared = 0         # the compiled kernel's static shared bytes a block
        self.cooperative = False       # whether it syncs the grid (not only spins across
        #                                blocks): every block must then fit on the device at once
        self.tls = threading.local()
        self.atomic_lock = _atomic_lock
        self.dynamic = {}              # id(stub) -> reader of a per-thread value (laneid)
        self.grid_barrier = None       # a blocks.GridBarrier in grid mode
        self.raises = Raises(name)     # raise statements the threads executed
        self.in_kernel = set()         # idents of the worker threads running the kernel's code
        self.progress = 0              # bumped when memory changes through an atomic, a barrier
        #                                or warp operation completes, a thread ends (spin-waits)
        self.grid_mode_limit = GRID_MODE_MAX_THREADS
        self.onchip = weakref.WeakValueDictionary()   # id -> NumPy owner of shared and local
        #                                arrays' memory (not global: atomics differ there)
        self.resolver = None           # the launch's Resolver (overloads run through it)
        self.grid_sync_compiled = None  # whether the compiled kernel has the grid barrier
        #                                (spec.cooperative; None: nothing compiled)
        self.grid_sync_as_block = None  # where a grid sync ran as the block's barrier alone
        #                                (compiled without the grid barrier: lang/cg.py)

    def thread_raised(self, exc):
        """Whether ``exc`` comes from a raise (or assert) statement of the kernel's code; if
        so it is noted, and the thread simply stops, as on the GPU: a compiled kernel ignores
        the exception (numba-cuda reports one only with debug=True)."""
        return self.raises.note(exc, getattr(self.tls, "t", None), self.where())

    def where(self):
        t = getattr(self.tls, "t", None)
        if t is None:
            return f"kernel {self.name}"
        return (f"thread threadIdx=({t.tid[0]}, {t.tid[1]}, {t.tid[2]}) of block "
                f"blockIdx=({t.bid[0]}, {t.bid[1]}, {t.bid[2]}) (kernel {self.name}, simulator)")

    def device_print(self, *args, sep=" ", end="\n", file=None, flush=False):
        text = sep.join(device_format(a) for a in args) + end
        with _print_lock:
            out = file if file is not None else sys.stdout
            out.write(text)
            if flush:
                out.flush()


# ---------------------------------------------------------------------------------------------
# Running


def launch(gpufunction, grid, block, stream=None, shared_bytes=0, args=(), *, compile=None,
           before=None):
    """Run ``gpufunction`` (a kernel from ``cuda.jit``) on the host with the device's semantics.

    ``grid`` / ``block``: ints or tuples of 1 to 3 ints.  ``args``: NumPy arrays (changed in
    place), CuPy arrays or torch tensors (copied in and back), scalars, tuples.  ``compile``: type
    check and compile to PTX first (default: ``compile_kernels``).  ``before(spec)``: called
    once the launch is checked and compiled, just before it runs (``spec``: the specialisation
    compiled, None without a compile), as the GPU path runs a configuration's pre-launch
    callbacks.  Returns None.
    """
    sim, conv, spec = _checked(gpufunction, grid, block, stream, shared_bytes, args, compile)
    if before is not None:
        before(spec)
    with _in_stream_order(stream):
        _run(gpufunction, sim, conv, spec)


def _in_stream_order(stream):
    """The lock that orders the launches of ``stream`` (None or 0: the legacy default stream,
    as its handle 1), or a null context for the per-thread default stream (each thread's own)."""
    import contextlib
    handle = getattr(stream, "ptr", stream)
    if not isinstance(handle, int) or handle in (0, 1):
        handle = 1
    elif handle == 2:
        return contextlib.nullcontext()
    lock = _stream_locks.get(handle)
    if lock is None:
        with _stream_locks_lock:
            lock = _stream_locks.setdefault(handle, threading.RLock())
    return lock


def check(gpufunction, grid, block, stream=None, shared_bytes=0, args=(), *, compile=None,
          with_spec=False):
    """What ``launch`` refuses before it runs anything, refused now (a prepared launch or a graph
    capture binds its launch here, as the GPU path does when it binds one): the configuration,
    the arguments, the declared signatures, the compile and the shared memory.  Returns the
    argument types; with ``with_spec``, (the argument types, the specialisation compiled for
    them or None without a compile)."""
    _, conv, spec = _checked(gpufunction, grid, block, stream, shared_bytes, args, compile,
                             bound=True)
    return (tuple(conv.types), spec) if with_spec else tuple(conv.types)


def _checked(gpufunction, grid, block, stream, shared_bytes, args, compile, bound=False):
    if not isinstance(gpufunction, GPUFunction):
        raise TypeError(f"simulator.launch() needs a kernel made by cuda.jit, got "
                        f"{gpufunction!r}")
    if gpufunction.device:
        raise DeviceFunctionError(f"Cannot compile a device function as a kernel: "
                                  f"{gpufunction.__qualname__} is a device function; only "
                                  f"kernels are launched")
    refuse_as_kernel(gpufunction.py_func, gpufunction.__qualname__)
    grid = normalize_dims(grid, "grid")
    block = normalize_dims(block, "block")
    shared_bytes = dynamic_shared_size(shared_bytes)
    args = tuple(args)
    if len(args) != gpufunction._nparams:
        gpufunction._argument_count_error(args)
    if stream is not None and hasattr(stream, "synchronize"):
        stream.synchronize()

    register_dtype()                     # bfloat16 arrays, if ml_dtypes is loaded
    sim = Launch(gpufunction.__qualname__, grid, block, shared_bytes)
    names = list(gpufunction._pysig.parameters)
    if bound and graphs.recorder() is not None:
        refuse_captured_host_arrays(gpufunction, args, names)
    conv = LaunchArguments(sim, bound)
    for i, a in enumerate(args):
        conv.add(a, f"{gpufunction.__qualname__}: argument {i} ({names[i]!r})", names[i])
    detached = conv.shared_read_only()
    if detached:
        # (converted again, each read-only host array that overlaps a written one replaced by
        # its copy wherever it is: as it is, in a tuple, under as_vectors; rare enough)
        conv = LaunchArguments(sim, bound, detached)
        for i, a in enumerate(args):
            conv.add(a, f"{gpufunction.__qualname__}: argument {i} ({names[i]!r})", names[i])
    if gpufunction.declared_signatures:
        match_explicit(gpufunction, conv)
    spec = None
    if compile_kernels if compile is None else compile:
        try:
            spec = gpufunction.compile(tuple(conv.types))
        except CompileError as exc:
            if not getattr(exc, "simulator_only", False):
                raise
            # pdb.set_trace() / breakpoint(): what only the simulator can run (it stops in the
            # debugger there); run as without the compile to PTX, GPUREPLACE_SIM_COMPILE=0
    if spec is not None:      # (a block its registers cannot hold, refused as the GPU path does)
        check_block_registers(gpufunction, grid, block,
                              lambda name: assembled_resource(spec, name, "launch"))
    if spec is not None and spec.cooperative:  # (its limit counts a block's shared memory)
        sim.static_shared = static_shared_bytes(spec)
    if shared_bytes > 48 * 1024:
        # refused before anything runs, as the GPU path refuses it (jit/launcher.py's
        # check_static_shared): the dynamic bytes with the kernel's static shared arrays
        check_dynamic_shared(gpufunction, (grid, block, stream or 0, shared_bytes), shared_bytes,
                             0 if spec is None else static_shared_bytes(spec))
    return sim, conv, spec


def _run(gpufunction, sim, conv, spec):
    resolver = sim.resolver = Resolver(gpufunction.context, sim, *compiled_reads(spec))
    kernel = resolver.function(gpufunction.py_func, {})
    threaded = resolver.needs_threads(kernel)
    values = conv.values
    options = gpufunction.options()
    debug = options.debug
    operators.python_error_model = debug and not options.fastmath
    # (what the arrays held: a sequential run that finds it needs threads starts again from it,
    # and a launch that fails leaves host NumPy arrays as they were, as on the GPU, where they
    # are copied back only after the kernel succeeded; simulated device arrays keep what the
    # kernel wrote before it failed, as device memory does)
    snapshot = [(a, a.copy()) for a in conv.host_arrays]
    modes = [_run_sequential, _run_threaded, _run_grid]
    # Grid mode (every block at once) is for kernels the GPU launches cooperatively: whether the
    # compiled code has the grid barrier (``spec.cooperative``, what the GPU path goes by), not
    # whether the source mentions this_grid (a grid group without sync() compiles to nothing; a
    # sync reached through an overload or register_jitable is in the compiled code but not in
    # what the simulator scans).  A sync the launch reaches in another mode reruns it in grid
    # mode (lang/cg.py raises NeedGrid), or, where the compiled code has no grid barrier, is a
    # barrier of the block alone, as the compiled code runs it (``sim.grid_sync_compiled``).
    # Only a launch that compiles nothing (GPUREPLACE_SIM_COMPILE=0, a kernel that calls pdb)
    # goes by the source scan.
    if spec is not None:
        sim.grid_sync_compiled = grid = spec.cooperative
    else:
        grid = resolver.needs_grid(kernel)
    sim.cooperative = grid
    if grid:
        del modes[:2]
    elif threaded:
        del modes[0]
    try:
        while True:
            try:
                modes[0](sim, kernel, values)
                break
            except (NeedThreads, NeedGrid) as exc:
                # (a run that found it needs threads, or every block at once: again from the
                # start, in the mode it needs)
                if len(modes) == 1:
                    raise
                del modes[:2 if isinstance(exc, NeedGrid) and len(modes) == 3 else 1]
                for a, saved in snapshot:
                    np.copyto(a, saved)
                sim.raises = Raises(sim.name)
        if debug:
            # a thread's exception, raised as the GPU's debug launch raises it: before anything
            # is copied back, so host arrays keep what they held (below)
            sim.raises.raise_first()
    except BaseException as exc:        # an interrupt (KeyboardInterrupt) too
        _restore_host_arrays(snapshot)
        if isinstance(exc, Exception):
            render_as_one_block(exc)    # in a notebook: the error and the launch's line
        raise
    finally:
        operators.python_error_model = False
    sim.raises.warn(gpufunction.py_func)
    if sim.grid_sync_as_block is not None:
        _warn_grid_sync_as_block(gpufunction, sim.grid_sync_as_block)
    conv.write_back(lambda: _restore_host_arrays(snapshot))
    return None


def _restore_host_arrays(snapshot):
    """Host NumPy arrays as they were before a launch that failed (``snapshot``: (array, its
    copy) pairs); simulated device arrays keep what the kernel wrote, as device memory does."""
    for a, saved in snapshot:
        if type(a) is np.ndarray:
            np.copyto(a, saved)


class GridSyncWarning(RuntimeWarning):
    """A launch reached ``cuda.cg.this_grid().sync()`` that its compiled code does not have."""


def _warn_grid_sync_as_block(gpufunction, place):
    py_func = gpufunction.py_func
    code = py_func.__code__
    warnings.warn_explicit(
        f"{gpufunction.__qualname__}: cuda.cg.this_grid().sync() ({place}) is not a grid "
        f"barrier in the compiled kernel: thread (0, 0, 0) of each block, which arrives there "
        f"for its block, never reaches it (it returned or branched away before), so the "
        f"compiler removed the grid-wide wait and the kernel is not launched cooperatively. "
        f"On the GPU the sync then only synchronises each block, and blocks read each other's "
        f"writes racily; the simulator runs it so too (the blocks one after another). Let "
        f"every block's thread (0, 0, 0) reach the sync (CUDA's own grid.sync() hangs "
        f"otherwise).",
        GridSyncWarning, code.co_filename, code.co_firstlineno,
        module=py_func.__module__ or code.co_filename,
        registry=py_func.__globals__.setdefault("__warningregistry__", {}))


_static_shared = weakref.WeakKeyDictionary()     # specialisation -> its static shared bytes

def static_shared_bytes(spec):
    """The bytes of static shared arrays a block of the compiled kernel ``spec`` has, the
    driver's ``shared_size_bytes`` on a GPU: ptxas's figure for its PTX (what
    ``get_shared_mem_per_block()`` says without a GPU), else the PTX's ``.shared`` variables laid
    out as ptxas lays them.  Worked out once per specialisation."""
    nbytes = _static_shared.get(spec)
    if nbytes is None:
        from ..compiler import toolchain
        found = toolchain.resources(spec.ptx, spec.name)
        nbytes = _static_shared[spec] = found["shared_size_bytes"] if found is not None \
            else toolchain.ptx_static_shared(spec.ptx)
    return nbytes


def _blocks(grid):
    gx, gy, gz = grid
    for bz in range(gz):
        for by in range(gy):
            for bx in range(gx):
                yield (bx, by, bz)


def _threads(block):
    bx, by, bz = block
    linear = 0
    for tz in range(bz):
        for ty in range(by):
            for tx in range(bx):
                yield (tx, ty, tz), linear
                linear += 1


def _annotate(exc, sim):
    notes = []
    library = library_failure(exc)
    if library is not None:
        # (not a raise of the kernel's: the thread did not just stop, the launch fails)
        notes.append(f"raised inside {library[0]}, a library's code that the kernel's line "
                     f"{library[1]} called: an error of that library or of the simulator, "
                     f"which runs it on the host (the GPU runs Numba's compiled version)")
    if "threadIdx=" not in str(exc):
        notes.append(f"raised in {sim.where()}")
    for note in notes:
        try:
            exc.add_note(note)
        except AttributeError:
            pass
    return exc


def _run_sequential(sim, kernel, values):
    tls = sim.tls
    threads = list(_threads(sim.block))
    running.launch = sim
    with np.errstate(all="ignore"):
        try:
            for bid in _blocks(sim.grid):
                blk = Block(bid, sim.block, sim.shared_bytes, threaded=False, launch=sim)
                for tid, linear in threads:
                    tls.t = ThreadState(tid, bid, linear, blk)
                    try:
                        kernel(*values)
                    except NeedThreads:
                        raise
                    except Exception as exc:
                        if not sim.thread_raised(exc):
                            raise
        except NeedThreads:
            raise
        except Exception as exc:
            raise _annotate(exc, sim)
        finally:
            tls.t = None
            running.launch = None


def _run_thread(sim, kernel, values, ts, errors):
    """One simulated thread's turn at the kernel, in the worker thread that carries it: an error
    is recorded and stops its block; the block hears when the thread is done."""
    blk = ts.block
    sim.tls.t = ts
    running.launch = sim
    ident = threading.get_ident()
    try:
        if blk.aborted is None:
            with np.errstate(all="ignore"):
                sim.in_kernel.add(ident)
                kernel(*values)
    except Abort:
        pass
    except Exception as exc:                      # noqa: BLE001 (re-raised by the launcher)
        if not sim.thread_raised(exc):            # a raise statement: the thread just ends
            _annotate(exc, sim)
            errors.append(exc)
            blk.abort(exc, ts)
    except BaseException as exc:                  # noqa: BLE001 (re-raised by the launcher)
        _annotate(exc, sim)
        errors.append(exc)
        blk.abort(exc, ts)
    finally:
        sim.in_kernel.discard(ident)
        sim.tls.t = None
        running.launch = None
        blk.exit(ts)


def _run_threaded(sim, kernel, values):
    """Each block's threads as Python threads taking turns (``blocks.Block``); one worker per
    thread index, reused from block to block."""
    threads = list(_threads(sim.block))
    gates = []
    for _ in threads:
        gate = threading.Lock()
        gate.acquire()
        gates.append(gate)
    slots = [None] * len(threads)
    errors = []

    def work(linear):
        gate = gates[linear]
        while True:
            gate.acquire()                       # wait for this thread's turn
            ts = slots[linear]
            if ts is None:
                return                           # the launch is over
            _run_thread(sim, kernel, values, ts, errors)

    workers = [threading.Thread(target=worker, args=(work, linear), daemon=True,
                                name=f"gpureplace-sim-thread-{linear}")
               for _, linear in threads]
    blk = None
    try:
        with interrupts_held():
            for w in workers:
                w.start()
        for bid in _blocks(sim.grid):
            blk = Block(bid, sim.block, sim.shared_bytes, threaded=True, launch=sim)
            states = [ThreadState(tid, bid, linear, blk, gates[linear])
                      for tid, linear in threads]
            slots[:] = states
            blk.start(states)
            wait(blk.done)
            late = getattr(blk, "deadlock_error", None)
            if errors or late is not None:
                raise errors[0] if errors else late
    finally:
        slots[:] = [None] * len(threads)      # (before the gates open: no worker runs again)
        stop_workers(sim, workers, gates, [blk] if blk is not None else [])


#: grid mode runs every thread of the launch as a Python thread at once (the limit lives with
#: max_cooperative_grid_blocks, runtime/launch.py, which answers by it)
GRID_MODE_MAX_THREADS = SIMULATED_GRID_THREADS


def _run_grid(sim, kernel, values):
    """Every block at once, each block's threads taking turns as in ``_run_threaded``, so that
    ``cuda.cg.this_grid().sync()`` can hold blocks until all have arrived."""
    blocks = list(_blocks(sim.grid))
    threads = list(_threads(sim.block))
    total = len(blocks) * len(threads)
    if total > GRID_MODE_MAX_THREADS:
        raise LaunchError(f"kernel {sim.name} synchronises the grid, so the simulator runs all "
                          f"its threads at once: {total} is over its limit of "
                          f"{GRID_MODE_MAX_THREADS} (launch fewer blocks, with a grid-stride "
                          f"loop, as a cooperative launch on the GPU must too)")
    # every block must be resident at once, as a cooperative launch on the GPU refuses a grid
    # whose blocks' shared memory the device cannot hold at once (runtime/launch.py's
    # simulated_cooperative_blocks, what max_cooperative_grid_blocks answers)
    shared = sim.shared_bytes + sim.static_shared
    limit = simulated_cooperative_blocks(len(threads), shared)
    if sim.cooperative and len(blocks) > limit:
        raise LaunchError(f"kernel {sim.name} synchronises the grid (cuda.cg.this_grid().sync()), "
                          f"so all its blocks must be resident at once: at most {limit} blocks of "
                          f"{len(threads)} threads with {shared} bytes of shared memory each "
                          f"({sim.shared_bytes} dynamic) on the simulated device, got "
                          f"{len(blocks)}")
    sim.grid_barrier = barrier = GridBarrier(len(blocks))
    errors = []

    def work(ts):
        ts.gate.acquire()                        # wait for this thread's turn
        _run_thread(sim, kernel, values, ts, errors)

    all_blocks, workers = [], []
    for bid in blocks:
        blk = Block(bid, sim.block, sim.shared_bytes, threaded=True, launch=sim)
        blk.on_done = barrier.block_finished
        states = []
        for tid, linear in threads:
            gate = threading.Lock()
            gate.acquire()
            states.append(ThreadState(tid, bid, linear, blk, gate))
        all_blocks.append((blk, states))
        barrier.blocks.append(blk)
        workers += [threading.Thread(target=worker, args=(work, ts), daemon=True,
                                     name=f"gpureplace-sim-grid-{bid}-{ts.linear}")
                    for ts in states]
    try:
        with interrupts_held():
            for w in workers:
                w.start()
        for blk, states in all_blocks:
            blk.start(states)
        for blk, _ in all_blocks:
            wait(blk.done)
        late = [getattr(b, "deadlock_error", None) for b, _ in all_blocks]
        late = [e for e in late if e is not None]
        if errors or late:
            raise errors[0] if errors else late[0]
    finally:
        stop_workers(sim, workers, [ts.gate for _, states in all_blocks for ts in states],
                      [blk for blk, _ in all_blocks], barrier)
        sim.grid_barrier = None
