"""A cell that changes something costs what changed, not every tracked binding
(tracking/bindings.py, jit/collect.py):

- the check's bulk view of a namespace is kept up to date name by name -- after a change it
  found, and when a compile tracks names -- never rebuilt over every tracked name;
- ``bindings.retain`` counts the readers of each binding, looking only at the compiled functions
  that came or went since its last call;
- a collection walks only when something may have become unreachable since its last walk (a
  specialisation made, a function holding compiled code freed, a compile counted, a binding
  tracked), so that a cell that only rebinds a global or defines a kernel walks nothing;

while every change is still found, and what a long session drops is still let go.  The work is
counted (views built, records read, walks), never timed: bench/cell_hook.py times it."""

import gc
import types
import weakref

import numpy as np
import pytest

from gpureplace.compiler import frontend
from gpureplace.compiler.records import GlobalRead
from gpureplace.jit import collect
from gpureplace.tracking import bindings, contents, functions
from gpureplace.tracking.fingerprint import fingerprint


def _mine(ns):
    return [(c[1], c[2]) for c in bindings.check() if c.namespace is ns]


def _track(ns, name, snap=False):
    value = ns.get(name, __builtins__["len"] if name == "len" else None)
    bindings.track(ns, name, value, None, contents.snapshot(value) if snap else None)


@pytest.fixture
def views_built(monkeypatch):
    """How many bulk views ``check`` builds from a namespace's every tracked name."""
    built = []

    class Counting(bindings._View):
        def __init__(self, ns, names):
            built.append(len(names))
            super().__init__(ns, names)

    monkeypatch.setattr(bindings, "_View", Counting)
    return built


def _big(name, n=2000):
    ns = {"__name__": name, **{f"v{i}": float(i) + 0.5 for i in range(n)}}
    for i in range(n):
        _track(ns, f"v{i}")
    assert _mine(ns) == []
    return ns


def test_a_change_among_thousands_brings_the_view_up_to_date_without_rebuilding_it(
        views_built):
    ns = _big("hook_cost_change")
    built = len(views_built)
    ns["v5"] = 5.25
    assert _mine(ns) == [("v5", "redefined")]
    assert _mine(ns) == []                     # (the new value is what is seen now)
    ns["v1999"] = 1.0
    ns["v7"] = 7                               # (an int now)
    del ns["v100"]
    assert _mine(ns) == [("v7", "redefined"), ("v100", "deleted"), ("v1999", "redefined")]
    assert _mine(ns) == []
    ns["v100"] = 3.0                           # bound again after its deletion
    assert _mine(ns) == [("v100", "redefined")]
    assert _mine(ns) == []
    assert len(views_built) == built           # no view built again over the 2,000 names


def test_a_compile_tracking_names_brings_the_view_up_to_date_without_rebuilding_it(
        views_built, monkeypatch):
    monkeypatch.setattr(bindings, "reporting", False)   # (no hook reads what a compile found)
    ns = _big("hook_cost_track")
    built = len(views_built)
    # a compile reads 50 new names, and 50 it read before that were bound to other values
    olds = {}
    for i in range(50):
        ns[f"w{i}"] = float(i)
        _track(ns, f"w{i}")
        olds[i] = ns[f"v{i}"]
        ns[f"v{i}"] = float(i) + 100.0
        _track(ns, f"v{i}")
    assert _mine(ns) == []
    # what is compared with is what the compile read: a name bound back to the object seen
    # before it is a change (the view must not compare with that old object)
    ns["v3"] = olds[3]
    ns["w4"] = "other"
    assert _mine(ns) == [("v3", "redefined"), ("w4", "redefined")]
    assert _mine(ns) == []
    assert len(views_built) == built


def test_a_plain_name_bound_to_an_array_is_then_compared_by_contents():
    ns = _big("hook_cost_to_array", 50)
    ns["v1"] = np.arange(4.0)
    assert _mine(ns) == [("v1", "redefined")]
    ns["v1"][2] = 9.0                          # in place: only a comparison of contents sees it
    assert _mine(ns) == [("v1", "changed in place")]
    assert _mine(ns) == []
    ns["v1"] = 2.0                             # back to a plain value
    assert _mine(ns) == [("v1", "redefined")]
    ns["v1"] = 3.0
    assert _mine(ns) == [("v1", "redefined")]
    assert _mine(ns) == []


