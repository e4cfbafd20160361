"""Arrays in the GPU's memory spaces: ``cuda.shared.array``, ``cuda.local.array`` (and
``cuda.const.array_like``, in ``constmem.py``).

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
- ``const.array_like(arr)``: constant memory, in ``constmem.py``.
"""

from __future__ import annotations

import itertools

from llvmlite import ir
from numba.core import cgutils, debuginfo, types
from numba.core.errors import TypingError
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.npydecl import parse_dtype
from numba.core.typing.templates import CallableTemplate, Registry
from numba.np import numpy_support
from numba.np.arrayobj import make_array, populate_array

from ..datamodels import user_value_size
from . import usage
from .requirements import compile_target
from .stubs import IntrinsicArgumentError, Namespace, Stub, register_namespace

__all__ = ["shared", "local"]

typing = Registry()
lowering = LoweringRegistry()

ADDRSPACE_SHARED = 3

#: Name of the dynamic shared memory: one external declaration that every module shares.
DYNAMIC_SHARED_NAME = "_gpureplace_dynamic_smem"
_SMEM_PREFIX = "_gpureplace_smem"
_ids = itertools.count()

shared = Namespace("shared", array=Stub(
    "array", "shared.array(shape, dtype): an array in the block's shared memory.  shape is an "
             "int or a tuple of ints known at compile time; shape 0 gives a 1-D view of the "
             "dynamic shared memory whose size is set at launch", namespace="cuda.shared"))
local = Namespace("local", array=Stub(
    "array", "local.array(shape, dtype): an array private to each thread (shape known at "
             "compile time)", namespace="cuda.local"))
#: The allocators whose shape argument must be a compile-time constant (fold_shapes.FoldArrayShapes)
ARRAY_STUBS = (shared.array, local.array)


# ---------------------------------------------------------------------------------------------
# The namespaces as values: cuda.shared -> NamespaceType, .array -> the stub's Function type


for _ns in (shared, local):
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


DTYPE_KINDS = (types.Number, types.Boolean, types.Record, types.NPDatetime, types.NPTimedelta)

#: The largest alignment LLVM takes (2**32 bytes).
MAX_ALIGNMENT = 1 << 32


def _element_type(fname, dtype):
    """The Numba element type of ``dtype`` (np.float32, numba.float32, np.dtype(..), 'float32')."""
    try:
        nbtype = parse_dtype(dtype)
    except TypingError as exc:
        raise TypingError(f"{fname}: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    if not isinstance(nbtype, DTYPE_KINDS):
        got = dtype if nbtype is None else nbtype
        vector = getattr(getattr(dtype, "typing_key", None), "vector_type", None)
        if vector is not None:
            return vector                  # cuda.float32x4 and its kind: arrays of vectors
        if nbtype is not None and user_value_size(nbtype) is not None:
            return nbtype                  # a type of the extension API with a struct model
        raise TypingError(f"{fname}(shape, dtype): dtype must be a scalar type such as "
                          f"np.float32, numba.int32, np.dtype('float64') or 'float32' "
                          f"(or a record type, or a type registered with a StructModel), "
                          f"got {got}")
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
    size = user_value_size(eltype) if not isinstance(eltype, DTYPE_KINDS) else None
    return size if size is not None else numpy_support.as_dtype(eltype).itemsize


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
    from ...arch import LOCAL_BYTES_PER_THREAD, STATIC_SHARED_BYTES
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
    from ...arch import shared_opt_in_bytes
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


def build_array(context, builder, arytype, data, shape, itemsize):
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


def element_layout(context, dtype):
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
    lltype, itemsize, align = element_layout(context, arytype.dtype)
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
    return build_array(context, builder, arytype, gv, dims, itemsize)


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
    _, itemsize, _ = element_layout(context, arytype.dtype)
    gv = dynamic_shared_storage(builder.module)
    gv.align = max(gv.align, requested or 0)
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []),
                                        "llvm.nvvm.read.ptx.sreg.dynamic_smem_size")
    nbytes = builder.call(fn, [])
    length = builder.udiv(nbytes, ir.IntType(32)(itemsize))
    length = builder.zext(length, context.get_value_type(types.intp))
    return build_array(context, builder, arytype, gv, (length,), itemsize)


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
    lltype, itemsize, align = element_layout(context, arytype.dtype)
    count = 1
    for d in dims:
        count *= d
    align = max(align, _requested_alignment(sig) or 0)
    storage = _zeroed_alloca(builder, ir.ArrayType(lltype, count), count * itemsize, align)
    # the thread's total (device functions included) is checked after lowering
    # (validate.check_compiled)
    usage.note(context, usage.LOCAL, _what("cuda.local.array", dims, arytype.dtype),
               count * itemsize)
    return build_array(context, builder, arytype, storage, dims, itemsize)


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
