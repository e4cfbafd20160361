"""Bit and arithmetic intrinsics in the simulator: ``popc``, ``brev``, ``clz``, ``ffs``, ``fma``,
``cbrt``, ``selp`` and the ``cuda.fp16`` functions, computed by ``hostmath``, and ``cuda.bf16``'s
(``hostbf16``)."""

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
    out[id(bits.fp16)] = pytypes.SimpleNamespace(**hostmath.FP16)
    for name, fn in hostmath.FP16.items():
        out[id(getattr(bits.fp16, name))] = fn
    # cuda.bf16: its functions (aliases are the same stubs) and the type, which is callable
    members = {name: getattr(bf16.bf16, name) for name in vars(bf16.bf16) if
               not name.startswith("_")}
    out[id(bf16.bf16)] = pytypes.SimpleNamespace(**{
        name: hostbf16.BF16.get(getattr(m, "__name__", None), m) if name not in
        ("bfloat16", "nv_bfloat16") else m for name, m in members.items()})
    for name, fn in hostbf16.BF16.items():
        out[id(bf16.STUBS[name])] = fn
    # cuda.fp8: the raw conversions (the types and enums are themselves)
    out[id(fp8.fp8)] = pytypes.SimpleNamespace(**{
        name: hostfp8.FP8.get(name, value) for name, value in vars(fp8.fp8).items()
        if not name.startswith("_")})
    for name, fn in hostfp8.FP8.items():
        out[id(fp8.STUBS[name])] = fn
    return out
