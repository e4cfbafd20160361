"""Warp-level primitives: shuffles, votes, matches, active masks (``cuda.shfl_sync`` ...).

Signatures and return types follow numba-cuda: ``ballot_sync`` returns an int32 bit mask,
``all_sync`` / ``any_sync`` / ``eq_sync`` a boolean, ``match_any_sync`` an int32 mask,
``match_all_sync`` a tuple ``(mask, pred)``, ``activemask`` / ``lanemask_lt`` a uint32.  Shuffles
return the value's own type (numba-cuda widens uint32 to int64; keeping the type is the useful
behaviour and converts the same way on assignment).  The shuffles take their arguments by keyword
too, by numba-cuda's names (its ``@intrinsic`` parameters: ``mask``, ``value``, ``src_lane`` /
``delta`` / ``lane_mask``); the others by position only.  Everything is an ``llvm.nvvm.*`` intrinsic
that the NVPTX back end selects; 64-bit values are shuffled as two 32-bit halves.
"""

from __future__ import annotations

import inspect

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import AbstractTemplate, Registry, signature

from .requirements import require
from .stubs import IntrinsicArgumentError, Stub

__all__ = ["shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "ballot_sync",
           "all_sync", "any_sync", "eq_sync", "match_any_sync", "match_all_sync", "activemask",
           "lanemask_lt"]

typing = Registry()
lowering = LoweringRegistry()

shfl_sync = Stub("shfl_sync", "shfl_sync(mask, value, src_lane): value held by lane src_lane")
shfl_up_sync = Stub("shfl_up_sync", "shfl_up_sync(mask, value, delta): value of lane "
                                    "laneid - delta (own value if that is below 0)")
shfl_down_sync = Stub("shfl_down_sync", "shfl_down_sync(mask, value, delta): value of lane "
                                        "laneid + delta (own value if that is past 31)")
shfl_xor_sync = Stub("shfl_xor_sync", "shfl_xor_sync(mask, value, lane_mask): value of lane "
                                      "laneid ^ lane_mask")
ballot_sync = Stub("ballot_sync", "ballot_sync(mask, predicate): bit mask (int32) of the lanes "
                                  "in mask whose predicate is true")
all_sync = Stub("all_sync", "all_sync(mask, predicate): true if the predicate is true on every "
                            "lane in mask")
any_sync = Stub("any_sync", "any_sync(mask, predicate): true if the predicate is true on any "
                            "lane in mask")
eq_sync = Stub("eq_sync", "eq_sync(mask, predicate): true if the predicate has the same value "
                          "on every lane in mask")
match_any_sync = Stub("match_any_sync", "match_any_sync(mask, value): mask of the lanes in mask "
                                        "holding the same value as this lane")
match_all_sync = Stub("match_all_sync", "match_all_sync(mask, value): (mask, pred): mask of all "
                                        "lanes in mask and True if they all hold the same value, "
                                        "else (0, False)")
activemask = Stub("activemask", "activemask(): uint32 mask of the lanes currently executing")
lanemask_lt = Stub("lanemask_lt", "lanemask_lt(): uint32 mask of the lanes below this one")

_I32 = ir.IntType(32)
_I1 = ir.IntType(1)

#: value types a shuffle / match keeps as they are
_VALUE_TYPES = (types.int32, types.uint32, types.int64, types.uint64, types.float32,
                types.float64)


def _fail(fname, msg):
    raise IntrinsicArgumentError(f"cuda.{fname}(): {msg}")


def _check_mask(fname, mask):
    if not isinstance(mask, types.Integer):
        _fail(fname, f"the mask must be an integer (a 32-bit lane mask), got {mask}")


def _value_type(fname, val):
    """The type a shuffled/matched value is carried in, or a clear error."""
    val = types.unliteral(val)
    if val in _VALUE_TYPES:
        return val
    if isinstance(val, types.Boolean):
        return types.int32
    if isinstance(val, types.Integer):          # int8/int16/...: widened to 32 bits
        return types.int32 if val.signed else types.uint32
    _fail(fname, f"unsupported value type {val}; supported: int32, uint32, int64, uint64, "
                 f"float32, float64 (smaller integers are widened to 32 bits)")


def _check_count(fname, args, kws, n, names):
    if kws:
        given = ", ".join(f"{k}=" for k in kws)
        _fail(fname, f"takes no keyword arguments: pass {names} by position (got {given})"
              if n else f"takes no arguments, got {given}")
    if len(args) != n:
        _fail(fname, f"takes {n} arguments ({names}), got {len(args)}")


