"""Arrays in the GPU's memory spaces: ``cuda.shared.array``, ``cuda.local.array``,
``cuda.const.array_like``.

Each returns an ordinary Numba array (the struct of ``numba.np.arrayobj``), so indexing, slicing,
``.shape`` and friends work unchanged; only its data pointer differs: the generic address
(``addrspacecast``) of storage in another address space.

- ``shared.array(shape, dtype)`` with a constant shape: one ``addrspace(3)`` global per call site
  (internal, uniquely named, aligned for its element type).
- ``shared.array(0, dtype)``: a 1-D view of the dynamic shared memory sized at launch
  (``kernel[grid, block, stream, nbytes]``).  Every such array starts at the same external
  ``[0 x i8]`` declaration, so they alias as ``extern __shared__`` arrays do in CUDA C; the length
  is ``%dynamic_smem_size // itemsize``.
- ``local.array(shape, dtype)``: a per-thread ``alloca`` (NVPTX places it in local memory).
- ``const.array_like(arr)``: ``arr`` must be a global (or closure) NumPy array; its values are
  copied at compile time into an ``addrspace(4)`` (``.const``) global.  The typing context only
  sees types, so a rewrite before type inference hands the array's value to the call as a hidden
  second argument (the original argument stays, so redefinition tracking still sees the global).
"""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
from llvmlite import ir
from numba.core import cgutils, debuginfo, ir as nir, types
from numba.core.datamodel import models, register_default
from numba.core.errors import TypingError
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.rewrites import Rewrite, register_rewrite
from numba.core.typing.npydecl import parse_dtype
from numba.core.typing.templates import CallableTemplate, Registry, signature
from numba.core.typing.typeof import typeof_impl
from numba.np import numpy_support
from numba.np.arrayobj import make_array, populate_array

from . import usage
from .requirements import compile_target
from .stubs import IntrinsicArgumentError, Namespace, Stub, register_namespace

__all__ = ["shared", "local", "const"]

typing = Registry()
lowering = LoweringRegistry()

ADDRSPACE_SHARED = 3
ADDRSPACE_CONST = 4

#: Name of the dynamic shared memory: one external declaration that every module shares.
DYNAMIC_SHARED_NAME = "_gpureplace_dynamic_smem"
_SMEM_PREFIX = "_gpureplace_smem"
_CMEM_PREFIX = "_gpureplace_cmem"
_ids = itertools.count()

shared = Namespace("shared", array=Stub(
    "array", "shared.array(shape, dtype): an array in the block's shared memory.  shape is an "
             "int or a tuple of ints known at compile time; shape 0 gives a 1-D view of the "
             "dynamic shared memory whose size is set at launch", namespace="cuda.shared"))
local = Namespace("local", array=Stub(
    "array", "local.array(shape, dtype): an array private to each thread (shape known at "
             "compile time)", namespace="cuda.local"))
#: The allocators whose shape argument must be a compile-time constant (driver.FoldArrayShapes)
ARRAY_STUBS = (shared.array, local.array)

const = Namespace("const", array_like=Stub(
    "array_like", "const.array_like(arr): the global NumPy array arr, copied into constant "
                  "memory at compile time (read-only on the device)", namespace="cuda.const"))


# ---------------------------------------------------------------------------------------------
# The namespaces as values: cuda.shared -> NamespaceType, .array -> the stub's Function type


for _ns in (shared, local, const):
    register_namespace(typing, _ns)
del _ns


# ---------------------------------------------------------------------------------------------
# Typing of shared.array / local.array


