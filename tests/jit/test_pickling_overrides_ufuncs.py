"""``cuda.vectorize`` / ``guvectorize`` ufuncs and ``cuda.reduce`` compile their kernels in the
default context, overrides included, as a kernel does: pickled (a Dask task), they take that
context along, and their token changes with its overrides.  They carried their function and
options only -- another process computed the real ``math.sin`` where this one used the override,
and an override added or changed left the token as it was."""

import textwrap

import pytest

from conftest import REMOTE_UNPICKLE, python_process

PROGRAM = REMOTE_UNPICKLE + '''

@cuda.vectorize(["float64(float64)"])
def vsin(x):
    return math.sin(x)

@cuda.guvectorize(["void(float64[:], float64[:])"], "(n)->()")
def gsin(x, out):
    s = 0.0
    for v in x:
        s += math.sin(v)
    out[0] = s

# (whatever order the reduction combines in, with math.sin a constant c it gives 2 c)
rsin = cuda.reduce(lambda a, b: math.sin(a) + math.sin(b))

CALLS = {vsin: "f(np.ones(2))[0]", gsin: "f(np.ones((1, 3)))[0]",
         rsin: "f(np.arange(5.0))"}

def values(objs=CALLS):
    return [str(eval(call, {"f": f, "np": np})) for f, call in objs.items()]

def my_sin(x):
    return 1000.0
'''


def _run(program):
    return python_process(PROGRAM + textwrap.dedent(program), GPUREPLACE_BACKEND="simulator")


def test_ufuncs_and_reductions_take_the_default_overrides_along_and_into_their_token():
    out = _run('''
        before = [tokenize(f) for f in CALLS]
        gpureplace.override(math.sin, my_sin)
        after = [tokenize(f) for f in CALLS]
        assert all(a != b for a, b in zip(before, after)), (before, after)
        assert values() == ["1000.0", "3000.0", "2000.0"]
        for f, call in CALLS.items():
            assert remote(f, f"print({call}, tokenize(f))\\n") == [
                values({f: call})[0], tokenize(f)]
        print("ok")
        ''')
    assert out.split() == ["ok"]


def test_a_ufunc_pickled_while_another_context_is_the_default_compiles_in_it_elsewhere():
    """(``%config GPUReplace.default_context = "fast"``: the context of the moment, which
    another process does not have as its default)"""
    out = _run('''
        fast = Context("fast")
        fast.override(math.sin, my_sin)
        gpureplace.settings.default_context = fast
        assert values() == ["1000.0", "3000.0", "2000.0"]
        for f, call in CALLS.items():
            assert remote(f, f"print({call}, tokenize(f))\\n") == [
                values({f: call})[0], tokenize(f)]
        print("ok")
        ''')
    assert out.split() == ["ok"]


@pytest.mark.parametrize("unpickled", ["before the change", "after the change"])
def test_a_ufunc_held_across_an_override_change_keeps_the_override_it_was_pickled_with(
        unpickled):
    """As a kernel does: a Dask scheduler in the notebook's process holds a task pickled while
    ``math.sin`` meant ``my_sin``; a cell then overrides it with ``other_sin``.  The held ufunc
    computes with ``my_sin``, here and in another process; the live one follows the cell."""
    out = _run(f'''
        def other_sin(x):
            return 7.0

        gpureplace.override(math.sin, my_sin)
        data = pickle.dumps(vsin)
        held = pickle.loads(data) if {unpickled!r} == "before the change" else None
        gpureplace.override(math.sin, other_sin)               # the cell
        if held is None:
            held = pickle.loads(data)
        assert held(np.ones(2))[0] == 1000.0
        assert remote(held, "print(f(np.ones(2))[0])\\n") == ["1000.0"]
        assert vsin(np.ones(2))[0] == 7.0
        print("ok")
        ''')
    assert out.split() == ["ok"]
