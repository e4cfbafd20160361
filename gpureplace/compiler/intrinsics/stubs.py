"""Host-side stand-ins for device intrinsics.

A stub is what a name in ``gpureplace.cuda`` refers to on the host.  In device code the compiler
types and lowers it; called on the host it raises an error that says so.
"""

from __future__ import annotations

from numba.core import errors as nb_errors
from numba.core import types
from numba.core.typing.templates import AbstractTemplate, signature


_stubs = {}            # qualified name -> Stub (what a pickled stub names)


def stub_named(qualname):
    """The stub called ``qualname`` (``"cuda.syncthreads"``, ``"devicemath.abs"``) in this
    process: how a stub unpickles (a context's overrides and a kernel's globals refer to them)."""
    if qualname not in _stubs:
        from . import registry
        registry.language_modules()                 # (imports every intrinsic module)
    try:
        return _stubs[qualname]
    except KeyError:
        raise LookupError(f"this process's gpureplace has no device intrinsic {qualname} "
                          f"(is it an older version than the one that pickled it?)") from None


class Stub:
    """A device-only function, such as ``cuda.syncthreads``."""

    def __init__(self, name, doc="", namespace="cuda"):
        self.__name__ = name
        self.__qualname__ = f"{namespace}.{name}"
        self.__module__ = f"gpureplace.{namespace}"
        self.__doc__ = doc
        _stubs.setdefault(self.__qualname__, self)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__qualname__}() can only be used inside a kernel or device "
                           f"function (or under the simulator backend)")

    def __repr__(self):
        return f"<device intrinsic {self.__qualname__}>"

    def __reduce__(self):
        return (stub_named, (self.__qualname__,))


class Namespace:
    """A device-only namespace of stubs, such as ``cuda.atomic`` or ``cuda.shared``."""

    def __init__(self, name, **members):
        self.__name__ = name
        self.__qualname__ = f"cuda.{name}"
        self.__module__ = "gpureplace.cuda"
        for key, value in members.items():
            setattr(self, key, value)

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        from ...errors import close_names
        members = [n for n in vars(self) if not (n.startswith("__") and n.endswith("__"))]
        raise AttributeError(f"{self.__qualname__} has no attribute {attr!r}"
                             f"{close_names(attr, members)}")

    def __repr__(self):
        return f"<device namespace {self.__qualname__}>"


class Dim3Stub:
    """``threadIdx``, ``blockIdx``, ``blockDim`` and ``gridDim``: .x, .y, .z in device code."""

    def __init__(self, name):
        self.__name__ = name
        self.__qualname__ = f"cuda.{name}"
        self.__module__ = "gpureplace.cuda"

    def __getattr__(self, attr):
        if attr in ("x", "y", "z"):
            raise RuntimeError(f"cuda.{self.__name__}.{attr} only has a value inside a kernel")
        raise AttributeError(attr)

    def __repr__(self):
        return f"<device register cuda.{self.__name__}>"


class NamespaceType(types.Module):
    """Type of a device namespace object such as ``cuda.atomic`` or ``cuda.shared``.

    A ``types.Module`` (a ``types.Dummy``): Numba resolves ``ns.member`` through the typing
    context's value resolution, so members are typed (and may be overridden by a dispatch
    context) like any global stub, and lowering needs nothing for the attribute access itself.
    """

    def __init__(self, namespace):
        super().__init__(namespace)
        self.name = f"namespace({namespace.__qualname__})"


def register_namespace(typing_registry, namespace):
    typing_registry.register_global(namespace, NamespaceType(namespace))


class IntrinsicArgumentError(TypeError):
    """Wrong arguments to a device intrinsic.

    Deliberately not a Numba error: Numba would bury its message under a list of candidate
    templates, while this one reaches the driver as is, which turns it into a ``CompileError``
    naming the kernel, file and line (``loc``, the statement being typed).
    """

    def __init__(self, msg):
        super().__init__(msg)
        self.msg = msg
        self.loc = nb_errors.loc_info.get("loc")


def register_table(namespace, functions, typing_registry, lowering_registry, own_type=None):
    """The stubs of a table of functions of ``cuda.<namespace>`` (``fp16``, ``bf16``), each typed
    by its fixed argument types and lowered by ``lower(builder, *args)``; ``functions``: name ->
    (argument types, result type, lower, doc).  Other real numbers convert at the call, as
    numba-cuda's do; anything else is refused naming the function.  ``own_type``: the namespace's
    type, named in the arity message of functions that take only it.  Returns (stubs, name ->
    (argument types, result type))."""
    stubs = {name: Stub(name, doc, namespace=f"cuda.{namespace}")
             for name, (_, _, _, doc) in functions.items()}
    for name, (argtypes, result, lower, _) in functions.items():
        typing_registry.register_global(stubs[name], types.Function(
            _table_template(namespace, stubs[name], argtypes, result, own_type)))
        lowering_registry.lower(stubs[name], *argtypes)(
            lambda context, builder, sig, args, lower=lower: lower(builder, *args))
    return stubs, {name: (entry[0], entry[1]) for name, entry in functions.items()}


def _table_template(namespace, stub, argtypes, result, own_type):
    where = f"{stub.__qualname__}()"
    if own_type is not None and all(t == own_type for t in argtypes):
        what = f"{own_type} argument(s)"
    else:
        what = f"argument(s) ({', '.join(map(str, argtypes))})"

    class TableTemplate(AbstractTemplate):
        key = stub

        def generic(self, args, kws):
            if kws or len(args) != len(argtypes):
                raise IntrinsicArgumentError(
                    f"{where}: takes {len(argtypes)} {what}, got {len(args) + len(kws)}")
            for a, want in zip(args, argtypes):
                if not isinstance(types.unliteral(a), (types.Float, types.Integer,
                                                       types.Boolean)):
                    raise IntrinsicArgumentError(
                        f"{where}: needs {want} (or real number) arguments, got {a}")
            return signature(result, *argtypes)

    TableTemplate.__name__ = f"{namespace}_{stub.__name__}"
    return TableTemplate
