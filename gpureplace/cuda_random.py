"""Random numbers in kernels: numba-cuda's ``numba.cuda.random``, as ``gpureplace.cuda.random``.

    from gpureplace import cuda
    from gpureplace.cuda.random import (create_xoroshiro128p_states,
                                        xoroshiro128p_uniform_float32)

    @cuda.jit
    def pi_hits(states, n, hits):
        t = cuda.grid(1)
        if t < hits.size:
            inside = 0
            for _ in range(n):
                x = xoroshiro128p_uniform_float32(states, t)
                y = xoroshiro128p_uniform_float32(states, t)
                if x * x + y * y <= 1.0:
                    inside += 1
            hits[t] = inside

    states = create_xoroshiro128p_states(threads, seed=42)

The generator is xoroshiro128+ (Blackman and Vigna; 128 bits of state, period 2**128 - 1), one
per thread, stored in an array of ``xoroshiro128p_dtype`` records (two uint64 fields ``s0`` and
``s1``).  The seed goes through splitmix64; state ``i`` is state ``i - 1`` moved on by 2**64 steps
(the generator's jump polynomial), so threads draw from non-overlapping stretches of one sequence.
Seeding, stepping, jumping, the float conversions and the Box-Muller normal follow numba-cuda's
``numba/cuda/random.py`` operation for operation, so a seed gives numba-cuda's numbers bit for
bit.  (One inherited quirk: ``xoroshiro128p_normal_float64`` is computed from two float32
uniforms, with the logarithm taken in float32, exactly as numba-cuda does.)

The device functions are plain Python functions: a kernel that calls them compiles them, and the
simulator runs them as they are.  The states are made on the host with NumPy (the jump is a
linear map over GF(2), so all states come from a few table-driven passes over the array, not
one jump after another) and copied to the GPU as a CuPy array; under the simulator backend the
NumPy array itself is returned.
"""

from __future__ import annotations

import math
import sys
import threading

import numpy as np
from numba import float32, float64, int64, uint32, uint64
from numba.np.numpy_support import from_dtype

from . import hostapi as _hostapi

__all__ = [
    "xoroshiro128p_dtype", "xoroshiro128p_type",
    "create_xoroshiro128p_states", "init_xoroshiro128p_states", "init_xoroshiro128p_states_cpu",
    "init_xoroshiro128p_state", "xoroshiro128p_next", "xoroshiro128p_jump",
    "uint64_to_unit_float32", "uint64_to_unit_float64",
    "xoroshiro128p_uniform_float32", "xoroshiro128p_uniform_float64",
    "xoroshiro128p_normal_float32", "xoroshiro128p_normal_float64",
]

#: One generator's state: the record type of the states array (as numba-cuda's).
xoroshiro128p_dtype = np.dtype([("s0", np.uint64), ("s1", np.uint64)], align=True)
#: Its Numba type, for explicit kernel signatures: ``xoroshiro128p_type[::1]``.
xoroshiro128p_type = from_dtype(xoroshiro128p_dtype)

# splitmix64's constants (the golden-ratio increment and the two multipliers of its finaliser)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
# The jump polynomial of xoroshiro128+ (55, 14, 36): 2**64 steps at once.  Low word first.
_JUMP_LO = np.uint64(0xBEAC0467EBA5FACB)
_JUMP_HI = np.uint64(0xD86B048B86AA9922)
_TWO_POW_MINUS_53 = np.float64(2.0 ** -53)
_TWO_PI_F32 = np.float32(2 * math.pi)
_TWO_PI_F64 = np.float64(2 * math.pi)

_U64 = (1 << 64) - 1


# =============================================================================================
# Device functions.  Every integer is cast to its width explicitly: uint64 mixed with a signed
# literal would otherwise type as int64 or float64 (Numba's rules).  The math is NumPy's ufuncs,
# which compile to the same libdevice calls as ``math.*`` (logf, cosf, sqrt.rn.f32...), so that
# the functions also mean the same run as plain Python on NumPy scalars: the simulator runs
# gpureplace's own functions that way, and they can be called on the host with NumPy arrays of
# states, like numba-cuda's (integer wrap-around then raises NumPy's overflow RuntimeWarning).


def init_xoroshiro128p_state(states, index, seed):
    """Seed ``states[index]`` from a 64-bit ``seed`` through splitmix64 (both words alike)."""
    index = int64(index)
    z = uint64(seed) + _GOLDEN
    z = (z ^ (z >> uint32(30))) * _MIX1
    z = (z ^ (z >> uint32(27))) * _MIX2
    z = z ^ (z >> uint32(31))
    states[index]["s0"] = z
    states[index]["s1"] = z


def _rotl(x, k):
    """``x`` (uint64) rotated left by ``k`` (uint32, 0 < k < 64) bits."""
    return (x << k) | (x >> (uint32(64) - k))


