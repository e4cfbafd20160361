"""Issue 18's leftovers for pickled definitions, each in processes of its own (fresh interpreters
on the simulator): a token is the same in every process for the same definition; a user's module
edited and reloaded in the notebook travels with the kernels that call it; a kernel sent back by
a process that received it is the defining process's object again; a compile left out of the
counts is never counted, even for a moment."""

import importlib
import os
import pickle
import subprocess
import sys
import textwrap
import uuid

import numpy as np

import gpureplace

ENV = dict(os.environ, GPUREPLACE_BACKEND="simulator", GPUREPLACE_PREWARM="0")


def _run(code, *args, stdin=b"", path=None, env=None, cwd=None):
    """stdout of ``code`` (Python source, or the path of a script run with ``args``) run in a
    fresh interpreter on the simulator."""
    env = dict(ENV, **(env or {}))
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path)] + [p for p in [env.get("PYTHONPATH")]
                                                           if p])
    argv = [str(code), *map(str, args)] if isinstance(code, os.PathLike) else ["-c", code]
    done = subprocess.run([sys.executable, *argv], input=stdin, capture_output=True, env=env,
                          timeout=300, cwd=cwd)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


# -- the same definition, the same token in every process -------------------------------------

CELL = '''
import sys
import numpy as np
from dask.base import tokenize
from gpureplace import cuda

TABLE = np.arange(6.0) * 0.5

class Tuning:
    """A class defined in the script: cloudpickle pickles it by value, with an id of its own."""
    unroll = 4

def helper(v, mode="alpha"):
    if mode in {"alpha", "beta", "gamma", "delta"}:      # (a frozenset: its order, the seed's)
        return v * TABLE[2] + Tuning.unroll
    return v

@cuda.jit(device=True)
def dev(v):
    return helper(v) + 1.0

@cuda.jit
def k(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = dev(x[i])

print(tokenize(k), tokenize(dev), tokenize(k.context))
if len(sys.argv) > 1:
    with open(sys.argv[1], "wb") as f:
        f.write(pickle.dumps([k, dev]))
'''


def test_the_same_script_in_two_processes_and_its_rebuilt_kernel_get_the_same_tokens(tmp_path):
    """The token of a kernel defined in ``__main__`` was a digest of its cloudpickle bytes, which
    hold the script's file name, a set's order (the hash seed), the id cloudpickle gives a class
    and pickle's memo: the same script in another place, another process, or the kernel rebuilt
    from its pickle there (a Dask worker), got another token.  Now it is the same; a change of
    what it depends on, however deep, still changes it."""
    source = "import pickle\n" + CELL
    tokens = []
    for n, seed in ((1, "1"), (2, "2")):
        folder = tmp_path / f"run{n}"
        folder.mkdir()
        (folder / "cell.py").write_text(source)
        out = _run(folder / "cell.py", env={"PYTHONHASHSEED": seed}, cwd=folder)
        tokens.append(out.decode().split())
    assert tokens[0] == tokens[1]
    # rebuilt from its pickle in a third process (a Dask worker's tokenize of it)
    pickled = tmp_path / "k.pkl"
    _run(tmp_path / "run1" / "cell.py", pickled, env={"PYTHONHASHSEED": "3"})
    again = _run("import pickle, sys\nfrom dask.base import tokenize\n"
                 "k, dev = pickle.loads(sys.stdin.buffer.read())\n"
                 "print(tokenize(k), tokenize(dev), tokenize(k.context))\n",
                 stdin=pickled.read_bytes(), env={"PYTHONHASHSEED": "4"})
    assert again.decode().split() == tokens[0]
    # what the kernel depends on, two calls down (a global of the helper of its device
    # function), changed: another token for the kernel and the device function
    changed = tmp_path / "changed.py"
    changed.write_text(source.replace("np.arange(6.0) * 0.5", "np.arange(6.0) * 0.25"))
    other = _run(changed).decode().split()
    assert other[0] != tokens[0][0] and other[1] != tokens[0][1]
    assert other[2] == tokens[0][2]                            # (the context is the same)



EXTENDED = """
from dask.base import tokenize
from gpureplace import cuda

class Scale:
    def __init__(self, k):
        self.k = k
    def prepare_args(self, ty, val, stream=0, retr=[]):
        return ty, val

@cuda.jit(extensions=[Scale(FACTOR)])
def k(x):
    x[0] = 1

print(tokenize(k))
"""


