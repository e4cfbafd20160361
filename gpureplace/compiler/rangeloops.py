"""``for j in range(start, stop, step)`` stepped as Python steps it, and said so to LLVM.

A range's values never leave ``[start, stop)`` (the iterator counts the values left), so the step
from one value to the next and the count's decrement cannot overflow.  Numba's iterator makes
both with plain adds, which LLVM must assume may wrap: in ``for j in range(t, n, 256)`` (a block
striding over a row, ``t`` a thread index) it then cannot tell that ``j`` stays non-negative,
and every ``a[j]`` keeps Python's negative-index correction (a compare, a select and an add of
the length: four 64-bit instructions a load; nvcc's PTX for the same C loop has none).  Here the
same iterator marks them ``nsw``.  Only the increment after the range's last value may exceed
int64 (``range(0, 2**63 - 1, 2**62)``); that value is stored but never read, as the count is 0
by then.

The count itself (``range_getiter``) is ``ceil(max(stop - start, 0) / |step|)``, made with a max
and an unsigned division and remainder where Numba's used signed ones that LLVM cannot bound:
``for r in range(ty, 12, 8)`` (a block loading a halo into shared memory) then runs at most twice
as far as LLVM can tell, and is not runtime-unrolled into a copied body and its remainder (the
5 x 5 convolution of bench/codegen.py: 568 SASS instructions -> 328, 39 registers -> 32).  The
span and ``|step|`` are unsigned numbers, since ``stop - start`` may exceed int64
(``range(-2**62, 2**62, 2**61)``, which a signed max counted as empty) and ``-step`` too
(``step = -2**63``); tests/compiler/test_host_semantics.py runs the compiled count on the CPU
against Python.  Unsigned ranges keep Numba's lowering.
"""

from __future__ import annotations

from numba.core import cgutils, ir, types
from numba.core.imputils import RefType, impl_ret_untracked, iternext_impl


def range_next(context, builder, sig, args, result):
    (it_type,) = sig.args
    it = context.make_helper(builder, it_type, value=args[0])
    count = builder.load(it.count)
    valid = builder.icmp_signed(">", count, count.type(0))
    result.set_valid(valid)
    with builder.if_then(valid, likely=True):
        value = builder.load(it.iter)
        result.yield_(value)
        builder.store(builder.sub(count, count.type(1), flags=["nsw"]), it.count)
        builder.store(builder.add(value, it.step, flags=["nsw"]), it.iter)


def range_getiter(context, builder, sig, args):
    """``iter(range(start, stop, step))``: the count of values, ``ceil(max(stop - start, 0) /
    step)`` (or with the signs turned for a negative step), in a form ScalarEvolution bounds:
    ``range(ty, 12, 8)``, ``ty`` a thread index, runs at most twice, so LLVM unrolls it fully
    and does not give it a runtime remainder (Numba's ``sdiv`` / ``srem`` count hid that)."""
    (state_type,) = sig.args
    iter_type = _ITER_OF[state_type]
    state = context.make_helper(builder, state_type, value=args[0])
    it = context.make_helper(builder, iter_type)
    start, stop, step = state.start, state.stop, state.step
    ity = start.type
    zero = ity(0)
    it.iter = cgutils.alloca_once_value(builder, start)
    it.stop, it.step = stop, step
    it.count = cgutils.alloca_once(builder, ity)
    with cgutils.if_unlikely(builder, builder.icmp_unsigned("==", step, zero)):
        context.call_conv.return_user_exc(builder, ValueError,
                                          ("range() arg 3 must not be zero",))
    # The span and |step| as unsigned numbers: stop - start may exceed int64 (range(-2**62,
    # 2**62, 2**61)), and -step too (step = -2**63), never uint64.  The span is
    # smax(start, stop) - start (smin for a negative step): 0 for an empty range, in a form
    # ScalarEvolution reads as a max.
    up = builder.icmp_signed(">", step, zero)
    high = builder.select(builder.icmp_signed(">", stop, start), stop, start)       # smax
    low = builder.select(builder.icmp_signed("<", stop, start), stop, start)        # smin
    span = builder.select(up, builder.sub(high, start, flags=["nuw"]),
                          builder.sub(start, low, flags=["nuw"]))
    stride = builder.select(up, step, builder.sub(zero, step))
    rest = builder.zext(builder.icmp_unsigned("!=", builder.urem(span, stride), zero), ity)
    count = builder.add(builder.udiv(span, stride), rest, flags=["nuw"])
    builder.store(count, it.count)
    return impl_ret_untracked(context, builder, iter_type, it._getvalue())


_ITER_OF = {types.range_state32_type: types.range_iter32_type,
            types.range_state64_type: types.range_iter64_type}
#: The getiter of each signed range type, as the lowering table holds it.
GETITERS = {state_type: range_getiter for state_type in _ITER_OF}

#: The iternext of each signed range iterator type, wrapped as Numba's lowering table holds it.
IMPLS = {it_type: iternext_impl(RefType.UNTRACKED)(range_next)
         for it_type in (types.range_iter32_type, types.range_iter64_type)}


#: {(operation, signature): implementation} that take precedence over Numba's in a target
#: context's lowering table (``target.prefer_lowerings``): signed ranges' getiter and iternext.
LOWERINGS = {**{("iternext", (ty,)): impl for ty, impl in IMPLS.items()},
             **{("getiter", (ty,)): impl for ty, impl in GETITERS.items()}}


def constant_trip_counts(func_ir, typemap):
    """The step counts of the ``for`` loops of ``func_ir`` over a ``range`` whose bounds are all
    compile-time constants (literals, or globals typed as literals): ``for k in range(TILE)``.
    The back end gives a kernel with a long one a larger unrolling budget (see
    ``backend.CONSTANT_LOOP_MAX_COUNT``)."""
    counts = []
    for block in func_ir.blocks.values():
        for expr in block.find_exprs(op="getiter"):
            try:
                made = func_ir.get_definition(expr.value)
                if not (isinstance(made, ir.Expr) and made.op == "call" and not made.kws):
                    continue
                fn = func_ir.get_definition(made.func)
            except (KeyError, AttributeError):    # several definitions, or none
                continue
            if not (isinstance(fn, (ir.Global, ir.FreeVar)) and fn.value is range):
                continue
            bounds = [typemap.get(arg.name) for arg in made.args]
            if bounds and all(isinstance(t, types.IntegerLiteral) for t in bounds):
                try:
                    counts.append(len(range(*(t.literal_value for t in bounds))))
                except (ValueError, OverflowError):  # range(0, 5, 0) fails at run time
                    continue
    return counts
