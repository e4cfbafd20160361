"""Issue 18's leftovers on Dask workers (worker processes of a ``distributed.LocalCluster`` on
the simulator backend): a user's module edited and reloaded in the client reaches the workers, a
worker's token of a kernel is the client's, a kernel a task returns is the client's own object,
and ``map_blocks`` takes 0-d Dask arrays as the scalars they compute to."""

import importlib
import os
import sys
import tempfile
import uuid

import numpy as np
import pytest

import gpureplace
from corpus import notebook

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
from dask.base import tokenize  # noqa: E402


@pytest.fixture(scope="module")
def client():
    env = {"GPUREPLACE_BACKEND": "simulator", "GPUREPLACE_PREWARM": "0",
           "GPUREPLACE_CACHE_DIR": tempfile.mkdtemp(prefix="gpureplace-workers-")}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    main = sys.modules["__main__"]
    if not hasattr(main, "__spec__"):
        main.__spec__ = None      # (an earlier test's stand-in __main__: spawn reads it)
    try:
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1,
                                           dashboard_address=None, silence_logs=40)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def _on_path(folder):
    sys.path.insert(0, folder)


def _identity(x):
    return x


def _helper_of(name):
    """On a worker: its module ``name``'s helper at 1.0."""
    return sys.modules[name].helper(1.0)


def test_a_module_edited_and_reloaded_in_the_client_reaches_the_workers(client, tmp_path,
                                                                       monkeypatch):
    """The kernel calls ``mylib.helper``; the user edits mylib.py and reloads it in the client.
    The workers imported the old file: they used to keep it (the module travelled by name), and
    the kernel's token stayed the same, so a graph built again had the same keys.  Now the
    token changes and the workers run the new helper."""
    name = f"gpr_dask_mylib_{uuid.uuid4().hex[:12]}"
    path = tmp_path / f"{name}.py"
    path.write_text("def helper(v):\n    return v * 2.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    client.run(_on_path, str(tmp_path))                        # (the workers import it too)
    ns = notebook(f'''
import {name} as mylib
from gpureplace import cuda

@cuda.jit
def scaled(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = mylib.helper(x[i])
''')
    mylib = sys.modules[name]
    x_np = np.arange(16, dtype=np.float64)
    x = da.from_array(x_np, chunks=8)
    first = gpureplace.dask.map_blocks(ns["scaled"], x)
    np.testing.assert_array_equal(first.compute(), x_np * 2.0)
    token = tokenize(ns["scaled"])
    # edited on disk (another constant only: the same globals read) and reloaded here
    path.write_text("def helper(v):\n    return v * 3.25\n")
    importlib.invalidate_caches()
    importlib.reload(mylib)
    gpureplace.refresh()
    assert tokenize(ns["scaled"]) != token
    again = gpureplace.dask.map_blocks(ns["scaled"], x)       # (the cell run again)
    assert again.name != first.name
    np.testing.assert_array_equal(again.compute(), x_np * 3.25)
    assert set(client.run(_helper_of, name).values()) == {3.25}   # their module, as here


def test_a_workers_token_of_a_kernel_is_the_clients(client):
    """Dask tokenizes on the workers too (a graph a task builds): the kernel rebuilt there from
    its pickle must get the client's token, not one of the pickle's bytes there."""
    ns = notebook()
    for name in ("uses_helper", "bump"):
        assert client.submit(tokenize, ns[name], pure=False).result() == tokenize(ns[name])


def test_a_kernel_returned_by_a_task_is_the_clients_own_object(client):
    """``client.submit(lambda k: k, k).result() is k`` while the definition is unchanged: a
    kernel coming back to the process that defined it is that kernel, with what it compiled,
    not a copy -- a launch configuration's kernel too; after a redefinition, it is an object of
    the definition the task ran."""
    ns = notebook()
    k = ns["uses_helper"]
    assert client.submit(_identity, k, pure=False).result() is k
    assert client.submit(_identity, ns["bump"], pure=False).result() is ns["bump"]
    assert client.submit(_identity, k[2, 32], pure=False).result().kernel is k
    held = client.submit(_identity, k, pure=False)
    held.result()
    exec("def helper(v):\n    return v * 5.0\n", ns)            # redefined meanwhile
    gpureplace.refresh()
    older = held.result()
    assert older is not k
    x = np.arange(4.0)
    out = np.zeros(4)
    older[1, 4](x, out)
    np.testing.assert_array_equal(out, (x + 1.0) * 2.0)        # the definition it ran
    assert client.submit(_identity, k, pure=False).result() is k


SCALED = '''
from gpureplace import cuda

@cuda.jit
def scaled(a, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]

@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]
'''


def test_map_blocks_takes_a_0d_dask_array_as_the_scalar_it_computes_to(client):
    """``map_blocks(scaled, 1 / x.max(), x)``: the 0-d Dask array is computed in the graph and
    passed to each task as a scalar of its dtype; before, it was taken for the array whose
    blocks the kernel runs over ("rechunk them alike")."""
    ns = notebook(SCALED)
    x_np = np.arange(10.0)
    x = da.from_array(x_np, chunks=4)
    y = gpureplace.dask.map_blocks(ns["scaled"], 1.0 / x.max(), x)
    np.testing.assert_allclose(y.compute(), x_np / 9.0)
    x32 = x.astype(np.float32)
    half = da.from_array(np.array(0.5, dtype=np.float32))
    z = gpureplace.dask.map_blocks(ns["axpy"], half, x32, x32)
    got = z.compute()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, 1.5 * x_np.astype(np.float32))