def test_a_kernel_with_argument_extensions_gets_the_same_token_in_every_process():
    """Argument extensions were digested by their repr (their address: another token in each
    process); now by what defines them, so an extension with other values still changes it."""
    tokens = [_run(EXTENDED.replace("FACTOR", factor)).decode().split()
              for factor in ("2", "2", "3")]
    assert tokens[0] == tokens[1] and tokens[2] != tokens[0]

NOTEBOOK = '''
import sys
from IPython.testing.globalipapp import start_ipython
ip = start_ipython()
for _ in range(int(sys.argv[1])):
    ip.run_cell("x = 1", store_history=True)         # (earlier cells: another cell file name)
ip.run_cell(sys.stdin.read(), store_history=True)
'''


def test_the_same_cell_at_another_execution_count_gets_the_same_token(tmp_path):
    """In a notebook, a cell's file name holds its execution count: the same cell run third in
    one kernel and first in another gave its kernels other tokens."""
    script = tmp_path / "notebook.py"
    script.write_text(NOTEBOOK)
    cell = CELL.replace("if len(sys.argv) > 1:", "if False:").encode()
    tokens = [_run(script, n, stdin=cell, env={"PYTHONHASHSEED": str(n + 1)}).decode().split()
              for n in (0, 2)]
    assert len(tokens[0]) == 3 and tokens[0] == tokens[1]


# -- a user's module edited on disk and reloaded ------------------------------------------------

MYLIB = '''
from gpureplace import cuda

SCALE = 2.0

def helper(v):
    return v * SCALE

@cuda.jit(device=True)
def twice(v):
    return v * 2.0
'''

MYLIB_EDITED = '''
from gpureplace import cuda

SCALE = 2.0

def offset():
    return 100.0

def helper(v):
    return v * 3.0 + offset()

@cuda.jit(device=True)
def twice(v):
    return v * 4.0
'''

RUN = '''
import pickle, sys, numpy as np
import {name} as mylib
mine, twice = mylib.helper, mylib.twice
for data in pickle.loads(sys.stdin.buffer.read()):
    k = pickle.loads(data)
    out = np.zeros(2)
    k[1, 1](out)
    print(*out, mylib.helper is mine, mylib.twice is twice, mylib.helper(1.0))
'''


HELD = '''
import pickle, sys, numpy as np
import {name} as mylib
first, second = pickle.loads(sys.stdin.buffer.read())
def run(k):
    out = np.zeros(2)
    k[1, 1](out)
    return out.tolist()
held = pickle.loads(first)       # a task of the first definition, held while the next arrives
new = pickle.loads(second)
print(run(held), run(new), run(held), run(new), mylib.helper(1.0))
'''


def _edited_module(tmp_path, monkeypatch):
    name = f"gpr_mylib_{uuid.uuid4().hex[:12]}"                # (one module per test)
    (tmp_path / "here").mkdir()
    (tmp_path / "there").mkdir()
    (tmp_path / "here" / f"{name}.py").write_text(MYLIB)
    (tmp_path / "there" / f"{name}.py").write_text(MYLIB)     # (a worker's import of it)
    monkeypatch.syspath_prepend(str(tmp_path / "here"))
    ns = {"__name__": "a_cell_calling_mylib"}
    exec(textwrap.dedent(f'''
        import {name} as mylib
        from gpureplace import cuda
        @cuda.jit
        def k(out):
            out[0] = mylib.helper(1.0)
            out[1] = mylib.twice(5.0)
        @cuda.jit
        def plain(out):
            out[0] = 1.0
        '''), ns)
    return name, ns


