"""Thread indexing: threadIdx/blockIdx/blockDim/gridDim, grid, gridsize, laneid, warpsize."""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import (AbstractTemplate, AttributeTemplate, Registry,
                                         signature)

from .stubs import Dim3Stub, Stub

__all__ = ["threadIdx", "blockIdx", "blockDim", "gridDim", "grid", "gridsize", "laneid",
           "warpsize"]

typing = Registry()
lowering = LoweringRegistry()

threadIdx = Dim3Stub("threadIdx")
blockIdx = Dim3Stub("blockIdx")
blockDim = Dim3Stub("blockDim")
gridDim = Dim3Stub("gridDim")
grid = Stub("grid", "grid(ndim): absolute index of this thread in the grid (int64, or a tuple)")
gridsize = Stub("gridsize", "gridsize(ndim): number of threads in the grid along each axis")
laneid = Stub("laneid", "index of this thread within its warp (0..31)")
warpsize = Stub("warpsize", "threads per warp (32)")

SREG = {"threadIdx": "tid", "blockIdx": "ctaid", "blockDim": "ntid", "gridDim": "nctaid"}


def read_sreg(builder, name):
    """Read a PTX special register (``tid.x``, ``laneid``...) as i32."""
    mod = builder.module
    fnty = ir.FunctionType(ir.IntType(32), [])
    fn = cgutils.get_or_insert_function(mod, fnty, f"llvm.nvvm.read.ptx.sreg.{name}")
    return builder.call(fn, [])


class Dim3Register(types.Dummy):
    def __init__(self, which):
        self.which = which
        super().__init__(f"cuda.{which}")


for _stub in (threadIdx, blockIdx, blockDim, gridDim):
    _ty = Dim3Register(_stub.__name__)
    typing.register_global(_stub, _ty)

    @typing.register_attr
    class _Dim3Attrs(AttributeTemplate):
        key = _ty

        def generic_resolve(self, ty, attr):
            if attr in ("x", "y", "z"):
                return types.int32

    for _axis in "xyz":
        def _lower(context, builder, ty, value, _sreg=f"{SREG[_stub.__name__]}.{_axis}"):
            return read_sreg(builder, _sreg)
        lowering.lower_getattr(_ty, _axis)(_lower)


# ``laneid`` and ``warpsize`` are values, not calls: typed int32, and read where they are used
# (the target context asks ``VALUE_READERS`` before treating a global as a frozen constant).
typing.register_global(laneid, types.int32)
typing.register_global(warpsize, types.int32)
VALUE_READERS = {
    id(laneid): lambda builder: read_sreg(builder, "laneid"),
    id(warpsize): lambda builder: ir.Constant(ir.IntType(32), 32),
}


def _ndim_of(args, kws, fname):
    if kws or len(args) != 1:
        return None
    (arg,) = args
    if isinstance(arg, types.Integer) and not isinstance(arg, types.IntegerLiteral):
        from numba.core.errors import TypingError
        raise TypingError(f"cuda.{fname}(ndim): ndim must be a constant 1, 2 or 3 (a literal "
                          f"or a global constant), got a value of type {arg} known only at "
                          f"run time")
    if not isinstance(arg, types.IntegerLiteral):
        return None
    ndim = arg.literal_value
    if ndim not in (1, 2, 3):
        from numba.core.errors import TypingError
        raise TypingError(f"cuda.{fname}(ndim): ndim must be 1, 2 or 3, got {ndim}")
    return ndim


class _GridTemplate(AbstractTemplate):
    key = grid
    prefer_literal = True

    def generic(self, args, kws):
        ndim = _ndim_of(args, kws, "grid")
        if ndim is None:
            return None
        ret = types.int64 if ndim == 1 else types.UniTuple(types.int64, ndim)
        return signature(ret, args[0])


class _GridsizeTemplate(AbstractTemplate):
    key = gridsize
    prefer_literal = True

    def generic(self, args, kws):
        ndim = _ndim_of(args, kws, "gridsize")
        if ndim is None:
            return None
        ret = types.int64 if ndim == 1 else types.UniTuple(types.int64, ndim)
        return signature(ret, args[0])


typing.register_global(grid, types.Function(_GridTemplate))
typing.register_global(gridsize, types.Function(_GridsizeTemplate))


def _i64(builder, v):
    return builder.sext(v, ir.IntType(64)) if v.type.width < 64 else v


def _axes(ndim):
    return "xyz"[:ndim]


@lowering.lower(grid, types.IntegerLiteral)
def _lower_grid(context, builder, sig, args):
    ndim = sig.args[0].literal_value
    vals = []
    for ax in _axes(ndim):
        tid = _i64(builder, read_sreg(builder, f"tid.{ax}"))
        ntid = _i64(builder, read_sreg(builder, f"ntid.{ax}"))
        ctaid = _i64(builder, read_sreg(builder, f"ctaid.{ax}"))
        vals.append(builder.add(builder.mul(ntid, ctaid), tid))
    return vals[0] if ndim == 1 else context.make_tuple(builder, sig.return_type, vals)


@lowering.lower(gridsize, types.IntegerLiteral)
def _lower_gridsize(context, builder, sig, args):
    ndim = sig.args[0].literal_value
    vals = []
    for ax in _axes(ndim):
        ntid = _i64(builder, read_sreg(builder, f"ntid.{ax}"))
        nctaid = _i64(builder, read_sreg(builder, f"nctaid.{ax}"))
        vals.append(builder.mul(ntid, nctaid))
    return vals[0] if ndim == 1 else context.make_tuple(builder, sig.return_type, vals)
