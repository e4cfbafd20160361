"""What ``cuda.jit`` returns: ``GPUFunction``, a kernel or a device function of one Python function,
with its specialisations (one per argument types and options), each revalidated when the world
moves and recompiled (only what changed) when a dependency was redefined."""

from __future__ import annotations

import collections
import functools
import inspect
import os
import threading
import time
import weakref

from .. import probe
from ..arch import normalize_arch
from ..compiler import backend, constructs, diagnostics, diskcache, frontend, kernel_cache
from ..compiler.callables import DeviceCallable
from ..compiler.compiled import Options
from ..compiler.intrinsics.external import link_files
from ..compiler.pipeline import compile_kernel
from ..compiler.resolve import current_frame
from ..config import recompiled_message, settings
from ..dispatch.context import AsPickled, Context, current_default, frozen_copy, pickled_as
from ..dispatch.context import stack_state
from ..errors import CompileError, DeviceFunctionError, LaunchError
from ..runtime import arguments, launch, prewarm
from ..tracking import deps, world
from ..tracking.stats import counters
from . import adopting, collect, definitions, launchconfig, pickling
from .definitions import current_definition, latest_birth, live_functions  # noqa: F401
from .definitions import superseded  # noqa: F401  (their home before)
from .launcher import Configurable, Launcher
from .launching import Launching
from .options import check_carveout, check_launch_bounds, check_max_registers
from .reflection import Reflection, argument_types

_compile_lock = threading.RLock()

#: Seconds a fork waits for gpureplace's own background work and for compiles in other threads.
FORK_WAIT_S = 30
_fork_held = []


def _before_fork():
    """A child made by ``os.fork`` (multiprocessing's default on Linux, a ``ProcessPoolExecutor``
    in a notebook) has only the forking thread: a compile lock another thread held at the fork
    stays held there, and the child's first compile waited for it for ever.  So the fork waits
    for the warm-up (and the front ends queued after it) to finish, then holds the compile locks
    (a compile in another thread finishes first) until it is made, in parent and child alike."""
    from ..runtime import prewarm
    prewarm.wait_before_fork(FORK_WAIT_S)
    for lock in (_compile_lock, frontend._lock):        # (the order compiles take them in)
        if lock.acquire(timeout=FORK_WAIT_S):
            _fork_held.append(lock)


def _after_fork():
    while _fork_held:
        _fork_held.pop().release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork,
                        after_in_child=_after_fork)
# A thread that compiles ahead of launches (jit/ahead.py) holds its verbose recompile lines
# here, to be shown at the next cell rather than in whichever cell is running.
_messages = threading.local()


CompileStats = collections.namedtuple("CompileStats", "cache_path cache_hits cache_misses")


class DeviceFunctionCallError(DeviceFunctionError, LaunchError):
    """A device function called on the host: numba-cuda's ValueError for a ``cuda.jit`` function
    called without a launch configuration, and the RuntimeError gpureplace raised before."""


