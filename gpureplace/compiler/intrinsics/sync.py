"""Barriers and memory fences: syncthreads (and its count/and/or reductions), syncwarp, threadfence.

LLVM 22 dropped ``llvm.nvvm.barrier0*``; we emit the intrinsics that replaced them
(``llvm.nvvm.barrier.cta.sync.aligned.all`` -> ``bar.sync 0``,
``llvm.nvvm.barrier.cta.red.{popc,and,or}.aligned.all`` -> ``bar.red.*``).  The fences keep
``llvm.nvvm.membar.{cta,gl,sys}`` (``membar.*``, which ptxas treats as ``fence.sc.*``).
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.errors import TypingError
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import CallableTemplate, ConcreteTemplate, Registry, signature

from .requirements import require
from .stubs import Stub

__all__ = ["syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp",
           "threadfence", "threadfence_block", "threadfence_system", "nanosleep"]

typing = Registry()
lowering = LoweringRegistry()

syncthreads = Stub("syncthreads", "syncthreads(): wait until every thread of the block reaches "
                                  "this point; shared and global memory writes made before it "
                                  "are visible to the whole block after it")
syncthreads_count = Stub("syncthreads_count", "syncthreads_count(predicate): a syncthreads() "
                                              "that returns how many threads of the block passed a "
                                              "true predicate (int32)")
syncthreads_and = Stub("syncthreads_and", "syncthreads_and(predicate): a syncthreads() that "
                                          "returns 1 if the predicate is true in every thread of "
                                          "the block, else 0 (int32)")
syncthreads_or = Stub("syncthreads_or", "syncthreads_or(predicate): a syncthreads() that returns "
                                        "1 if the predicate is true in any thread of the block, "
                                        "else 0 (int32)")
syncwarp = Stub("syncwarp", "syncwarp(mask=0xffffffff): wait until every thread of the warp named "
                            "in mask reaches this point")
threadfence = Stub("threadfence", "threadfence(): order this thread's memory accesses as seen by "
                                  "every thread of the device (membar.gl)")
threadfence_block = Stub("threadfence_block", "threadfence_block(): order this thread's memory "
                                              "accesses as seen by its block (membar.cta)")
threadfence_system = Stub("threadfence_system", "threadfence_system(): order this thread's memory "
                                                "accesses as seen by the device and the host "
                                                "(membar.sys)")

nanosleep = Stub("nanosleep", "nanosleep(ns): suspend the thread for about ns nanoseconds (up to "
                              "1 ms; the hardware may wake it earlier or later), e.g. to back off "
                              "in a spin loop")

_I1 = ir.IntType(1)
_I32 = ir.IntType(32)


def _call(builder, name, restype, argtypes, args):
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(restype, argtypes), name)
    return builder.call(fn, args)


# ---------------------------------------------------------------------------------------------
# syncthreads


class _SyncthreadsTemplate(ConcreteTemplate):
    key = syncthreads
    cases = [signature(types.none)]


typing.register_global(syncthreads, types.Function(_SyncthreadsTemplate))


@lowering.lower(syncthreads)
def _lower_syncthreads(context, builder, sig, args):
    _call(builder, "llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [_I32], [_I32(0)])
    return context.get_dummy_value()


def _predicate_template(stub):
    fname = stub.__name__

    class _Template(CallableTemplate):
        key = stub

        def generic(self):
            def typer(predicate):
                if isinstance(predicate, (types.Integer, types.Boolean)):
                    return signature(types.int32, predicate)
                raise TypingError(f"cuda.{fname}(predicate): the predicate must be an integer "
                                  f"or a boolean, got {predicate}")
            return typer

    _Template.__name__ = f"_{fname}_template"
    return _Template


def _truth(builder, value):
    """The predicate as an i1 (nonzero is true); a Numba boolean value already is one."""
    if value.type == _I1:
        return value
    return builder.icmp_unsigned("!=", value, ir.Constant(value.type, 0))


def _register_predicate_barrier(stub, reduction):
    typing.register_global(stub, types.Function(_predicate_template(stub)))
    name = f"llvm.nvvm.barrier.cta.red.{reduction}.aligned.all"
    restype = _I32 if reduction == "popc" else _I1

    def lower(context, builder, sig, args):
        pred = _truth(builder, args[0])
        res = _call(builder, name, restype, [_I32, _I1], [_I32(0), pred])
        return res if restype is _I32 else builder.zext(res, _I32)

    lowering.lower(stub, types.Integer)(lower)
    lowering.lower(stub, types.Boolean)(lower)


_register_predicate_barrier(syncthreads_count, "popc")
_register_predicate_barrier(syncthreads_and, "and")
_register_predicate_barrier(syncthreads_or, "or")


# ---------------------------------------------------------------------------------------------
# syncwarp


class _SyncwarpTemplate(CallableTemplate):
    key = syncwarp

    def generic(self):
        def typer(mask=None):
            if mask is None or isinstance(mask, types.Omitted):
                return signature(types.none)
            if isinstance(mask, types.Integer):
                return signature(types.none, mask)
            raise TypingError(f"cuda.syncwarp(mask): the mask must be an integer (a bit per lane "
                              f"of the warp), got {mask}")
        return typer


typing.register_global(syncwarp, types.Function(_SyncwarpTemplate))


def _warp_sync(builder, mask):
    _call(builder, "llvm.nvvm.bar.warp.sync", ir.VoidType(), [_I32], [mask])


@lowering.lower(syncwarp)
def _lower_syncwarp_all(context, builder, sig, args):
    _warp_sync(builder, _I32(0xFFFFFFFF))
    return context.get_dummy_value()


@lowering.lower(syncwarp, types.Integer)
def _lower_syncwarp(context, builder, sig, args):
    (mask,) = args
    width = mask.type.width
    if width > 32:
        mask = builder.trunc(mask, _I32)
    elif width < 32:
        mask = builder.zext(mask, _I32)
    _warp_sync(builder, mask)
    return context.get_dummy_value()


# ---------------------------------------------------------------------------------------------
# Memory fences

_FENCES = ((threadfence, "gl"), (threadfence_block, "cta"), (threadfence_system, "sys"))

for _stub, _scope in _FENCES:
    class _FenceTemplate(ConcreteTemplate):
        key = _stub
        cases = [signature(types.none)]

    typing.register_global(_stub, types.Function(_FenceTemplate))

    def _lower_fence(context, builder, sig, args, _name=f"llvm.nvvm.membar.{_scope}"):
        _call(builder, _name, ir.VoidType(), [], [])
        return context.get_dummy_value()

    lowering.lower(_stub)(_lower_fence)

del _stub, _scope


# ---------------------------------------------------------------------------------------------
# nanosleep (PTX ``nanosleep.u32``, sm_70 and newer)

class _NanosleepTemplate(CallableTemplate):
    key = nanosleep

    def generic(self):
        def typer(ns):
            if not isinstance(ns, types.Integer):
                raise TypingError(f"cuda.nanosleep(ns): ns must be an integer number of "
                                  f"nanoseconds, got {ns}")
            return signature(types.none, types.uint32)
        return typer


typing.register_global(nanosleep, types.Function(_NanosleepTemplate))


@lowering.lower(nanosleep, types.uint32)
def _lower_nanosleep(context, builder, sig, args):
    # inline PTX that ptxas (and the driver, at load) refuses below sm_70 or before PTX ISA 6.3
    require("cuda.nanosleep()", sm=70, ptx=63,
            instead="below sm_70, leave the call out (spin without the back-off)")
    fn = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [_I32]), "nanosleep.u32 $0;", "r",
                      side_effect=True)
    builder.call(fn, [args[0]])
    return context.get_dummy_value()
