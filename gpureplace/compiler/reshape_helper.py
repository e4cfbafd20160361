"""The device's ``numba_attempt_nocopy_reshape``: Numba lowers ``array.reshape`` to a call of this
C helper from its runtime, which the GPU does not have.  This is the same algorithm (NumPy's
no-copy reshape: new strides for a view, or 0 when the data would have to be copied) as a Python
function that gpureplace compiles for the device; ``compiler/pipeline.py`` links it, behind a C-ABI
entry of that name, into kernels whose code calls it."""

from __future__ import annotations

import numpy as np
from numba.core import types

from .intrinsics.memory import local

SYMBOL = "numba_attempt_nocopy_reshape"
MAX_DIMS = 32
ARGTYPES = (types.intp, types.CPointer(types.intp), types.CPointer(types.intp), types.intp,
            types.CPointer(types.intp), types.CPointer(types.intp), types.intp, types.int32)


def attempt_nocopy_reshape(nd, dims, strides, newnd, newdims, newstrides, itemsize, is_f_order):
    olddims = local.array(MAX_DIMS, np.int64)
    oldstrides = local.array(MAX_DIMS, np.int64)
    # axes of length 1 do not constrain the layout
    oldnd = 0
    for oi in range(nd):
        if dims[oi] != 1:
            olddims[oldnd] = dims[oi]
            oldstrides[oldnd] = strides[oi]
            oldnd += 1
    new_size = 1
    for ni in range(newnd):
        new_size *= newdims[ni]
    old_size = 1
    for oi in range(oldnd):
        old_size *= olddims[oi]
    if new_size != old_size or new_size == 0:
        return np.int32(0)
    # walk both shapes, matching groups of axes with equal products
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < newnd and oi < oldnd:
        np_ = newdims[ni]
        op = olddims[oi]
        while np_ != op:
            if np_ < op:
                np_ *= newdims[nj]
                nj += 1
            else:
                op *= olddims[oj]
                oj += 1
        # the old axes of the group must be contiguous with each other
        for ok in range(oi, oj - 1):
            if is_f_order:
                if oldstrides[ok + 1] != olddims[ok] * oldstrides[ok]:
                    return np.int32(0)
            elif oldstrides[ok] != olddims[ok + 1] * oldstrides[ok + 1]:
                return np.int32(0)
        # the new axes of the group get strides from the group's innermost old stride
        if is_f_order:
            newstrides[ni] = oldstrides[oi]
            for nk in range(ni + 1, nj):
                newstrides[nk] = newstrides[nk - 1] * newdims[nk - 1]
        else:
            newstrides[nj - 1] = oldstrides[oj - 1]
            nk = nj - 1
            while nk > ni:
                newstrides[nk - 1] = newstrides[nk] * newdims[nk]
                nk -= 1
        ni = nj
        nj += 1
        oi = oj
        oj += 1
    # trailing axes of length 1
    if ni >= 1:
        last = newstrides[ni - 1]
        if is_f_order:
            last *= newdims[ni - 1]
    else:
        last = itemsize
    for nk in range(ni, newnd):
        newstrides[nk] = last
    return np.int32(1)


def lower_reshape(context, builder, sig, args):
    """``array.reshape(shape)`` of a C-contiguous array: a view whose strides follow from the new
    shape alone, with no call of the no-copy helper above.  The helper indexes the old shape and
    strides by run-time positions, which keeps them, and its two 32-entry arrays, in the thread's
    local memory (a 544-byte stack for a 1-D to 2-D reshape); here every index is a constant, so
    the shape and strides stay in registers.  Other layouts go to Numba's lowering (and the
    helper).  A shape whose size differs raises as NumPy's (Numba's ``normalize_reshape_value``,
    which also resolves a ``-1``)."""
    from llvmlite import ir
    from numba.core import cgutils, typing
    from numba.core.imputils import impl_ret_borrowed
    from numba.np import arrayobj

    aryty, shapety = sig.args
    if aryty.layout != "C" or not isinstance(shapety, types.UniTuple):
        return arrayobj.array_reshape(context, builder, sig, args)
    ll_intp = context.get_value_type(types.intp)
    count = shapety.count
    ary = arrayobj.make_array(aryty)(context, builder, args[0])
    newshape = cgutils.alloca_once(builder, ir.ArrayType(ll_intp, count))
    builder.store(args[1], newshape)
    shape_ary_ty = types.Array(shapety.dtype, 1, "C")
    shape_ary = arrayobj.make_array(shape_ary_ty)(context, builder)
    intp_size = context.get_constant(types.intp, context.get_abi_sizeof(ll_intp))
    arrayobj.populate_array(shape_ary, data=builder.bitcast(newshape, ll_intp.as_pointer()),
                            shape=[context.get_constant(types.intp, count)],
                            strides=[intp_size], itemsize=intp_size, meminfo=None)
    context.compile_internal(builder, arrayobj.normalize_reshape_value,
                             typing.signature(types.void, types.uintp, shape_ary_ty),
                             [ary.nitems, shape_ary._getvalue()])
    dims = cgutils.unpack_tuple(builder, builder.load(newshape), count)
    strides = [None] * count
    step = ary.itemsize
    for k in reversed(range(count)):
        strides[k] = step
        step = builder.mul(step, dims[k])
    out = arrayobj.make_array(sig.return_type)(context, builder)
    arrayobj.populate_array(out, data=ary.data, shape=dims, strides=strides,
                            itemsize=ary.itemsize, meminfo=ary.meminfo, parent=ary.parent)
    return impl_ret_borrowed(context, builder, sig.return_type, out._getvalue())


def lower_reshape_varargs(context, builder, sig, args):
    """``array.reshape(n, m)``: the sizes as one tuple, then as :func:`lower_reshape`."""
    from numba.np.arrayobj import vararg_to_tuple
    new_sig, new_args = vararg_to_tuple(context, builder, sig, args)
    return lower_reshape(context, builder, new_sig, new_args)


#: ``array.reshape``'s lowering, which takes precedence over Numba's in a target context's
#: table (``target.prefer_lowerings``): {(operation, signature): implementation}
LOWERINGS = {("array.reshape", (types.Array, types.BaseTuple)): lower_reshape,
             ("array.reshape", (types.Array, types.VarArg(types.Any))): lower_reshape_varargs}
