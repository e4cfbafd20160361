"""``cuda.fp16``: numba-cuda's half-precision functions (its module ``numba.cuda.fp16``).

Every name of numba-cuda's ``fp16.__all__``: the short names (``hadd``, ``hsin``, ``heq``...), CUDA
C's ``__h*`` functions of ``cuda_fp16.h`` (``__hadd`` is the same function as ``hadd``, as in
numba-cuda), the conversions (``__float2half_rz``, ``__half2int_rn``, ``__half_as_short``...),
``atomicAdd`` and the type ``__half`` (``float16``).  Each takes the argument types of its CUDA C
prototype; other real numbers convert at the call, as numba-cuda's do (to a float16 rounding to
nearest even, to an integer type wrapping).

* Arithmetic, ``hmax``/``hmin``, rounding to an integral value and the comparisons are LLVM
  ``half`` operations: NVPTX selects the .f16 forms (add.rn.f16, max.f16, cvt.rpi.f16.f16,
  setp.lt.f16...).  ``hadd``/``hsub``/``hmul`` are never contracted into an FMA, so they are also
  the ``_rn`` forms.  ``heq`` ... ``hlt`` are ordered (False with a NaN operand, ``hne`` too, as
  CUDA's ``setp.<op>.f16``), ``__hequ`` ... ``__hltu`` unordered (True with a NaN).
* ``__hadd_sat``, ``__hsub_sat``, ``__hmul_sat``, ``__hfma_sat``: the operation rounded once, then
  clamped to [+0.0, 1.0], a NaN to +0.0 (cuda_fp16.h's definition; -0.0 gives +0.0 as its
  ``__hmin(__hmax(r, 0), 1)`` does).  ``__hfma_relu``: the FMA rounded once, +0.0 where it is
  negative or zero, NaN stays NaN.  ``__hmax_nan``/``__hmin_nan``: NaN when either operand is
  NaN, else the larger / smaller with -0.0 < +0.0 (LLVM's ``maximum``/``minimum``: max.NaN.f16
  on sm_80 and newer).
* The square roots, the reciprocal and the transcendental functions compute in float32 and round
  once back to half (cvt.f32.f16 ... cvt.rn.f16.f32).  numba-cuda links cuda_fp16.h for these,
  whose float32 ``.approx`` instructions plus fix-ups for the inputs they would misround aim at
  the correctly rounded half result.  Here hsqrt, hrsqrt and hrcp use IEEE float32 sqrt.rn and
  div.rn (a float32 square root or quotient of halves rounded to half *is* the correctly
  rounded half result); hsin ... hexp10 and htanh use libdevice's float32 functions (within 2 ulp
  of float32 over the whole range), which rounded to half give the correctly rounded result
  except within ~2^-22 (relative) of a rounding midpoint: numba-cuda's results, and NumPy's
  float16 ufuncs', within half-precision rounding.  (Measured on an H200 over all 65536 halves: at
  most 4 results per function differ from numba-cuda's, each by 1 ulp; hsqrt, hrsqrt, hrcp, the
  rounding functions and the comparisons are identical.)  ``htanh_approx`` is the hardware's
  ``tanh.approx.f16`` from sm_75 (PTX ISA 7.0) on, ``htanh`` below, as cuda_fp16.h's.
* Conversions with a rounding mode are PTX's ``cvt`` in that mode, as cuda_fp16.h's: ``_rn`` to
  nearest even, ``_rz`` toward zero, ``_rd`` down, ``_ru`` up, each one exact rounding (an
  integer or a float32 straight to half: cvt.rz.f16.s64, cvt.rm.f16.f32...; ``__double2half``
  is cvt.rn.f16.f64).  To an integer: rounded to an integral value in that mode and saturated to
  the integer's range; a NaN gives 0, or 0x8000000000000000 for the 64-bit integers (cvt.rni.s32.f16,
  cvt.rzi.u64.f16..., as cuda_fp16.h documents).
* ``atomicAdd(address, value)``: ``address`` a ``CPointer(float16)`` (a pointer argument of a
  kernel given a signature); one ``atom.add.noftz.f16``, returning the old value.  It needs
  sm_70 (CUDA's own atomicAdd of a half does), and is refused below with the user's line.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import AbstractTemplate, Registry, signature

from .atomics import atomic_rmw
from .requirements import arch_at_least, ptx_at_least, require
from .stubs import IntrinsicArgumentError, Namespace, NamespaceType, Stub, register_table

__all__ = ["fp16"]

typing = Registry()
lowering = LoweringRegistry()

_HALF, _FLOAT = ir.HalfType(), ir.FloatType()
_I = {8: ir.IntType(8), 16: ir.IntType(16), 32: ir.IntType(32), 64: ir.IntType(64)}


def _fail(name, msg):
    raise IntrinsicArgumentError(f"cuda.fp16.{name}(): {msg}")


# ---------------------------------------------------------------------------------------------
# LLVM helpers

def _on_half(method):
    """An IRBuilder operation on the half operands (fadd, fneg, fma...)."""
    return lambda builder, *args: getattr(builder, method)(*args)


def _half_intrinsic(name):
    """LLVM's ``name.f16`` intrinsic (llvm.fabs, llvm.ceil...)."""
    def lower(builder, *args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_HALF, [_HALF] * len(args)), f"{name}.f16")
        return builder.call(fn, args)
    return lower