def xoroshiro128p_next(states, index):
    """The next uint64 of generator ``states[index]``, which moves one step on."""
    index = int64(index)
    a = states[index]["s0"]
    b = states[index]["s1"]
    out = a + b
    b = b ^ a
    states[index]["s0"] = _rotl(a, uint32(55)) ^ b ^ (b << uint32(14))
    states[index]["s1"] = _rotl(b, uint32(36))
    return out


def xoroshiro128p_jump(states, index):
    """Move generator ``states[index]`` on by 2**64 steps."""
    index = int64(index)
    acc0 = uint64(0)
    acc1 = uint64(0)
    for bit in range(128):
        word = _JUMP_LO if bit < 64 else _JUMP_HI
        if (word >> uint32(bit & 63)) & uint64(1):
            acc0 ^= states[index]["s0"]
            acc1 ^= states[index]["s1"]
        xoroshiro128p_next(states, index)
    states[index]["s0"] = acc0
    states[index]["s1"] = acc1


def uint64_to_unit_float64(x):
    """The top 53 bits of uint64 ``x`` as a float64 in [0, 1)."""
    x = uint64(x)
    return float64(x >> uint32(11)) * _TWO_POW_MINUS_53


def uint64_to_unit_float32(x):
    """``uint64_to_unit_float64(x)`` rounded to float32 (in [0, 1]: the float32 rounding of
    values within 2**-25 of 1 gives 1.0, as in numba-cuda)."""
    return float32(uint64_to_unit_float64(x))


def xoroshiro128p_uniform_float32(states, index):
    """A float32 uniform in [0, 1) from ``states[index]`` (one step)."""
    return uint64_to_unit_float32(xoroshiro128p_next(states, index))


def xoroshiro128p_uniform_float64(states, index):
    """A float64 uniform in [0, 1) from ``states[index]`` (one step)."""
    return uint64_to_unit_float64(xoroshiro128p_next(states, index))


def xoroshiro128p_normal_float32(states, index):
    """A standard normal float32 (Box-Muller, the cosine half) from ``states[index]`` (two
    steps)."""
    u1 = xoroshiro128p_uniform_float32(states, index)
    u2 = xoroshiro128p_uniform_float32(states, index)
    return np.sqrt(-float32(2.0) * np.log(u1)) * np.cos(_TWO_PI_F32 * u2)


def xoroshiro128p_normal_float64(states, index):
    """A standard normal float64 (Box-Muller, the cosine half) from ``states[index]`` (two
    steps).  As in numba-cuda, the two uniforms are float32 and the logarithm is float32's."""
    u1 = xoroshiro128p_uniform_float32(states, index)
    u2 = xoroshiro128p_uniform_float32(states, index)
    return np.sqrt(-float64(2.0) * np.log(u1)) * np.cos(_TWO_PI_F64 * u2)


# =============================================================================================
# Host: the states, with NumPy.
#
# A step of xoroshiro128+ (and so a jump) is linear over GF(2) on the 128-bit state.  A linear
# map is kept as its 128 columns (the images of the basis states: bit j of s0 for j < 64, bit
# j - 64 of s1 after), and applied to many states at once through 16 tables of 256 entries, one
# per byte of the state.  J**(2**k), J the jump, comes from squaring; state i is J**i applied
# to the seeded state, so states [m, 2m) are J**m applied to states [0, m).


def _step(s0, s1):
    """One step of every state in the uint64 arrays (s0, s1) (the output is not needed)."""
    s1 = s1 ^ s0
    r0 = ((s0 << np.uint64(55)) | (s0 >> np.uint64(9))) ^ s1 ^ (s1 << np.uint64(14))
    r1 = (s1 << np.uint64(36)) | (s1 >> np.uint64(28))
    return r0, r1


def _jump_all(s0, s1):
    """The jump (2**64 steps) of every state in (s0, s1), by the polynomial."""
    acc0 = np.zeros_like(s0)
    acc1 = np.zeros_like(s1)
    for bit in range(128):
        if (int(_JUMP_HI if bit >= 64 else _JUMP_LO) >> (bit & 63)) & 1:
            acc0 ^= s0
            acc1 ^= s1
        s0, s1 = _step(s0, s1)
    return acc0, acc1


def _tables(cols):
    """Byte tables of the linear map with columns ``cols`` ((128, 2) uint64): ``t[p, v]`` is
    the image of the state whose byte p is v and every other byte 0."""
    t = np.zeros((16, 256, 2), dtype=np.uint64)
    for p in range(16):
        for k in range(8):
            t[p, 1 << k:2 << k] = t[p, :1 << k] ^ cols[8 * p + k]
    return t


def _apply(tables, s0, s1):
    """The linear map given by its byte ``tables`` applied to every state in (s0, s1)."""
    r = np.zeros(s0.shape + (2,), dtype=np.uint64)
    for p in range(16):
        word = s0 if p < 8 else s1
        byte = ((word >> np.uint64(8 * (p & 7))) & np.uint64(0xFF)).astype(np.intp)
        r ^= tables[p][byte]
    return r[..., 0], r[..., 1]


_jump_powers = []       # tables of J**(2**k), k = 0, 1, ..., made as they are needed
_jump_powers_lock = threading.Lock()
_BIT = np.arange(128)


