"""How a ``cuda.jit`` kernel launches: arguments to type keys and parameter values, the
specialisation they select (compiled or revalidated), loaded on the current device, launched;
the generated fast path takes over for the next launches of the same types (runtime/binder.py).
Also host arrays (cuda.In/Out/InOut and plain NumPy arrays), record arguments, ``forall``.  A mixin of ``GPUFunction``."""

from __future__ import annotations

import numpy as np
from numba.core import types

from .. import probe
from ..errors import CompileError, LaunchError, SignatureError, type_text
from ..config import settings
from ..runtime import arguments, conversion, launch, placement, transfers
from ..compiler import frontend
from ..compiler.ranking import best_signature, conversion_rank, read_only_as, read_only_places
from ..runtime.hints import ArgHint
from ..runtime.binder import make_fast_launch
from ..tracking import world
from . import backends, graphs, guesses
from . import launchconfig
from .launcher import ForAll, Launcher, check_block_registers, check_static_shared


class Launching:
    """The launch path of ``GPUFunction``: ``kernel[grid, block](*args)`` ends in ``_launch``."""

    def forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
        """numba-cuda's ``kernel.forall(ntasks)(*args)``: a 1-D launch of at least ``ntasks``
        threads, in blocks of ``tpb`` threads (0: the driver's choice for full occupancy of the
        specialisation the arguments select)."""
        if self.device:
            raise LaunchError(f"{self.__qualname__} is a device function: forall() launches "
                              f"kernels")
        import numpy as np
        ntasks, tpb, sharedmem = (int(v) if isinstance(v, np.integer) else v
                                  for v in (ntasks, tpb, sharedmem))
        if isinstance(ntasks, int) and not isinstance(ntasks, bool) and ntasks < 0:
            raise LaunchError(f"Can't create ForAll with negative task count: forall(ntasks) "
                              f"takes a non-negative int, got {ntasks}")     # (numba-cuda's words)
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
        _, _, entry = self._resolve(args, host_arrays_as_keys=True)
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
                hint = isinstance(a, ArgHint)
                if hint:
                    a = a.value
                if isinstance(a, np.ndarray) and not hasattr(a, "__cuda_array_interface__"):
                    keys.append(_host_array_key(a, hint))    # (the simulator's arrays too)
                else:
                    keys.append(arguments.value_key(a)[0])
            except LaunchError as exc:
                name = list(self._pysig.parameters)[i] if i < self._nparams else i
                raise type(exc)(f"{self.__qualname__}.{what}: argument {i} ({name!r}) "
                                f"{exc}") from None
        return tuple(keys)

    def _check_specialized(self, args):
        """``args`` as the kernel ``specialize()`` made takes them (numba-cuda launches its one
        kernel): scalars converted to the types it was specialized for; an array of any layout
        where an any-layout ('A') one was specialized, a writable one where a read-only one was
        (``_fits_specialized``: the launch passes it as the specialized type, ``_resolve``);
        anything else refused, naming the argument."""
        if len(args) != self._nparams:
            self._argument_count_error(args)
        keys = self._type_keys(args, "launch")
        if keys == self._only_keys:
            return args
        converted, refused = list(args), None
        for i, (key, want) in enumerate(zip(keys, self._only_keys)):
            if key == want:
                continue
            given, wanted = arguments.numba_type_of_key(key), arguments.numba_type_of_key(want)
            if _fits_specialized(given, wanted):
                continue
            converted[i] = conversion.as_scalar_of(args[i], wanted)
            if converted[i] is None and refused is None:
                refused = (i, given, wanted)
        if refused is not None:
            def show(ks):
                return ", ".join(str(arguments.numba_type_of_key(k)) for k in ks)
            i, given, wanted = refused
            raise LaunchError(f"{self.__qualname__} was specialized for ({show(self._only_keys)})"
                              f" by specialize(); got ({show(keys)}): argument {i} "
                              f"({list(self._pysig.parameters)[i]!r}) is {given}, where it "
                              f"takes {wanted}")
        return tuple(converted)

    def _as_specialized(self, keys, values, per_arg):
        """(keys, values) of arguments that ``_check_specialized`` let through, as the
        specialize()d kernel's one specialisation takes them: an array of another layout with
        the strides its any-layout parameter reads, under the specialized type key."""
        only = tuple(arguments.numba_type_of_key(k) for k in self._only_keys)
        if not all(_fits_specialized(arguments.numba_type_of_key(k), t)
                   for k, t in zip(keys, only)):
            return keys, values     # (forall's occupancy query, before the launch checks them)
        hit = conversion.match_signature([only], keys, per_arg, self.__qualname__)
        if hit is None:
            return keys, values
        return list(self._only_keys), hit[1]

    def _compiles_specialized(self, argtypes):
        """Whether ``compile(argtypes)`` of a kernel ``specialize()`` made gives its one
        specialisation: the types it was made for, or types its launches take as them
        (numba-cuda: a specialized kernel compiles nothing new)."""
        only = tuple(arguments.numba_type_of_key(k) for k in self._only_keys)
        return len(argtypes) == len(only) and all(
            _fits_specialized(g, w) or _scalar_converts(g, w) for g, w in zip(argtypes, only))

    def _launch(self, config, args):
        arguments.refuse_uninspectable(self.__qualname__, self._pysig, args)
        if self._only_keys is not None:
            args = self._check_specialized(args)
        if self._config_key is not None and self._config_key != launchconfig.key_of(config):
            # launch-config sensitive (jit/launchconfig.py): another configuration, another
            # specialisation
            return self._for_config(launchconfig.key_of(config))._launch(config, args)
        rec = graphs.recorder()
        if self._extensions:
            return self._launch_with_extensions(config, args, rec)
        return self._launch_args(config, args, rec)

    def _launch_args(self, config, args, rec):
        simulated = backends.simulated()
        hosts = 0
        for a in args:                                  # (never on the fast path)
            if isinstance(a, ArgHint):
                return self._launch_with_transfers(config, args, rec)
            if transfers.holds_host_array(a):
                if not simulated or settings.host_arrays == "error":
                    return self._launch_with_transfers(config, args, rec)
                hosts += 1
        if not hosts and any(transfers.holds_host_record(a) for a in args):
            # records without host arrays (the same record twice): each copied apart, so one
            # copy-back would overwrite what the kernel wrote through the other (refused by
            # name, as two views of one host array are)
            transfers.refuse_overlaps(self.__qualname__, args, list(self._pysig.parameters))
        if simulated:
            if hosts:     # refused as on the GPU, whose copies of them would lose writes
                transfers.refuse_untyped(self.__qualname__, args, list(self._pysig.parameters))
                transfers.refuse_overlaps(self.__qualname__, args, list(self._pysig.parameters))
                self._refuse_lost_writes(args)
            if rec is not None:          # run when the graph is replayed; refused now
                argtypes, spec = backends.simulator().check(
                    self, config.grid, config.block, config.stream, config.shared, args,
                    with_spec=True)
                rec.add(self, config, args, argtypes, None, spec)
                # (as the GPU path runs them when its capture issues the launch)
                return config.run_callbacks(spec)
            try:
                # (the configuration's pre-launch callbacks run once the launch is checked and
                # compiled, just before it runs, as on the GPU)
                return backends.simulator().launch(self, config.grid, config.block,
                                                   config.stream, config.shared, args,
                                                   before=config.run_callbacks)
            except CompileError as exc:
                noted = transfers.read_only_note(self.__qualname__, self._pysig, exc, args) \
                    if hosts else None
                if noted is None:
                    raise
                raise noted from None
        keys, values, entry = self._resolve(args, config=config)
        if config.shared > entry.free_shared:
            check_static_shared(self, config, entry)
        check_block_registers(self, config.grid, config.block, entry.attribute)
        if any(arguments.holds_record(k) for k in keys):
            if rec is not None:
                raise LaunchError(f"{self.__qualname__}: a record argument is copied to the "
                                  f"device and back around each launch, which a CUDA graph "
                                  f"cannot hold; pass a 1-element record array instead")
            return self._launch_with_records(config, values, entry)
        if rec is None:
            if not entry.spec.options.debug and self._config_key is None:
                # The next launches with these argument types skip all of this
                # (runtime/binder.py); a debug kernel's launches come here to wait and raise
                # what a thread raised.
                self._launcher_class.__call__ = make_fast_launch(
                    args, keys, entry, world.age, Launcher.general, launch.retry_errors(),
                    label=f"{self.__qualname__}[blocks, threads]")
        else:
            # Capturing a graph: every launch comes here (no fast path while it lasts) so the
            # graph knows each specialisation it holds.
            rec.add(self, config, args, keys, entry.device_id, entry)
        if entry.spec.uses_printf:
            launch.note_printf()
        config.run_callbacks(entry.spec)
        entry.launch(config.grid, config.block, config.stream_ptr(), config.shared, values)

    def _launch_with_extensions(self, config, args, rec):
        """numba-cuda's argument extensions: each ``prepare_args(ty, val, stream=, retr=)`` may
        replace an argument; the callables left in ``retr`` run after the kernel finished."""
        from numba import typeof
        if rec is not None:
            raise LaunchError(f"{self.__qualname__}: a kernel with extensions prepares its "
                              f"arguments around each launch, which a CUDA graph cannot hold")
        stream = config.stream if config.stream is not None else 0
        retr, new_args = [], []
        for a in args:
            try:
                ty = typeof(a)
            except ValueError:
                ty = None
            for ext in self._extensions:
                ty, a = ext.prepare_args(ty, a, stream=stream, retr=retr)
            new_args.append(a)
        try:
            self._launch_args(config, tuple(new_args), rec)
        finally:
            self._drop_fast_launch()          # every launch must see the extensions
        if retr:
            if not backends.simulated():
                probe.cupy_module().cuda.runtime.streamSynchronize(config.stream_ptr())
            for callback in retr:
                callback()

    def _launch_with_transfers(self, config, args, rec):
        """A launch with host arrays among its arguments: numba-cuda's cuda.In / Out / InOut
        hints, and plain host NumPy arrays, which numba-cuda treats as InOut (with a
        performance warning the first time per kernel; ``settings.host_arrays``).  Each is
        copied to device memory (In, InOut) or given fresh device memory (Out), the kernel
        launches on the copies, and the Out / InOut copies are written back into the host arrays
        once it has finished.  In the simulator host memory is the device's: no copies but the
        ones a hint asks for."""
        names = list(self._pysig.parameters)
        simulated = backends.simulated()
        for i, a in enumerate(args):                    # refused before anything is said
            if isinstance(a, ArgHint) and not isinstance(a.value, np.ndarray) and not (
                    hasattr(a.value, "__cuda_array_interface__") or
                    hasattr(a.value, "__dlpack__")):
                name = names[i] if i < len(names) else i
                raise arguments.ArgumentError(
                    f"{self.__qualname__}: argument {i} ({name!r}) is "
                    f"{type(a).__name__}({type(a.value).__name__}); cuda.{type(a).__name__}() "
                    f"takes a NumPy array")
            if isinstance(a, ArgHint) and a.copy_out and transfers.is_host_array(a.value) \
                    and not a.value.flags.writeable:
                # (its copy could not be written back: the kernel's writes would vanish)
                name = names[i] if i < len(names) else i
                hint = type(a).__name__
                raise arguments.ArgumentError(
                    f"{self.__qualname__}: argument {i} ({name!r}) is cuda.{hint}() of a "
                    f"read-only NumPy array, into which what the kernel writes cannot be "
                    f"copied back: pass a writable array (a.copy()), or cuda.In(a) if the "
                    f"kernel only reads it")
        if any(transfers.holds_host_array(a) for a in args):
            # (refused before the warning that it would be copied)
            transfers.refuse_untyped(self.__qualname__, args, names)
            mode = settings.host_arrays
            if mode == "error":
                transfers.refuse_host_arrays(self.__qualname__, args, names, simulated)
            if mode == "warn" and not simulated and not self._warned_host_arrays:
                launch.require_device(self.__qualname__, "")    # (no GPU: no copies to warn of)
                self._warned_host_arrays = True
                transfers.warn_host_arrays(self.__qualname__, args, names)
        if rec is not None and (not simulated or any(isinstance(a, ArgHint) for a in args)):
            what = "cuda.In/Out/InOut" if any(isinstance(a, ArgHint) for a in args) else \
                f"argument {transfers.host_array_names(args, names)} (a host NumPy array)"
            raise LaunchError(f"{self.__qualname__}: {what} is copied to or from the host around "
                              f"each launch, which a CUDA graph cannot hold; pass device arrays")
        transfers.refuse_overlaps(self.__qualname__, args, names)
        if not simulated:
            launch.require_device(self.__qualname__, "")
        self._refuse_lost_writes(args)
        try:
            if simulated:
                return self._simulate_with_transfers(config, args, rec)
            return self._launch_transfers(config, args)
        except CompileError as exc:
            noted = transfers.read_only_note(self.__qualname__, self._pysig, exc, args)
            if noted is None:
                raise
            raise noted from None

    def _launch_transfers(self, config, args):
        """The GPU's side of ``_launch_with_transfers``: the host arrays copied to the device,
        the launch on the copies, the copies that go back written back."""
        stream = config.stream_ptr()
        staged = transfers.Staged(args, stream)
        new_args = []
        for a in args:
            hint = a if isinstance(a, ArgHint) else None
            host = a.value if hint is not None else a
            if hint is None and isinstance(a, tuple):
                new_args.append(staged.stage_tuple(a))     # host arrays inside: copied too
            elif transfers.is_host_array(host):
                new_args.append(staged.copy_of(host, hint))
            else:
                new_args.append(host)      # not a host array, or one already on the device
        args = tuple(new_args)
        # launched like any other, but without taking over the fast path: these argument
        # types (device copies) exist only for this launch
        keys, values, entry = self._resolve(args, config=config)
        if config.shared > entry.free_shared:
            check_static_shared(self, config, entry)
        check_block_registers(self, config.grid, config.block, entry.attribute)
        if any(arguments.holds_record(k) for k in keys):
            self._launch_with_records(config, values, entry)
        else:
            if entry.spec.uses_printf:
                launch.note_printf()
            config.run_callbacks(entry.spec)
            entry.launch(config.grid, config.block, stream, config.shared, values)
        staged.copy_back()

    def _simulate_with_transfers(self, config, args, rec):
        """The simulator's side of ``_launch_with_transfers``: host memory is the device's, so
        a host array given as it is or in ``cuda.InOut`` runs as it is; ``cuda.In`` / ``Out``
        get a copy (one per distinct host buffer), written back once for ``Out``."""
        wants = {}
        for _, host, hint in transfers.host_leaves(args, tuples=False):
            key, copy_in, copy_out = transfers.transfer_of(host, hint)
            want = wants.setdefault(key[:-1], [False, False, False])
            want[0] |= copy_in
            want[1] |= copy_out
            want[2] |= hint is None
        devs, back, new_args = {}, [], []
        for a in args:
            if not isinstance(a, ArgHint) or not transfers.is_host_array(a.value):
                new_args.append(a.value if isinstance(a, ArgHint) else a)
                continue
            host = a.value
            key = transfers.buffer_key(host)
            copy_in, copy_out, plain = wants[key]
            if plain or copy_in and copy_out:
                new_args.append(host)                # host memory is the device's
                continue
            dev = devs.get(key)
            if dev is None:
                dev = devs[key] = host.copy() if copy_in else np.empty_like(host)
                if copy_out:
                    back.append((host, dev))
            new_args.append(dev)
        args = tuple(new_args)
        if rec is not None:
            return rec.add(self, config, args)
        backends.simulator().launch(self, config.grid, config.block, config.stream,
                                    config.shared, args, before=config.run_callbacks)
        for host, dev in back:
            host[...] = dev

    def _refuse_lost_writes(self, args, keys=None):
        """Refuse, before anything is copied or run, a read-only array given to a kernel whose
        declared signature types that parameter as a writable array, when the kernel writes it:

        - a read-only host NumPy array given as it is, on both backends: its device copy is
          writable, so it matches (as in numba-cuda, and a kernel that only reads it runs),
          but nothing can be copied back into a read-only array;
        - on the GPU, a read-only device array (a ``__cuda_array_interface__`` whose data is
          marked read-only, ``data=(ptr, True)``): the kernel would write into memory its
          producer lent read-only.  numba-cuda matches it to no writable parameter (No
          matching definition); the simulator refuses the write when it runs it, and runs a
          kernel that only reads it, as this does.

        ``keys``: the arguments' type keys, where the caller has them (``_resolve``: a host
        array is its device copy by then, read-only as the array is).  Whether the kernel
        writes is found once per (signature, parameter, read-only type): the kernel's front
        end with that parameter typed read-only fails where the declared one compiles."""
        if not self.declared_signatures:
            return
        device = not backends.simulated()
        try:
            if keys is None:
                if not device and not any(hint is None and not host.flags.writeable
                                          for _, host, hint in transfers.host_leaves(args)):
                    return
                keys = [_launch_key(a) for a in args]
            if not any(_holds_read_only(k) for k in keys):
                return
            sig = best_signature(self.declared_signatures,
                                 [arguments.numba_type_of_key(_as_declared(k)) for k in keys],
                                 self.__qualname__)
        except LaunchError:
            return                            # (said as it is by the launch)
        if sig is None:
            return
        names = list(self._pysig.parameters)
        for i, (key, a, declared) in enumerate(zip(keys, args, sig)):
            for host in (True, False) if device else (True,):
                # (the read-only arrays of one kind only: each kind is refused in its words)
                given = arguments.numba_type_of_key(_read_only_of(key, a, host))
                readonly = read_only_as(given, declared)
                if readonly is None:
                    continue
                why = self._writes_parameter(tuple(sig), i, readonly)
                if why is None:
                    continue
                places = read_only_places(given, declared, names[i])
                if places == [names[i]]:
                    held, where = "is", ""
                else:             # (a tuple's item, a namedtuple's field: t[0], p.x)
                    held, where = "holds", ", ".join(places) + "; "
                what = "NumPy array" if host else \
                    "device array (its __cuda_array_interface__ has data=(ptr, True))"
                said = (f"{self.__qualname__}: argument {i} ({names[i]!r}) {held} a read-only "
                        f"{what}, which the kernel writes ({where}its signature declares "
                        f"{type_text(declared)})")
                if host:
                    raise arguments.ArgumentError(
                        f"{said}, and nothing can be copied back into it: pass a writable "
                        f"array (a.copy()), or cuda.In(a) to give the kernel a copy it may "
                        f"write (not copied back).  Typed read-only, the kernel fails: {why}")
                raise SignatureError(
                    f"{said}: no matching definition (numba-cuda matches a read-only device "
                    f"array to no writable parameter), and the kernel would write into memory "
                    f"lent read-only; pass a writable array.  Typed read-only, the kernel "
                    f"fails: {why}")

    def _writes_parameter(self, sig, i, readonly):
        """Why the kernel's body does not compile with parameter ``i`` of declared signature
        ``sig`` typed ``readonly`` (the first line of the error), or None where it does (or
        fails as the declared types do too: the launch says so); cached by world age."""
        cache, context = self.__dict__.setdefault("_param_writes", {}), self.context
        key = (sig, i, readonly, context.uid)
        hit = cache.get(key)
        if hit is not None and hit[0] == world.age:
            return hit[1]
        age, options, why = world.age, self.options().for_device(), None
        try:
            frontend.compile_ahead(self.py_func, context, sig[:i] + (readonly,) + sig[i + 1:],
                                   options)
        except CompileError as exc:
            why = str(exc).strip().splitlines()[0]
            try:                       # (its own failure: not the read-only parameter's)
                frontend.compile_ahead(self.py_func, context, sig, options)
            except CompileError:
                why = None
        cache[key] = (age, why)
        return why

    def _launch_with_records(self, config, values, entry):
        """A launch with structured scalars among the arguments, given as they are or inside
        tuples and namedtuples at any depth (numba-cuda's semantics): each is copied to device
        memory, the kernel gets a pointer to it (its parameter value, in ``values``: the flat
        parameters, a tuple's items in place), and what the kernel wrote is copied back into
        the record once the launch has finished."""
        cp = probe.cupy_module()
        stream = config.stream_ptr()
        rt = cp.cuda.runtime
        copies, flat = [], []
        for v in values:
            if isinstance(v, np.void):
                # the record's bytes, contiguous: a copy (np.array(v) would be a view of the
                # record's array, into which the copy back would write even were it read-only)
                host = np.asarray(v).copy()
                dev = cp.cuda.alloc(max(host.nbytes, 1))
                rt.memcpyAsync(dev.ptr, host.ctypes.data, host.nbytes,
                               rt.memcpyHostToDevice, stream)
                # a record of a read-only array is not written back: what it held, to see
                # whether the kernel wrote it (refused then, as in the simulator)
                copies.append((v, host, dev, None if v.flags.writeable else host.copy()))
                v = dev.ptr
            flat.append(v)
        if entry.spec.uses_printf:
            launch.note_printf()
        config.run_callbacks(entry.spec)
        entry.launch(config.grid, config.block, stream, config.shared, flat)
        for v, host, dev, _ in copies:
            rt.memcpyAsync(host.ctypes.data, dev.ptr, host.nbytes, rt.memcpyDeviceToHost,
                           stream)
        rt.streamSynchronize(stream)
        if any(before is not None for *_, before in copies):
            # one the kernel wrote fails the launch (as in the simulator): nothing copied back
            places = arguments.record_places(self.__qualname__, list(self._pysig.parameters),
                                             entry.spec.argtypes)
            if len(places) != len(copies):
                places = [f"{self.__qualname__}: a record argument"] * len(copies)
            for (_, host, _, before), where in zip(copies, places):
                refused = None if before is None else \
                    arguments.read_only_record_written(where, before, host)
                if refused is not None:
                    raise refused
        for v, host, _, before in copies:
            if before is None:
                for name in host.dtype.names:
                    v[name] = host[name]

    def _resolve(self, args, host_arrays_as_keys=False, config=None):
        """(type keys, flat parameter values, LoadedKernel) for ``args`` on the current device:
        checks the arguments, compiles or revalidates, loads.  ``host_arrays_as_keys``: host
        arrays (and transfer hints) select the specialisation they will launch as once copied
        (their values are then meaningless).  ``config``: the launch's configuration, current
        while a compile it needs runs (jit/launchconfig.py)."""
        if not probe.available():
            # said before the arguments are checked: advice about them would mislead
            launch.require_device(self.__qualname__, "")
        if len(args) != self._nparams:
            self._argument_count_error(args)
        keys, values, per_arg = [], [], []
        for i, a in enumerate(args):
            try:
                if host_arrays_as_keys:
                    hint = isinstance(a, ArgHint)
                    a = a.value if hint else a
                    k, v = transfers.host_array_argument(a, not hint and not a.flags.writeable) \
                        if transfers.is_host_array(a) else arguments.value_key(a)
                else:
                    k, v = arguments.value_key(a)
            except LaunchError as exc:
                name = list(self._pysig.parameters)[i]
                raise type(exc)(f"{self.__qualname__}: argument {i} ({name!r}) {exc}") from None
            keys.append(k)
            values.extend(v)
            per_arg.append(v)
        if self.declared_signatures:
            # (a read-only device array that the kernel writes: refused, not matched as a read-only
            # host array's writable copy is)
            self._refuse_lost_writes(args, keys)
            keys, values = self._explicit_match([_as_declared(k) for k in keys], per_arg)
        elif self._only_keys is not None and tuple(keys) != self._only_keys:
            keys, values = self._as_specialized(keys, values, per_arg)
        dev = probe.current_device()
        if placement.multi_gpu():
            placement.check_devices(self, args, dev)
        launch.ensure_context(dev)
        cache_key = (tuple(keys), dev)
        entry = self._launch_cache.get(cache_key)
        if entry is None or entry.spec.world != world.age:
            new = entry is None
            entry = self._prepare(keys, dev, cache_key, entry, args, config)
            if new and self.py_func.__module__ == "__main__":
                guesses.note_launch(self, cache_key[0], dev)    # (the notebook's kernels)
        return keys, values, entry

    def _prepare(self, keys, dev, cache_key, entry, args=(), config=None):
        """The loaded kernel for these argument keys on ``dev``: compiled, revalidated or
        rebuilt."""
        argtypes = tuple(arguments.numba_type_of_key(k) for k in keys)
        arch = probe.arch_of(dev)
        if config is None:
            spec = self._specialize(argtypes, self.options(arch))
        else:
            with launchconfig.compiling_for(config, args) as current:
                spec = self._compile_for_args(*args, argtypes=argtypes, arch=arch)
            if current.sensitive:
                spec.launch_config_sensitive = True
                if self._config_key is None:
                    self._config_key = current.key()
                    self._drop_fast_launch()
        entry = self._launch_cache.get(cache_key, entry)
        if entry is not None and entry.spec is spec:
            return entry
        from .function import _compile_lock
        with _compile_lock:
            # (a round of jit/ahead.py compiles and loads under this lock: read again after it,
            # and take what the round loaded rather than loading the code a second time)
            entry = self._launch_cache.get(cache_key, entry)
            if entry is not None and entry.spec is spec:
                return entry
            if entry is not None:
                # The old code is unloaded from every device that loaded it, not only this one.
                stale = entry.spec
                for key, other in list(self._launch_cache.items()):
                    if other.spec is stale:
                        del self._launch_cache[key]
            loaded = launch.LoadedKernel(spec, dev, self._link, self._carveout)
            self._launch_cache[cache_key] = loaded
        return loaded

    def _prepare_ahead(self, cache_key):
        """Bring the launch entry ``cache_key`` (argument type keys, device) up to date from
        a round of jit/ahead.py: compiled (only what changed) and loaded on its device, both
        under the compile lock, so that a launch meanwhile waits and takes the result.  Returns
        whether there was anything to do."""
        from .function import _compile_lock
        keys, dev = cache_key
        with _compile_lock:
            current = self._launch_cache.get(cache_key)
            if current is not None and current.spec.world == world.age:
                return False
            launch.ensure_context(dev)
            self._prepare(keys, dev, cache_key, current)
        return True

    def _compile_for_args(self, *args, **kws):
        """numba-cuda's: the specialisation a launch with ``args`` runs, compiled (or
        revalidated) if need be; a launch calls it with its configuration current
        (``cuda.launchconfig``), so wrapping it sees every compile a launch makes."""
        argtypes, arch = kws.pop("argtypes", None), kws.pop("arch", None)
        if kws:
            raise TypeError(f"_compile_for_args() got unexpected keyword argument(s) "
                            f"{', '.join(sorted(kws))}")
        if argtypes is None:
            keys = self._type_keys(args, "compile")
            if self.declared_signatures:
                keys = tuple(_as_declared(k) for k in keys)
            argtypes = tuple(arguments.numba_type_of_key(k) for k in keys)
            if self.declared_signatures:
                sig = best_signature(self.declared_signatures, list(argtypes),
                                                self.__qualname__)
                if sig is None:
                    self._explicit_match(keys, [()] * len(keys))     # says what was declared
                argtypes = tuple(sig)
        return self._specialize(tuple(argtypes), self.options(arch))

    def mark_launch_config_sensitive(self):
        """Called by code that runs while a launch compiles this kernel and generates code from
        the launch configuration: each further configuration gets its own specialisation
        (jit/launchconfig.py)."""
        current = launchconfig.ensure_current_launch_config()
        if current.dispatcher is not self:
            raise RuntimeError(f"mark_launch_config_sensitive() must be called on the kernel "
                               f"whose launch is compiling ({current.dispatcher.__qualname__}), "
                               f"not on {self.__qualname__}")
        current.sensitive = True

    def _for_config(self, key):
        """The copy of this launch-config-sensitive kernel that compiles for configuration
        ``key`` (grid, block, dynamic shared memory)."""
        variant = self._config_variants.get(key)
        if variant is None:
            variant = self._copy(self._context)
            variant._config_key = key
            self._config_variants[key] = variant
        return variant

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