def test_map_blocks_names_arguments_by_their_position():
    ns = notebook(SCALED)
    x = da.from_array(np.arange(10.0), chunks=5)
    s = x.sum()
    with pytest.raises(TypeError, match=r"the Dask array argument 1 is 0-d, which the kernel "
                                        r"gets as a scalar; pass an array of 1 to 3 dimensions"):
        gpureplace.dask.map_blocks(ns["scaled"], s, 3.0)
    with pytest.raises(TypeError, match=r"the Dask array arguments 1, 2 are 0-d"):
        gpureplace.dask.map_blocks(ns["scaled"], s, s)
    # the third argument (the second Dask array) chunked otherwise: named as the third
    with pytest.raises(ValueError, match=r"Dask array argument 3 has shape \(10,\) and chunks "
                                         r"\(\(4, 4, 2\),\), argument 2 \(the first\)"):
        gpureplace.dask.map_blocks(ns["axpy"], 2.0, x, da.from_array(np.arange(10.0),
                                                                      chunks=4))


def _compiles():
    stats = gpureplace.stats()
    return stats["kernel_compiles"], stats["device_compiles"]


def test_a_global_that_a_redefined_helper_reads_reaches_the_workers_when_it_changes(client):
    """The notebook redefines a helper into one that reads globals (``C``, an array ``G``),
    then a later cell changes them: a graph built again computed with the old values on the
    workers forever (the new helper read a namespace of its own pickle there, which no later
    task updated), while the token changed and the notebook's own launch was right.  Now the
    workers run what the notebook runs, compiling again only the helper."""
    ns = notebook('''
from gpureplace import cuda

def h(v):
    return v + 1.0

@cuda.jit
def k(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = h(x[i])
''')
    x_np = np.arange(16.0)
    x = da.from_array(x_np, chunks=8)

    def run():                       # (the graph built again, as re-running its cell does)
        return gpureplace.dask.map_blocks(ns["k"], x).compute()

    np.testing.assert_array_equal(run(), x_np + 1.0)
    exec("import numpy as np\nC = 3.0\nG = np.array([1.0, 2.0])\n"
         "def h(v):\n    return v * C + G[1]\n", ns)       # the helper redefined
    np.testing.assert_array_equal(run(), x_np * 3.0 + 2.0)
    before = client.run(_compiles)
    exec("C = 4.0\n", ns)                                    # a later cell
    np.testing.assert_array_equal(run(), x_np * 4.0 + 2.0)
    after = client.run(_compiles)
    assert {w: (after[w][0] - b[0], after[w][1] - b[1]) for w, b in before.items()} == \
        {w: (1, 1) for w in before}                        # the helper, the kernel relinked
    ns["G"][1] = 9.0                                         # changed in place
    np.testing.assert_array_equal(run(), x_np * 4.0 + 9.0)
    out = np.zeros(16)
    ns["k"][1, 16](x_np, out)
    np.testing.assert_array_equal(out, x_np * 4.0 + 9.0)     # (as here)


def test_a_helper_bound_as_a_default_argument_follows_the_notebooks_globals_on_workers(client):
    """A device function takes its helper as a default argument (``def g(v, f=h)``), the one
    way besides a name that device code reaches a function value: when a later cell changes
    the global the helper reads, the workers compute with the new value, as the notebook
    does."""
    ns = notebook('''
from gpureplace import cuda
C = 3.0

def h(v):
    return v * C

def g(v, f=h):
    return f(v) + 1.0

@cuda.jit
def k(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = g(x[i])
''')
    x_np = np.arange(16.0)
    x = da.from_array(x_np, chunks=8)

    def run():
        return gpureplace.dask.map_blocks(ns["k"], x).compute()

    np.testing.assert_array_equal(run(), x_np * 3.0 + 1.0)
    exec("C = 4.0\n", ns)                                    # a later cell
    out = np.zeros(16)
    ns["k"][1, 16](x_np, out)
    np.testing.assert_array_equal(out, x_np * 4.0 + 1.0)     # (here)
    np.testing.assert_array_equal(run(), x_np * 4.0 + 1.0)   # and on the workers
    exec("def h(v):\n    return v * C * 2.0\n", ns)         # h redefined: g keeps the old one,
    np.testing.assert_array_equal(run(), x_np * 4.0 + 1.0)   # as Python binds defaults
    exec("def g(v, f=h):\n    return f(v) + 1.0\n", ns)     # g again: the new h
    np.testing.assert_array_equal(run(), x_np * 8.0 + 1.0)
    before = client.run(_compiles)
    exec("C = 5.0\n", ns)
    np.testing.assert_array_equal(run(), x_np * 10.0 + 1.0)
    after = client.run(_compiles)
    assert {w: (after[w][0] - b[0], after[w][1] - b[1]) for w, b in before.items()} == \
        {w: (1, 1) for w in before}                        # h, and the kernel relinked
