"""Which of a function's declared signatures a call's argument types convert to, ranked as Numba
ranks conversions: a kernel launch with ``cuda.jit("sig")`` signatures, a device function called
with declared signatures, and the simulator's twin of both.
"""

from __future__ import annotations

import enum

from numba.core import types
from numba.core.typeconv import Conversion

from ..errors import SignatureError

EXACT, PROMOTE, SAFE, UNSAFE = 0, 1, 2, 3


def conversion_rank(src, dst, float_to_int=False):
    """How a value of Numba type ``src`` converts to ``dst``, as Numba ranks it (its table of
    number conversions, ``numba/core/typeconv/rules.py``, and the types' own rules): EXACT,
    PROMOTE (a wider type of the same kind), SAFE (int -> float64, int16 -> float32, a C array
    where any layout is declared), UNSAFE (int64 -> float32, float64 -> float32, narrowing ints,
    a number -> bool); None when it may not (complex -> real, arrays of other dtypes or ranks;
    float -> int or bool unless ``float_to_int``: Numba allows it in calls of device functions,
    numba-cuda's launches do not)."""
    if src == dst:
        return EXACT
    if isinstance(dst, types.Array):
        if not isinstance(src, types.Array) or src.dtype != dst.dtype or src.ndim != dst.ndim:
            return None
        if src.layout == dst.layout:
            # read-only or not: a read-only array where a writable one is declared is refused
            # only where the function writes it (``read_only_as`` gives the type that finds out)
            return EXACT
        return SAFE if dst.layout == "A" else None          # (Numba's Array.can_convert_to)
    if isinstance(dst, types.CPointer):
        # an integer address where a pointer is declared (only signatures given to cuda.jit
        # declare pointers)
        return SAFE if isinstance(src, types.Integer) else None
    if isinstance(src, (types.IntegerLiteral, types.BooleanLiteral)):
        # a constant: as its type, at best a promotion (Numba's Literal.can_convert_to)
        rank = conversion_rank(src.literal_type, dst, float_to_int)
        return None if rank is None else max(rank, PROMOTE)
    if isinstance(src, types.IntEnumMember) and issubclass(src.instance_class, enum.IntEnum):
        # an IntEnum member: as its value, at best safely (Numba's IntEnumMember.can_convert_to)
        if not isinstance(dst, (types.Number, types.Boolean)):
            return None
        rank = conversion_rank(src.dtype, dst, float_to_int)
        return None if rank is None else max(rank, SAFE)
    if isinstance(src, (types.Number, types.Boolean)) and \
            isinstance(dst, (types.Number, types.Boolean)):
        return _number_rank(src, dst, float_to_int)
    if isinstance(src, types.BaseTuple) and isinstance(dst, types.BaseTuple):
        if len(src.types) != len(dst.types):
            return None
        ranks = [conversion_rank(s, d, float_to_int) for s, d in zip(src.types, dst.types)]
        return None if None in ranks else max(ranks, default=EXACT)
    return None


#: Numba's conversion kinds as ranked here
_RANKS = {Conversion.exact: EXACT, Conversion.promote: PROMOTE, Conversion.safe: SAFE,
          Conversion.unsafe: UNSAFE}


def _number_rank(src, dst, float_to_int):
    """``conversion_rank`` of one number (or bool) type to another (``src != dst``).  The
    table Numba builds from its casting rules, read off here as rules:

    - bool -> any number: SAFE; a number -> bool: UNSAFE (complex: None);
    - int -> int: PROMOTE to a wider one of the same signedness, SAFE unsigned -> a wider
      signed one, else UNSAFE;
    - int -> float64 or complex128: SAFE, every integer (Numba: int64 -> float64 is safe, "to
      prefer float64 over int64" in mixed arithmetic); -> float32 / complex64: SAFE for the
      integers an int16 holds (int8, uint8, int16), else UNSAFE; -> float16: SAFE for int8;
    - float -> float, complex -> complex: PROMOTE wider, UNSAFE narrower; float -> complex:
      SAFE where the complex's parts are at least as wide (float64 -> complex64: UNSAFE);
    - float -> int: UNSAFE, allowed only with ``float_to_int``; complex -> real: None.

    Types with their own rules (bfloat16, the 8-bit floats) are ranked by them, as Numba's
    typing falls back on ``can_convert_to`` / ``can_convert_from``."""
    if not (_builtin_number(src) and _builtin_number(dst)):
        forward, backward = src.can_convert_to(None, dst), dst.can_convert_from(None, src)
        conv = forward if backward is None else backward if forward is None else \
            min(forward, backward)
        if conv is None or conv not in _RANKS:
            return None
        if isinstance(src, types.Float) and isinstance(dst, (types.Integer, types.Boolean)) \
                and not float_to_int:
            return None
        return _RANKS[conv]
    if isinstance(src, types.Boolean):
        return SAFE
    if isinstance(dst, types.Boolean):
        if isinstance(src, types.Complex):
            return None
        return UNSAFE if float_to_int or isinstance(src, types.Integer) else None
    if isinstance(src, types.Integer):
        if isinstance(dst, types.Integer):
            if dst.signed == src.signed:
                return PROMOTE if dst.bitwidth > src.bitwidth else UNSAFE
            return SAFE if dst.signed and dst.bitwidth > src.bitwidth else UNSAFE
        real = dst.underlying_float if isinstance(dst, types.Complex) else dst
        # the width of the signed integer type that holds every value of ``src``
        width = src.bitwidth if src.signed else 2 * src.bitwidth
        return SAFE if real.bitwidth == 64 or width <= real.bitwidth // 2 else UNSAFE
    if isinstance(src, types.Float):
        if isinstance(dst, types.Integer):
            return UNSAFE if float_to_int else None
        if isinstance(dst, types.Float):
            return PROMOTE if dst.bitwidth > src.bitwidth else UNSAFE
        return SAFE if dst.bitwidth >= 2 * src.bitwidth else UNSAFE
    if isinstance(dst, types.Complex):                           # complex -> complex
        return PROMOTE if dst.bitwidth > src.bitwidth else UNSAFE
    return None