def test_a_module_edited_and_reloaded_travels_with_the_kernels_that_call_it(tmp_path,
                                                                           monkeypatch):
    """``mylib.helper`` edited on disk and ``importlib.reload(mylib)`` in the notebook: the
    kernel's token changes, and a process that imported the old ``mylib`` (a Dask worker) runs
    the new helper -- and the new function it calls -- instead of its own; where the pickle's
    function is the one it has, it keeps its own object (nothing to recompile there)."""
    name, ns = _edited_module(tmp_path, monkeypatch)
    mylib = sys.modules[name]
    k = ns["k"]
    token, plain = k.definition_digest(), ns["plain"].definition_digest()
    first = pickle.dumps(k)
    (tmp_path / "here" / f"{name}.py").write_text(MYLIB_EDITED)
    importlib.reload(mylib)
    gpureplace.refresh()
    assert k.definition_digest() != token                  # the helper it calls changed
    assert ns["plain"].definition_digest() == plain
    second = pickle.dumps(k)
    out = np.zeros(2)
    k[1, 1](out)
    assert out.tolist() == [103.0, 20.0]                   # (here: the reloaded module)
    got = _run(RUN.format(name=name), stdin=pickle.dumps([first, second]),
               path=tmp_path / "there").decode().splitlines()
    # the first pickle: its own helper and device function, kept; the second: the notebook's
    # new helper (and the new function it calls) and device function bound in its module
    assert got == ["2.0 10.0 True True 2.0", "103.0 20.0 False False 103.0"]
    # a task of the first definition held there while the second arrives runs the old helper
    # from a copy of the module, never putting it back into the module the new one reads
    got = _run(HELD.format(name=name), stdin=pickle.dumps([first, second]),
               path=tmp_path / "there").decode().strip()
    assert got == "[2.0, 10.0] [103.0, 20.0] [2.0, 10.0] [103.0, 20.0] 103.0"
    # here, the older pickle (a task queued before the reload) runs the helper it was
    # pickled with, and leaves the module as the reload made it
    older = pickle.loads(first)
    out = np.zeros(2)
    older[1, 1](out)
    assert out.tolist() == [2.0, 10.0]
    assert mylib.helper(1.0) == 103.0 and hasattr(mylib, "offset")


def test_autoreloads_new_code_in_place_travels_too_and_libraries_go_by_name(tmp_path,
                                                                          monkeypatch):
    """``%autoreload 2`` gives the module's function new code in place (the same object): the
    token changes and the new code reaches the other process.  Functions of the standard
    library, of installed packages and of gpureplace still travel by name only."""
    name, ns = _edited_module(tmp_path, monkeypatch)
    mylib = sys.modules[name]
    k = ns["k"]
    token = k.definition_digest()
    scope = {"SCALE": 2.0}
    exec("def helper(v):\n    return v * SCALE + 7.0\n", scope)
    mylib.helper.__code__ = scope["helper"].__code__         # (what autoreload does)
    gpureplace.refresh()
    assert k.definition_digest() != token
    got = _run(RUN.format(name=name), stdin=pickle.dumps([pickle.dumps(k)]),
               path=tmp_path / "there").decode().split()
    assert got == ["9.0", "10.0", "False", "True", "9.0"]
    lib = {"__name__": "a_cell_using_libraries"}
    exec("import math\nimport numpy as np\nfrom gpureplace import cuda\n"
         "@cuda.jit\ndef k(out):\n    out[0] = math.sin(np.float64(1.0)) + cuda.grid(1)\n", lib)
    data = pickle.dumps(lib["k"])
    assert b"_Source" not in data and b"_function_as_read" not in data


# -- a kernel sent back to the process that defined it ------------------------------------------

SEND_BACK = '''
import pickle, sys
objs = pickle.loads(sys.stdin.buffer.read())
sys.stdout.buffer.write(pickle.dumps(objs))          # (a Dask task's result, sent back)
'''


def test_a_kernel_sent_back_is_the_defining_processs_own_object_while_unchanged():
    """A process that received a kernel (a Dask worker) sends it back (the task's result): in
    the process that defined it, that is the kernel itself -- not a handle, not a copy -- while
    its definition is unchanged, and a launch configuration is the kernel's; after a
    redefinition, an object of the definition sent (which runs it).  A pickle unpickled here
    directly (a task the scheduler holds) is still a handle pinned to its definition."""
    ns = {"__name__": "a_cell_sent_and_back"}
    exec("from gpureplace import cuda\n"
         "def helper(v):\n    return v + 1.0\n"
         "@cuda.jit(device=True)\ndef dev(v):\n    return helper(v)\n"
         "@cuda.jit\ndef k(out):\n    out[0] = dev(out[0])\n", ns)
    k, dev = ns["k"], ns["dev"]
    variant = k.with_context(gpureplace.Context("sent-back-ctx"))
    sent = pickle.dumps([k, dev, k[1, 1], variant])
    back = pickle.loads(_run(SEND_BACK, stdin=sent))
    assert back[0] is k and back[1] is dev
    assert back[2].kernel is k and back[3] is variant
    assert pickle.loads(pickle.dumps(k)).pinned_target() is k        # (the scheduler's case)
    exec("def helper(v):\n    return v + 2.0\n", ns)                 # redefined meanwhile
    gpureplace.refresh()
    older = pickle.loads(_run(SEND_BACK, stdin=sent))[0]
    assert older is not k
    out = np.zeros(1)
    older[1, 1](out)
    assert out[0] == 1.0
    out = np.zeros(1)
    k[1, 1](out)
    assert out[0] == 2.0


