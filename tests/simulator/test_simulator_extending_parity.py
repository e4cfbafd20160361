"""The simulator computes what the compiled code of Numba's extension API computes:

- a function typed by ``type_callable`` and implemented by ``lower`` (numba-cuda's ``func1``
  pattern) has no Python meaning: its Python body is a placeholder, so the launch refuses it,
  naming it, the kernel's line and what to do instead, rather than running the placeholder; a
  Python implementation registered another way (an ``@overload``) runs;
- an ``overload_method`` / ``overload_attribute`` of arrays named like a method NumPy's array
  has (``a.trace()``, ``a.clip()``, ``a.base``) is what runs where the compiler's typing chooses
  it (a target's own template comes before Numba's generic ones), not NumPy's method; Numba's
  own where it wins (a user's generic template registered after Numba's);
- an overload that chooses by a literal argument (``prefer_literal``; a generator that answers
  only literal types) is asked with the literal types where the compiled code's typing saw
  literals (a constant, a variable bound only to one, a global int, a keyword), also for a
  kernel loaded from the disk cache;
- ``overload_method`` / ``overload_attribute`` of a user's extension type (Numba's Interval
  example) give the value's methods and attributes, before the Python class's own.

Each program runs in a process of its own: the overloads, typings and lowerings they register
stay in Numba's registries for the process's life, which the rest of the suite must not see."""

from conftest import python_process

LOWERED = r'''
import warnings
warnings.simplefilter("error")
import numpy as np
from gpureplace import cuda
from gpureplace.cuda.extending import type_callable, lower, overload
from numba import types
from numba.core import extending as nbext

def twice(x):
    return 0.0                    # a host placeholder

def func1(x):
    raise NotImplementedError     # as numba-cuda's tests write it

def halved(x):
    return 0.0                    # a placeholder, but an @overload gives its Python meaning

def mixed(x):
    return -1.0

for fn in (twice, func1, halved, mixed):
    @type_callable(fn)
    def _typer(context):
        def typer(x):
            if isinstance(x, types.Integer):
                return types.float64
        return typer

    @lower(fn, types.Integer)
    def _lower(context, builder, sig, args):
        v = context.cast(builder, args[0], sig.args[0], types.float64)
        return builder.fadd(v, v)

@overload(halved)
def _halved(x):
    return lambda x: x / 2

@nbext.overload(mixed)            # floats: a Python implementation; integers: the lowering
def _mixed(x):
    if isinstance(x, types.Float):
        return lambda x: x * 3

@cuda.jit
def k_twice(a, out):
    out[0] = twice(a[0])

@cuda.jit
def k_func1(a, out):
    out[0] = func1(a[0])

@cuda.jit
def k_halved(a, out):
    out[0] = halved(a[0])

@cuda.jit
def k_mixed(a, f, out):
    out[0] = mixed(f[0])
    if a[0] > 100:
        out[1] = mixed(a[0])

sig = (types.int64[::1], types.float64[::1])
print("add.f64" in k_twice.compile(sig).ptx, "add.f64" in k_func1.compile(sig).ptx)
for k in (k_twice, k_func1):
    out = np.full(1, -5.0)
    try:
        k[1, 1](np.array([21]), out)
        print("ran", out.tolist())
    except NotImplementedError as exc:
        print(type(exc).__name__, "|", str(exc).splitlines()[0], "|", out.tolist())
out = np.zeros(1)
k_halved[1, 1](np.array([21]), out)
print(out.tolist())
out = np.zeros(2)
k_mixed[1, 1](np.array([3]), np.array([1.5]), out)
print(out.tolist())
try:
    k_mixed[1, 1](np.array([300]), np.array([1.5]), out)
    print("ran", out.tolist())
except NotImplementedError as exc:
    print(type(exc).__name__, "|", str(exc).splitlines()[0])
'''


def _line(program, text):
    """The line number of ``text`` (a whole line) in ``program`` run by ``python -c``."""
    return program.splitlines().index(text) + 1


def test_a_function_implemented_by_lower_is_refused_where_it_is_called():
    lines = python_process(LOWERED, GPUREPLACE_BACKEND="simulator").strip().splitlines()
    assert lines[0] == "True True", lines          # the compiled code runs the lowering
    for line, kernel in ((lines[1], "k_twice"), (lines[2], "k_func1")):
        name = kernel[2:]
        row = _line(LOWERED, f"    out[0] = {name}(a[0])")
        assert line.startswith(f"NotImplementedError | the simulator cannot run {name}() "
                               f"(read at line {row} of {kernel}, "), line
        assert "type_callable / lower" in line and "GPUREPLACE_BACKEND=gpu" in line, line
        assert f"give {name} an @overload" in line, line
        assert line.endswith("| [-5.0]"), line         # nothing stored: no placeholder ran
    assert lines[3] == "[10.5]", lines                  # the @overload's Python meaning
    assert lines[4] == "[4.5, 0.0]", lines              # the float overload; ints not reached
    row = _line(LOWERED, "        out[1] = mixed(a[0])")
    assert lines[5].startswith(f"NotImplementedError | the simulator cannot run mixed() (read "
                               f"at line {row} of k_mixed"), lines


