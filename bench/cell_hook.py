"""Cell-hook cost: time of ``tracking.bindings.check()`` per cell vs tracked bindings and namespace
size (goal: <= 1 ms at 1,000 tracked, flat in namespace size), then with global arrays among the
1,000 tracked bindings (each compared with the copy its kernels were built from).  CPU only; runs
anywhere."""

import time

import numpy as np

from gpureplace.tracking import bindings, contents


def measure(tracked, namespace_size, arrays=0, array_bytes=0, reps=50):
    bindings.clear()
    ns = {"__name__": "bench"}
    ns.update({f"junk{i}": i for i in range(namespace_size)})
    for i in range(tracked):
        value = np.random.rand(array_bytes // 8) if i < arrays else float(i)
        ns[f"v{i}"] = value
        bindings.track(ns, f"v{i}", value, None, contents.snapshot(value))
    bindings.check()
    t = time.perf_counter()
    for _ in range(reps):
        bindings.check()
    return (time.perf_counter() - t) / reps * 1e3


if __name__ == "__main__":
    print(f"{'tracked':>8s} {'namespace':>10s} {'ms/cell':>8s}")
    for tracked in (10, 1000, 10000):
        for size in (100, 100000):
            print(f"{tracked:8d} {size:10d} {measure(tracked, size):8.3f}")
    print()
    print("global arrays among 1,000 tracked bindings (namespace of 100)")
    print(f"{'tracked':>8s} {'arrays':>7s} {'bytes each':>11s} {'ms/cell':>8s}")
    for arrays, nbytes in ((10, 4096), (100, 4096), (10, 65536), (100, 65536), (1000, 64),
                           (1, 16 << 20), (1, 80_000_000)):
        reps = 50 if nbytes * arrays <= 8 << 20 else 5
        ms = measure(1000, 100, arrays, nbytes, reps)
        print(f"{1000:8d} {arrays:7d} {nbytes:11d} {ms:8.3f}")
    bindings.clear()
