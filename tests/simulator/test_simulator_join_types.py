"""Values where paths meet take the type Numba gives them there, in the simulator as in the
compiled code:

- a conditional expression (``a if c else 0.5``) or a value-returning ``and`` / ``or`` whose
  operands Numba unifies to another type (int64 | float64 -> float64, int64 | uint64 ->
  float64, ``(int64, int64) | (float64, int64)`` -> ``Tuple(float64, int64)``): the operand
  taken is converted to the joined type (``devicecode._joins_of``; the simulator used to keep
  the raw operand, so that ``x * x`` wrapped in int64);
- a helper called with other argument types in the same kernel, whose specialisations type it
  otherwise (``nz(u)`` of a uint64 returns float64, ``nz(a)`` of an int64 an int64): each call
  runs with the conversions of the specialisation its arguments select
  (``devicecode.PlansByArguments``), its return and its locals alike;
- a tuple that a variable or a return joins (``t = (a, 1)``, on one path ``t = (0.5, 2)``).

The expected values come from Numba's CPU ``njit`` of the same functions (the same typing); the
inputs are chosen so that the wrong type gives another value (an int64 square that wraps, a
uint64 that float64 rounds)."""

import os
import types

import numpy as np
from numba import njit

from conftest import python_process
from gpureplace import cuda, simulator

A = 2 ** 40 + 1            # an int64 whose square wraps in int64 (float64: 1.2089e24)
U = 2 ** 63 + 12345        # a uint64: % 1000 is 153; in float64 (2**63 + 12288) % 1000 = 96.0


def _njit(fn, **helpers):
    """``fn`` compiled by Numba's njit, with ``helpers`` (the plain functions it calls) njit
    compiled in their place: the compiled code's typing, on the CPU."""
    glb = dict(fn.__globals__)
    glb.update({name: njit(h) for name, h in helpers.items()})
    return njit(types.FunctionType(fn.__code__, glb, fn.__name__, fn.__defaults__,
                                   fn.__closure__))


def _kernel(body, args):
    """A kernel calling ``body`` with ``args`` (a scalar read from a one-element array)."""
    params = [f"x{i}" for i in range(len(args))]
    reads = [f"{p}[0]" if np.isscalar(a) else p for p, a in zip(params, args)]
    ns = {"body": body}
    exec(f"def kern({', '.join(params)}, out):\n    body({', '.join(reads)}, out)\n", ns)
    return cuda.jit(ns["kern"])


def _check(body, n, args, **helpers):
    """``body(*args, out)`` in a simulated kernel against njit, each element of ``out``."""
    arrays = [np.array([a]) if np.isscalar(a) else a for a in args]
    got, want = np.zeros(n), np.zeros(n)
    simulator.run(_kernel(body, args), 1, 1, *arrays, got)
    _njit(body, **helpers)(*args, want)
    np.testing.assert_array_equal(got, want)
    return got


def _conditional(a, u, c, out):
    x = a if c else 0.5           # int64 | float64 -> float64
    out[0] = x * x
    out[1] = (a or 0.5) * a       # the same through `or`
    y = u if c else a             # uint64 | int64 -> float64
    out[2] = y % 1000
    t = (a, 1) if c else (0.5, 2)  # Tuple(float64, int64)
    out[3] = t[0] * a
    out[4] = (a and 0.5) * a if not c else (a or u) % 1000


def test_conditional_expressions_and_or_take_the_joined_type():
    got = {c: _check(_conditional, 5, (np.int64(A), np.uint64(U), c)) for c in (True, False)}
    assert got[True][0] == float(A) * A and got[True][2] == 96.0


def _nested(a, u, f32, c, out):
    out[0] = (a if c else (u if a else 7)) % 1000       # paths that meet at one instruction
    x = (a
         if c else
         0.5)                                           # over several lines
    out[1] = x * x
    y = a
    y += a if c else 0.5                                # in an augmented assignment
    out[2] = y * a
    n = 0
    while (a if c else 0.5) * n < 3 * a and n < 4:      # in a loop's condition (compiled twice)
        n += 1
    out[3] = n
    z = f32 if c else a                                 # float32 | int64 -> float64
    out[4] = z * z
    w = a or u or 0.5
    out[5] = w * w
    out[6] = -((a > 0) and a)                           # bool | int64 -> int64
    out[7] = out[int(1 if c else 0.5)]


def test_nested_multiline_and_loop_condition_joins():
    for c in (True, False):
        _check(_nested, 8, (np.int64(A), np.uint64(U), np.float32(1.5), c))