def _builtin_number(ty):
    """Whether ``ty`` is one of the types Numba's table of number conversions ranks: bool,
    the integers, float16/32/64, complex64/128 (not bfloat16, a Float of its own rules)."""
    return isinstance(ty, (types.Boolean, types.Integer, types.Complex)) or \
        isinstance(ty, types.Float) and type(ty) is types.Float


def best_signature(signatures, argtypes, what, float_to_int=False, first_of_ties=False):
    """The signature (of ``signatures``) that ``argtypes`` convert to at least cost, as Numba
    chooses: fewest unsafe conversions, then fewest safe ones, then fewest promotions.  None
    when none fits.  When two fit equally well: ``SignatureError`` (a kernel launch), or with
    ``first_of_ties`` the one declared first (a call of a device function, as Numba's typing
    resolves it)."""
    scored = []
    for sig in signatures:
        if len(sig) != len(argtypes):
            continue
        ranks = [conversion_rank(a, d, float_to_int) for a, d in zip(argtypes, sig)]
        if None in ranks:
            continue
        scored.append(((ranks.count(UNSAFE), ranks.count(SAFE), ranks.count(PROMOTE)), sig))
    if not scored:
        return None
    scored.sort(key=lambda s: s[0])           # stable: declaration order among equals
    if len(scored) > 1 and scored[0][0] == scored[1][0] and not first_of_ties:
        raise SignatureError(
            f"ambiguous call of {what} with ({', '.join(map(str, argtypes))}): signatures "
            f"({', '.join(map(str, scored[0][1]))}) and ({', '.join(map(str, scored[1][1]))}) "
            f"fit equally well; pass arguments of the exact types")
    return scored[0][1]


def read_only_as(given, declared):
    """``declared`` (a declared parameter type) with each array that ``given`` (the argument's
    type) has read-only, where ``declared`` has a writable one, made read-only; None when there
    is none.  A function declared with a writable array takes a read-only one only if it does not
    write it (a read-only NumPy array's device copy is not copied back: its writes would be
    lost); compiled with this type, a function that writes it fails to."""
    if isinstance(declared, types.Array):
        if isinstance(given, types.Array) and not given.mutable and declared.mutable:
            return declared.copy(readonly=True)
        return None
    if isinstance(declared, types.BaseTuple) and isinstance(given, types.BaseTuple) and \
            len(given.types) == len(declared.types):
        inner = [read_only_as(g, d) for g, d in zip(given.types, declared.types)]
        if any(t is not None for t in inner):
            cls = declared.instance_class if isinstance(declared, types.BaseNamedTuple) \
                else None
            return types.BaseTuple.from_types(
                [d if t is None else t for t, d in zip(inner, declared.types)], cls)
    return None


def read_only_places(given, declared, name):
    """How messages name the arrays that ``read_only_as`` makes read-only, for a parameter
    ``name``: ``a``; ``p.x`` (a namedtuple's field); ``t[0]`` (a tuple's item)."""
    if isinstance(declared, types.Array):
        return [name] if read_only_as(given, declared) is not None else []
    if not isinstance(declared, types.BaseTuple) or not isinstance(given, types.BaseTuple) or \
            len(given.types) != len(declared.types):
        return []
    fields = getattr(declared, "fields", None) if isinstance(declared, types.BaseNamedTuple) \
        else None
    places = []
    for i, (g, d) in enumerate(zip(given.types, declared.types)):
        inner = f"{name}.{fields[i]}" if fields else f"{name}[{i}]"
        places.extend(read_only_places(g, d, inner))
    return places
