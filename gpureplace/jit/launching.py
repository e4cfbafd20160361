"""How a ``cuda.jit`` kernel launches: arguments to type keys and parameter values, the
specialisation they select (compiled or revalidated), loaded on the current device, launched;
the generated fast path takes over for the next launches of the same types (runtime/binder.py).
Also cuda.In/Out/InOut transfers, record arguments, ``forall``.  A mixin of ``GPUFunction``."""

from __future__ import annotations

import contextlib

import numpy as np

from .. import probe
from ..errors import LaunchError, SignatureError
from ..runtime import arguments, conversion, launch
from ..runtime.hints import ArgHint
from ..runtime.binder import make_fast_launch
from ..tracking import world
from . import backends, graphs
from .launcher import ForAll, Launcher


class Launching:
    """The launch path of ``GPUFunction``: ``kernel[grid, block](*args)`` ends in ``_launch``."""

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
        return ForAll(self, ntasks, tpb, stream, sharedmem)

    def _occupancy_block_size(self, args, sharedmem):
        """The block size at which the driver expects full occupancy for ``args``'
        specialisation (cuOccupancyMaxPotentialBlockSize); 128 in the simulator."""
        if backends.simulated():
            return 128
        import ctypes
        _, _, entry = self._resolve(args)
        lib = probe.libcuda()
        grid, block = ctypes.c_int(), ctypes.c_int()
        limit = self._launch_bounds[0] if self._launch_bounds else 0
        rc = lib.cuOccupancyMaxPotentialBlockSize(
            ctypes.byref(grid), ctypes.byref(block), ctypes.c_void_p(entry.fn_ptr), None,
            ctypes.c_size_t(sharedmem), ctypes.c_int(limit)) if lib is not None else -1
        return block.value if rc == 0 and block.value > 0 else 128

    def _explicit_match(self, keys, per_arg):
        """The declared signature these arguments fit (numba-cuda: a kernel given signatures
        compiles nothing else; scalars convert to the declared types)."""
        declared = self.declared_signatures
        hit = conversion.match_signature(declared, keys, per_arg, self.__qualname__)
        if hit is None:
            sigs = "; ".join("(" + ", ".join(map(str, s)) + ")" for s in declared)
            got = ", ".join(str(arguments.numba_type_of_key(k)) for k in keys)
            raise SignatureError(
                f"No matching definition for argument type(s) ({got}): {self.__qualname__} "
                f"was compiled for the signature(s) {sigs} given to cuda.jit, and takes no "
                f"others")
        return hit

    def _type_keys(self, args, what):
        """Argument type keys, host NumPy arrays included (typed as the device arrays they
        stand for)."""
        keys = []
        for i, a in enumerate(args):
            try:
                if type(a) is np.ndarray:
                    keys.append(arguments.array_argument(a.dtype, 0, a.shape, a.strides)[0])
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
        rec = graphs.recorder()
        if any(isinstance(a, ArgHint) for a in args):    # (never on the fast path)
            if rec is not None:
                raise LaunchError(f"{self.__qualname__}: cuda.In/Out/InOut copy to or from the "
                                  f"host around each launch, which a CUDA graph cannot hold; "
                                  f"pass device arrays")
            return self._launch_with_transfers(config, args)
        if backends.simulated():
            if rec is not None:
                return rec.add(self, config, args)          # run when the graph is replayed
            return backends.simulator().launch(self, config.grid, config.block, config.stream,
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
                args, keys, entry, world.age, Launcher.general, launch.retry_errors())
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
        names = list(self._pysig.parameters)
        simulated = backends.simulated()
        new_args, back = [], []
        for i, a in enumerate(args):
            if not isinstance(a, ArgHint):
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
                cp = probe.cupy_module()
                with stream_of(config):
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
        with stream_of(config):
            for host, dev in back:
                host[...] = dev.get()                   # waits for the kernel on this stream

    def _launch_with_records(self, config, values, entry):
        """A launch with structured scalars among the arguments (numba-cuda's semantics): each
        is copied to device memory, the kernel gets a pointer to it, and what the kernel wrote
        is copied back into the record once the launch has finished."""
        cp = probe.cupy_module()
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
        if not probe.available():
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
        if self.declared_signatures:
            keys, values = self._explicit_match(keys, per_arg)
        dev = probe.current_device()
        launch.ensure_context(dev)
        cache_key = (tuple(keys), dev)
        entry = self._launch_cache.get(cache_key)
        if entry is None or entry.spec.world != world.age:
            entry = self._prepare(keys, dev, cache_key, entry)
        return keys, values, entry

    def _host_array_advice(self, args):
        """What to pass on a GPU instead of the host NumPy arrays among ``args`` ("" if none)."""
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
        """The loaded kernel for these argument keys on ``dev``: compiled, revalidated or
        rebuilt."""
        argtypes = tuple(arguments.numba_type_of_key(k) for k in keys)
        spec = self._specialize(argtypes, self.options(probe.arch_of(dev)))
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


def stream_of(config):
    """The launch's stream as CuPy's current one, for copies that must order with the kernel."""
    if config.stream is None:
        return contextlib.nullcontext()
    return probe.cupy_module().cuda.ExternalStream(config.stream_ptr())
