"""Dask (issue 18): gpureplace callables pickle by what defines them, tokenize by it, and run on
Dask workers (worker processes of a ``distributed.LocalCluster`` on the simulator backend here);
a redefinition in the client reaches the workers with the next task, and a worker compiles
again only what changed."""

import math
import os
import pickle
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import gpureplace
from corpus import NOTEBOOK_CELL, notebook
from gpureplace import cuda
from gpureplace.compiler import diskcache

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
import dask  # noqa: E402
from dask.base import tokenize  # noqa: E402

CELL = NOTEBOOK_CELL


def start_cluster(make, **env):
    """A cluster whose worker processes start with ``env`` set (it is restored here after), and
    a disk cache of their own unless ``env`` names one: what they compile is then counted the
    same whatever an earlier run left in the test session's cache."""
    env.setdefault("GPUREPLACE_CACHE_DIR", tempfile.mkdtemp(prefix="gpureplace-workers-"))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    main = sys.modules["__main__"]
    if not hasattr(main, "__spec__"):
        main.__spec__ = None      # (an earlier test's stand-in __main__: spawn reads it)
    try:
        return make(n_workers=1 if make is not distributed.LocalCluster else 2,
                    threads_per_worker=1, dashboard_address=None, silence_logs=40)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    # the workers share a disk cache with this process, as processes of one machine do (and
    # only with it: a fresh directory)
    shared = tmp_path_factory.mktemp("shared-cache")
    old = diskcache.explicit_directory()
    diskcache.set_directory(shared)
    try:
        cluster = start_cluster(distributed.LocalCluster, GPUREPLACE_BACKEND="simulator",
                                GPUREPLACE_PREWARM="0", GPUREPLACE_CACHE_DIR=str(shared))
        with distributed.Client(cluster) as c:
            yield c
        cluster.close()
    finally:
        diskcache.set_directory(old)


def worker_stats(client, worker):
    return client.run(gpureplace.stats, workers=[worker])[worker]


def test_a_process_receiving_kernels_for_a_gpu_warms_its_compiler_once(tmp_path):
    """A Dask worker's first kernels often come from the disk cache; the first redefinition to
    reach it must not find its compiler cold: the first rebuilt function starts the warm-up."""
    ns = notebook()
    data = pickle.dumps([ns["uses_helper"], ns["bump_only"]])
    path = tmp_path / "kernels.pkl"
    path.write_bytes(data)
    script = f"""
import pickle, gpureplace
from gpureplace import prewarm
print(prewarm.is_started())
pickle.loads(open({str(path)!r}, "rb").read())
print(prewarm.is_started())
pickle.loads(open({str(path)!r}, "rb").read())
print(prewarm.wait(120), sorted(prewarm.report()), gpureplace.stats()["kernel_compiles"])
"""
    def run(**env):
        env = dict(os.environ, GPUREPLACE_CACHE_DIR=str(tmp_path / "cache"), **env)
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        return res.stdout.splitlines()
    # (a GPU backend: here without a GPU, the warm-up compiles and leaves CUDA alone)
    lines = run(GPUREPLACE_BACKEND="gpu", GPUREPLACE_PREWARM="1")
    assert lines[:2] == ["False", "True"]
    assert lines[2] == "True ['compile', 'imports'] 0"     # nothing counted as the user's
    # the simulator compiles nothing; the switch turns it off
    assert run(GPUREPLACE_BACKEND="simulator", GPUREPLACE_PREWARM="1")[:2] == ["False", "False"]
    assert run(GPUREPLACE_BACKEND="gpu", GPUREPLACE_PREWARM="0")[:2] == ["False", "False"]