def _compare(op, ordered=True):
    if ordered:
        return lambda builder, x, y: builder.fcmp_ordered(op, x, y)
    return lambda builder, x, y: builder.fcmp_unordered(op, x, y)


def _in_float32(compute):
    """compute(builder, x) on the operand widened to float32, rounded once back to half."""
    def lower(builder, x):
        return builder.fptrunc(compute(builder, builder.fpext(x, _FLOAT)), _HALF)
    return lower


def _libdevice32_call(builder, symbol, x):
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_FLOAT, [_FLOAT]), symbol)
    return builder.call(fn, [x])


def _libdevice32(symbol):
    return _in_float32(lambda builder, x: _libdevice32_call(builder, symbol, x))


def _sqrt32(builder, x):       # llvm.sqrt is IEEE sqrt.rn.f32 on NVPTX
    return builder.call(builder.module.declare_intrinsic("llvm.sqrt", [x.type]), [x])


def _asm(builder, text, ret, constraints, *args):
    """One PTX instruction (``$0`` the result), without side effects."""
    fnty = ir.FunctionType(ret, [a.type for a in args])
    return builder.asm(fnty, text, constraints, list(args), side_effect=False)


def _half_bits(builder, x):
    return builder.bitcast(x, _I[16])


def _from_bits(builder, bits):
    return builder.bitcast(bits, _HALF)


_ZERO, _ONE = ir.Constant(_HALF, 0.0), ir.Constant(_HALF, 1.0)


def _saturated(lower):
    """The result clamped to [+0.0, 1.0], a NaN (and -0.0) to +0.0: cuda_fp16.h's ``_sat``."""
    def sat(builder, *args):
        r = lower(builder, *args)
        below_one = builder.select(builder.fcmp_ordered("<", r, _ONE), r, _ONE)
        return builder.select(builder.fcmp_ordered(">", r, _ZERO), below_one, _ZERO)
    return sat


def _fma(builder, x, y, z):
    return builder.fma(x, y, z)


def _fma_relu(builder, x, y, z):
    r = builder.fma(x, y, z)
    # negative results and -0.0 give +0.0; a NaN stays one (fcmp ole is false for it)
    return builder.select(builder.fcmp_ordered("<=", r, _ZERO), _ZERO, r)


def _hisinf(builder, x):
    i32 = _I[32]
    pos = builder.fcmp_ordered("==", x, ir.Constant(_HALF, float("inf")))
    neg = builder.fcmp_ordered("==", x, ir.Constant(_HALF, float("-inf")))
    return builder.select(pos, i32(1), builder.select(neg, i32(-1), i32(0)))


def _tanh_approx(builder, x):
    # cuda_fp16.h: tanh.approx.f16 from sm_75 on (PTX ISA 7.0), htanh below
    if arch_at_least(75) and ptx_at_least(70):
        r = _asm(builder, "tanh.approx.f16 $0, $1;", _I[16], "=h,h", _half_bits(builder, x))
        return _from_bits(builder, r)
    return _libdevice32("__nv_tanhf")(builder, x)


