"""Contextual dispatch in the simulator: what each name a kernel reads means, as the compiler sees it.

Each Python function reached from the kernel is re-created with ``types.FunctionType`` over the same
(lightly rewritten) code but a ``SimGlobals`` namespace: an empty dict whose ``__missing__`` reads
the real binding *now* and resolves it through the kernel's Context exactly like
``compiler.resolve``: the nearest override wins (typed overrides only for matching argument types),
an override's body sees the overridden callable from the next layer down, undecorated helpers and
device functions are simulated in turn, modules become proxies whose attributes resolve the same
way, and ``gpureplace.cuda`` stubs become their simulated meaning.  Resolved names are cached in
the namespace for the rest of the launch (CPython's ``LOAD_GLOBAL`` honours dict subclasses).

Which functions are re-created, and the number literals of their code typed as Numba types them,
are in ``devicecode``; Python's builtins as device code computes them in ``pybuiltins``; the Numba
types of simulated values (typed overrides, declared signatures) in ``valuetypes``.
"""

from __future__ import annotations

import builtins
import sys
import types as pytypes
import weakref

import numpy as np
from numba.core import types as nbtypes
from numba.np import numpy_support

from ..compiler.diagnostics import in_standard_library
from ..compiler.intrinsics import stubs as _stubs
from ..compiler.intrinsics.devicemath import MathStub
from ..compiler.intrinsics.libdevice_calls import LibdeviceStub
from ..compiler.overload_redefinitions import overloads_for_kernels
from ..compiler.resolve import mask_key
from ..dispatch.context import host_key
from ..jit import GPUFunction
from . import hostmath, lang, operators
from .arrays import DeviceCaster, SimArray, constant_record
from .pointers import PointerArrays
from .devicecode import (PlansByArguments, device_code, device_const, is_library,
                         joins_values, literal_calls, typing_plan)
from .hostcalls import (NumbaCompiledCall, NumpyFunction, SimFFI, UfuncOnArrays,
                        _is_cmath_function, _is_numba_intrinsic, _is_numpy_function,
                        numba_cuda_counterpart)
from .lang.overloads import extension_value
from .pybuiltins import device_builtin
from .valuetypes import declared_call, numba_type_of

_BUILTINS = vars(builtins)
_MISSING = object()
_NOT_CACHEABLE = object()


def compiled_reads(spec):
    """What a compiled kernel's call graph read when it compiled (its ``GlobalRead`` records),
    in one walk: ``(frozen, recorded)``.

    ``frozen``: ``{id(array): (array, copy)}`` of the global arrays it read, each with the
    private copy its code was built from (tracking/contents.py).  ``recorded``: ``{(python
    function, kind, name): value}`` of the globals, closure variables and module attributes
    (``(None, id(module), attribute)``) it read: what the simulator reads in their place, so
    that it runs what the GPU runs even where a name was bound again since and nothing told
    gpureplace yet (a script that did not call ``gpureplace.refresh()``; a notebook's cell
    hook does).  Its ``plans``: ``{python function: typing plan}`` (``devicecode.typing_plan``),
    the conversions that give the simulated values the types Numba gave the compiled code; its
    ``literals``: the calls whose arguments Numba typed as literals (``devicecode.literal_calls``),
    for the overloads that choose by them."""
    from ..tracking import contents
    frozen, recorded = {}, _Recorded()
    compiled = getattr(spec, "compiled", None)
    if compiled is None:
        return frozen, recorded
    for cf in compiled.closure():
        for rec in cf.global_reads:
            if rec.kind != "attr":
                recorded[(cf.pyfunc, rec.kind, rec.name)] = rec.value
            elif rec.owner is not None:
                recorded[(None, id(rec.owner), rec.attr)] = rec.value
            snap = getattr(rec, "snapshot", None)
            if snap is None:
                continue
            for path, live in contents.arrays_in(rec.value):
                copy = snap.copy_at(path)
                if copy is not None and copy.array is not None:
                    frozen.setdefault(id(live), (live, copy.array))
    recorded.plans, recorded.literals = _typing_plans(spec, compiled)
    return frozen, recorded


class _Recorded(dict):
    """``compiled_reads``'s records, with the typing plans of the functions (``plans``) and the
    calls with literal arguments (``literals``)."""

    plans = {}
    literals = {}


