"""Device meanings of the NumPy ufuncs that are Python operators on scalars.

``np.add(a, b)`` in a kernel is ``a + b``, ``np.maximum`` propagates NaN as NumPy's does, and so
on; with arrays and an output array they run elementwise (``compiler/ufunc_arrays.py``).  Each is
plain Python compiled as a device function, so an override of the ufunc in a Context replaces it
like any other built-in meaning.
"""

from __future__ import annotations

import cmath
import math

import numpy as np


def add(a, b):
    return a + b


def subtract(a, b):
    return a - b


def multiply(a, b):
    return a * b


def divide(a, b):
    return a / b


def floor_divide(a, b):
    return a // b


def remainder(a, b):
    return a % b


def divmod_(a, b):
    return a // b, a % b


def negative(a):
    return -a


def positive(a):
    return +a


def square(a):
    return a * a


def float_power(a, b):
    return float(a) ** float(b)


def bitwise_and(a, b):
    return a & b


def bitwise_or(a, b):
    return a | b


def bitwise_xor(a, b):
    return a ^ b


def invert(a):
    return ~a


def left_shift(a, b):
    return a << b


def right_shift(a, b):
    return a >> b


def equal(a, b):
    return a == b


def not_equal(a, b):
    return a != b


def greater(a, b):
    return a > b


def greater_equal(a, b):
    return a >= b


def less(a, b):
    return a < b


def less_equal(a, b):
    return a <= b


def logical_and(a, b):
    return bool(a) and bool(b)


def logical_or(a, b):
    return bool(a) or bool(b)


def logical_xor(a, b):
    return bool(a) != bool(b)


def logical_not(a):
    return not a


def maximum(a, b):
    if a != a:                 # NaN wins, as in NumPy (fmax is the one that ignores it)
        return a
    if b != b:
        return b
    return a if a >= b else b


def minimum(a, b):
    if a != a:
        return a
    if b != b:
        return b
    return a if a <= b else b


def signbit(a):
    return math.copysign(1.0, a) < 0


def logaddexp(a, b):
    hi = max(a, b)
    return hi + math.log1p(math.exp(-abs(a - b))) if hi != -math.inf else hi


def logaddexp2(a, b):
    hi = max(a, b)
    return hi + math.log2(1.0 + 2.0 ** (-abs(a - b))) if hi != -math.inf else hi


def table():
    """{ufunc: device implementation} for the operator-like ufuncs."""
    out = {np.add: add, np.subtract: subtract, np.multiply: multiply, np.divide: divide,
           np.floor_divide: floor_divide, np.remainder: remainder, np.divmod: divmod_,
           np.negative: negative, np.positive: positive, np.square: square,
           np.float_power: float_power, np.bitwise_and: bitwise_and,
           np.bitwise_or: bitwise_or, np.bitwise_xor: bitwise_xor, np.invert: invert,
           np.left_shift: left_shift, np.right_shift: right_shift, np.equal: equal,
           np.not_equal: not_equal, np.greater: greater, np.greater_equal: greater_equal,
           np.less: less, np.less_equal: less_equal, np.logical_and: logical_and,
           np.logical_or: logical_or, np.logical_xor: logical_xor,
           np.logical_not: logical_not, np.maximum: maximum, np.minimum: minimum,
           np.signbit: signbit, np.logaddexp: logaddexp, np.logaddexp2: logaddexp2}
    return out


def _gcd(a, b):
    a, b = abs(a), abs(b)
    while b != 0:
        a, b = b, a % b
    return a