# Conversions: PTX's rounding modifiers for a float result and for an integral one.
_CVT_MODE = {"rn": "rn", "rz": "rz", "rd": "rm", "ru": "rp"}
_CVT_INT_MODE = {"rn": "rni", "rz": "rzi", "rd": "rmi", "ru": "rpi"}
# the register class (inline-assembly constraint) of each integer width
_REG = {8: "r", 16: "h", 32: "r", 64: "l"}


def _float_to_half(mode):
    """float32 -> half rounded once in ``mode`` (cvt.<mode>.f16.f32)."""
    def lower(builder, x):
        if mode == "rn":
            return builder.fptrunc(x, _HALF)
        r = _asm(builder, f"cvt.{_CVT_MODE[mode]}.f16.f32 $0, $1;", _I[16], "=h,f", x)
        return _from_bits(builder, r)
    return lower


def _int_to_half(bits, signed, mode):
    """An integer -> half rounded once in ``mode`` (cvt.<mode>.f16.<s|u><bits>)."""
    def lower(builder, i):
        if mode == "rn":
            return builder.sitofp(i, _HALF) if signed else builder.uitofp(i, _HALF)
        ity = f"{'s' if signed else 'u'}{bits}"
        r = _asm(builder, f"cvt.{_CVT_MODE[mode]}.f16.{ity} $0, $1;", _I[16],
                 f"=h,{_REG[bits]}", i)
        return _from_bits(builder, r)
    return lower


def _half_to_int(bits, signed, mode):
    """half -> an integer: rounded to an integral value in ``mode``, saturated to the range; NaN
    gives 0 (0x8000000000000000 for 64 bits) -- PTX's cvt.<mode>i.<s|u><bits>.f16, which for 8
    bits writes a 32-bit register (as CUDA C's __half2char_rz)."""
    def lower(builder, x):
        ity = f"{'s' if signed else 'u'}{bits}"
        reg = 32 if bits == 8 else bits
        r = _asm(builder, f"cvt.{_CVT_INT_MODE[mode]}.{ity}.f16 $0, $1;", _I[reg],
                 f"={_REG[bits]},h", _half_bits(builder, x))
        return builder.trunc(r, _I[8]) if bits == 8 else r
    return lower


# ---------------------------------------------------------------------------------------------
# The functions: name -> (argument types, result type, lowering(builder, *args), doc)

_H, _B, _I32 = types.float16, types.boolean, types.int32
_FUNCS = {}
#: other names of the same function (numba-cuda's ``__hadd`` is its ``hadd``)
ALIASES = {}


def _def(name, argtypes, result, lower, doc, *aliases):
    _FUNCS[name] = (tuple(argtypes), result, lower, doc)
    for alias in aliases:
        ALIASES[alias] = name


def _h(n):
    return (_H,) * n


# numba-cuda's short names, each also its __h* name
for _n, _m, _w in (("hadd", "fadd", "a + b"), ("hsub", "fsub", "a - b"),
                   ("hmul", "fmul", "a * b"), ("hdiv", "fdiv", "a / b")):
    _def(_n, _h(2), _H, _on_half(_m), f"{_n}(a, b): {_w} in float16", f"__{_n}")
_def("hmax", _h(2), _H, _half_intrinsic("llvm.maxnum"),
     "hmax(a, b): the larger of a and b in float16 (a NaN operand is ignored)", "__hmax")
_def("hmin", _h(2), _H, _half_intrinsic("llvm.minnum"),
     "hmin(a, b): the smaller of a and b in float16 (a NaN operand is ignored)", "__hmin")
_def("hneg", _h(1), _H, _on_half("fneg"), "hneg(a): -a in float16", "__hneg")
_def("habs", _h(1), _H, _half_intrinsic("llvm.fabs"), "habs(a): |a| in float16", "__habs")
_def("hfma", _h(3), _H, _fma, "hfma(a, b, c): a * b + c rounded once, in float16", "__hfma")
_def("hceil", _h(1), _H, _half_intrinsic("llvm.ceil"),
     "hceil(a): the smallest integer >= a (float16)")
_def("hfloor", _h(1), _H, _half_intrinsic("llvm.floor"),
     "hfloor(a): the largest integer <= a (float16)")
_def("htrunc", _h(1), _H, _half_intrinsic("llvm.trunc"), "htrunc(a): a rounded toward zero "
     "(float16)")