# -- compiles left out of the counts ------------------------------------------------------------

def test_a_compile_left_out_of_the_counts_is_never_counted_even_for_a_moment():
    """``frontend.uncounted`` (the warm-up's compiles, a Dask worker's front ends run ahead)
    counted each compile, then set the count back when it ended: ``stats()`` read meanwhile --
    from another thread, as a Dask worker's ``client.run(gpureplace.stats)`` does -- showed it.
    Now it is never counted; a compile after it still is."""
    import threading

    from numba.core import types

    from gpureplace.compiler import frontend
    from gpureplace.compiler.compiled import Options
    from gpureplace.dispatch.context import current_default

    def make():
        ns = {}
        exec("def body(x):\n    return x * 3.0 + 1.0\n", ns)
        return ns["body"]

    before = gpureplace.stats()["device_compiles"]
    seen = []
    with frontend.uncounted():
        frontend.compile_device(make(), current_default(), {}, (types.float64,),
                                Options(arch="sm_80"))
        seen.append(gpureplace.stats()["device_compiles"])
        worker = threading.Thread(target=lambda: seen.append(gpureplace.stats()[
            "device_compiles"]))
        worker.start()
        worker.join()
    seen.append(gpureplace.stats()["device_compiles"])
    assert seen == [before] * 3
    frontend.compile_device(make(), current_default(), {}, (types.float64,),
                            Options(arch="sm_80"))
    assert gpureplace.stats()["device_compiles"] == before + 1


# -- a process that adopted a redefinition: every helper reads the notebook's globals -----------

ADOPT = '''
import json, pickle, sys
import numpy as np
import gpureplace
x = np.arange(6.0)
for steps in pickle.loads(sys.stdin.buffer.read()):
    for data in steps:
        before = gpureplace.stats()
        k = pickle.loads(data)            # (as a Dask worker: each brought to it in place)
        out = np.zeros(6)
        k[1, 6](x, out)
        after = gpureplace.stats()
        print(json.dumps([out.tolist(), after["kernel_compiles"] - before["kernel_compiles"],
                          after["device_compiles"] - before["device_compiles"]]))
    print("--")
'''

KERNEL = '''
@cuda.jit
def k(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = h(x[i])
'''


def _adopted(scenarios, path=None):
    """``scenarios``: lists of cells, run in a namespace of their own each (a notebook's
    ``__main__``: its functions pickle by value) after the first; the kernel ``k`` of each is
    pickled after every cell, and another process unpickles them in turn (as a Dask worker
    given a task of each) and launches each: [[(out, kernel compiles, device compiles), ...],
    ...], one list a scenario."""
    pickles = []
    for n, cells in enumerate(scenarios):
        ns = {"__name__": f"a_cell_adopted_{n}_{uuid.uuid4().hex[:8]}"}
        exec("import numpy as np\nfrom gpureplace import cuda\n", ns)
        steps = []
        for cell in cells:
            exec(textwrap.dedent(cell), ns)
            gpureplace.refresh()
            steps.append(pickle.dumps(ns["k"]))
        pickles.append(steps)
    out = _run(ADOPT, stdin=pickle.dumps(pickles), path=path).decode()
    import json
    return [[tuple(json.loads(line)) for line in block.strip().splitlines()]
            for block in out.split("--\n") if block.strip()]


