"""gpureplace kernels as Dask tasks (issue 18's bench rows), on ``LocalCluster`` worker processes
that share this machine's first GPU:

1. overhead per task: a CuPy-backed Dask array of many small blocks through a gpureplace kernel
   (``gpureplace.dask.map_blocks``) against the same kernel as a CuPy ``RawKernel`` in the same
   kind of graph, warm (both compiled on every worker); goal <= 1.05x;
2. a redefinition reaching the workers: a helper redefined on the client, then a graph of one
   block per worker built and computed (each worker compiles the kernel anew: the client tried
   the first definition, whose compile the workers loaded from the disk cache they share with
   it, but not this one); against one recompile (measured on the client) plus one task round
   trip (a warm one-block graph); the same one-block-per-worker graph warm is printed too
   (Dask's own share of a redefinition);
3. the notebook's order: a redefinition tried on the client first (compiled and launched on its
   GPU), then the same graph: the workers load the client's compile from the disk cache they
   share with it, and the driver finds the client's JIT of that PTX in its own cache.
4. the same order with the user's pause between the redefining cell and the next: the
   extension's round (gpureplace/jit/ahead.py, run here as the cell hook starts it) recompiles
   and loads the client's launch in the background; what the user then waits for is the try
   (no compile) and the graph (the workers load from the disk and the driver's caches).
5. not tried on the client, with the user's pause: the extension's round sends the new
   definition to the workers (``gpureplace.dask.push_redefinitions``), which compile and load it
   in their own background rounds; what the user then waits for is the graph.

Rows 2 and 3 are measured twice: with the results brought back to the client (``compute``), and
left on the workers (``persist``, ``*_left_*``), where a redefinition's reach is the graph's run,
not the transfer of its blocks; the round trip they are held against is measured the same way.
The workers warm their compilers in the background at their first kernel (as any process
receiving gpureplace functions for a GPU does; GPUREPLACE_PREWARM=0 to see them cold).

Usage: python bench/dask_tasks.py [--workers 4] [--blocks 64] [--json OUT] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
import types

CELL = '''
from gpureplace import cuda

def helper(v):
    return v * 2.0

@cuda.jit
def scaled(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = helper(x[i]) + 1.0
'''

RAW = r'''extern "C" __global__ void scaled(const float* x, float* out, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x; if (i < n) out[i] = x[i] * 2.0f + 1.0f; }
'''


def raw_block(block):
    import cupy as cp
    kernel = cp.RawKernel(RAW, "scaled")           # (CuPy caches the module per process)
    out = cp.empty_like(block)
    kernel(((block.size + 255) // 256,), (256,), (block, out, cp.int64(block.size)))
    return out


def one_block_per_worker(client, x):
    """Indices of blocks of the persisted array ``x``, one held by each worker, so that a graph
    over them runs one task on every worker (Dask runs a task where its block is)."""
    from distributed import wait
    wait(x)
    who = client.who_has(x)
    owner = {}
    for i, key in enumerate(x.__dask_keys__()):
        for worker in who.get(key, ()):
            owner.setdefault(worker, i)
    return sorted(owner.values())


def wait_ahead():
    """On a worker: wait for its background rounds (gpureplace/jit/ahead.py)."""
    from gpureplace.jit import ahead
    return ahead.wait(60)


def warm_up_report():
    """What a worker's compiler warm-up did (gpureplace/prewarm.py), in seconds a step."""
    from gpureplace import prewarm
    return prewarm.report()


