"""Disk cache cost against its number of entries: a warm load, a store, and the occasional full
scan, with N entries of about 13 KB each (16,000 of them stay under the default 256 MiB cap).
CPU only; writes N entries to a temporary directory.

    python bench/disk_cache_scale.py [N ...]        (default: 100 16000)

Goal: load and store flat in N (they read one key's folder and append to ``usage``); the scan,
which lists everything, runs only once per quarter of the cap stored.
"""

import hashlib
import shutil
import sys
import tempfile
import time

from numba import types

from gpureplace.dispatch.context import current_default
from gpureplace.compiler import diskcache, kernel_cache


def kern(out):
    out[0] = 1.0


class FakeCompiled:
    """What ``kernel_cache.store`` reads of a compiled call graph: one function, no globals."""

    def __init__(self):
        self.pyfunc = kern
        self.global_reads = []

    def closure(self):
        return [self]


class FakeSpec:
    compiled = FakeCompiled()
    name = "kern"
    param_format = "P"
    llvm_ir = ""
    ptx = "// a fake kernel\n" + "x" * 12000


def key(i, prefix="k"):
    return hashlib.blake2b(f"{prefix}{i}".encode(), digest_size=20).hexdigest()


def measure(n, loads=200, stores=50):
    d = tempfile.mkdtemp(prefix="gpureplace-scale-")
    diskcache.set_directory(d)
    try:
        spec = FakeSpec()
        for i in range(n):
            kernel_cache.store(key(i), spec)
        argtypes, ctx = (types.float64[:],), current_default()
        assert kernel_cache.load(key(0), kern, argtypes, {}, ctx) is not None
        t = time.perf_counter()
        for i in range(loads):
            assert kernel_cache.load(key(i * 7919 % n), kern, argtypes, {}, ctx) is not None
        load_ms = (time.perf_counter() - t) / loads * 1e3
        t = time.perf_counter()
        for i in range(stores):
            kernel_cache.store(key(i, "new"), spec)
        store_ms = (time.perf_counter() - t) / stores * 1e3
        t = time.perf_counter()
        diskcache._scan(d)
        scan_ms = (time.perf_counter() - t) * 1e3
        info = diskcache.info()
        return load_ms, store_ms, scan_ms, info["bytes"]
    finally:
        diskcache.set_directory(None)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [100, 16000]
    print(f"{'entries':>8s} {'MiB':>6s} {'load ms':>8s} {'store ms':>9s} {'scan ms':>8s}")
    for n in sizes:
        load_ms, store_ms, scan_ms, nbytes = measure(n)
        print(f"{n:8d} {nbytes / 2**20:6.0f} {load_ms:8.3f} {store_ms:9.3f} {scan_ms:8.1f}")