ARRAY_METHODS = r'''
import struct
import numpy as np
from gpureplace import cuda
from gpureplace.cuda.extending import overload_method, overload_attribute
from numba import types
from numba.core import extending as nbext

@overload_method(types.Array, "trace")
def _trace(a):
    return lambda a: 77.0

@overload_method(types.Array, "clip")           # Numba has its own clip: ours comes first
def _clip(a, lo, hi):
    return lambda a, lo, hi: lo + hi + 0.25

@overload_method(types.Array, "diagonal")
def _diagonal(a):
    return lambda a: a[0, 1] * 100.0

@overload_method(types.Array, "searchsorted")
def _searchsorted(a, v):
    return lambda a, v: v * 3.0

@overload_method(types.Array, "tobytes")        # Numba's own tobytes too
def _tobytes(a):
    return lambda a: 5.5

@overload_attribute(types.Array, "base")
def _base(a):
    return lambda a: 55.0

# generic, registered after Numba's own fill: Numba's types the call, but of the two lowerings
# registered for (types.Array, "fill") the last one is found: this one, a no-op
@nbext.overload_method(types.Array, "fill")
def _fill(a, v):
    return lambda a, v: None

@cuda.jit
def k(a, out, f):
    out[0] = a.trace()
    out[1] = a.clip(1.0, 2.0)
    out[2] = a.diagonal()
    out[3] = a.searchsorted(4.0)
    out[4] = a.tobytes()
    out[5] = a.base
    f.fill(9.0)

sig = (types.float64[:, ::1], types.float64[::1], types.float64[::1])
ptx = k.compile(sig).ptx
expected = [77.0, 3.25, 100.0, 12.0, 5.5, 55.0]
bits = lambda v: str(struct.unpack("<q", struct.pack("<d", v))[0])
print(all(bits(v) in ptx for v in (77.0, 3.25, 12.0, 5.5, 55.0)), "0d4059000000000000" in ptx,
      "0d4022000000000000" in ptx or bits(9.0) in ptx)
a = np.arange(9.0).reshape(3, 3)
out, f = np.zeros(6), np.zeros(3)
k[1, 1](a, out, f)
print(out.tolist() == expected, out.tolist())
print(f.tolist())
'''


def test_array_overloads_named_like_numpys_methods_are_what_the_compiled_code_runs():
    lines = python_process(ARRAY_METHODS, GPUREPLACE_BACKEND="simulator").strip().splitlines()
    # the compiled code's constants (a[0, 1] * 100.0 for diagonal); no store of 9.0
    assert lines[0] == "True True False", lines
    assert lines[1].startswith("True "), lines           # not NumPy's trace, clip, ...
    assert lines[2] == "[0.0, 0.0, 0.0]", lines          # the last lowering of fill: the no-op


LITERALS = r'''
import re
import numpy as np
from gpureplace import cuda
from gpureplace.cuda.extending import overload, overload_method
from numba import types
from numba.core import extending as nbext

def tile(n):
    pass

@overload(tile, prefer_literal=True)
def _tile(n):
    if isinstance(n, types.IntegerLiteral):
        k = n.literal_value
        return lambda n: k * 1000          # a compile-time constant
    return lambda n: n

def only_literal(n):
    pass

@overload(only_literal)                    # Numba asks again with the literal types
def _only_literal(n):
    if isinstance(n, types.IntegerLiteral):
        k = n.literal_value
        return lambda n: k + 1

def plain_first(n):
    pass

@nbext.overload(plain_first)               # non-literal first: the plain implementation
def _plain_first(n):
    if isinstance(n, types.IntegerLiteral):
        return lambda n: -1
    return lambda n: n * 2

@overload_method(types.Array, "pick", prefer_literal=True)
def _pick(a, i):
    if isinstance(i, types.IntegerLiteral):
        j = i.literal_value
        return lambda a, i: a[j] * 10
    return lambda a, i: a[i]

N = 5

@cuda.jit
def k(out, x):
    m = 4
    out[0] = tile(3)
    out[1] = tile(m)
    out[2] = tile(N)
    out[3] = tile(x[0])
    out[4] = tile(n=2)
    out[5] = tile(2) + tile(x[0])
    out[6] = only_literal(7)
    out[7] = plain_first(7)
    out[8] = x.pick(1)
    out[9] = x.pick(x[1] - 10)

sig = (types.int64[::1], types.int64[::1])
ptx = k.compile(sig).ptx
print(all(f", {v};" in ptx for v in (3000, 4000, 5000, 2000, 8, 14)),
      re.search(r"mul\.lo\.s64\s+%rd\d+, %rd\d+, 10;", ptx) is not None)   # x.pick(1)
out = np.zeros(10, np.int64)
k[1, 1](out, np.array([7, 11]))
print(out.tolist())
'''


