"""Counters the tests and ``gpureplace.stats()`` read: compiles, cache hits, invalidations."""

import contextlib
import threading

counters = {
    "kernel_compiles": 0,      # kernel specialisations built (front end to PTX)
    "device_compiles": 0,      # functions run through the front end (kernels' bodies included)
    "memory_hits": 0,          # specialisations reused from memory
    "disk_hits": 0,            # specialisations loaded from the disk cache
    "invalidations": 0,        # compiled functions dropped because a dependency changed
    "relinks": 0,              # stale functions kept, only their calls to changed callees redone
    "revalidations": 0,        # dependency checks after the world moved
}

_quiet = threading.local()


@contextlib.contextmanager
def uncounted():
    """What this thread counts inside (``count``) is left out of ``counters``: work that is not
    the user's (the background warm-up, front ends run ahead on a Dask worker).  It is never
    counted, rather than counted and taken back after, so that ``snapshot()`` -- read from
    another thread, ``gpureplace.stats()`` on a Dask worker -- never shows it, even briefly."""
    _quiet.depth = getattr(_quiet, "depth", 0) + 1
    try:
        yield
    finally:
        _quiet.depth -= 1


def count(name, n=1):
    """Add ``n`` to the counter ``name``, unless this thread is in ``uncounted()``."""
    if not getattr(_quiet, "depth", 0):
        counters[name] += n


def snapshot():
    return dict(counters)