def _fits_specialized(given, want):
    """Whether an argument of Numba type ``given`` runs as the type ``want`` a kernel was
    specialize()d for, with no value converted: an array of the same dtype and rank, of any
    layout where ``want`` takes any ('A'), writable where ``want`` is read-only; tuples of such
    (of the same namedtuple class)."""
    if given == want:
        return True
    if isinstance(want, types.Array):
        return isinstance(given, types.Array) and given.dtype == want.dtype and \
            given.ndim == want.ndim and want.layout in ("A", given.layout) and \
            (given.mutable or not want.mutable)
    if isinstance(want, types.BaseTuple):
        if not isinstance(given, types.BaseTuple) or len(given) != len(want) or \
                getattr(given, "instance_class", tuple) is not getattr(want, "instance_class",
                                                                       tuple):
            return False
        return all(_fits_specialized(g, w) for g, w in zip(given.types, want.types))
    return False


def _scalar_converts(given, want):
    """Whether a number of type ``given`` converts to ``want`` at a launch (``as_scalar_of``)."""
    scalars = (types.Number, types.Boolean)
    return isinstance(given, scalars) and isinstance(want, scalars) and \
        conversion_rank(given, want) is not None


def _as_declared(key):
    """``key`` as a declared signature takes it: a read-only host array's copy matches a
    declared array type as any array does (numba-cuda: a kernel given signatures compiles
    nothing else); the kernel's writes to it are not copied back.  (A read-only device array
    matches too, once ``_refuse_lost_writes`` has found that the kernel does not write it.)"""
    kind = key[0]
    if kind == "roarray":
        return ("array",) + key[1:]
    if kind == "tuple":
        return ("tuple",) + tuple(_as_declared(k) for k in key[1:])
    if kind == "namedtuple":
        return key[:2] + tuple(_as_declared(k) for k in key[2:])
    return key