_def("hrint", _h(1), _H, _half_intrinsic("llvm.rint"),
     "hrint(a): a rounded to the nearest integer, ties to even (float16)")
_def("hsqrt", _h(1), _H, _in_float32(_sqrt32), "hsqrt(a): square root of a in float16")
_def("hrsqrt", _h(1), _H, _in_float32(lambda b, x: b.fdiv(_FLOAT(1.0), _sqrt32(b, x))),
     "hrsqrt(a): 1 / sqrt(a) in float16 (float32, rounded to half)")
_def("hrcp", _h(1), _H, _in_float32(lambda b, x: b.fdiv(_FLOAT(1.0), x)),
     "hrcp(a): 1 / a in float16")
for _n, _what in (("sin", "sine"), ("cos", "cosine"), ("log", "natural logarithm"),
                  ("log2", "base-2 logarithm"), ("log10", "base-10 logarithm"),
                  ("exp", "e ** a"), ("exp2", "2 ** a"), ("exp10", "10 ** a"),
                  ("tanh", "hyperbolic tangent")):
    _def(f"h{_n}", _h(1), _H, _libdevice32(f"__nv_{_n}f"),
         f"h{_n}(a): {_what} of a in float16 (float32, rounded to half)")
_def("htanh_approx", _h(1), _H, _tanh_approx,
     "htanh_approx(a): the hardware's approximate tanh (tanh.approx.f16; htanh below sm_75)")
for _n, _op in (("heq", "=="), ("hne", "!="), ("hge", ">="), ("hgt", ">"), ("hle", "<="),
                ("hlt", "<")):
    _def(_n, _h(2), _B, _compare(_op),
         f"{_n}(a, b): a {_op} b for float16 values (False if either is NaN)", f"__{_n}")
    _def(f"__{_n}u", _h(2), _B, _compare(_op, ordered=False),
         f"__{_n}u(a, b): a {_op} b for float16 values, or either is NaN")

# CUDA C's other __h* functions
for _n, _m, _w in (("hadd", "fadd", "a + b"), ("hsub", "fsub", "a - b"),
                   ("hmul", "fmul", "a * b")):
    _def(f"__{_n}_rn", _h(2), _H, _on_half(_m),
         f"__{_n}_rn(a, b): {_w} in float16, never contracted into an FMA")
    _def(f"__{_n}_sat", _h(2), _H, _saturated(_on_half(_m)),
         f"__{_n}_sat(a, b): {_w} in float16, clamped to [+0.0, 1.0] (NaN to +0.0)")
_def("__hfma_sat", _h(3), _H, _saturated(_fma),
     "__hfma_sat(a, b, c): a * b + c rounded once, clamped to [+0.0, 1.0] (NaN to +0.0)")
_def("__hfma_relu", _h(3), _H, _fma_relu,
     "__hfma_relu(a, b, c): a * b + c rounded once, +0.0 where it is <= 0 (NaN stays NaN)")
_def("__hmax_nan", _h(2), _H, _half_intrinsic("llvm.maximum"),
     "__hmax_nan(a, b): the larger of a and b (-0.0 < +0.0), NaN if either is NaN")
_def("__hmin_nan", _h(2), _H, _half_intrinsic("llvm.minimum"),
     "__hmin_nan(a, b): the smaller of a and b (-0.0 < +0.0), NaN if either is NaN")
_def("__hisnan", _h(1), _B, lambda b, x: b.fcmp_unordered("uno", x, x),
     "__hisnan(a): whether a is NaN")
_def("__hisinf", _h(1), _I32, _hisinf, "__hisinf(a): 1 for +inf, -1 for -inf, else 0 (int32)")

# conversions
_INTS = {"char": (types.int8, 8, True), "uchar": (types.uint8, 8, False),
         "short": (types.int16, 16, True), "ushort": (types.uint16, 16, False),
         "int": (types.int32, 32, True), "uint": (types.uint32, 32, False),
         "ll": (types.int64, 64, True), "ull": (types.uint64, 64, False)}
_def("__half2float", _h(1), types.float32, lambda b, x: b.fpext(x, _FLOAT),
     "__half2float(a): a as a float32 (exact)")
_def("__float2half", (types.float32,), _H, _float_to_half("rn"),
     "__float2half(x): a float32 rounded to float16, to nearest even")