class GPUFunction(Configurable, Reflection, Launching, DeviceCallable):
    """What ``cuda.jit`` returns: a kernel (``device=False``) or a device function."""

    #: the first line of the error of its last compile, when that failed (the magics say it)
    last_compile_error = None

    def __init__(self, py_func, *, device=False, context=None, fastmath=False, opt=3,
                 lineinfo=False, arch=None, max_registers=None, launch_bounds=None, link=None,
                 shared_memory_carveout=None, debug=False, _parent=None, _detached=False):
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
        self._lineinfo = lineinfo or bool(debug)
        self._debug = bool(debug)
        self._arch = normalize_arch(arch, "arch") if arch is not None else None
        self._link = link_files(link, f"cuda.jit(link=...) of {py_func.__qualname__}")
        self._max_registers = check_max_registers(max_registers)
        self._carveout = check_carveout(shared_memory_carveout)
        self._launch_bounds = check_launch_bounds(launch_bounds)
        self._warned_host_arrays = False    # the host-array performance warning, said once
        self._pysig = inspect.signature(py_func)
        self._nparams = len(self._pysig.parameters)
        self._specs = {}           # (argtypes, options) -> KernelSpecialization
        self._launch_cache = {}    # (arg type keys, device id) -> LoadedKernel
        self._configs = {}         # launch configuration -> Launcher
        # Context -> GPUFunction sharing py_func (with_context): held for as long as this
        # function lives, so that ``k.with_context(ctx)[...]`` reuses what the variant
        # compiled, and with it its Context.  (A weak key would change nothing: the variant
        # holds its Context, as it must for whoever keeps only the variant; and Python has no
        # weak entry that lives exactly as long as both this function and the Context.)  A
        # dropped or redefined function lets go of its variants and of the Contexts only they
        # held (compiler/target.py).
        self._variants = {}
        # launch-config sensitive (jit/launchconfig.py): the (grid, block, shared) this one
        # compiles for, and the copies that compile for the others
        self._config_key = None
        self._config_variants = {}
        # Launch configurations of this function; their __call__ becomes the generated launch of
        # the latest specialisation (runtime/binder.py), falling back to Launcher.general.
        self._launcher_class = type("Launcher", (Launcher,), {"__slots__": ()})
        self._extensions = _Extensions(self)
        self._stale_reason = None  # why the specialisation being rebuilt went stale (verbose)
        # argument types -> specialisations loaded from the disk cache / compiled for want of
        # one there (``stats``)
        self._cache_hits, self._cache_misses = collections.Counter(), collections.Counter()
        self.on_compile = None     # called with each new specialisation (%%cuda --show)
        # (its order of creation: recompile ahead prepares newer first)
        self._born = definitions.register(self)
        self._guessed = False        # whether recompile ahead guessed its first launch's types
        self._parent = _parent     # the function this is a with_context() variant of
        self._only_keys = None     # specialize(): the argument type keys it accepts
        self._specialized = {}     # argument type keys -> what specialize() made for them
        self.declared_signatures = ()   # cuda.jit("sig"): the only argument types it takes
        self.declared_returns = {}      # ... and the return type each declares (device functions)
        # (argument type keys, device) the definition this one replaced was launched with: what
        # jit/ahead.py compiles it for while the user types, before its first launch
        self._ahead_hints = ()
        if _detached or pickling.is_detaching():
            # an earlier definition unpickled (jit/pickling.py): it replaces nothing
            self._guessed = True
        elif _parent is None:
            definitions.note_definition(self)

    @property
    def context(self):
        return self._context if self._context is not None else current_default()

    def options(self, arch=None):
        return Options(
            fastmath=self._fastmath or settings.fastmath or self.context.effective_fastmath,
            arch=arch or self._arch or settings.arch or probe.default_arch(),
            opt=self._opt, lineinfo=self._lineinfo, debug=self._debug,
            max_registers=self._max_registers, launch_bounds=self._launch_bounds)

    @property
    def specialized(self):
        """Whether this kernel compiles nothing new: made by ``specialize``, or given its
        signatures in ``cuda.jit`` (numba-cuda's meaning)."""
        return self._only_keys is not None or bool(self.declared_signatures)

    def compile_device(self, args, return_type=None):
        """numba-cuda's ``device_function.compile_device(argtypes, return_type=None)``: the
        device function compiled for ``args`` (a tuple of Numba types); the result has
        ``fndesc`` (its mangled name), ``restype``, ``inspect_llvm()``."""
        if not self.device:
            raise DeviceFunctionError(f"compile_device(): {self.__qualname__} is a kernel; use "
                                      f"kernel.compile(sig)")
        if return_type is None:
            return self._select(tuple(args))[0]
        # the declared return type: the result converted to it, as a signature declares
        return frontend.compile_device(self.py_func, self.context, {}, tuple(args),
                                       self.options(), return_type)

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
        return self.rebuilt(context=context, _parent=self)

    def rebuilt(self, _parent=None, **changes):
        """A new function of the same Python code, signatures and options, but ``changes``
        (``context=``, ``fastmath=``, ``arch=``, ...): nothing compiled yet."""
        options = dict(device=self.device, context=self._context, fastmath=self._fastmath,
                       opt=self._opt, lineinfo=self._lineinfo, arch=self._arch,
                       max_registers=self._max_registers,
                       launch_bounds=self._launch_bounds or None, link=self._link or None,
                       shared_memory_carveout=self._carveout, debug=self._debug)
        options.update(changes)
        copy = GPUFunction(self.py_func, _parent=_parent, **options)
        copy.declared_signatures = self.declared_signatures
        copy.declared_returns = dict(self.declared_returns)
        copy.extensions.extend(self._extensions)
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

    def compile(self, sig, arch=None):
        """Compile for ``sig`` without launching (no GPU needed); returns the specialisation.
        ``arch``: an ``sm_XX`` string or a ``(major, minor)`` tuple (default: the configured
        one, else the current GPU's)."""
        if arch is not None:
            arch = normalize_arch(arch, f"{self.__qualname__}.compile(arch=...)")
        argtypes = argument_types(self, sig)
        if self.declared_signatures and not self.device and \
                tuple(argtypes) not in self.declared_signatures:
            # numba-cuda: a kernel given its signatures compiles no others ("Compilation
            # disabled"); compiled, it would be listed in ``signatures`` while launches refuse it
            sigs = "; ".join("(" + ", ".join(map(str, s)) + ")"
                             for s in self.declared_signatures)
            raise RuntimeError(
                f"Compilation disabled: {self.__qualname__} was given its signature(s) {sigs} "
                f"in cuda.jit and compiles no others, so it cannot compile "
                f"({', '.join(map(str, argtypes))}); compile one of those, or give cuda.jit "
                f"no signatures to compile any")
        if self._only_keys is not None and not self._compiles_specialized(tuple(argtypes)):
            only = ", ".join(str(arguments.numba_type_of_key(k)) for k in self._only_keys)
            raise RuntimeError(
                f"Compilation disabled: {self.__qualname__} was specialized for ({only}) by "
                f"specialize() and compiles nothing else, so it cannot compile "
                f"({', '.join(map(str, argtypes))})")
        if self._only_keys is not None:
            # (types its launches take as the specialized ones: its one specialisation)
            argtypes = tuple(arguments.numba_type_of_key(k) for k in self._only_keys)
        return self._specialize(argtypes, self.options(arch))

    def _from_disk_or_compile(self, argtypes, options, disk):
        key = None
        if disk and diskcache.enabled and not options.debug and not frontend.dumps_requested() \
                and self._config_key is None:
            # (nor with one of Numba's DUMP_* switches on: there would be nothing to print)
            # (debug kernels map status codes to exceptions of this process: never on disk)
            # the PTX ISA this compile would emit (a driver too old for the arch is an error)
            isa = backend.compile_ptx_isa(options.arch)
            key = kernel_cache.kernel_key(self.py_func, argtypes, options, self.context, isa)
            spec = kernel_cache.load(key, self.py_func, argtypes, options, self.context,
                                     make=launch.Specialization)
            if spec is not None:
                counters["disk_hits"] += 1
                self._cache_hits[argtypes] += 1
                spec.front_end = functools.partial(self._specialize, argtypes, options,
                                                   disk=False)
                if pickling.was_rebuilt(self):
                    # A Dask worker's kernel: its body's front end, in the background, so that a
                    # redefinition of a helper reaching this worker relinks as it would where
                    # the kernel was compiled (the disk keeps no lowered code).
                    prewarm.ahead(functools.partial(self._front_end_ahead, argtypes, options,
                                                    spec))
                return spec
        spec = compile_kernel(self.py_func, argtypes, self.context, options,
                              make=launch.Specialization)
        counters["kernel_compiles"] += 1
        if key is not None:
            self._cache_misses[argtypes] += 1
        current = launchconfig.current_launch_config()
        if key is not None and not (current is not None and current.sensitive):
            # (a kernel compiled from its launch configuration: the disk key has none)
            kernel_cache.store(key, spec)
        return spec

    @property
    def stats(self):
        """numba's ``Dispatcher.stats``: ``cache_path``, the disk cache's folder (shared by all
        kernels; None while the disk cache is off), and by argument types the specialisations
        of this kernel loaded from it (``cache_hits``) and compiled for want of one there
        (``cache_misses``).  gpureplace always caches kernels on disk (``cache=`` is accepted
        for numba-cuda's sake); see ``gpureplace.stats()`` for the process's counts."""
        return CompileStats(str(diskcache.directory()) if diskcache.enabled else None,
                            collections.Counter(self._cache_hits),
                            collections.Counter(self._cache_misses))

    def _front_end_ahead(self, argtypes, options, spec):
        with _compile_lock:     # (once the _specialize that loaded it has recorded it)
            current = self._specs.get((argtypes, options)) is spec and spec.world == world.age
        if current:             # (else replaced, or the world moved: a compile comes anyway)
            frontend.compile_ahead(self.py_func, self.context, argtypes, options.for_device())

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
            try:
                if self.device:
                    spec = frontend.compile_device(self.py_func, self.context, {}, argtypes,
                                                   options.for_device(),
                                                   self.declared_returns.get(tuple(argtypes)))
                else:
                    spec = self._from_disk_or_compile(argtypes, options, disk)
            except CompileError as exc:
                if current_frame() is not None:         # a compile inside a compile: as it is
                    raise
                self.last_compile_error = str(exc).strip().splitlines()[0] if str(exc) else \
                    type(exc).__name__
                raise diagnostics.for_user(exc) from None
            self.last_compile_error = None
            spec.world = age
            if not self.device:         # (what loading it alone needs: overloads[sig] asked)
                spec.link, spec.carveout = self._link, self._carveout
            reason, self._stale_reason = self._stale_reason, None
            if settings.verbose and reason:
                held = getattr(_messages, "held", None)
                message = recompiled_message(self.__qualname__, argtypes,
                                             time.perf_counter() - t0, reason,
                                             ahead=held is not None)
                if held is None:
                    print(message)
                else:                  # compiled ahead (jit/ahead.py): shown at the next cell
                    held.append(message)
            self._specs[key] = spec
        collect.specialised()                 # (now and then: what old definitions left, goes)
        if self.on_compile is not None and not self.device:
            self.on_compile(spec)
        return spec

    def _still_valid(self, spec):
        cf = spec if self.device else spec.compiled
        if getattr(cf, "context", self.context) is not self.context:
            # compiled in another context: settings.default_context changed since
            self._stale_reason = f"its context is now {self.context.name!r}"
            return False
        stale = deps.revalidate(spec, cf, self.__qualname__)
        if stale is None:
            return True
        # compile_device recompiles what is stale in the closure (or only relinks a function
        # whose callees alone changed); nothing is dropped here.
        self._stale_reason = str(stale)
        return False

    def compiled_functions(self):
        """The compiled code of each specialisation so far (``compiled.CompiledFunction``, or a
        disk-loaded kernel's records): what ``tracking.deps`` asks about."""
        return [spec if self.device else spec.compiled for spec in list(self._specs.values())]

    def _select(self, sig, disk=True):
        if sig is None:
            specs = list(self._specs.items())
            if not disk:
                return [self._specialize(a, o, disk=False) if getattr(s, "from_disk", False)
                        else s for (a, o), s in specs]
            return [s for _, s in specs]
        argtypes = argument_types(self, sig)
        return [self._specialize(argtypes, self.options(), disk=disk)]

    @property
    def extensions(self):
        """numba-cuda's argument-handling extensions, a list: before each launch every
        extension's ``prepare_args(ty, val, stream=..., retr=[...])`` may replace an argument
        (and its type) and append callables that run once the kernel has finished.  A kernel
        with extensions launches through the general path (no generated fast launch)."""
        return self._extensions

    def _drop_fast_launch(self):
        """The next launches go through the general path (which builds a fast one again)."""
        self._launcher_class.__call__ = Launcher.__call__

    @property
    def specializations(self):
        """numba-cuda's: ``{argument types: kernel}`` of what ``specialize`` made."""
        return {tuple(arguments.numba_type_of_key(k) for k in keys): fn
                for keys, fn in self._specialized.items()}

    def configure(self, griddim, blockdim, stream=0, sharedmem=0):
        """numba-cuda's ``kernel.configure(griddim, blockdim, stream=0, sharedmem=0)``:
        ``kernel[griddim, blockdim, stream, sharedmem]`` (stream 0 and no shared memory being
        ``kernel[griddim, blockdim]``'s)."""
        config = (griddim, blockdim) + ((stream, sharedmem) if sharedmem else
                                        (stream,) if stream else ())
        return self[config]

    def __call__(self, *args, **kwargs):
        if self.device:
            raise DeviceFunctionCallError(
                f"{self.__qualname__} is a device function: call it from a kernel or another "
                f"device function; its Python function runs on the host as "
                f"{self.__name__}.py_func(...)")
        raise LaunchError(f"{self.__qualname__} is GPU code: launch it as a kernel with "
                          f"{self.__name__}[blocks, threads](...), or call it from a kernel or "
                          f"device function; its Python function runs on the host as "
                          f"{self.__name__}.py_func(...)")

    def __repr__(self):
        kind = "device function" if self.device else "kernel"
        return f"<gpureplace {kind} {self.__qualname__} context={self.context.name!r}>"

    def __reduce__(self):
        """Pickled as its Python function, options and context (jit/pickling.py): the other
        process compiles for itself, or keeps what it compiled for an earlier pickle of the
        same definition; the context travels with its overrides (dispatch/context.py)."""
        if self._parent is not None and self._only_keys is None:
            # a with_context() variant: its parent's variant for its context, there too
            if pickling.digesting():
                return (pickling.Defined, (pickling.digest(
                    self._parent.definition_digest(), self.context.definition_digest()),))
            return (_variant_of, (self._parent, self._context))
        uid = pickling.identifier(self)
        if pickling.is_pickling_function_of(uid):      # itself, in its own globals (recursion)
            return (pickling.SelfReference, ("" if pickling.digesting() else uid,))
        if pickling.digesting():
            return (pickling.Defined, (self.definition_digest(),))
        return pickling.remembered(self, "reduce", self._memo_key(), self._reduce_now)

    def _reduce_now(self):
        uid = pickling.identifier(self)
        state, extra = self._definition()
        with pickling.pickling_function_of(uid):
            data = pickling.function_bytes(self.py_func)
        digest = self.definition_digest()
        self.__dict__["_sent_digest"] = digest   # (what other processes have: gpureplace.dask)
        # (a kernel of the default context takes it along, with its overrides: the receiving
        # process's default context is brought up to them, as a named one is)
        context = self._context if self._context is not None else current_default()
        return (rebuild_function, (uid, data, state, dict(extra, context=context), digest))

    def _memo_key(self):
        """When its pickle may be reused: nothing it reads and none of its options changed."""
        reads = pickling.reads_key(self.py_func)
        return None if reads is None else (reads, repr(self._definition()),
                                           tuple(map(id, self._extensions)))

    def _definition(self):
        """(options, the rest of what defines it but the function and its context)."""
        state = {"device": self.device, "fastmath": self._fastmath, "opt": self._opt,
                 "lineinfo": self._lineinfo, "debug": self._debug, "arch": self._arch,
                 "max_registers": self._max_registers,
                 "launch_bounds": self._launch_bounds or None, "link": self._link or None,
                 "shared_memory_carveout": self._carveout}
        extra = {"declared_signatures": self.declared_signatures,
                 "declared_returns": self.declared_returns, "only_keys": self._only_keys,
                 "extensions": list(self._extensions)}
        return state, extra

    def definition_digest(self):
        """Digest of what defines it (jit/pickling.py): its function as pickled, with the
        globals it reads and the definitions of the device functions it calls, and its
        options; its context's overrides are digested apart (they may change alone)."""
        if self._parent is not None and self._only_keys is None:
            return self._parent.definition_digest()
        return pickling.remembered(self, "digest", self._memo_key(), self._digest_now)

    def _digest_now(self):
        state, extra = self._definition()
        with pickling.pickling_function_of(pickling.identifier(self)), \
                pickling.explained_pickling(self.py_func):
            data = pickling.pickled_digest(self.py_func)
            # argument extensions by what defines them, as the function (their repr would hold
            # their address: another digest in every process)
            extra = dict(extra, extensions=[pickling.pickled_digest(ext)
                                            for ext in extra["extensions"]])
        return pickling.digest(data, state, extra)

    def __dask_tokenize__(self):
        """Dask's token: the digest of its definition and of its context's (a redefinition of
        it, of a function it calls or of an override it may use gets a new token)."""
        return ("gpureplace.GPUFunction", self.definition_digest(),
                self.context.definition_digest())