_plans = weakref.WeakKeyDictionary()   # kernel specialisation -> (typing plans, literal calls)


def _typing_plans(spec, compiled):
    """``({function: typing plan}, {(file, line): calls with literal arguments})`` of the
    kernel's call graph (once per specialisation)."""
    try:
        hit = _plans.get(spec)
    except TypeError:                          # (not weakly referable)
        return {}, {}
    if hit is None:
        try:
            typed, literals = {}, {}
            for cf in _typed_closure(spec, compiled):
                typed.setdefault(cf.pyfunc, []).append((cf.type_annotation, cf.restype,
                                                        cf.argtypes))
                if cf.type_annotation is not None:
                    literal_calls(cf.type_annotation, literals)
            hit = ({f: typing_plan(f, each) for f, each in typed.items()}, literals)
        except Exception:                      # noqa: BLE001 (no plan: the values' own types)
            hit = ({}, {})
        _plans[spec] = hit
    return hit


def _typed_closure(spec, compiled):
    """The compiled functions of the kernel's call graph, with Numba's type annotations: the
    compile's own, or for a kernel loaded from the disk cache (which keeps none) its front end
    run again (not counted as a compile), where a function of it could need one: one that
    stores to a variable twice, has several returns or uses the value of a conditional
    expression or an ``and`` / ``or``, or one that calls an overload (whose generator may
    choose by a literal argument)."""
    if getattr(compiled, "type_annotation", None) is not None:
        return compiled.closure()
    if not any(_may_unify(cf.pyfunc.__code__) or joins_values(cf.pyfunc.__code__) or
               _calls_overloads(cf, compiled.context)
               for cf in compiled.closure()):
        return []
    from ..compiler import frontend
    with frontend.uncounted():
        cf = frontend.compile_device(compiled.pyfunc, compiled.context, {}, spec.argtypes,
                                     spec.options.for_device())
    return cf.closure()


def _calls_overloads(cf, context):
    """Whether the function of ``cf`` reads a name bound to a function with a Numba-style
    overload (``extending.overload``, ``numba.extending.overload``), or calls a method that a
    user's ``overload_method`` may give."""
    from .lang.overloads import _attribute_templates
    from ..compiler.overload_redefinitions import overload_site
    from ..compiler.overloads import NumbaOverload
    pyfunc = cf.pyfunc
    names = set()
    _code_names(pyfunc.__code__, names)
    glb = pyfunc.__globals__
    cells = dict(zip(pyfunc.__code__.co_freevars, pyfunc.__closure__ or ()))
    for name in names:
        if any(overload_site(t) is not None for t in _attribute_templates(name)):
            return True
        value = glb.get(name, _BUILTINS.get(name))
        if name in cells:
            try:
                value = cells[name].cell_contents
            except ValueError:                 # (an empty cell)
                continue
        if not callable(value) or isinstance(value, type):
            continue
        try:
            if any(isinstance(c.impl, NumbaOverload) for c in context.candidates(value)):
                return True
        except TypeError:                      # (no host key: no override)
            pass
        if isinstance(value, pytypes.FunctionType) and overloads_for_kernels(value):
            return True
    return False


def _may_unify(code):
    import dis
    stores, returns = set(), 0
    for ins in dis.get_instructions(code):
        if ins.opname in ("STORE_FAST", "STORE_DEREF"):
            if ins.argval in stores or ins.argval in code.co_varnames[:code.co_argcount]:
                return True
            stores.add(ins.argval)
        elif ins.opname.startswith("RETURN_"):
            returns += 1
    return returns > 1


class SimGlobals(dict):
    """A function's globals as the simulated device sees them (resolved on first read)."""

    __slots__ = ("_real", "_resolver", "_mask", "_pyfunc")

    def __init__(self, real, resolver, mask, pyfunc=None):
        super().__init__()
        self._real = real
        self._resolver = resolver
        self._mask = mask
        self._pyfunc = pyfunc
        for k in ("__name__", "__file__", "__package__", "__spec__", "__loader__",
                  "__builtins__"):
            if k in real:
                dict.__setitem__(self, k, real[k])
        dict.__setitem__(self, operators.NAME, resolver.ops)

    def __missing__(self, name):
        raw = self._resolver.recorded.get((self._pyfunc, "global", name), _MISSING)
        if raw is _MISSING:
            raw = self._real.get(name, _MISSING)
        if raw is _MISSING:
            raw = _BUILTINS.get(name, _MISSING)
            if raw is _MISSING:
                raise KeyError(name)
        value = self._resolver.value(raw, self._mask)
        if value.__class__ is _Dynamic:
            return value.read()
        dict.__setitem__(self, name, value)
        return value


