"""A kernel pickled by value -- a notebook's, sent to a Dask worker -- finds in the disk cache what
the process that pickled it compiled there (the two share the directory on one machine), with
its callees found through the kernel's own globals rather than by importing their module, which
the receiving process cannot; and only the entry of the call graph it has now."""

import json
import os
import subprocess
import sys

import cloudpickle
import pytest

import gpureplace
from corpus import notebook
from gpureplace.compiler import diskcache

SIG = "void(float64[::1], float64[::1])"

# Receives kernels pickled by value, one file a line on stdin; compiles each for SIG, waits for the
# background work that started (none with GPUREPLACE_PREWARM=0), and says where its code came from.
WORKER = f'''
import json, sys, cloudpickle, gpureplace
from gpureplace import prewarm
for line in sys.stdin:
    kernel = cloudpickle.loads(open(line.strip(), "rb").read())
    spec = kernel.compile({SIG!r})
    done = prewarm.wait(120)
    st = gpureplace.stats()
    print(json.dumps({{"ptx": spec.ptx, "from_disk": bool(getattr(spec, "from_disk", False)),
                      "compiles": st["kernel_compiles"], "disk_hits": st["disk_hits"],
                      "relinks": st["relinks"], "front_ends": st["device_compiles"],
                      "done": done, "ahead": prewarm.report().get("ahead", 0)}}), flush=True)
'''


class Worker:
    """A process running WORKER with ``env``; ``send(kernel)`` pickles the kernel to it and
    returns what it said."""

    def __init__(self, tmp_path, **env):
        self.tmp_path, self.sent = tmp_path, 0
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **env))

    def send(self, kernel):
        self.sent += 1
        path = self.tmp_path / f"kernel{self.sent}.pkl"
        path.write_bytes(cloudpickle.dumps(kernel))
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read()
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture
def cache_dir(tmp_path):
    old = diskcache.explicit_directory()
    diskcache.set_directory(tmp_path / "cache")
    try:
        yield tmp_path / "cache"
    finally:
        diskcache.set_directory(old)


@pytest.mark.skipif(not diskcache.enabled, reason="the disk cache is off (GPUREPLACE_CACHE=0)")
def test_a_kernel_pickled_by_value_loads_what_its_client_compiled(tmp_path, cache_dir):
    ns = notebook()
    worker = Worker(tmp_path, GPUREPLACE_CACHE_DIR=str(cache_dir), GPUREPLACE_PREWARM="0")

    def send():
        return worker.send(ns["uses_helper"])

    def redefine(factor):
        exec(f"def helper(v):\n    return v * {factor}\n", ns)
        gpureplace.refresh()

    try:
        first = ns["uses_helper"].compile(SIG).ptx
        got = send()                                      # compiled here first: loaded there
        assert got["from_disk"] and got["compiles"] == 0 and got["ptx"] == first

        redefine("3.0")
        second = ns["uses_helper"].compile(SIG).ptx           # tried here, then sent
        assert second != first
        got = send()
        assert got["from_disk"] and got["compiles"] == 0 and got["ptx"] == second

        redefine("4.0")                                    # sent before it compiled here: the
        got = send()                                       # worker compiles it, and does not
        assert not got["from_disk"] and got["compiles"] == 1      # take another helper's code
        third = ns["uses_helper"].compile(SIG).ptx
        assert got["ptx"] == third and third not in (first, second)

        redefine("3.0")                                    # back to a call graph compiled before
        got = send()
        assert got["from_disk"] and got["compiles"] == 1 and got["ptx"] == second
    finally:
        worker.close()


@pytest.mark.skipif(not diskcache.enabled, reason="the disk cache is off (GPUREPLACE_CACHE=0)")
def test_a_worker_relinks_a_kernel_it_loaded_from_the_disk_when_a_helper_changes(tmp_path,
                                                                                  cache_dir):
    """The disk keeps no lowered code: a worker that loaded a kernel compiled by its client
    runs the kernel's front end in the background, so that a redefined helper reaching it (not
    tried on the client) costs the helper's front end and a relink, not the whole call graph."""
    ns = notebook()
    # (a process that launches on a GPU, as the backend says; none is needed to compile)
    worker = Worker(tmp_path, GPUREPLACE_CACHE_DIR=str(cache_dir), GPUREPLACE_PREWARM="1",
                    GPUREPLACE_BACKEND="gpu")

    def send():
        return worker.send(ns["uses_helper"])

    try:
        ns["uses_helper"].compile(SIG)
        got = send()                                     # loaded; its front end run after
        assert got["from_disk"] and got["done"] and got["ahead"] == 1
        assert (got["compiles"], got["relinks"], got["front_ends"]) == (0, 0, 0)
        exec("def helper(v):\n    return v * 5.0\n", ns)       # not tried here
        gpureplace.refresh()
        got = send()
        assert not got["from_disk"] and got["compiles"] == 1
        assert got["relinks"] == 1 and got["front_ends"] == 1         # the helper alone
        assert got["ptx"] == ns["uses_helper"].compile(SIG).ptx       # the same code as here
    finally:
        worker.close()
