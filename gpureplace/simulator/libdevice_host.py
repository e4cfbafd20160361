"""Host implementations of the libdevice functions that hostmath's generic tables leave out:
arithmetic and conversions in the four rounding modes, the integer helpers, and the special
functions (erfinv, normcdf, the Bessel functions...).

``IMPLS`` maps a libdevice name (without ``__nv_``) to a function of arguments already converted
to libdevice's declared types (``hostmath.HostLibdevice`` converts them, and the result back).

Exact operations are computed on exact rationals and rounded once, in the instruction's mode,
as the device's IEEE instructions round them (``rn`` to nearest even, ``rz`` toward zero, ``ru``
up, ``rd`` down; subnormals kept: the non-fast-math code never flushes them).  Float-to-integer
conversions round in their mode and then saturate as the PTX ``cvt`` does (``arrays.cvt_rzi``).
The special functions are computed in decimal arithmetic with enough digits (power series,
continued fractions, asymptotic expansions, Newton's method) and rounded once: correctly
rounded but for rare ties (checked against mpmath), where libdevice is within its documented
1-8 ulps; their float versions are the float64 value rounded.  Where libdevice's own algorithm
decides a result beyond rounding -- ``jn`` / ``yn`` recur from the orders 0 and 1 (one fma a
step), for ``|x| <= n - 1`` ``jn`` is Miller's backward recurrence (NaN for x = 0), ``yn`` of a
tiny subnormal is ``-(2/pi)/x`` -- the same steps run here, from this module's orders 0 and 1.

``nan`` / ``nanf`` (a C string) and ``norm`` / ``rnorm`` (an array) take pointers that device
code cannot pass; their host versions take a ``bytes`` / ``str`` and a sequence.
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np

from .arrays import cvt_rzi, wrap_int

_F16, _F32, _F64 = np.float16, np.float32, np.float64
_I32, _I64, _U32, _U64 = (np.dtype(t) for t in (np.int32, np.int64, np.uint32, np.uint64))
_MODES = ("rn", "rz", "ru", "rd")

# ---------------------------------------------------------------------------------------------
# Exact rounding

#: type -> (precision p, exponent of the smallest subnormal's bit, 2**emax overflows)
_FMT = {_F16: (11, -24, 16), _F32: (24, -149, 128), _F64: (53, -1074, 1024)}


def _ilog2(n, d):
    """floor(log2(n / d)) for positive integers."""
    e = n.bit_length() - d.bit_length()
    if (n < d << e) if e >= 0 else (n << -e < d):
        e -= 1
    return e


def _finish(q, lsb, neg, ftype, mode):
    """The float ``(-1)**neg * q * 2**lsb`` (q already rounded), overflowing as ``mode`` does:
    to infinity where it rounds away from zero, else to the largest finite value."""
    p, _, emax = _FMT[ftype]
    if q.bit_length() + lsb > emax:
        away = mode == "rn" or mode == ("rd" if neg else "ru")
        mag = math.inf if away else math.ldexp((1 << p) - 1, emax - p)
    else:
        mag = math.ldexp(q, lsb)
    return ftype(-mag if neg else mag)


def _up(neg, mode, q, twice_rest, den):
    """Whether a truncated magnitude ``q`` (with remainder ``twice_rest / 2`` out of ``den``,
    not zero) rounds up in ``mode``."""
    if mode == "rn":
        return twice_rest > den or (twice_rest == den and q & 1)
    return mode == ("rd" if neg else "ru")


def round_ratio(num, den, ftype, mode="rn"):
    """The exact rational ``num / den`` (not zero; den > 0) rounded once to ``ftype``."""
    neg = num < 0
    n = -num if neg else num
    p, low, _ = _FMT[ftype]
    lsb = max(_ilog2(n, den) - p + 1, low)
    if lsb >= 0:
        q, r = divmod(n, den << lsb)
        d = den << lsb
    else:
        q, r = divmod(n << -lsb, den)
        d = den
    if r and _up(neg, mode, q, 2 * r, d):
        q += 1
    return _finish(q, lsb, neg, ftype, mode)


def _iroot(n, k):
    """floor(n ** (1/k)) for an integer n >= 0."""
    if k == 2:
        return math.isqrt(n)
    if n < 2:
        return n
    x = 1 << -(-n.bit_length() // k)                 # >= the root
    while True:
        y = ((k - 1) * x + n // x ** (k - 1)) // k
        if y >= x:
            return x
        x = y


def round_root(num, den, k, ftype, mode="rn"):
    """``(num / den) ** (1/k)`` (num, den > 0) rounded once to ``ftype``."""
    p, low, _ = _FMT[ftype]
    lsb = max(_ilog2(num, den) // k - p + 1, low)
    s = k * lsb                                      # root(w) / 2**lsb = root(w / 2**s)
    n, d = (num, den << s) if s >= 0 else (num << -s, den)
    whole, rest = divmod(n, d)
    q = _iroot(whole, k)
    if rest or q ** k != whole:                      # inexact: compare with q + 1/2
        if mode == "rn":
            lhs, rhs = n << k, (2 * q + 1) ** k * d
            up = lhs > rhs or (lhs == rhs and q & 1)
        else:
            up = mode == "ru"
        q += up
    return _finish(q, lsb, False, ftype, mode)


def _ratio(x):
    return float(x).as_integer_ratio()


def _signbit(x):
    return math.copysign(1.0, float(x)) < 0


def _ieee(fn, *args):
    """``fn`` over float64 where the result is exact whatever the mode (an infinity, a NaN,
    a signed zero): IEEE semantics without NumPy's warnings."""
    with np.errstate(all="ignore"):
        return fn(*(_F64(a) for a in args))


