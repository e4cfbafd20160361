"""Kernels, device functions, launch configurations and ufuncs pickle as their Python function
and options: another process (here a fresh interpreter running the simulator) rebuilds them and
compiles for itself; the same process gets the same object back."""

import math
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gpureplace import Context, cuda
from gpureplace.jit import function as gpureplace_function


def _define(ns_extra=None):
    """Functions defined the way a notebook cell defines them (not importable by name)."""
    ns = {"cuda": cuda, "SCALE": 3}
    ns.update(ns_extra or {})
    exec("@cuda.jit(device=True)\n"
         "def inner(a):\n    return a * SCALE + 1\n"
         "@cuda.jit\n"
         "def lazy(arr):\n    arr[0] = inner(arr[0])\n"
         "@cuda.jit('void(intp[:])', fastmath=True, launch_bounds=64)\n"
         "def eager(arr):\n    arr[0] = inner(arr[0])\n"
         "@cuda.vectorize(['intp(intp)', 'float64(float64)'])\n"
         "def twice(x):\n    return x * 2\n"
         "@cuda.guvectorize(['void(float64[:], float64[:])'], '(n)->()')\n"
         "def total(x, out):\n"
         "    s = 0.0\n"
         "    for v in x:\n        s += v\n"
         "    out[0] = s\n", ns)
    return ns


def _in_a_new_process(payload, script, path=None):
    env = dict(os.environ, GPUREPLACE_BACKEND="simulator")
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path)] + [p for p in [env.get("PYTHONPATH")]
                                                           if p])
    code = ("import pickle, sys, numpy as np\n"
            "objs = pickle.loads(sys.stdin.buffer.read())\n" + script)
    done = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().split()


def test_the_same_process_gets_a_handle_on_the_same_objects_back():
    """Unpickled where it was defined, an object is a handle on the live one (its compiled
    code, nothing compiled again), which pickles again as it came."""
    ns = _define()
    for name in ("inner", "lazy", "eager", "twice", "total"):
        data = pickle.dumps(ns[name])
        back = pickle.loads(data)
        assert back.pinned_target() is ns[name] and isinstance(back, type(ns[name]))
        assert back.py_func is ns[name].py_func
        assert pickle.dumps(back) == data
        assert pickle.loads(data) is back          # one handle per definition
    cfg = pickle.loads(pickle.dumps(ns["lazy"][5, 8]))
    assert cfg.kernel is ns["lazy"]
    assert (cfg.griddim, cfg.blockdim, cfg.sharedmem) == ((5, 1, 1), (8, 1, 1), 0)
    a = np.array([2])
    ns["lazy"][1, 1](a)
    compiled = dict(ns["lazy"]._specs)
    handle = pickle.loads(pickle.dumps(ns["lazy"]))
    handle[1, 1](a)                              # the live kernel's code: nothing new
    assert a[0] == 22 and ns["lazy"]._specs == compiled and handle._off is None


def test_another_process_rebuilds_and_compiles_them():
    ns = _define()
    payload = pickle.dumps((ns["lazy"], ns["eager"], ns["lazy"][1, 1], ns["twice"], ns["total"]))
    out = _in_a_new_process(payload, (
        "lazy, eager, cfg, twice, total = objs\n"
        "a = np.array([2]); lazy[1, 1](a); print(a[0])\n"
        "eager[1, 1](a); cfg(a); print(a[0])\n"
        "print(eager.declared_signatures == ((eager.declared_signatures[0][0],),),"
        " eager.options().fastmath, eager._launch_bounds)\n"
        "print(*twice(np.arange(3)), *twice(np.arange(3.0)))\n"
        "print(*total(np.arange(6.0).reshape(2, 3)))\n"))
    # 2*3+1 = 7; then (7*3+1)*3+1 = 67; signatures and options as given
    assert out == ["7", "67", "True", "True", "(64,)", "0", "2", "4", "0.0", "2.0", "4.0",
                   "3.0", "12.0"]


def test_globals_travel_with_the_function_by_value():
    ns = _define({"SCALE": 10})
    out = _in_a_new_process(pickle.dumps(ns["lazy"]),
                            "a = np.array([1]); objs[1, 1](a); print(a[0])\n")
    assert out == ["11"]