def _jump_power_tables(k):
    """Byte tables of J**(2**k)."""
    if k < len(_jump_powers):
        return _jump_powers[k]
    with _jump_powers_lock:
        _extend_jump_powers(k)
    return _jump_powers[k]


def _extend_jump_powers(k):
    while len(_jump_powers) <= k:
        if not _jump_powers:
            basis = np.zeros((128, 2), dtype=np.uint64)
            for j in range(128):
                basis[j, j >> 6] = np.uint64(1 << (j & 63))
            c0, c1 = _jump_all(basis[:, 0], basis[:, 1])
        else:                                # J**(2**(k-1)) squared: applied to its columns
            prev = _jump_powers[-1]
            cols = prev[_BIT >> 3, 1 << (_BIT & 7)]          # column j: byte j // 8, bit j % 8
            c0, c1 = _apply(prev, cols[:, 0], cols[:, 1])
        _jump_powers.append(_tables(np.stack([c0, c1], axis=1)))


def _splitmix64(seed):
    z = (seed + 0x9E3779B97F4A7C15) & _U64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _U64
    return z ^ (z >> 31)


def _as_u64(value, what):
    """``value`` as numba-cuda's ``uint64(value)`` takes it: an integer from -2**63 (an int64,
    whose negatives wrap) to 2**64 - 1 (a uint64).  Outside that range numba-cuda refuses it
    (its @njit seeding function types the argument: "Int value is too large"); wrapping it
    instead would silently give another seed's states (2**64 + 1 would be seed 1)."""
    range_error = ValueError(f"{what} must fit in 64 bits (an int64 or a uint64: from -2**63 "
                             f"to 2**64 - 1), got {value!r}")
    try:
        number = int(value)                 # (a float truncated)
    except OverflowError:                   # (an infinite float)
        raise range_error from None
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be an integer, got {value!r}") from None
    if not -(1 << 63) <= number <= _U64:
        raise range_error
    return number & _U64                    # numba-cuda casts to uint64: negatives wrap


def init_xoroshiro128p_states_cpu(states, seed, subsequence_start=0):
    """Fill the 1-D NumPy array ``states`` (``xoroshiro128p_dtype``) on the host: state 0 is the
    splitmix64 of ``seed`` jumped ``subsequence_start`` times, state i is state i - 1 jumped
    once."""
    seed = _as_u64(seed, "seed")
    start = _as_u64(subsequence_start, "subsequence_start")
    n = states.shape[0]
    if n == 0:
        return
    z = np.uint64(_splitmix64(seed))
    s0 = np.array([z], dtype=np.uint64)
    s1 = s0.copy()
    k = 0
    while start >> k:                        # J**start, one power of two at a time
        if (start >> k) & 1:
            s0, s1 = _apply(_jump_power_tables(k), s0, s1)
        k += 1
    out0 = np.empty(n, dtype=np.uint64)
    out1 = np.empty(n, dtype=np.uint64)
    out0[0], out1[0] = s0[0], s1[0]
    m, k = 1, 0
    while m < n:                             # states [m, 2m) = J**m (states [0, m))
        count = min(m, n - m)
        out0[m:m + count], out1[m:m + count] = _apply(_jump_power_tables(k), out0[:count],
                                                      out1[:count])
        m, k = m + count, k + 1
    states["s0"] = out0
    states["s1"] = out1


def _host_states(n, seed, subsequence_start):
    host = np.empty(n, dtype=xoroshiro128p_dtype)
    init_xoroshiro128p_states_cpu(host, seed, subsequence_start)
    return host


def create_xoroshiro128p_states(n, seed, subsequence_start=0, stream=0):
    """``n`` generator states for ``seed``, 2**64 steps apart, the first ``subsequence_start``
    jumps (of 2**64 steps) into the sequence: a ``DeviceNDArray`` (a CuPy array with numba-cuda's
    methods); under the simulator backend its host-memory counterpart."""
    host = _host_states(int(n), seed, subsequence_start)
    return _hostapi.to_device(host, stream=stream)  # a DeviceNDArray (copy_to_host...) either way


def init_xoroshiro128p_states(states, seed, subsequence_start=0, stream=0):
    """Fill an existing states array (CuPy, NumPy, or anything with ``copy_to_device``) as
    ``create_xoroshiro128p_states`` would."""
    host = _host_states(states.shape[0], seed, subsequence_start)
    if isinstance(states, np.ndarray):
        states[...] = host
    else:
        target = states if hasattr(states, "copy_to_device") else _hostapi.as_cuda_array(states, _host_ok=True)
        target.copy_to_device(host, stream=stream)


# ``from gpureplace.cuda.random import ...`` and ``cuda.random.X``, as in numba-cuda
# (gpureplace.cuda is a module, not a package).
sys.modules.setdefault("gpureplace.cuda.random", sys.modules[__name__])
if "gpureplace.cuda" in sys.modules:
    sys.modules["gpureplace.cuda"].random = sys.modules[__name__]