def test_every_callable_pickles_to_itself_here_and_runs_in_another_process(tmp_path):
    ns = notebook(CELL + '''
@cuda.jit(device=True)
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)

@cuda.jit
def fibs(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = fib(i)

@cuda.vectorize(["float64(float64)"])
def twice(v):
    return 2.0 * v

@cuda.guvectorize(["void(float64[:], float64[:])"], "(n)->()")
def total(x, out):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i]
    out[0] = s

@cuda.jit("void(float64[:])")
def declared(x):
    x[0] = 5.0

summed = cuda.Reduce(lambda a, b: a + b)
''')
    ctx = gpureplace.Context("dask_test_ctx")
    ctx.override(math.sin, ns["helper"])
    ctx.override(math.cos, ns["bump"], types=("float64",))
    objects = [ns["uses_helper"], ns["bump"], ns["fib"], ns["fibs"], ns["twice"], ns["total"],
               ns["declared"], ns["summed"], ctx, gpureplace.default_context]
    for obj in objects:                  # here: the object itself, or a handle on it
        back = pickle.loads(pickle.dumps(obj))
        assert getattr(back, "pinned_target", lambda: back)() is obj, obj
    variant = ns["fibs"].with_context(ctx)                          # a with_context variant
    back = pickle.loads(pickle.dumps(variant))
    assert back.pinned_target() is variant and variant.context is ctx
    launch = pickle.loads(pickle.dumps(ns["uses_helper"][4, 32]))   # a configured launch
    assert launch.kernel is ns["uses_helper"] and (launch.grid, launch.block) == (
        (4, 1, 1), (32, 1, 1))

    (tmp_path / "objs.pkl").write_bytes(pickle.dumps(
        {"fibs": ns["fibs"], "uses": ns["uses_helper"], "twice": ns["twice"], "ctx": ctx,
         "total": ns["total"], "declared": ns["declared"], "summed": ns["summed"],
         "variant": ns["uses_helper"].with_context(ctx),
         "stubs": [cuda.syncthreads, cuda.atomic.add, gpureplace.default_context.lookup(abs).impl]}))
    script = f'''
import pickle, math, numpy as np, gpureplace
from gpureplace import cuda
d = pickle.load(open({str(tmp_path / "objs.pkl")!r}, "rb"))
out = np.zeros(8); d["fibs"][1, 8](out); print(out.astype(int).tolist())
x = np.arange(4.0); out = np.zeros(4); d["uses"][1, 4](x, out); print(out.tolist())
print(d["twice"](np.arange(3.0)).tolist())
ctx = d["ctx"]
@cuda.jit(context=ctx)
def k(out):
    out[0] = math.sin(3.0)
    out[1] = math.cos(3.0)
out = np.zeros(2); k[1, 1](out); print(out.tolist(), ctx.name, ctx is gpureplace.Context.named(ctx.name))
print(d["stubs"][:2] == [cuda.syncthreads, cuda.atomic.add], repr(d["stubs"][2]))
out = np.zeros(2); d["total"](np.arange(6.0).reshape(2, 3), out); print(out.tolist())
x = np.zeros(1); d["declared"][1, 1](x); print(x[0], float(d["summed"](np.arange(10.0))))
print(d["variant"].context is ctx)
'''
    env = dict(os.environ, GPUREPLACE_BACKEND="simulator", GPUREPLACE_PREWARM="0")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == str([0, 1, 1, 2, 3, 5, 8, 13])
    assert lines[1] == str([2.0, 4.0, 6.0, 8.0])
    assert lines[2] == str([0.0, 2.0, 4.0])
    assert lines[3] == "[6.0, 4.0] dask_test_ctx True"       # sin(3) -> helper, cos(3) -> bump
    assert lines[4] == "True <device intrinsic devicemath.abs>"   # device intrinsics by name
    assert lines[5] == "[3.0, 12.0]"                                 # guvectorize
    assert lines[6] == "5.0 45.0"                  # a declared signature; cuda.Reduce (lambda)
    assert lines[7] == "True"                      # a with_context variant keeps its context