def test_a_context_travels_with_its_overrides():
    ctx = Context("pickled-ctx")
    ctx.override(math.exp, math.sin)
    ns = _define()
    k = ns["lazy"].with_context(ctx)
    assert pickle.loads(pickle.dumps(ns["lazy"])).pinned_target() is ns["lazy"]
    fresh = cuda.jit(ns["lazy"].py_func, context=ctx)
    data = pickle.dumps(fresh)
    done = subprocess.run([sys.executable, "-c", "import pickle, sys, math; "
                           "k = pickle.loads(sys.stdin.buffer.read()); "
                           "print(k.context.name, k.context.lookup(math.exp).impl is math.sin)"],
                          input=data, capture_output=True, timeout=300,
                          env=dict(os.environ, GPUREPLACE_BACKEND="simulator"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [b"pickled-ctx", b"True"]
    assert k.context is ctx


def test_a_configuration_with_a_stream_is_refused_by_name():
    ns = _define()
    with pytest.raises(pickle.PicklingError, match="a stream belongs to this process"):
        pickle.dumps(ns["lazy"][1, 1, cuda.stream()])


def test_a_remembered_pickle_follows_every_change_of_what_it_reads():
    import cloudpickle
    ns = {"__name__": "a_cell_not_importable"}
    exec(textwrap.dedent('''
        import numpy as np
        from gpureplace import cuda
        TABLE = np.arange(4.0)
        SCALE = 2.0
        def helper(v):
            return v * SCALE
        @cuda.jit
        def k(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = helper(TABLE[i % 4])
        @cuda.jit
        def plain(out):
            out[0] = helper(1.0)
        '''), ns)
    for name in ("k", "plain"):
        first = cloudpickle.dumps(ns[name])
        assert cloudpickle.dumps(ns[name]) == first          # nothing changed: the same
        ns["SCALE"] = 3.0                                    # a global of a helper, rebound
        second = cloudpickle.dumps(ns[name])
        assert second != first
        exec("def helper(v):\n    return v * SCALE + 1.0\n", ns)     # the helper redefined
        assert cloudpickle.dumps(ns[name]) != second
        ns["SCALE"] = 2.0
        exec("def helper(v):\n    return v * SCALE\n", ns)
    before = cloudpickle.dumps(ns["k"])
    ns["TABLE"][1] = 7.0                                     # an array changed in place
    assert cloudpickle.dumps(ns["k"]) != before


def test_an_older_pickle_never_rebinds_the_globals_of_the_process_that_defined_it():
    ns = {"__name__": "a_cell_not_importable_2"}
    exec(textwrap.dedent('''
        from gpureplace import cuda
        def helper(v):
            return v * 2.0
        @cuda.jit
        def k(out):
            out[0] = helper(out[0])
        '''), ns)
    old = pickle.dumps(ns["k"])
    exec("def helper(v):\n    return v * 3.0\n", ns)
    new_helper = ns["helper"]
    # here, a pickle of the definition it had then (a Dask task queued before the redefinition,
    # unpickled by a scheduler in this process): a detached object of that definition, which
    # runs the old helper; the live kernel and the notebook's bindings are untouched
    again = pickle.loads(old)
    assert again is not ns["k"]
    assert ns["helper"] is new_helper
    from gpureplace import simulator
    out = np.ones(1)
    simulator.run(again, 1, 1, out)
    assert out[0] == 2.0
    out = np.ones(1)
    simulator.run(ns["k"], 1, 1, out)
    assert out[0] == 3.0
    assert not gpureplace_function.superseded(ns["k"])
    # the current definition: a handle on the live kernel
    assert pickle.loads(pickle.dumps(ns["k"])).pinned_target() is ns["k"]


def test_a_task_held_before_a_redefinition_keeps_the_definition_it_was_pickled_with():
    """A Dask scheduler in the notebook's process unpickles a task, holds it while a cell
    redefines a helper, then pickles it again for a worker: the worker must get, and this
    process must run, the definition the task was submitted with; the live kernel follows the
    cell."""
    ns = {"__name__": "a_cell_not_importable_3"}
    exec(textwrap.dedent('''
        from gpureplace import cuda
        def helper(v):
            return v * 2.0
        @cuda.jit
        def k(out):
            out[0] = helper(out[0])
        '''), ns)
    live = ns["k"]
    data = pickle.dumps(live)
    held = pickle.loads(data)                   # (the scheduler's copy of the task)
    cfg = pickle.loads(pickle.dumps(live[1, 1]))
    from gpureplace import simulator
    out = np.ones(1)
    simulator.run(held, 1, 1, out)
    assert out[0] == 2.0 and held.pinned_target() is live
    exec("def helper(v):\n    return v * 3.0\n", ns)         # the cell re-run
    import gpureplace
    gpureplace.refresh()                         # (what the notebook's cell hook does)
    for run in (lambda o: held[1, 1](o), cfg, lambda o: simulator.run(held, 1, 1, o)):
        out = np.ones(1)
        run(out)
        assert out[0] == 2.0
    out = np.ones(1)
    live[1, 1](out)
    assert out[0] == 3.0 and ns["k"] is live
    assert held.pinned_target() is not live and not gpureplace_function.superseded(live)
    assert pickle.dumps(held) == data            # sent on as it was submitted
    out = _in_a_new_process(pickle.dumps((held, cfg)),
                            "a = np.ones(1); objs[0][1, 1](a); objs[1](a); print(a[0])\n")
    assert out == ["4.0"]


def test_an_older_pickle_never_puts_an_old_override_back_into_the_live_context():
    """A Dask scheduler running in the notebook's process unpickles a task queued before the
    user changed an override: the live context keeps the user's override."""
    ctx = Context("pickled-then-changed")
    ctx.override(math.exp, math.sin)
    ns = _define()
    k = cuda.jit(ns["lazy"].py_func, context=ctx)
    old = pickle.dumps(k)
    ctx.override(math.exp, math.cos)
    pickle.loads(old)
    assert ctx.lookup(math.exp).impl is math.cos
    assert [o.impl for o in ctx.overrides()] == [math.cos]


def test_a_default_context_kernel_takes_the_default_overrides_along():
    """A kernel without a context of its own compiles in the default context: its overrides
    (``gpureplace.override(math.exp, ...)`` in a notebook) travel with it to another process,
    whose default context takes them."""
    import gpureplace
    ns = {"cuda": cuda, "math": math, "__name__": "not_importable_default_ctx"}
    exec("@cuda.jit\ndef e(out):\n    out[0] = math.exp(out[0])\n"
         "def exp_is_42(v):\n    return 42.0\n", ns)
    gpureplace.override(math.exp, ns["exp_is_42"])
    try:
        data = pickle.dumps(ns["e"])
    finally:
        gpureplace.default_context.remove_override(math.exp)
    out = _in_a_new_process(data, "a = np.zeros(1); objs[1, 1](a); print(a[0])\n")
    assert out == ["42.0"]


def test_an_unpicklable_global_is_named_with_the_function_that_reads_it():
    import threading
    ns = {"cuda": cuda, "LOCK": threading.Lock(), "__name__": "not_importable_lock"}
    exec("def log_it(v):\n    with LOCK:\n        return v\n"
         "@cuda.jit\ndef k(out):\n    if out.size < 0:\n        log_it(1)\n    out[0] = 1\n", ns)
    with pytest.raises(TypeError, match=r"k cannot be pickled .* the global 'LOCK' that log_it "
                                        r"reads is _thread.lock"):
        pickle.dumps(ns["k"])
    dask_base = pytest.importorskip("dask.base")
    with pytest.raises(TypeError, match="the global 'LOCK' that log_it reads"):
        dask_base.tokenize(ns["k"])


def test_attributes_set_on_a_users_module_travel_with_the_kernels_that_read_them(
        tmp_path, monkeypatch):
    """A cell's ``mycfg.SCALE = 3.0`` (``mycfg`` the user's module, pickled by name): the kernel
    reading ``mycfg.SCALE`` -- and calling ``mycfg.helper``, which reads ``SCALE`` bare --
    pickles with the value, its digest follows it, and another process runs with it; an older
    pickle unpickled here runs with the value it was pickled with, leaving the module alone."""
    import gpureplace
    name = f"gpr_pickled_cfg_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(
        "SCALE = 2.0\nTABLE = (1.0, 5.0)\n\ndef helper(v):\n    return v * SCALE\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ns = {"__name__": "a_cell_reading_a_module"}
    exec(textwrap.dedent(f'''
        import {name} as mycfg
        from gpureplace import cuda
        @cuda.jit
        def k(out):
            out[0] = mycfg.SCALE * 10.0
            out[1] = mycfg.helper(1.0)
            out[2] = mycfg.TABLE[1]
        @cuda.jit
        def unrelated(out):
            out[0] = 1.0
        '''), ns)
    mycfg = sys.modules[name]
    k = ns["k"]
    digest, other = k.definition_digest(), ns["unrelated"].definition_digest()
    first = pickle.dumps(k)
    mycfg.SCALE = 3.0                                  # the cell
    mycfg.TABLE = (1.0, 7.0)
    assert k.definition_digest() != digest
    assert ns["unrelated"].definition_digest() == other
    second = pickle.dumps(k)
    script = "o = np.zeros(3); objs[1, 1](o); print(*o)\n"
    assert _in_a_new_process(first, script, tmp_path) == ["20.0", "2.0", "5.0"]
    assert _in_a_new_process(second, script, tmp_path) == ["30.0", "3.0", "7.0"]
    older = pickle.loads(first)                        # (a task queued before the cell)
    out = np.zeros(3)
    older[1, 1](out)
    assert out.tolist() == [20.0, 2.0, 5.0]
    assert mycfg.SCALE == 3.0 and mycfg.TABLE == (1.0, 7.0)    # the module as the cell left it
    gpureplace.refresh()
    out = np.zeros(3)
    k[1, 1](out)
    assert out.tolist() == [30.0, 3.0, 7.0]


@pytest.mark.parametrize("unpickled", ["before the change", "after the change"])
def test_a_task_held_across_an_override_change_keeps_the_override_it_was_pickled_with(
        unpickled):
    """The same for a context's override: a task pickled while ``math.exp`` was overridden by
    ``triple`` runs ``triple`` here and in another process, whether the scheduler unpickled it
    before or after the cell that changed the override to ``halve``; the live context and
    kernel follow the cell."""
    ctx = Context(f"held-across-override-{unpickled}")
    ns = {"cuda": cuda, "math": math, "__name__": "not_importable_held_override"}
    exec("@cuda.jit\ndef e(out):\n    out[0] = math.exp(out[0])\n"
         "def triple(v):\n    return 3.0 * v\n"
         "def halve(v):\n    return 0.5 * v\n", ns)
    ctx.override(math.exp, ns["triple"])
    k = cuda.jit(ns["e"].py_func, context=ctx)
    data = pickle.dumps(k)
    held = pickle.loads(data) if unpickled == "before the change" else None
    ctx.override(math.exp, ns["halve"])                   # the cell
    if held is None:
        held = pickle.loads(data)
    from gpureplace import simulator
    for run in (lambda o: simulator.run(held, 1, 1, o), lambda o: held[1, 1](o)):
        out = np.array([2.0])
        run(out)
        assert out[0] == 6.0
    assert ctx.lookup(math.exp).impl is ns["halve"] and held.context is not ctx
    out = np.array([2.0])
    k[1, 1](out)
    assert out[0] == 1.0
    got = _in_a_new_process(pickle.dumps(held),
                            "a = np.array([2.0]); objs[1, 1](a); print(a[0])\n")
    assert got == ["6.0"]
    assert Context.named(ctx.name) is ctx               # the copy took no name


def test_a_receiving_process_keeps_each_pickles_definition_whatever_arrives_later():
    """A Dask worker unpickles the tasks it is given (in its event loop, while others run): a
    kernel unpickled there stays the definition it was pickled with when a later pickle of it
    (a redefined helper) arrives -- the one live object there follows the newest, held tasks
    get an object of theirs -- and a helper deleted where it was defined is deleted there too
    (the launch says so, as it does where it was defined) instead of running the old one."""
    import gpureplace
    ns = {"cuda": cuda, "__name__": "a_cell_sent_to_workers"}
    exec("def helper(v):\n    return v + 1.0\n"
         "@cuda.jit\ndef k(out):\n    out[0] = helper(0.0)\n", ns)
    first = pickle.dumps(ns["k"])
    exec("def helper(v):\n    return v + 2.0\n", ns)
    gpureplace.refresh()
    second = pickle.dumps(ns["k"])
    del ns["helper"]
    gpureplace.refresh()
    third = pickle.dumps(ns["k"])
    exec("def helper(v):\n    return v + 3.0\n", ns)
    gpureplace.refresh()
    fourth = pickle.dumps(ns["k"])
    script = textwrap.dedent('''
        first, second, third, fourth = objs
        def run(k):
            o = np.zeros(1)
            try:
                k[1, 1](o)
            except Exception as exc:
                told = "helper" in str(exc) and "defined" in str(exc)     # (as it is here)
                return "undefined" if told else repr(exc)
            return str(o[0])
        a = pickle.loads(first)
        print(run(a))
        b = pickle.loads(second)          # a later task arrives while a is held
        print(run(a), run(b))
        a2 = pickle.loads(first)          # an older one again
        print(run(b), run(a2), run(a))
        c = pickle.loads(third)           # the helper deleted
        print(run(c), run(b))
        d = pickle.loads(fourth)          # and defined again
        print(run(d), run(c), run(a))
        ''')
    payload = pickle.dumps([first, second, third, fourth])
    got = _in_a_new_process(payload, script)
    assert got == ["1.0", "1.0", "2.0", "2.0", "1.0", "1.0", "undefined", "2.0", "3.0",
                   "undefined", "1.0"]


CONFIGURED = """
from dask.base import tokenize
from gpureplace import cuda

@cuda.jit
def k(x):
    x[0] = 1

print(tokenize(k[1, 8]), tokenize(k[2, 8]), tokenize(k[1, 8, 0, 16]))
"""


def test_a_configured_launch_gets_the_same_token_in_every_process():
    """``k[1, 8]`` (as ``dask.delayed(k[1, 8])`` holds it) was tokenized by its pickle, which
    holds the kernel's identity in the process: another key in every process."""
    env = dict(os.environ, GPUREPLACE_BACKEND="simulator")
    first, second = (subprocess.run([sys.executable, "-c", CONFIGURED], capture_output=True,
                                    text=True, timeout=300, env=env).stdout.split()
                     for _ in range(2))
    assert first == second and len(set(first)) == 3


def test_kernels_pickle_after_one_used_an_extending_overload():
    """The default context's overload carried its Numba type once a kernel had used it (a
    template holding this process's compilers): pickling any kernel recursed without end."""
    from gpureplace.cuda import extending
    ns = {"cuda": cuda, "extending": extending, "__name__": "not_importable_overloaded"}
    exec("def myfunc(v):\n    return v\n"
         "@extending.overload(myfunc)\n"
         "def _ov(v):\n    def impl(v):\n        return v * 3.0\n    return impl\n"
         "@cuda.jit\ndef k1(out):\n    out[0] = myfunc(out[0])\n"
         "@cuda.jit\ndef unrelated(out):\n    out[0] = out[0] + 1.0\n", ns)
    a = np.ones(1)
    ns["k1"][1, 1](a)
    assert a[0] == 3.0
    data = pickle.dumps((ns["k1"], ns["unrelated"]))
    out = _in_a_new_process(data, "a = np.ones(1); objs[0][1, 1](a); b = np.ones(1); "
                                  "objs[1][1, 1](b); print(a[0], b[0])\n")
    assert out == ["3.0", "2.0"]


def test_an_override_of_a_notebook_function_applies_in_another_process():
    """The kernel's global ``act`` and the override's host ``act`` arrive as two unpickled
    objects: the override (keyed by the function) was silently lost, the plain helper ran."""
    import gpureplace
    ns = {"cuda": cuda, "Context": Context, "__name__": "not_importable_override_host"}
    exec("def act(v):\n    return v + 1.0\n"
         "ctx = Context('act_ctx')\n"
         "@ctx.override(act)\n"
         "def act_minus(v):\n    return 42.0 - v\n"
         "@cuda.jit\ndef k(out):\n    out[0] = act(out[0])\n"
         "def act_times(v):\n    return v * 100.0\n", ns)
    gpureplace.override(ns["act"], ns["act_times"])
    try:
        a, b = np.ones(1), np.ones(1)
        ns["k"].with_context(ns["ctx"])[1, 1](a)
        ns["k"][1, 1](b)
        assert (a[0], b[0]) == (41.0, 100.0)
        data = pickle.dumps((ns["k"].with_context(ns["ctx"]), ns["k"]))
    finally:
        gpureplace.default_context.remove_override(ns["act"])
    out = _in_a_new_process(data, "a = np.ones(1); objs[0][1, 1](a); b = np.ones(1); "
                                  "objs[1][1, 1](b); print(a[0], b[0])\n")
    assert out == ["41.0", "100.0"]