def _shape_of(fname, shape, allow_dynamic):
    """The constant shape as a tuple of ints; raise a TypingError naming what is wrong."""
    hint = (f"{fname}(shape, dtype): shape must be an int or a tuple of ints known at compile "
            f"time (literals, global constants and integer arithmetic of those)")
    if isinstance(shape, types.IntegerLiteral):
        dims = (shape.literal_value,)
    elif isinstance(shape, types.BaseTuple) and not isinstance(shape, types.BaseNamedTuple):
        if len(shape) == 0:
            raise TypingError(f"{hint}; got an empty tuple")
        dims = []
        for each in shape:
            if not isinstance(each, types.IntegerLiteral):
                raise TypingError(f"{hint}; got {shape}: a dimension of type {each} is not a "
                                  f"constant (it depends on a value known only at run time)")
            dims.append(each.literal_value)
        dims = tuple(dims)
    elif isinstance(shape, (types.Integer, types.BaseTuple)):
        raise TypingError(f"{hint}; got a value of type {shape} that is only known at run time")
    else:
        raise TypingError(f"{hint}; got {shape}")
    if any(d < 0 for d in dims):
        raise TypingError(f"{fname}: shape {dims} has a negative dimension")
    if 0 in dims:
        if not allow_dynamic:
            raise TypingError(f"{fname}: shape {dims} has a zero dimension (a local array needs "
                              f"a positive size)")
        if len(dims) != 1:
            raise TypingError(f"{fname}: shape {dims}: only a 1-D shape of 0 (dynamic shared "
                              f"memory, sized at launch) may be zero")
    return dims


_DTYPE_KINDS = (types.Number, types.Boolean, types.Record, types.NPDatetime, types.NPTimedelta)

#: The largest alignment LLVM takes (2**32 bytes).
MAX_ALIGNMENT = 1 << 32


