"""Bit and arithmetic intrinsics in the simulator: ``popc``, ``brev``, ``clz``, ``ffs``, ``fma``,
``cbrt``, ``selp`` and the ``cuda.fp16`` functions, computed by ``hostmath``."""

from __future__ import annotations

import types as pytypes

from ...compiler.intrinsics import bits
from .. import hostmath


def table(launch):
    """The bit and arithmetic stubs (the same for every launch): ``{id(stub): value}``."""
    out = {}
    for stub, fn in ((bits.popc, hostmath.popc), (bits.brev, hostmath.brev),
                     (bits.clz, hostmath.clz), (bits.ffs, hostmath.ffs),
                     (bits.fma, hostmath.fma), (bits.cbrt, hostmath.cbrt),
                     (bits.selp, hostmath.selp)):
        out[id(stub)] = fn
    out[id(bits.fp16)] = pytypes.SimpleNamespace(**hostmath.FP16)
    for name, fn in hostmath.FP16.items():
        out[id(getattr(bits.fp16, name))] = fn
    return out
