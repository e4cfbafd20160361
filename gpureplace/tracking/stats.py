"""Counters the tests and ``gpureplace.stats()`` read: compiles, cache hits, invalidations."""

counters = {
    "kernel_compiles": 0,      # kernel specialisations built (front end to PTX)
    "device_compiles": 0,      # functions run through the front end (kernels' bodies included)
    "memory_hits": 0,          # specialisations reused from memory
    "disk_hits": 0,            # specialisations loaded from the disk cache
    "invalidations": 0,        # compiled functions dropped because a dependency changed
    "relinks": 0,              # stale functions kept, only their calls to changed callees redone
    "revalidations": 0,        # dependency checks after the world moved
}


def snapshot():
    return dict(counters)

