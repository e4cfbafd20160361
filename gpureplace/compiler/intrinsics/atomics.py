"""Atomic operations on array elements: ``cuda.atomic.add(ary, idx, val)`` and friends.

Each operation returns the value the element held before the update, as numba-cuda does.  The
element address comes from Numba's array helpers (strides honoured, negative indices wrap), and
the update is an LLVM ``atomicrmw`` / ``cmpxchg`` at device scope (CUDA's ``atomicAdd`` scope),
which the NVPTX back end selects as ``atom``/``red`` instructions.  Float max/min have no single
instruction with NumPy's NaN rules, so they are compare-and-swap loops.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import AbstractTemplate, Registry, signature

from . import usage
from .stubs import IntrinsicArgumentError, Namespace, Stub, register_namespace

__all__ = ["atomic"]

typing = Registry()
lowering = LoweringRegistry()

#: LLVM memory ordering of every atomic here: relaxed, at GPU (device) scope like CUDA's atomics.
_ORDER = 'syncscope("device") monotonic'

_INTS = (types.int32, types.uint32, types.int64, types.uint64)
_FLOATS = (types.float32, types.float64)
_ALL = _INTS + _FLOATS
_UNSIGNED = (types.uint32, types.uint64)

# name -> (supported dtypes, doc)
_OPS = {
    "add": (_ALL, "add(ary, idx, val): atomic ary[idx] += val; returns the old value"),
    "sub": (_ALL, "sub(ary, idx, val): atomic ary[idx] -= val; returns the old value"),
    "max": (_ALL, "max(ary, idx, val): atomic ary[idx] = max(ary[idx], val); a NaN on either "
                  "side leaves ary[idx] unchanged; returns the old value"),
    "min": (_ALL, "min(ary, idx, val): atomic ary[idx] = min(ary[idx], val); a NaN on either "
                  "side leaves ary[idx] unchanged; returns the old value"),
    "nanmax": (_ALL, "nanmax(ary, idx, val): like max, but NaN counts as missing: "
                     "nanmax(NaN, v) == v, nanmax(v, NaN) == v; returns the old value"),
    "nanmin": (_ALL, "nanmin(ary, idx, val): like min, but NaN counts as missing; "
                     "returns the old value"),
    "exch": (_ALL, "exch(ary, idx, val): atomic ary[idx] = val; returns the old value"),
    "and_": (_INTS, "and_(ary, idx, val): atomic ary[idx] &= val; returns the old value"),
    "or_": (_INTS, "or_(ary, idx, val): atomic ary[idx] |= val; returns the old value"),
    "xor": (_INTS, "xor(ary, idx, val): atomic ary[idx] ^= val; returns the old value"),
    "inc": (_UNSIGNED, "inc(ary, idx, val): atomic ary[idx] = 0 if ary[idx] >= val else "
                       "ary[idx] + 1 (CUDA atomicInc); returns the old value"),
    "dec": (_UNSIGNED, "dec(ary, idx, val): atomic ary[idx] = val if ary[idx] == 0 or "
                       "ary[idx] > val else ary[idx] - 1 (CUDA atomicDec); returns the old value"),
}

RMW_STUBS = {name: Stub(name, doc, namespace="cuda.atomic") for name, (_, doc) in _OPS.items()}
cas = Stub("cas", "cas(ary, idx, old, val): atomically set ary[idx] = val if ary[idx] == old; "
                  "returns the value ary[idx] held before", namespace="cuda.atomic")
compare_and_swap = Stub("compare_and_swap",
                        "compare_and_swap(ary, old, val): cas on ary[0] of a 1-D array; returns "
                        "the old value", namespace="cuda.atomic")

atomic = Namespace("atomic", **RMW_STUBS, cas=cas, compare_and_swap=compare_and_swap)


register_namespace(typing, atomic)


# ---------------------------------------------------------------------------------------------
# Typing


def _fail(fname, msg):
    raise IntrinsicArgumentError(f"cuda.atomic.{fname}(): {msg}")


def _names(dtypes):
    return ", ".join(str(t) for t in dtypes)


def _check_array(fname, ary, supported):
    if not isinstance(ary, types.Array):
        _fail(fname, f"the first argument must be an array, got {ary}")
    if ary.dtype not in supported:
        _fail(fname, f"unsupported array dtype {ary.dtype}; supported dtypes are "
                     f"{_names(supported)}")
    if not ary.mutable:
        _fail(fname, "the array is read-only")


def _check_arguments(fname, params, args, kws):
    """Refuse a call that does not pass exactly the parameters ``params`` by position."""
    if kws:
        # (numba-cuda's templates take positional arguments only, as do these)
        given = ", ".join(f"{k}=" for k in kws)
        _fail(fname, f"keyword arguments are not accepted ({given}): pass "
                     f"{', '.join(params)} by position")
    if len(args) != len(params):
        _fail(fname, f"takes {len(params)} arguments ({', '.join(params)}), got {len(args)}")


def _check_index(fname, ary, idx):
    """The index type to put in the signature: intp for a 1-D array's one index, else the
    tuple."""
    if isinstance(idx, (types.Integer, types.Float)):
        if ary.ndim != 1:
            _fail(fname, f"a {ary.ndim}-D array needs a tuple of {ary.ndim} integer indices, "
                         f"got one {'integer' if isinstance(idx, types.Integer) else idx}")
        # numba-cuda types a 1-D atomic (ary, intp, dtype): the call converts a float index to
        # intp (truncated toward zero, a histogram's bin x // w), as a float in a tuple index
        # below
        return types.intp
    if isinstance(idx, types.BaseTuple):
        if not all(isinstance(t, (types.Integer, types.Float)) for t in idx.types):
            _fail(fname, f"the index must be an integer or a tuple of integers, got {idx}")
        if len(idx.types) != ary.ndim:
            _fail(fname, f"indexing a {ary.ndim}-D array with {len(idx.types)} indices")
        if not all(isinstance(t, types.Integer) for t in idx.types):
            # (tx, uint64(ty)) unified with (tx, ty % n) types as (int64, float64) in Numba:
            # numba-cuda converts such indices to integers, and so do we
            return types.UniTuple(types.intp, len(idx.types))
        return idx
    _fail(fname, f"the index must be an integer or a tuple of integers, got {idx}")


def _check_value(fname, what, val, dtype):
    if not isinstance(val, (types.Integer, types.Float, types.Boolean)):
        _fail(fname, f"the {what} must be a number (converted to {dtype}), got {val}")


def _make_rmw_template(fname, supported):
    class AtomicTemplate(AbstractTemplate):
        key = RMW_STUBS[fname]

        def generic(self, args, kws):
            _check_arguments(fname, ("ary", "idx", "val"), args, kws)
            ary, idx, val = args
            _check_array(fname, ary, supported)
            idxty = _check_index(fname, ary, idx)
            _check_value(fname, "value", val, ary.dtype)
            return signature(ary.dtype, ary, idxty, ary.dtype)

    AtomicTemplate.__name__ = f"Atomic_{fname}"
    return AtomicTemplate


for _name, (_supported, _) in _OPS.items():
    typing.register_global(RMW_STUBS[_name], types.Function(_make_rmw_template(_name, _supported)))


class _CasTemplate(AbstractTemplate):
    key = cas

    def generic(self, args, kws):
        _check_arguments("cas", ("ary", "idx", "old", "val"), args, kws)
        ary, idx, old, val = args
        _check_array("cas", ary, _INTS)
        idxty = _check_index("cas", ary, idx)
        _check_value("cas", "expected old value", old, ary.dtype)
        _check_value("cas", "new value", val, ary.dtype)
        return signature(ary.dtype, ary, idxty, ary.dtype, ary.dtype)


class _CompareAndSwapTemplate(AbstractTemplate):
    key = compare_and_swap

    def generic(self, args, kws):
        _check_arguments("compare_and_swap", ("ary", "old", "val"), args, kws)
        ary, old, val = args
        _check_array("compare_and_swap", ary, _INTS)
        if ary.ndim != 1:
            _fail("compare_and_swap", f"needs a 1-D array, got a {ary.ndim}-D array")
        _check_value("compare_and_swap", "expected old value", old, ary.dtype)
        _check_value("compare_and_swap", "new value", val, ary.dtype)
        return signature(ary.dtype, ary, ary.dtype, ary.dtype)


typing.register_global(cas, types.Function(_CasTemplate))
typing.register_global(compare_and_swap, types.Function(_CompareAndSwapTemplate))


# ---------------------------------------------------------------------------------------------
# Lowering helpers


def element_pointer(context, builder, aryty, ary, idxty, idx):
    """Address of ``ary[idx]`` (integer or tuple index; negative indices wrap around)."""
    if isinstance(idxty, types.BaseTuple):
        raw = cgutils.unpack_tuple(builder, idx, count=len(idxty.types))
        tys = idxty.types
    else:
        raw, tys = [idx], [idxty]
    indices = [context.cast(builder, v, t, types.intp) for v, t in zip(raw, tys)]
    arr = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, arr, indices, wraparound=True)


def atomic_rmw(builder, op, ptr, val):
    return builder.atomic_rmw(op, ptr, val, _ORDER)


def atomic_cas(builder, ptr, expected, new):
    """``cmpxchg`` returning the old value (floats are compared by their bits)."""
    if isinstance(expected.type, (ir.FloatType, ir.DoubleType)):
        ity = ir.IntType(64 if isinstance(expected.type, ir.DoubleType) else 32)
        out = builder.cmpxchg(ptr, builder.bitcast(expected, ity), builder.bitcast(new, ity),
                              _ORDER, "monotonic")
        return builder.bitcast(builder.extract_value(out, 0), expected.type)
    out = builder.cmpxchg(ptr, expected, new, _ORDER, "monotonic")
    return builder.extract_value(out, 0)


def _float_minmax(builder, ptr, val, which):
    """Compare-and-swap loop for float max / min / nanmax / nanmin; returns the old value.

    max / min: if ``val`` or the stored value is NaN, the stored value stays (Python/NumPy's
    ``max(a, b) == a`` when either is NaN).  nanmax / nanmin: a NaN ``val`` changes nothing, a
    stored NaN is replaced.
    """
    fty = val.type
    ity = ir.IntType(64 if isinstance(fty, ir.DoubleType) else 32)
    align = ity.width // 8
    entry = builder.block
    initial = builder.load_atomic(ptr, _ORDER, align, typ=fty)
    check = builder.append_basic_block("atomic_minmax.check")
    attempt = builder.append_basic_block("atomic_minmax.attempt")
    done = builder.append_basic_block("atomic_minmax.done")

    nan_variant = which.startswith("nan")
    # Return early when nothing can change: val NaN (all variants), or a NaN stored (max/min).
    early = builder.fcmp_unordered("uno", val, val if nan_variant else initial)
    builder.cbranch(early, done, check)

    builder.position_at_end(check)
    current = builder.phi(fty)
    current.add_incoming(initial, entry)
    is_max = which.endswith("max")
    if nan_variant:      # also replace a stored NaN: unordered comparison
        better = builder.fcmp_unordered("<" if is_max else ">", current, val)
    else:
        better = builder.fcmp_ordered("<" if is_max else ">", current, val)
    builder.cbranch(better, attempt, done)

    builder.position_at_end(attempt)
    out = builder.cmpxchg(ptr, builder.bitcast(current, ity), builder.bitcast(val, ity),
                          _ORDER, "monotonic")
    seen = builder.bitcast(builder.extract_value(out, 0), fty)
    swapped = builder.extract_value(out, 1)
    current.add_incoming(seen, attempt)
    builder.cbranch(swapped, done, check)

    builder.position_at_end(done)
    old = builder.phi(fty)
    old.add_incoming(initial, entry)
    old.add_incoming(current, check)
    old.add_incoming(current, attempt)
    return old


def _apply(builder, fname, dtype, ptr, val):
    is_float = isinstance(dtype, types.Float)
    signed = isinstance(dtype, types.Integer) and dtype.signed
    if fname == "add":
        return atomic_rmw(builder, "fadd" if is_float else "add", ptr, val)
    if fname == "sub":
        if is_float:        # a - b == a + (-b) exactly in IEEE; fadd has a native instruction
            return atomic_rmw(builder, "fadd", ptr, builder.fneg(val))
        return atomic_rmw(builder, "sub", ptr, val)
    if fname in ("max", "min", "nanmax", "nanmin"):
        if is_float:
            return _float_minmax(builder, ptr, val, fname)
        op = fname[-3:]
        return atomic_rmw(builder, op if signed else "u" + op, ptr, val)
    if fname == "exch":
        return atomic_rmw(builder, "xchg", ptr, val)
    if fname in ("and_", "or_", "xor"):
        return atomic_rmw(builder, fname.rstrip("_"), ptr, val)
    if fname == "inc":      # CUDA atomicInc: old >= val ? 0 : old + 1
        return atomic_rmw(builder, "uinc_wrap", ptr, val)
    if fname == "dec":      # CUDA atomicDec: (old == 0 || old > val) ? val : old - 1
        return atomic_rmw(builder, "udec_wrap", ptr, val)
    raise AssertionError(fname)


def _note_cas(context, fname):
    """A compare-and-swap: PTX has none for local memory, where LLVM leaves it when the array is
    a cuda.local.array (atomicrmw there it turns into plain loads and stores); the linked kernel
    is checked for one (validate.check_linked), which then names this line."""
    usage.note(context, usage.CAS, f"cuda.atomic.{fname}()")


def _make_rmw_lowering(fname):
    def lower_atomic(context, builder, sig, args):
        aryty, idxty, _ = sig.args
        ary, idx, val = args
        ptr = element_pointer(context, builder, aryty, ary, idxty, idx)
        if fname in ("max", "min", "nanmax", "nanmin") and isinstance(aryty.dtype, types.Float):
            _note_cas(context, fname)
        return _apply(builder, fname, aryty.dtype, ptr, val)
    return lower_atomic


for _name in _OPS:
    lowering.lower(RMW_STUBS[_name], types.Array, types.Any, types.Any)(_make_rmw_lowering(_name))


@lowering.lower(cas, types.Array, types.Any, types.Any, types.Any)
def _lower_cas(context, builder, sig, args):
    aryty, idxty, _, _ = sig.args
    ary, idx, old, val = args
    ptr = element_pointer(context, builder, aryty, ary, idxty, idx)
    _note_cas(context, "cas")
    return atomic_cas(builder, ptr, old, val)


@lowering.lower(compare_and_swap, types.Array, types.Any, types.Any)
def _lower_compare_and_swap(context, builder, sig, args):
    aryty = sig.args[0]
    ary, old, val = args
    zero = context.get_constant(types.intp, 0)
    ptr = element_pointer(context, builder, aryty, ary, types.intp, zero)
    _note_cas(context, "compare_and_swap")
    return atomic_cas(builder, ptr, old, val)