def _lcm(a, b):
    if a == 0 or b == 0:
        return a - a + b - b                      # zero, in the arguments' common type
    return abs(a // _gcd(a, b) * b)


def _cast_result(fn, cast):
    """``fn`` of two integers with its result in the arguments' own type (NumPy's loop for
    two ``int32`` returns ``int32``; Numba's integer arithmetic widens to ``int64``)."""
    def typed(a, b):
        return cast(fn(a, b))
    typed.__name__ = typed.__qualname__ = fn.__name__.lstrip("_")
    return typed


def _real_sign(cast):
    def sign(x):
        if x > 0:
            return cast(1)
        if x < 0:
            return cast(-1)
        return cast(x)          # zero (a float's sign kept) and NaN as they are
    return sign


def _complex_sign(cast):
    def sign(z):
        """NumPy 2's sign of a complex number: ``z / |z|`` by parts (0 for 0)."""
        re, im = z.real, z.imag
        if math.isinf(re) and math.isinf(im):      # (NumPy's: no direction)
            return cast(complex(math.nan, math.nan))
        if math.isinf(re) or math.isinf(im):      # the direction of the infinite part
            re = math.copysign(1.0, re) if math.isinf(re) else 0.0
            im = math.copysign(1.0, im) if math.isinf(im) else 0.0
        r = math.hypot(re, im)
        if r == 0:
            return cast(0)
        return cast(complex(re / r, im / r))
    return sign


def _float_reciprocal(cast):
    def reciprocal(x):
        return cast(1) / x
    return reciprocal


def _complex_reciprocal(cast):
    def reciprocal(z):
        if z == 0:                  # NumPy's nan + nanj (the device's division gives 0)
            return cast(complex(math.nan, math.nan))
        return cast(1) / z
    return reciprocal


def _int_reciprocal(cast):
    def reciprocal(x):                        # C's 1 / x: 1 and -1 keep, the rest is 0
        if x == 1 or x == -1:
            return cast(x)
        return cast(0)
    return reciprocal


def _spacing_of(cast):
    def spacing(x):
        v = cast(x)
        if v != v or v == math.inf or v == -math.inf:
            return cast(math.nan)
        return np.nextafter(v, cast(math.inf if v >= 0 else -math.inf)) - v   # (-0.0: up)
    return spacing


def numeric_table():
    """{ufunc: {argument types: implementation}} for the NumPy ufuncs of numbers that are no
    operator and no libdevice function: ``np.sign``, ``np.reciprocal``, ``np.spacing``,
    ``np.gcd`` and ``np.lcm``, each returning the type NumPy's loop for those types returns."""
    from numba.core import types
    from numba.np import numpy_support
    ints = [getattr(types, n) for n in ("int8", "int16", "int32", "int64", "uint8", "uint16",
                                        "uint32", "uint64")]
    floats, complexes = [types.float32, types.float64], [types.complex64, types.complex128]

    def cast(t):
        return numpy_support.as_dtype(t).type

    out = {np.sign: {}, np.reciprocal: {}, np.spacing: {}, np.gcd: {}, np.lcm: {}}
    for t in ints:
        out[np.sign][(t,)] = _real_sign(cast(t))
        out[np.reciprocal][(t,)] = _int_reciprocal(cast(t))
        out[np.gcd][(t, t)] = _cast_result(_gcd, cast(t))
        out[np.lcm][(t, t)] = _cast_result(_lcm, cast(t))
        if t.bitwidth >= 16:                  # (NumPy's loop for 8-bit integers is float16)
            out[np.spacing][(t,)] = _spacing_of(np.float32 if t.bitwidth == 16 else np.float64)
    for t in floats:
        out[np.sign][(t,)] = _real_sign(cast(t))
        out[np.reciprocal][(t,)] = _float_reciprocal(cast(t))
        out[np.spacing][(t,)] = _spacing_of(cast(t))
    # (NumPy's reciprocal of a bool is its int8 loop's; its sign has no loop for bool)
    out[np.reciprocal][(types.boolean,)] = _int_reciprocal(np.int8)
    for t in complexes:
        out[np.sign][(t,)] = _complex_sign(cast(t))
        out[np.reciprocal][(t,)] = _complex_reciprocal(cast(t))
    return out


def numeric_untyped():
    """{ufunc: implementation} for argument types ``numeric_table`` has no entry for: ``np.gcd``
    and ``np.lcm`` of two different integer types (the common type Numba's arithmetic gives)."""
    return {np.gcd: _gcd, np.lcm: _lcm}


def _complex_meaning(fn):
    def on_complex(z):
        return fn(z)
    on_complex.__name__ = on_complex.__qualname__ = f"complex_{fn.__name__}"
    return on_complex


def _complex_log(z):
    if z == 0:                  # NumPy's -inf + 0j (Python's cmath raises)
        return complex(-math.inf, 0.0)
    return cmath.log(z)


def _complex_log10(z):
    if z == 0:
        return complex(-math.inf, 0.0)
    return cmath.log10(z)


def _complex_atanh(z):
    if z == 1 or z == -1:       # NumPy's +-inf (Python's cmath raises)
        return complex(math.copysign(math.inf, z.real), 0.0)
    return cmath.atanh(z)


# NumPy orders complex numbers lexicographically (real part, then imaginary part)
def _cgreater(a, b):
    return a.real > b.real or (a.real == b.real and a.imag > b.imag)


def _cgreater_equal(a, b):
    return a.real > b.real or (a.real == b.real and a.imag >= b.imag)


def _cless(a, b):
    return a.real < b.real or (a.real == b.real and a.imag < b.imag)


def _cless_equal(a, b):
    return a.real < b.real or (a.real == b.real and a.imag <= b.imag)


def _cnan(a):
    return a.real != a.real or a.imag != a.imag


def _cmaximum(a, b):
    if _cnan(a):
        return a
    if _cnan(b):
        return b
    return a if _cgreater_equal(a, b) else b


def _cminimum(a, b):
    if _cnan(a):
        return a
    if _cnan(b):
        return b
    return a if _cless_equal(a, b) else b


def _cfmax(a, b):
    if _cnan(b):
        return a
    if _cnan(a):
        return b
    return a if _cgreater_equal(a, b) else b


def _cfmin(a, b):
    if _cnan(b):
        return a
    if _cnan(a):
        return b
    return a if _cless_equal(a, b) else b


def _clog2(z):
    if z == 0:
        return complex(-math.inf, 0.0)
    return cmath.log(z) / math.log(2.0)


def complex_table():
    """{ufunc: {argument types: implementation}}: the math ufuncs on complex numbers, through
    ``cmath`` (libdevice's functions are real), and NumPy's lexicographic order of complex
    numbers for the comparisons, maximum / minimum and fmax / fmin."""
    from numba.core import types
    pairs = {np.sin: cmath.sin, np.cos: cmath.cos, np.tan: cmath.tan, np.arcsin: cmath.asin,
             np.arccos: cmath.acos, np.arctan: cmath.atan, np.sinh: cmath.sinh,
             np.cosh: cmath.cosh, np.tanh: cmath.tanh, np.arcsinh: cmath.asinh,
             np.arccosh: cmath.acosh, np.arctanh: _complex_atanh, np.exp: cmath.exp,
             np.log: _complex_log, np.log10: _complex_log10, np.sqrt: cmath.sqrt}
    pairs[np.log2] = _clog2
    out = {}
    for uf, fn in pairs.items():
        impl = fn if fn.__module__ == __name__ else _complex_meaning(fn)
        out[uf] = {(types.complex64,): impl, (types.complex128,): impl}
    binary = {np.greater: _cgreater, np.greater_equal: _cgreater_equal, np.less: _cless,
              np.less_equal: _cless_equal, np.maximum: _cmaximum, np.minimum: _cminimum,
              np.fmax: _cfmax, np.fmin: _cfmin}
    for uf, fn in binary.items():
        out[uf] = {(c, d): fn for c in (types.complex64, types.complex128)
                   for d in (types.complex64, types.complex128)}
    floats = (types.float32, types.float64)
    out[max] = {(a, b): _float_max for a in floats for b in floats}
    out[min] = {(a, b): _float_min for a in floats for b in floats}
    return out


def _float_max(a, b):
    """``max(a, b)`` of two floats as numba-cuda computes it: one max.f32 / max.f64, which
    ignores a NaN operand (C's fmax), where Python and Numba's CPU code keep the first argument
    when a comparison with NaN is false."""
    return np.fmax(a, b)


def _float_min(a, b):
    """``min(a, b)`` of two floats: one min.f32 / min.f64, ignoring a NaN operand."""
    return np.fmin(a, b)


def array_table():
    """{NumPy function: device implementation} for what Numba's own array code cannot do
    without a heap: ``np.count_nonzero(a)`` (Numba's compares into a new array), and
    ``np.conjugate`` / ``np.conj`` of a scalar, which Numba's ``np.var`` and ``np.std`` call."""
    table = {np.count_nonzero: _count_nonzero, np.conjugate: _conjugate}
    # np.min / np.max and the NaN-ignoring ones of a whole array (Numba's return views, which
    # its legality check refuses without a heap)
    for fn in (np.min, np.amin):
        table[fn] = _array_min
    for fn in (np.max, np.amax):
        table[fn] = _array_max
    table[np.nanmin] = _array_nanmin
    table[np.nanmax] = _array_nanmax
    return table


def _array_min(a):
    """``np.min(a)``: the smallest element; NaN if any is NaN (NumPy's)."""
    if a.size == 0:
        raise ValueError("zero-size array to reduction operation minimum which has no identity")
    m = a.flat[0]
    for v in a.flat:
        if v != v:
            return v
        if v < m:
            m = v
    return m


def _array_max(a):
    """``np.max(a)``: the largest element; NaN if any is NaN (NumPy's)."""
    if a.size == 0:
        raise ValueError("zero-size array to reduction operation maximum which has no identity")
    m = a.flat[0]
    for v in a.flat:
        if v != v:
            return v
        if v > m:
            m = v
    return m


def _array_nanmin(a):
    """``np.nanmin(a)``: the smallest element that is not NaN; NaN when all are."""
    if a.size == 0:
        raise ValueError("zero-size array to reduction operation fmin which has no identity")
    m = a.flat[0]
    for v in a.flat:
        if m != m or v < m:
            m = v
    return m


def _array_nanmax(a):
    """``np.nanmax(a)``: the largest element that is not NaN; NaN when all are."""
    if a.size == 0:
        raise ValueError("zero-size array to reduction operation fmax which has no identity")
    m = a.flat[0]
    for v in a.flat:
        if m != m or v > m:
            m = v
    return m


def _count_nonzero(a):
    """``np.count_nonzero(a)`` of an array of any layout: how many elements are not zero."""
    n = 0
    for v in a.flat:
        if v != 0:
            n += 1
    return n


def _conjugate(x):
    """``np.conjugate(x)`` of a scalar: the complex conjugate (a real number unchanged)."""
    return x.conjugate()
