"""Launch configurations and prepared launches: ``kernel[grid, block, stream, shared]`` (a
``Launcher``, whose ``__call__`` becomes the generated fast launch), ``kernel.forall(n)`` and
``kernel[grid, block].prepare(*args)`` (a ``PreparedLaunch``: one CUDA graph replay a call)."""

from __future__ import annotations

import os
import struct
import traceback
import warnings

from numba.core import types as nbtypes
from numba.core.errors import NumbaPerformanceWarning

from .. import probe
from ..config import settings
from ..errors import (DeviceFunctionError, LaunchError, PerformanceWarning, driver_refusal,
                      render_as_one_block, setting_hint)
from ..runtime import arguments, launch, placement
from ..runtime.hints import ArgHint
from ..tracking import world
from . import backends, graphs


#: Fewer blocks than this in a launch configuration are warned of
#: (``settings.low_occupancy_warnings``), as numba-cuda does: an H100 has 132 multiprocessors.
LOW_OCCUPANCY_BLOCKS = 128


class LowOccupancyWarning(PerformanceWarning, NumbaPerformanceWarning):
    """A launch configuration with too few blocks to occupy the GPU."""


#: Launch configurations a kernel keeps (``kernel[grid, block, stream]`` checked once): beyond,
#: the oldest is dropped, so that a loop launching on a new stream or grid each time keeps
#: neither its streams nor its configurations alive.
MAX_CONFIGURATIONS = 64


