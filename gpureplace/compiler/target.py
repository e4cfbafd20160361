"""Our Numba target: a typing context and a target (lowering) context for NVPTX.

No NRT, no CPython wrappers, no Numba CUDA: Numba's core does bytecode -> typed IR -> LLVM IR with
these two contexts.  Every global value a function reads is typed through
``GPUTypingContext.resolve_value_type``, which first asks the dispatch resolver (contexts, overrides,
undecorated helpers); that single hook is what makes dispatch contextual.
"""

from __future__ import annotations

import functools

from llvmlite import ir
from numba.core import callconv, itanium_mangler, types, typing
from numba.core.base import BaseContext

from numba.core.target_extension import GPU, target_registry

from . import backend


class GPUReplaceTarget(GPU):
    """Numba target descriptor for gpureplace (lets generic ``@overload``s apply to it)."""


target_registry["gpureplace"] = GPUReplaceTarget


class _TargetDescriptor:
    """What Numba's overload machinery asks of a target: a target context to register into."""

    @property
    def target_context(self):
        from ..dispatch.context import default_context
        return default_context.compilers()[1]

    @property
    def typing_context(self):
        from ..dispatch.context import default_context
        return default_context.compilers()[0]


class _DispatcherShim:
    targetdescr = _TargetDescriptor()


def _register_overload_jit():
    from numba.core.target_extension import dispatcher_registry, jit_registry
    from .resolve import overload_jit
    jit_registry[GPUReplaceTarget] = overload_jit
    dispatcher_registry[GPUReplaceTarget] = _DispatcherShim


_register_overload_jit()


class GPUTypingContext(typing.BaseContext):
    """Numba typing context whose value resolution goes through a gpureplace ``Context``."""

    def __init__(self, dispatch_context):
        self.dispatch_context = dispatch_context
        super().__init__()

    def load_additional_registries(self):
        from numba.core.typing import cmathdecl, enumdecl
        from .intrinsics import registry as intrinsic_registries
        self.install_registry(cmathdecl.registry)
        self.install_registry(enumdecl.registry)
        for reg in intrinsic_registries.typing_registries():
            self.install_registry(reg)

    def resolve_value_type(self, val):
        from . import resolve
        ty = resolve.resolve_value(self, val)
        if ty is not None:
            return ty
        return super().resolve_value_type(val)

    def numba_resolve_value_type(self, val):
        """Numba's own resolution, without the dispatch resolver (used by the resolver itself)."""
        return super().resolve_value_type(val)


class _GPUCodegen:
    """What Numba's lowering needs from a codegen: empty modules and libraries to put them in."""

    def __init__(self):
        self._data_layout = backend.data_layout()

    def _create_empty_module(self, name):
        mod = ir.Module(name)
        mod.triple = backend.TRIPLE
        mod.data_layout = self._data_layout
        return mod

    def create_library(self, name, **kwargs):
        from .library import GPULibrary
        return GPULibrary(self, name)

    def magic_tuple(self):
        return (backend.TRIPLE, backend.DEFAULT_ARCH, "")


class GPUTargetContext(BaseContext):
    implement_powi_as_math_call = True
    strict_alignment = True
    allow_dynamic_globals = True

    def __init__(self, typing_context):
        super().__init__(typing_context, "gpureplace")

    @property
    def enable_boundscheck(self):
        return False

    @enable_boundscheck.setter
    def enable_boundscheck(self, value):
        pass

    @property
    def enable_nrt(self):
        return False

    @enable_nrt.setter
    def enable_nrt(self, value):
        pass

    def init(self):
        self._codegen = _GPUCodegen()
        self._target_data = None

    def create_module(self, name):
        return self._codegen._create_empty_module(name)

    def codegen(self):
        return self._codegen

    @property
    def target_data(self):
        if self._target_data is None:
            import llvmlite.binding as llvm
            self._target_data = llvm.create_target_data(backend.data_layout())
        return self._target_data

    def load_additional_registries(self):
        # Importing these registers their lowerings in Numba's builtin registry.
        from numba.cpython import numbers, tupleobj, slicing  # noqa: F401
        from numba.cpython import rangeobj, iterators, enumimpl  # noqa: F401
        from numba.cpython import cmathimpl
        from numba.np import arrayobj  # noqa: F401
        from numba.np.unsafe import ndarray  # noqa: F401
        from .intrinsics import registry as intrinsic_registries
        self.install_registry(cmathimpl.registry)
        for reg in intrinsic_registries.lowering_registries():
            self.install_registry(reg)

    @functools.cached_property
    def call_conv(self):
        return callconv.MinimalCallConv(self)

    def mangler(self, name, argtypes, *, abi_tags=(), uid=None):
        return itanium_mangler.mangle(name, argtypes, abi_tags=abi_tags, uid=uid)

    def get_constant_generic(self, builder, ty, val):
        from .intrinsics.indexing import VALUE_READERS
        reader = VALUE_READERS.get(id(val))
        if reader is not None:       # cuda.laneid / cuda.warpsize: read, not frozen
            return reader(builder)
        return super().get_constant_generic(builder, ty, val)

    def get_executable(self, library, fndesc, env):
        raise NotImplementedError("gpureplace functions are not executable on the host")

    def post_lowering(self, mod, library):
        pass