def test_tokens_are_deterministic_and_follow_redefinitions():
    ns = notebook()
    k, other = ns["uses_helper"], ns["bump_only"]
    t_k, t_other = tokenize(k), tokenize(other)
    assert tokenize(k) == t_k and tokenize(other) == t_other
    exec("def helper(v):\n    return v * 3.0\n", ns)            # a cell re-run
    assert tokenize(k) != t_k                      # it calls helper
    assert tokenize(other) == t_other              # it does not
    ctx = gpureplace.Context("dask_token_ctx")
    before = tokenize(ctx)
    ctx.override(math.exp, ns["helper"])
    assert tokenize(ctx) != before
    a, b = notebook()["uses_helper"], notebook()["uses_helper"]
    assert tokenize(a) == tokenize(b)              # the same definition, the same token


def test_map_blocks_on_workers_agrees_with_numpy(client):
    ns = notebook()
    x_np = np.arange(1000, dtype=np.float64)
    x = da.from_array(x_np, chunks=300)
    y = gpureplace.dask.map_blocks(ns["uses_helper"], x)
    np.testing.assert_array_equal(y.compute(), (x_np + 1.0) * 2.0)
    y2 = gpureplace.dask.map_blocks(ns["uses_helper"], x + 10.0)     # same kernel, other data
    both = dask.compute(y, y2)
    np.testing.assert_array_equal(both[0], (x_np + 1.0) * 2.0)
    np.testing.assert_array_equal(both[1], (x_np + 11.0) * 2.0)

    ns2 = notebook('''
from gpureplace import cuda
@cuda.jit
def scaled_sum(a, x, y, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = a * x[i, j] + y[i, j]
''')
    m = np.arange(35.0 * 20).reshape(35, 20)
    mx = da.from_array(m, chunks=(16, 8))
    z = gpureplace.dask.map_blocks(ns2["scaled_sum"], 3.0, mx, mx, dtype=np.float32)
    got = z.compute()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, 4.0 * m)


def test_a_redefinition_reaches_the_workers_and_only_its_dependents_recompile(client):
    # (kernels no other test compiles: the workers' disk cache, shared with this process, must
    # not serve them -- a kernel loaded from disk keeps no lowered code to relink)
    ns = notebook(CELL.replace("return v + 1.0", "return v + 0.5"))
    w0 = sorted(client.scheduler_info()["workers"])[0]
    x_np = np.arange(64, dtype=np.float64)
    x = da.from_array(x_np, chunks=16)

    def run(name):
        # (the graph built again each time, as re-running its cell does: a graph built before
        # a redefinition keeps the old keys, and Dask may reuse results it still holds)
        return client.compute(gpureplace.dask.map_blocks(ns[name], x), workers=[w0]).result()

    np.testing.assert_array_equal(run("uses_helper"), (x_np + 0.5) * 2.0)
    np.testing.assert_array_equal(run("bump_only"), x_np + 0.5)
    before = worker_stats(client, w0)
    np.testing.assert_array_equal(run("uses_helper"), (x_np + 0.5) * 2.0)   # nothing new
    np.testing.assert_array_equal(run("bump_only"), x_np + 0.5)
    same = worker_stats(client, w0)
    assert same["kernel_compiles"] == before["kernel_compiles"]
    assert same["device_compiles"] == before["device_compiles"]

    exec("def helper(v):\n    return v * 3.0\n", ns)            # the notebook redefines it
    np.testing.assert_array_equal(run("uses_helper"), (x_np + 0.5) * 3.0)
    np.testing.assert_array_equal(run("bump_only"), x_np + 0.5)
    after = worker_stats(client, w0)
    # the worker bound the new helper where its uses_helper reads it, as the notebook did:
    # helper alone went through the front end, uses_helper was relinked to it; bump (a device
    # function of its own definition) and bump_only, which does not call helper, stayed
    assert after["kernel_compiles"] - same["kernel_compiles"] == 1
    assert after["device_compiles"] - same["device_compiles"] == 1, (same, after)  # helper only
    assert after["relinks"] > same["relinks"]                 # uses_helper relinked to it


def _wait_for(event):
    distributed.Event(event).wait()
    return 0


