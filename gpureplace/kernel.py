"""``cuda.jit`` objects: kernels and device functions, their specialisations, launch and reflection."""

from __future__ import annotations

import functools
import inspect
import threading
import time
import weakref

from numba.core import types

from . import cudagraph as _graph
from .compiler import driver
from .compiler.kernel import compile_kernel, ptx_isa
from .compiler.signature import normalize_signature
from .config import normalize_arch, settings
from .dispatch.context import Context
from .errors import CompileError, LaunchError
from .runtime import arguments, launch
from .runtime import device as _device
from .runtime.binder import make_fast_launch
from .tracking import cache, deps, world
from .tracking.stats import counters

_compile_lock = threading.RLock()


def _parse_signature(sig):
    """``(argument types, return type or None)`` from a numba-cuda style signature: a string
    (parsed by compiler/signature.py, never evaluated: Numba's own reader runs it as Python), a
    tuple or list of types, or a Signature."""
    return normalize_signature(sig)


class GPUFunction:
    """What ``cuda.jit`` returns: a kernel (``device=False``) or a device function."""

    def __init__(self, py_func, *, device=False, context=None, fastmath=False, opt=3,
                 lineinfo=False, arch=None, max_registers=None, launch_bounds=None, link=None,
                 shared_memory_carveout=None, _parent=None):
        if not inspect.isfunction(py_func):
            raise TypeError(f"cuda.jit needs a Python function, got {py_func!r}")
        if context is not None and not isinstance(context, Context):
            raise TypeError(f"context= must be a gpureplace Context, got {context!r}")
        _check_definition(py_func, device)
        functools.update_wrapper(self, py_func)
        self.py_func = py_func
        self.device = bool(device)
        self._context = context          # None: the configured default (config.settings)
        self._fastmath = bool(fastmath)
        self._opt = opt
        self._lineinfo = lineinfo
        self._arch = normalize_arch(arch, "arch") if arch is not None else None
        from .compiler.intrinsics.external import _link_files
        self._link = _link_files(link, f"cuda.jit(link=...) of {py_func.__qualname__}")
        self._max_registers = _check_max_registers(max_registers)
        self._carveout = _check_carveout(shared_memory_carveout)
        self._launch_bounds = _check_launch_bounds(launch_bounds)
        self._pysig = inspect.signature(py_func)
        self._nparams = len(self._pysig.parameters)
        self._specs = {}           # (argtypes, options) -> KernelSpecialization
        self._launch_cache = {}    # (arg type keys, device id) -> LoadedKernel
        self._configs = {}         # launch configuration -> _Launcher
        self._variants = {}        # Context -> GPUFunction sharing py_func
        # Launch configurations of this function; their __call__ becomes the generated launch of
        # the latest specialisation (runtime/binder.py), falling back to _Launcher.general.
        self._launcher_class = type("Launcher", (_Launcher,), {"__slots__": ()})
        self._stale_reason = None  # why the specialisation being rebuilt went stale (verbose)
        self.on_compile = None     # called with each new specialisation (%%cuda --show)
        _live.add(self)
        self._parent = _parent     # the function this is a with_context() variant of
        self._only_keys = None     # specialize(): the argument type keys it accepts
        self._specialized = {}     # argument type keys -> what specialize() made for them
        self._explicit = ()        # cuda.jit("sig"): the only argument types it takes
        self._explicit_returns = {}  # ... and the return type each declares (device functions)
        if _parent is None:
            _note_definition(py_func)

    # -- options --------------------------------------------------------------------------------
    @property
    def context(self):
        return self._context if self._context is not None else settings.context()

    def options(self, arch=None):
        return driver.Options(
            fastmath=self._fastmath or settings.fastmath or self.context.effective_fastmath,
            arch=arch or self._arch or settings.arch or _device.default_arch(),
            opt=self._opt, lineinfo=self._lineinfo, max_registers=self._max_registers,
            launch_bounds=self._launch_bounds)

    @property
    def specialized(self):
        """Whether this kernel compiles nothing new: made by ``specialize``, or given its
        signatures in ``cuda.jit`` (numba-cuda's meaning)."""
        return self._only_keys is not None or bool(self._explicit)

    def specialize(self, *args):
        """numba-cuda's ``kernel.specialize(*args)``: the kernel compiled for the types of
        ``args`` and restricted to them (launching it with other types is an error)."""
        if self.device:
            raise TypeError(f"specialize() is for kernels; {self.__qualname__} is a device "
                            f"function")
        if self.specialized:
            how = "by specialize()" if self._only_keys is not None else \
                "by the signatures given to cuda.jit"
            raise RuntimeError(f"Dispatcher already specialized: {self.__qualname__} was "
                               f"specialized {how}")
        if len(args) != self._nparams:
            self._argument_count_error(args)
        keys = self._type_keys(args, "specialize")
        cached = self._specialized.get(keys)
        if cached is not None:
            return cached
        fixed = self._copy(self._context)
        fixed._only_keys = tuple(keys)
        fixed.compile(tuple(arguments.numba_type_of_key(k) for k in keys))
        self._specialized[keys] = fixed
        return fixed

    def _copy(self, context):
        """A function of the same Python code and options in ``context`` (None: the
        configured default), remembering this one as its parent."""
        copy = GPUFunction(self.py_func, device=self.device, context=context,
                           fastmath=self._fastmath, opt=self._opt, lineinfo=self._lineinfo,
                           arch=self._arch, max_registers=self._max_registers,
                           launch_bounds=self._launch_bounds or None, link=self._link or None,
                           shared_memory_carveout=self._carveout, _parent=self)
        copy._explicit, copy._explicit_returns = self._explicit, dict(self._explicit_returns)
        return copy

    def with_context(self, context):
        """The same function compiled (and cached) in ``context``."""
        if context is self.context:
            return self
        variant = self._variants.get(context)
        if variant is None:
            variant = self._copy(context)
            self._variants[context] = variant
        return variant

    # -- compiling --------------------------------------------------------------------------------
    def compile(self, sig, arch=None):
        """Compile for ``sig`` without launching (no GPU needed); returns the specialisation.
        ``arch``: an ``sm_XX`` string or a ``(major, minor)`` tuple (default: the configured
        one, else the current GPU's)."""
        if arch is not None:
            arch = normalize_arch(arch, f"{self.__qualname__}.compile(arch=...)")
        argtypes, _ = _parse_signature(sig)
        return self._specialize(argtypes, self.options(arch))

    def _from_disk_or_compile(self, argtypes, options, disk):
        key = None
        if disk and cache.enabled:
            from .compiler import backend
            # the PTX ISA this compile would emit (a driver too old for the arch is an error)
            isa = backend.ptx_isa_for_arch(options.arch, ptx_isa(),
                                           _device.driver_version() is not None)
            key = cache.kernel_key(self.py_func, argtypes, options, self.context, isa)
            spec = cache.load(key, self.py_func, argtypes, options, self.context)
            if spec is not None:
                counters["disk_hits"] += 1
                return spec
        spec = compile_kernel(self.py_func, argtypes, self.context, options)
        counters["kernel_compiles"] += 1
        if key is not None:
            cache.store(key, spec)
        return spec

    def _specialize(self, argtypes, options, disk=True):
        """The specialisation for ``argtypes``: cached, revalidated when the world has moved,
        recompiled (only what changed) when a dependency was redefined."""
        key = (argtypes, options)
        spec = self._specs.get(key)
        if spec is not None and spec.world == world.age and (
                disk or not getattr(spec, "from_disk", False)):
            counters["memory_hits"] += 1
            return spec
        with _compile_lock:
            spec = self._specs.get(key)
            if spec is not None and not disk and getattr(spec, "from_disk", False):
                spec = None          # reflection that needs the front end's results: compile
            if spec is not None:
                if self._still_valid(spec):
                    counters["memory_hits"] += 1
                    return spec
                del self._specs[key]
            age = world.age
            t0 = time.perf_counter()
            if self.device:
                spec = driver.compile_device(self.py_func, self.context, {}, argtypes,
                                             options.for_device(),
                                             self._explicit_returns.get(tuple(argtypes)))
            else:
                spec = self._from_disk_or_compile(argtypes, options, disk)
            spec.world = age
            reason, self._stale_reason = self._stale_reason, None
            if settings.verbose and reason:
                args = ", ".join(map(str, argtypes))
                print(f"gpureplace: {self.__qualname__}({args}) recompiled in "
                      f"{1e3 * (time.perf_counter() - t0):.0f} ms ({reason})")
            self._specs[key] = spec
        if self.on_compile is not None and not self.device:
            self.on_compile(spec)
        return spec

    def _still_valid(self, spec):
        counters["revalidations"] += 1
        age = world.age
        cf = spec if self.device else spec.compiled
        stale = deps.check(cf, age)
        if stale is None:
            spec.world = age
            return True
        self._stale_reason = str(stale)
        # compile_device recompiles what is stale in the closure (or only relinks a function
        # whose callees alone changed); nothing is dropped here.
        if stale.deleted:
            raise deps.stale_error(self.__qualname__, stale)
        return False

    def _select(self, sig, disk=True):
        if sig is None:
            specs = list(self._specs.items())
            if not disk:
                return [self._specialize(a, o, disk=False) if getattr(s, "from_disk", False)
                        else s for (a, o), s in specs]
            return [s for _, s in specs]
        argtypes, _ = _parse_signature(sig)
        return [self._specialize(argtypes, self.options(), disk=disk)]

    @property
    def extensions(self):
        """numba-cuda's argument-handling extensions: none (``cuda.jit(extensions=...)`` with
        any is refused)."""
        return []

    @property
    def specializations(self):
        """numba-cuda's: ``{argument types: kernel}`` of what ``specialize`` made."""
        return {tuple(arguments.numba_type_of_key(k) for k in keys): fn
                for keys, fn in self._specialized.items()}

    # -- reflection -------------------------------------------------------------------------------
    def inspect_ptx(self, sig=None):
        """PTX of the specialisation for ``sig``, or ``{argtypes: ptx}`` of all compiled so far
        (for a device function: its PTX on its own, as ``compile_ptx(..., device=True)``)."""
        if self.device:
            from .compiler.kernel import device_ptx
            return self._reflect(sig, device_ptx)
        return self._reflect(sig, lambda s: s.ptx)

    def inspect_llvm(self, sig=None):
        if self.device:
            return self._reflect(sig, lambda cf: "\n".join(cf.ir_texts()))
        return self._reflect(sig, lambda s: s.llvm_ir)

    def inspect_types(self, sig=None, file=None):
        def annotate(s):
            cf = s if self.device else s.compiled
            return "\n".join(f"{each.qualname}{each.argtypes} -> {each.restype}\n"
                             f"{each.type_annotation}" for each in cf.closure())
        out = self._reflect(sig, annotate, disk=False)
        if file is not None:
            print(out if isinstance(out, str) else "\n".join(out.values()), file=file)
            return None
        return out

    def dispatch_report(self, sig=None):
        """Each callable the call graph uses: function, line, context layer, implementation."""
        from .dispatch.report import dispatch_report
        return self._reflect(sig, lambda s: dispatch_report(s if self.device else s.compiled),
                             disk=False)

    def dependencies(self, sig=None):
        from .tracking.deps import describe
        return self._reflect(sig, lambda s: describe(s if self.device else s.compiled))

    def inspect_asm(self, signature=None):
        """numba-cuda's name for the kernel's assembly: its PTX."""
        return self.inspect_ptx(signature)

    def inspect_sass(self, signature=None):
        """The machine code (SASS) of the specialisation for ``signature``, or ``{argtypes:
        sass}`` of all compiled so far: the PTX assembled by ptxas for the specialisation's
        architecture and listed by nvdisasm (from the ``nvidia-cuda-nvcc`` and
        ``nvidia-cuda-nvdisasm`` wheels; no GPU needed)."""
        self._require_kernel("inspect_sass")
        return self._reflect(signature, lambda s: s.inspect_sass())

    @property
    def signatures(self):
        """The argument-type tuples compiled so far (numba-cuda's ``kernel.signatures``)."""
        return list(self.overloads)

    @property
    def overloads(self):
        """``{argument types: specialisation}`` of everything compiled so far (numba-cuda's
        ``kernel.overloads``)."""
        return {argtypes: spec for (argtypes, _), spec in self._specs.items()}

    # The driver's view of a specialisation loaded on the current device (numba-cuda's
    # ``get_regs_per_thread`` and friends): ``signature`` or all compiled ones as a dict.
    def get_regs_per_thread(self, signature=None):
        return self._function_attribute(signature, "num_regs")

    def get_shared_mem_per_block(self, signature=None):
        return self._function_attribute(signature, "shared_size_bytes")

    def get_local_mem_per_thread(self, signature=None):
        return self._function_attribute(signature, "local_size_bytes")

    def get_const_mem_size(self, signature=None):
        return self._function_attribute(signature, "const_size_bytes")

    def get_max_threads_per_block(self, signature=None):
        return self._function_attribute(signature, "max_threads_per_block")

    def _function_attribute(self, signature, name):
        self._require_kernel(f"get_{name}")
        launch.require_device()
        dev = _device.current_device()
        launch.ensure_context(dev)

        def read(spec):
            loaded = next((e for (_, d), e in self._launch_cache.items()
                           if d == dev and e.spec is spec), None)
            if loaded is None:
                loaded = launch.LoadedKernel(spec, dev, self._link, self._carveout)
            return int(loaded.attribute(name))
        return self._reflect(signature, read)

    def _reflect(self, sig, fn, disk=True):
        specs = self._select(sig, disk)
        if sig is not None:
            return fn(specs[0])
        return {s.argtypes: fn(s) for s in specs}

    def _require_kernel(self, what):
        if self.device:
            raise TypeError(f"{what}() is for kernels; {self.__qualname__} is a device function "
                            f"(use inspect_llvm)")

    # -- launching --------------------------------------------------------------------------------
    def __getitem__(self, config):
        launcher = self._configs.get(config) if isinstance(config, tuple) else None
        if launcher is None:
            if self.device:
                raise TypeError(f"{self.__qualname__} is a device function; only kernels are "
                                f"launched with [grid, block]")
            launcher = self._launcher_class(self, config)
            if isinstance(config, tuple):
                try:
                    self._configs[config] = launcher
                except TypeError:
                    pass
        return launcher

    def forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
        """numba-cuda's ``kernel.forall(ntasks)(*args)``: a 1-D launch of at least ``ntasks``
        threads, in blocks of ``tpb`` threads (0: the driver's choice for full occupancy of the
        specialisation the arguments select)."""
        if self.device:
            raise LaunchError(f"{self.__qualname__} is a device function: forall() launches "
                              f"kernels")
        for what, value in (("ntasks", ntasks), ("tpb", tpb), ("sharedmem", sharedmem)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise LaunchError(f"forall: {what} must be a non-negative int, got {value!r}")
        return _ForAll(self, ntasks, tpb, stream, sharedmem)

    def _occupancy_block_size(self, args, sharedmem):
        """The block size at which the driver expects full occupancy for ``args``'
        specialisation (cuOccupancyMaxPotentialBlockSize); 128 in the simulator."""
        if settings.launch_backend() == "simulator":
            return 128
        import ctypes
        _, _, entry = self._resolve(args)
        lib = _device.libcuda()
        grid, block = ctypes.c_int(), ctypes.c_int()
        limit = self._launch_bounds[0] if self._launch_bounds else 0
        rc = lib.cuOccupancyMaxPotentialBlockSize(
            ctypes.byref(grid), ctypes.byref(block), ctypes.c_void_p(entry.fn_ptr), None,
            ctypes.c_size_t(sharedmem), ctypes.c_int(limit)) if lib is not None else -1
        return block.value if rc == 0 and block.value > 0 else 128

    def __call__(self, *args, **kwargs):
        if self.device:
            raise RuntimeError(f"{self.__qualname__} is a device function: call it from a kernel "
                               f"or another device function (use the simulator to run it on "
                               f"the host)")
        raise LaunchError(f"{self.__qualname__} is a kernel: launch it with "
                          f"{self.__name__}[blocks, threads](...)")

    def _explicit_match(self, keys, per_arg):
        """The declared signature these arguments fit (numba-cuda: a kernel given signatures
        compiles nothing else; scalars convert to the declared types)."""
        hit = arguments.match_signature(self._explicit, keys, per_arg, self.__qualname__)
        if hit is None:
            sigs = "; ".join("(" + ", ".join(map(str, s)) + ")" for s in self._explicit)
            got = ", ".join(str(arguments.numba_type_of_key(k)) for k in keys)
            raise arguments.SignatureError(
                f"No matching definition for argument type(s) ({got}): {self.__qualname__} "
                f"was compiled for the signature(s) {sigs} given to cuda.jit, and takes no "
                f"others")
        return hit

    def _type_keys(self, args, what):
        """Argument type keys, host NumPy arrays included (typed as the device arrays they
        stand for)."""
        import numpy as np
        keys = []
        for i, a in enumerate(args):
            try:
                if type(a) is np.ndarray:
                    keys.append(arguments._array(a.dtype, 0, a.shape, a.strides)[0])
                else:
                    keys.append(arguments.value_key(a)[0])
            except LaunchError as exc:
                name = list(self._pysig.parameters)[i] if i < self._nparams else i
                raise type(exc)(f"{self.__qualname__}.{what}: argument {i} ({name!r}) "
                                f"{exc}") from None
        return tuple(keys)

    def _check_specialized(self, args):
        if len(args) != self._nparams:
            self._argument_count_error(args)
        keys = self._type_keys(args, "launch")
        if keys != self._only_keys:
            def show(ks):
                return ", ".join(str(arguments.numba_type_of_key(k)) for k in ks)
            raise LaunchError(f"{self.__qualname__} was specialized for ({show(self._only_keys)})"
                              f" by specialize(); got ({show(keys)})")

    def _launch(self, config, args):
        if self._only_keys is not None:
            self._check_specialized(args)
        rec = _graph.recorder()
        if any(isinstance(a, arguments.ArgHint) for a in args):    # (never on the fast path)
            if rec is not None:
                raise LaunchError(f"{self.__qualname__}: cuda.In/Out/InOut copy to or from the "
                                  f"host around each launch, which a CUDA graph cannot hold; "
                                  f"pass device arrays")
            return self._launch_with_transfers(config, args)
        if settings.launch_backend() == "simulator":
            if rec is not None:
                return rec.add(self, config, args)          # run when the graph is replayed
            from . import simulator
            return simulator.launch(self, config.grid, config.block, config.stream,
                                    config.shared, args)
        keys, values, entry = self._resolve(args)
        if any(k[0] == "record" for k in keys):
            if rec is not None:
                raise LaunchError(f"{self.__qualname__}: a record argument is copied to the "
                                  f"device and back around each launch, which a CUDA graph "
                                  f"cannot hold; pass a 1-element record array instead")
            return self._launch_with_records(config, values, entry)
        if rec is None:
            # The next launches with these argument types skip all of this (runtime/binder.py).
            self._launcher_class.__call__ = make_fast_launch(
                args, keys, entry, world.age, _Launcher.general, launch.retry_errors())
        else:
            # Capturing a graph: every launch comes here (no fast path while it lasts) so the
            # graph knows each specialisation it holds.
            rec.add(self, config, args, keys, entry.device_id, entry)
        if entry.spec.uses_printf:
            launch.note_printf()
        entry.launch(config.grid, config.block, config.stream_ptr(), config.shared, values)

    def _launch_with_transfers(self, config, args):
        """A launch with numba-cuda's cuda.In / Out / InOut hints: each host array is copied to
        device memory (In, InOut) or given fresh device memory (Out), the kernel launches on
        the copies, and Out / InOut copies are written back into the host arrays once it has
        finished."""
        import numpy as np
        names = list(self._pysig.parameters)
        simulated = settings.launch_backend() == "simulator"
        new_args, back = [], []
        for i, a in enumerate(args):
            if not isinstance(a, arguments.ArgHint):
                new_args.append(a)
                continue
            host = a.value
            if not isinstance(host, np.ndarray) or hasattr(host, "__cuda_array_interface__"):
                if hasattr(host, "__cuda_array_interface__") or hasattr(host, "__dlpack__"):
                    new_args.append(host)                # already on the device: as it is
                    continue
                name = names[i] if i < len(names) else i
                raise arguments.ArgumentError(
                    f"{self.__qualname__}: argument {i} ({name!r}) is "
                    f"{type(a).__name__}({type(host).__name__}); cuda.{type(a).__name__}() takes "
                    f"a NumPy array")
            if simulated:                                # host memory is the device's
                dev = host if a.copy_in and a.copy_out else \
                    host.copy() if a.copy_in else np.empty_like(host)
            else:
                cp = _device.cupy_module()
                with _stream_of(config):
                    dev = cp.asarray(host) if a.copy_in else cp.empty(host.shape, host.dtype)
            if a.copy_out and dev is not host:
                back.append((host, dev))
            new_args.append(dev)
        self._launch(config, tuple(new_args))
        if not back:
            return
        if simulated:
            for host, dev in back:
                host[...] = dev
            return
        with _stream_of(config):
            for host, dev in back:
                host[...] = dev.get()                   # waits for the kernel on this stream

    def _launch_with_records(self, config, values, entry):
        """A launch with structured scalars among the arguments (numba-cuda's semantics): each
        is copied to device memory, the kernel gets a pointer to it, and what the kernel wrote
        is copied back into the record once the launch has finished."""
        import numpy as np
        cp = _device.cupy_module()
        stream = config.stream_ptr()
        rt = cp.cuda.runtime
        copies, flat = [], []
        for v in values:
            if isinstance(v, np.void):
                host = np.array(v)                      # the record's bytes, contiguous
                dev = cp.cuda.alloc(max(host.nbytes, 1))
                rt.memcpyAsync(dev.ptr, host.ctypes.data, host.nbytes,
                               rt.memcpyHostToDevice, stream)
                copies.append((v, host, dev))
                v = dev.ptr
            flat.append(v)
        if entry.spec.uses_printf:
            launch.note_printf()
        entry.launch(config.grid, config.block, stream, config.shared, flat)
        for v, host, dev in copies:
            rt.memcpyAsync(host.ctypes.data, dev.ptr, host.nbytes, rt.memcpyDeviceToHost,
                           stream)
        rt.streamSynchronize(stream)
        for v, host, _ in copies:
            for name in host.dtype.names:
                v[name] = host[name]

    def _resolve(self, args):
        """(type keys, flat parameter values, LoadedKernel) for ``args`` on the current device:
        checks the arguments, compiles or revalidates, loads."""
        if not _device.available():
            # said before the arguments are checked: advice about them would mislead
            launch.require_device(self.__qualname__, self._host_array_advice(args))
        if len(args) != self._nparams:
            self._argument_count_error(args)
        keys, values, per_arg = [], [], []
        for i, a in enumerate(args):
            try:
                k, v = arguments.value_key(a)
            except LaunchError as exc:
                name = list(self._pysig.parameters)[i]
                raise type(exc)(f"{self.__qualname__}: argument {i} ({name!r}) {exc}") from None
            keys.append(k)
            values.extend(v)
            per_arg.append(v)
        if self._explicit:
            keys, values = self._explicit_match(keys, per_arg)
        dev = _device.current_device()
        launch.ensure_context(dev)
        cache_key = (tuple(keys), dev)
        entry = self._launch_cache.get(cache_key)
        if entry is None or entry.spec.world != world.age:
            entry = self._prepare(keys, dev, cache_key, entry)
        return keys, values, entry

    def _host_array_advice(self, args):
        """What to pass on a GPU instead of the host NumPy arrays among ``args`` ("" if none)."""
        import numpy as np
        names = list(self._pysig.parameters)
        host = [f"{i} ({names[i]!r})" for i, a in enumerate(args)
                if type(a) is np.ndarray and i < len(names)]
        if not host:
            return ""
        many = len(host) > 1
        return (f"; on a GPU, pass device arrays: argument{'s' if many else ''} "
                f"{', '.join(host)} {'are host NumPy arrays' if many else 'is a host NumPy array'}"
                f" (cupy.asarray(a), or cuda.to_device(a))")

    def _prepare(self, keys, dev, cache_key, entry):
        """The loaded kernel for these argument keys on ``dev``: compiled, revalidated or rebuilt."""
        argtypes = tuple(arguments.numba_type_of_key(k) for k in keys)
        spec = self._specialize(argtypes, self.options(_device.arch_of(dev)))
        if entry is not None and entry.spec is spec:
            return entry
        loaded = launch.LoadedKernel(spec, dev, self._link, self._carveout)
        self._launch_cache[cache_key] = loaded
        return loaded

    def _argument_count_error(self, args):
        names = list(self._pysig.parameters)
        if len(args) < len(names):
            missing = ", ".join(repr(n) for n in names[len(args):])
            params = list(self._pysig.parameters.values())[len(args):]
            defaults = "" if all(p.default is p.empty for p in params) else \
                " (a launch passes every parameter: default values are not used)"
            raise LaunchError(f"{self.__qualname__}() is missing argument(s) {missing}: it takes "
                              f"{len(names)} ({', '.join(names)}), {len(args)} given{defaults}")
        raise LaunchError(f"{self.__qualname__}() takes {len(names)} argument(s) "
                          f"({', '.join(names)}) but {len(args)} were given")

    def __repr__(self):
        kind = "device function" if self.device else "kernel"
        return f"<gpureplace {kind} {self.__qualname__} context={self.context.name!r}>"


def _check_definition(py_func, device):
    """Refuse, where ``cuda.jit`` is applied, a function that can never be a kernel (or device
    function): an ``async def``, a generator kernel, parameters a launch or call cannot fill."""
    from .compiler import constructs
    role = "a device function" if device else "a kernel"
    why = constructs.async_reason(py_func, role)
    if why is None and not device and inspect.isgeneratorfunction(py_func):
        why = (f"{py_func.__qualname__} is a generator (its body has yield), which a kernel "
               f"cannot be: a kernel returns nothing, so write its results into an array "
               f"argument (a generator helper that a kernel iterates works: for v in gen(n))")
    if why is None:
        why = constructs.signature_reason(py_func, role)
    if why is not None:
        code = py_func.__code__
        raise CompileError(why, function=py_func.__qualname__, filename=code.co_filename,
                           lineno=code.co_firstlineno, chain=(py_func.__qualname__,))


_definitions = {}
_live = weakref.WeakSet()      # every GPUFunction (the IPython extension reports on them)


def live_functions():
    return list(_live)


def _note_definition(py_func):
    """A ``cuda.jit`` of a name defined before (a re-run cell, a reloaded module) moves the world:
    code compiled against the old definition is revalidated at its next launch."""
    key = (py_func.__module__, py_func.__qualname__)
    if key in _definitions:
        world.bump()
    _definitions[key] = True


class _Launcher:
    """``kernel[grid, block, stream, shared]``: a validated launch configuration."""

    __slots__ = ("kernel", "grid", "block", "stream", "shared", "_stream_ptr", "dims",
                 "big_shared")

    def __init__(self, kernel, config):
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise LaunchError(f"launch configuration must be [grid, block], [grid, block, stream] "
                              f"or [grid, block, stream, dynamic_shared_bytes], got {config!r}")
        self.kernel = kernel
        self.grid = launch.normalize_dims(config[0], "grid")
        self.block = launch.normalize_dims(config[1], "block")
        self.stream = config[2] if len(config) > 2 else None
        shared = config[3] if len(config) > 3 else 0
        if not isinstance(shared, int) or shared < 0:
            raise LaunchError(f"dynamic shared memory must be a non-negative int of bytes, "
                              f"got {shared!r}")
        self.shared = shared
        # An explicit stream is resolved (and validated) once; None means CuPy's current stream
        # (the simulator takes streams as they are).
        self._stream_ptr = None
        if self.stream is not None and settings.launch_backend() == "gpu":
            self._stream_ptr = launch.stream_ptr(self.stream)
        bounds = kernel._launch_bounds
        threads = self.block[0] * self.block[1] * self.block[2]
        if bounds and threads > bounds[0]:
            raise LaunchError(f"{kernel.__qualname__} was compiled with launch_bounds="
                              f"{bounds if len(bounds) > 1 else bounds[0]}: at most {bounds[0]} "
                              f"threads per block, got block {config[1]!r} ({threads})")
        self.dims = self.grid + self.block + (shared,)     # cuLaunchKernel's order
        self.big_shared = shared > 48 * 1024               # needs an attribute set: general path

    def stream_ptr(self):
        ptr = self._stream_ptr
        return launch.current_stream_ptr() if ptr is None else ptr

    def general(self, args):
        """The general launch path: argument keys, compile or revalidate, load, launch."""
        self.kernel._launch(self, args)

    def __call__(self, *args):
        self.kernel._launch(self, args)

    def prepare(self, *args):
        """Bind ``args`` once: the returned ``PreparedLaunch`` relaunches with nothing to check
        or pack but the world age (à la Warp's recorded launches)."""
        return PreparedLaunch(self, args)


def _stream_of(config):
    """The launch's stream as CuPy's current one, for copies that must order with the kernel."""
    import contextlib
    if config.stream is None:
        return contextlib.nullcontext()
    return _device.cupy_module().cuda.ExternalStream(config.stream_ptr())


class _ForAll:
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

    __slots__ = ("config", "args", "_age", "_keep", "__weakref__")

    def __init__(self, config, args):
        self.config = config
        self.args = tuple(args)
        self._bind()

    def _bind(self):
        import struct as _struct
        cfg, kernel = self.config, self.config.kernel
        for i, a in enumerate(self.args):
            if isinstance(a, arguments.ArgHint):
                name = list(kernel._pysig.parameters)[i] if i < kernel._nparams else i
                raise arguments.ArgumentError(
                    f"{kernel.__qualname__}.prepare: argument {i} ({name!r}) is "
                    f"{type(a).__name__}(...), a copy to or from the host around a single "
                    f"launch: prepared launches take device arrays")
        if settings.launch_backend() == "simulator":
            self._age = None
            type(self).__call__ = type(self).launch = PreparedLaunch._simulate
            return
        keys, values, entry = kernel._resolve(self.args)
        if any(k[0] == "record" for k in keys):
            raise LaunchError(f"{kernel.__qualname__}: prepare() cannot bind a record argument "
                              f"(it is copied to the device and back around each launch); pass "
                              f"a 1-element record array instead")
        rec = _graph.recorder()
        if rec is not None:
            rec.add(kernel, cfg, self.args, keys, entry.device_id, entry)
        try:
            data = _struct.pack(entry.spec.param_format, *values)
        except _struct.error as exc:
            raise LaunchError(f"{kernel.__qualname__}: an argument does not fit its parameter "
                              f"type: {exc}") from None
        params = launch.ParamBuffer(len(data), data)
        stream = cfg.stream_ptr()
        entry.allow_shared(cfg.shared)
        # While a graph is being captured, each call binds again so the graph records it.
        self._age = world.age if rec is None else -1
        graph = _one_launch_graph(entry, cfg.dims, params) if rec is None else None
        self._keep = (entry, params, graph)           # what the raw pointers point into
        # One call, with every value a constant: nothing to look up but the world age.
        printf = "    _note_printf()\n" if entry.spec.uses_printf else ""
        if graph is not None:
            go = f"{printf}    _run({int(graph.graphExec)}, {int(stream)})\n"
            run = _device.cupy_module().cuda.runtime.graphLaunch
        else:
            dims = ", ".join(str(int(d)) for d in cfg.dims)
            go = (f"{printf}    _run({int(entry.fn_ptr)}, {dims}, {int(stream)}, 0, "
                  f"{int(params.extra_ptr)})\n")
            run = entry.launch_kernel
        src = (f"def __call__(self):\n    if _world.age != {self._age}: return self._rebind()\n"
               f"{go}\ndef _go(self):\n{go}")
        env = {"_world": world, "_run": run, "_note_printf": launch.note_printf}
        exec(compile(src, "<gpureplace prepared launch>", "exec"), env)
        own = type(self)
        own.__call__ = own.launch = env["__call__"]
        own._go = env["_go"]

    def _rebind(self):
        self._bind()
        type(self)._go(self)

    @property
    def uses_graph(self):
        """Whether each call replays a one-launch CUDA graph (see ``_one_launch_graph``)."""
        keep = getattr(self, "_keep", None)
        return bool(keep) and keep[2] is not None

    def _simulate(self):
        self.config.kernel._launch(self.config, self.args)

    def __call__(self):           # replaced per instance by _bind
        raise AssertionError("unbound prepared launch")

    launch = __call__


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
        side = _device.cupy_module().cuda.Stream(non_blocking=True)
        side.begin_capture()
        try:
            entry.launch_kernel(entry.fn_ptr, *dims, side.ptr, 0, params.extra_ptr)
        finally:
            graph = side.end_capture()
        graph.upload()
        return graph
    except Exception:                                 # capture refused: launch directly
        return None


def _check_max_registers(value):
    if value is None or value == 0:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 255:
        raise ValueError(f"cuda.jit(max_registers=...) must be an int from 1 to 255, got "
                         f"{value!r}")
    return value


def _check_carveout(value):
    """numba-cuda's ``shared_memory_carveout``: "MaxL1", "MaxShared", "default", or the percent
    (0 to 100) of the unified L1/shared memory to prefer as shared memory; None: the driver's."""
    if value is None:
        return None
    named = {"maxl1": 0, "maxshared": 100, "default": -1}
    if isinstance(value, str) and value.lower() in named:
        return named[value.lower()]
    if isinstance(value, int) and not isinstance(value, bool) and -1 <= value <= 100:
        return value
    raise ValueError(f"cuda.jit(shared_memory_carveout=...) must be 'MaxL1', 'MaxShared', "
                     f"'default' or a percentage from 0 to 100, got {value!r}")


def _check_launch_bounds(value):
    """numba-cuda's ``launch_bounds``: max threads per block, or a tuple (max threads, min
    blocks per multiprocessor, max blocks per cluster)."""
    if value is None:
        return ()
    bounds = (value,) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(bounds, tuple) or not 1 <= len(bounds) <= 3 or not all(
            isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in bounds) or \
            not 1 <= bounds[0] <= 1024:
        raise ValueError(f"cuda.jit(launch_bounds=...) must be the maximum threads per block "
                         f"(1 to 1024) or a tuple (max threads, min blocks per multiprocessor"
                         f"[, max blocks per cluster]), got {value!r}")
    return bounds


def jit(func=None, *, device=False, context=None, fastmath=False, opt=3, lineinfo=False,
        debug=False, cache=False, inline=False, forceinline=False, link=None,
        max_registers=None, launch_bounds=None, lto=False, shared_memory_carveout=None,
        boundscheck=None, extensions=None, nopython=True, **unknown):
    """``@cuda.jit`` / ``@cuda.jit(device=True)`` / ``@cuda.jit("void(float32[:])")``.

    numba-cuda's ``lto`` is accepted: device functions and libdevice are already linked and
    optimised together at the LLVM level, which is what link-time optimisation buys there;
    ``inline`` and ``forceinline`` likewise, LLVM's inliner seeing every device function.
    ``boundscheck=True`` is refused as numba-cuda refuses it (the simulator checks bounds), and
    so are argument ``extensions``."""
    if unknown:
        hint = ""
        if "arch" in unknown or "cc" in unknown:
            hint = ("; choose the architecture with kernel.compile(sig, arch='sm_90'), "
                    "cuda.compile_ptx(..., cc=(9, 0)), or gpureplace.config.settings.arch / "
                    "%config GPUReplace.arch (default: the current GPU's)")
        raise TypeError(f"cuda.jit() got unsupported option(s): {', '.join(sorted(unknown))}"
                        f"{hint}")
    if boundscheck:
        raise NotImplementedError("cuda.jit(boundscheck=True): compiled kernels do not check "
                                  "array bounds (nor do numba-cuda's); run the kernel in the "
                                  "simulator (GPUREPLACE_BACKEND=simulator) to have out-of-bounds "
                                  "accesses reported with the thread, block and line")
    if extensions:
        raise TypeError("cuda.jit(extensions=...): numba-cuda's argument-handling extensions "
                        "are not supported; pass arrays with __cuda_array_interface__ or DLPack")
    if not nopython:
        raise TypeError("cuda.jit(nopython=False): device code has no object mode")
    if debug:
        import warnings
        warnings.warn("cuda.jit(debug=True): compiled kernels do not check array bounds or raise "
                      "exceptions on the device (they get line information, as lineinfo=True "
                      "gives); run the kernel in the simulator (GPUREPLACE_BACKEND=simulator) to "
                      "have out-of-bounds accesses reported with the thread, block and line",
                      UserWarning, stacklevel=2)
        lineinfo = True
    sigs = None
    if func is not None and not callable(func):
        sigs, func = func, None
    elif isinstance(func, str):
        sigs, func = func, None

    def wrap(fn):
        gf = GPUFunction(fn, device=device, context=context, fastmath=fastmath, opt=3 if opt is True
                         else (0 if opt is False else opt), lineinfo=lineinfo,
                         max_registers=max_registers, launch_bounds=launch_bounds, link=link,
                         shared_memory_carveout=shared_memory_carveout)
        if sigs is not None:
            for sig in (sigs if isinstance(sigs, list) else [sigs]):
                args, ret = _parse_signature(sig)
                if device and ret is not None:
                    gf._explicit_returns[args] = ret
                gf.compile(sig)
                gf._explicit += (args,)
        return gf

    return wrap if func is None else wrap(func)


def compile_ptx(pyfunc, sig, device=False, fastmath=False, cc=None, opt=True, context=None,
                lineinfo=False, debug=False, abi="numba", abi_info=None, forceinline=False,
                launch_bounds=None):
    """numba-cuda's ``cuda.compile_ptx``: returns ``(ptx, return type)`` without needing a GPU.

    ``abi="c"`` (device functions of scalars) emits a ``.visible .func`` that CUDA C code can
    call as ``extern "C"``, named ``abi_info["abi_name"]`` or after the Python function."""
    if abi not in ("numba", "c"):
        raise ValueError(f"compile_ptx: abi must be 'numba' or 'c', got {abi!r}")
    if abi == "c" and not device:
        raise ValueError("compile_ptx: abi='c' is for device functions (device=True); kernels "
                         "are entry points, whatever the ABI")
    arch = normalize_arch(cc, "compile_ptx(cc=...)") if cc is not None else None
    fn = pyfunc if isinstance(pyfunc, GPUFunction) else GPUFunction(
        pyfunc, device=device, context=context, fastmath=fastmath, opt=3 if opt else 0,
        lineinfo=lineinfo or bool(debug), arch=arch, launch_bounds=launch_bounds)
    argtypes, restype = _parse_signature(sig)
    if device:
        cf = driver.compile_device(fn.py_func, fn.context, {}, argtypes, fn.options(arch),
                                   restype)
        from .compiler.kernel import device_ptx, device_ptx_c_abi
        if abi == "c":
            name = (abi_info or {}).get("abi_name") or fn.py_func.__name__
            return device_ptx_c_abi(cf, name), cf.restype
        return device_ptx(cf), cf.restype
    spec = fn._specialize(argtypes, fn.options(arch))
    return spec.ptx, types.void


def compile_ptx_for_current_device(pyfunc, sig, device=False, fastmath=False, opt=True,
                                   **kwargs):
    """``compile_ptx`` for the architecture of the current GPU (the default one without)."""
    from .runtime import device as _device
    return compile_ptx(pyfunc, sig, device=device, fastmath=fastmath, opt=opt,
                       cc=_device.default_arch(), **kwargs)


def cuda_compile(pyfunc, sig, debug=None, lineinfo=False, device=True, fastmath=False,
                 cc=None, opt=True, abi="c", abi_info=None, output="ptx", forceinline=False,
                 launch_bounds=None):
    """numba-cuda's ``cuda.compile`` (``gpureplace.cuda.compile``): ``(code, return type)``; a device function under the C
    ABI by default.  Only ``output="ptx"``: gpureplace generates PTX with LLVM, not NVVM's
    LTO-IR."""
    if output != "ptx":
        raise NotImplementedError(f"compile(output={output!r}): gpureplace produces PTX "
                                  f"(output='ptx'); LTO-IR is NVVM's format")
    if cc is None:
        from .runtime import device as _device
        cc = _device.default_arch()
    return compile_ptx(pyfunc, sig, device=device, fastmath=fastmath, cc=cc, opt=opt,
                       lineinfo=lineinfo, abi=abi if device else "numba", abi_info=abi_info,
                       launch_bounds=launch_bounds)


def compile_for_current_device(pyfunc, sig, debug=None, lineinfo=False, device=True,
                               fastmath=False, opt=True, abi="c", abi_info=None, output="ptx",
                               forceinline=False, launch_bounds=None):
    """numba-cuda's ``cuda.compile_for_current_device``: ``cuda.compile`` for the current GPU's
    architecture (the default one without a GPU)."""
    return cuda_compile(pyfunc, sig, debug=debug, lineinfo=lineinfo, device=device,
                        fastmath=fastmath, cc=None, opt=opt, abi=abi, abi_info=abi_info,
                        output=output, forceinline=forceinline, launch_bounds=launch_bounds)


__all__ = ["GPUFunction", "jit", "cuda_compile", "compile_ptx", "compile_for_current_device",
           "compile_ptx_for_current_device", "CompileError"]
