"""Contextual dispatch in the simulator: what each name a kernel reads means, as the compiler sees it.

Each Python function reached from the kernel is re-created with ``types.FunctionType`` over the same
(lightly rewritten) code but a ``SimGlobals`` namespace: an empty dict whose ``__missing__`` reads
the real binding *now* and resolves it through the kernel's Context exactly like
``compiler.resolve``: the nearest override wins (typed overrides only for matching argument types),
an override's body sees the overridden callable from the next layer down, undecorated helpers and
device functions are simulated in turn, modules become proxies whose attributes resolve the same
way, and ``gpureplace.cuda`` stubs become their simulated meaning.  Resolved names are cached in
the namespace for the rest of the launch (CPython's ``LOAD_GLOBAL`` honours dict subclasses).

The code rewrite gives Python's number literals the types Numba gives them: ``2`` is an int64 and
``1.5`` a float64 (so ``x32 * 1.5`` is float64, as on the device, not float32 as NumPy 2's weak
Python floats would make it).
"""

from __future__ import annotations

import builtins
import sysconfig
import types as pytypes

import numpy as np
from numba.core import types as nbtypes
from numba.np import numpy_support

from ..compiler.intrinsics import stubs as _stubs
from ..compiler.intrinsics.devicemath import MathStub
from ..compiler.intrinsics.libdevice_calls import LibdeviceStub
from ..dispatch.context import host_key
from . import hostmath, lang, operators
from .arrays import DeviceCaster, SimArray, wrap_int

_BUILTINS = vars(builtins)
_MISSING = object()
_NOT_CACHEABLE = object()

#: Modules whose functions run as they are (not re-created): libraries, debuggers, the stdlib.
_LIBRARY_PACKAGES = frozenset(["numpy", "numba", "llvmlite", "cupy", "torch", "IPython", "ipdb",
                               "pdb", "bdb", "pytest", "_pytest", "scipy", "gpureplace",
                               "pydevd", "debugpy", "logging", "traceback", "warnings"])
_STDLIB = tuple(p for p in {sysconfig.get_paths().get("stdlib"),
                            sysconfig.get_paths().get("platstdlib")} if p)

_code_cache = {}


def _is_library(fn):
    mod = (getattr(fn, "__module__", None) or "").split(".", 1)[0]
    if mod in _LIBRARY_PACKAGES:
        return True
    filename = fn.__code__.co_filename
    return filename.startswith(_STDLIB) and "site-packages" not in filename


def _device_const(c):
    if type(c) is int:
        if -(1 << 63) <= c < (1 << 63):
            return wrap_int(c, np.dtype(np.int64))
        return c
    if type(c) is float:
        return np.float64(c)
    if type(c) is complex:
        return np.complex128(c)
    if type(c) is tuple:
        return tuple(_device_const(x) for x in c)
    if isinstance(c, pytypes.CodeType):
        return device_code(c)
    return c


def device_code(code):
    """``code`` with number constants typed as Numba types them (cached)."""
    hit = _code_cache.get(code)
    if hit is None:
        hit = _code_cache[code] = code.replace(
            co_consts=tuple(_device_const(c) for c in code.co_consts))
    return hit


def _mask_key(mask):
    if not mask:
        return ()
    return tuple(sorted(((k[1] if isinstance(k, tuple) else id(k)),
                         (v.uid if v else None)) for k, v in mask.items()))


def frozen_arrays(spec):
    """``{id(array): (array, copy)}`` of the global arrays a compiled kernel's call graph read,
    each with the private copy its code was built from (tracking/contents.py)."""
    from ..tracking import contents
    out = {}
    compiled = getattr(spec, "compiled", None)
    if compiled is None:
        return out
    for cf in compiled.closure():
        for rec in cf.global_reads:
            snap = getattr(rec, "snapshot", None)
            if snap is None:
                continue
            for path, live in contents.arrays_in(rec.value):
                copy = snap.copy_at(path)
                if copy is not None and copy.array is not None:
                    out.setdefault(id(live), (live, copy.array))
    return out


