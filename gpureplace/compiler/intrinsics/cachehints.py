"""Loads and stores with a cache policy: ``cuda.ldca``, ``ldcg``, ``ldcs``, ``ldlu``, ``ldcv`` and
``cuda.stcg``, ``stcs``, ``stwb``, ``stwt`` (numba-cuda's names, PTX's cache operators).

    v = cuda.ldcs(x, i)          # ld.global.cs: streaming, likely read once
    cuda.stcs(out, i, v)         # st.global.cs

``array`` is a device array (indexed by an integer or a tuple of them, as ``array[index]``) or a
``CPointer`` (an integer offset); the element is any integer or float type.  The access is one
``ld.global.<op>.b<bits>`` / ``st.global.<op>.b<bits>`` of inline PTX on the element's address
(array indices are not bounds-checked, as array accesses are not).
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import CallableTemplate, Registry, signature

from .stubs import Stub

LOADS = ("ca", "cg", "cs", "lu", "cv")
STORES = ("cg", "cs", "wb", "wt")

__all__ = [f"ld{op}" for op in LOADS] + [f"st{op}" for op in STORES]

typing = Registry()
lowering = LoweringRegistry()

_WHAT = {"ca": "cache at all levels", "cg": "cache in L2, not L1",
         "cs": "streaming: likely accessed once", "lu": "last use",
         "cv": "volatile: fetch again, cache nothing", "wb": "write back at all levels",
         "wt": "write through to system memory"}

_STUBS = {}
for _op in LOADS:
    _STUBS[f"ld{_op}"] = Stub(f"ld{_op}", f"ld{_op}(array, index): array[index] loaded with PTX's "
                                          f".{_op} cache operator ({_WHAT[_op]})")
for _op in STORES:
    _STUBS[f"st{_op}"] = Stub(f"st{_op}", f"st{_op}(array, index, value): array[index] = value, "
                                          f"stored with PTX's .{_op} cache operator "
                                          f"({_WHAT[_op]})")
globals().update(_STUBS)


def _element(what, array):
    if isinstance(array, types.Array):
        dtype = array.dtype
    elif isinstance(array, types.CPointer):
        dtype = array.dtype
    else:
        raise TypingError(f"cuda.{what}: the first argument must be a device array or a "
                          f"pointer, got {array}")
    if not isinstance(dtype, (types.Integer, types.Float)) or dtype.bitwidth not in (8, 16, 32,
                                                                                     64):
        raise TypingError(f"cuda.{what}: {what} requires array of integer or float type: "
                          f"elements of {dtype} have no cache-hinted access (integers and floats "
                          f"of 8 to 64 bits do)")
    return dtype


def _index_ok(array, index):
    if isinstance(array, types.CPointer):
        return isinstance(index, types.Integer)
    if isinstance(index, types.Integer):
        return array.ndim == 1
    return isinstance(index, types.BaseTuple) and len(index) == array.ndim and all(
        isinstance(t, types.Integer) for t in index)


def _index_problem(array, index):
    """What is wrong with an index ``_index_ok`` refused, in numba-cuda's words."""
    items = tuple(index) if isinstance(index, types.BaseTuple) else (index,)
    bad = next((t for t in items if not isinstance(t, types.Integer)), None)
    if bad is not None:
        return f"{bad} is not a valid index"
    if isinstance(array, types.CPointer):
        return "a pointer takes one integer offset"
    if isinstance(index, types.Integer):
        return f"Expected {array.ndim} indices, got a scalar"
    return f"Expected {array.ndim} indices, got {len(items)}"


def _template(name, store):
    stub = _STUBS[name]

    class _Template(CallableTemplate):
        key = stub

        def generic(self):
            def typer(array, index, value=None):
                dtype = _element(name, array)
                if not _index_ok(array, index):
                    raise TypingError(f"cuda.{name}: {_index_problem(array, index)}: index "
                                      f"{index} does not address one element of {array} (an "
                                      f"integer, or a tuple of one integer per dimension)")
                if store:
                    if value is None:
                        raise TypingError(f"cuda.{name}(array, index, value) needs the value")
                    return signature(types.none, array, index, dtype)
                if value is not None:
                    raise TypingError(f"cuda.{name}(array, index) takes no value")
                return signature(dtype, array, index)
            return typer

    _Template.__name__ = f"_{name}_template"
    return _Template


def _address(context, builder, arrty, arr, indty, index):
    if isinstance(arrty, types.CPointer):
        return builder.gep(arr, [index])
    ary = context.make_array(arrty)(context, builder, arr)
    if isinstance(indty, types.BaseTuple):
        indices = cgutils.unpack_tuple(builder, index, len(indty))
        itys = indty.types
    else:
        indices, itys = [index], [indty]
    indices = [context.cast(builder, i, t, types.intp) for i, t in zip(indices, itys)]
    return cgutils.get_item_pointer(context, builder, arrty, ary, indices, wraparound=False)


def _register(name, op, store):
    typing.register_global(_STUBS[name], types.Function(_template(name, store)))
    width = {8: "b8", 16: "b16", 32: "b32", 64: "b64"}
    reg = {8: "h", 16: "h", 32: "r", 64: "l"}

    def lower(context, builder, sig, args):
        arrty, indty = sig.args[0], sig.args[1]
        dtype = arrty.dtype
        ptr = _address(context, builder, arrty, args[0], indty, args[1])
        bits = dtype.bitwidth
        ity = ir.IntType(bits)
        # 8-bit values travel in a 16-bit register, as PTX has no 8-bit register class
        rty = ir.IntType(16) if bits == 8 else ity
        gptr = builder.bitcast(ptr, ity.as_pointer())      # a generic address of global memory
        if store:
            value = context.cast(builder, args[2], sig.args[2], dtype)
            raw = builder.bitcast(value, ity) if isinstance(dtype, types.Float) else value
            raw = builder.zext(raw, rty) if bits == 8 else raw
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [ity.as_pointer(), rty]),
                               f"st.global.{op}.{width[bits]} [$0], $1;",
                               f"l,{reg[bits]},~{{memory}}", side_effect=True)
            builder.call(asm, [gptr, raw])
            return context.get_dummy_value()
        asm = ir.InlineAsm(ir.FunctionType(rty, [ity.as_pointer()]),
                           f"ld.global.{op}.{width[bits]} $0, [$1];", f"={reg[bits]},l",
                           side_effect=True)
        raw = builder.call(asm, [gptr])
        raw = builder.trunc(raw, ity) if bits == 8 else raw
        return builder.bitcast(raw, context.get_value_type(dtype)) \
            if isinstance(dtype, types.Float) else raw

    stub = _STUBS[name]
    for arr in (types.Array, types.CPointer):
        for ind in (types.Integer, types.BaseTuple):
            if store:
                lowering.lower(stub, arr, ind, types.Any)(lower)
            else:
                lowering.lower(stub, arr, ind)(lower)


for _op in LOADS:
    _register(f"ld{_op}", _op, store=False)
for _op in STORES:
    _register(f"st{_op}", _op, store=True)
