"""Tuples in the kernel language: unpacking, building, indexing, iterating, nested tuples, tuples of
arrays and returned by helpers; named tuples as kernel arguments.

Part of the Python subset of the kernel language, as Numba supports it.  Each feature has a kernel
below; CPU tests compile it (``kernel.compile(sig)``), assemble the PTX with ptxas and check the
PTX where it proves something; GPU tests (``@pytest.mark.gpu``) launch the same kernels on CuPy
arrays and compare with NumPy or with the plain Python semantics of the same code.  Shared helpers:
tests/lang_support.py.
"""

import math
import re

import numpy as np
import pytest
from numba import types

import helpers_mod
from gpureplace import cuda
from gpureplace.errors import CompileError
from lang_support import _compile, _cp, _line_of


# =============================================================================================
# Tuples


@cuda.jit
def tuple_ops(t, pair, nested, arrs, out):
    a, b, c = t                               # unpacking an argument
    built = (a + 1, b * 2, c - 3)             # building
    s = 0
    for k in range(len(built)):               # indexing with a variable
        s += built[k]
    for v in t:                               # iterating
        s += v
    out[0] = s
    out[1] = t[-1]                            # negative constant index
    out[2] = pair[0] * pair[1]                # heterogeneous tuple
    (p, q), r = nested                        # nested unpacking
    out[3] = p * q + r
    x, y = arrs                               # tuple of arrays
    out[4] = x[0] + y[1]
    quo, rem = helpers_mod.divmod_pair(c, 2)  # tuple returned by a helper
    out[5] = quo * 10 + rem
    swapped = (b, a)
    out[6] = swapped[0] - swapped[1] + len(t)


TUPLE_SIG = (types.UniTuple(types.int64, 3), types.Tuple((types.float32, types.int32)),
             types.Tuple((types.UniTuple(types.int64, 2), types.float64)),
             types.UniTuple(types.float64[::1], 2), types.float64[::1])


def test_tuples_compile():
    spec = _compile(tuple_ops, TUPLE_SIG)
    # every leaf of every tuple argument is its own kernel parameter: 3 + 2 + 3 + 2 * 2 + 2
    # (a contiguous array is its pointer and its length; the kernel derives the stride)
    params = re.findall(r"\.param\s+\.\S+(?:\s+\.ptr)?(?:\s+\.align\s+\d+)?\s+tuple_ops_param_\d+",
                        spec.ptx)
    assert len(params) == 14


def test_tuple_index_out_of_range_is_a_clear_error():
    def bad_index(t, out):
        out[0] = t[5]

    with pytest.raises(CompileError) as info:
        cuda.jit(bad_index).compile((types.UniTuple(types.int64, 3), types.int64[::1]))
    err = info.value
    assert err.function.endswith("bad_index")
    assert err.lineno == _line_of(bad_index, "t[5]")
    assert "out of range" in err.reason or "index" in err.reason.lower()


@pytest.mark.gpu
def test_tuples_gpu():
    cp = _cp()
    x = cp.asarray(np.array([10.0, 20.0]))
    y = cp.asarray(np.array([1.0, 2.0]))
    out = cp.zeros(7, dtype=np.float64)
    tuple_ops[1, 1]((1, 2, 3), (np.float32(1.5), np.int32(4)), ((2, 3), 0.5), (x, y), out)
    np.testing.assert_array_equal(out.get(), [12.0, 3.0, 6.0, 6.5, 12.0, 11.0, 4.0])


# =============================================================================================
# Named tuples as arguments (and math.nextafter)


@cuda.jit
def named_fields(r1, r2, p, step):
    r1[0] = p.x
    r1[1] = p.y
    r2[0] = math.nextafter(p.r, step)


def test_namedtuple_arguments_keep_their_fields_and_nextafter():
    from collections import namedtuple

    from gpureplace import simulator
    from gpureplace.runtime import arguments
    Point = namedtuple("Point", ("x", "y", "r"))
    p = Point(1, 2, 2.5)
    key, vals = arguments.value_key(p)
    assert key[:2] == ("namedtuple", Point) and vals == (1, 2, 2.5)
    ty = arguments.numba_type_of_key(key)
    assert isinstance(ty, types.NamedTuple) and ty.instance_class is Point
    r1, r2 = np.zeros(2, np.int64), np.zeros(1, np.float64)
    simulator.run(named_fields, 1, 1, r1, r2, p, 3.0)
    assert r1.tolist() == [1, 2] and r2[0] == np.nextafter(2.5, 3.0)
    spec = _compile(named_fields, (types.int64[::1], types.float64[::1], ty, types.float64))
    assert "ld.param" in spec.ptx


@pytest.mark.gpu
def test_namedtuple_arguments_gpu():
    from collections import namedtuple
    cp = _cp()
    Point = namedtuple("Point", ("x", "y", "r"))
    r1, r2 = cp.zeros(2, cp.int64), cp.zeros(1, cp.float64)
    named_fields[1, 1](r1, r2, Point(4, 5, 1.5), 0.0)
    assert r1.get().tolist() == [4, 5] and r2.get()[0] == np.nextafter(1.5, 0.0)