def _holds_read_only(key):
    """Whether type key ``key`` is a read-only array's, or a tuple's holding one."""
    kind = key[0]
    if kind == "roarray":
        return True
    if kind == "tuple":
        return any(_holds_read_only(k) for k in key[1:])
    if kind == "namedtuple":
        return any(_holds_read_only(k) for k in key[2:])
    return False


def _is_host_leaf(a):
    """Whether argument (or tuple item) ``a`` is a host NumPy array, given as it is or in a
    hint, or the device copy a launch made of one (``transfers.DeviceCopy``)."""
    if isinstance(a, ArgHint):
        a = a.value
    return isinstance(a, transfers.DeviceCopy) or transfers.is_host_array(a)


def _read_only_of(key, a, host):
    """Type key ``key`` of argument ``a`` with only one kind of its read-only arrays kept
    read-only: host arrays' (``host``; their device copies), or device arrays' (a read-only
    ``__cuda_array_interface__``); the others as writable."""
    kind = key[0]
    if kind == "roarray":
        return key if _is_host_leaf(a) == host else ("array",) + key[1:]
    head = 1 if kind == "tuple" else 2 if kind == "namedtuple" else None
    if head is None or not isinstance(a, tuple) or len(a) != len(key) - head:
        return key
    return key[:head] + tuple(_read_only_of(k, x, host) for k, x in zip(key[head:], a))


