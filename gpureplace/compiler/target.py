"""Our Numba target: a typing context and a target (lowering) context for NVPTX.

No NRT, no CPython wrappers, no Numba CUDA: Numba's core does bytecode -> typed IR -> LLVM IR with
these two contexts.  Every global value a function reads is typed through
``GPUTypingContext.resolve_value_type`` (typing_context.py), which first asks the dispatch resolver
(contexts, overrides, undecorated helpers); that single hook is what makes dispatch contextual.
"""

from __future__ import annotations

import functools
import threading
import weakref

import numpy as np
from llvmlite import ir
from numba.core import itanium_mangler, types
from numba.core.base import BaseContext

from numba.core.target_extension import CUDA, target_registry

from ..arch import DEFAULT_ARCH
from . import abi, backend
from .call_types import install as install_call_types
from .datamodels import NARROW_FLOATS, GPUDIBuilder, data_models
from .global_arrays import cai_dtype
from .host_only import unsupported_message
from .numba_overhead import abi_sizeof
from .typing_context import GPUTypingContext, unchanged


class GPUReplaceTarget(CUDA):
    """Numba target descriptor for gpureplace: a kind of Numba's CUDA target, so that generic
    ``@overload``s and those written for numba-cuda (``target="cuda"``) apply to it."""


target_registry["gpureplace"] = GPUReplaceTarget


class _TargetDescriptor:
    """What Numba's overload machinery asks of a target: a target context to register into."""

    @property
    def target_context(self):
        from ..dispatch.context import default_context
        return compilers(default_context)[1]

    @property
    def typing_context(self):
        from ..dispatch.context import default_context
        return compilers(default_context)[0]


class _DispatcherShim:
    targetdescr = _TargetDescriptor()


def _register_overload_jit():
    from numba.core.target_extension import dispatcher_registry, jit_registry
    from .resolve import overload_jit
    jit_registry[GPUReplaceTarget] = overload_jit
    dispatcher_registry[GPUReplaceTarget] = _DispatcherShim


def _register_lowering_once():
    """Numba's ``overload_method`` / ``overload_attribute`` templates register their lowering
    (a closure calling the overload) in the target's lowering registry each time a typing
    context makes an instance of them -- once for Numba's one CPU typing context, but here once
    per Context that compiles: the registry grew with every Context ever made, each new target
    context installed all those copies (time and memory growing with the Contexts made before),
    and a method's copy held its instance, so its typing context, for good.  The lowering is
    the same whichever instance registers it (it asks the class, and the typing context of the
    target context that lowers), so each template class registers once per registry here."""
    from numba.core.typing.templates import _OverloadAttributeTemplate, _OverloadMethodTemplate
    for base, reason in ((_OverloadAttributeTemplate, "attribute"),
                         (_OverloadMethodTemplate, "method")):
        numba_init_once = base.__dict__["_init_once"]
        if getattr(numba_init_once, "gpureplace_once", False):
            continue

        def _init_once(self, _numba=numba_init_once, _reason=reason):
            cls = type(self)
            if not isinstance(self.context, GPUTypingContext):
                return _numba(self)
            registry = self._get_target_registry(_reason)
            done = cls.__dict__.get("_gpureplace_lowered_in")
            if done is None:
                done = weakref.WeakSet()
                type.__setattr__(cls, "_gpureplace_lowered_in", done)
            if registry in done:
                return None
            _numba(self)
            done.add(registry)
            return None

        _init_once.gpureplace_once = True
        _init_once.__wrapped__ = numba_init_once
        base._init_once = _init_once


_register_overload_jit()
_register_lowering_once()
install_call_types()


_LOWERING_LISTS = ("functions", "getattrs", "setattrs", "casts", "constants")


def _lowering_loc():
    """Source location of the statement Numba is lowering (for errors raised from the context)."""
    import sys
    from numba.core.lowering import BaseLower
    frame = sys._getframe(1)
    while frame is not None:
        obj = frame.f_locals.get("self")
        if isinstance(obj, BaseLower):
            return obj.loc
        frame = frame.f_back
    return None


#: Alignment of a global array kept in device memory (room for any vector access).
RESIDENT_ALIGN = 16
ADDRSPACE_GLOBAL = 1


def _size(nbytes):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"


def _refuse(message):
    from numba.core.errors import UnsupportedError
    raise UnsupportedError(message, loc=_lowering_loc())


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
        return (backend.TRIPLE, DEFAULT_ARCH, "")