def _fold_keywords(fname, args, kws, pysig):
    """``args`` with the keyword arguments ``kws`` put in their places by the parameter names
    of ``pysig`` (numba-cuda's shuffles are ``@intrinsic`` functions, which take keywords), or
    a clear error."""
    names = ", ".join(pysig.parameters)
    unknown = [k for k in kws if k not in pysig.parameters]
    if unknown:
        _fail(fname, f"has no parameter {unknown[0]!r}; it takes ({names})")
    try:
        bound = pysig.bind(*args, **kws)
    except TypeError as exc:
        _fail(fname, f"takes ({names}): {exc}")
    return tuple(bound.arguments[name] for name in pysig.parameters)


# ---------------------------------------------------------------------------------------------
# Typing


def _shuffle_template(stub, third):
    pysig = inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                               for name in ("mask", "value", third)])

    class ShuffleTemplate(AbstractTemplate):
        key = stub

        def generic(self, args, kws):
            if kws:
                args = _fold_keywords(stub.__name__, args, kws, pysig)
            _check_count(stub.__name__, args, {}, 3, f"mask, value, {third}")
            mask, val, lane = args
            _check_mask(stub.__name__, mask)
            vty = _value_type(stub.__name__, val)
            if not isinstance(lane, types.Integer):
                _fail(stub.__name__, f"{third} must be an integer, got {lane}")
            sig = signature(vty, types.uint32, vty, types.int32)
            # (the lowering receives the arguments in this order: Numba folds keywords by it)
            return sig.replace(pysig=pysig) if kws else sig

    return ShuffleTemplate


def _vote_template(stub, restype):
    class VoteTemplate(AbstractTemplate):
        key = stub

        def generic(self, args, kws):
            _check_count(stub.__name__, args, kws, 2, "mask, predicate")
            mask, pred = args
            _check_mask(stub.__name__, mask)
            if not isinstance(pred, (types.Boolean, types.Integer, types.Float)):
                _fail(stub.__name__, f"the predicate must be a boolean or a number, got {pred}")
            return signature(restype, types.uint32, types.boolean)

    return VoteTemplate


def _match_template(stub, restype):
    class MatchTemplate(AbstractTemplate):
        key = stub

        def generic(self, args, kws):
            _check_count(stub.__name__, args, kws, 2, "mask, value")
            mask, val = args
            _check_mask(stub.__name__, mask)
            vty = _value_type(stub.__name__, val)
            return signature(restype, types.uint32, vty)

    return MatchTemplate


def _nullary_template(stub, restype):
    class NullaryTemplate(AbstractTemplate):
        key = stub

        def generic(self, args, kws):
            _check_count(stub.__name__, args, kws, 0, "no arguments")
            return signature(restype)

    return NullaryTemplate


_SHUFFLE_MODES = {shfl_sync: ("idx", "src_lane"), shfl_up_sync: ("up", "delta"),
                  shfl_down_sync: ("down", "delta"), shfl_xor_sync: ("bfly", "lane_mask")}
#: each shuffle's third parameter, by numba-cuda's name (its keyword: ``src_lane=1``)
SHUFFLE_OPERANDS = {_stub: _third for _stub, (_, _third) in _SHUFFLE_MODES.items()}
for _stub, (_, _third) in _SHUFFLE_MODES.items():
    typing.register_global(_stub, types.Function(_shuffle_template(_stub, _third)))

_VOTES = {ballot_sync: ("ballot", types.int32), all_sync: ("all", types.boolean),
          any_sync: ("any", types.boolean), eq_sync: ("uni", types.boolean)}
for _stub, (_, _ret) in _VOTES.items():
    typing.register_global(_stub, types.Function(_vote_template(_stub, _ret)))

typing.register_global(match_any_sync, types.Function(_match_template(match_any_sync,
                                                                      types.int32)))
typing.register_global(match_all_sync, types.Function(
    _match_template(match_all_sync, types.Tuple((types.int32, types.boolean)))))
typing.register_global(activemask, types.Function(_nullary_template(activemask, types.uint32)))
typing.register_global(lanemask_lt, types.Function(_nullary_template(lanemask_lt, types.uint32)))


# ---------------------------------------------------------------------------------------------
# Lowering


def _intrinsic(builder, name, ret, params):
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, params), name)
    return fn