class Launcher:
    """``kernel[grid, block, stream, shared]``: a validated launch configuration."""

    __slots__ = ("kernel", "grid", "block", "stream", "shared", "_stream_ptr", "dims",
                 "callbacks")

    def __init__(self, kernel, config):
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise LaunchError(f"{kernel.__qualname__}[...]: launch configuration must be [grid, "
                              f"block], [grid, block, stream] or [grid, block, stream, "
                              f"dynamic_shared_bytes], got {config!r}")
        self.kernel = kernel
        try:
            self.grid = launch.normalize_dims(config[0], "grid")
            self.block = launch.normalize_dims(config[1], "block")
            stream = config[2] if len(config) > 2 else None
            # (NumPy's integers are taken as ints everywhere, as numba-cuda takes them)
            handle = launch.as_index(stream) if stream is not None else None
            self.stream = stream if handle is None else handle
            shared = config[3] if len(config) > 3 else 0
            self.shared = launch.dynamic_shared_size(shared)
            # An explicit stream is resolved (and validated) once; None means CuPy's current
            # stream (the simulator takes streams as they are, once they are streams).
            self._stream_ptr = None
            if self.stream is not None:
                ptr = launch.stream_ptr(self.stream)
                if not backends.simulated():
                    self._stream_ptr = ptr
        except LaunchError as exc:
            raise LaunchError(f"{kernel.__qualname__}[{', '.join(map(repr, config))}]: "
                              f"{exc}") from None
        bounds = kernel._launch_bounds
        threads = self.block[0] * self.block[1] * self.block[2]
        if bounds and threads > bounds[0]:
            raise driver_refusal(f"{kernel.__qualname__} was compiled with launch_bounds="
                                 f"{bounds if len(bounds) > 1 else bounds[0]}: at most "
                                 f"{bounds[0]} threads per block, got block {config[1]!r} "
                                 f"({threads})")
        if settings.low_occupancy_warnings:
            blocks = self.grid[0] * self.grid[1] * self.grid[2]
            if blocks < LOW_OCCUPANCY_BLOCKS:        # (the user's kernel[...]: 4 frames up)
                warnings.warn(LowOccupancyWarning(
                    f"Grid size {blocks} of {kernel.__qualname__}[{config[0]!r}, "
                    f"{config[1]!r}] is under {LOW_OCCUPANCY_BLOCKS} blocks: most of the GPU's "
                    f"multiprocessors idle (low occupancy); launch more, smaller blocks "
                    f"({setting_hint('low_occupancy_warnings', False)} silences this)"),
                    stacklevel=4)
        self.dims = self.grid + self.block + (self.shared,)    # cuLaunchKernel's order
        if self.shared > 48 * 1024:               # (every GPU's block has 48 KiB: no use asking)
            check_dynamic_shared(kernel, config, self.shared)

    # numba-cuda's names for the configuration
    @property
    def dispatcher(self):
        return self.kernel

    @property
    def griddim(self):
        return self.grid

    @property
    def blockdim(self):
        return self.block

    @property
    def sharedmem(self):
        return self.shared

    @property
    def pre_launch_callbacks(self):
        """numba-cuda's list of ``callback(kernel, launch_config)`` run on the host just before
        each launch of this configuration (``kernel``: the specialisation launched; None under
        the simulator when it compiles nothing, ``GPUREPLACE_SIM_COMPILE=0``), on both
        backends: each call of a prepared launch of it (``prepare``) too, and for a launch a
        graph captured, once as the capture issues it and again before each replay (on the
        GPU all of a graph's before its one ``cudaGraphLaunch``).  Asking for it takes this
        configuration off the generated fast launch (and moves the world, so that prepared
        launches and graphs of it bind again and see the list); callbacks must not launch CUDA
        work themselves."""
        callbacks = getattr(self, "callbacks", None)
        if callbacks is None:
            callbacks = self.callbacks = []
            self.__class__ = WithCallbacks
            world.bump()
        return callbacks

    def __repr__(self):
        def dims(d):
            while len(d) > 1 and d[-1] == 1:
                d = d[:-1]
            return str(d[0]) if len(d) == 1 else str(d)
        extra = "" if self.stream is None else f", stream={self.stream!r}"
        extra += f", shared={self.shared}" if self.shared else ""
        return f"<launch of {self.kernel.__qualname__}[{dims(self.grid)}, {dims(self.block)}{extra}]>"

    def run_callbacks(self, spec):
        for callback in getattr(self, "callbacks", None) or ():
            callback(spec, self)

    def __dask_tokenize__(self):
        """Dask's token: the kernel's (its definition's) with the configuration, the same in
        every process for the same definition and configuration (pickle's bytes hold the
        kernel's identity in this process).  A stream or callbacks, which are this process's,
        are given by identity."""
        local = None
        if self.stream is not None and not (isinstance(self.stream, int) and self.stream == 0):
            local = ("stream", id(self.stream))
        if getattr(self, "callbacks", None):
            local = (local, "callbacks", tuple(map(id, self.callbacks)))
        return ("gpureplace.Launcher", self.kernel.__dask_tokenize__(), self.grid, self.block,
                self.shared, local)

    def __reduce__(self):
        if getattr(self, "callbacks", None):
            import pickle
            raise pickle.PicklingError(
                f"Cannot pickle configured launches with pre-launch callbacks: "
                f"{self.kernel.__qualname__}[{self.grid}, {self.block}] has "
                f"{len(self.callbacks)} (functions of this process)")
        if self.stream is not None and not (isinstance(self.stream, int) and self.stream == 0):
            import pickle
            raise pickle.PicklingError(
                f"Cannot pickle {self.kernel.__qualname__}[{self.grid}, {self.block}, "
                f"{self.stream!r}]: a stream belongs to this process; pickle "
                f"{self.kernel.__qualname__}[{self.grid}, {self.block}] and give the other "
                f"process's stream there")
        return (configure, (self.kernel, (self.grid, self.block, 0, self.shared)))

    def stream_ptr(self):
        ptr = self._stream_ptr
        return launch.current_stream_ptr() if ptr is None else ptr

    def general(self, args):
        """The general launch path: argument keys, compile or revalidate, load, launch."""
        self.kernel._launch(self, args)

    def __call__(self, *args, **kwargs):
        if kwargs:
            _refuse_keywords(self.kernel, kwargs)
        try:
            self.kernel._launch(self, args)
        except KeyboardInterrupt as exc:
            raise interrupted(self, exc) from None

    def prepare(self, *args):
        """Bind ``args`` once: the returned ``PreparedLaunch`` relaunches with nothing to check
        or pack but the world age (à la Warp's recorded launches)."""
        return PreparedLaunch(self, args)


def shared_limit():
    """(arch, the most shared memory one block can have there in bytes) of the device launches
    go to: the current GPU's, or the simulator's (sm_90, as its device says); None unknown."""
    from ..arch import shared_opt_in_bytes
    if backends.simulated():
        arch = "sm_90"
    elif probe.available():
        arch = probe.arch_of(probe.current_device())
    else:
        return None                       # (the launch says there is no GPU)
    most = shared_opt_in_bytes(arch)
    return None if most is None else (arch, most)