def _register_function_values():
    """A device function passed as an argument (``apply(twice, x)``) is a compile-time constant:
    its type says which function it is, so the value itself carries nothing."""
    from numba.core.datamodel import models
    from numba.core.imputils import lower_constant

    from .resolve import DeviceFunctionType, OverrideChoiceType
    from .ufunc_arrays import UfuncType
    # (a function held in a variable that lives across branches needs a slot, an empty one)
    for ty in (DeviceFunctionType, UfuncType, OverrideChoiceType):
        data_models.register(ty, models.OpaqueModel)
        lower_constant(ty)(_function_value)


def _function_value(context, builder, ty, pyval):
    return context.get_dummy_value()


_register_function_values()


class _Subroutine:
    """What ``compile_subroutine`` returns: the descriptor and library Numba's callers read."""

    __slots__ = ("fndesc", "library", "modules", "callees")

    def __init__(self, fndesc, library):
        self.fndesc = fndesc
        self.library = library
        self.modules = list(library.modules)
        self.callees = []


_FLOAT_OPS = frozenset(("fadd", "fsub", "fmul", "fdiv", "frem", "fcmp"))


def _vector_align(ty, align):
    from .intrinsics.vectors import VectorType
    return ty.alignment if align is None and isinstance(ty, VectorType) else align


def prefer_lowerings(defns, lowerings):
    """Make ``lowerings`` ({(operation, signature): implementation}) the ones a target
    context's lowering table ``defns`` answers with: of two implementations of one signature
    the later wins, and Numba's builtin registry is loaded after a context's own registries at
    every refresh, so they are appended again where another came last."""
    for (key, sig), impl in lowerings.items():
        table = defns[key]
        last = next((value for s, value in reversed(table.versions) if s == sig), None)
        if last is not impl:
            table.append(impl, sig)


