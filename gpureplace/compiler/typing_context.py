"""The typing context of our Numba target: Numba's, with every global value a function reads
typed through the dispatch resolver first (contexts, overrides, undecorated helpers), the call
types its templates answer kept (``call_types.py``), a user's re-run ``@overload`` answering in
place of the one it replaces, and typing questions asked outside a compile answered as a compile
would (gpureplace the current target).  ``target.compilers`` pairs it with the lowering context.
"""

from __future__ import annotations

import functools
import sys
import weakref

import numpy as np
import types as pytypes

from numba.core import errors as nb_errors
from numba.core import types, typing
from numba.core.target_extension import current_target, target_override
from numba.core.typing.typeof import typeof_impl

from ..errors import GPUReplaceError
from .bfloat16 import register_dtype
from .call_types import CallTypes
from .global_arrays import device_array_type
from .host_only import reject_host_only
from .hostconstants import install_cffi, int_constant_class, int_constants
from .overload_redefinitions import latest_overloads, method_site, overload_site


def _in_our_target(method):
    """Run a typing question as a compile does: with gpureplace the current target, inside a
    compile frame of the typing context's own dispatch Context (default options) when no
    compile is under way.  Numba's ``@overload`` templates register the lowering of what they
    type into the current target's registry and keep their answer, so a question asked outside
    a compile (``cuda.descriptor.cuda_target.typing_context``, an extension's helper, a test)
    would otherwise register the lowering for the CPU and leave a later kernel with "No
    definition for lowering"."""
    @functools.wraps(method)
    def asked(self, *args, **kws):
        from . import resolve
        if current_target() == "gpureplace" and resolve.frames():
            return method(self, *args, **kws)
        with target_override("gpureplace"), resolve.outside_a_compile(self.dispatch_context):
            return method(self, *args, **kws)
    return asked


def _no_such_field(typ, name):
    """Numba's record typing looks a field up and lets the KeyError out (the user saw only
    "'velocity'", at the function's first line): a name that is no field of a record is said
    as such, with the fields there are, as a TypingError, which Numba places at the line that
    reads or writes it.  Returns for anything else (the caller re-raises)."""
    rec = types.unliteral(typ)
    if isinstance(rec, types.Record) and isinstance(name, str) and name not in rec.fields:
        fields = ", ".join(rec.fields) or "none"
        raise nb_errors.TypingError(
            f"a record of this dtype has no field {name!r} (its fields: {fields})") from None