def test_a_task_queued_before_a_redefinition_runs_the_code_it_was_submitted_with(client):
    """The scheduler runs in the notebook's process: it unpickles the tasks it is given and
    pickles them again when it sends them to a worker.  A task waiting there while a cell
    redefines a helper must still run the definition it was submitted with (one ``compute()``
    never mixes definitions); the next task runs the new one."""
    ns = notebook(CELL.replace("return v * 2.0", "return v * 2.75"))
    w0 = sorted(client.scheduler_info()["workers"])[0]
    x_np = np.arange(16, dtype=np.float64)
    gate = distributed.Event(f"gate-{os.getpid()}-{id(ns)}")

    def launch(kernel, x, _after):
        out = np.zeros_like(x)
        kernel[1, x.size](x, out)
        return out

    first = client.submit(_wait_for, gate.name, workers=[w0], pure=False)
    queued = client.submit(launch, ns["uses_helper"], x_np, first, workers=[w0], pure=False)
    configured = client.submit(_run_configured, ns["uses_helper"][1, 16], x_np, first,
                               workers=[w0], pure=False)       # a launch configuration
    while not client.run_on_scheduler(_holds, [queued.key, configured.key]):
        time.sleep(0.01)                                      # (the scheduler has both now)
    exec("def helper(v):\n    return v * 5.0\n", ns)          # the cell re-run meanwhile
    gpureplace.refresh()
    gate.set()
    np.testing.assert_array_equal(queued.result(), (x_np + 1.0) * 2.75)
    np.testing.assert_array_equal(configured.result(), (x_np + 1.0) * 2.75)
    later = client.submit(launch, ns["uses_helper"], x_np, 0, workers=[w0], pure=False)
    np.testing.assert_array_equal(later.result(), (x_np + 1.0) * 5.0)
    out = np.zeros_like(x_np)
    ns["uses_helper"][1, 16](x_np, out)                        # and here, the new one
    np.testing.assert_array_equal(out, (x_np + 1.0) * 5.0)


def test_tasks_on_one_worker_either_side_of_a_redefinition_never_mix_definitions(client):
    """The worker unpickles tasks as they arrive, while earlier ones wait or run: the tasks
    mapped before a redefinition all run the first definition, those after it the second,
    though the worker's one live kernel moves to each definition as it arrives."""
    ns = notebook(CELL.replace("return v * 2.0", "return v * 3.25"))
    w0 = sorted(client.scheduler_info()["workers"])[0]
    x_np = np.arange(16, dtype=np.float64)

    def launch(kernel, x, _i):
        out = np.zeros_like(x)
        kernel[1, x.size](x, out)
        return out[1]

    def batch():
        return client.map(launch, [ns["uses_helper"]] * 12, [x_np] * 12, range(12),
                          workers=[w0], pure=False)
    first = batch()
    exec("def helper(v):\n    return v * 5.0\n", ns)
    gpureplace.refresh()
    second = batch()
    assert set(client.gather(first)) == {2.0 * 3.25}
    assert set(client.gather(second)) == {2.0 * 5.0}


def _on_path(folder):
    sys.path.insert(0, folder)


def _holds(keys, dask_scheduler=None):
    return all(key in dask_scheduler.tasks for key in keys)


def _run_configured(cfg, x, _after):
    out = np.zeros_like(x)
    cfg(x, out)
    return out