# ---------------------------------------------------------------------------------------------
# Arithmetic in a rounding mode (add / sub / mul / div / rcp / sqrt / fma)

def _zero_sum(neg_a, neg_b, mode, ftype):
    """The sign of an exactly zero sum (IEEE 754 6.3): two zeros of one sign keep it, anything
    else is +0, -0 when rounding down."""
    neg = neg_a if neg_a == neg_b else mode == "rd"
    return ftype(-0.0 if neg else 0.0)


def fma(a, b, c, ftype=_F64, mode="rn"):
    """a * b + c rounded once (a finite product never overflows: plus an infinity, that)."""
    if not all(math.isfinite(v) for v in (a, b, c)):
        if math.isfinite(a) and math.isfinite(b) and math.isinf(c):
            return ftype(c)
        return ftype(_ieee(lambda x, y, z: x * y + z, a, b, c))
    (na, da), (nb, db), (nc, dc) = _ratio(a), _ratio(b), _ratio(c)
    num = na * nb * dc + nc * da * db
    if num == 0:
        return _zero_sum(_signbit(a) != _signbit(b), _signbit(c), mode, ftype)
    return round_ratio(num, da * db * dc, ftype, mode)


def _add(a, b, ftype, mode):
    if not (math.isfinite(a) and math.isfinite(b)):
        return ftype(_ieee(np.add, a, b))
    (na, da), (nb, db) = _ratio(a), _ratio(b)
    num = na * db + nb * da
    if num == 0:
        return _zero_sum(_signbit(a), _signbit(b), mode, ftype)
    return round_ratio(num, da * db, ftype, mode)


def _mul(a, b, ftype, mode):
    if not (math.isfinite(a) and math.isfinite(b)) or a == 0 or b == 0:
        return ftype(_ieee(np.multiply, a, b))
    (na, da), (nb, db) = _ratio(a), _ratio(b)
    return round_ratio(na * nb, da * db, ftype, mode)


def _div(a, b, ftype, mode):
    if not (math.isfinite(a) and math.isfinite(b)) or a == 0 or b == 0:
        return ftype(_ieee(np.divide, a, b))
    (na, da), (nb, db) = _ratio(a), _ratio(b)
    if nb < 0:
        na, nb = -na, -nb
    return round_ratio(na * db, da * nb, ftype, mode)


def _sqrt(a, ftype, mode):
    if not math.isfinite(a) or a <= 0:
        return ftype(_ieee(np.sqrt, a))         # +-0, NaN, +inf; negative: NaN
    return round_root(*_ratio(a), 2, ftype, mode)


def _rounded_ops(ftype, mode):
    """{operation: implementation} in one type and mode."""
    return {
        "add": lambda a, b: _add(float(a), float(b), ftype, mode),
        "sub": lambda a, b: _add(float(a), -float(b), ftype, mode),
        "mul": lambda a, b: _mul(float(a), float(b), ftype, mode),
        "div": lambda a, b: _div(float(a), float(b), ftype, mode),
        "rcp": lambda a: _div(1.0, float(a), ftype, mode),
        "sqrt": lambda a: _sqrt(float(a), ftype, mode),
        "fma": lambda a, b, c: fma(float(a), float(b), float(c), ftype, mode),
    }


# ---------------------------------------------------------------------------------------------
# Conversions

def _round_int(x, mode):
    """The finite float ``x`` rounded to an integer in ``mode`` (Python int)."""
    if mode == "rn":
        return round(x)                          # half to even, exact
    return {"rz": math.trunc, "ru": math.ceil, "rd": math.floor}[mode](x)


def _to_int(dtype, mode):
    """cvt.r<mode>i.<int>.<float>: rounded in the mode, then saturated as cvt.rzi saturates
    (NaN: 0 into 32 bits from float32, else the sign bit alone)."""
    def impl(x):
        if math.isfinite(x):
            x = type(x)(_round_int(float(x), mode))   # an integral value: exact in x's type
        return cvt_rzi(x, dtype)
    return impl


def _to_float(bits, signed, ftype, mode):
    """An integer of ``bits`` bits (its bit pattern taken as ``signed`` or not) to ``ftype``."""
    mask = (1 << bits) - 1

    def impl(i):
        v = int(i) & mask
        if signed and v >> (bits - 1):
            v -= 1 << bits
        return ftype(0.0) if v == 0 else round_ratio(v, 1, ftype, mode)
    return impl