def test_a_builtin_shadowed_and_uncovered_again_among_many():
    ns = _big("hook_cost_builtin", 50)
    _track(ns, "len")
    assert _mine(ns) == []
    ns["len"] = lambda x: 0
    assert _mine(ns) == [("len", "redefined")]
    assert _mine(ns) == []
    del ns["len"]                              # the builtin again
    assert _mine(ns) == [("len", "redefined")]
    assert _mine(ns) == []


def test_changes_are_reported_in_the_order_the_names_were_tracked():
    ns = {"__name__": "hook_cost_order", "a": 1.0, "arr": np.zeros(3), "b": 2.0,
          **{f"v{i}": float(i) for i in range(20)}}
    _track(ns, "a")
    _track(ns, "arr", snap=True)
    _track(ns, "b")
    for i in range(20):
        _track(ns, f"v{i}")
    assert _mine(ns) == []
    ns["v19"] = 0.0
    ns["b"] = 0.0
    ns["arr"][0] = 1.0
    ns["a"] = 0.0
    assert _mine(ns) == [("a", "redefined"), ("arr", "changed in place"), ("b", "redefined"),
                         ("v19", "redefined")]


@pytest.fixture
def own_state(monkeypatch):
    """Tracked bindings and watched functions of this test's own: a ``retain`` given only its
    compiled functions must not forget what other tests' kernels read."""
    for name in ("_tracked", "_cells", "_views", "_readers", "_needed", "_functions"):
        monkeypatch.setattr(bindings, name, {}, raising=False)
    monkeypatch.setattr(bindings, "_fresh", set(), raising=False)
    monkeypatch.setattr(functions, "_watched", {})
    monkeypatch.setattr(functions, "_bulk", None)


class _Compiled:
    """What ``bindings`` reads of a compiled function: its Python function and records."""

    def __init__(self, pyfunc, names=(), freevars=()):
        self.pyfunc = pyfunc
        glb = pyfunc.__globals__
        self.global_reads = [GlobalRead("global", glb["__name__"], n, glb[n],
                                        fingerprint=fingerprint(glb[n]), snapshot=None)
                             for n in names]
        for n in freevars:
            cell = pyfunc.__closure__[pyfunc.__code__.co_freevars.index(n)]
            self.global_reads.append(GlobalRead("freevar", "<closure>", n, cell.cell_contents,
                                                fingerprint=fingerprint(cell.cell_contents),
                                                snapshot=None))


def _function(ns, src="def f():\n    pass\n", name="f"):
    exec(src, ns)
    return ns[name]


def test_retain_reads_only_the_records_of_compiled_functions_that_came_or_went(
        monkeypatch, own_state):
    ns = {"__name__": "hook_cost_retain", "a": 1.0, "b": 2.0, "c": 3.0}
    f = _function(ns)
    one, two = _Compiled(f, ["a", "b"]), _Compiled(f, ["a"])
    closure_ns = {"__name__": "hook_cost_closure"}
    maker = _function(closure_ns, "def make(t):\n    def g():\n        return t\n    return g\n",
                      "make")
    with_cell = _Compiled(maker(4.0), freevars=["t"])
    for cf in (one, two, with_cell):
        bindings.track_compiled(cf)
    _track(ns, "c")                             # tracked, read by none of them

    read = []
    places = bindings._places
    monkeypatch.setattr(bindings, "_places", lambda cf: read.append(cf) or places(cf))
    bindings.retain([one, two, with_cell])
    assert set(bindings._tracked[id(ns)][1]) == {"a", "b"}
    assert len(bindings._cells) == 1
    assert len(read) == 3

    read.clear()
    bindings.retain([one, two, with_cell])      # nothing came or went: no records read
    assert read == []
    bindings.retain([two, with_cell])           # one went: its records are not read again
    assert read == []
    assert set(bindings._tracked[id(ns)][1]) == {"a"}     # b: read by none now
    ns["a"], ns["b"] = 10.0, 20.0
    assert _mine(ns) == [("a", "redefined")]              # a: still read, still compared
    cells = len(bindings._cells)
    bindings.retain([two])
    assert len(bindings._cells) == cells - 1              # the closure variable: read by none
    assert read == []
    bindings.retain([two, one])                 # one came back: its records alone are read
    assert read == [one]