class _Dynamic:
    """A value read afresh at each use (``cuda.laneid``)."""

    __slots__ = ("read",)

    def __init__(self, read):
        self.read = read


class ModuleProxy:
    """A module as device code sees it: attributes resolve through the context."""

    def __init__(self, module, resolver, mask):
        object.__setattr__(self, "_sim_module", module)
        object.__setattr__(self, "_sim_resolver", resolver)
        object.__setattr__(self, "_sim_mask", mask)

    def __getattr__(self, name):
        raw = self._sim_resolver.recorded.get((None, id(self._sim_module), name), _MISSING)
        if raw is _MISSING:
            raw = getattr(self._sim_module, name)
        value = self._sim_resolver.value(raw, self._sim_mask)
        if value.__class__ is _Dynamic:
            return value.read()
        object.__setattr__(self, name, value)
        return value

    def __repr__(self):
        return f"<simulated module {self._sim_module.__name__}>"


class TypedChoice:
    """A callable with typed overrides: chosen per call from the arguments' types."""

    def __init__(self, resolver, host, cands, mask, key):
        self.resolver, self.host, self.cands, self.mask, self.key = \
            resolver, host, cands, mask, key
        self._chosen = {}
        self.__name__ = getattr(host, "__name__", "override")

    def choose(self, args):
        sig = tuple(nbtypes.unliteral(numba_type_of(a)) for a in args)
        impl = self._chosen.get(sig)
        if impl is None:
            for ovr in self.cands:
                if ovr.types is None or ovr.types == sig:
                    impl = self.resolver.override_value(ovr, self.mask, self.key)
                    break
            else:
                impl = self.resolver.plain(self.host, self.mask)
            self._chosen[sig] = impl
        return impl

    def __call__(self, *args, **kwargs):
        return self.choose(args)(*args, **kwargs)


class NumbaOverloadChoice:
    """A function (or class) whose device meaning is the templates of Numba's typing registered
    for it: ``numba.extending.overload(func, target="cuda")`` (its generator gives an
    implementation, simulated) and ``type_callable`` / ``infer_global`` (a typing whose code is a
    lowering).  Per call, the first template (in the order Numba's typing tries them: the
    target's own first) that types the arguments' Numba types, each asked with literal
    arguments as Numba asks (``lang.overloads.ask``).  A lowering's function is refused (it has
    no Python meaning: its Python body is not what the compiled code runs); a class typed so is
    its Python class, whose instances are the values ``typeof_impl`` types."""

    def __init__(self, resolver, host, templates, mask):
        self.resolver, self.host, self.templates, self.mask = resolver, host, templates, mask
        self._chosen = {}
        self.__name__ = getattr(host, "__name__", "overload")

    def choose(self, args, kwargs):
        from .lang.overloads import _types, ask, literal_types
        plain = _types(args, kwargs)
        literal = literal_types(self.resolver, self.host, args, kwargs)
        key = (plain, literal)
        impl = self._chosen.get(key)
        if impl is None:
            for template in self.templates:
                generator = getattr(template, "_overload_func", None)
                if generator is None:
                    if _lowered_types(self.resolver, template, plain, literal):
                        impl = self.resolver.lowered(self.host)
                        break
                    continue
                made = ask(generator, getattr(template, "prefer_literal", False), (), plain,
                           literal)
                if made is not None:
                    impl = self.resolver.function(made, self.mask)
                    break
            else:
                raise TypeError(f"{self.__name__}: no numba.extending.overload of it takes "
                                f"({', '.join(str(t) for t in plain[0])})")
            self._chosen[key] = impl
        return impl

    def __call__(self, *args, **kwargs):
        return self.choose(args, kwargs)(*args, **kwargs)