def _narrowed(ftype, mode):
    """A float64 to ``ftype`` (float32 / float16) rounded in ``mode``."""
    def impl(x):
        x = float(x)
        if not math.isfinite(x) or x == 0:
            return ftype(x)
        return round_ratio(*_ratio(x), ftype, mode)
    return impl


def _float2half_rn(x):
    """cvt.rn.f16.f32: the float16's bits; a NaN gives the canonical NaN 0x7FFF."""
    if math.isnan(x):
        return 0x7FFF
    return int(np.asarray(_narrowed(_F16, "rn")(x)).view(np.uint16))


def _half2float(h):
    return _F32(np.array(int(h) & 0xFFFF, np.uint16).view(_F16))


def _bits(x, bits):
    return int(np.asarray(x).view({32: np.uint32, 64: np.uint64}[bits]))


def _from_bits(v, ftype):
    itype = {_F32: np.uint32, _F64: np.uint64}[ftype]
    mask = (1 << (8 * np.dtype(ftype).itemsize)) - 1
    return np.array(int(v) & mask, itype).view(ftype)[()]


def _llround(x):
    """C's llround: half away from zero, then cvt.rzi.s64 (saturated; NaN: INT64_MIN)."""
    if math.isfinite(x):
        f = float(x)
        r = math.floor(Fraction(abs(f)) + Fraction(1, 2)) if abs(f) < 2 ** 53 else abs(f)
        x = type(x)(math.copysign(r, f))
    return cvt_rzi(x, _I64)


# ---------------------------------------------------------------------------------------------
# Integer helpers


def _u32(x):
    return int(x) & 0xFFFFFFFF


def _s24(x):
    v = int(x) & 0xFFFFFF
    return v - (1 << 24) if v >> 23 else v


def _byte_perm(x, y, s):
    """prmt.b32 with the selector masked to its low 3 bits per nibble (no sign replication):
    result byte i = byte ``(s >> 4i) & 7`` of the 8-byte value y:x."""
    pool = _u32(x) | _u32(y) << 32
    return sum(((pool >> 8 * ((int(s) >> 4 * i) & 7)) & 0xFF) << 8 * i for i in range(4))


INTEGER = {
    "byte_perm": _byte_perm,
    "sad": lambda x, y, z: abs(int(x) - int(y)) + int(z),
    "usad": lambda x, y, z: abs(_u32(x) - _u32(y)) + _u32(z),
    "mul24": lambda x, y: _s24(x) * _s24(y),
    "umul24": lambda x, y: (_u32(x) & 0xFFFFFF) * (_u32(y) & 0xFFFFFF),
    "hadd": lambda x, y: (int(x) + int(y)) >> 1,
    "rhadd": lambda x, y: (int(x) + int(y) + 1) >> 1,
    "uhadd": lambda x, y: (_u32(x) + _u32(y)) >> 1,
    "urhadd": lambda x, y: (_u32(x) + _u32(y) + 1) >> 1,
}


# ---------------------------------------------------------------------------------------------
# Special functions: decimal helpers

def _context(prec):
    return decimal.Context(prec=prec, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN,
                           traps=[decimal.InvalidOperation, decimal.DivisionByZero])


_D40 = _context(40)
# published constants, to 64 digits
_PI = Decimal("3.141592653589793238462643383279502884197169399375105820974944592")
_EULER = Decimal("0.5772156649015328606065120900824024310421593359399235988057672348")
_ROOT_PI = _PI.sqrt(_context(64))
_INV_SQRT_PI = 0.5641895835477563          # 1/sqrt(pi), for the first Newton steps in floats


def _f32(fn):
    """A function of one float computed in float64 and rounded to float32."""
    def impl(x):
        with np.errstate(over="ignore"):        # (an overflow is the infinity it should be)
            return _F32(fn(float(x)))
    return impl


# ---------------------------------------------------------------------------------------------
# erfcx, erfinv, erfcinv, normcdf, normcdfinv

def _erf_sum(d):
    """sum_k 2^k d^(2k+1) / (2k+1)!! = erf(d) exp(d*d) sqrt(pi)/2 (A&S 7.1.6: no cancellation),
    in the current decimal context."""
    sq = d * d
    term = total = d
    k = 0
    while abs(term) > abs(total) * Decimal(10) ** -(decimal.getcontext().prec + 2):
        k += 1
        term = term * 2 * sq / (2 * k + 1)
        total += term
    return total


def _erfcx_d(d):
    """exp(d*d) erfc(d) for a Decimal d >= 0, to about 40 digits: below 5 as
    exp(d*d) - 2/sqrt(pi) _erf_sum(d) (with the digits the difference cancels added), above by
    Laplace's continued fraction 1 / (sqrt(pi) (d + (1/2) / (d + (2/2) / (d + (3/2) / ...))))
    (Lentz's method)."""
    if d < 5:
        with decimal.localcontext(_context(45 + int(0.4343 * float(d) ** 2))):
            return +((d * d).exp() - 2 * _erf_sum(d) / _ROOT_PI)
    with decimal.localcontext(_context(45)):
        f, c, dd = d, d, Decimal(0)
        k = 0
        while True:
            k += 1
            a = Decimal(k) / 2
            dd = 1 / (d + a * dd)
            c = d + a / c
            step = c * dd
            f *= step
            if abs(step - 1) < Decimal("1e-44"):
                return 1 / (_ROOT_PI * f)


