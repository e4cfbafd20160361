"""CUDA graphs of gpureplace launches: capture a sequence of launches once, replay it in one call.

    g = gpureplace.graph(step, x, y)      # captures step(x, y); nothing runs yet
    g()                                   # one cudaGraphLaunch on the current stream
    g.launch(stream=s)

    with gpureplace.capture() as g:       # the same for a block of code
        k1[blocks, threads](x)
        k2[blocks, threads](x, y)
    g()

A graph stays true to the notebook like a launch does.  It remembers the specialisation behind
each launch it captured; when the world moves (a cell redefined something), its next replay
revalidates them, and if one was redefined it captures again with the new code before it
launches: ``graph(fn, ...)`` by calling ``fn`` again, the ``with`` form by issuing its recorded
launches again (possible when they were all the graph held; otherwise the replay raises
``GraphStaleError`` naming the kernel, and never runs the old code).

A graph replays on the device it was captured on, whichever device is current then (as a prepared
launch does).  Arguments are bound at capture, as in any CUDA graph: arrays must stay alive and are read in place
(the graph keeps references to them), and rebinding a Python name does not reach the graph.
Launches inside a capture must use the current stream (no explicit stream in ``[grid, block,
stream]``); host synchronisation (``.get()``, ``synchronize``) is not allowed while capturing,
nor is a copy from host memory (``d.copy_to_device(host array)``, ``cuda.to_device(host
array)``: synchronous), refused on both backends as ``GraphCaptureError`` naming the call.
With the CPU simulator as backend, capturing records the launches and replaying runs them; the
device-memory operations made on the capturing stream meanwhile (``d.copy_to_device(d_src)``,
``d[...] = value``, ``d += 1`` and other NumPy operations into device arrays), which a GPU
captures as nodes of the graph, are recorded too and run in their place at each replay, never at
capture (device arrays are read in place then), and reads of device memory on the host are
refused as a GPU refuses them.  A graph holding such
operations is one with work gpureplace did not launch: after a redefinition its ``with`` form
raises ``GraphStaleError``, as on the GPU.

Pre-launch callbacks (``kernel[grid, block].pre_launch_callbacks``) of a captured launch run at
the capture, as that launch is issued, and again before each replay (on the GPU all of them
before the one ``cudaGraphLaunch``, in the simulator each before its launch).
"""

from __future__ import annotations

import threading

from .. import probe
from ..errors import GPUReplaceError, LaunchError
from ..runtime import launch
from ..tracking import world
from . import backends


class GraphCaptureError(GPUReplaceError, RuntimeError):
    """Capturing a graph failed (an operation that is not allowed during stream capture...)."""


class GraphStaleError(GPUReplaceError, RuntimeError):
    """A graph's kernel was redefined and the graph cannot capture itself again."""


_tls = threading.local()

#: Captures in progress in the process (any thread): host code of the simulator's device arrays
#: looks at ``recorder()`` (a thread's) only while this is non-zero, so that the element reads
#: and writes kernels make cost one test of it.
capturing = 0
_capturing_lock = threading.Lock()


def recorder():
    """The capture in progress in this thread, or None (read by the general launch path)."""
    return getattr(_tls, "recording", None)


def deferred(what, run):
    """Under the simulator, while this thread captures a graph: record ``run()``, a device-memory
    operation (``what``: a copy or fill) made on the capturing stream, to run at each replay in
    order with the captured launches, as a GPU captures it into the graph; True when recorded
    (the caller must not do it now).  False otherwise: the caller does it now."""
    if not capturing:
        return False
    rec = recorder()
    if rec is None or not rec.defer:
        return False
    rec.add_operation(what, run)
    return True


def refuse_host_sync(what):
    """In the simulator, refuse host synchronisation (``what``) while a graph is captured, as
    the GPU does (there the capture fails at its end): the code would fail on a GPU."""
    if recorder() is not None:
        raise GraphCaptureError(f"{what} while a graph is being captured: host synchronisation "
                                f"(.get(), copy_to_host, synchronize) is not allowed while "
                                f"capturing (a GPU refuses the capture); do it after the "
                                f"capture, or outside the captured function")