def test_an_attribute_the_notebook_set_on_its_module_reaches_the_workers(client, tmp_path,
                                                                        monkeypatch):
    """``mycfg.SCALE = 3`` in a cell, where a kernel reads ``mycfg.SCALE`` and calls a helper of
    ``mycfg`` reading ``SCALE``: the kernel's token changes, and the workers (which import
    ``mycfg`` from its file) run with the notebook's value."""
    name = f"gpr_user_cfg_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(
        "SCALE = 2.0\n\ndef helper(v):\n    return v * SCALE\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    client.run(_on_path, str(tmp_path))                        # (the workers import it too)
    ns = notebook(f"import {name} as mycfg\n" + CELL + '''
@cuda.jit
def scaled(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * mycfg.SCALE + mycfg.helper(1.0)
''')
    mycfg = sys.modules[name]
    w0 = sorted(client.scheduler_info()["workers"])[0]
    x_np = np.arange(8, dtype=np.float64)

    def launch(kernel, x):
        out = np.zeros_like(x)
        kernel[1, x.size](x, out)
        return out

    def run():
        return client.submit(launch, ns["scaled"], x_np, workers=[w0],
                             pure=False).result(timeout=120)

    token = tokenize(ns["scaled"])
    np.testing.assert_array_equal(run(), x_np * 2.0 + 2.0)
    mycfg.SCALE = 3.0                                          # the cell
    assert tokenize(ns["scaled"]) != token
    np.testing.assert_array_equal(run(), x_np * 3.0 + 3.0)
    assert client.run(lambda: sys.modules[name].SCALE, workers=[w0])[w0] == 3.0


def _rebuilt_digest(uid):
    """On a worker: (the digest of the object rebuilt there under ``uid``, its id)."""
    from gpureplace.jit import pickling
    obj = pickling._rebuilt.get(uid)
    return None if obj is None else (obj.__dict__.get("_pickle_digest"), id(obj))


def test_a_redefinition_is_pushed_to_the_workers_before_the_next_task(client):
    """After a cell changes a kernel the workers received (here: a helper it calls), the
    extension's round sends the new definition to every worker (gpureplace.dask.
    push_redefinitions), which binds it in place; the next task carries the same definition and
    finds it there."""
    ns = notebook(CELL.replace("return v * 2.0", "return v * 2.25"))
    x_np = np.arange(32, dtype=np.float64)
    x = da.from_array(x_np, chunks=16)
    w0, w1 = sorted(client.scheduler_info()["workers"])

    def run():                  # (on one worker: the other never receives the kernel)
        return client.compute(gpureplace.dask.map_blocks(ns["uses_helper"], x),
                              workers=[w0]).result()

    gpureplace.dask.push_redefinitions()    # (kernels earlier tests changed after sending)
    np.testing.assert_array_equal(run(), (x_np + 1.0) * 2.25)
    assert gpureplace.dask.push_redefinitions() == 0       # nothing changed since it was sent
    uid = ns["uses_helper"].__dict__["_pickle_uid"]
    exec("def helper(v):\n    return v * 4.5\n", ns)      # the notebook redefines the helper
    new = ns["uses_helper"].definition_digest()
    assert gpureplace.dask.push_redefinitions() == 1
    seen = client.run(_rebuilt_digest, uid)
    assert seen[w0][0] == new and seen[w1] is None, seen     # (w1 builds nothing it never ran)
    assert gpureplace.dask.push_redefinitions() == 0       # sent once
    np.testing.assert_array_equal(run(), (x_np + 1.0) * 4.5)
    after = client.run(_rebuilt_digest, uid)
    assert after == seen                                   # the task found the pushed object