class GPUTargetContext(BaseContext):
    DIBuilder = GPUDIBuilder
    implement_powi_as_math_call = True
    strict_alignment = True
    # Never embed host addresses of global arrays: device code must carry their data.
    allow_dynamic_globals = False

    def __init__(self, typing_context):
        super().__init__(typing_context, "gpureplace")

    @property
    def enable_boundscheck(self):
        return False

    @enable_boundscheck.setter
    def enable_boundscheck(self, value):
        pass

    # Array elements of a CUDA vector type (cuda.as_vectors arrays, shared and local arrays of
    # vectors) sit at addresses aligned to the vector's size: say so on each load and store, so
    # that LLVM moves a float32x4 with one 16-byte access wherever the array lives.
    def pack_value(self, builder, ty, value, ptr, align=None):
        return super().pack_value(builder, ty, value, ptr, _vector_align(ty, align))

    def unpack_value(self, builder, ty, ptr, align=None):
        return super().unpack_value(builder, ty, ptr, _vector_align(ty, align))

    @property
    def enable_debuginfo(self):
        # Line information (lineinfo=True, or debug=True): Numba's lowering then marks every
        # statement's line, and NVPTX turns them into .file / .loc directives.
        from . import frontend
        cf = frontend.current_compiled()
        return cf is not None and cf.options.lineinfo

    @enable_debuginfo.setter
    def enable_debuginfo(self, value):
        pass

    @property
    def enable_nrt(self):
        return False

    @enable_nrt.setter
    def enable_nrt(self, value):
        pass

    def init(self):
        self._codegen = _GPUCodegen()
        self.data_model_manager = data_models
        self._subroutines = {}

    # -- subroutines ----------------------------------------------------------------------------
    # Parts of Numba's own lowering (complex * and /, int and float ``**``, ``divmod``...) compile
    # small Python helpers with ``compile_internal``.  Numba's version runs its CPU pipeline and
    # links the result by library reference; ours runs the gpureplace pipeline and copies the
    # helper's modules into the caller's library (definitions made ``weak_odr`` so that two
    # callers in one kernel link cleanly), because a kernel links the modules of its call graph.

    def compile_subroutine(self, builder, impl, sig, locals=None, flags=None, caching=True):
        from . import compiled, frontend, resolve
        caller = frontend.current_compiled()
        options = caller.options if caller is not None else compiled.Options()
        frame = resolve.current_frame()
        ctx = self.typing_context.dispatch_context
        key = (impl.__code__, sig, options,
               tuple((layer.uid, layer.version) for layer in ctx.stack()),
               resolve.mask_key(frame.mask) if frame is not None else ())
        if impl.__closure__:
            key += tuple(c.cell_contents for c in impl.__closure__)
        sub = self._subroutines.get(key) if caching else None
        if sub is None:
            outer = frame.callees if frame is not None else None
            if frame is not None:
                frame.callees = []         # (collects exactly what this subroutine calls)
            collected = []
            try:
                library = self.codegen().create_library(impl.__name__)
                pipeline = frontend.GPUPipeline(self.typing_context, self, library, sig.args,
                                                sig.return_type, frontend.numba_flags(options),
                                                locals or {})
                fndesc = pipeline.compile_extra(impl)
            finally:
                if frame is not None:
                    collected, frame.callees = frame.callees, outer
            for mod in library.modules:
                for fn in mod.functions:
                    if not fn.is_declaration and fn.linkage in ("", "external"):
                        fn.linkage = "weak_odr"
            sub = _Subroutine(fndesc, library)
            # the device functions it calls (undecorated helpers compiled for it) become the
            # caller's callees, now and whenever a later caller reuses it
            sub.callees = collected
            if caching:
                self._subroutines[key] = sub
        if frame is not None:
            frame.callees.extend(cf for cf in sub.callees if cf not in frame.callees)
        self._adopt(sub)
        return sub

    def _adopt(self, sub):
        lib = self.active_code_library
        adopted = getattr(lib, "_gpureplace_adopted", None)
        if adopted is None:
            adopted = lib._gpureplace_adopted = set()
        for mod in sub.modules:
            if id(mod) not in adopted:
                adopted.add(id(mod))
                lib.add_ir_module(mod)

    def create_module(self, name):
        return self._codegen._create_empty_module(name)

    def codegen(self):
        return self._codegen

    @property
    def target_data(self):
        return backend.target_data()

    def get_abi_sizeof(self, ty):
        return abi_sizeof(self.target_data, ty)

    def load_additional_registries(self):
        # Importing these registers their lowerings in Numba's builtin registry.
        from numba.cpython import numbers, tupleobj, slicing  # noqa: F401
        from numba.cpython import rangeobj, iterators, enumimpl  # noqa: F401
        from numba.cpython import cmathimpl
        from numba.np import arrayobj  # noqa: F401
        from numba.np import npdatetime  # noqa: F401  (datetime64 / timedelta64 arithmetic)
        from numba.np.unsafe import ndarray  # noqa: F401
        from .intrinsics import registry as intrinsic_registries
        self.install_registry(cmathimpl.registry)
        for reg in intrinsic_registries.lowering_registries():
            self.install_registry(reg)

    def refresh(self):
        if unchanged(self, _LOWERING_LISTS):
            self.typing_context.refresh()
            return
        super().refresh()
        from . import rangeloops, reshape_helper
        prefer_lowerings(self._defns, rangeloops.LOWERINGS)      # range steps marked nsw
        prefer_lowerings(self._defns, reshape_helper.LOWERINGS)  # a C array's reshape: no helper
        unchanged(self, _LOWERING_LISTS)

    @functools.cached_property
    def call_conv(self):
        from .exceptions import GPUCallConv
        return GPUCallConv(self)

    def mangler(self, name, argtypes, *, abi_tags=(), uid=None):
        return itanium_mangler.mangle(name, argtypes, abi_tags=abi_tags, uid=uid)

    def get_constant_generic(self, builder, ty, val):
        from .intrinsics.indexing import VALUE_READERS
        reader = VALUE_READERS.get(id(val))
        if reader is not None:       # cuda.laneid / cuda.warpsize: read, not frozen
            return reader(builder)
        return super().get_constant_generic(builder, ty, val)

    # Building a list, set or dict needs Numba's runtime heap, which device code does not have.
    def build_list(self, builder, list_type, items):
        self._no_heap("lists")

    def build_set(self, builder, set_type, items):
        self._no_heap("sets")

    def build_map(self, builder, dict_type, item_types, items):
        self._no_heap("dicts")

    def _no_heap(self, kind):
        from numba.core.errors import UnsupportedError
        raise UnsupportedError(unsupported_message(kind), loc=_lowering_loc())

    # -- global arrays --------------------------------------------------------------------------
    def make_constant_array(self, builder, typ, ary):
        """A global array read by device code, built from the copy its read keeps
        (tracking/contents.py), never from the live array: small ones are constants in the
        code; larger ones are a global in device memory that the runtime fills from that copy
        when the module loads (their size then costs the compiler nothing).  A global *device*
        array (CuPy, torch, any ``__cuda_array_interface__``) is used where it is, as numba-cuda
        captures one: its address is in the code, which is then never cached on disk, and
        rebinding the name recompiles."""
        if hasattr(ary, "__cuda_array_interface__"):
            return self._device_array_constant(builder, typ, ary)
        from ..tracking import contents
        from . import frontend
        from .records import find_array, resident_symbol
        cf = frontend.current_compiled()
        hit = find_array(cf.global_reads, ary) if cf is not None else None
        if hit is None:
            if contents.is_resident(ary):
                _refuse(f"an array of {_size(ary.nbytes)} that is not a global or closure "
                        f"variable (a default argument?) cannot be device data: pass it to the "
                        f"kernel as an argument")
            return super().make_constant_array(builder, typ, _as_bytes_numba_takes(ary))
        rec, path, part = hit
        if part.array is None:
            _refuse(f"the global array {rec.name!r} is {_size(part.nbytes)}; kernels read "
                    f"global arrays up to {_size(contents.MAX_GLOBAL_ARRAY_BYTES)} (gpureplace "
                    f"keeps a copy and compares it after each cell): pass it to the kernel as "
                    f"an argument instead (e.g. cupy.asarray({rec.attr}))")
        copy = part.array
        if not contents.is_resident(copy):
            return super().make_constant_array(builder, typ, _as_bytes_numba_takes(copy))
        symbol = resident_symbol(cf.pyfunc, rec, path)
        mod = builder.module
        gv = mod.globals.get(symbol)
        if gv is None:
            # A declaration: the kernel's wrapper module defines it (compiler/pipeline.py).
            gv = ir.GlobalVariable(mod, ir.ArrayType(ir.IntType(8), copy.nbytes), symbol,
                                   addrspace=ADDRSPACE_GLOBAL)
            gv.align = RESIDENT_ALIGN
        cary = self.make_array(typ)(self, builder)
        data = builder.bitcast(gv, ir.PointerType(ir.IntType(8), ADDRSPACE_GLOBAL))
        data = builder.addrspacecast(data, ir.PointerType(ir.IntType(8)))
        intp = self.get_value_type(types.intp)
        self.populate_array(cary, data=builder.bitcast(data, cary.data.type),
                            shape=[ir.Constant(intp, n) for n in copy.shape],
                            strides=[ir.Constant(intp, n) for n in copy.strides],
                            itemsize=ir.Constant(intp, copy.dtype.itemsize), parent=None,
                            meminfo=None)
        return cary._getvalue()

    def _device_array_constant(self, builder, typ, ary):
        cai = ary.__cuda_array_interface__
        dt = cai_dtype(cai)
        shape = tuple(cai["shape"])
        strides = cai.get("strides") or abi.contiguous_strides(shape, dt.itemsize)
        intp = self.get_value_type(types.intp)
        cary = self.make_array(typ)(self, builder)
        address = ir.Constant(intp, cai["data"][0] or 0)
        self.populate_array(cary, data=builder.inttoptr(address, cary.data.type),
                            shape=[ir.Constant(intp, n) for n in shape],
                            strides=[ir.Constant(intp, n) for n in strides],
                            itemsize=ir.Constant(intp, dt.itemsize), parent=None, meminfo=None)
        return cary._getvalue()

    def get_executable(self, library, fndesc, env):
        raise NotImplementedError("gpureplace functions are not executable on the host")

    def post_lowering(self, mod, library):
        # Float operations may contract into FMA, as CUDA C does by default (-fmad=true), unless
        # optimisation is off (opt=False: each operation rounds on its own, as NVVM's -opt=0
        # gives numba-cuda); fast math adds every other LLVM fast-math flag (FTZ and
        # approximate sqrt/div come from folding __nvvm_reflect in the back end).
        # Half-precision and bfloat16 operations keep their rounding, as CUDA C's __half and
        # __nv_bfloat16 operators do.
        from numba.core import fastmathpass
        from numba.core.cpu_options import FastMathOptions

        from . import frontend
        cf = frontend.current_compiled()
        fast = cf is not None and cf.options.fastmath
        if not fast and cf is not None and cf.options.opt == 0:
            return
        flags = FastMathOptions(True if fast else {"contract"}).flags
        for fn in mod.functions:
            for block in fn.blocks:
                for instr in block.instructions:
                    if (instr.opname in _FLOAT_OPS and not instr.flags
                            and not isinstance(instr.type, NARROW_FLOATS)
                            and not isinstance(getattr(instr.operands[0], "type", None),
                                               NARROW_FLOATS)):
                        instr.flags.extend(flags)
        if fast:
            fastmathpass.FastFloatCallVisitor(flags).visit(mod)