def _launch_key(a):
    """The type key argument ``a`` launches with on the current backend, tuples holding host
    arrays included: a host array's is its device copy's, read-only as the array is (unless a
    hint gives the kernel a copy)."""
    if isinstance(a, tuple):
        keys = tuple(_launch_key(x) for x in a)
        return ("namedtuple", type(a)) + keys if hasattr(type(a), "_fields") else \
            ("tuple",) + keys
    hint = isinstance(a, ArgHint)
    host = a.value if hint else a
    if not transfers.is_host_array(host):
        return arguments.value_key(host)[0]
    return _host_array_key(host, hint)


def _host_array_key(host, hint):
    """The type key of host array ``host`` (given in a cuda.In / Out / InOut: ``hint``) on the
    current backend: the array as it is in the simulator, its device copy on the GPU; read-only
    as the array is, unless a hint gives the kernel a copy."""
    readonly = not hint and not host.flags.writeable
    key = transfers.host_array_argument(host, readonly)[0]    # (refuses a copy the GPU cannot
    if backends.simulated():                                  # load: a packed record's)
        # the array itself, which the simulator runs in place (NumPy reads it at any alignment)
        return arguments.array_argument(host.dtype, 0, host.shape, host.strides, readonly,
                                        aligned=False)[0]
    return key