def _lowered_types(resolver, template, plain, literal):
    """Whether a typing template without a Python implementation (``type_callable``'s, a
    ``ConcreteTemplate``) types the call (``plain``, ``literal``: as ``lang.overloads.ask``
    takes them), as Numba's typing asks it."""
    from numba.core import errors as nb_errors
    typingctx = resolver.typing_ready()
    if typingctx is None:
        return True
    order = [plain] if literal is None else \
        [literal, plain] if getattr(template, "prefer_literal", False) else [plain, literal]
    for argtypes, kwtypes in order:
        try:
            if template(typingctx).apply(tuple(argtypes), dict(kwtypes)) is not None:
                return True
        except nb_errors.NumbaError:
            continue
        except Exception:                      # noqa: BLE001 (Numba's typing raises this:
            return True                        # refused rather than guessed)
    return False


class ExtensionConstructor:
    """A user's class typed by ``type_callable`` (its construction in the compiled code is a
    lowering): the Python class, whose instances are what ``typeof_impl`` types, each seen as
    device code sees a value of its Numba type (``lang.overloads.extension_value``)."""

    __slots__ = ("resolver", "cls", "__name__")

    def __init__(self, resolver, cls):
        self.resolver, self.cls, self.__name__ = resolver, cls, cls.__name__

    def __call__(self, *args, **kwargs):
        from .lang.overloads import extension_value
        made = self.cls(*args, **kwargs)
        wrapped = extension_value(self.resolver, made)
        return made if wrapped is None else wrapped

    def __repr__(self):
        return f"<simulated constructor of {self.cls!r}>"