def _as_bytes_numba_takes(ary):
    """``ary``, or for a datetime64 / timedelta64 array a view of its bytes as int64 (the same
    shape and strides): Numba's constant array reads the data through Python's buffer
    protocol, which has no such dtypes (their device values are int64s anyway)."""
    return ary.view(np.int64) if ary.dtype.kind in "mM" else ary


# Context -> (typing context, target context): a pair lives as long as its Context (the typing
# context refers to the Context weakly, so the pair keeps nothing alive).  When the Context goes,
# so does its entry, and ``_release`` lets go of its typing context.  What compiling in a Context
# leaves elsewhere (the front end's cache, device-function types, Numba's templates' answers)
# holds it only while compiled code of it is in use: frontend.retain lets go of the rest.
_compilers = weakref.WeakKeyDictionary()
_compilers_lock = threading.Lock()


def all_compilers():
    """The (typing, target) context pairs of the live Contexts that compiled something."""
    return list(_compilers.values())


def live_contexts():
    """The live Contexts that compiled something, each with its pair: [(Context, (typing
    context, target context))]."""
    return list(_compilers.items())


def forget_answers(typingctxs, overloads_only=False):
    """Remove what Numba's templates kept for the typing contexts ``typingctxs``: they keep the
    answers they gave per typing context in dictionaries of their classes (``_impl_cache``,
    ``_overload_cache``), for as long as the template lives (Numba's own: for good).  An
    ``@overload``'s answer is a dispatcher holding the implementation compiled in the typing
    context's Context (so the Context); an intrinsic's, a signature and its lowering.
    ``overloads_only``: only the ``@overload`` templates' (a few hundred classes, not two
    thousand).  A later typing in those contexts asks the templates again."""
    from numba.core.typing import templates
    ids = {id(each) for each in typingctxs}
    if not ids:
        return
    if overloads_only:
        classes = type.__subclasses__(templates._OverloadFunctionTemplate)
    else:
        classes, todo, seen = [], [templates.FunctionTemplate, templates.AttributeTemplate], set()
        while todo:
            cls = todo.pop()
            classes.append(cls)
            for sub in type.__subclasses__(cls):
                if id(sub) not in seen:
                    seen.add(id(sub))
                    todo.append(sub)
    for cls in classes:
        for name in ("_impl_cache", "_overload_cache"):
            cache = cls.__dict__.get(name)
            if type(cache) is dict and cache:
                for key in [k for k in list(cache)
                            if type(k) is tuple and k and id(k[0]) in ids]:
                    cache.pop(key, None)


