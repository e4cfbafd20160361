"""Contextual dispatch inside the front end.

While a function is typed, every global value it reads passes through ``resolve_value``: overrides
of the active context first (walking up the context stack), then gpureplace functions, then
undecorated Python functions (compiled as device functions in the same context), and only then
Numba's own resolution.  Each decision is written to the frame of the function being compiled: the
dependency records that redefinition tracking and ``dispatch_report`` read.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import threading
import types as pytypes
import weakref

import numpy as np
from numba.core import errors as nb_errors
from numba.core import types
from numba.core.typing import signature
from numba.core.typing.templates import fold_arguments

from ..errors import CompileError
from ..tracking.names import qualified_name
from .callables import DeviceCallable
from .ranking import read_only_as, read_only_places

_tls = threading.local()


class Frame:
    """What is being compiled right now, and what it has read so far."""

    __slots__ = ("pyfunc", "context", "mask", "options", "_resolutions", "callees", "key")

    def __init__(self, pyfunc, context, mask, options, key):
        self.pyfunc = pyfunc
        self.context = context
        self.mask = mask              # {host_key: Context to start lookup from} inside overrides
        self.options = options
        self._resolutions = {}        # (host key, start layer) -> Resolution
        self.callees = []             # CompiledFunction
        self.key = key


    def record(self, host, key, start, cands):
        """Note how ``host`` resolved (once per host and start layer; the first known line)."""
        loc = nb_errors.loc_info.get("loc")
        line = getattr(loc, "line", 0) or 0
        if loc is not None and getattr(loc, "filename", None) != self.pyfunc.__code__.co_filename:
            line = 0          # a location in Numba's own code, not the user's
        ident = (key if not isinstance(key, tuple) else key[1], id(start))
        res = self._resolutions.get(ident)
        if res is None:
            self._resolutions[ident] = Resolution(host, start, cands, line)
        elif not res.line and line:
            res.line = line

    @property
    def resolutions(self):
        return list(self._resolutions.values())


def activity():
    """How many value resolutions and compiles this thread has begun: a typing question during
    which it did not change read nothing that a frame records (the call types kept in
    ``call_types.py`` rely on it)."""
    return getattr(_tls, "activity", 0)


def active():
    _tls.activity = getattr(_tls, "activity", 0) + 1


def frames():
    st = getattr(_tls, "stack", None)
    if st is None:
        st = _tls.stack = []
    return st


def current_frame():
    st = frames()
    return st[-1] if st else None


def _typing_question():
    """Stands for the function being compiled when a typing question comes from outside any
    compile (target.py's ``_in_our_target``)."""


@contextlib.contextmanager
def outside_a_compile(context):
    """A frame for ``context`` with default options while nothing is being compiled (typing
    questions asked directly of a typing context); none when a compile is under way."""
    st = frames()
    if st:
        yield
        return
    from .compiled import Options
    st.append(Frame(_typing_question, context, {}, Options(), None))
    try:
        yield
    finally:
        st.pop()


def _is_plain_python_function(val):
    return isinstance(val, pytypes.FunctionType)


def resolve_value(typingctx, val):
    """Numba type for global value ``val`` as the active context sees it, or None for Numba's default."""
    active()
    frame = current_frame()
    if frame is None:
        return None
    ty = _resolve_in(typingctx, val, frame, frame.mask)
    if ty is not None and isinstance(val, np.ufunc):
        # np.sin(x, out) on arrays: a loop over the scalar meaning (ufunc_arrays.py)
        from .ufunc_arrays import UfuncType
        return UfuncType.get(val, ty, frame)
    return ty


def _resolve_in(typingctx, val, frame, mask):
    """``val`` as the frame's context sees it under ``mask`` (see ``resolve_value``)."""
    from ..dispatch.context import host_key
    try:
        key = host_key(val)
    except TypeError:
        return None
    # Inside an override's body the overridden callable resolves from the next layer down
    # (``False``: no layer left, the plain meaning).
    start = mask.get(key) if mask else None
    cands = () if start is False else frame.context.candidates(val, start=start)
    if callable(val):
        # Misses are recorded too: an override added later for ``val`` must invalidate this code.
        frame.record(val, key, start, cands)
    if not cands:
        return _type_of_impl(typingctx, val, frame, mask, numba_first=True)
    if cands[0].types is None:
        return _type_of_override(typingctx, cands[0], frame, key, mask)
    return OverrideChoiceType.get(typingctx, val, cands, frame, key, mask)


class Resolution:
    """How one callable read by a function resolved: the candidates found, and where."""

    __slots__ = ("host", "start", "candidates", "line")

    def __init__(self, host, start, candidates, line):
        self.host, self.start, self.candidates, self.line = host, start, candidates, line

    @property
    def hit(self):
        return self.candidates[0] if self.candidates else None


def _type_of_override(typingctx, ovr, frame, key, mask=None):
    # Inside the replacement, the overridden callable means the next layer down.
    mask = dict(frame.mask if mask is None else mask)
    mask[key] = ovr.context.parent if ovr.context.parent is not None else False
    if _is_host_callable(ovr.impl):
        # override(math.exp, math.sin): the replacement is itself a host function, so it means
        # what it means in this context (libdevice's sin, or the user's override of it).
        ty = _resolve_in(typingctx, ovr.impl, frame, mask)
        if ty is not None:
            return ty
    return _type_of_impl(typingctx, ovr.impl, frame, mask, origin=ovr)


def _is_host_callable(val):
    """A callable that is not device code of its own: a builtin, a ufunc, a C function."""
    from .intrinsics.external import DeclaredDevice
    from .intrinsics.libdevice_calls import LibdeviceStub
    from .overloads import NumbaOverload
    if isinstance(val, (LibdeviceStub, DeclaredDevice, NumbaOverload, DeviceCallable)):
        return False
    if _is_plain_python_function(val) or hasattr(val, "py_func"):
        return False
    return isinstance(val, (pytypes.BuiltinFunctionType, np.ufunc)) or isinstance(val, type)


class OverrideChoiceType(types.Callable, types.Opaque):
    """A callable with typed overrides: the first whose types match the call's arguments wins;
    with none matching, the call falls through to the next layer (or the plain meaning)."""

    _instances = {}

    @classmethod
    def get(cls, typingctx, host, cands, frame, key, mask):
        ident = (id(host), tuple(c.serial for c in cands), frame.context.uid, mask_key(mask),
                 frame.options)
        inst = cls._instances.get(ident)
        if inst is None:
            inst = cls._instances[ident] = cls(typingctx, host, cands, frame, key, mask, ident)
        return inst

    def __init__(self, typingctx, host, cands, frame, key, mask, ident):
        self.host, self.cands, self._key = host, cands, key
        self._frame_mask, self._context, self._options = dict(mask or {}), frame.context, \
            frame.options
        self._ident = ident
        self._chosen = {}
        super().__init__(
            name=f"overridden({qualified_name(host)}, context={frame.context.name})")

    @property
    def key(self):
        return (self.name, self._ident)

    def _frame(self):
        return Frame(None, self._context, self._frame_mask, self._options, None)

    def get_call_type(self, context, args, kws):
        from numba.core.types import unliteral
        plain = [unliteral(a) for a in args]
        frame = self._frame()
        for ovr in self.cands:
            if ovr.types is not None and (kws or tuple(plain) != ovr.types):
                continue
            fnty = _type_of_override(context, ovr, frame, self._key)
            sig = context.resolve_function_type(fnty, args, kws)
            if sig is not None:
                self._chosen[tuple(sig.args)] = fnty
                return sig
        # No typed override fits: the host's own meaning.
        fnty = _type_of_impl(context, self.host, frame, frame.mask, numba_first=True)
        if fnty is None:
            try:
                fnty = context.numba_resolve_value_type(self.host)
            except (ValueError, nb_errors.TypingError):
                # (no meaning of its own: only the typed ones, none of which fits)
                taken = ", ".join(f"({', '.join(map(str, c.types))})"
                                  for c in self.cands if c.types is not None)
                raise nb_errors.TypingError(
                    f"{qualified_name(self.host)}() has no device meaning for arguments "
                    f"({', '.join(map(str, plain))}){' with keywords' if kws else ''}; it "
                    f"takes {taken}") from None
        sig = context.resolve_function_type(fnty, args, kws)
        if sig is not None:
            self._chosen[tuple(sig.args)] = fnty
        return sig

    def get_call_signatures(self):
        return [], True

    def get_impl_key(self, sig):
        return self._chosen[tuple(sig.args)].get_impl_key(sig)


def _type_of_impl(typingctx, val, frame, mask, numba_first=False, origin=None):
    from .intrinsics.external import DeclaredDevice
    from .intrinsics.libdevice_calls import LibdeviceStub
    from .overloads import NumbaOverload
    if isinstance(val, (LibdeviceStub, DeclaredDevice, NumbaOverload)):
        return val.numba_type()
    if isinstance(val, DeviceCallable):
        fnty = DeviceFunctionType.get(val.py_func, frame.context, mask, frame.options, origin)
        fnty.declared = val.declared_signatures     # cuda.jit("int32(int32)", device=True)
        fnty.declared_returns = val.declared_returns
        return fnty
    py_func = getattr(val, "py_func", None)   # a Numba CPU dispatcher: compile its Python source
    if py_func is not None and _is_plain_python_function(py_func) and hasattr(val, "targetoptions"):
        return DeviceFunctionType.get(py_func, frame.context, mask, frame.options, origin)
    if _is_plain_python_function(val):
        if numba_first:
            known = typingctx._get_global_type(val)
            if known is not None:
                return known
        return DeviceFunctionType.get(val, frame.context, mask, frame.options, origin)
    if not numba_first:
        # An override to something that is not a Python function (an intrinsic stub, a ufunc...)
        return typingctx.numba_resolve_value_type(val)
    return None


def mask_key(mask):
    if not mask:
        return ()
    return tuple(sorted(((id(k) if not isinstance(k, tuple) else k[1]),
                         (v.uid if v else None)) for k, v in mask.items()))


class DeviceFunctionType(types.Callable, types.Opaque):
    """The type of a Python function called from device code, in one context and option set."""

    _instances = {}
    #: a number for each Python function, never reused (its type's key: ``id()`` is reused once
    #: a redefined helper's old function is freed, and Numba interns types by their key)
    _serials = weakref.WeakKeyDictionary()
    _next = itertools.count()

    @classmethod
    def get(cls, pyfunc, context, mask, options, origin=None):
        key = (pyfunc, context.uid, mask_key(mask), options)
        inst = cls._instances.get(key)
        if inst is None:
            inst = cls(pyfunc, context, mask, options, key)
            cls._instances[key] = inst
        if origin is not None:
            inst.origin = origin
        return inst

    @classmethod
    def forget_except(cls, pyfuncs, compiled):
        """Drop the types made for Python functions whose ids are not in ``pyfuncs`` (no code
        in use calls them: frontend.retain), and from the others the compiled functions a
        typing chose that are not among the ids ``compiled`` (a relinked caller's callee was
        compiled again without typing the call: the old one stayed here); returns the ids of
        the types dropped."""
        from .compiled import CompiledFunction
        gone = set()
        for key in [k for k in cls._instances if id(k[0]) not in pyfuncs]:
            gone.add(id(cls._instances.pop(key)))
        for inst in cls._instances.values():
            impls = inst._impls
            for sig in [s for s, cf in impls.items()
                        if isinstance(cf, CompiledFunction) and id(cf) not in compiled]:
                del impls[sig]
        return gone

    def __init__(self, pyfunc, context, mask, options, key):
        self.origin = None            # the Override this function implements, if any
        self.declared = ()            # signatures given to cuda.jit: calls convert to one
        self.declared_returns = {}    # their return types, by argument types
        self.pyfunc = pyfunc
        serial = self._serials.get(pyfunc)
        self._serial = serial if serial is not None else \
            self._serials.setdefault(pyfunc, next(self._next))
        self.dispatch_context = context
        self.mask = dict(mask or {})
        self.options = options
        self._key = key
        self._impls = {}
        self._pysig, self._pysig_of = None, ()
        super().__init__(name=f"device_function({pyfunc.__module__}.{pyfunc.__qualname__}"
                              f", context={context.name})")

    @property
    def key(self):
        return (self.name, self._serial, self._key[1:])

    @property
    def pysig(self):
        """The function's signature as it is now: its code and defaults may be replaced in place
        (``%autoreload 2``), and calls fold their arguments (defaults included) by it."""
        fn = self.pyfunc
        parts = (fn.__code__, fn.__defaults__, fn.__kwdefaults__)
        if self._pysig is None or any(a is not b for a, b in zip(parts, self._pysig_of)):
            self._pysig, self._pysig_of = inspect.signature(fn), parts
        return self._pysig

    def fold(self, args, kws):
        return fold_arguments(self.pysig, args, kws,
                              lambda i, p, v: v,
                              lambda i, p, d: types.Omitted(d),
                              lambda i, p, vs: types.StarArgTuple(vs))

    def get_call_type(self, context, args, kws):
        from . import constructs, diagnostics, frontend, library_calls
        from .intrinsics.stubs import IntrinsicArgumentError
        active()
        frame = current_frame()
        loc = nb_errors.loc_info.get("loc")       # the statement of the caller being typed
        # (a call the user's code makes, not one inside a library's code)
        users = frame is not None and frame.pyfunc is not None and \
            not diagnostics.is_library(frame.pyfunc)
        if users and diagnostics.debugger_entry(self.pyfunc) is not None:
            # pdb.set_trace() (ipdb's ...): compiled code cannot stop in a debugger; the
            # simulator, which runs the kernel as Python, can (diagnostics.debugger_reason)
            raise library_calls.library_call_error(frame.pyfunc, self.pyfunc, None, loc)
        why = constructs.signature_reason(self.pyfunc, "a device function")
        if why is not None:
            if users and diagnostics.is_library(self.pyfunc):
                # a library function's parameters are not the user's to change: it is host
                # code called from device code, said at the user's call
                raise library_calls.library_call_error(frame.pyfunc, self.pyfunc, None, loc)
            raise IntrinsicArgumentError(why)
        try:
            folded = tuple(self.fold(args, kws))
        except nb_errors.TypingError as exc:
            raise self._argument_error(args, kws, exc) from None
        given = folded
        if self.declared:
            folded = self._declared_types(folded)
        try:
            cf = frontend.compile_device(self.pyfunc, self.dispatch_context, self.mask, folded,
                                       self.options, self.declared_returns.get(folded))
        except CompileError as exc:
            if not users or not diagnostics.is_library(self.pyfunc):
                raise
            # Numba's implementation of a builtin, IPython's open, a standard-library function:
            # what failed inside is said at the user's call, not in the library's file.
            raise library_calls.library_call_error(frame.pyfunc, self.pyfunc, exc, loc) from None
        except ImportError as exc:
            if not users or not diagnostics.is_linalg_check(exc):
                raise
            # np.dot / @: Numba's lowering of its linear algebra asks for SciPy's BLAS first
            # (a raw ImportError through the front end otherwise); device code has none anyway
            raise library_calls.linalg_error(frame.pyfunc, self.pyfunc, exc, loc) from None
        if cf.fndesc is None:                     # it is calling itself
            restype = self._self_call_type(context, cf, folded, args, kws)
            self._impls[folded] = _self_call_key(context, cf, folded, restype)
            return signature(restype, *folded).replace(pysig=self.pysig)
        if given != folded:
            self._refuse_lost_writes(given, folded, frame)
        if frame is not None and cf not in frame.callees:
            frame.callees.append(cf)
        self._impls[folded] = cf
        return signature(cf.restype, *folded).replace(pysig=self.pysig)

    def _self_call_type(self, typingctx, cf, argtypes, args, kws):
        """The return type of a call a function makes of itself: the declared one, else what its
        other returns give (Numba's partial inference of the frame being typed)."""
        if cf.declared_restype is not None:
            restype = cf.declared_restype
        else:
            if cf.typing_self_call:
                # (inside the partial inference below: the call stays untyped there)
                raise nb_errors.TypingError("a recursive call, typed from the other returns")
            typing_frame = typingctx.callstack.match(self.pyfunc, tuple(argtypes))
            restype = None
            if typing_frame is not None:
                cf.typing_self_call = True
                try:
                    restype = typing_frame.typeinfer.return_types_from_partial()
                finally:
                    cf.typing_self_call = False
                    # Numba remembers that the call failed in that inference, for the whole
                    # compile: forget it, this call is typed now
                    typingctx.callstack.lookup_resolve_cache(self, tuple(args), kws).__init__()
            if restype is None:
                raise nb_errors.TypingError(
                    f"cannot type infer runaway recursion: {self.pyfunc.__qualname__} calls "
                    f"itself on every path, so no return gives its type (a recursive function "
                    f"needs a return that does not recurse)")
            # a type that grows with each round ((n, f(n - 1)): a deeper tuple each time) is
            # refused after a few (Numba's "Return type of recursive function does not converge")
            typing_frame.add_return_type(restype)
        cf.self_call_restypes.append(restype)
        return restype

    def _declared_types(self, argtypes):
        """The declared signature the call converts its arguments to (numba-cuda: a device
        function given signatures compiles no others)."""
        from .ranking import best_signature
        from .intrinsics.stubs import IntrinsicArgumentError
        try:
            sig = best_signature(self.declared, list(argtypes), self.pyfunc.__qualname__,
                                 float_to_int=True, first_of_ties=True)
        except TypeError as exc:
            raise IntrinsicArgumentError(str(exc)) from None
        if sig is None:
            sigs = "; ".join("(" + ", ".join(map(str, s)) + ")" for s in self.declared)
            raise IntrinsicArgumentError(
                f"No matching definition for argument type(s) "
                f"({', '.join(map(str, argtypes))}): {self.pyfunc.__qualname__} was compiled for "
                f"the signature(s) {sigs} given to cuda.jit, and takes no others")
        return tuple(sig)

    def _refuse_lost_writes(self, given, declared, frame):
        """Refuse a call that gives a read-only array (a read-only NumPy array's device copy,
        which is not copied back) where the signature given to cuda.jit declares a writable one,
        when the function writes it: the call converts to the declared type, and what the
        function wrote would be lost.  Whether it writes is found once per (signature, parameter,
        read-only type): the function compiled with that parameter read-only (as the launch
        finds it out for a kernel, jit/launching.py) fails where it writes, or passes the array
        on to a function that does; the front end's cache keeps that compile (not counted as
        the user's: nothing calls it), and a failure fails the caller's compile."""
        from . import frontend
        restype = self.declared_returns.get(declared)
        names = list(self.pysig.parameters)
        for i, (g, d) in enumerate(zip(given, declared)):
            readonly = read_only_as(g, d)
            if readonly is None:
                continue
            try:
                with frontend.uncounted():
                    frontend.compile_device(self.pyfunc, self.dispatch_context, self.mask,
                                            declared[:i] + (readonly,) + declared[i + 1:],
                                            self.options, restype)
            except CompileError as exc:
                name = names[i] if i < len(names) else str(i)
                raise self._lost_writes_error(exc, g, d, name, frame) from None

    def _lost_writes_error(self, exc, given, declared, name, frame):
        """The error for a call whose parameter ``name``, declared ``declared``, is given the
        read-only arrays of ``given``, which the function writes (``exc``: how it fails with
        them typed read-only); said where it writes, with the chain from the caller down."""
        from ..errors import type_text
        callee = self.pyfunc.__qualname__
        caller = "its caller" if frame is None or frame.pyfunc in (None, _typing_question) \
            else frame.pyfunc.__qualname__
        places = read_only_places(given, declared, name)
        what = "a read-only array" if places == [name] else \
            f"read-only arrays in {', '.join(places)}" if len(places) > 1 else \
            f"a read-only array in {places[0]}"
        # (a device function declared the same way further down, which writes it: said once,
        # where it writes; the chain shows the calls between)
        cause = getattr(exc, "lost_write_cause", exc.reason)
        through = "" if exc.function in ("", callee) else f" (through {exc.function})"
        reason = (f"{callee} writes its parameter {name!r}{through}, declared "
                  f"{type_text(declared)} by its signature, to which {caller} passes {what} "
                  f"({type_text(given)}): the writes would be lost (a read-only NumPy array's "
                  f"device copy is not copied back). Pass a writable array (a.copy(), or "
                  f"cuda.In(a) for a copy the kernel may write). Typed read-only, {callee} "
                  f"fails: {cause}")
        err = CompileError(reason, function=exc.function, filename=exc.filename,
                           lineno=exc.lineno, chain=exc.chain, detail=exc.detail)
        err.lost_write_cause = cause
        err.typing = getattr(exc, "typing", False)
        err.lowering = getattr(exc, "lowering", False)
        err.complete = getattr(exc, "complete", False)
        return err

    def _argument_error(self, args, kws, exc):
        from .intrinsics.stubs import IntrinsicArgumentError
        shown = ", ".join([str(a) for a in args] + [f"{k}={v}" for k, v in kws.items()])
        what = (f"{qualified_name(self.pyfunc)}, the override of "
                f"{qualified_name(self.origin.host)} in context {self.origin.context.name!r},"
                ) if self.origin is not None else \
            qualified_name(self.pyfunc)
        return IntrinsicArgumentError(f"{what} cannot be called with ({shown}): its signature is "
                                      f"{self.pyfunc.__name__}{self.pysig}")

    def get_call_signatures(self):
        return [signature(cf.restype, *a) for a, cf in self._impls.items()], True

    def get_impl_key(self, sig):
        return self._impls[tuple(sig.args)]


def _self_call_key(typingctx, cf, argtypes, restype):
    """The lowering key of a function's call of itself, registered with the target context:
    a call, through the calling convention, of the function being lowered."""
    from .frontend import compilers
    from numba.core import cgutils
    key = ("self-call", cf.serial, tuple(argtypes))
    targetctx = compilers(cf.context)[1]

    def lower_self_call(context, builder, sig, args):
        fn = context.declare_function(builder.module, cf.lowering_fndesc)
        status, res = context.call_conv.call_function(builder, fn, sig.return_type, sig.args,
                                                      args)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return res

    targetctx.insert_func_defn([(lower_self_call, key, tuple(argtypes))])
    return key


class OverloadDispatcher:
    """Numba's ``@overload`` implementations, compiled as device functions in the active context.

    Numba wraps each overload's implementation with the jit decorator registered for the target;
    ours compiles it like any other undecorated helper.
    """

    is_compiling = False
    _can_compile = True

    def __init__(self, py_func, **jit_options):
        self.py_func = py_func
        self.jit_options = jit_options
        self._compiled = {}

    def _device_type(self):
        frame = current_frame()
        if frame is None:
            raise RuntimeError("gpureplace overload used outside of a compilation")
        return DeviceFunctionType.get(self.py_func, frame.context, frame.mask, frame.options)

    def get_call_template(self, args, kws):
        from numba.core.typing.templates import make_concrete_template
        fnty = self._device_type()
        sig = fnty.get_call_type(None, args, kws)
        folded = tuple(sig.args)
        self._compiled[folded] = fnty.get_impl_key(sig)
        template = make_concrete_template(f"Overload({self.py_func.__name__})",
                                          key=self.py_func.__name__,
                                          signatures=[signature(sig.return_type, *folded)])
        return template, fnty.pysig, folded, {}

    def get_overload(self, args):
        return self._compiled[tuple(args)]

    @property
    def _compiler(self):
        """What Numba asks of a dispatcher's compiler to inline an ``@overload(...,
        inline="always")`` (or a cost model's choice) into its caller: the compile's own typing
        and target contexts, its pipeline class (built with Numba's default flags there), no
        declared locals."""
        from .frontend import GPUPipeline, compilers
        frame = current_frame()
        if frame is None:
            raise RuntimeError("gpureplace overload used outside of a compilation")
        typingctx, targetctx = compilers(frame.context)
        return pytypes.SimpleNamespace(
            targetdescr=pytypes.SimpleNamespace(typing_context=typingctx,
                                                target_context=targetctx),
            pipeline_class=GPUPipeline, locals={})

    @property
    def nopython_signatures(self):
        return [signature(cf.restype, *a) for a, cf in self._compiled.items()]

    def __repr__(self):
        return f"<gpureplace overload {self.py_func.__qualname__}>"


def overload_jit(**jit_options):
    def wrap(py_func):
        return OverloadDispatcher(py_func, **jit_options)
    return wrap