def test_a_helper_redefined_to_read_a_global_follows_that_global_where_it_was_adopted():
    """A process that received a kernel (a Dask worker) adopts a redefinition in place.  Once a
    helper was redefined into one that reads a global (``C``, an array ``G``), it read a
    namespace of its own pickle there, which no later pickle updated: ``C = 4`` (or
    ``G[1] = 9``) in the notebook changed the kernel's token, yet the process ran ``C = 3``
    forever.  Now the new helper reads the namespace the old one read: a later change reaches
    it -- a global of a helper's helper, of a device function's helper and of a closure too --,
    and only what read the change compiles again."""
    x = np.arange(6.0)
    got = _adopted([
        ["def h(v):\n    return v + 1.0\n" + KERNEL,
         "C = 3.0\ndef h(v):\n    return v * C\n",       # redefined: now reads C
         "C = 4.0\n",
         "UNRELATED = 1\n",
         "C = 5.0\n"],
        ["def h(v):\n    return v + 1.0\n" + KERNEL,
         "G = np.array([1.0, 3.0])\ndef h(v):\n    return v * G[1]\n",
         "G[1] = 9.0\n"],                                    # an array changed in place
        ["def g(v):\n    return v + 1.0\ndef h(v):\n    return g(v) + 1.0\n" + KERNEL,
         "C = 3.0\ndef g(v):\n    return v * C\n",       # two levels down
         "C = 4.0\n",
         "def h(v):\n    return g(v) + 2.0\n",            # the helper above it redefined
         "C = 5.0\n"],
        ["def g(v):\n    return v + 1.0\n@cuda.jit(device=True)\ndef h(v):\n    return g(v)\n"
         + KERNEL,
         "C = 3.0\ndef g(v):\n    return v * C\n",       # a device function's helper
         "C = 4.0\n"],
        ["@cuda.jit(device=True)\ndef h(v):\n    return v + 1.0\n" + KERNEL,
         "C = 3.0\n@cuda.jit(device=True)\ndef h(v):\n    return v * C\n",
         "C = 4.0\n"],                                       # a device function itself
        ["def scaled(c):\n    def inner(v):\n        return v * c + B\n    return inner\n"
         "B = 0.0\nh = scaled(2.0)\n" + KERNEL,
         "B = 1.0\nh = scaled(3.0)\n",                     # a closure, made again
         "B = 2.0\n"],
    ])
    # the values each step computes, as the notebook does: (expected, compiles there)
    expected = [
        [(x + 1, None), (x * 3, 1), (x * 4, 1), (x * 4, 0), (x * 5, 1)],
        [(x + 1, None), (x * 3, 1), (x * 9, 1)],
        [(x + 2, None), (x * 3 + 1, 1), (x * 4 + 1, 1), (x * 4 + 2, 1), (x * 5 + 2, 1)],
        [(x + 1, None), (x * 3, 1), (x * 4, 1)],
        [(x + 1, None), (x * 3, 1), (x * 4, 1)],
        [(x * 2, None), (x * 3 + 1, 1), (x * 3 + 2, 1)],
    ]
    for n, (steps, wanted) in enumerate(zip(got, expected)):
        assert len(steps) == len(wanted), (n, steps)
        for i, ((out, kernels, devices), (values, compiles)) in enumerate(zip(steps, wanted)):
            np.testing.assert_array_equal(out, values, err_msg=f"scenario {n}, step {i}")
            if compiles is not None:
                # only the function that read the change goes through the front end again (the
                # helper above an unchanged one is kept, the kernel relinked); nothing if
                # nothing it reads changed
                assert (kernels, devices) == (compiles, compiles), (n, i, steps)


MODHELP = '''
C = 3.0

def h(v):
    return v * C

def two(v):
    return h(v) + 1.0
'''


def test_a_notebook_helper_redefined_to_call_a_modules_follows_both_globals(tmp_path,
                                                                            monkeypatch):
    """The same for a notebook's helper redefined into one that calls a function of the user's
    module (pickled by name, the module's attributes the notebook set travelling with it): a
    later change of the notebook's global, and of the module's attribute, both reach the
    process that adopted it."""
    name = f"gpr_modhelp_{uuid.uuid4().hex[:12]}"
    for where in ("here", "there"):
        (tmp_path / where).mkdir()
        (tmp_path / where / f"{name}.py").write_text(MODHELP)
    monkeypatch.syspath_prepend(str(tmp_path / "here"))
    x = np.arange(6.0)
    [got] = _adopted([[
        f"import {name} as mylib\ndef h(v):\n    return v + 1.0\n" + KERNEL,
        "S = 2.0\ndef h(v):\n    return mylib.two(v) * S\n",
        "S = 3.0\n",
        "mylib.C = 10.0\n",
    ]], path=tmp_path / "there")
    wanted = [x + 1, (x * 3 + 1) * 2, (x * 3 + 1) * 3, (x * 10 + 1) * 3]
    for step, values in zip(got, wanted):
        np.testing.assert_array_equal(step[0], values)
    assert len(got) == len(wanted)
