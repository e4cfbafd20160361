"""Cache-hinted loads and stores in the simulator: plain element accesses (the cache operator
only changes where the GPU keeps the line)."""

from __future__ import annotations

from ...compiler.intrinsics import cachehints


def table(launch):
    """The cache-hint stubs: ``{id(stub): value}``."""
    out = {}

    def load(array, index):
        return array[index]

    def store(array, index, value):
        array[index] = value

    for op in cachehints.LOADS:
        out[id(getattr(cachehints, f"ld{op}"))] = load
    for op in cachehints.STORES:
        out[id(getattr(cachehints, f"st{op}"))] = store
    return out