def forget_implementations(context_ids):
    """Remove the implementations compiled in the Contexts whose ids are ``context_ids`` from
    what Numba keeps of the last typing of each ``@overload``, by argument types alone (one
    typing context being Numba's rule): the template's ``_compiled_overloads`` and the function
    type's ``_impl_keys``, which would hold the last Context that typed each overloaded call
    (a typing sets both again before its lowering reads them).  The function types (among
    every type Numba made) are looked through only where a template's held one."""
    from numba.core import types as nbtypes
    from numba.core.types import abstract
    from numba.core.typing import templates
    if not context_ids:
        return

    def compiled_there(value):
        return id(getattr(value, "context", None)) in context_ids

    found = False
    for cls in type.__subclasses__(templates._OverloadFunctionTemplate):
        made = cls.__dict__.get("_compiled_overloads")
        if type(made) is dict and made:
            for key in [k for k, v in list(made.items()) if compiled_there(v)]:
                made.pop(key, None)
                found = True
    if not found:
        return
    for ref in list(abstract._typecache):
        fnty = ref()
        if type(fnty) is nbtypes.Function and fnty._impl_keys:
            keys = fnty._impl_keys
            for key in [k for k, v in list(keys.items()) if compiled_there(v)]:
                keys.pop(key, None)


def _release(typingctx):
    """The Context of ``typingctx`` is gone (nothing compiles in it again): unhook the typing
    context from Numba's templates (``forget_answers``), which would hold it -- its target
    context, its tables and everything they lowered -- for good.  It is not emptied: a
    bound-method type Numba shares between typing contexts may still type through it (see
    ``GPUTypingContext.dispatch_context``).  (Run when the Context is freed.)"""
    forget_answers([typingctx])
    typingctx.call_types.clear()
    typingctx.lowering_context = None       # (typing needs none: what it lowered can go)


def compilers(context):
    """The Numba typing and target contexts that compile in ``context`` (made once per Context)."""
    pair = _compilers.get(context)
    if pair is None:
        with _compilers_lock:
            pair = _compilers.get(context)
            if pair is None:
                tyctx = GPUTypingContext(context)
                tyctx.lowering_context = GPUTargetContext(tyctx)
                pair = _compilers[context] = (tyctx, tyctx.lowering_context)
                weakref.finalize(context, _release, tyctx).atexit = False
    return pair

