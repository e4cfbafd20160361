"""The kernel ABI: how each Numba argument type is passed as flat kernel parameters.

Arrays pass as (data pointer, shape..., strides...) -- not Numba's seven-field struct -- and
contiguous ('C' or 'F' layout) arrays as (data pointer, shape...) alone: the wrapper derives their
strides from the shape, so a launch reads and packs two fields fewer per array.  Scalars by value
(bool as one byte); tuples flattened; types, dtypes and omitted arguments are compile-time
constants and take no parameter; a record (structured scalar) passes as a pointer to a device
copy that the launch makes.  The same description drives the kernel wrapper (LLVM side) and the
launch packer (``struct`` format on the host side).
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types

from .bfloat16 import BFloat16, BFloatType
from .fp8 import FP8

#: (numba type) -> struct format character of a scalar parameter
_SCALAR_FORMAT = {
    types.boolean: "?",
    types.int8: "b", types.uint8: "B", types.int16: "h", types.uint16: "H",
    types.int32: "i", types.uint32: "I", types.int64: "q", types.uint64: "Q",
    types.float16: "e", types.float32: "f", types.float64: "d",
}


def leaves(ty):
    """Flat parameter list of ``ty``: a list of (struct format char, llvm type)."""
    if isinstance(ty, types.Array):
        n = ty.ndim
        return [("Q", ir.PointerType(ir.IntType(8)))] + [("q", ir.IntType(64))] * (
            2 * n if passes_strides(ty) else n)
    if isinstance(ty, types.Record):
        return [("Q", ir.PointerType(ir.IntType(8)))]      # a pointer to a device copy
    if isinstance(ty, types.CPointer):
        return [("Q", ir.PointerType(ir.IntType(8)))]      # a raw device address
    if isinstance(ty, types.Boolean):
        return [("?", ir.IntType(8))]
    if isinstance(ty, BFloat16):
        return [("H", BFloatType())]                     # its 16 bits (bfloat16.bits_of)
    if isinstance(ty, FP8):
        return [("B", ir.IntType(8))]                    # its byte
    if isinstance(ty, (types.NPDatetime, types.NPTimedelta)):
        return [("q", ir.IntType(64))]                   # its int64 count of units
    if isinstance(ty, (types.Integer, types.Float)):
        fmt = _SCALAR_FORMAT[ty]
        lty = {"e": ir.HalfType(), "f": ir.FloatType(), "d": ir.DoubleType()}.get(
            fmt, ir.IntType(ty.bitwidth) if isinstance(ty, types.Integer) else None)
        return [(fmt, lty)]
    if isinstance(ty, types.Complex):
        return leaves(ty.underlying_float) * 2
    if isinstance(ty, (types.EnumMember, types.IntEnumMember)):
        return leaves(ty.dtype)                          # its value
    if isinstance(ty, types.BaseTuple):
        out = []
        for t in ty.types:
            out.extend(leaves(t))
        return out
    if is_constant_type(ty):
        return []
    raise TypeError(f"{ty} cannot be passed to a kernel")


def layout_of(shape, strides, itemsize):
    """'C', 'F' or 'A' from byte strides (empty and single-element arrays are 'C'; an axis of
    length 1 may have any stride)."""
    ndim = len(shape)
    if 0 in shape:
        return "C"              # (no element: NumPy may give any strides, 0 included)
    c = f = True
    expect = itemsize
    for i in range(ndim - 1, -1, -1):
        if shape[i] != 1 and strides[i] != expect:
            c = False
            break
        expect *= shape[i]
    if c:
        return "C"
    expect = itemsize
    for i in range(ndim):
        if shape[i] != 1 and strides[i] != expect:
            f = False
            break
        expect *= shape[i]
    return "F" if f else "A"


_ALIGNMENTS = {}


def element_alignment(dt):
    """The alignment the compiled code assumes of ``dt``'s elements in memory: each scalar's
    natural one (a complex number's part's), for a record its widest field's (the code loads
    each field with its own alignment, whatever NumPy's ``align=`` said)."""
    hit = _ALIGNMENTS.get(dt)
    if hit is None:
        if dt.fields:
            hit = max((element_alignment(f[0]) for f in dt.fields.values()), default=1)
        elif dt.subdtype is not None:
            hit = element_alignment(dt.subdtype[0])
        else:
            hit = max(dt.alignment, 1)
        _ALIGNMENTS[dt] = hit
    return hit


def misalignment(dt, address, shape, strides):
    """Why the elements of an array of ``dt`` at device ``address`` with byte ``strides``
    (None: contiguous) are not all aligned as the compiled code assumes, or None.  On the GPU
    such a load or store is a misaligned-address fault, which ends the CUDA context (every
    array and module of the process with it): the launch refuses it first."""
    if 0 in shape:
        return None
    align = element_alignment(dt)
    if align == 1:
        return None
    if address % align:
        return (f"starts at device address 0x{address:x}, which is not a multiple of {align} "
                f"bytes, the alignment of its {dt} elements (a view of another dtype, at an "
                f"offset?)")
    for axis, (n, step) in enumerate(zip(shape, strides or ())):
        if n > 1 and step % align:
            hint = (" (np.dtype(..., align=True) pads a record to its alignment)"
                    if dt.fields and step == dt.itemsize else "")
            return (f"has a stride of {step} bytes along axis {axis}, not a multiple of {align} "
                    f"bytes, the alignment of its {dt} elements{hint}")
    return None