def check_dynamic_shared(kernel, config, nbytes, static=0):
    """Refuse, on both backends, ``nbytes`` of dynamic shared memory (with ``static`` bytes of
    static shared arrays, when known) that a block of ``kernel`` cannot have on the device."""
    limit = shared_limit()
    if limit is None or nbytes + static <= limit[1]:
        return
    from ..compiler.intrinsics.memory import format_bytes
    arch, most = limit
    asked = f"{nbytes:,} bytes of dynamic shared memory" + (
        f" with {static:,} bytes of static shared arrays" if static else "")
    raise LaunchError(f"{kernel.__qualname__}[{', '.join(map(repr, config))}]: {asked} is more "
                      f"than the {most:,} bytes ({format_bytes(most)}) a block can have on {arch}; "
                      f"give the launch's fourth value (bytes of dynamic shared memory) at most "
                      f"{max(most - static, 0)}, and keep larger data in global memory")


#: A block of this many threads or fewer always fits the register file: the most registers a
#: thread has, 255, take 8,192 of a block's 64 K in each warp: 8 warps.
REGISTER_SAFE_THREADS = 256


def check_block_registers(kernel, grid, block, attribute):
    """Refuse, on both backends, a block of more threads than ``kernel``'s registers allow (the
    driver's ``CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES``, said with the numbers).  ``attribute(name)``
    asks the loaded kernel (the driver) or, in the simulator, ptxas for ``max_threads_per_block``
    and ``num_regs``; only for blocks over ``REGISTER_SAFE_THREADS``."""
    threads = block[0] * block[1] * block[2]
    if threads <= REGISTER_SAFE_THREADS:
        return
    try:
        most = int(attribute("max_threads_per_block"))
        regs = int(attribute("num_regs"))
    except Exception:           # (nothing to ask, no ptxas: the driver says it at the launch)
        return
    if threads <= most:
        return
    shown = ", ".join(str(d[0]) if d[1:] == (1, 1) else str(d) for d in (grid, block))
    raise driver_refusal(
        f"{kernel.__qualname__}[{shown}]: a block of {threads} threads is more than this "
        f"kernel can run: its {regs} registers per thread allow at most {most} (a block has 64 K "
        f"registers); launch blocks of at most {most} threads, or cap its registers "
        f"(cuda.jit(max_registers=...), or launch_bounds={threads})",
        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")


def check_static_shared(kernel, cfg, entry):
    """``check_dynamic_shared`` with the static shared arrays of the loaded specialisation
    ``entry`` counted (asked of the driver: only for a launch past the 48 KiB a block has
    without asking, which takes the general path anyway)."""
    try:
        static = int(entry.attribute("shared_size_bytes"))
    except Exception:                      # (no driver to ask: the dynamic size was checked)
        return
    check_dynamic_shared(kernel, (cfg.grid, cfg.block, cfg.stream or 0, cfg.shared),
                         cfg.shared, static)


class WithCallbacks(Launcher):
    """A configuration with pre-launch callbacks: always the general path, which runs them."""

    __slots__ = ()

    def __call__(self, *args, **kwargs):
        if kwargs:
            _refuse_keywords(self.kernel, kwargs)
        try:
            self.kernel._launch(self, args)
        except KeyboardInterrupt as exc:
            raise interrupted(self, exc) from None


def interrupted(cfg, exc):
    """The KeyboardInterrupt (Ctrl-C) that stopped a launch, said in one line naming the launch
    and what it was doing, shown in IPython as one block at the user's line (not a traceback
    through gpureplace's, the simulator's or Numba's frames)."""
    files = [frame.f_code.co_filename for frame, _ in traceback.walk_tb(exc.__traceback__)]
    sep = os.sep
    doing = ("while the simulator ran it" if any(f"{sep}simulator{sep}" in f for f in files)
             else "while compiling it" if any(f"{sep}numba{sep}" in f or f"{sep}compiler{sep}" in f
                                              for f in files)
             else "")
    def dims(d):
        d = tuple(d)
        while len(d) > 1 and d[-1] == 1:
            d = d[:-1]
        return str(d[0]) if len(d) == 1 else repr(d)
    said = f"{cfg.kernel.__qualname__}[{dims(cfg.grid)}, {dims(cfg.block)}] interrupted"
    if doing:
        said += f" {doing}"
    return render_as_one_block(KeyboardInterrupt(said))


def _refuse_keywords(kernel, kwargs):
    raise render_as_one_block(TypeError(
        f"{kernel.__qualname__}[blocks, threads]() got an unexpected keyword argument "
        f"{next(iter(kwargs))!r}: kernels take their arguments by position, as numba-cuda's do"))


def configure(kernel, config):
    """``kernel[config]`` (what a pickled configuration becomes)."""
    return kernel[config]


class Configurable:
    """``kernel[grid, block, stream, shared]``: a kernel's Launcher for a configuration, made once
    and kept in ``kernel._configs``.  A mixin of ``GPUFunction``."""

    __slots__ = ()

    def __getitem__(self, config):
        try:
            launcher = self._configs.get(config)
        except TypeError:                   # a list for a grid or block, an unhashable stream
            launcher = None
        # A configuration equal to a kept one is not always valid: k[4.0, 32] and k[True, 32]
        # equal (and hash as) k[4, 32].  Two ints need no more than a look at their types.
        if launcher is not None and (type(config[0]) is int is type(config[1]) and len(
                config) == 2 or same_kinds(config)):
            return launcher
        return self._configure(config)

    def _configure(self, config):
        """A new Launcher for ``config`` (which it checks), kept if ``config`` can be a key: one
        with a grid or block given as a list is kept under its tuple."""
        if self.device:
            raise DeviceFunctionError(f"Cannot compile a device function as a kernel: "
                                      f"{self.__qualname__} is a device function; only "
                                      f"kernels are launched with [grid, block]")
        if type(config) is list:            # k[[grid, block]]: numba-cuda takes the list
            config = tuple(config)
        key = config
        if isinstance(config, tuple) and list in map(type, config):
            key = tuple(tuple(v) if type(v) is list else v for v in config)
            try:
                launcher = self._configs.get(key)
            except TypeError:
                launcher = None
            if launcher is not None and same_kinds(key):
                return launcher
        launcher = self._launcher_class(self, config)
        if isinstance(key, tuple):
            configs = self._configs
            if len(configs) >= MAX_CONFIGURATIONS:
                # (a loop over many grids or fresh streams: the oldest goes, streams with it)
                del configs[next(iter(configs))]
            try:
                configs[key] = launcher
            except TypeError:
                pass
        return launcher


def same_kinds(config):
    """Whether ``config``, equal to a configuration a Launcher was made for, is of kinds a
    launch takes as well (so that the kept Launcher serves it): ints or integer-like values
    (NumPy's) for the grid, block and shared memory, and a stream of a kind already taken;
    not a float or bool that equals an int.  Plain ints and tuples of them are seen at a
    glance (this runs on every launch through ``kernel[...]`` that is not two ints)."""
    # (A tuple here is as long as the kept one it equals: 1 to 3 values.)
    g, b = config[0], config[1]
    plain = (type(g) is int or type(g) is tuple and type(g[0]) is int is type(g[-1]) and (
        len(g) < 3 or type(g[1]) is int)) and (type(b) is int or type(b) is tuple and type(
            b[0]) is int is type(b[-1]) and (len(b) < 3 or type(b[1]) is int))
    if plain and len(config) > 2:
        stream = config[2]
        plain = (stream is None or type(stream) is int or type(stream) in launch.STREAM_TYPES
                 ) and (len(config) == 3 or type(config[3]) is int)
    if plain:
        return True
    for i, v in enumerate(config):        # integer-like values other than ints
        if i < 2 and type(v) is tuple:
            if None in map(launch.as_index, v):
                return False
        elif not (i == 2 and (v is None or type(v) in launch.STREAM_TYPES)) and \
                launch.as_index(v) is None:
            return False
    return True


class ForAll:
    """What ``kernel.forall(ntasks, ...)`` returns: call it with the kernel's arguments."""

    __slots__ = ("kernel", "ntasks", "tpb", "stream", "sharedmem")

    def __init__(self, kernel, ntasks, tpb, stream, sharedmem):
        self.kernel, self.ntasks, self.tpb = kernel, ntasks, tpb
        self.stream, self.sharedmem = stream, sharedmem

    def __call__(self, *args):
        if self.ntasks == 0:
            return
        tpb = self.tpb or self.kernel._occupancy_block_size(args, self.sharedmem)
        tpb = min(tpb, self.ntasks) if self.tpb == 0 else tpb
        blocks = (self.ntasks + tpb - 1) // tpb
        self.kernel[blocks, tpb, self.stream, self.sharedmem](*args)


class PreparedLaunch:
    """``kernel[grid, block].prepare(*args)``: a launch with its arguments bound and packed.

    Each call replays a CUDA graph holding just this launch (``uses_graph``), less than half
    the host cost of a ``cuLaunchKernel``; cooperative kernels, and launches while a graph is
    being captured, are one ``cuLaunchKernel`` from a parameter buffer of their own.  The
    arguments are
    kept alive and read once: mutate arrays in place, but rebinding a name does not reach a
    prepared launch.  When the world moves (a dependency redefined) the next call revalidates,
    recompiles if needed and packs again.
    """

    def __new__(cls, config, args):
        # Each prepared launch gets a class of its own, whose ``__call__`` is generated code
        # with the launch's values as constants (see _bind).
        own = type("PreparedLaunch", (cls,), {"__slots__": ()})
        return object.__new__(own)

    __slots__ = ("config", "args", "_age", "_keep", "_device", "__weakref__")

    def __init__(self, config, args):
        self.config = config
        self.args = tuple(args)
        self._bind()

    def _follow(self):
        """The configuration on the kernel that stands under the prepared kernel's name now
        (a re-run cell redefined it: the prepared launch runs the new definition)."""
        from .definitions import current_definition
        cfg = self.config
        now = current_definition(cfg.kernel)
        if now is not cfg.kernel:
            self.config = now[cfg.grid, cfg.block, cfg.stream, cfg.shared]
        return self.config

    def _bind(self):
        cfg = self._follow()
        kernel = cfg.kernel
        for i, a in enumerate(self.args):
            if isinstance(a, ArgHint):
                name = list(kernel._pysig.parameters)[i] if i < kernel._nparams else i
                raise arguments.ArgumentError(
                    f"{kernel.__qualname__}.prepare: argument {i} ({name!r}) is "
                    f"{type(a).__name__}(...), a copy to or from the host around a single "
                    f"launch: prepared launches take device arrays")
        if backends.simulated():
            # refused now what the simulated launch would refuse, as the GPU path binds it
            argtypes = backends.simulator().check(kernel, cfg.grid, cfg.block, cfg.stream,
                                                  cfg.shared, self.args)
            if any(_type_holds_record(t) for t in argtypes):
                _refuse_record(kernel)
            self._age = None
            type(self).__call__ = type(self).launch = PreparedLaunch._simulate
            return
        # A prepared launch stays on the device it was prepared on: its graph, stream and
        # module are that device's, and binding again (after a redefinition) happens there too.
        placed = placement.multi_gpu()
        if getattr(self, "_device", None) is None:
            self._device = probe.current_device()
        if placed and probe.current_device() != self._device:
            with probe.cupy_module().cuda.Device(self._device):
                return self._bind()
        keys, values, entry = kernel._resolve(self.args)
        if any(arguments.holds_record(k) for k in keys):
            _refuse_record(kernel)
        rec = graphs.recorder()
        if rec is not None:
            rec.add(kernel, cfg, self.args, keys, entry.device_id, entry)
        try:
            data = struct.pack(entry.spec.param_format, *values)
        except struct.error as exc:
            raise LaunchError(f"{kernel.__qualname__}: an argument does not fit its parameter "
                              f"type: {exc}") from None
        params = launch.ParamBuffer(len(data), data)
        stream = cfg.stream_ptr()
        if cfg.shared > entry.free_shared:
            check_static_shared(kernel, cfg, entry)
        check_block_registers(kernel, cfg.grid, cfg.block, entry.attribute)
        entry.allow_shared(cfg.shared)
        # While a graph is being captured, each call binds again so the graph records it.
        self._age = world.age if rec is None else -1
        debug = entry.spec.options.debug
        graph = _one_launch_graph(entry, cfg.dims, params) if rec is None and not debug \
            else None
        self._keep = (entry, params, graph)           # what the raw pointers point into
        # One call, with every value a constant: nothing to look up but the world age.
        printf = "    _note_printf()\n" if entry.spec.uses_printf else ""
        if getattr(cfg, "callbacks", None) is not None:
            # the configuration's pre-launch callbacks, before each launch (its list, as it is
            # at each call: one asked for later moves the world, which binds this again)
            printf += "    _run_callbacks(_spec)\n"
        if graph is not None:
            go = f"{printf}    _run({int(graph.graphExec)}, {int(stream)})\n"
            run = probe.cupy_module().cuda.runtime.graphLaunch
        else:
            dims = ", ".join(str(int(d)) for d in cfg.dims)
            go = (f"{printf}    _run({int(entry.fn_ptr)}, {dims}, {int(stream)}, 0, "
                  f"{int(params.extra_ptr)})\n")
            run = entry.launch_kernel
        if debug:                 # wait and raise what a thread raised (compiler/exceptions.py)
            go += f"    _check({int(stream)})\n"
        if placed:                # launched from another current device: switch to its own
            go = f"    if _current_device() != {self._device}: return self._on_device()\n" + go
        src = (f"def __call__(self, *args):\n    if args: self._refuse_arguments()\n"
               f"    if _world.age != {self._age}: return self._rebind()\n"
               f"{go}\ndef _go(self):\n{go}")
        env = {"_world": world, "_run": run, "_note_printf": launch.note_printf,
               "_check": entry.raise_device_exception if debug else None,
               "_current_device": probe.current_device,
               "_run_callbacks": cfg.run_callbacks, "_spec": entry.spec}
        exec(compile(src, "<gpureplace prepared launch>", "exec"), env)
        own = type(self)
        own.__call__ = own.launch = env["__call__"]
        own._go = env["_go"]

    def _rebind(self):
        self._bind()
        type(self)._go(self)

    def _on_device(self):
        with probe.cupy_module().cuda.Device(self._device):
            type(self)._go(self)

    @property
    def device_id(self):
        """The device this launch was prepared on, where it always runs (None when simulated)."""
        return getattr(self, "_device", None)

    @property
    def uses_graph(self):
        """Whether each call replays a one-launch CUDA graph (see ``_one_launch_graph``)."""
        keep = getattr(self, "_keep", None)
        return bool(keep) and keep[2] is not None

    def _refuse_arguments(self):
        raise render_as_one_block(TypeError(
            f"a prepared launch of {self.config.kernel.__qualname__} takes no arguments: they "
            f"were bound by prepare(); prepare again to launch with others"))

    def _simulate(self, *args):
        if args:
            self._refuse_arguments()
        cfg = self._follow()
        cfg.kernel._launch(cfg, self.args)

    def __call__(self):           # replaced per instance by _bind
        raise AssertionError("unbound prepared launch")

    launch = __call__

    def __reduce__(self):
        # (its class is its own, made by __new__, and its call code made for this process's
        # device, arrays and stream: pickle would fail naming neither)
        kernel = self.config.kernel
        raise TypeError(
            f"a prepared launch of {kernel.__qualname__} cannot be pickled: it is bound to this "
            f"process's arguments, device and launch code; send the kernel (or "
            f"{kernel.__name__}[grid, block]) and its arguments instead, and prepare it again "
            f"in the other process")


def _type_holds_record(ty):
    """Whether Numba type ``ty`` is a record's or a tuple's holding one at any depth."""
    if isinstance(ty, nbtypes.Record):
        return True
    return isinstance(ty, nbtypes.BaseTuple) and any(_type_holds_record(t) for t in ty.types)


def _refuse_record(kernel):
    raise LaunchError(f"{kernel.__qualname__}: prepare() cannot bind a record argument (it is "
                      f"copied to the device and back around each launch); pass a 1-element "
                      f"record array instead")


def _one_launch_graph(entry, dims, params):
    """The launch as a CUDA graph of one kernel node, instantiated and uploaded; None where it
    cannot be (cooperative launches, a driver that refuses the capture).

    Replaying such a graph costs the host about 1.6 us on the H200, against 3.5-4 us for
    ``cuLaunchKernel`` itself, whatever the number of parameters (bench/launch.py).  The node
    holds a copy of the parameters, which a prepared launch binds once anyway; launches of one
    graph on one stream run in order, as the kernel launches did."""
    if getattr(entry, "cooperative", False):
        return None                                   # launched directly
    try:
        side = probe.cupy_module().cuda.Stream(non_blocking=True)
        side.begin_capture()
        try:
            entry.launch_kernel(entry.fn_ptr, *dims, side.ptr, 0, params.extra_ptr)
        finally:
            graph = side.end_capture()
        graph.upload()
        return graph
    except Exception:                                 # capture refused: launch directly
        return None
