"""Cell-hook cost: time of ``tracking.bindings.check()`` per cell vs tracked bindings and namespace
size (goal: <= 1 ms at 1,000 tracked, flat in namespace size).  CPU only; runs anywhere."""

import time

from gpureplace.tracking import bindings


def measure(tracked, namespace_size, reps=50):
    bindings.clear()
    ns = {"__name__": "bench"}
    ns.update({f"junk{i}": i for i in range(namespace_size)})
    for i in range(tracked):
        ns[f"v{i}"] = float(i)
        bindings.track(ns, f"v{i}", ns[f"v{i}"], None)
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
    bindings.clear()