def erfcx(x):
    """exp(x*x) erfc(x); for x < 0, 2 exp(x*x) - erfcx(-x)."""
    x = float(x)
    if math.isnan(x):
        return x
    if x == math.inf:
        return 0.0
    if x < -26.7:
        return math.inf                          # 2 exp(x*x) > DBL_MAX
    with decimal.localcontext(_D40):
        d = Decimal(x)
        return float(2 * (d * d).exp() - _erfcx_d(-d) if x < 0 else _erfcx_d(d))


def _erfc_solve(t):
    """y > 0 (a Decimal) with erfc(y) = t, for 0 < t <= 0.5: Newton on
    g(y) = log(erfc(y)) - log(t), first in floats, then to 40 digits in decimal
    (g' = -2 / (sqrt(pi) erfcx(y)); g is concave, so the iterates approach monotonically)."""
    lt = math.log(t)
    u = -lt
    y = math.sqrt(u - 0.5 * math.log(math.pi * u))       # erfc(y) ~ exp(-y*y) / (y sqrt(pi))
    for _ in range(100):
        e = math.exp(y * y) * math.erfc(y) if y < 26 else float(_erfcx_d(Decimal(y)))
        step = (math.log(e) - y * y - lt) * e / (2 * _INV_SQRT_PI)
        y += step
        if abs(step) <= 2.0 ** -40 * y:
            break
    with decimal.localcontext(_D40):
        y, lt = Decimal(y), Decimal(t).ln()
        for _ in range(3):
            e = _erfcx_d(y)
            y += (e.ln() - y * y - lt) * e * _ROOT_PI / 2
        return y


def _erfinv_d(x):
    """erfinv(x) (a Decimal) for |x| <= 0.5: Newton on erf(y) - x, first in floats, then in
    decimal."""
    if abs(x) < 2.0 ** -30:
        y = x / (2 * _INV_SQRT_PI)               # erfinv(x) = x sqrt(pi)/2 (1 + pi x^2/12 ...)
    else:
        y = x / (2 * _INV_SQRT_PI) * (1 + math.pi / 12 * x * x)
        for _ in range(100):
            step = (math.erf(y) - x) * math.exp(y * y) / (2 * _INV_SQRT_PI)
            y -= step
            if abs(step) <= 2.0 ** -40 * abs(y):
                break
    with decimal.localcontext(_context(60)):
        y, x = Decimal(y), Decimal(x)
        for _ in range(3):                       # erf(y) - x over erf'(y)
            y -= _erf_sum(y) - x * (y * y).exp() * _ROOT_PI / 2
        return y


def _erfinv_any(x):
    """erfinv(x) as a Decimal, or a float for the edges."""
    a = abs(x)
    if not a <= 1:
        return math.nan                          # NaN, |x| > 1
    if a == 1:
        return math.copysign(math.inf, x)
    if x == 0:
        return x
    if a > 0.5:
        return _erfc_solve(1.0 - a).copy_sign(Decimal(x))      # 1 - a: exact
    return _erfinv_d(x)


def _erfcinv_any(t):
    if not 0 <= t <= 2:
        return math.nan
    if t in (0.0, 2.0):
        return math.inf if t == 0 else -math.inf
    if t <= 0.5:
        return _erfc_solve(t)
    if t < 1.5:
        return _erfinv_any(1.0 - t)              # exact subtraction
    return -_erfc_solve(2.0 - t)


def erfinv(x):
    return float(_erfinv_any(float(x)))


def erfcinv(t):
    return float(_erfcinv_any(float(t)))


_SQRT2_D = Decimal(2).sqrt(_D40)


def normcdf(x):
    """Phi(x) = erfc(-x/sqrt 2) / 2 = exp(-x*x/2) erfcx(-x/sqrt 2) / 2, in decimal."""
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return x if math.isnan(x) else (0.0 if x < 0 else 1.0)
    with decimal.localcontext(_D40):
        t = Decimal(x) / _SQRT2_D
        tail = (-(t * t)).exp() * _erfcx_d(abs(t)) / 2
        return float(1 - tail if x > 0 else tail)


def normcdfinv(p):
    p = float(p)
    if not 0 <= p <= 1:
        return math.nan
    if p in (0.0, 1.0):
        return math.inf if p else -math.inf
    y = _erfcinv_any(2 * p)                      # 2 p: exact
    with decimal.localcontext(_D40):
        return float(-_SQRT2_D * y) if y else 0.0


# ---------------------------------------------------------------------------------------------
# Bessel functions of orders 0 and 1 (the others recur from them, as libdevice's do)

