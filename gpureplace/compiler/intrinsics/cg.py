"""Cooperative groups: ``cuda.cg.this_grid()`` and ``GridGroup.sync()``, a barrier across every
thread of the grid (numba-cuda's API).

    g = cuda.cg.this_grid()
    ...                     # phase 1: every block writes
    g.sync()
    ...                     # phase 2: every block reads what all wrote

The barrier is a counter in global memory, ``__gpureplace_grid_barrier`` (one per loaded module,
defined by the kernel's wrapper when its call graph syncs the grid): one thread per block adds to
it, block (0, 0, 0) so much that the top bit flips once every block has arrived, and each waits for
that flip (the sense-reversal scheme CUDA's own grid sync uses).  It needs every block resident at
once, so kernels that use it are launched with ``cuLaunchCooperativeKernel``, which refuses grids
that do not fit (runtime/launch.py says so by name).
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.datamodel import models, register_default
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import AttributeTemplate, ConcreteTemplate, Registry, signature

from .indexing import read_sreg
from .stubs import Namespace, Stub, register_namespace

__all__ = ["cg"]

typing = Registry()
lowering = LoweringRegistry()

#: the global counter a grid barrier uses (compiler/pipeline.py defines it in the kernel module)
BARRIER = "__gpureplace_grid_barrier"

this_grid = Stub("this_grid", "this_grid(): the group of every thread of the grid; its sync() "
                              "is a barrier across all blocks (the kernel is then launched "
                              "cooperatively: the whole grid must fit on the GPU at once)",
                 namespace="cuda.cg")
cg = Namespace("cg", this_grid=this_grid)
register_namespace(typing, cg)


class GridGroupType(types.Type):
    def __init__(self):
        super().__init__(name="GridGroup")


grid_group = GridGroupType()
register_default(GridGroupType)(models.OpaqueModel)


class _ThisGrid(ConcreteTemplate):
    key = this_grid
    cases = [signature(grid_group)]


typing.register_global(this_grid, types.Function(_ThisGrid))


class _GridSync(ConcreteTemplate):
    key = "GridGroup.sync"
    cases = [signature(types.none, recvr=grid_group)]


@typing.register_attr
class _GridGroupAttrs(AttributeTemplate):
    key = GridGroupType

    def resolve_sync(self, mod):
        return types.BoundFunction(_GridSync, grid_group)


@lowering.lower(this_grid)
def _lower_this_grid(context, builder, sig, args):
    return context.get_constant_null(grid_group)


def barrier_global(module):
    """The counter, declared in ``module`` (defined once per kernel by the wrapper)."""
    gv = module.globals.get(BARRIER)
    if gv is None:
        gv = ir.GlobalVariable(module, ir.IntType(32), BARRIER, addrspace=1)
        gv.linkage = "external"
        gv.align = 4
    return gv


def _call(builder, name, restype, argtypes, args):
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(restype, argtypes), name)
    return builder.call(fn, args)


@lowering.lower("GridGroup.sync", grid_group)
def _lower_grid_sync(context, builder, sig, args):
    i32 = ir.IntType(32)
    bar = barrier_global(builder.module)
    _call(builder, "llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [i32], [i32(0)])
    tids = [read_sreg(builder, f"tid.{a}") for a in "xyz"]
    ctaids = [read_sreg(builder, f"ctaid.{a}") for a in "xyz"]
    first_thread = builder.icmp_unsigned("==", builder.or_(builder.or_(tids[0], tids[1]),
                                                           tids[2]), i32(0))
    with builder.if_then(first_thread):
        nx, ny, nz = (read_sreg(builder, f"nctaid.{a}") for a in "xyz")
        blocks = builder.mul(builder.mul(nx, ny), nz)
        first_block = builder.icmp_unsigned(
            "==", builder.or_(builder.or_(ctaids[0], ctaids[1]), ctaids[2]), i32(0))
        # block 0 adds 2**31 - (blocks - 1), the others 1: the sum flips the top bit once all
        # have arrived and leaves the low bits as they were, so the counter never needs a reset
        inc = builder.select(first_block,
                             builder.sub(i32(0x80000000), builder.sub(blocks, i32(1))), i32(1))
        _call(builder, "llvm.nvvm.membar.gl", ir.VoidType(), [], [])
        old = builder.atomic_rmw("add", bar, inc, "monotonic")
        spin = builder.append_basic_block("grid_sync_wait")
        done = builder.append_basic_block("grid_sync_done")
        builder.branch(spin)
        builder.position_at_end(spin)
        cur = builder.load_atomic(bar, "monotonic", 4)
        flipped = builder.icmp_unsigned("!=", builder.and_(builder.xor(old, cur),
                                                           i32(0x80000000)), i32(0))
        builder.cbranch(flipped, done, spin)
        builder.position_at_end(done)
        _call(builder, "llvm.nvvm.membar.gl", ir.VoidType(), [], [])
    _call(builder, "llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [i32], [i32(0)])
    return context.get_dummy_value()