def test_the_functions_bound_are_what_tracked_bindings_hold_and_stay_watched(own_state):
    ns = {"__name__": "hook_cost_bound", **{f"v{i}": float(i) for i in range(100)}}
    helper = _function(ns, "def helper(v):\n    return v + 1\n", "helper")
    user = _function(ns, "def user():\n    return helper\n", "user")
    cf = _Compiled(user, ["helper"] + [f"v{i}" for i in range(100)])
    bindings.track_compiled(cf)
    assert _mine(ns) == []
    bound = bindings.bound_functions()
    assert helper in bound and len([v for v in bound if v is helper]) == 1
    assert not any(isinstance(v, float) for v in bound)   # only what functions.py may watch
    # a reload's equal copy bound in its place: watched while bound, through a collection
    copy = types.FunctionType(helper.__code__, ns, "helper")
    ns["helper"] = copy
    assert _mine(ns) == []
    assert copy in bindings.bound_functions() and helper not in bindings.bound_functions()
    bindings.retain([cf])
    functions.retain([cf], bindings.bound_functions())
    assert id(copy) in functions._watched
    copy.__code__ = (lambda v: v + 2).__code__          # autoreload's new code, in place
    assert ("helper", "changed in place") in \
        [(c[1], c[2]) for c in bindings.check() if c.namespace is ns]


# -- the collection ------------------------------------------------------------------------------
@pytest.fixture
def walks(monkeypatch):
    """How many times ``collect.collect()`` walked the live functions."""
    count = []
    retain = frontend.retain
    monkeypatch.setattr(frontend, "retain", lambda *a: count.append(1) or retain(*a))
    return count


KERNELS = """
from gpureplace import cuda
G = 2.0
@cuda.jit
def k(x):
    x[0] = G
"""


def test_a_collection_walks_only_when_something_may_have_become_unreachable(walks):
    gc.collect()                                          # (what earlier tests left: let go)
    collect.collect()
    walks.clear()
    ns = {"__name__": "hook_cost_collect"}
    exec(KERNELS, ns)
    x = np.zeros(1, np.float32)
    ns["k"][1, 1](x)
    assert x[0] == 2.0
    assert collect.collect() and len(walks) == 1          # a specialisation was made
    assert collect.collect() and len(walks) == 1          # nothing since

    ns["G"] = 3.0                                         # a cell rebinding a global
    assert [(c[1], c[2]) for c in bindings.check() if c.namespace is ns] == [("G", "redefined")]
    assert collect.collect() and len(walks) == 1
    for _ in range(3):                                    # a kernel never launched, redefined
        exec("@cuda.jit\ndef t(x):\n    x[0] = 1\n", ns)
        gc.collect()
        assert collect.collect() and len(walks) == 1

    ns["k"][1, 1](x)                                      # recompiled: the old code unreachable
    assert x[0] == 3.0
    assert collect.collect() and len(walks) == 2
    assert collect.collect() and len(walks) == 2
    assert "G" in bindings._tracked[id(ns)][1]

    del ns["k"]                                           # a kernel holding code, freed
    gc.collect()
    assert collect.collect() and len(walks) == 3
    assert "G" not in bindings._tracked.get(id(ns), (None, {}))[1]


def test_a_device_function_whose_front_end_is_kept_for_it_is_let_go_when_it_dies(walks):
    """A live device function keeps its front ends (for a relink) after the kernel that
    compiled them died; when the device function dies too, the next collection walks."""
    ns = {"__name__": "hook_cost_device"}
    exec("from gpureplace import cuda\n"
         "@cuda.jit(device=True)\ndef dev(v):\n    return v + 1\n"
         "@cuda.jit\ndef k(x):\n    x[0] = dev(x[0])\n", ns)
    x = np.zeros(1, np.float32)
    ns["k"][1, 1](x)
    del ns["k"]
    gc.collect()
    assert collect.collect()
    body = weakref.ref(ns["dev"].py_func)
    assert any(key[0] is body() for key in frontend._cache)     # kept for dev's sake
    del ns["dev"]
    gc.collect()
    walked = len(walks)
    assert collect.collect() and len(walks) == walked + 1
    assert not any(key[0] is body() for key in frontend._cache if body() is not None)


