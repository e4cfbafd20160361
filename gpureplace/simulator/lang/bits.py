"""Bit and arithmetic intrinsics in the simulator: ``popc``, ``brev``, ``clz``, ``ffs``, ``fma``,
``cbrt``, ``selp``, computed by ``hostmath``, ``cuda.bf16``'s (``hostbf16``) and ``cuda.fp8``'s
(``hostfp8``); ``cuda.fp16``'s are ``fp16.py``."""

from __future__ import annotations

import types as pytypes

from ...compiler.intrinsics import bf16, bits, fp8
from .. import hostbf16, hostfp8, hostmath


def table(launch):
    """The bit and arithmetic stubs (the same for every launch): ``{id(stub): value}``."""
    out = {}
    for stub, fn in ((bits.popc, hostmath.popc), (bits.brev, hostmath.brev),
                     (bits.clz, hostmath.clz), (bits.ffs, hostmath.ffs),
                     (bits.fma, hostmath.fma), (bits.cbrt, hostmath.cbrt),
                     (bits.selp, hostmath.selp)):
        out[id(stub)] = fn
    _host_namespace(out, bf16.bf16, bf16.STUBS, hostbf16.BF16)     # (and the callable type)
    _host_namespace(out, fp8.fp8, fp8.STUBS, hostfp8.FP8)          # (and the types, the enums)
    return out


def _host_namespace(out, namespace, stubs, hosts):
    """``namespace`` (``cuda.fp16``...) as the simulator sees it: each of its ``stubs`` (name ->
    stub) replaced by the host function of that name in ``hosts``, its other members as they
    are (aliases are the same stubs; CUDA C's ``__hadd`` names too); and each stub's own entry
    in ``out``."""
    by_stub = {id(stubs[name]): fn for name, fn in hosts.items()}
    out.update(by_stub)
    out[id(namespace)] = pytypes.SimpleNamespace(**{
        name: by_stub.get(id(member), member) for name, member in vars(namespace).items()
        if not name.startswith("_") or (name.startswith("__") and not name.endswith("__"))})