def _optional_and_complex(a, z, c, d, out):
    x = a if c else (0.5 if d else None)                # Optional(float64)
    if x is not None:
        out[0] = x * x
    w = z if c else a                                   # complex128 | int64 -> complex128
    out[1] = (w * w).real


def test_optional_and_complex_joins():
    for c in (True, False):
        got = _check(_optional_and_complex, 2, (np.int64(A), np.complex128(1 + 2j), c, True))
    assert got[1] == float(A) * A            # (c False: a as a complex128)


def _pair(c, a):
    if c:
        return (a, 1)
    return (0.5, 2)


def _tuples(a, c, out):
    t = (a, 1)
    if c:
        t = (0.5, 2)                  # t: Tuple(float64, int64) where the paths meet
    out[0] = t[0] * a
    r = _pair(c, a)                   # returns Tuple(float64, int64)
    out[1] = r[0] * a


def test_tuple_joins_of_variables_and_returns():
    for c in (True, False):
        _check(_tuples, 2, (np.int64(A), c), _pair=_pair)


def nz(b):
    if b == 0:
        return 3          # int64
    return b              # for a uint64 b the return type is float64 (int64 | uint64)


def _two_nz(a, u, out):
    out[0] = 256 % nz(u)      # float64: 256.0 % 1.8446744073709552e19 = 256.0
    out[1] = nz(a)            # the same helper for an int64: returns int64


def test_helper_return_type_per_specialisation():
    got = _check(_two_nz, 2, (np.int64(5), np.uint64(2 ** 64 - 6)), nz=nz)
    assert list(got) == [256.0, 5.0]


def local_join(b):
    t = b
    if b == 0:
        t = 3                  # t: float64 for a uint64 b, int64 for an int64 b
    return t % 1000


def _two_local_joins(a, u, out):
    out[0] = local_join(u)
    out[1] = local_join(a)


def test_helper_locals_per_specialisation():
    got = _check(_two_local_joins, 2, (np.int64(A), np.uint64(U)), local_join=local_join)
    assert got[0] == 96.0


def first_or_three(arr):
    v = arr[0]
    if v == 0:
        v = 3
    return v % 1000


def either(b, c=True):
    return (b if c else 3) % 1000


def _by_arrays_and_keywords(a, u, c, ua, ia, out):
    out[0] = first_or_three(ua)       # chosen by the array's dtype: float64
    out[1] = first_or_three(ia)       # int64
    out[2] = either(b=u, c=c)         # by keyword: float64
    out[3] = either(a)                # the default taken: int64
    out[4] = either(u, c=c)


def test_helper_chosen_by_array_dtypes_and_keywords():
    ua = np.array([U], np.uint64)
    ia = np.array([2 ** 62 + 12345], np.int64)
    for c in (True, False):
        got = _check(_by_arrays_and_keywords, 5, (np.int64(A), np.uint64(U), c, ua, ia),
                     first_or_three=first_or_three, either=either)
    assert got[0] == 96.0 and got[1] == 249.0


CACHED_KERNEL = '''
import numpy as np
from gpureplace import cuda
from numba import types

@cuda.jit
def k(a, u, out):
    x = a[0] if a[0] > 0 else 0.5
    out[0] = x * x
    out[1] = (u[0] if a[0] > 0 else a[0]) % 1000

out = np.zeros(2)
k[1, 1](np.array([2 ** 40 + 1]), np.array([2 ** 63 + 12345], np.uint64), out)
print(type(k.compile((types.int64[::1], types.uint64[::1], types.float64[::1])).compiled).__name__,
      out.tolist())
'''


def test_joins_of_a_kernel_loaded_from_the_disk_cache(own_disk_cache, tmp_path):
    # (a kernel from the disk cache keeps no typing: it is typed again for its joins)
    (tmp_path / "joined_kernel.py").write_text(CACHED_KERNEL)
    program = f"import sys; sys.path.insert(0, {os.fspath(tmp_path)!r}); import joined_kernel"
    env = {"GPUREPLACE_BACKEND": "simulator", "GPUREPLACE_CACHE_DIR": str(own_disk_cache)}
    want = str([float(A) * A, 96.0])
    first = python_process(program, **env).strip().splitlines()[-1]
    again = python_process(program, **env).strip().splitlines()[-1]
    assert first == f"CompiledFunction {want}", first
    assert again == f"CachedFunction {want}", again