class Resolver:
    """Name resolution for one launch in one Context."""

    def __init__(self, context, launch, frozen=None, recorded=None):
        self.context = context
        self.launch = launch
        self.frozen = frozen or {}    # id(live global ndarray) -> (it, the copy compiled code read)
        self.recorded = recorded or {}    # what the compiled code read (compiled_reads)
        self.plans = getattr(recorded, "plans", {})     # {function: typing plan}
        self.literal_calls = getattr(recorded, "literals", {})   # {(file, line): calls}
        self.ops_typing = _typing_context(context)
        self._typing_refreshed = False
        self.ops = operators.ops_for(self.ops_typing)
        self.lang = lang.language(launch)
        self.functions = {}           # (python function, mask key) -> simulated function
        self.modules = {}             # (id(module), mask key) -> ModuleProxy
        self.arrays = {}              # id(global ndarray) -> (ndarray, read-only SimArray)
        self.hosts = {}               # id(stub) -> host implementation
        self.sync_impls = {id(self.lang[i]) for i in lang.SYNC_STUBS if i in self.lang}
        self.grid_impls = {id(self.lang[i]) for i in lang.GRID_STUBS if i in self.lang}

    # -- the general rule -------------------------------------------------------------------------
    def value(self, raw, mask):
        """The simulated meaning of global value ``raw`` (with the override mask ``mask``)."""
        if callable(raw) and not isinstance(raw, pytypes.ModuleType):
            try:
                key = host_key(raw)
            except TypeError:
                key = None
            if key is not None:
                start = mask.get(key) if mask else None
                cands = () if start is False else self.context.candidates(raw, start=start)
                if cands:
                    if cands[0].types is None:
                        meaning = self.override_value(cands[0], mask, key)
                    else:
                        meaning = TypedChoice(self, raw, cands, mask, key)
                    if isinstance(raw, np.ufunc):
                        return UfuncOnArrays(raw, meaning)
                    return meaning
        return self.plain(raw, mask)

    def override_value(self, ovr, mask, key):
        inner = dict(mask) if mask else {}
        inner[key] = ovr.context.parent if ovr.context.parent is not None else False
        impl = ovr.impl
        if isinstance(impl, GPUFunction):
            return self.function(impl.py_func, inner)
        if isinstance(impl, pytypes.FunctionType):
            return self.function(impl, inner)
        from ..compiler.overloads import NumbaOverload
        if isinstance(impl, NumbaOverload):
            # (an extending.overload: its implementation as device code, with this mask)
            from .lang.overloads import simulated_overload
            return simulated_overload(self, impl, inner)
        return self.plain(impl, inner)

    def plain(self, raw, mask):
        """The meaning of ``raw`` without an override of it."""
        lang_value = self.lang.get(id(raw), _MISSING)
        if lang_value is not _MISSING and self._is_stub(raw):
            return lang_value
        ours = numba_cuda_counterpart(raw)
        if ours is not None:        # numba-cuda's own name (a cell run from before the port)
            return self.plain(ours, mask)
        if _is_numba_intrinsic(raw):
            name = getattr(raw, "_name", None) or getattr(raw, "__name__", repr(raw))
            raise NotImplementedError(
                f"the simulator cannot run {name}(), a Numba @intrinsic: its code is LLVM IR "
                f"made while the kernel compiles, with no Python meaning to run on the CPU "
                f"(launch it on a GPU, GPUREPLACE_BACKEND=gpu; or write the helper as Python "
                f"or with gpureplace.cuda's functions, which the simulator runs)")
        dyn = self.launch.dynamic.get(id(raw))
        if dyn is not None:
            return _Dynamic(dyn)
        if isinstance(raw, pytypes.ModuleType):
            return self.module(raw, mask)
        if isinstance(raw, MathStub):
            return self._host(raw, self._host_math)
        if isinstance(raw, LibdeviceStub):
            return self._host(raw, hostmath.HostLibdevice)
        if raw is numpy_support.carray or raw is numpy_support.farray:
            # numba.carray / farray: a bounds-checked view of the pointer's memory
            return self._host(raw, lambda fn: PointerArrays(fn, self.launch))
        if _is_cmath_function(raw):
            return self._host(raw, NumbaCompiledCall)
        if _is_numpy_function(raw):
            return self._host(raw, lambda fn: NumpyFunction(fn, self.ops_typing))
        if isinstance(raw, pytypes.FunctionType):
            if is_library(raw):
                return raw
            # numba.extending.overload(raw): its implementation; type_callable(raw) and a
            # lowering: refused (its body is a placeholder)
            registered = self._registered(raw, mask)
            if registered is not None:
                return registered
            templates = overloads_for_kernels(raw)
            if templates:
                return NumbaOverloadChoice(self, raw, templates, mask)
            return self.function(raw, mask)
        if isinstance(raw, type) and _users_class(raw):
            registered = self._registered(raw, mask)
            if registered is not None:
                return registered
        if isinstance(raw, GPUFunction):
            fn = self.function(raw.py_func, mask)
            return declared_call(raw, fn) if raw.declared_signatures else fn
        py_func = getattr(raw, "py_func", None)
        if isinstance(py_func, pytypes.FunctionType) and hasattr(raw, "targetoptions"):
            return self.function(py_func, mask)          # a Numba CPU dispatcher
        if isinstance(raw, np.ndarray):
            return self.global_array(raw)
        if isinstance(raw, np.void) and raw.dtype.names is not None:
            return constant_record(raw)       # (a global record: its fields by name, read-only)
        if isinstance(raw, (_stubs.Stub, _stubs.Namespace, _stubs.Dim3Stub)):
            raise NotImplementedError(f"the simulator has no meaning for {raw!r}")
        if type(raw) is tuple:
            return _global_tuple(raw)         # (its numbers typed as Numba freezes them)
        if type(raw) in (int, float, complex):
            return device_const(raw)          # a global constant, typed as Numba freezes it
        if raw is print:
            return self.launch.device_print
        if raw is divmod:
            return getattr(self.ops, "divmod", raw)     # (the result types Numba gives)
        if type(raw).__module__.startswith("cffi") and hasattr(raw, "from_buffer"):
            return SimFFI(raw)
        builtin = device_builtin(raw, self.ops_typing)
        if builtin is not None:
            return builtin
        if isinstance(raw, nbtypes.Integer) or (isinstance(raw, type) and
                                                issubclass(raw, np.integer)):
            return self._caster(raw)
        if not isinstance(raw, (type, pytypes.ModuleType)):
            # an object of a user's extension type with overload_method / overload_attribute
            wrapped = extension_value(self, raw)
            if wrapped is not None:
                return wrapped
        return raw

    # -- what Numba's typing registered for a value -----------------------------------------------
    def typing_ready(self):
        """The compiler's typing context (None where there is none), with every registration
        made so far installed in it and in its target context (a kernel loaded from the disk
        cache compiled nothing here), once per launch."""
        typingctx = self.ops_typing
        if typingctx is not None and not self._typing_refreshed:
            from numba.core.target_extension import target_override

            from ..compiler import frontend
            from ..compiler import resolve as compiler_resolve
            targetctx = getattr(typingctx, "lowering_context", None)
            try:
                with frontend._lock, target_override("gpureplace"), \
                        compiler_resolve.outside_a_compile(typingctx.dispatch_context):
                    typingctx.refresh()
                    if targetctx is not None:
                        # (installing typing templates registers their lowerings)
                        targetctx.refresh()
            except Exception:                  # noqa: BLE001 (as it is)
                pass
            self._typing_refreshed = True
        return typingctx

    def registered_templates(self, raw):
        """The typing templates Numba's registry holds for the global ``raw`` (a user's function
        or class: ``numba.extending.overload``, ``type_callable``, ``infer_global``), in the order
        the compiler's typing tries them (its target's own first), or None where it has none."""
        typingctx = self.typing_ready()
        if typingctx is None:
            return None
        try:
            fnty = typingctx._lookup_global(raw)
        except Exception:                      # noqa: BLE001 (none)
            return None
        if not isinstance(fnty, nbtypes.Function):
            return None
        from numba.core.target_extension import target_registry
        from numba.core.utils import order_by_target_specificity
        try:
            return order_by_target_specificity(target_registry["gpureplace"], fnty.templates,
                                               fnkey=getattr(raw, "__name__", ""))
        except Exception:                      # noqa: BLE001 (none for this target)
            return None

    def lowered(self, raw):
        """The meaning of ``raw`` where the compiled code types it by a template without a
        Python implementation (``type_callable`` and ``lower``): a class's Python class (its
        instances are the values ``typeof_impl`` types); a function is refused (the compiled code
        runs its lowering, LLVM IR; its Python body is a placeholder)."""
        if isinstance(raw, type):
            return ExtensionConstructor(self, raw)
        name = getattr(raw, "__qualname__", None) or getattr(raw, "__name__", repr(raw))
        raise NotImplementedError(
            f"the simulator cannot run {name}(){_reading_site()}: its device meaning is "
            f"implemented by Numba's low-level extension API (type_callable / lower, or "
            f"infer_global), whose lowering makes LLVM IR while the kernel compiles; its Python "
            f"body is not what the compiled code runs, and the simulator will not run it in its "
            f"place (launch the kernel on a GPU, GPUREPLACE_BACKEND=gpu; or give {name} an "
            f"@overload with a Python implementation, gpureplace.cuda.extending.overload, which "
            f"the simulator runs and the compiler compiles)")

    def _registered(self, raw, mask):
        """``raw``'s meaning from the typing Numba's registry holds for it (a user's function
        or class), or None where it holds none."""
        templates = self.registered_templates(raw)
        if not templates:
            return None
        if not any(getattr(t, "_overload_func", None) is not None for t in templates):
            return self.lowered(raw)
        return NumbaOverloadChoice(self, raw, templates, mask)

    @staticmethod
    def _is_stub(raw):
        return isinstance(raw, (_stubs.Stub, _stubs.Namespace, _stubs.Dim3Stub))

    def _host(self, stub, cls):
        impl = self.hosts.get(id(stub))
        if impl is None:
            impl = self.hosts[id(stub)] = cls(stub)
        return impl

    def _host_math(self, stub):
        """The host meaning of a device math stub; ``pow`` with a complex argument (``math.pow``,
        ``np.power``, ``pow``) is the ``**`` operator, as the compiler types and lowers it
        (``devicemath``'s template gives it ``operator.pow``'s signature)."""
        impl = hostmath.HostMath(stub)
        if stub.name != "pow":
            return impl
        ops_pow = self.ops.pow

        def pow_(*args):
            if len(args) == 2 and any(isinstance(a, (complex, np.complexfloating))
                                      for a in args):
                return ops_pow(*args)
            return impl(*args)
        pow_.__name__ = pow_.__qualname__ = "pow"
        return pow_

    def _caster(self, raw):
        impl = self.hosts.get(("cast", raw))
        if impl is None:
            dt = numpy_support.as_dtype(raw) if isinstance(raw, nbtypes.Type) else np.dtype(raw)
            impl = self.hosts[("cast", raw)] = DeviceCaster(dt, raw)
        return impl

    def global_array(self, arr):
        hit = self.arrays.get(id(arr))
        if hit is None or hit[0] is not arr:
            # The copy the kernel was compiled against, as the GPU reads it (a change in place
            # is seen at the end of the cell, or at refresh(), on both backends alike).
            if hasattr(arr, "__cuda_array_interface__"):
                # a (simulated) device array: used where it is, writable, as on the GPU
                hit = self.arrays[id(arr)] = (arr, SimArray(arr, self.launch,
                                                            writable=arr.flags.writeable))
                return hit[1]
            frozen = self.frozen.get(id(arr))
            data = frozen[1] if frozen is not None and frozen[0] is arr else arr
            hit = self.arrays[id(arr)] = (arr, SimArray(data, self.launch, writable=False))
        return hit[1]

    def module(self, mod, mask):
        key = (id(mod), mask_key(mask))
        proxy = self.modules.get(key)
        if proxy is None:
            proxy = self.modules[key] = ModuleProxy(mod, self, mask)
        return proxy

    # -- functions --------------------------------------------------------------------------------
    def function(self, pyfunc, mask):
        key = (pyfunc, mask_key(mask))
        fn = self.functions.get(key)
        if fn is not None:
            return fn
        plan = self.plans.get(pyfunc)
        if isinstance(plan, PlansByArguments):
            return self._by_arguments(pyfunc, mask, plan, key)
        return self._recreated(pyfunc, mask, plan, key)

    def _recreated(self, pyfunc, mask, plan, key=None):
        """``pyfunc`` re-created over its rewritten code (``operators.rewrite`` with typing
        plan ``plan``) and a ``SimGlobals`` of its globals; kept as ``self.functions[key]``
        before its closure's cells are filled (a cell may hold the function itself)."""
        closure = None
        if pyfunc.__closure__:
            closure = tuple(pytypes.CellType() for _ in pyfunc.__closure__)
        fn = pytypes.FunctionType(device_code(operators.rewrite(pyfunc, plan)),
                                  SimGlobals(pyfunc.__globals__, self, mask or {}, pyfunc),
                                  pyfunc.__name__, pyfunc.__defaults__, closure)
        fn.__kwdefaults__ = pyfunc.__kwdefaults__
        fn.__qualname__ = pyfunc.__qualname__
        fn.__module__ = pyfunc.__module__
        fn.__sim_original__ = pyfunc
        fn.__sim_mask__ = mask or {}
        if key is not None:
            self.functions[key] = fn
        if closure:
            for name, new, old in zip(pyfunc.__code__.co_freevars, closure, pyfunc.__closure__):
                contents = self.recorded.get((pyfunc, "freevar", name), _MISSING)
                if contents is _MISSING:
                    try:
                        contents = old.cell_contents
                    except ValueError:
                        continue            # an empty cell (a name bound later)
                v = self.value(contents, mask or {})
                new.cell_contents = v.read() if v.__class__ is _Dynamic else v
        return fn

    def _by_arguments(self, pyfunc, mask, plans, key):
        """``pyfunc`` as a helper that Numba typed otherwise for other argument types
        (``devicecode.PlansByArguments``): each call runs the version re-created with the plan
        of the specialisation its arguments select (chosen once per ``plans.key``)."""
        versions, chosen = {}, {}

        def call(*args, **kwargs):
            at = None if kwargs else plans.key(args)
            fn = chosen.get(at)
            if fn is None:
                fn = versions[_plan_key(plans.choose(args, kwargs))]
                if at is not None:
                    chosen[at] = fn
            return fn(*args, **kwargs)
        call.__name__ = pyfunc.__name__
        call.__qualname__ = pyfunc.__qualname__
        self.functions[key] = call
        for plan in plans.plans():
            if _plan_key(plan) not in versions:
                versions[_plan_key(plan)] = self._recreated(pyfunc, mask, plan)
        call.__sim_wrapped__ = versions[_plan_key(plans.common)]   # (what the scans look into)
        return call

    # -- do the threads of a block need to run concurrently? --------------------------------------
    def needs_threads(self, fn):
        return self._scan_function(fn, set(), self.sync_impls)

    def needs_grid(self, fn):
        """Whether ``fn`` (or what it calls) uses ``cuda.cg.this_grid``."""
        return self._scan_function(fn, set(), self.grid_impls)

    def _scan_function(self, fn, seen, impls):
        if id(fn) in seen:
            return False
        seen.add(id(fn))
        names = set()
        _code_names(fn.__code__, names)
        glb = fn.__globals__
        values = []
        if isinstance(glb, SimGlobals):
            for name in names:
                if name in glb._real or name in _BUILTINS:
                    try:
                        values.append(glb[name])
                    except Exception:
                        continue
        for cell in fn.__closure__ or ():
            try:
                values.append(cell.cell_contents)
            except ValueError:
                pass
        for v in values:
            if self._scan_value(v, names, seen, impls):
                return True
        return False

    def _scan_value(self, v, names, seen, impls):
        if id(v) in impls:
            return True
        if hasattr(v, "__sim_wrapped__"):
            return self._scan_value(v.__sim_wrapped__, names, seen, impls)
        if isinstance(v, pytypes.FunctionType) and hasattr(v, "__sim_original__"):
            return self._scan_function(v, seen, impls)
        if isinstance(v, TypedChoice):
            choices = [self.override_value(o, v.mask, v.key) for o in v.cands]
            choices.append(self.plain(v.host, v.mask))
            return any(self._scan_value(c, names, seen, impls) for c in choices)
        # a module is scanned for the names each function reads from it (a helper may use other
        # names of the same module than the kernel)
        if isinstance(v, ModuleProxy) and (id(v), frozenset(names)) not in seen:
            seen.add((id(v), frozenset(names)))
            for name in names:
                raw = getattr(v._sim_module, name, _MISSING)
                if raw is _MISSING:
                    continue
                try:
                    attr = getattr(v, name)
                except Exception:
                    continue
                if self._scan_value(attr, names, seen, impls):
                    return True
        if isinstance(v, pytypes.SimpleNamespace):
            return any(id(x) in impls for x in vars(v).values())
        return False