def test_a_kernel_run_only_on_the_workers_is_pushed_after_the_cell_that_changed_it(client,
                                                                                 shell):
    """A kernel the notebook never launched (nor compiled) itself, only sent to the workers:
    nothing in the notebook records what it reads, so a cell redefining its helper moves no
    world here; the extension's round still sends the new definition (gpureplace.dask.
    sent_elsewhere), and the next task finds it bound on the worker."""
    from gpureplace.jit import ahead
    gpureplace.dask.push_redefinitions()    # (kernels earlier tests changed after sending)
    w0 = sorted(client.scheduler_info()["workers"])[0]
    x_np = np.arange(32, dtype=np.float64)
    x = da.from_array(x_np, chunks=16)

    def cell(src):
        res = shell.run_cell(src, store_history=True)
        assert res.error_in_exec is None, res.error_in_exec
        assert ahead.wait(60)

    cell(CELL.replace("return v * 2.0", "return v * 3.25"))
    kernel = shell.user_ns["uses_helper"]
    np.testing.assert_array_equal(
        client.compute(gpureplace.dask.map_blocks(kernel, x), workers=[w0]).result(),
        (x_np + 1.0) * 3.25)
    cell("pass")
    assert not kernel._launch_cache and gpureplace.dask.push_redefinitions() == 0
    uid = kernel.__dict__["_pickle_uid"]
    cell("def helper(v):\n    return v * 5.5\n")           # (the round runs while waiting)
    new = kernel.definition_digest()
    assert client.run(_rebuilt_digest, uid, workers=[w0])[w0][0] == new
    assert gpureplace.dask.push_redefinitions() == 0       # the round sent it already
    np.testing.assert_array_equal(
        client.compute(gpureplace.dask.map_blocks(kernel, x), workers=[w0]).result(),
        (x_np + 1.0) * 5.5)


def test_a_kernel_tried_in_the_client_is_loaded_by_the_workers_not_compiled(client):
    # the notebook's order: try it here, then distribute -- the workers find the client's
    # compile in the disk cache they share, the redefined helper's too, and compile only what
    # the client has not
    ns = notebook(CELL.replace("v * 2.0", "v * 7.0"))     # a kernel no other test compiled
    w0 = sorted(client.scheduler_info()["workers"])[0]
    x_np = np.arange(64, dtype=np.float64)
    x = da.from_array(x_np, chunks=16)

    def run():
        return client.compute(gpureplace.dask.map_blocks(ns["uses_helper"], x),
                              workers=[w0]).result()

    # tried here (a launch compiles on a GPU; the simulator runs the Python, so compile)
    ns["uses_helper"].compile("void(float64[::1], float64[::1])")
    before = worker_stats(client, w0)
    np.testing.assert_array_equal(run(), (x_np + 1.0) * 7.0)
    after = worker_stats(client, w0)
    assert after["kernel_compiles"] == before["kernel_compiles"]
    assert after["disk_hits"] > before["disk_hits"]

    exec("def helper(v):\n    return v * 8.0\n", ns)            # redefined, tried here again
    gpureplace.refresh()
    ns["uses_helper"].compile("void(float64[::1], float64[::1])")
    np.testing.assert_array_equal(run(), (x_np + 1.0) * 8.0)
    again = worker_stats(client, w0)
    assert again["kernel_compiles"] == after["kernel_compiles"]
    assert again["disk_hits"] > after["disk_hits"]

    exec("def helper(v):\n    return v * 9.0\n", ns)            # not tried here: compiled there
    np.testing.assert_array_equal(run(), (x_np + 1.0) * 9.0)
    assert worker_stats(client, w0)["kernel_compiles"] == again["kernel_compiles"] + 1


def test_map_blocks_refuses_bad_arguments_by_name():
    ns = notebook()
    x = da.from_array(np.arange(10.0), chunks=5)
    with pytest.raises(TypeError, match="must be a kernel"):
        gpureplace.dask.map_blocks(ns["bump"], x)
    with pytest.raises(TypeError, match="no argument is a Dask array"):
        gpureplace.dask.map_blocks(ns["uses_helper"], np.arange(10.0))
    with pytest.raises(ValueError, match="argument 2 has shape"):
        gpureplace.dask.map_blocks(ns["uses_helper"], x, da.from_array(np.arange(10.0),
                                                                       chunks=3))
    with pytest.raises(ValueError, match="threads="):
        gpureplace.dask.map_blocks(ns["uses_helper"], x, threads=(8, 8))


def _cuda_cluster():
    try:
        from dask_cuda import LocalCUDACluster
    except Exception as exc:                                 # noqa: BLE001
        pytest.skip(f"dask-cuda does not import here ({type(exc).__name__}: {exc})")
    return LocalCUDACluster                                  # one worker per GPU