class SimGlobals(dict):
    """A function's globals as the simulated device sees them (resolved on first read)."""

    __slots__ = ("_real", "_resolver", "_mask")

    def __init__(self, real, resolver, mask):
        super().__init__()
        self._real = real
        self._resolver = resolver
        self._mask = mask
        for k in ("__name__", "__file__", "__package__", "__spec__", "__loader__",
                  "__builtins__"):
            if k in real:
                dict.__setitem__(self, k, real[k])
        dict.__setitem__(self, operators.NAME, operators)

    def __missing__(self, name):
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
        raw = getattr(self._sim_module, name)
        value = self._sim_resolver.value(raw, self._sim_mask)
        if value.__class__ is _Dynamic:
            return value.read()
        object.__setattr__(self, name, value)
        return value

    def __repr__(self):
        return f"<simulated module {self._sim_module.__name__}>"


def numba_type_of(value):
    """The Numba type the device would give a simulated value (for typed overrides)."""
    if isinstance(value, (bool, np.bool_)):
        return nbtypes.boolean
    if isinstance(value, np.generic):
        return numpy_support.from_dtype(value.dtype)
    if isinstance(value, int):
        return nbtypes.int64
    if isinstance(value, float):
        return nbtypes.float64
    if isinstance(value, complex):
        return nbtypes.complex128
    from numba import typeof
    if isinstance(value, SimArray):
        ty = typeof(value._a)
        return ty if value._writable else ty.copy(readonly=True)
    from .lang import SimVector
    from .runner import RawPointer
    if isinstance(value, SimVector):
        return value.vector_type
    if isinstance(value, RawPointer):
        return nbtypes.CPointer(numpy_support.from_dtype(value.dtype))
    if type(value) is tuple:
        return nbtypes.BaseTuple.from_types([numba_type_of(v) for v in value])
    return typeof(value)


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


class Resolver:
    """Name resolution for one launch in one Context."""

    def __init__(self, context, launch, frozen=None):
        self.context = context
        self.launch = launch
        self.frozen = frozen or {}    # id(live global ndarray) -> (it, the copy compiled code read)
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
                        return self.override_value(cands[0], mask, key)
                    return TypedChoice(self, raw, cands, mask, key)
        return self.plain(raw, mask)

    def override_value(self, ovr, mask, key):
        inner = dict(mask) if mask else {}
        inner[key] = ovr.context.parent if ovr.context.parent is not None else False
        impl = ovr.impl
        from ..kernel import GPUFunction
        if isinstance(impl, GPUFunction):
            return self.function(impl.py_func, inner)
        if isinstance(impl, pytypes.FunctionType):
            return self.function(impl, inner)
        return self.plain(impl, inner)

    def plain(self, raw, mask):
        """The meaning of ``raw`` without an override of it."""
        lang_value = self.lang.get(id(raw), _MISSING)
        if lang_value is not _MISSING and self._is_stub(raw):
            return lang_value
        dyn = self.launch.dynamic.get(id(raw))
        if dyn is not None:
            return _Dynamic(dyn)
        if isinstance(raw, pytypes.ModuleType):
            return self.module(raw, mask)
        if isinstance(raw, MathStub):
            return self._host(raw, hostmath.HostMath)
        if isinstance(raw, LibdeviceStub):
            return self._host(raw, hostmath.HostLibdevice)
        if isinstance(raw, pytypes.FunctionType):
            if _is_library(raw):
                return raw
            return self.function(raw, mask)
        from ..kernel import GPUFunction
        if isinstance(raw, GPUFunction):
            fn = self.function(raw.py_func, mask)
            return _declared_call(raw, fn) if raw._explicit else fn
        py_func = getattr(raw, "py_func", None)
        if isinstance(py_func, pytypes.FunctionType) and hasattr(raw, "targetoptions"):
            return self.function(py_func, mask)          # a Numba CPU dispatcher
        if isinstance(raw, np.ndarray):
            return self.global_array(raw)
        if isinstance(raw, (_stubs.Stub, _stubs.Namespace, _stubs.Dim3Stub)):
            raise NotImplementedError(f"the simulator has no meaning for {raw!r}")
        if type(raw) in (int, float, complex, tuple):
            return _device_const(raw)          # a global constant, typed as Numba freezes it
        if raw is print:
            return self.launch.device_print
        if raw is round:
            return _device_round
        if raw is range:
            return _device_range
        if raw is max:
            return _device_max
        if raw is min:
            return _device_min
        if raw is float:
            return _FLOAT
        if raw is int:
            return _INT
        if raw is complex:
            return np.complex128
        if isinstance(raw, nbtypes.Integer) or (isinstance(raw, type) and
                                                issubclass(raw, np.integer)):
            return self._caster(raw)
        return raw

    @staticmethod
    def _is_stub(raw):
        return isinstance(raw, (_stubs.Stub, _stubs.Namespace, _stubs.Dim3Stub))

    def _host(self, stub, cls):
        impl = self.hosts.get(id(stub))
        if impl is None:
            impl = self.hosts[id(stub)] = cls(stub)
        return impl

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
            frozen = self.frozen.get(id(arr))
            data = frozen[1] if frozen is not None and frozen[0] is arr else arr
            hit = self.arrays[id(arr)] = (arr, SimArray(data, self.launch, writable=False))
        return hit[1]

    def module(self, mod, mask):
        key = (id(mod), _mask_key(mask))
        proxy = self.modules.get(key)
        if proxy is None:
            proxy = self.modules[key] = ModuleProxy(mod, self, mask)
        return proxy

    # -- functions --------------------------------------------------------------------------------
    def function(self, pyfunc, mask):
        key = (pyfunc, _mask_key(mask))
        fn = self.functions.get(key)
        if fn is not None:
            return fn
        closure = None
        if pyfunc.__closure__:
            closure = tuple(pytypes.CellType() for _ in pyfunc.__closure__)
        fn = pytypes.FunctionType(device_code(operators.rewrite(pyfunc)),
                                  SimGlobals(pyfunc.__globals__, self, mask or {}),
                                  pyfunc.__name__, pyfunc.__defaults__, closure)
        fn.__kwdefaults__ = pyfunc.__kwdefaults__
        fn.__qualname__ = pyfunc.__qualname__
        fn.__module__ = pyfunc.__module__
        fn.__sim_original__ = pyfunc
        fn.__sim_mask__ = mask or {}
        self.functions[key] = fn
        if closure:
            for new, old in zip(closure, pyfunc.__closure__):
                try:
                    contents = old.cell_contents
                except ValueError:
                    continue                # an empty cell (a name bound later)
                v = self.value(contents, mask or {})
                new.cell_contents = v.read() if v.__class__ is _Dynamic else v
        return fn

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


