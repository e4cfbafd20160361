"""``cuda.fp16`` in the simulator: each function's host meaning (``hostfp16``), ``atomicAdd``
under the launch's atomic lock."""

from __future__ import annotations

from ...compiler.intrinsics import fp16
from .. import hostfp16
from .bits import _host_namespace


def table(launch):
    """The ``cuda.fp16`` stubs of ``launch``: ``{id(stub): value}``, and the namespace."""
    out = {}
    hosts = dict(hostfp16.FP16, atomicAdd=hostfp16.atomic_add(launch.atomic_lock))
    _host_namespace(out, fp16.fp16, fp16.STUBS, hosts)
    return out