def test_a_context_that_code_was_compiled_in_going_is_a_reason_to_walk(walks):
    """Its typing and target contexts are let go by a walk (frontend.retain), also when the
    Context goes after the walk that dropped its code."""
    from gpureplace import Context
    ctx = Context("hook_cost_context")
    ns = {"__name__": "hook_cost_context", "ctx": ctx}
    exec("from gpureplace import cuda\n"
         "@cuda.jit(context=ctx)\ndef k(x):\n    x[0] = 5\n", ns)
    del ns["ctx"]
    x = np.zeros(1, np.float32)
    ns["k"][1, 1](x)
    assert x[0] == 5
    assert collect.collect()
    del ns["k"]
    gc.collect()
    assert collect.collect()                # (the kernel's code let go; the Context lives on)
    ref = weakref.ref(ctx)
    del ctx
    gc.collect()
    assert ref() is None
    walked = len(walks)
    assert collect.collect() and len(walks) == walked + 1


def test_what_replaced_code_read_is_let_go_at_the_next_collection():
    """Memory stays bounded: a global array replaced and its kernel recompiled, cell after
    cell, leaves nothing of the old arrays once the hook's collection ran."""
    ns = {"__name__": "hook_cost_arrays"}
    exec("from gpureplace import cuda\nDATA = None\n"
         "@cuda.jit\ndef k(x):\n    x[0] = DATA[0]\n", ns)
    x = np.zeros(1, np.float32)
    refs = []
    for i in range(8):
        ns["DATA"] = np.full(1 << 14, float(i), np.float32)
        refs.append(weakref.ref(ns["DATA"]))
        bindings.check()                                  # (the hook, after the cell)
        collect.collect()
        ns["k"][1, 1](x)                                  # the next cell launches
        assert x[0] == i
        bindings.check()
        collect.collect()
        gc.collect()
        assert sum(r() is not None for r in refs) <= 1, i


def test_a_cell_rebinding_a_global_among_thousands_walks_nothing(shell, views_built, walks):
    cells = ["%config GPUReplace.recompile_ahead = False",
             "import numpy as np\nfrom gpureplace import cuda\nx = np.zeros(1, np.float32)"]
    for k in range(4):
        cells.append("\n".join(f"g_{k}_{j} = {j}.5" for j in range(500)))
        cells.append(f"@cuda.jit\ndef hook_cost_k{k}(x):\n    x[0] = "
                     + " + ".join(f"g_{k}_{j}" for j in range(500)) + f"\nhook_cost_k{k}[1, 1](x)")
    for src in cells:
        assert shell.run_cell(src, store_history=False).success
    gc.collect()                          # (what earlier tests left, let go before counting;
    collect.collect()                     # none of it freed by the collector while counting)
    built, walked = len(views_built), len(walks)
    gc.disable()
    try:
        for src in ("g_0_0 += 1", "g_3_7 = 'text'",
                    "@cuda.jit\ndef hook_cost_t(x):\n    x[0] = 1",
                    "@cuda.jit\ndef hook_cost_t(x):\n    x[0] = 2", "del g_1_1"):
            assert shell.run_cell(src, store_history=False).success
    finally:
        gc.enable()
    assert len(views_built) == built and len(walks) == walked
    # every change was found: the kernels reading them compile again, with the new values
    assert shell.run_cell("hook_cost_k0[1, 1](x)", store_history=False).success
    assert shell.user_ns["x"][0] == np.float32(sum(j + 0.5 for j in range(500)) + 1)
    assert shell.run_cell("hook_cost_k2[1, 1](x)", store_history=False).success
    for k in (1, 3):                          # a global deleted; one that is now text
        assert shell.run_cell(f"hook_cost_k{k}[1, 1](x)",
                              store_history=False).error_in_exec is not None