def _FLOAT(value=0.0):
    """``float(x)`` in device code: a float16 or float32 keeps its type (as Numba and
    numba-cuda type it), anything else is a float64."""
    if isinstance(value, (np.float16, np.float32)):
        return value
    return np.float64(value)


def _INT(value=0, base=_MISSING):
    """``int(x)`` in device code: an int64."""
    if base is not _MISSING:
        return wrap_int(int(value, base), np.dtype(np.int64))
    if isinstance(value, (float, np.floating)):
        value = int(value)
    return wrap_int(value, np.dtype(np.int64))


def _code_names(code, out):
    out.update(code.co_names)
    out.update(code.co_freevars)
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            _code_names(c, out)


def _declared_call(gpufunction, fn):
    """``fn`` (a simulated device function given signatures in cuda.jit) converting its
    arguments to the declared signature they fit best, as the compiled call does."""
    from ..runtime.arguments import best_signature
    from .runner import _convert_to

    def call(*args):
        types_ = [numba_type_of(a) for a in args]
        sig = best_signature(gpufunction._explicit, types_, gpufunction.__qualname__,
                             float_to_int=True, first_of_ties=True)
        if sig is None:
            raise TypeError(f"No matching definition for argument type(s) "
                            f"({', '.join(map(str, types_))}) of {gpufunction.__qualname__}")
        converted = []
        for a, t, d in zip(args, types_, sig):
            if isinstance(d, nbtypes.Integer) and isinstance(t, nbtypes.Float):
                a, t = int(a), nbtypes.int64          # float -> int truncates, as on the device
            c = _convert_to(a, t, d)
            converted.append(a if c is None else c)
        result = fn(*converted)
        declared = gpufunction._explicit_returns.get(tuple(sig))
        return result if declared is None else _cast_result(result, declared)
    call.__sim_wrapped__ = fn                # what the scans for synchronising calls look into
    return call