class GPUTypingContext(typing.BaseContext):
    """Numba typing context whose value resolution goes through a gpureplace ``Context``; the
    call types its templates answer are kept (``call_types.py``)."""

    def __init__(self, dispatch_context):
        # (weakly: ``target.compilers`` keeps this pair for as long as the Context lives, so a
        # strong reference would keep every Context that ever compiled anything alive)
        self._dispatch_context = weakref.ref(dispatch_context)
        self.call_types = CallTypes()
        self.lowering_context = None     # its target context (set by target.compilers)
        super().__init__()

    @property
    def dispatch_context(self):
        """The gpureplace ``Context`` this typing context resolves values through.  Once that
        Context is gone nothing compiles in it, but Numba's bound-method types are shared by
        every typing context (looked up by template, receiver and function, not by context)
        and keep the template, and its typing context, that made them first: a compile in
        another Context can still type ``x.sum()`` through this one.  It then resolves through
        the default context (gpureplace's own methods take no overrides of the user's)."""
        ctx = self._dispatch_context()
        if ctx is None:
            from ..dispatch.context import current_default
            ctx = current_default()
        return ctx

    def install_registry(self, registry):
        self.call_types.clear()
        super().install_registry(registry)

    def _insert_global(self, gv, gty):
        # Numba adds a function's templates to those it had: an ``@overload`` run again (its
        # notebook cell re-run) would come after the one it replaces, which would still answer.
        # Here the latest of each overload answers (overload_redefinitions.py).
        # (only where the template just added, the last, is a user's overload: a library's
        # registrations cost nothing here)
        if isinstance(gty, types.Function) and len(gty.templates) > 1 and \
                overload_site(gty.templates[-1]) is not None:
            kept = latest_overloads(gty.templates)
            if len(kept) < len(gty.templates):
                gty = types.Function(tuple(kept))
        super()._insert_global(gv, gty)

    def insert_attributes(self, at):
        # Numba adds a type's attribute templates to those it had, and the first that answers
        # types the call while its lowering is the latest registered: a user's
        # ``overload_method`` / ``overload_attribute`` defined again (its cell run again) was
        # typed by the old one and lowered by the new (a new return type failed to compile).
        # Here the new one replaces the templates of the same type and name from other code
        # (those one definition made, as a factory in a loop, stay).
        where = method_site(at)
        if where is not None:
            code = at._overload_func.__code__
            self._attributes[at.key] = [
                t for t in self._attributes[at.key]
                if method_site(t) != where or t._overload_func.__code__ is code]
        super().insert_attributes(at)

    def resolve_argument_type(self, val):
        register_dtype()                     # (a bfloat16 array, if ml_dtypes is loaded)
        return super().resolve_argument_type(val)

    def refresh(self):
        if unchanged(self, ("functions", "attributes", "globals")):
            return
        self.call_types.clear()
        super().refresh()
        unchanged(self, ("functions", "attributes", "globals"))

    def load_additional_registries(self):
        from numba.core.typing import cmathdecl, enumdecl
        from .intrinsics import registry as intrinsic_registries
        self.install_registry(cmathdecl.registry)
        self.install_registry(enumdecl.registry)
        self.install_registry(intrinsic_registries.array_reductions_typing())
        for reg in intrinsic_registries.typing_registries():
            self.install_registry(reg)

    def resolve_value_type(self, val):
        try:
            return self._resolve_value_type(val)
        except (nb_errors.NumbaValueError, nb_errors.NumbaTypeError) as exc:
            if isinstance(val, np.ndarray):
                # a global array Numba cannot type: as a ValueError, Numba names the global
                # and the line that reads it ("Untyped global name 'G': ...")
                raise ValueError(unreadable_array(val, exc)) from None
            raise
        except (nb_errors.NumbaError, GPUReplaceError, ValueError):
            raise                 # (ValueError: Numba's "cannot type this value")
        except Exception as exc:
            # a user's object that fails being looked at (a ``__getattr__`` that raises
            # KeyError): said of the value, at the global's line (Numba's "Untyped global
            # name"), not as the bare KeyError from deep in the typing
            raise ValueError(
                f"a {type(val).__module__}.{type(val).__qualname__} object, which device code "
                f"cannot read: looking at it raised {type(exc).__name__}: {exc} (give the "
                f"kernel the values it needs as numbers, arrays or tuples)") from None

    def _resolve_value_type(self, val):
        from . import resolve
        ty = resolve.resolve_value(self, val)
        if ty is not None:
            return ty
        if hasattr(val, "__cuda_array_interface__"):
            return device_array_type(val)       # (mapped and simulated device arrays too)
        if int_constant_class(val):
            # an enumeration of ints that is not an enum.Enum (cuda.bindings' cudaRoundMode):
            # its members are int constants, read as a module's (cudaRoundMode.cudaRoundZero)
            return types.Module(int_constants(val))
        if type(val).__module__.startswith(("cffi", "_cffi_backend")) and \
                not getattr(self, "_cffi_installed", False):
            # Numba's CFFI support (ffi.from_buffer(array)...), the first time it is needed
            install_cffi(self, self.lowering_context)
            self._cffi_installed = True
        return self.numba_resolve_value_type(val)

    @_in_our_target
    def resolve_getattr(self, typ, attr):
        # (a record's field that is not there: _no_such_field)
        try:
            return super().resolve_getattr(typ, attr)
        except KeyError:
            _no_such_field(typ, attr)
            raise

    def resolve_setattr(self, target, attr, value):
        try:
            return super().resolve_setattr(target, attr, value)
        except KeyError:
            _no_such_field(target, attr)
            raise

    def resolve_static_setitem(self, target, index, value):
        try:
            return super().resolve_static_setitem(target, index, value)
        except KeyError:
            _no_such_field(target, index)
            raise

    @_in_our_target
    def resolve_function_type(self, func, args, kws):
        fnty = func if type(func) is types.Function else None
        if type(func) is pytypes.BuiltinFunctionType:
            # (operator.getitem for x[i], asked by itself: its Numba function type answers)
            fnty = self._lookup_global(func)
        if type(fnty) is not types.Function:
            reject_host_only(func, args)
            return super().resolve_function_type(func, args, kws)

        def ask():
            # (a kept answer passed this check for the same function and argument types)
            reject_host_only(func, args)
            return super(GPUTypingContext, self).resolve_function_type(func, args, kws)
        return self.call_types.answer(func, args, kws, ask, fnty)

    def numba_resolve_value_type(self, val):
        """Numba's own resolution, without the dispatch resolver (used by the resolver itself)."""
        if "_cffi_backend" not in sys.modules and (_typeof_gives_up(val) or
                                                   _class_typeof_gives_up(val)):
            # Numba's typeof knows no such value (a module, an operator, a NumPy function, a
            # device intrinsic), and its last try imports cffi and pycparser (20-40 ms of a
            # first compile) to ask whether the value is a CFFI function -- which none can be
            # while CFFI is not loaded: straight to the registries, as Numba goes when typeof
            # gives up
            lookup = getattr(self, "_get_global_type", None) or \
                getattr(self, "_get_global_type_for", None)
            ty = None if lookup is None else lookup(val)
            if ty is not None:
                return ty
        return super().resolve_value_type(val)