_def("__double2half", (types.float64,), _H, lambda b, x: b.fptrunc(x, _HALF),
     "__double2half(x): a float64 rounded once to float16, to nearest even")
_MODE_WORDS = {"rn": "to nearest even", "rz": "toward zero", "rd": "down", "ru": "up"}
for _mode in ("rn", "rz", "rd", "ru"):
    _def(f"__float2half_{_mode}", (types.float32,), _H, _float_to_half(_mode),
         f"__float2half_{_mode}(x): a float32 rounded once to float16, {_MODE_WORDS[_mode]}")
for _cname, (_ity, _bits, _signed) in _INTS.items():
    for _mode in (("rz",) if _bits == 8 else ("rn", "rz", "rd", "ru")):
        _def(f"__half2{_cname}_{_mode}", _h(1), _ity, _half_to_int(_bits, _signed, _mode),
             f"__half2{_cname}_{_mode}(a): a rounded {_MODE_WORDS[_mode]} to an integer, "
             f"saturated to {_ity} (NaN: {'0x8000000000000000' if _bits == 64 else '0'})")
        if _bits > 8:
            _def(f"__{_cname}2half_{_mode}", (_ity,), _H, _int_to_half(_bits, _signed, _mode),
                 f"__{_cname}2half_{_mode}(i): an {_ity} rounded once to float16, "
                 f"{_MODE_WORDS[_mode]}")
for _cname, _ity in (("short", types.int16), ("ushort", types.uint16)):
    _def(f"__half_as_{_cname}", _h(1), _ity, _half_bits, f"__half_as_{_cname}(a): the bits of "
         f"a as an {_ity}")
    _def(f"__{_cname}_as_half", (_ity,), _H, _from_bits,
         f"__{_cname}_as_half(i): the float16 whose bits are i")

#: name -> stub; name -> (argument types, result type)
STUBS, SIGNATURES = register_table("fp16", _FUNCS, typing, lowering, own_type=_H)


# ---------------------------------------------------------------------------------------------
# atomicAdd(address, value): a CPointer(float16) address, as numba-cuda's

atomicAdd = STUBS["atomicAdd"] = Stub(
    "atomicAdd", "atomicAdd(address, value): atomically *address += value for a "
    "CPointer(float16) address; returns the old value (sm_70 and newer)", namespace="cuda.fp16")
_POINTER = types.CPointer(_H)


class _AtomicAddTemplate(AbstractTemplate):
    key = atomicAdd

    def generic(self, args, kws):
        if kws or len(args) != 2:
            _fail("atomicAdd", f"takes 2 arguments (address, value), got {len(args) + len(kws)}")
        ptr, val = (types.unliteral(a) for a in args)
        if ptr != _POINTER:
            _fail("atomicAdd", f"the address must be a pointer to float16 (CPointer(float16), "
                               f"a pointer argument of a kernel given a signature), got {ptr}")
        if not isinstance(val, (types.Float, types.Integer, types.Boolean)):
            _fail("atomicAdd", f"needs a float16 (or real number) value, got {val}")
        return signature(_H, _POINTER, _H)


typing.register_global(atomicAdd, types.Function(_AtomicAddTemplate))


@lowering.lower(atomicAdd, _POINTER, _H)
def _lower_atomic_add(context, builder, sig, args):
    # LLVM would expand it into a compare-and-swap loop of 16-bit words, which ptxas refuses
    # below sm_70 as well: CUDA's atomicAdd of a half needs compute capability 7.0
    require("cuda.fp16.atomicAdd()", sm=70, ptx=63,
            instead="below sm_70, add float32 values with cuda.atomic.add on a float32 array")
    ptr, val = args
    return atomic_rmw(builder, "fadd", ptr, val)      # atom.add.noftz.f16


SIGNATURES["atomicAdd"] = ((_POINTER, _H), _H)

#: ``cuda.fp16`` (also importable as the module ``gpureplace.cuda.fp16``): numba-cuda's names,
#: its type ``__half``, and the CUDA C names of the short ones (``__hadd`` is ``hadd``)
fp16 = Namespace("fp16", __half=types.float16, **STUBS,
                 **{alias: STUBS[name] for alias, name in ALIASES.items()})
typing.register_global(fp16, NamespaceType(fp16))