def refuse_host_copy(what):
    """Refuse, on both backends, a copy from host memory on the current stream while this
    thread captures a graph (``what``: the call): it is synchronous, which a capture does not
    allow -- on the GPU CuPy refuses it ("synchronous API calls are disallowed"); the simulator,
    which could record it, refuses it too, so that what runs there runs on a GPU."""
    if capturing and recorder() is not None:
        raise GraphCaptureError(
            f"{what} while a graph is being captured: a copy from host memory is synchronous, "
            f"which a capture does not allow (a GPU refuses it); copy the data into a device "
            f"array before the capture (cuda.to_device), and inside it copy from that device "
            f"array (d.copy_to_device(d_src))")


class _Launch:
    """One captured launch: what to issue again, and the loaded specialisation it used."""

    __slots__ = ("kernel", "config", "args", "keys", "device", "entry")

    def __init__(self, kernel, config, args, keys=None, device=None, entry=None):
        self.kernel, self.config, self.args = kernel, config, tuple(args)
        self.keys, self.device, self.entry = keys, device, entry

    def current_entry(self):
        """The specialisation a launch with these arguments would use now (revalidated): the
        loaded kernel on the GPU; under the simulator (no device) the specialisation its check
        compiled for these argument types, None where it compiled none."""
        kernel = self.kernel
        if self.device is None:
            return None if self.entry is None else kernel.compile(tuple(self.keys))
        cache_key = (tuple(self.keys), self.device)
        entry = kernel._launch_cache.get(cache_key)
        if entry is None or entry.spec.world != world.age:
            launch.ensure_context(self.device)
            entry = kernel._prepare(self.keys, self.device, cache_key, entry)
        return entry


class _Operation:
    """A device-memory operation captured under the simulator (a copy, a fill): run at each
    replay, in its place among the launches."""

    __slots__ = ("what", "run")

    def __init__(self, what, run):
        self.what, self.run = what, run


class _Recording:
    def __init__(self, stream_ptr, defer):
        self.stream_ptr = stream_ptr
        self.defer = defer              # simulator: record instead of running
        self.launches = []
        self.steps = []                 # launches and (simulator) operations, in order
        self.operations = 0

    def add(self, kernel, config, args, keys=None, device=None, entry=None):
        explicit = getattr(config, "_stream_ptr", None)
        if self.defer:
            # (the simulator resolves no stream handle, and its capture has no stream: any
            # stream named is not the capture's, as on the GPU, where k[g, b, 0] is refused too)
            own = config.stream is not None
        else:
            own = explicit is not None and explicit != self.stream_ptr
        if own:
            raise LaunchError(f"{kernel.__qualname__}: a launch inside a graph capture must use "
                              f"the current stream; this one names its own stream "
                              f"({config.stream!r}), which the graph would not capture")
        launch_ = _Launch(kernel, config, args, keys, device, entry)
        self.launches.append(launch_)
        self.steps.append(launch_)

    def add_operation(self, what, run):
        self.steps.append(_Operation(what, run))
        self.operations += 1


def graph(fn, *args, **kwargs):
    """Capture ``fn(*args, **kwargs)`` -- the launches it makes -- into a :class:`Graph`."""
    if not callable(fn):
        raise TypeError(f"graph() takes the function that makes the launches, got {fn!r}")
    return Graph(lambda: fn(*args, **kwargs), getattr(fn, "__qualname__", repr(fn)))


class capture:  # noqa: N801 - used as ``with gpureplace.capture() as g``
    """``with gpureplace.capture() as g:`` captures the block's launches into the Graph ``g``."""

    def __init__(self):
        self.graph = None

    def __enter__(self):
        self.graph = Graph(None, "with gpureplace.capture()")
        self.graph._begin()
        return self.graph

    def __exit__(self, exc_type, exc, tb):
        self.graph._end(failed=exc_type is not None)
        return False