def _plan_key(plan):
    return tuple(sorted(plan.items(), key=str))


def _users_class(cls):
    """Whether ``cls`` is a class of a user's code (not a library's, nor the standard
    library's), whose typing a user may have registered."""
    from .lang.overloads import _LIBRARY_ROOTS
    from .devicecode import _LIBRARY_PACKAGES
    root = (getattr(cls, "__module__", None) or "").split(".", 1)[0]
    if root in _LIBRARY_ROOTS or root in _LIBRARY_PACKAGES:
        return False
    mod = sys.modules.get(getattr(cls, "__module__", None) or "")
    filename = getattr(mod, "__file__", None)
    return filename is None or not in_standard_library(filename)


def _reading_site():
    """`` (read at line N of f, file)``: where the simulated device code that is reading the
    name being resolved is (the nearest frame running a re-created function), or ''."""
    frame = sys._getframe(1)
    for _ in range(16):
        if frame is None:
            return ""
        if type(frame.f_globals) is SimGlobals:
            code = frame.f_code
            return f" (read at line {frame.f_lineno} of {code.co_name}, {code.co_filename})"
        frame = frame.f_back
    return ""


def _typing_context(context):
    """The Numba typing context that compiles in ``context`` (None where there is none)."""
    try:
        from ..compiler.target import compilers
        return compilers(context)[0]
    except Exception:                          # noqa: BLE001 (a context the compiler refuses)
        return None


def _code_names(code, out):
    out.update(code.co_names)
    out.update(code.co_freevars)
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            _code_names(c, out)


def _global_tuple(value):
    """A global tuple as device code reads it: its numbers typed as Numba freezes them and
    its records (``(REC[0], REC[1])``) read by field, read-only, as a global record is."""
    return tuple(_global_tuple(x) if type(x) is tuple else
                 constant_record(x) if isinstance(x, np.void) and x.dtype.names is not None
                 else device_const(x) for x in value)