def _element_type(fname, dtype):
    """The Numba element type of ``dtype`` (np.float32, numba.float32, np.dtype(..), 'float32')."""
    try:
        nbtype = parse_dtype(dtype)
    except TypingError as exc:
        raise TypingError(f"{fname}: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    if not isinstance(nbtype, _DTYPE_KINDS):
        got = dtype if nbtype is None else nbtype
        vector = getattr(getattr(dtype, "typing_key", None), "vector_type", None)
        if vector is not None:
            return vector                  # cuda.float32x4 and its kind: arrays of vectors
        raise TypingError(f"{fname}(shape, dtype): dtype must be a scalar type such as "
                          f"np.float32, numba.int32, np.dtype('float64') or 'float32' "
                          f"(or a record type), got {got}")
    return nbtype


def _alignment_of(fname, alignment):
    """The ``alignment=`` of shared.array / local.array (numba-cuda's keyword): None, or a
    power of two given as a constant int."""
    if alignment is None or isinstance(alignment, (types.NoneType, types.Omitted)):
        return None
    if isinstance(alignment, types.IntegerLiteral):
        value = alignment.literal_value
        if value <= 0 or value & (value - 1):
            raise IntrinsicArgumentError(f"{fname}(..., alignment={value}): Alignment must be "
                                         f"a positive power of two")
        if value > MAX_ALIGNMENT:
            # LLVM refuses the IR ("huge alignments are not supported yet")
            raise IntrinsicArgumentError(f"{fname}(..., alignment={value}): the alignment can "
                                         f"be at most {MAX_ALIGNMENT} (2**32) bytes")
        return value
    raise IntrinsicArgumentError(f"{fname}(..., alignment=...): alignment must be a constant "
                                 f"integer (a power of two), got {alignment}")


def _array_template(stub, fname, allow_dynamic):
    class _Template(CallableTemplate):
        key = stub
        prefer_literal = True     # shapes must be literals: try the literal types first

        def generic(self):
            def typer(shape, dtype, alignment=None):
                dims = _shape_of(fname, shape, allow_dynamic)
                eltype = _element_type(fname, dtype)
                _alignment_of(fname, alignment)
                if dims != (0,):
                    _check_size(fname, dims, eltype)
                return types.Array(eltype, len(dims), "C")
            return typer

    _Template.__name__ = f"_{fname.replace('.', '_')}_template"
    return _Template


# ---------------------------------------------------------------------------------------------
# What fits: refused at the call's line, before any IR is built.  LLVM spends minutes and
# gigabytes on a local array of 10**7 elements and never finishes 10**9, a shape whose size
# overflows int64 makes IR that does not parse, and one that merely does not fit compiles to
# PTX that ptxas and the driver refuse.


def itemsize_of(eltype):
    """Bytes of one element of an array of ``eltype`` (its size in the array's data)."""
    from .vectors import VectorType
    if isinstance(eltype, VectorType):
        return eltype.element.bitwidth // 8 * eltype.count
    return numpy_support.as_dtype(eltype).itemsize


def format_bytes(n):
    """``n`` bytes in words: "512 KiB", "38.1 MiB", "100 bytes"."""
    if n < 1024:
        return f"{n:,} bytes"
    value, unit = float(n), "bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        value /= 1024
        if value < 1024:
            break
    if value == int(value):
        return f"{int(value):,} {unit}"
    text = f"{value:,.1f}"
    # 512.0 KiB for 524,292 bytes would read as the limit itself
    return f"{n:,} bytes" if text.endswith(".0") else f"{text} {unit}"


def _describe(fname, dims, eltype, nbytes):
    count = 1
    for d in dims:
        count *= d
    what = f"{count:,} {eltype}" if len(dims) == 1 else \
        f"shape {dims} ({count:,} {eltype})"
    return f"{fname} of {what}, {format_bytes(nbytes)},"


def _check_size(fname, dims, eltype):
    from ..backend import LOCAL_BYTES_PER_THREAD, STATIC_SHARED_BYTES
    nbytes = itemsize_of(eltype)
    for d in dims:
        nbytes *= d
    if fname == "cuda.local.array":
        if nbytes > LOCAL_BYTES_PER_THREAD:
            raise TypingError(
                f"{_describe(fname, dims, eltype, nbytes)} is more than a thread's "
                f"{format_bytes(LOCAL_BYTES_PER_THREAD)} of local memory; use a global array "
                f"(pass one as an argument), or cuda.shared.array for data shared by a block")
        return
    if nbytes > STATIC_SHARED_BYTES:
        raise TypingError(f"{_describe(fname, dims, eltype, nbytes)} is more than the "
                          f"{format_bytes(STATIC_SHARED_BYTES)} of static shared memory a block "
                          f"can have; " + more_shared_advice(
                              nbytes, compile_target()[0],
                              f"declare cuda.shared.array(0, {eltype}) instead"))


def more_shared_advice(nbytes, arch, declare):
    """What to do with ``nbytes`` of shared data, over the static limit, on ``arch``;
    ``declare``: how to declare the dynamic shared array (one array, or several: their sum)."""
    from ..backend import shared_opt_in_bytes
    most = shared_opt_in_bytes(arch)
    if most is not None and nbytes <= most:
        return (f"a block on {arch} can have up to {format_bytes(most)} as dynamic shared "
                f"memory: {declare} and give the size in bytes as the launch's fourth value "
                f"(kernel[blocks, threads, stream, nbytes])")
    limit = f"not even the {format_bytes(most)} of shared memory a block on {arch} can " \
            f"have holds it" if most is not None else "it is more than any GPU's block can have"
    return (f"{limit}: keep the data in a global array (pass one as an argument) and work on "
            f"tiles of it in shared memory")


typing.register_global(shared.array, types.Function(
    _array_template(shared.array, "cuda.shared.array", allow_dynamic=True)))
typing.register_global(local.array, types.Function(
    _array_template(local.array, "cuda.local.array", allow_dynamic=False)))


# ---------------------------------------------------------------------------------------------
# Lowering helpers


def _c_strides(dims, itemsize):
    strides, step = [], itemsize
    for d in reversed(dims):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def _build_array(context, builder, arytype, data, shape, itemsize):
    """A Numba array value over ``data`` (a generic pointer) with C-order ``shape``.

    ``shape`` holds ints, or LLVM intp values (the dynamic length); strides follow C order.
    """
    intp = context.get_value_type(types.intp)
    shape_vals = [intp(s) if isinstance(s, int) else s for s in shape]
    if all(isinstance(s, int) for s in shape):
        stride_vals = [intp(s) for s in _c_strides(shape, itemsize)]
    else:                       # only the 1-D dynamic array has a run-time extent
        stride_vals = [intp(itemsize)]
    ary = make_array(arytype)(context, builder)
    if data.type.addrspace != ary.data.type.addrspace:
        data = builder.addrspacecast(data, ary.data.type)
    elif data.type != ary.data.type:
        data = builder.bitcast(data, ary.data.type)
    populate_array(ary, data=data, shape=shape_vals, strides=stride_vals, itemsize=intp(itemsize), meminfo=None)
    return ary._getvalue()


def _element_layout(context, dtype):
    lltype = context.get_data_type(dtype)
    align = context.get_abi_alignment(lltype)
    from .vectors import VectorType
    if isinstance(dtype, VectorType):
        # aligned to the vector's size, as CUDA C's float4: each element one wide access
        align = max(align, dtype.alignment)
    return lltype, context.get_abi_sizeof(lltype), align


def _dims_of_sig(shape_type):
    if isinstance(shape_type, types.IntegerLiteral):
        return (shape_type.literal_value,)
    return tuple(s.literal_value for s in shape_type)


# ---------------------------------------------------------------------------------------------
# shared.array


def _requested_alignment(sig):
    return _alignment_of("", sig.args[2]) if len(sig.args) > 2 else None


def _static_shared(context, builder, arytype, dims, requested=None):
    lltype, itemsize, align = _element_layout(context, arytype.dtype)
    align = max(align, requested or 0)
    count = 1
    for d in dims:
        count *= d
    storage = ir.ArrayType(lltype, count)
    gv = ir.GlobalVariable(builder.module, storage, f"{_SMEM_PREFIX}_{next(_ids)}",
                           addrspace=ADDRSPACE_SHARED)
    gv.linkage = "internal"
    gv.initializer = ir.Constant(storage, ir.Undefined)   # shared memory has no initializer
    gv.align = align
    # the block's total is checked once the kernel is linked (validate.check_linked)
    usage.note(context, usage.SHARED, _what("cuda.shared.array", dims, arytype.dtype),
               count * itemsize, gv.name)
    return _build_array(context, builder, arytype, gv, dims, itemsize)


def dynamic_shared_storage(module):
    """The module's declaration of the dynamic shared memory (created on first use)."""
    gv = module.globals.get(DYNAMIC_SHARED_NAME)
    if gv is None:
        gv = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), 0), DYNAMIC_SHARED_NAME,
                               addrspace=ADDRSPACE_SHARED)
        gv.linkage = "external"
        gv.align = 16
    return gv