class Graph:
    """A captured sequence of launches: ``g()`` / ``g.launch(stream)`` replays it."""

    def __init__(self, body, name):
        self._body = body
        self.name = name
        self.recaptures = 0
        self._launches = []
        self._steps = []
        self._callbacks = ()
        self._graph = None
        self._age = None
        self._complete = False
        self._state = None
        if body is not None:
            self._capture(body)

    def __reduce__(self):
        # (refused as a prepared launch is: pickle would fail on its body, a local function, or
        # copy launches bound to this process's arrays and device)
        raise TypeError(
            f"{self!r} cannot be pickled: a captured graph holds this process's launches, their "
            f"arguments and device; send the kernels and their arguments instead, and capture "
            f"the graph again in the other process")

    # -- capturing --------------------------------------------------------------------------------
    def _capture(self, body):
        self._begin()
        try:
            body()
        except BaseException:
            self._end(failed=True)
            raise
        self._end(failed=False)

    def _begin(self):
        if recorder() is not None:
            raise GraphCaptureError("graph captures cannot be nested")
        simulated = backends.simulated()
        stream = None
        if not simulated:
            launch.require_device()
            cp = probe.cupy_module()
            self.device = probe.current_device()
            launch.ensure_context(self.device)
            stream = cp.cuda.Stream(non_blocking=True)
        rec = _Recording(stream.ptr if stream is not None else None, simulated)
        # Cached launches check the world age first: moving it sends every launch of the capture
        # through the general path, where the recorder sees it (and prepared launches re-bind to
        # the capturing stream; the second bump in _end sends them back to their own).
        world.bump()
        _tls.recording = rec
        if stream is not None:
            self._state = (rec, stream, stream.__enter__())
            try:
                stream.begin_capture()
            except BaseException:
                self._state = None
                _tls.recording = None
                stream.__exit__(None, None, None)
                raise
        else:
            self._state = (rec, None, None)
            _count_capture(1)

    def _end(self, failed):
        rec, stream, _ = self._state
        self._state = None
        _tls.recording = None
        if stream is None:
            _count_capture(-1)
        world.bump()
        captured = None
        if stream is not None:
            try:
                captured = stream.end_capture()
            except Exception as exc:
                if failed:          # the body's own error explains it; the capture is dropped
                    captured = None
                else:
                    raise GraphCaptureError(
                        f"capturing {self.name} failed: {exc} (host synchronisation such as "
                        f".get() or synchronize(), and launches on other streams, are not "
                        f"allowed while capturing)") from exc
            finally:
                stream.__exit__(None, None, None)
        if failed:
            return
        self._launches = rec.launches
        self._steps = rec.steps
        self._graph = captured
        self._printf = any(getattr(getattr(rl.entry, "spec", None), "uses_printf", False)
                           for rl in rec.launches)
        # Complete: the graph holds nothing but these launches, so that it can capture itself
        # again by issuing them (the simulator's copies and fills are work gpureplace did not
        # launch, as a GPU's memcpy and memset nodes are)
        self._complete = not rec.operations if captured is None else \
            _node_count(captured) == len(rec.launches)
        self._note_callbacks()
        if captured is not None:
            self._exec = captured.graphExec
            captured.upload()
        self._age = world.age

    # -- replaying --------------------------------------------------------------------------------
    def launch(self, stream=None):
        """Replay the graph on ``stream`` (default: CuPy's current stream on the graph's
        device)."""
        if self._age is None:
            raise GraphCaptureError(f"{self.name}: the graph was never captured (its capture "
                                    f"raised, or the with block has not ended)")
        if self._graph is None:                       # simulator: run what was recorded
            if stream is not None:
                launch.stream_ptr(stream)             # (refused as the GPU's replay refuses it)
                if hasattr(stream, "synchronize"):
                    stream.synchronize()              # (after the callbacks queued on it)
            if self._age != world.age:
                self._revalidate()
            for step in self._steps:
                if type(step) is _Operation:
                    step.run()
                else:                 # (the launch runs its configuration's callbacks)
                    step.kernel._launch(step.config, step.args)
            return
        if probe.current_device() != self.device:
            # A graph belongs to the device it was captured on: it replays (and captures again,
            # after a redefinition) there, whichever device is current.
            with probe.cupy_module().cuda.Device(self.device):
                return self.launch(stream)
        if self._age != world.age:
            self._revalidate()
        if self._printf:
            launch.note_printf()
        for rl in self._callbacks:    # before each launch of a configuration with callbacks
            rl.config.run_callbacks(rl.entry.spec)
        probe.cupy_module().cuda.runtime.graphLaunch(self._exec, launch.stream_ptr(stream))

    __call__ = launch

    def _revalidate(self):
        """After the world moved: capture again if a launched specialisation changed, or a
        kernel it launched was redefined under its name (a re-run cell)."""
        from .definitions import current_definition
        for rl in self._launches:
            if current_definition(rl.kernel) is not rl.kernel or \
                    rl.current_entry() is not rl.entry:
                break
        else:
            self._note_callbacks()            # (a configuration may have got callbacks)
            self._age = world.age
            return
        name = rl.kernel.__qualname__
        body = self._body
        if body is None:
            if not self._complete:
                why = getattr(rl.kernel, "_stale_reason", None)
                raise GraphStaleError(
                    f"{self.name}: kernel {name} changed since the capture"
                    f"{f' ({why})' if why else ''}, and the graph also holds work that "
                    f"gpureplace did not launch, so it cannot capture itself again: run the with "
                    f"block again, or capture with gpureplace.graph(fn, ...), which calls fn again")
            old = self._launches

            def body():                   # issue the recorded launches again
                for each in old:          # (each kernel as its name stands now; the same
                    cfg = each.config     # configuration, its callbacks with it, if unchanged)
                    kernel = current_definition(each.kernel)
                    if kernel is not each.kernel or cfg.stream is not None:
                        cfg = kernel[cfg.grid, cfg.block, None, cfg.shared]
                    cfg(*each.args)
        self._capture(body)
        self.recaptures += 1

    def _note_callbacks(self):
        """The captured launches whose configuration has pre-launch callbacks (a list, maybe
        empty yet), which a GPU replay runs before its ``cudaGraphLaunch``.  (A configuration
        that gets its list later moves the world: the next replay notes it here.)"""
        if self._graph is not None:
            self._callbacks = tuple(rl for rl in self._launches
                                    if getattr(rl.config, "callbacks", None) is not None)

    # -- reflection -------------------------------------------------------------------------------
    @property
    def kernels(self):
        """The launches captured, in order: ``[(kernel name, argument types), ...]``."""
        out = []
        for rl in self._launches:
            spec = getattr(rl.entry, "spec", None) if rl.device is not None else rl.entry
            out.append((rl.kernel.__qualname__, spec.argtypes if spec is not None else
                        tuple(rl.keys) if rl.device is None and rl.keys is not None else None))
        return out

    def __len__(self):
        return len(self._launches)

    def __repr__(self):
        return f"<gpureplace Graph {self.name}: {len(self._launches)} launch(es)>"


def _count_capture(step):
    global capturing
    with _capturing_lock:
        capturing += step


def _node_count(captured):
    """Number of nodes in a captured cudaGraph (driver API; None when it cannot be asked)."""
    import ctypes
    lib = probe.libcuda()
    if lib is None:
        return None
    try:
        count = ctypes.c_size_t(0)
        if lib.cuGraphGetNodes(ctypes.c_void_p(captured.graph), None, ctypes.byref(count)) != 0:
            return None
        return count.value
    except Exception:
        return None
