"""``cuda.fp8``'s raw conversions in the simulator: the same integer functions the compiler
builds into device code (``compiler/fp8.py``), on the arguments' bits."""

from __future__ import annotations

import struct

import numpy as np

from ..compiler import fp8 as F
from ..compiler.intrinsics.fp8 import BFloat16Raw


def _f32_bits(x):
    return int(np.asarray(np.float32(float(x))).view(np.uint32))


def _f64_bits(x):
    return struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def _flag(v):
    return int(v) != 0


def cvt_float_to_fp8(x, saturate, interpretation):
    return np.uint8(F.f32_to_fp8(_f32_bits(x), int(interpretation) == 1, _flag(saturate)))


def cvt_double_to_fp8(x, saturate, interpretation):
    return np.uint8(F.f64_to_fp8(_f64_bits(x), int(interpretation) == 1, _flag(saturate)))


def cvt_bfloat16raw_to_fp8(raw, saturate, interpretation):
    return np.uint8(F.f32_to_fp8((int(raw.x) & 0xFFFF) << 16, int(interpretation) == 1,
                                 _flag(saturate)))


def cvt_float_to_e8m0(x, saturate, rounding):
    return np.uint8(F.f32_to_e8m0(_f32_bits(x), _flag(saturate),
                                  int(rounding) == F.ROUND_POS_INF))


def cvt_double_to_e8m0(x, saturate, rounding):
    return np.uint8(F.f64_to_e8m0(_f64_bits(x), _flag(saturate),
                                  int(rounding) == F.ROUND_POS_INF))


def cvt_bfloat16raw_to_e8m0(raw, saturate, rounding):
    return np.uint8(F.bf16_to_e8m0(int(raw.x) & 0xFFFF, _flag(saturate),
                                   int(rounding) == F.ROUND_POS_INF))


def cvt_e8m0_to_bf16raw(x):
    return BFloat16Raw(np.uint16(F.e8m0_to_bf16(int(x) & 0xFF)))


#: stub name -> host implementation
FP8 = {name: globals()[name] for name in (
    "cvt_float_to_fp8", "cvt_double_to_fp8", "cvt_bfloat16raw_to_fp8", "cvt_float_to_e8m0",
    "cvt_double_to_e8m0", "cvt_bfloat16raw_to_e8m0", "cvt_e8m0_to_bf16raw")}