def _variant_of(parent, context):
    """A pickled ``with_context()`` variant: the rebuilt parent's variant for ``context`` (a
    handle on it where the parent is a handle: see ``pickling.Pinned``)."""
    if type(parent) is pickling.Pinned:
        return pickling.PinnedVariant(parent, context, _variant_of)
    return parent.with_context(context)


def rebuild_function(uid, func_bytes, state, extra, definition=None):
    """What a pickled ``GPUFunction`` becomes (see ``GPUFunction.__reduce__``)."""
    context = extra["context"]
    if isinstance(context, str):                    # (pickled by a version that named it)
        context = Context.named(context)
    # Where this process defined it (jit/pickling.py's ``rebuild``): the context's pickle if
    # the live context was given back for it, a copy if the pickle's overrides are no longer
    # the live ones; an object of this pickle stays with that definition of the context
    sent_as = pickled_as(context)
    frozen = getattr(context, "_frozen_args", None)
    context_key = None if sent_as is None and frozen is None else \
        pickling.digest(*(sent_as or frozen))
    state_then = stack_state(context)

    def make(detached=False, context=context):
        py_func = pickling.loads_function(func_bytes)
        gf = GPUFunction(py_func, context=context, _detached=detached, **state)
        gf.declared_signatures = tuple(extra["declared_signatures"])
        gf.declared_returns = dict(extra["declared_returns"])
        gf._only_keys = extra["only_keys"]
        gf.extensions.extend(extra["extensions"])
        gf.__dict__["_pickle_uid"] = uid
        pickling.resolve_self_references(py_func, gf)
        for args in gf.declared_signatures:
            gf.compile(args)
        return gf

    def current(gf):
        """The live kernel's digest while it is this pickle's definition, context included."""
        if frozen is not None or (sent_as is not None and (
                gf.context is not context or stack_state(context) != state_then)):
            return None
        return gf.definition_digest()

    def detached():
        return make(detached=True, context=context if sent_as is None else
                    frozen_copy(context, sent_as))

    again = (rebuild_function, (uid, func_bytes, state, extra if sent_as is None else
                                dict(extra, context=AsPickled(sent_as)), definition))

    def adopt(gf):
        # The same function with other globals (a helper redefined where it was pickled, a
        # global of a helper changed): the new values are bound in the globals of the one
        # rebuilt here and of the helpers it reaches, as a notebook cell rebinds them
        # (adopting.adopt_globals), and the cell hook's check moves the world, so that the
        # next launch compiles again only what changed (the helper) and relinks the rest.
        py_func = pickling.loads_function(func_bytes)
        old = gf.py_func
        if py_func.__code__ != old.__code__ or py_func.__defaults__ != old.__defaults__ or \
                py_func.__kwdefaults__ != old.__kwdefaults__ or \
                bool(py_func.__closure__) or bool(old.__closure__) or \
                repr(gf._definition()) != repr((state, {k: v for k, v in extra.items()
                                                        if k != "context"})) or \
                extra["context"] is not gf._context:
            return False
        pickling.resolve_self_references(py_func, gf)
        adopting.adopt_globals(py_func, old)
        from ..tracking import bindings
        bindings.check()
        return True

    return pickling.rebuild(uid, make, definition=definition, adopt=adopt, current=current,
                            detached=detached, again=again, detached_key=context_key)