def _cast_result(value, declared):
    """``value`` returned as the ``declared`` return type, as the compiled return converts it."""
    from .runner import scalar_as
    if isinstance(declared, nbtypes.BaseTuple) and isinstance(value, tuple):
        return tuple(_cast_result(v, d) for v, d in zip(value, declared.types))
    if isinstance(declared, (nbtypes.Integer, nbtypes.Float, nbtypes.Boolean, nbtypes.Complex)):
        return scalar_as(value, declared)
    return value


class _DeviceRange:
    """``range`` in device code: its values are int32 when every argument is an int32, else
    int64 (Numba's range_state32 / range_state64), not Python ints."""

    __slots__ = ("_r", "_cls")

    def __init__(self, *args):
        self._r = range(*(int(a) for a in args))
        i32 = all(isinstance(a, np.int32) for a in args)
        self._cls = type(wrap_int(0, np.dtype(np.int32 if i32 else np.int64)))

    def __iter__(self):
        cls = self._cls
        for v in self._r:
            yield cls(v)

    def __reversed__(self):
        cls = self._cls
        for v in reversed(self._r):
            yield cls(v)

    def __len__(self):
        return len(self._r)

    def __getitem__(self, i):
        return self._cls(self._r[int(i)])

    def __contains__(self, v):
        return v in self._r

    start = property(lambda self: self._cls(self._r.start))
    stop = property(lambda self: self._cls(self._r.stop))
    step = property(lambda self: self._cls(self._r.step))

    def __repr__(self):
        return repr(self._r)


_device_range = _DeviceRange
_unifier = []


def _unified(values):
    """The Numba type that values of these types unify to (Numba's unify_types)."""
    if not _unifier:
        from numba.core.typing import Context
        _unifier.append(Context())
    tys = [nbtypes.unliteral(numba_type_of(v)) for v in values]
    return _unifier[0].unify_types(*tys)


def _minmax(builtin):
    def device(*args, **kwargs):
        result = builtin(*args, **kwargs)
        if kwargs or len(args) < 2:
            return result                    # of an iterable: one type already
        first = type(args[0])
        if all(type(a) is first for a in args):
            return result
        # Numba converts every argument to their unified type (max(int32, float32) is a
        # float64, max(True, int32) an int32); Python returns the winning argument as it is
        ty = _unified(args)
        if isinstance(ty, (nbtypes.Integer, nbtypes.Float, nbtypes.Boolean)):
            from .runner import scalar_as
            return scalar_as(result, ty)
        return result
    device.__name__ = builtin.__name__
    return device


_device_max = _minmax(builtins.max)
_device_min = _minmax(builtins.min)


def _device_round(x, ndigits=None):
    """``round`` as it is computed on the device: half to even; with ``ndigits`` on a float,
    Numba's scaled rounding in float64 (a float32 rounded as a float64 and converted back once,
    as numba-cuda does), which leaves x unchanged where the scaling overflows (NumPy would give
    inf or nan)."""
    import math
    if ndigits is None and isinstance(x, (float, np.floating)):
        # an int64 (half to even); NaN and infinities, undefined on the device, give 0
        return wrap_int(builtins.round(x) if math.isfinite(x) else 0, np.dtype(np.int64))
    if ndigits is None or not isinstance(x, (float, np.floating)):
        return builtins.round(x) if ndigits is None else builtins.round(x, ndigits)
    if isinstance(x, np.float32):
        return np.float32(_device_round(np.float64(x), ndigits))
    fty = type(x) if isinstance(x, np.floating) else np.float64
    ndigits = int(ndigits)

    def rnd(v):                    # llvm.round in the argument's type: half away from zero
        v = fty(v)
        return fty(math.copysign(math.floor(abs(float(v)) + 0.5), float(v)))
    xf = float(x)
    if math.isinf(xf) or math.isnan(xf):
        return x
    with np.errstate(all="ignore"):
        if ndigits >= 0:
            pow1, pow2 = (10.0 ** (ndigits - 22), 1e22) if ndigits > 22 else (10.0 ** ndigits, 1.0)
            y = (xf * pow1) * pow2
            if math.isinf(y):
                return x
        else:
            pow1 = 10.0 ** (-ndigits)
            y = xf / pow1
        z = float(rnd(y))
        if abs(float(fty(y)) - z) == 0.5:
            z = 2.0 * float(rnd(float(fty(y)) / 2.0))
        z = (z / pow2) / pow1 if ndigits >= 0 else z * pow1
    return fty(z)