def shuffle32(builder, mode, mask, value, lane):
    """One ``shfl.sync`` of an i32 value (``mode``: idx, up, down, bfly)."""
    # The c operand packs (segment mask << 8) | clamp: 0 for up (clamp at lane 0), 0x1f otherwise.
    clamp = ir.Constant(_I32, 0 if mode == "up" else 0x1F)
    fn = _intrinsic(builder, f"llvm.nvvm.shfl.sync.{mode}.i32", _I32, [_I32, _I32, _I32, _I32])
    return builder.call(fn, [mask, value, lane, clamp])


def _lower_shuffle(mode):
    def lower(context, builder, sig, args):
        mask, value, lane = args
        vty = sig.args[1]
        width = vty.bitwidth
        bits = builder.bitcast(value, ir.IntType(width)) if isinstance(vty, types.Float) \
            else value
        if width == 32:
            out = shuffle32(builder, mode, mask, bits, lane)
        else:
            lo = builder.trunc(bits, _I32)
            hi = builder.trunc(builder.lshr(bits, ir.Constant(ir.IntType(64), 32)), _I32)
            lo = shuffle32(builder, mode, mask, lo, lane)
            hi = shuffle32(builder, mode, mask, hi, lane)
            out = builder.or_(builder.shl(builder.zext(hi, ir.IntType(64)),
                                          ir.Constant(ir.IntType(64), 32)),
                              builder.zext(lo, ir.IntType(64)))
        return builder.bitcast(out, value.type) if isinstance(vty, types.Float) else out
    return lower


for _stub, (_mode, _) in _SHUFFLE_MODES.items():
    lowering.lower(_stub, types.uint32, types.Any, types.int32)(_lower_shuffle(_mode))


def _lower_vote(kind):
    def lower(context, builder, sig, args):
        mask, pred = args
        ret = _I32 if kind == "ballot" else _I1
        fn = _intrinsic(builder, f"llvm.nvvm.vote.{kind}.sync", ret, [_I32, _I1])
        return builder.call(fn, [mask, pred])     # i32 mask, or i1 (Numba's boolean value)
    return lower


for _stub, (_kind, _) in _VOTES.items():
    lowering.lower(_stub, types.uint32, types.boolean)(_lower_vote(_kind))


def _match_operand(builder, vty, value):
    width = vty.bitwidth
    if isinstance(vty, types.Float):
        return builder.bitcast(value, ir.IntType(width)), width
    return value, width


#: What a user of a GPU without ``match.sync`` (below sm_70) can write instead.
_MATCH_INSTEAD = ("below sm_70, find the lanes holding the same value with a loop of "
                  "cuda.shfl_sync over the lanes of the mask")


@lowering.lower(match_any_sync, types.uint32, types.Any)
def _lower_match_any(context, builder, sig, args):
    # match.sync is sm_70+: LLVM aborts the process on an older target ("Cannot select")
    require("cuda.match_any_sync()", sm=70, instead=_MATCH_INSTEAD)
    mask, value = args
    value, width = _match_operand(builder, sig.args[1], value)
    fn = _intrinsic(builder, f"llvm.nvvm.match.any.sync.i{width}", _I32, [_I32, ir.IntType(width)])
    return builder.call(fn, [mask, value])


@lowering.lower(match_all_sync, types.uint32, types.Any)
def _lower_match_all(context, builder, sig, args):
    require("cuda.match_all_sync()", sm=70, instead=_MATCH_INSTEAD)
    mask, value = args
    value, width = _match_operand(builder, sig.args[1], value)
    fn = _intrinsic(builder, f"llvm.nvvm.match.all.sync.i{width}p",
                    ir.LiteralStructType([_I32, _I1]), [_I32, ir.IntType(width)])
    out = builder.call(fn, [mask, value])
    return context.make_tuple(builder, sig.return_type,
                              [builder.extract_value(out, 0), builder.extract_value(out, 1)])


@lowering.lower(activemask)
def _lower_activemask(context, builder, sig, args):
    # activemask.b32 came with PTX ISA 6.2 (CUDA 10.1); ptxas refuses it in older PTX
    require("cuda.activemask()", ptx=62)
    # An inline-asm read with side effects: the active set can change between two reads, so
    # LLVM must neither merge nor hoist them (the intrinsic is not marked that way everywhere).
    asm = ir.InlineAsm(ir.FunctionType(_I32, []), "activemask.b32 $0;", "=r", side_effect=True)
    # convergent: LLVM must not merge the calls of two sides of a branch into one after it
    return builder.call(asm, [], attrs=("convergent",))


@lowering.lower(lanemask_lt)
def _lower_lanemask_lt(context, builder, sig, args):
    fn = _intrinsic(builder, "llvm.nvvm.read.ptx.sreg.lanemask.lt", _I32, [])
    return builder.call(fn, [])
