"""``for j in range(start, stop, step)`` stepped as Python steps it, and said so to LLVM.

A range's values never leave ``[start, stop)`` (the iterator counts the values left), so the step
from one value to the next and the count's decrement cannot overflow.  Numba's iterator makes
both with plain adds, which LLVM must assume may wrap: in ``for j in range(t, n, 256)`` (a block
striding over a row, ``t`` a thread index) it then cannot tell that ``j`` stays non-negative,
and every ``a[j]`` keeps Python's negative-index correction (a compare, a select and an add of
the length: four 64-bit instructions a load; nvcc's PTX for the same C loop has none).  Here the
same iterator marks them ``nsw``.  Only the increment after the range's last value may exceed
int64 (``range(0, 2**63 - 1, 2**62)``); that value is stored but never read, as the count is 0
by then.  Unsigned ranges keep Numba's lowering.
"""

from __future__ import annotations

from numba.core import types
from numba.core.imputils import RefType, iternext_impl


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


#: The iternext of each signed range iterator type, wrapped as Numba's lowering table holds it.
IMPLS = {it_type: iternext_impl(RefType.UNTRACKED)(range_next)
         for it_type in (types.range_iter32_type, types.range_iter64_type)}


def take_precedence(defns):
    """Make these the iternext of signed ranges in a target context's lowering table
    (``defns``): of two implementations of one signature the later wins, and Numba's builtin
    registry, where its own range iterator is, is loaded after a context's own registries at
    every refresh."""
    table = defns["iternext"]
    for it_type, impl in IMPLS.items():
        last = next((value for sig, value in reversed(table.versions) if sig == (it_type,)),
                    None)
        if last is not impl:
            table.append(impl, (it_type,))