def contiguous_strides(shape, itemsize, order="C"):
    """Byte strides of a contiguous array of ``shape`` in ``order`` ('C' or 'F')."""
    ndim = len(shape)
    strides, acc = [0] * ndim, itemsize
    for ax in (range(ndim - 1, -1, -1) if order == "C" else range(ndim)):
        strides[ax] = acc
        acc *= shape[ax]
    return tuple(strides)


def passes_strides(ty):
    """Whether an array of type ``ty`` passes its strides (False for contiguous layouts)."""
    return ty.layout not in ("C", "F")


def is_constant_type(ty):
    return isinstance(ty, (types.NumberClass, types.DType, types.Omitted, types.NoneType,
                           types.Literal, types.Dummy))


def struct_format(argtypes):
    return "@" + "".join(f for ty in argtypes for f, _ in leaves(ty))


def llvm_param_types(argtypes):
    return [lty for ty in argtypes for _, lty in leaves(ty)]


def rebuild(context, builder, ty, params):
    """Numba value of type ``ty`` from the flat kernel parameters (consumed from ``params``)."""
    if isinstance(ty, types.Array):
        ptr = params.pop(0)
        from .intrinsics.vectors import VectorType
        if isinstance(ty.dtype, VectorType) and isinstance(ptr, ir.Argument):
            # cuda.as_vectors(...): the launch checked the alignment; knowing it lets LLVM load
            # and store each vector with one wide access (ld.global.v4.f32 for float32x4)
            ptr.attributes.align = ty.dtype.alignment
        shape = [params.pop(0) for _ in range(ty.ndim)]
        itemsize = _itemsize(context, ty.dtype)
        if passes_strides(ty):
            strides = [params.pop(0) for _ in range(ty.ndim)]
        else:
            strides = _contiguous_strides(builder, shape, itemsize, ty.layout)
        nitems = ir.Constant(ir.IntType(64), 1)
        for s in shape:
            nitems = builder.mul(nitems, s)
        # Numba's array struct, built field by field (meminfo and parent stay null): a struct
        # proxy would put it in an alloca, and ask the context for ``__array__`` each time
        model = context.data_model_manager[ty]
        struct = model.get_value_type()
        value = ir.Constant(struct, None)
        data_at = model.get_field_position("data")
        fields = (("nitems", nitems), ("itemsize", ir.Constant(ir.IntType(64), itemsize)),
                  ("data", builder.bitcast(ptr, struct.elements[data_at])),
                  ("shape", _pack(builder, shape)), ("strides", _pack(builder, strides)))
        for name, field in fields:
            value = builder.insert_value(value, field, model.get_field_position(name))
        return value
    if isinstance(ty, (types.Record, types.CPointer)):
        return builder.bitcast(params.pop(0), context.get_value_type(ty))
    if isinstance(ty, types.Boolean):
        return builder.icmp_unsigned("!=", params.pop(0), ir.Constant(ir.IntType(8), 0))
    if isinstance(ty, (types.Integer, types.Float, types.NPDatetime, types.NPTimedelta, FP8)):
        return params.pop(0)
    if isinstance(ty, (types.EnumMember, types.IntEnumMember)):
        return rebuild(context, builder, ty.dtype, params)
    if isinstance(ty, types.Complex):
        cplx = context.make_complex(builder, ty)
        cplx.real = params.pop(0)
        cplx.imag = params.pop(0)
        return cplx._getvalue()
    if isinstance(ty, types.BaseTuple):
        vals = [rebuild(context, builder, t, params) for t in ty.types]
        return context.make_tuple(builder, ty, vals)
    if isinstance(ty, types.Omitted):
        return context.get_dummy_value()
    if leaves(ty):
        # (a type passed by value has a rebuild above: a missing one would shift every later
        # parameter onto the wrong value)
        raise TypeError(f"{ty}: its kernel parameters have no rebuild")
    return cgutils.get_null_value(context.get_value_type(ty))


_ITEMSIZES = {}


def _itemsize(context, dtype):
    """Bytes of one element of ``dtype`` in device memory (llvmlite parses a module to size a
    type, a fraction of a millisecond each time: remembered per type)."""
    size = _ITEMSIZES.get(dtype)
    if size is None:
        size = _ITEMSIZES[dtype] = context.get_abi_sizeof(context.get_data_type(dtype))
    return size


def _pack(builder, values):
    """An LLVM array of the i64 ``values``; empty for a 0-d array."""
    if not values:
        return ir.Constant(ir.ArrayType(ir.IntType(64), 0), [])
    return cgutils.pack_array(builder, values)


def _contiguous_strides(builder, shape, itemsize, layout):
    """Byte strides of a contiguous array of ``shape``: row-major for 'C', column-major for 'F'."""
    i64 = ir.IntType(64)
    strides = [None] * len(shape)
    acc = ir.Constant(i64, itemsize)
    axes = range(len(shape) - 1, -1, -1) if layout == "C" else range(len(shape))
    for ax in axes:
        strides[ax] = acc
        acc = builder.mul(acc, shape[ax])
    return strides