def _check_definition(py_func, device):
    """Refuse, where ``cuda.jit`` is applied, a function that can never be a kernel nor a device
    function: an ``async def``, parameters no launch or call can fill.  What only a launch
    cannot take (``*args``, a generator) is refused when it is compiled as a kernel, since
    kernels may call a ``cuda.jit`` function as a device function (as in numba-cuda)."""
    role = "a device function" if device else "a kernel"
    why = constructs.async_reason(py_func, role)
    if why is None:
        why = constructs.signature_reason(py_func, role)
    if why is not None:
        code = py_func.__code__
        raise CompileError(why, function=py_func.__qualname__, filename=code.co_filename,
                           lineno=code.co_firstlineno, chain=(py_func.__qualname__,))


class _Extensions(list):
    """``kernel.extensions``: a list whose changes take the kernel off its fast launch path."""

    def __init__(self, kernel, items=()):
        super().__init__(items)
        self._kernel = weakref.ref(kernel)

    def _changed(self):
        kernel = self._kernel()
        if kernel is not None:
            kernel._drop_fast_launch()


def _mutator(name):
    method = getattr(list, name)

    def mutate(self, *args):
        result = method(self, *args)
        self._changed()
        return self if name == "__iadd__" else result
    mutate.__name__ = name
    return mutate


for _name in ("append", "extend", "insert", "remove", "pop", "clear", "__setitem__",
              "__delitem__", "__iadd__", "sort", "reverse"):
    setattr(_Extensions, _name, _mutator(_name))