def test_overloads_are_asked_with_the_literal_arguments_the_compiled_code_typed():
    lines = python_process(LITERALS, GPUREPLACE_BACKEND="simulator").strip().splitlines()
    assert lines[0] == "True True", lines
    assert lines[1] == str([3000, 4000, 5000, 7, 2000, 2007, 8, 14, 110, 11]), lines


CACHED = r'''
import numpy as np
from gpureplace import cuda
from gpureplace.cuda.extending import overload
from numba import types

def only_literal(n):
    pass

def _from_literal(n):
    return n * 1000

@overload(only_literal)
def _only_literal(n):
    if isinstance(n, types.IntegerLiteral):
        return _from_literal

@cuda.jit
def k(out):
    out[0] = only_literal(3)

out = np.zeros(1, np.int64)
k[1, 1](out)
print(type(k.compile((types.int64[::1],)).compiled).__name__, out.tolist())
'''


def test_literal_arguments_of_a_kernel_loaded_from_the_disk_cache(own_disk_cache):
    env = {"GPUREPLACE_BACKEND": "simulator", "GPUREPLACE_CACHE_DIR": str(own_disk_cache)}
    first = python_process(CACHED, **env).strip().splitlines()[-1]
    again = python_process(CACHED, **env).strip().splitlines()[-1]
    assert first == "CompiledFunction [3000]", first
    assert again == "CachedFunction [3000]", again       # (no type annotation kept: asked again)


INTERVAL = r'''
import struct
import numpy as np
from gpureplace import cuda
from gpureplace.cuda.extending import (typeof_impl, type_callable, register_model, models,
    make_attribute_wrapper, lower, overload_attribute, overload_method, cgutils,
    lowering_registry)
from numba import types

class Interval:
    def __init__(self, lo, hi):
        self.lo = lo
        self.hi = hi

    @property
    def width(self):                # the host class's own: not what the device code has
        return -1.0

    def contains(self, x):
        return False

class IntervalType(types.Type):
    def __init__(self):
        super().__init__(name="Interval")

interval_type = IntervalType()

@typeof_impl.register(Interval)
def _typeof(val, c):
    return interval_type

@type_callable(Interval)
def _type_ctor(context):
    def typer(lo, hi):
        if isinstance(lo, types.Float) and isinstance(hi, types.Float):
            return interval_type
    return typer

@register_model(IntervalType)
class IntervalModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("lo", types.float64), ("hi", types.float64)])

make_attribute_wrapper(IntervalType, "lo", "lo")
make_attribute_wrapper(IntervalType, "hi", "hi")

@lower(Interval, types.Float, types.Float)
def _lower_ctor(context, builder, sig, args):
    iv = cgutils.create_struct_proxy(sig.return_type)(context, builder)
    iv.lo, iv.hi = args
    return iv._getvalue()

@lowering_registry.lower_constant(IntervalType)
def _constant(context, builder, ty, pyval):
    iv = cgutils.create_struct_proxy(ty)(context, builder)
    iv.lo = context.get_constant(types.float64, pyval.lo)
    iv.hi = context.get_constant(types.float64, pyval.hi)
    return iv._getvalue()

@overload_attribute(IntervalType, "width")
def _width(iv):
    return lambda iv: iv.hi - iv.lo

@overload_method(IntervalType, "contains")
def _contains(iv, x):
    return lambda iv, x: iv.lo <= x < iv.hi

IV = Interval(1.5, 4.0)

@cuda.jit
def made(r, x):
    iv = Interval(x[0], x[1])
    r[0] = iv.width
    r[1] = iv.contains(2.0)
    r[2] = iv.lo

@cuda.jit
def constant(r):
    r[0] = IV.width
    r[1] = IV.contains(2.0)
    r[2] = IV.hi

assert made.compile((types.float64[::1], types.float64[::1])).ptx
ptx = constant.compile((types.float64[::1],)).ptx
bits = lambda v: str(struct.unpack("<q", struct.pack("<d", v))[0])
print(all(bits(v) in ptx for v in (2.5, 1.0, 4.0)))
r = np.zeros(3)
made[1, 1](r, np.array([1.5, 2.5]))
print(r.tolist())
constant[1, 1](r)
print(r.tolist())
'''


def test_methods_and_attributes_overloaded_for_a_users_extension_type():
    lines = python_process(INTERVAL, GPUREPLACE_BACKEND="simulator").strip().splitlines()
    assert lines[0] == "True", lines
    assert lines[1] == "[1.0, 1.0, 1.5]", lines
    assert lines[2] == "[2.5, 1.0, 4.0]", lines
