"""Device ``print(...)``: lowered to CUDA's ``vprintf(format, args)``.

Numba's untyped passes turn ``print(...)`` into an ``ir.Print`` node, typed through the builtin
``print`` (which accepts any argument); its lowering asks the target for ``print`` with a
``VarArg`` signature, which lands here.  The format string is built at compile time, as numba-cuda
does: integers print as ``%lld`` / ``%llu`` (widened to 64 bits), floats as ``%f`` (promoted to
double, as C varargs require), string constants and other literals are written into the format
itself (``%`` escaped), booleans as ``True`` / ``False``, ``None`` as ``None``, tuples and complex
numbers in Python's notation; items are separated by spaces and the line ends in ``\\n``.
The values are packed into a local struct whose address is ``vprintf``'s second argument.

Output goes to the process's stdout when the device printf buffer is flushed (at
synchronisation).  Nothing is exported: ``print`` is Python's builtin.
"""

from __future__ import annotations

import hashlib

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import Registry

from . import usage
from .stubs import IntrinsicArgumentError

__all__ = []

typing = Registry()          # print() is typed by Numba's builtin template
lowering = LoweringRegistry()

#: CUDA's printf accepts at most 32 arguments after the format.
MAX_VALUES = 32
#: LLVM address space of constant memory (where format strings live).
_CONSTANT_ADDRSPACE = 4
_GENERIC_PTR = ir.PointerType()


def string_constant(builder, text):
    """A generic pointer to a NUL-terminated constant copy of ``text`` (one per module)."""
    mod = builder.module
    data = text.encode("utf-8") + b"\x00"
    name = string_symbol(text)
    try:
        gv = mod.get_global(name)
    except KeyError:
        init = cgutils.make_bytearray(data)
        gv = cgutils.add_global_variable(mod, init.type, name, addrspace=_CONSTANT_ADDRSPACE)
        gv.linkage = "internal"
        gv.global_constant = True
        gv.initializer = init
    return builder.addrspacecast(gv, _GENERIC_PTR)


def string_symbol(text):
    """The name of the constant holding ``text`` (one per distinct text)."""
    return "__gpureplace_str_" + hashlib.sha1(text.encode("utf-8") + b"\x00").hexdigest()[:16]


def declare_vprintf(module):
    fnty = ir.FunctionType(ir.IntType(32), [_GENERIC_PTR, _GENERIC_PTR])
    return cgutils.get_or_insert_function(module, fnty, "vprintf")


def _escape(text):
    return text.replace("%", "%%")


def format_item(context, builder, ty, val):
    """(format piece, [values]) printing one value of Numba type ``ty``."""
    if isinstance(ty, types.StringLiteral):
        return _escape(ty.literal_value), []
    if isinstance(ty, types.BooleanLiteral):
        return str(bool(ty.literal_value)), []
    if isinstance(ty, types.IntegerLiteral):
        return str(int(ty.literal_value)), []
    if isinstance(ty, types.Literal) and isinstance(ty.literal_value, (str, int, float)):
        return _escape(str(ty.literal_value)), []
    if isinstance(ty, (types.NoneType, types.Omitted)):
        return "None", []
    if isinstance(ty, types.Boolean):
        text = builder.select(val, string_constant(builder, "True"),
                              string_constant(builder, "False"))
        return "%s", [text]
    if isinstance(ty, types.Integer):
        if ty.signed:
            return "%lld", [context.cast(builder, val, ty, types.int64)]
        return "%llu", [context.cast(builder, val, ty, types.uint64)]
    if isinstance(ty, types.Float):
        return "%f", [_to_double(builder, val)]
    if isinstance(ty, types.Complex):
        z = context.make_complex(builder, ty, value=val)
        return "(%f%+fj)", [_to_double(builder, z.real), _to_double(builder, z.imag)]
    if isinstance(ty, types.BaseTuple):
        pieces, values = [], []
        for i, ety in enumerate(ty.types):
            piece, vals = format_item(context, builder, ety, builder.extract_value(val, i))
            pieces.append(piece)
            values.extend(vals)
        inner = ", ".join(pieces) + ("," if len(pieces) == 1 else "")
        return f"({inner})", values
    if isinstance(ty, types.EnumMember):
        return format_item(context, builder, ty.dtype, val)
    from .indexing import SREG, Dim3Register, read_sreg
    if isinstance(ty, Dim3Register):           # print(cuda.threadIdx): (x, y, z)
        regs = [context.cast(builder, read_sreg(builder, f"{SREG[ty.which]}.{axis}"),
                             types.uint32, types.int64) for axis in "xyz"]
        return "(%lld, %lld, %lld)", regs
    raise IntrinsicArgumentError(
        f"print() in device code cannot print a value of type {ty}; it prints numbers, "
        f"booleans, None, string constants and tuples of these")


def _to_double(builder, val):
    if isinstance(val.type, ir.DoubleType):
        return val
    return builder.fpext(val, ir.DoubleType())


@lowering.lower(print, types.VarArg(types.Any))
def lower_print(context, builder, sig, args):
    pieces, values = [], []
    for ty, val in zip(sig.args, args):
        piece, vals = format_item(context, builder, ty, val)
        pieces.append(piece)
        values.extend(vals)
    if len(values) > MAX_VALUES:
        raise IntrinsicArgumentError(
            f"print() in device code can print at most {MAX_VALUES} values (CUDA's printf "
            f"limit), got {len(values)}; split it into several print() calls")
    text = " ".join(pieces) + "\n"
    fmt = string_constant(builder, text)
    # format strings live in constant memory, whose 64 KiB a module's constant arrays share
    # (validate.check_linked adds them up)
    usage.note(context, usage.CONST, "a print() format string", len(text.encode("utf-8")) + 1,
               string_symbol(text))
    if values:
        packed = cgutils.make_anonymous_struct(builder, values)
        argptr = cgutils.alloca_once_value(builder, packed)
        argptr = builder.bitcast(argptr, _GENERIC_PTR)
    else:
        argptr = ir.Constant(_GENERIC_PTR, None)
    builder.call(declare_vprintf(builder.module), [fmt, argptr])
    return context.get_dummy_value()