@pytest.mark.gpu
@pytest.mark.gpu_only
@pytest.mark.parametrize("kind", ["LocalCUDACluster", "LocalCluster"])
def test_a_gpu_cluster_runs_a_kernel_over_a_cupy_dask_array_and_follows_a_redefinition(kind):
    cp = pytest.importorskip("cupy")
    make = _cuda_cluster() if kind == "LocalCUDACluster" else distributed.LocalCluster
    cluster = start_cluster(make, GPUREPLACE_PREWARM="0")
    try:
        assert type(cluster).__name__ == kind
        with distributed.Client(cluster) as c:
            ns = notebook()
            x_np = np.arange(1 << 20, dtype=np.float32)
            x = da.from_array(x_np, chunks=1 << 18).map_blocks(cp.asarray)
            y = gpureplace.dask.map_blocks(ns["uses_helper"], x)
            got = y.compute()
            assert isinstance(got, cp.ndarray)
            np.testing.assert_array_equal(cp.asnumpy(got), (x_np + 1.0) * 2.0)

            def compiles():
                return sum(st["kernel_compiles"] for st in c.run(gpureplace.stats).values())
            before = compiles()
            exec("def helper(v):\n    return v * 3.0\n", ns)
            y = gpureplace.dask.map_blocks(ns["uses_helper"], x)        # (built again)
            np.testing.assert_array_equal(cp.asnumpy(y.compute()), (x_np + 1.0) * 3.0)
            assert compiles() == before + len(c.scheduler_info()["workers"])
            # redefined again, and pushed while the user types (as the extension's round does):
            # the workers compile and load it then, and the next graph compiles nothing
            exec("def helper(v):\n    return v * 5.0\n", ns)
            assert gpureplace.dask.push_redefinitions() == 1
            assert all(c.run(_wait_ahead).values())
            pushed = compiles()
            assert pushed == before + 2 * len(c.scheduler_info()["workers"])
            y = gpureplace.dask.map_blocks(ns["uses_helper"], x)
            np.testing.assert_array_equal(cp.asnumpy(y.compute()), (x_np + 1.0) * 5.0)
            assert compiles() == pushed
    finally:
        cluster.close()


def _wait_ahead():
    """On a worker: wait for its background rounds (gpureplace/jit/ahead.py)."""
    from gpureplace.jit import ahead
    return ahead.wait(60)


def test_without_dask_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.array", None)      # (as if it were not installed)
    with pytest.raises(ImportError, match="pip install 'dask\\[array\\]' distributed"):
        gpureplace.dask.map_blocks(notebook()["uses_helper"], None)


def test_an_override_changed_in_the_client_reaches_the_workers(client):
    ns = notebook('''
import math
import gpureplace
from gpureplace import cuda
ctx = gpureplace.Context("dask_worker_ctx")
def fake_sin(v):
    return v + 100.0
ctx.override(math.sin, fake_sin)
@cuda.jit(context=ctx)
def in_ctx(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = math.sin(x[i])
@cuda.jit
def in_default(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = math.sin(x[i])
''')
    w0 = sorted(client.scheduler_info()["workers"])[0]
    x = da.from_array(np.zeros(8), chunks=4)

    def run(name):
        return client.compute(gpureplace.dask.map_blocks(ns[name], x), workers=[w0]).result()

    assert run("in_ctx").tolist() == [100.0] * 8
    assert run("in_default").tolist() == [0.0] * 8
    before = worker_stats(client, w0)["kernel_compiles"]
    exec("def fake_sin2(v):\n    return v + 200.0\nctx.override(math.sin, fake_sin2)\n", ns)
    assert run("in_ctx").tolist() == [200.0] * 8              # the new override, there
    assert run("in_default").tolist() == [0.0] * 8
    assert worker_stats(client, w0)["kernel_compiles"] == before + 1     # in_ctx alone
    ns["ctx"].remove_override(math.sin)
    assert run("in_ctx").tolist() == [0.0] * 8                # removed there too