def timed(fn, repeat=5):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--blocks", type=int, default=64)
    ap.add_argument("--block-size", type=int, default=1 << 16)
    ap.add_argument("--json")
    ap.add_argument("--cache-dir", help="the disk cache of the client and its workers (default: "
                                        "a fresh directory)")
    args = ap.parse_args()

    import cupy as cp
    import dask.array as da
    import numpy as np
    from distributed import Client, LocalCluster, wait

    # a disk cache of this run's own, which the workers share with the client as processes of
    # one machine do (before gpureplace is imported here and the workers start)
    os.environ["GPUREPLACE_CACHE_DIR"] = args.cache_dir or tempfile.mkdtemp(prefix="dask-bench-")
    import gpureplace
    # worker processes sharing this machine's first GPU (LocalCUDACluster makes one per GPU)
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1,
                           dashboard_address=None, silence_logs=40)
    client = Client(cluster)
    client.wait_for_workers(args.workers)
    nworkers = len(client.scheduler_info()["workers"])

    mod = types.ModuleType("bench_cell")                   # defined as a notebook cell is
    exec(CELL, mod.__dict__)
    # compiled here first (as a notebook tries a kernel before distributing it): the workers
    # load this compile from the disk cache, and the recompile below is a warm relink
    mod.scaled.compile("void(float32[::1], float32[::1])")
    n = args.blocks * args.block_size
    x = da.from_array(np.arange(n, dtype=np.float32), chunks=args.block_size)
    x = x.map_blocks(cp.asarray).persist()
    spread = one_block_per_worker(client, x)          # a block on each worker (as placed)

    def spread_blocks(factor):
        """What a graph over ``x.blocks[spread]`` gives with a helper multiplying by ``factor``."""
        expect = np.arange(n, dtype=np.float32) * factor + 1.0
        return np.concatenate([expect[i * args.block_size:(i + 1) * args.block_size]
                               for i in spread])
    ours = gpureplace.dask.map_blocks(mod.scaled, x)
    theirs = x.map_blocks(raw_block, dtype=np.float32)
    expect = np.arange(n, dtype=np.float32) * 2.0 + 1.0
    assert np.array_equal(cp.asnumpy(ours.compute()), expect)
    assert np.array_equal(cp.asnumpy(theirs.compute()), expect)
    client.run(lambda: None)

    def run(graph):
        return lambda: client.compute(graph).result()

    def reach(build):
        """Build a graph (``build()``) and run it on the workers, its results left where they
        were made (as ``persist`` leaves them): what reaching the workers and running costs,
        without bringing the blocks back to the client (``run`` does)."""
        def go():
            done = client.persist(build())
            wait(done)
            return done
        return go

    fresh = itertools.count()

    def anew(*blocks):
        """A builder of the same graph under a new key each time (a graph whose keys Dask still
        holds would not run again)."""
        return lambda: gpureplace.dask.map_blocks(mod.scaled, *blocks,
                                                  name=f"warm-{next(fresh)}")
    graphs = {"ours": ours, "theirs": theirs}
    for _ in range(2):                                     # warm: compiled on every worker
        for g in graphs.values():
            run(g)()
    times = {k: [] for k in graphs}
    for _ in range(7):                                     # interleaved
        for k, g in graphs.items():
            times[k].append(timed(run(g), repeat=3))
    t_ours, t_theirs = (min(times[k]) for k in ("ours", "theirs"))

    one = gpureplace.dask.map_blocks(mod.scaled, x.blocks[0])
    run(one)()
    round_trip = timed(run(one))
    reach(anew(x.blocks[0]))()
    round_trip_left = timed(reach(anew(x.blocks[0])))
    # the same graph shape as a redefinition's (one block per worker), warm: what Dask itself costs
    per_worker = gpureplace.dask.map_blocks(mod.scaled, x.blocks[spread])
    run(per_worker)()
    per_worker_warm = timed(run(per_worker))
    reach(anew(x.blocks[spread]))()
    per_worker_warm_left = timed(reach(anew(x.blocks[spread])))
    # one recompile of the kernel (warm: compiled once before), here on the client (the median
    # of five, each a helper redefined)
    mod.scaled.compile("void(float32[::1], float32[::1])")
    recompiles = []
    for factor in ("2.5", "2.25", "2.75", "2.125", "2.375"):
        exec(f"def helper(v):\n    return v * {factor}\n", mod.__dict__)
        gpureplace.refresh()
        t0 = time.perf_counter()
        mod.scaled.compile("void(float32[::1], float32[::1])")
        recompiles.append(time.perf_counter() - t0)
    recompile = statistics.median(recompiles)
    # the redefinition reaching every worker: one block per worker, each compiling anew
    run(gpureplace.dask.map_blocks(mod.scaled, x.blocks[spread]))()
    redefinitions = []
    for factor in ("3.5", "4.0", "3.0"):
        exec(f"def helper(v):\n    return v * {factor}\n", mod.__dict__)
        t0 = time.perf_counter()
        # (built again, as re-running its cell does: a graph built before keeps the old keys,
        # whose results Dask may still hold)
        per_worker = gpureplace.dask.map_blocks(mod.scaled, x.blocks[spread])
        got = client.compute(per_worker).result()
        redefinitions.append(time.perf_counter() - t0)
    redefinition = statistics.median(redefinitions)
    # the same, the results left on the workers (what a redefinition's reach costs)
    left = []
    at_left = client.run(gpureplace.stats)
    for factor in ("7.5", "8.0", "6.5", "6.75", "7.0"):
        exec(f"def helper(v):\n    return v * {factor}\n", mod.__dict__)
        t0 = time.perf_counter()
        done = reach(lambda: gpureplace.dask.map_blocks(mod.scaled, x.blocks[spread]))()
        left.append(time.perf_counter() - t0)
    assert np.array_equal(cp.asnumpy(done.compute()), spread_blocks(7.0))
    del done
    redefinition_left = statistics.median(left)
    after_left = client.run(gpureplace.stats)
    relinked_left = sum(after_left[w]["relinks"] - at_left[w]["relinks"] for w in after_left)
    ran_on = client.run(lambda: gpureplace.stats()["kernel_compiles"])
    assert np.array_equal(cp.asnumpy(got), spread_blocks(3.0))
    # 3. tried on the client, then distributed
    xb, outb = x.blocks[0].compute(), cp.empty(args.block_size, cp.float32)
    before = client.run(gpureplace.stats)
    tried, then, then_left = [], [], []
    for factor in ("5.5", "6.0", "9.5", "10.0", "5.0"):
        exec(f"def helper(v):\n    return v * {factor}\n", mod.__dict__)
        t0 = time.perf_counter()
        gpureplace.refresh()                     # (what the cell hook does in a notebook)
        mod.scaled[(args.block_size + 255) // 256, 256](xb, outb)
        cp.cuda.runtime.deviceSynchronize()
        t1 = time.perf_counter()
        if factor in ("9.5", "10.0"):            # the results left on the workers
            reach(lambda: gpureplace.dask.map_blocks(mod.scaled, x.blocks[spread]))()
            then_left.append(time.perf_counter() - t1)
            tried.append(t1 - t0)
            continue
        got = client.compute(gpureplace.dask.map_blocks(mod.scaled, x.blocks[spread])).result()
        t2 = time.perf_counter()
        tried.append(t1 - t0)
        then.append(t2 - t1)
    assert np.array_equal(cp.asnumpy(got), spread_blocks(5.0))
    after = client.run(gpureplace.stats)

    def added(counter):                      # over all workers, while the loop above ran
        return sum(after[w][counter] - before[w][counter] for w in after)
    tried_then = statistics.median([a + b for a, b in zip(tried, then)])
    # 4. the same order with the user's pause between the cells: the extension's round
    # (jit/ahead.py) recompiles and loads the client's stale launch while the user types; the
    # cells that follow try the kernel and distribute it, the results left on the workers
    from gpureplace.jit import ahead
    paused_ahead, paused_tried, paused_then = [], [], []
    before_paused = client.run(gpureplace.stats)
    for factor in ("11.5", "12.0", "12.5", "13.0", "11.0"):
        exec(f"def helper(v):\n    return v * {factor}\n", mod.__dict__)
        gpureplace.refresh()                     # (the cell hook, at the end of the cell)
        t0 = time.perf_counter()
        assert ahead.run_round() >= 1            # (in the background, while the user types)
        t1 = time.perf_counter()
        mod.scaled[(args.block_size + 255) // 256, 256](xb, outb)
        cp.cuda.runtime.deviceSynchronize()
        t2 = time.perf_counter()
        done = reach(lambda: gpureplace.dask.map_blocks(mod.scaled, x.blocks[spread]))()
        t3 = time.perf_counter()
        paused_ahead.append(t1 - t0)
        paused_tried.append(t2 - t1)
        paused_then.append(t3 - t2)
    assert np.array_equal(cp.asnumpy(done.compute()), spread_blocks(11.0))
    del done
    after_paused = client.run(gpureplace.stats)
    paused_user = statistics.median([a + b for a, b in zip(paused_tried, paused_then)])
    # 5. not tried on the client, with the user's pause: the round sends the new definition to
    # the workers (gpureplace.dask.push_redefinitions), which compile and load it in theirs
    pushed_ahead, pushed_then = [], []
    compiled_in_pause = compiled_in_graph = 0

    def worker_compiles():
        return sum(st["kernel_compiles"] for st in client.run(gpureplace.stats).values())
    for factor in ("14.5", "15.0", "15.5", "16.0", "14.0"):
        exec(f"def helper(v):\n    return v * {factor}\n", mod.__dict__)
        c0 = worker_compiles()
        t0 = time.perf_counter()
        assert gpureplace.dask.push_redefinitions() == 1        # (in the background)
        assert all(client.run(wait_ahead).values())            # (the workers' rounds)
        t1 = time.perf_counter()
        c1 = worker_compiles()
        t1b = time.perf_counter()
        done = reach(lambda: gpureplace.dask.map_blocks(mod.scaled, x.blocks[spread]))()
        t2 = time.perf_counter()
        compiled_in_pause += c1 - c0
        compiled_in_graph += worker_compiles() - c1
        pushed_ahead.append(t1 - t0)
        pushed_then.append(t2 - t1b)
    assert np.array_equal(cp.asnumpy(done.compute()), spread_blocks(14.0))
    del done
    exec("def helper(v):\n    return v * 3.0\n", mod.__dict__)

    ours = gpureplace.dask.map_blocks(mod.scaled, x)
    t_all = timed(run(ours), repeat=1)
    assert np.array_equal(cp.asnumpy(client.compute(ours).result()),
                          np.arange(n, dtype=np.float32) * 3.0 + 1.0)

    result = {
        "cluster": type(cluster).__name__, "workers": nworkers, "blocks": args.blocks,
        "block_size": args.block_size,
        "per_task_ms_gpureplace": 1e3 * t_ours / args.blocks,
        "per_task_ms_cupy_rawkernel": 1e3 * t_theirs / args.blocks,
        "ratio": t_ours / t_theirs,
        "whole_graph_after_redefinition_ms": 1e3 * t_all,
        "kernel_compiles_per_worker": sorted(ran_on.values()),
        "workers_reached_by_a_redefinition": len(spread),
        "redefinition_to_result_ms": 1e3 * redefinition,
        "redefinitions_ms": [round(1e3 * t, 1) for t in redefinitions],
        "one_recompile_ms": 1e3 * recompile,
        "recompiles_ms": [round(1e3 * t, 1) for t in recompiles],
        "one_task_round_trip_ms": 1e3 * round_trip,
        "one_block_per_worker_warm_ms": 1e3 * per_worker_warm,
        "redefinition_vs_goal": redefinition / (recompile + round_trip),
        "tried_on_client_ms": 1e3 * statistics.median(tried),
        "then_to_workers_ms": 1e3 * statistics.median(then),
        "tried_then_distributed_ms": 1e3 * tried_then,
        "tried_then_distributed_vs_goal": tried_then / (recompile + round_trip),
        # the same with every graph's results left on the workers (persist), round trip included
        "one_task_round_trip_left_ms": 1e3 * round_trip_left,
        "one_block_per_worker_warm_left_ms": 1e3 * per_worker_warm_left,
        "redefinition_to_run_left_ms": 1e3 * redefinition_left,
        "redefinitions_left_ms": [round(1e3 * t, 1) for t in left],
        "worker_relinks_left": relinked_left,
        "redefinition_left_vs_goal": redefinition_left / (recompile + round_trip_left),
        "then_to_workers_left_ms": 1e3 * statistics.median(then_left),
        "tried_then_distributed_left_ms": 1e3 * (statistics.median(tried)
                                                + statistics.median(then_left)),
        "tried_then_distributed_left_vs_goal": (statistics.median(tried)
                                                + statistics.median(then_left))
        / (recompile + round_trip_left),
        "worker_warm_up": client.run(warm_up_report),
        "worker_compiles_when_tried_first": added("kernel_compiles"),
        "worker_disk_hits_when_tried_first": added("disk_hits"),
        # 4. tried and distributed after the user's pause (recompiled ahead on the client)
        "ahead_on_client_during_pause_ms": 1e3 * statistics.median(paused_ahead),
        "tried_after_pause_ms": 1e3 * statistics.median(paused_tried),
        "then_to_workers_after_pause_left_ms": 1e3 * statistics.median(paused_then),
        "tried_then_distributed_after_pause_left_ms": 1e3 * paused_user,
        "tried_then_distributed_after_pause_left_vs_goal": paused_user
        / (recompile + round_trip_left),
        "worker_compiles_after_pause": sum(after_paused[w]["kernel_compiles"]
                                           - before_paused[w]["kernel_compiles"]
                                           for w in after_paused),
        "worker_disk_hits_after_pause": sum(after_paused[w]["disk_hits"]
                                            - before_paused[w]["disk_hits"]
                                            for w in after_paused),
        # 5. not tried on the client, pushed to the workers during the pause
        "pushed_and_compiled_on_workers_during_pause_ms": 1e3 * statistics.median(pushed_ahead),
        "then_to_workers_after_push_left_ms": 1e3 * statistics.median(pushed_then),
        "then_to_workers_after_push_left_vs_goal": statistics.median(pushed_then)
        / (recompile + round_trip_left),
        "worker_compiles_in_the_pause": compiled_in_pause,
        "worker_compiles_in_the_graph_after_push": compiled_in_graph,
    }
    for key, value in result.items():
        print(f"{key:32s} {value:.3f}" if isinstance(value, float) else f"{key:32s} {value}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    client.close()
    cluster.close()


if __name__ == "__main__":
    # (the workers warm their compilers at their first kernel, as any process receiving
    # gpureplace functions for a GPU does: GPUREPLACE_PREWARM=0 to see them cold)
    sys.exit(main())