def _series01(n, x, want_y):
    """J_n(x) or Y_n(x), n in (0, 1), 0 < x <= 50, from the power series in decimal, with
    enough digits for the cancellation (the largest term is about e**x) and 40 beyond:
    Y_n = (1/pi) [2 (ln(x/2) + gamma) J_n - S1 - sum_k (H_k + H_(n+k)) t_k] (A&S 9.1.11), where
    t_k = (-x^2/4)^k (x/2)^n / (k! (n+k)!) are J_n's terms and S1 = 2/x for n = 1."""
    with decimal.localcontext(_context(40 + int(0.4343 * x))):
        h = Decimal(x) / 2
        q = -(h * h)
        term = h if n else Decimal(1)
        j = term
        hs = Decimal(0) if n == 0 else Decimal(1)     # H_k + H_(n+k) at k = 0
        weighted = hs * term
        biggest, tiny = abs(term), Decimal(10) ** -(decimal.getcontext().prec + 2)
        k = 0
        while True:
            k += 1
            term = term * q / (k * (n + k))
            hs += Decimal(1) / k + Decimal(1) / (n + k)
            j += term
            weighted += hs * term
            biggest = max(biggest, abs(term))
            if k > h and abs(term) < biggest * tiny:
                break
        if not want_y:
            return float(j)
        y = 2 * (h.ln() + _EULER) * j - weighted - (1 / h if n else 0)
        return float(y / _PI)


_SERIES_UP_TO = 50        # J_0 ... Y_1 from their power series up to here, asymptotic above
_pi_digits = [0, None]      # (digits, pi) computed so far


