"""Where a redefinition's time goes in a worker process, without Dask (issue 18's bench row).

The client defines a kernel calling a helper (as a notebook cell does), sends the kernel pickled
by definition (cloudpickle, the way Dask ships a task) to a second process through a pipe, and
redefines the helper between sends.  The worker unpickles, adopts the new definition in place
(jit/pickling.py) and launches on a block of 65,536 float32 (without a GPU: compiles only).
Each line: the client's pickle, the worker's unpickle, its compile after the redefinition (the
helper's, and the kernel's relink), its first launch (module load by the driver's JIT, argument
binding, launch), the same launch again, and the whole round trip.
bench/dask_tasks.py's redefinition row is this plus Dask's scheduling of one task per worker.

Usage: python bench/redefinition_worker.py
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import types

from dask_tasks import CELL     # the kernel and helper of dask_tasks.py's redefinition row

SIG = "void(float32[::1], float32[::1])"


def worker(conn):
    import cloudpickle

    import gpureplace
    gpu = gpureplace.probe.available()
    if gpu:
        import cupy as cp
        x = cp.ones(1 << 16, cp.float32)
        out = cp.empty_like(x)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        t0 = time.perf_counter()
        kernel = cloudpickle.loads(msg)
        t1 = time.perf_counter()
        kernel.compile(SIG)                    # the helper's compile and the kernel's relink
        t2 = time.perf_counter()
        if gpu:
            kernel[256, 256](x, out)           # module load (the driver's JIT), binding, launch
            cp.cuda.runtime.deviceSynchronize()
        t3 = time.perf_counter()
        if gpu:
            kernel[256, 256](x, out)           # the same launch again, cached
            cp.cuda.runtime.deviceSynchronize()
        t4 = time.perf_counter()
        stats = gpureplace.stats()
        conn.send((t1 - t0, t2 - t1, t3 - t2, t4 - t3, stats["kernel_compiles"],
                   stats["relinks"]))


def main():
    import cloudpickle
    mod = types.ModuleType("cell")            # not importable: pickled by value, as __main__ is
    exec(CELL, mod.__dict__)
    client, remote = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=worker, args=(remote,))
    proc.start()
    for label, factor in (("first", "2.0"), ("same", "2.0"), ("redefined", "3.0"),
                          ("redefined", "3.5"), ("redefined", "4.0"), ("redefined", "4.5")):
        exec(f"def helper(v):\n    return v * {factor}\n", mod.__dict__)
        t0 = time.perf_counter()
        data = cloudpickle.dumps(mod.scaled)
        t1 = time.perf_counter()
        client.send(data)
        unpickle, compile_s, first, again, compiles, relinks = client.recv()
        t2 = time.perf_counter()
        print(f"{label:9s} helper*{factor}: pickle {1e3 * (t1 - t0):.1f} ms ({len(data)} B), "
              f"worker unpickle {1e3 * unpickle:.1f} ms, compile {1e3 * compile_s:.1f} ms, "
              f"first launch {1e3 * first:.1f} ms (load, bind, launch), then "
              f"{1e3 * again:.2f} ms; round trip {1e3 * (t2 - t0):.1f} ms (worker: {compiles} "
              f"kernel compiles, {relinks} relinks)")
    client.send(None)
    proc.join()


if __name__ == "__main__":
    os.environ.setdefault("GPUREPLACE_PREWARM", "0")
    main()