def _dynamic_shared(context, builder, arytype, requested=None):
    _, itemsize, _ = _element_layout(context, arytype.dtype)
    gv = dynamic_shared_storage(builder.module)
    gv.align = max(gv.align, requested or 0)
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []),
                                        "llvm.nvvm.read.ptx.sreg.dynamic_smem_size")
    nbytes = builder.call(fn, [])
    length = builder.udiv(nbytes, ir.IntType(32)(itemsize))
    length = builder.zext(length, context.get_value_type(types.intp))
    return _build_array(context, builder, arytype, gv, (length,), itemsize)


def _lower_shared_array(context, builder, sig, args):
    dims = _dims_of_sig(sig.args[0])
    if dims == (0,):
        return _dynamic_shared(context, builder, sig.return_type, _requested_alignment(sig))
    return _static_shared(context, builder, sig.return_type, dims, _requested_alignment(sig))


def _what(fname, dims, dtype):
    """How an error about the sum of arrays names this one."""
    return f"{fname}({dims[0] if len(dims) == 1 else dims}, {dtype})"


def _lower_local_array(context, builder, sig, args):
    arytype = sig.return_type
    dims = _dims_of_sig(sig.args[0])
    lltype, itemsize, align = _element_layout(context, arytype.dtype)
    count = 1
    for d in dims:
        count *= d
    align = max(align, _requested_alignment(sig) or 0)
    storage = _zeroed_alloca(builder, ir.ArrayType(lltype, count), count * itemsize, align)
    # the thread's total (device functions included) is checked after lowering
    # (validate.check_compiled)
    usage.note(context, usage.LOCAL, _what("cuda.local.array", dims, arytype.dtype),
               count * itemsize)
    return _build_array(context, builder, arytype, storage, dims, itemsize)


#: Up to this many bytes a memset is written as stores where it is (NVPTX's own limit, beyond
#: which its back end turns a memset into a loop of one-byte stores).
_INLINE_ZERO_BYTES = 128


