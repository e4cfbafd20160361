"""A context's digest (and so the Dask token and the pickle of every kernel, ufunc and reduction
compiled in it) sorts its overrides by their keys' text: an untyped and a typed override of one
function, or typed overrides of different kinds of types, made sorting their keys raise
``'<' not supported between instances of 'tuple' and 'NoneType'``."""

import math

import numpy as np
from dask.base import tokenize

from gpureplace import Context, cuda


def one(x):
    return 1.0


def two(x):
    return 2.0


def test_untyped_and_typed_overrides_of_one_function_digest_and_tokenize():
    ctx = Context("typed_keys_mixed")
    ctx.override(math.sin, one)
    ctx.override(math.sin, two, types=("float32",))
    other = Context("typed_keys_kinds")
    other.override(math.sin, one, types=("float32",))
    other.override(math.sin, two, types=("int64",))
    assert ctx.definition_digest() != other.definition_digest()

    @cuda.jit
    def k(a):
        a[0] = math.sin(a[0])

    @cuda.vectorize(["float64(float64)"])
    def v(x):
        return math.sin(x)

    for c in (ctx, other):
        assert tokenize(k.with_context(c)) == tokenize(k.with_context(c))
    a = np.zeros(1)
    k.with_context(ctx)[1, 1](a)
    assert a[0] == 1.0                       # float64: the untyped one
    assert tokenize(v) == tokenize(v)


def test_an_override_that_does_not_pickle_is_named():
    import pickle
    import threading

    import pytest

    ctx = Context("holds_a_lock")
    lock = threading.Lock()

    def locked_sin(x):
        return 0.0 if lock is None else 1.0

    ctx.override(math.sin, locked_sin)

    @cuda.jit
    def k(a):
        a[0] = math.cos(a[0])

    with pytest.raises(TypeError, match=r"the 'holds_a_lock' context cannot be pickled .*its "
                                        r"override of math\.sin by .*locked_sin does not pickle"):
        pickle.dumps(k.with_context(ctx))
