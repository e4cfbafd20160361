"""Digests of definitions as they pickle: what another process compares to tell an unchanged
kernel, device function or override from a redefined one, and what Dask's tokens are made of.

A definition is digested by pickling it (cloudpickle: a notebook's functions by value, with the
globals they read) in *digest mode*, where each gpureplace object met inside pickles as its own
definition's digest instead of its identity: two cells that define the same thing give the same
digest, and a callee's redefinition changes its callers' digests.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading

_state = threading.local()


def digest(*parts):
    """Digest of ``parts`` (bytes, or values with a stable repr)."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(part if isinstance(part, bytes) else repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()


def digesting():
    """Whether this thread is pickling for a digest (see the module's docstring)."""
    return getattr(_state, "depth", 0) > 0


@contextlib.contextmanager
def digest_mode():
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


def pickled_digest(obj):
    """Digest of ``obj`` pickled in digest mode."""
    from numba import cloudpickle
    with digest_mode():
        return digest(cloudpickle.dumps(obj))


class Defined:
    """What a gpureplace object pickles as in digest mode: its definition's digest."""

    def __init__(self, definition):
        self.definition = definition

    def __reduce__(self):
        return (Defined, (self.definition,))