def _zeroed_alloca(builder, lltype, nbytes, align):
    """Storage for a local array in the function's entry block, zeroed there: local arrays start
    at zero, as numba-cuda's do (Numba's ``cgutils.alloca_once`` zeroes what it allocates).

    Not alloca_once itself: it stores a zero aggregate, which LLVM splits into one store per
    element (minutes of compile time and gigabytes of memory for 10**5 elements).  Small arrays
    get a memset (stores in place, or registers after SROA); larger ones a loop of the widest
    stores the alignment allows, in a helper that LLVM inlines."""
    with debuginfo.suspend_emission(builder), builder.goto_entry_block():
        storage = builder.alloca(lltype, name="local_array")
        storage.align = align
        if nbytes <= _INLINE_ZERO_BYTES:
            cgutils.memset(builder, storage, ir.Constant(ir.IntType(64), nbytes), 0)
        else:
            width = next(w for w in (8, 4, 2, 1) if align % w == 0 and nbytes % w == 0)
            ity = ir.IntType(width * 8)
            builder.call(_zero_loop(builder.module, ity),
                         [builder.bitcast(storage, ity.as_pointer()),
                          ir.Constant(ir.IntType(64), nbytes // width)])
    return storage


def _zero_loop(module, ity):
    """``void zero(iN* p, i64 n)``: n stores of a zero ``ity`` from p on."""
    name = f"__gpureplace_zero_local_i{ity.width}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    i64 = ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ity.as_pointer(), i64]), name)
    fn.linkage = "linkonce_odr"          # every module that zeroes defines it; linking keeps one
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    ptr, count = fn.args
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(i64(0), entry)
    b.store(ity(0), b.gep(ptr, [i]), align=ity.width // 8)
    nxt = b.add(i, i64(1), flags=("nuw", "nsw"))
    i.add_incoming(nxt, loop)
    b.cbranch(b.icmp_unsigned("<", nxt, count), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return fn


for _shape_ty in (types.IntegerLiteral, types.Tuple, types.UniTuple):
    lowering.lower(shared.array, _shape_ty, types.Any)(_lower_shared_array)
    lowering.lower(shared.array, _shape_ty, types.Any, types.Any)(_lower_shared_array)
    lowering.lower(local.array, _shape_ty, types.Any)(_lower_local_array)
    lowering.lower(local.array, _shape_ty, types.Any, types.Any)(_lower_local_array)
del _shape_ty


# ---------------------------------------------------------------------------------------------
# const.array_like


class ConstSource:
    """A NumPy array's values, frozen at compile time (the hidden argument of array_like)."""

    __slots__ = ("array", "digest")

    def __init__(self, array):
        self.array = np.ascontiguousarray(array)
        h = hashlib.sha1(self.array.tobytes())
        h.update(str((self.array.dtype.str, self.array.dtype.descr, self.array.shape)).encode())
        self.digest = h.hexdigest()[:16]


class ConstSourceType(types.Dummy):
    def __init__(self, source):
        self.source = source
        a = source.array
        super().__init__(f"const_source({a.dtype}, {a.shape}, {source.digest})")


register_default(ConstSourceType)(models.OpaqueModel)


def _typeof_const_source(val, c):
    return ConstSourceType(val)


typeof_impl.register(ConstSource)(_typeof_const_source)


@lowering.lower_constant(ConstSourceType)
def _lower_const_source(context, builder, ty, pyval):
    return context.get_dummy_value()


class _ConstArrayLikeTemplate(CallableTemplate):
    key = const.array_like

    def generic(self):
        def typer(ndarray, _frozen=None):
            if _frozen is None or isinstance(_frozen, types.Omitted):
                if isinstance(ndarray, types.Array):
                    raise TypingError(
                        "cuda.const.array_like(arr): arr must be a NumPy array held in a global "
                        "or closure variable, so that its values can be copied into constant "
                        "memory at compile time; a kernel argument or a local array cannot be")
                raise TypingError(f"cuda.const.array_like(arr): arr must be a global NumPy "
                                  f"array, got {ndarray}")
            if not isinstance(_frozen, ConstSourceType):
                raise TypingError("cuda.const.array_like() takes one argument, the array")
            a = _frozen.source.array
            eltype = numpy_support.from_dtype(a.dtype)
            if not isinstance(eltype, _DTYPE_KINDS):
                raise TypingError(f"cuda.const.array_like(arr): arrays of {a.dtype} cannot be "
                                  f"placed in constant memory")
            if a.ndim == 0:
                raise TypingError("cuda.const.array_like(arr): arr must have at least one "
                                  "dimension")
            from ..backend import CONST_BYTES
            if a.nbytes > CONST_BYTES:
                raise TypingError(
                    f"cuda.const.array_like(arr) of {a.size:,} {a.dtype}, "
                    f"{format_bytes(a.nbytes)}, is more than the {format_bytes(CONST_BYTES)} "
                    f"of constant memory a kernel's module can have; pass the array as a "
                    f"kernel argument instead")
            return signature(types.Array(eltype, a.ndim, "C", readonly=True), ndarray, _frozen)
        return typer


typing.register_global(const.array_like, types.Function(_ConstArrayLikeTemplate))


@lowering.lower(const.array_like, types.Any, ConstSourceType)
def _lower_const_array_like(context, builder, sig, args):
    source = sig.args[1].source
    a = source.array
    arytype = sig.return_type
    _, itemsize, align = _element_layout(context, arytype.dtype)
    data = bytearray(a.tobytes()) or bytearray(1)     # no zero-sized globals
    init = cgutils.create_constant_array(ir.IntType(8), data)
    name = f"{_CMEM_PREFIX}_{source.digest}"
    gv = builder.module.globals.get(name)
    if gv is None:
        gv = ir.GlobalVariable(builder.module, init.type, name, addrspace=ADDRSPACE_CONST)
        gv.linkage = "internal"
        gv.global_constant = True
        gv.initializer = init
        gv.align = max(align, 4)
    usage.note(context, usage.CONST, f"cuda.const.array_like of {a.size:,} {a.dtype}", a.nbytes,
               name)
    return _build_array(context, builder, arytype, gv, a.shape, itemsize)


_MISSING = object()


def _global_value(func_ir, var, depth=0):
    """The value of ``var`` if it is a global/closure value or an attribute chain on one."""
    if depth > 8:
        return _MISSING
    try:
        defn = func_ir.get_definition(var)
    except Exception:           # not single-assigned, unknown name...: not a constant
        return _MISSING
    if isinstance(defn, (nir.Global, nir.FreeVar)):
        return defn.value
    if isinstance(defn, nir.Expr) and defn.op == "getattr":
        base = _global_value(func_ir, defn.value, depth + 1)
        if base is _MISSING:
            return _MISSING
        try:
            return getattr(base, defn.attr, _MISSING)
        except Exception:       # a host stand-in that refuses attribute reads (cuda.threadIdx)
            return _MISSING
    return _MISSING


def _may_be_array_like(func_ir, var):
    """Cheap pre-check, since this rewrite sees every call Numba compiles (CPU ones too)."""
    try:
        defn = func_ir.get_definition(var)
    except Exception:
        return False
    if isinstance(defn, nir.Expr) and defn.op == "getattr":
        return defn.attr == "array_like"
    return isinstance(defn, (nir.Global, nir.FreeVar)) and defn.value is const.array_like


@register_rewrite("before-inference")
class _FreezeConstArrayLike(Rewrite):
    """``const.array_like(arr)`` -> ``const.array_like(arr, <arr's values>)`` for a constant arr."""

    def match(self, func_ir, block, typemap, calltypes):
        self._block = block
        self._hits = {}
        for inst in block.find_insts(nir.Assign):
            expr = inst.value
            if not (isinstance(expr, nir.Expr) and expr.op == "call"):
                continue
            if len(expr.args) + len(expr.kws) != 1 or expr.vararg is not None:
                continue
            if not _may_be_array_like(func_ir, expr.func):
                continue
            if _global_value(func_ir, expr.func) is not const.array_like:
                continue
            arg = expr.args[0] if expr.args else dict(expr.kws).get("ndarray")
            if arg is None:
                continue
            value = _global_value(func_ir, arg)
            if isinstance(value, np.ndarray):
                self._hits[id(inst)] = (arg, value)
        return bool(self._hits)

    def apply(self):
        new = self._block.copy()
        new.clear()
        for inst in self._block.body:
            hit = self._hits.get(id(inst))
            if hit is not None:
                arg, value = hit
                loc = inst.loc
                frozen = nir.Var(inst.target.scope, f"$const_array_like_{next(_ids)}", loc)
                new.append(nir.Assign(nir.Const(ConstSource(value), loc, use_literal_type=False),
                                      frozen, loc))
                call = inst.value
                inst = nir.Assign(nir.Expr.call(call.func, [arg, frozen], (), loc), inst.target,
                                  loc)
            new.append(inst)
        return new