def _pi(digits):
    """pi to ``digits`` digits and more, for reducing large arguments (Machin's formula in
    integers; kept for the next call)."""
    if _pi_digits[0] < digits:
        unity = 10 ** (digits + 20)

        def arccot(m):                           # arctan(1/m) * unity
            total = term = unity // m
            k, sign = 1, -1
            while term:
                term //= m * m
                total += sign * (term // (2 * k + 1))
                k, sign = k + 1, -sign
            return total
        _pi_digits[:] = [digits, Decimal(4 * (4 * arccot(5) - arccot(239))).scaleb(-digits - 20)]
    return _pi_digits[1]


def _cos_sin(x, offset):
    """(cos, sin) of x - offset * pi/4 (x a float, offset an integer), the argument reduced with
    as many digits of pi as x needs, the series summed to 45 digits."""
    d = Decimal(x)
    with decimal.localcontext(_context(50 + max(d.adjusted(), 0))):
        quarter = _pi(50 + max(d.adjusted(), 0)) / 4
        chi = d - offset * quarter
        k = int((chi / (2 * quarter)).to_integral_value())
        r = +(chi - k * 2 * quarter)            # |r| <= pi/4
    with decimal.localcontext(_context(45)):
        r = +r
        c = s = Decimal(0)
        term, i = Decimal(1), 0                  # r**i / i!
        while abs(term) > Decimal("1e-50"):
            signed = -term if i // 2 % 2 else term
            if i % 2:
                s += signed
            else:
                c += signed
            i += 1
            term = term * r / i
        return ((c, s), (-s, c), (-c, -s), (s, -c))[k % 4]


def _hankel01(n, x):
    """(J_n(x), Y_n(x)) for n in (0, 1) and x > 50 from Hankel's asymptotic expansion
    sqrt(2/(pi x)) (P cos chi -+ Q sin chi), chi = x - (2n + 1) pi/4 (A&S 9.2.5), in decimal;
    the series' smallest terms are below e**-2x."""
    with decimal.localcontext(_context(45)):
        mu = 4 * n * n
        eight_x = 8 * Decimal(x)
        p = q = Decimal(0)
        term = Decimal(1)
        for k in range(200):
            if k:
                term = term * (mu - (2 * k - 1) ** 2) / (k * eight_x)
            if k % 2 == 0:
                p += term if k % 4 == 0 else -term
            else:
                q += term if k % 4 == 1 else -term
            if abs(term) < Decimal("1e-45"):
                break
        c, s = _cos_sin(x, 2 * n + 1)
        amp = (2 / (_PI * Decimal(x))).sqrt()
        return float(amp * (p * c - q * s)), float(amp * (p * s + q * c))


def _j01(n, x):
    x = float(x)
    if math.isnan(x):
        return x
    a = abs(x)
    if math.isinf(a):
        r = 0.0
    elif a == 0:
        r = 1.0 - n
    elif a <= _SERIES_UP_TO:
        r = _series01(n, a, False)
    else:
        r = _hankel01(n, a)[0]
    return -r if n and _signbit(x) else r        # J_1 is odd (J_1(-0) = -0)


def _y01(n, x):
    x = float(x)
    if not x >= 0:
        return math.nan                          # NaN, negative, -inf
    if x == 0:
        return -math.inf
    if math.isinf(x):
        return 0.0
    if x <= _SERIES_UP_TO:
        return _series01(n, x, True)
    return _hankel01(n, x)[1]


def _i32(v):
    return int(wrap_int(v, _I32))


def _cvt_s32(f):
    """cvt.rzi.s32 of a float (saturated; NaN: INT_MIN from a double, 0 from a float)."""
    return int(cvt_rzi(f, _I32))


def jn(n, x):
    """libdevice's jn: NaN for n < 0; orders 0 and 1; for |x| > n - 1 the forward recurrence
    J_(i+1) = (2i/x) J_i - J_(i-1), each step one fma; else Miller's backward recurrence from
    2*floor((n + int(sqrt(60 n))) / 2), rescaled by 1e-15 past 1e15, normalised by
    J_0 + 2 (J_2 + J_4 + ...) = 1 (which gives NaN at x = 0, where 2/x is infinite)."""
    n, x = int(n), float(x)
    if n < 0:
        return math.nan
    if n < 2:
        return _j01(n, x)
    with np.errstate(all="ignore"):
        two_x = float(_F64(2.0) / _F64(x))
        if abs(x) > n - 1:
            prev, cur = _j01(0, x), _j01(1, x)
            for i in range(1, n):
                prev, cur = cur, float(fma(i * two_x, cur, -prev))
            return cur
        m = _i32(n + _cvt_s32(_F64(math.sqrt(_i32(60 * n))) if _i32(60 * n) >= 0
                              else _F64(math.nan))) >> 1 << 1
        above, lam, total, cur = 0.0, 0.0, 0.0, 1.0
        for i in range(m, 0, -1):
            below = float(fma(i * two_x, cur, -above))
            if abs(float(_F32(below))) > 1e15:
                below, above, lam, total = below * 1e-15, cur * 1e-15, lam * 1e-15, total * 1e-15
            else:
                above = cur
            if i - 1 == n:
                lam = below
            if i & 1:
                total += 2.0 * below
            cur = below
        return float(_F64(lam) / _F64(total - cur))


def jnf(n, x):
    """libdevice's jnf: as jn in float32, forward for |x| > n (n + 1 from n = 5 on), Miller's
    recurrence from 2*floor((n + sqrt(40 n)) / 2) otherwise."""
    n, x = int(n), _F32(x)
    if n < 0:
        return _F32(math.nan)
    if n < 2:
        return _F32(_j01(n, x))
    with np.errstate(all="ignore"):
        if abs(x) > _F32(_i32(n + (n > 4))):
            two_x = _F32(2) / x
            prev, cur = _F32(_j01(0, x)), _F32(_j01(1, x))
            for i in range(1, n):
                prev, cur = cur, fma(_F32(i) * cur, two_x, -prev, _F32)
            return cur
        m = _i32(n + _cvt_s32(np.sqrt(_F32(_i32(40 * n))))) >> 1 << 1
        above, lam, total, cur = _F32(0), _F32(0), _F32(0), _F32(1)
        big, shrink = _F32(1e15), _F32(1e-15)
        for i in range(m, 0, -1):
            below = fma(cur, _F32(2 * i) / x, -above, _F32)
            if abs(below) > big:
                below, above, lam, total = below * shrink, cur * shrink, lam * shrink, \
                    total * shrink
            else:
                above = cur
            if i - 1 == n:
                lam = below
            if i & 1:
                total = total + _F32(2) * below
            cur = below
        return lam / (total - cur)


#: yn's threshold: below it libdevice returns -(2/pi)/x (bits 0x000730D67819E8D2, ~1e-308)
_YN_TINY = float(_from_bits(0x000730D67819E8D2, _F64))
_MINUS_2_PI = float(_from_bits(0xBFE45F306DC9C883, _F64))      # -2/pi


def yn(n, x):
    """libdevice's yn: NaN for n < 0 and x < 0; orders 0 and 1; -(2/pi)/x below ~1e-308 (+inf
    at -0); else the forward recurrence (stable for Y), -inf where it overflows to NaN."""
    n, x = int(n), float(x)
    if n < 0:
        return math.nan
    if n < 2:
        return _y01(n, x)
    if not x >= 0:
        return math.nan
    with np.errstate(all="ignore"):
        if x < _YN_TINY:
            return float(_F64(_MINUS_2_PI) / _F64(x))
        two_x = 2.0 / x
        prev, cur = _y01(0, x), _y01(1, x)
        for i in range(1, n):
            prev, cur = cur, float(fma(i * two_x, cur, -prev))
        return -math.inf if math.isnan(cur) else cur


def ynf(n, x):
    """libdevice's ynf: as yn in float32; zero and subnormal x give -inf."""
    n, x = int(n), _F32(x)
    if n < 0:
        return _F32(math.nan)
    if n < 2:
        return _F32(_y01(n, x))
    if not x >= 0:
        return _F32(math.nan)
    if x < _F32(2.0 ** -126):
        return _F32(-math.inf)
    with np.errstate(all="ignore"):
        two_x = _F32(2) / x
        prev, cur = _F32(_y01(0, x)), _F32(_y01(1, x))
        for i in range(1, n):
            prev, cur = cur, fma(_F32(i) * two_x, cur, -prev, _F32)
        return _F32(-math.inf) if np.isnan(cur) else cur


def _bessel_i(n, x):
    """I_0 / I_1 from their power series (no cancellation) in decimal; even / odd."""
    x = float(x)
    a = abs(x)
    if math.isnan(x):
        return x
    if a > 720:                                  # (I_n(713.99) overflows)
        r = math.inf
    elif a == 0:
        r = 1.0 - n
    else:
        with decimal.localcontext(_D40):
            h = Decimal(a) / 2
            q = h * h
            term = h if n else Decimal(1)
            total = term
            k = 0
            while k < h or term > total * Decimal("1e-42"):     # (terms peak at k ~ x/2)
                k += 1
                term = term * q / (k * (n + k))
                total += term
            r = float(total)
    return math.copysign(r, x) if n else r


# ---------------------------------------------------------------------------------------------
# Roots and norms (correctly rounded: libdevice's are within 1-2 ulps), logb, scalbn, remquo

def _norm_of(xs, ftype, reciprocal):
    """sqrt(sum x^2) or its reciprocal: an infinity wins over a NaN, as in C's hypot."""
    xs = [float(v) for v in xs]
    if any(math.isinf(v) for v in xs):
        return ftype(0.0 if reciprocal else math.inf)
    if any(math.isnan(v) for v in xs):
        return ftype(math.nan)
    total = sum(Fraction(v) ** 2 for v in xs)
    if total == 0:
        return ftype(math.inf if reciprocal else 0.0)
    n, d = total.numerator, total.denominator
    return round_root(d, n, 2, ftype) if reciprocal else round_root(n, d, 2, ftype)


def _norm(ftype, reciprocal, count=None):
    if count is None:                            # norm(dim, a): the first dim elements of a
        return lambda dim, a: _norm_of(list(a)[:max(int(dim), 0)], ftype, reciprocal)
    return lambda *xs: _norm_of(xs, ftype, reciprocal)


def _rcbrt(ftype):
    def impl(x):
        x = float(x)
        if math.isnan(x) or x == 0 or math.isinf(x):
            return ftype(_ieee(lambda v: 1 / np.cbrt(v), x))     # NaN, +-inf, +-0
        n, d = _ratio(abs(x))
        return ftype(math.copysign(round_root(d, n, 3, ftype), x))
    return impl


def _frsqrt_rn(x):
    """1/sqrt(x) correctly rounded (float32): +-0 gives +-inf, negative NaN."""
    x = float(x)
    if not x > 0 or math.isinf(x):
        return _F32(_ieee(lambda v: 1 / np.sqrt(v), x))
    n, d = _ratio(x)
    return round_root(d, n, 2, _F32)


def _logb(ftype):
    def impl(x):
        x = float(x)
        if math.isnan(x) or math.isinf(x):
            return ftype(abs(x))
        if x == 0:
            return ftype(-math.inf)
        return ftype(math.frexp(x)[1] - 1)
    return impl


def _scalbn(ftype):
    """x * 2**n rounded once (libdevice scales by up to four powers of two, which rounds only
    at the last, as the exponent is clamped to where that still gives the same result)."""
    def impl(x, n):
        x = float(x)
        if not math.isfinite(x) or x == 0:
            return ftype(x)
        num, den = _ratio(x)
        e = max(min(int(n), 2200), -2200)
        return round_ratio(num << e, den, ftype) if e >= 0 else round_ratio(num, den << -e, ftype)
    return impl


def _remquo(ftype):
    """(x - q y, low three bits of q with the sign of x / y), q = x / y rounded to nearest even
    (both exact); NaN and a quotient of 0 for a NaN, x infinite or y zero; (x, 0) for y
    infinite."""
    def impl(x, y):
        fx, fy = float(x), float(y)
        if math.isnan(fx) or math.isnan(fy):
            return ftype(fx + fy), wrap_int(0, _I32)
        if math.isinf(fx) or fy == 0:
            return ftype(math.nan), wrap_int(0, _I32)
        if math.isinf(fy):
            return ftype(fx), wrap_int(0, _I32)
        q = round(Fraction(abs(fx)) / Fraction(abs(fy))) & 7
        return ftype(math.remainder(fx, fy)), wrap_int(-q if _signbit(fx) != _signbit(fy)
                                                       else q, _I32)
    return impl


# ---------------------------------------------------------------------------------------------
# nan, rcp64h

def _nan_payload(tagp):
    """The integer libdevice's nan() reads from ``tagp``: "0x..." hexadecimal, "0..." octal,
    else decimal; 0 where a character is not a digit, all ones where it overflows 64 bits."""
    if tagp is None:
        return 0
    s = tagp.encode() if isinstance(tagp, str) else bytes(int(c) & 0xFF for c in tagp)
    s = s.split(b"\0", 1)[0]
    if s[:1] == b"0" and s[1:2] in (b"x", b"X"):
        digits, base = s[2:].lstrip(b"0"), 16
    elif s[:1] == b"0":
        digits, base = s[1:].lstrip(b"0"), 8
    else:
        digits, base = s, 10
    value, overflow = 0, False
    for c in digits.decode("latin-1").lower():
        if not c.isascii() or not c.isalnum() or int(c, 36) >= base:
            return 0
        overflow = overflow or value * base + int(c, 36) >= 1 << 64
        value = (value * base + int(c, 36)) & ((1 << 64) - 1)
    return (1 << 64) - 1 if overflow else value


def _nan(ftype):
    quiet, mask = {_F64: (0x7FF8 << 48, (1 << 52) - 1), _F32: (0x7FC00000, (1 << 22) - 1)}[ftype]
    return lambda tagp=None: _from_bits(quiet | _nan_payload(tagp) & mask, ftype)


def _rcp64h(x):
    """rcp.approx.ftz.f64: an approximate reciprocal of x's upper 32 bits, itself with its lower
    32 bits zero (the device's bits may differ in the last ones: approximate); subnormal in
    or out flushes to zero."""
    b = _bits(_F64(x), 64) & ~0xFFFFFFFF
    top = float(_from_bits(b, _F64))
    if top != 0 and abs(top) < 2.0 ** -1022:
        top = math.copysign(0.0, top)
    r = _ieee(np.divide, 1.0, top)
    if abs(r) < 2.0 ** -1022:
        r = math.copysign(0.0, r)
    return _from_bits(_bits(_F64(r), 64) & ~0xFFFFFFFF, _F64) if math.isfinite(r) else _F64(r)


# ---------------------------------------------------------------------------------------------
# The table

def _table():
    t = dict(INTEGER)
    for mode in _MODES:
        for prefix, ftype, fma_names in (("f", _F32, ("fmaf", "fmaf_ieee")), ("d", _F64, ("fma",))):
            ops = _rounded_ops(ftype, mode)
            for op in ("add", "sub", "mul", "div", "rcp", "sqrt"):
                t[f"{prefix}{op}_{mode}"] = ops[op]
            for name in fma_names:
                t[f"{name}_{mode}"] = ops["fma"]
        for src in ("float", "double"):
            for dst, dtype in (("int", _I32), ("uint", _U32), ("ll", _I64), ("ull", _U64)):
                t[f"{src}2{dst}_{mode}"] = _to_int(dtype, mode)
        for src, bits, signed in (("int", 32, True), ("uint", 32, False), ("ll", 64, True),
                                  ("ull", 64, False)):
            t[f"{src}2float_{mode}"] = _to_float(bits, signed, _F32, mode)
            if bits == 64 or mode == "rn":       # (32-bit integers: exact, only _rn exists)
                t[f"{src}2double_{mode}"] = _to_float(bits, signed, _F64, mode)
        t[f"double2float_{mode}"] = _narrowed(_F32, mode)
    t.update({
        "float2half_rn": _float2half_rn, "half2float": _half2float,
        "float_as_uint": lambda x: _bits(_F32(x), 32),
        "uint_as_float": lambda x: _from_bits(x, _F32),
        "double2hiint": lambda x: _bits(_F64(x), 64) >> 32,
        "double2loint": lambda x: _bits(_F64(x), 64) & 0xFFFFFFFF,
        "hiloint2double": lambda hi, lo: _from_bits(_u32(hi) << 32 | _u32(lo), _F64),
        "llrint": _to_int(_I64, "rn"), "llrintf": _to_int(_I64, "rn"),
        "llround": _llround, "llroundf": _llround,
        "rcp64h": _rcp64h, "frsqrt_rn": _frsqrt_rn,
        "nan": _nan(_F64), "nanf": _nan(_F32),
        "jn": jn, "jnf": jnf, "yn": yn, "ynf": ynf,
        "remquo": _remquo(_F64), "remquof": _remquo(_F32),
    })
    double = {"erfinv": erfinv, "erfcinv": erfcinv, "erfcx": erfcx, "normcdf": normcdf,
              "normcdfinv": normcdfinv, "j0": lambda x: _j01(0, x), "j1": lambda x: _j01(1, x),
              "y0": lambda x: _y01(0, x), "y1": lambda x: _y01(1, x),
              "cyl_bessel_i0": lambda x: _bessel_i(0, x),
              "cyl_bessel_i1": lambda x: _bessel_i(1, x)}
    for name, fn in double.items():
        t[name] = fn
        t[name + "f"] = _f32(fn)
    for suffix, ftype in (("", _F64), ("f", _F32)):
        t["rcbrt" + suffix] = _rcbrt(ftype)
        t["rhypot" + suffix] = _norm(ftype, True, 2)
        t["logb" + suffix] = _logb(ftype)
        t["scalbn" + suffix] = _scalbn(ftype)
        for reciprocal, prefix in ((False, ""), (True, "r")):
            t[prefix + "norm" + suffix] = _norm(ftype, reciprocal)
            t[prefix + "norm3d" + suffix] = _norm(ftype, reciprocal, 3)
            t[prefix + "norm4d" + suffix] = _norm(ftype, reciprocal, 4)
    return t


#: libdevice name -> host implementation over arguments of the declared types
IMPLS = _table()
