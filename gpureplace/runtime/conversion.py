"""Arguments converted to a kernel's declared signature: ``cuda.jit("void(float32[:], int32)")``
compiles nothing else, so a launch's argument keys and values are converted to the declared types
it fits best (``compiler/ranking.py`` chooses; the simulator applies the same rules)."""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.np import numpy_support

from ..compiler import abi
from ..compiler import fp8
from ..compiler.bfloat16 import BFloat16, bits_of
from ..compiler.ranking import best_signature
from .arguments import ArgumentError, numba_type_of_key, value_key


class PointerRefused(Exception):
    """A value given for a ``CPointer`` parameter that is no address (a negative number):
    ``match_signature`` names the argument.  A null pointer (0) is passed, as numba-cuda
    passes it (a kernel may take one it never reads); reading through it is the device's
    illegal address, and the simulator's IndexError."""


def pointer_refusal(address, declared):
    """What a launch says of ``address`` (a negative int) given for a parameter of pointer
    type ``declared``: both backends refuse it in these words (the simulator's
    ``launch_args.convert_to`` too)."""
    pointee = getattr(declared, "dtype", None)
    declared = declared if pointee is None else f"CPointer({pointee})"
    return (f"is {address}, a negative address, given for a {declared} parameter; pass the "
            f"address of memory the kernel may access")


def _declared_scalar_dtype(ty):
    try:
        return np.dtype(numpy_support.as_dtype(ty))
    except NotImplementedError:
        return None


def _convert_arg(key, values, declared):
    """(declared key, values) for an argument of ``key`` / ``values`` passed where ``declared``
    (a Numba type that ``best_signature`` found it converts to) is expected, or None."""
    kind = key[0]
    if isinstance(declared, types.Array):
        if kind != "array":
            return None
        _, dt, ndim, layout = key
        if dt != np.dtype(numpy_support.as_dtype(declared.dtype)) or ndim != declared.ndim:
            return None
        if declared.layout == layout or declared.layout == "A" and layout == "A":
            return key, values
        if declared.layout in ("C", "F"):
            return None                  # a C / F specialisation needs that layout
        # declared 'A' (any layout): pass the strides a contiguous array does not carry
        ptr, shape = values[0], values[1:1 + ndim]
        strides = abi.contiguous_strides(shape, dt.itemsize, layout)
        return ("array", dt, ndim, "A"), (ptr, *shape, *strides)
    if isinstance(declared, types.CPointer):
        # a device address given as an integer (numba-cuda: a kernel declared with pointers)
        if kind not in ("int64", "scalar") or len(values) != 1:
            return None
        if int(values[0]) < 0:
            raise PointerRefused(pointer_refusal(int(values[0]), declared))
        return ("pointer", np.dtype(numpy_support.as_dtype(declared.dtype))), (int(values[0]),)
    if isinstance(declared, fp8.FP8):           # (8-bit floats convert explicitly only)
        return (key, values) if kind == "fp8" and key[1] == declared.kind else None
    if isinstance(declared, BFloat16):
        if kind == "bfloat16":
            return key, values
        if len(values) != 1:
            return None
        return ("bfloat16",), (bits_of(values[0]),)          # rounded to nearest even
    if isinstance(declared, (types.Integer, types.Float, types.Boolean, types.Complex)):
        # (which conversions are allowed is conversion_rank's to say: best_signature chose)
        dt = _declared_scalar_dtype(declared)
        if dt is None:
            return None
        if dt.kind == "c" and len(values) == 1:
            values = (values[0], 0.0)           # a real number into a complex parameter
        elif dt.kind in "iu" and len(values) == 1 and not isinstance(values[0], float):
            # an integer into a narrower integer parameter wraps as a C conversion does
            # (numba-cuda: 0xFFFFFFFF given for an int32 is -1)
            values = (_wrap(int(values[0]), dt),)
        return ("scalar", dt), values
    if isinstance(declared, types.BaseTuple):
        # a tuple or a namedtuple (its items after its class), passed as the declared one is
        subs = key[1:] if kind == "tuple" else key[2:] if kind == "namedtuple" else None
        if subs is None or len(subs) != len(declared.types):
            return None
        keys, out, pos = [], [], 0
        for sub, ty in zip(subs, declared.types):
            n = len(abi.leaves(numba_type_of_key(sub)))     # its flat parameters
            conv = _convert_arg(sub, values[pos:pos + n], ty)
            if conv is None:
                return None
            keys.append(conv[0])
            out.extend(conv[1])
            pos += n
        head = ("namedtuple", declared.instance_class) if isinstance(
            declared, types.BaseNamedTuple) else ("tuple",)
        return (*head, *keys), tuple(out)
    return (key, values) if numba_type_of_key(key) == declared else None


def _wrap(value, dt):
    bits = 8 * dt.itemsize
    value &= (1 << bits) - 1
    if dt.kind == "i" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def match_signature(signatures, keys, per_arg_values, what="the kernel"):
    """(keys, flat values) converted to the signature of ``signatures`` (tuples of Numba types)
    that the arguments fit best (``best_signature``), or None.  ``per_arg_values``: each
    argument's values."""
    sig = best_signature(signatures, [numba_type_of_key(k) for k in keys], what)
    if sig is None:
        return None
    out_keys, out_vals = [], []
    for i, (key, vals, ty) in enumerate(zip(keys, per_arg_values, sig)):
        try:
            conv = _convert_arg(key, tuple(vals), ty)
        except PointerRefused as exc:
            raise ArgumentError(f"{what}: argument {i} {exc}") from None
        if conv is None:
            return None
        out_keys.append(conv[0])
        out_vals.extend(conv[1])
    return out_keys, out_vals


def as_scalar_of(value, nbtype):
    """``value`` (a number) as the NumPy scalar of Numba type ``nbtype`` that a declared
    signature converts it to (``match_signature``'s rules: ranked by ``best_signature``,
    integers wrapped as C converts them); None where it does not convert so."""
    if isinstance(value, (np.ndarray, tuple)):
        return None
    try:
        key, values = value_key(value)
    except Exception:                  # (not an argument kernels take)
        return None
    if best_signature([(nbtype,)], [numba_type_of_key(key)], "the kernel") is None:
        return None
    try:
        conv = _convert_arg(key, tuple(values), nbtype)
    except PointerRefused:
        return None
    if conv is None or conv[0][0] != "scalar":
        return None
    dt, values = conv[0][1], conv[1]
    return dt.type(complex(*values) if dt.kind == "c" else values[0])