#: Where the global's name goes in ``unreadable_array``'s text (compiler/diagnostics.py puts
#: it there; "the array" where no name is known)
NAME = "\x00name\x00"


def unreadable_array(a, exc):
    """Why device code cannot read the NumPy array ``a`` (Numba's typing refused it with
    ``exc``), with what to bind instead (``NAME`` standing for the global's name)."""
    dt = a.dtype
    if isinstance(a, np.ma.MaskedArray):
        return (f"a NumPy masked array, which device code cannot read as one: read its data and "
                f"its mask as two arrays (np.ma.getdata({NAME}), np.ma.getmaskarray({NAME})), "
                f"or {NAME}.filled(value)")
    swapped = [f"{field}: {f[0].str}" for field, f in (dt.fields or {}).items()
               if not f[0].isnative]
    if swapped:
        return (f"an array of a structured dtype with fields in another byte order than this "
                f"machine's ({', '.join(swapped)}), which device code cannot read: bind the "
                f"name to {NAME}.astype({NAME}.dtype.newbyteorder('='))")
    if not dt.isnative:
        return (f"an array of dtype {dt.str} (another byte order than this machine's), which "
                f"device code cannot read: bind the name to "
                f"{NAME}.astype({dt.newbyteorder('=').str!r})")
    return f"an array of dtype {dt}, which device code cannot read ({exc})"


def _typeof_gives_up(val):
    """Whether Numba's ``typeof`` would find nothing for ``val`` but for the CFFI question: a
    module or a callable whose type it has no rule for, with no ``_numba_type_`` (callables and
    modules expose no buffer, its other generic question)."""
    return (isinstance(val, pytypes.ModuleType) or callable(val)) and \
        typeof_impl.dispatch(type(val)) is typeof_impl.dispatch(object) and \
        getattr(val, "_numba_type_", None) is None


#: The modules of ``numba.typed``'s classes, which Numba's ``typeof`` of any class imports to
#: ask whether the class derives from them (50 ms of a first compile: their import builds
#: Numba's CPU target), though no class can while they are not loaded.
_TYPED_MODULES = ("numba.typed.typeddict", "numba.typed.typedlist", "numba.typed.typedset")


def _class_typeof_gives_up(val):
    """Whether Numba's ``typeof`` of the class ``val`` (``bool``, a user's class) would find
    nothing, answered without the import of ``numba.typed`` its last questions make: a class
    that is no exception, named tuple, NumPy scalar type or Numba type, while ``numba.typed``'s
    classes are not loaded (so it cannot derive from them)."""
    return isinstance(val, type) and \
        typeof_impl.dispatch(type(val)) is typeof_impl.dispatch(type) and \
        not issubclass(val, (BaseException, np.generic, types.Type)) and \
        not (issubclass(val, tuple) and hasattr(val, "_asdict")) and \
        not any(name in sys.modules for name in _TYPED_MODULES) and \
        getattr(val, "_numba_type_", None) is None


def unchanged(context, lists):
    """Whether no registry ``context`` has installed has gained a registration since this was
    last asked (and remember the answer's state).  Numba refreshes a context at every lookup
    that misses (each array ``make_array`` asks for ``__array__``, which plain arrays lack), a
    quarter of a millisecond a time; registries only grow, and every one a refresh would install
    is installed at the first, so equal counts mean a refresh would install nothing."""
    # (the registries' lists, gathered again only when a registry was added: Numba's registries
    # append to the lists they were made with)
    regs = context._registries
    held = context.__dict__.get("_refresh_lists")
    if held is None or held[0] != len(regs):
        held = context._refresh_lists = (len(regs), [
            each for reg in regs for each in (getattr(reg, name, None) for name in lists)
            if each is not None])
    mark = (len(regs), sum(map(len, held[1])))
    seen = context.__dict__.get("_refreshed_mark")
    context._refreshed_mark = mark
    return seen == mark
