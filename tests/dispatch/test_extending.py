"""``gpureplace.cuda.extending`` (issue 16): numba-cuda's extension API on gpureplace's compiler.
An ``overload`` is an override in a Context, so its redefinition recompiles exactly the kernels
that call the overloaded function; Numba's own registries (intrinsics, data models, typing and
lowering) reach gpureplace kernels; compile errors of typing are also Numba's TypingError."""

import enum
import re

import numpy as np
import pytest
from numba.core import types as nbt
from numba.core.errors import TypingError

import gpureplace
from conftest import assemble
from gpureplace import CompileError, cuda
from gpureplace.config import settings
from gpureplace.cuda import extending
from gpureplace.cuda.extending import (cgutils, core_models, intrinsic, lower,
                                       make_attribute_wrapper, overload, register_model,
                                       type_callable, typeof_impl, types)

SIG = (nbt.float64[::1], nbt.float64)


def _fresh_host():
    def scaled(x):
        raise NotImplementedError("host stand-in: the device meaning comes from the overload")
    return scaled


def test_an_overload_is_an_override_and_its_redefinition_recompiles_only_its_callers():
    scaled = _fresh_host()

    @overload(scaled)
    def ol_scaled(x):
        if isinstance(x, types.Float):
            return lambda x: x * 10.0
        return lambda x: x + 1

    ovr = gpureplace.default_context.lookup(scaled)
    assert ovr is not None and "ol_scaled" in repr(ovr)

    @cuda.jit
    def uses(out, a):
        out[0] = scaled(a)
        out[1] = scaled(2)

    @cuda.jit
    def other(out, a):
        out[0] = a

    first, unrelated = uses.compile(SIG), other.compile(SIG)
    assert "1.0e+01" in uses.inspect_llvm(SIG) or "1.000000e+01" in uses.inspect_llvm(SIG)
    assemble(uses.inspect_asm(SIG))

    @overload(scaled)                       # the cell run again, with a new meaning
    def ol_scaled_again(x):
        return lambda x: x - 100

    assert uses.compile(SIG) is not first
    assert other.compile(SIG) is unrelated
    assert "1.000000e+02" in uses.inspect_llvm(SIG) or "-1.0e+02" in uses.inspect_llvm(SIG)
    gpureplace.default_context.remove_override(scaled)


def test_an_overload_can_live_in_a_named_context_and_runs_in_the_simulator(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    scaled = _fresh_host()
    ctx = gpureplace.Context("ext-test", parent=gpureplace.default_context)

    @overload(scaled, context=ctx)
    def ol_scaled(x):
        return lambda x: 3 * x

    @cuda.jit(context=ctx)
    def k(out, a):
        out[0] = scaled(a)

    out = np.zeros(1)
    k[1, 1](out, 2.0)
    assert out[0] == 6.0
    assert gpureplace.default_context.lookup(scaled) is None     # only in its context

    @cuda.jit
    def elsewhere(out, a):
        out[0] = scaled(a)

    with pytest.raises(CompileError, match="cannot store none"):  # the plain function, which
        elsewhere[1, 1](out, 2.0)                                # only raises


def test_a_generator_that_refuses_the_types_is_a_typing_error_naming_the_kernel():
    scaled = _fresh_host()

    @overload(scaled)
    def ol_scaled(x):
        if isinstance(x, types.Float):
            return lambda x: x
        raise TypingError(f"cannot scale {x}")

    @cuda.jit
    def bad(out, z):
        out[0] = scaled(z)

    with pytest.raises(TypingError) as info:             # numba-cuda code's except clause
        bad.compile((nbt.float64[::1], nbt.complex128))
    assert isinstance(info.value, CompileError)
    assert "in " in str(info.value) and "bad" in str(info.value)
    assert info.value._render_traceback_()[0].startswith("CompileError: in ")
    gpureplace.default_context.remove_override(scaled)


def test_a_device_function_error_inside_a_kernel_stays_precise():
    """The TypingError face is put on only where the user's compile ends: inside Numba's
    inference it would read as "try the next overload" and bury the inner function's error."""
    @cuda.jit(device=True)
    def inner(x):
        return x.no_such_attribute

    @cuda.jit
    def outer(out, a):
        out[0] = inner(a)

    with pytest.raises(TypingError) as info:
        outer.compile(SIG)
    assert "no_such_attribute" in str(info.value) and "inner" in str(info.value)
    with pytest.raises(TypingError, match="no_such_attribute"):      # compile_ptx alike
        cuda.compile_ptx(inner.py_func, "float64(float64)", device=True)


class _Pair:
    def __init__(self, x, y):
        self.x, self.y = x, y


class _PairType(nbt.Type):
    def __init__(self):
        super().__init__(name="GpureplaceTestPair")


_pair_type = _PairType()


@typeof_impl.register(_Pair)
def _typeof_pair(val, c):
    return _pair_type


@register_model(_PairType)
class _PairModel(core_models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("x", types.int32), ("y", types.int32)])


make_attribute_wrapper(_PairType, "x", "x")
make_attribute_wrapper(_PairType, "y", "y")


@type_callable(_Pair)
def _type_pair(context):
    def typer(x, y):
        if isinstance(x, types.Integer) and isinstance(y, types.Integer):
            return _pair_type
    return typer


@lower(_Pair, types.Integer, types.Integer)
def _lower_pair(context, builder, sig, args):
    obj = cgutils.create_struct_proxy(_pair_type)(context, builder)
    obj.x = context.cast(builder, args[0], sig.args[0], types.int32)
    obj.y = context.cast(builder, args[1], sig.args[1], types.int32)
    return obj._getvalue()


@intrinsic
def _add_one(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.add(args[0], context.get_constant(x, 1))
    return x(x), codegen


@cuda.jit
def _uses_numba_extensions(out, a):
    p = _Pair(a, 4)
    out[0] = p.x + p.y
    out[1] = _add_one(a)


def test_numba_data_models_typing_lowering_and_intrinsics_reach_kernels():
    sig = (nbt.int64[::1], nbt.int64)
    _uses_numba_extensions.compile(sig)
    assemble(_uses_numba_extensions.inspect_asm(sig))
    assert extending.cudaimpl.lower is lower                # numba-cuda's module names
    assert extending.cudadecl.registry is extending.typing_registry


@cuda.jit
def _arrays_of_pairs(outx, outy):
    local = cuda.local.array(6, dtype=_pair_type)
    shared = cuda.shared.array((2, 3), dtype=_pair_type)
    for i in range(local.size):
        local[i] = _Pair(i, 2 * i)
    shared[1, 2] = local[3]
    for i in range(local.size):
        outx[i] = local[i].x
        outy[i] = local[i].y + shared[1, 2].x


def test_local_and_shared_arrays_of_a_struct_model_type(monkeypatch):
    sig = (nbt.int32[::1], nbt.int32[::1])
    spec = _arrays_of_pairs.compile(sig)
    assert spec._type_annotation.typemap["local"].dtype is _pair_type
    ptx = spec.ptx
    # LLVM folds the whole kernel: outy[5] = 2 * 5 + local[3].x, stored as a constant
    assert re.search(r"st\.global\.b32\s+\[%rd\d+\+20\], 13;", ptx), ptx
    assemble(ptx)
    monkeypatch.setattr(settings, "backend", "simulator")
    outx, outy = np.zeros(6, np.int32), np.zeros(6, np.int32)
    _arrays_of_pairs[1, 1](outx, outy)
    assert outx.tolist() == list(range(6)) and outy.tolist() == [2 * i + 3 for i in range(6)]
    with pytest.raises(CompileError, match=r"or a type registered with a StructModel\), got "
                                           r"Module"):
        cuda.jit(_bad_local_dtype).compile((nbt.int32[::1],))


def _bad_local_dtype(x):
    a = cuda.local.array(2, dtype=np)
    x[0] = a[0]


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_extensions_and_enum_arguments_on_the_gpu():
    import cupy as cp
    out = cp.zeros(2, np.int64)
    _uses_numba_extensions[1, 1](out, 3)
    assert cp.asnumpy(out).tolist() == [7, 4]
    _check_enum_arguments(cp.zeros(3, np.int64), cp.asnumpy)


class Color(enum.Enum):
    red = 1
    green = 2


class Planet(enum.Enum):
    earth = (5.97e24, 6.37e6)
    mars = (6.42e23, 3.39e6)


class Shape(enum.IntEnum):
    circle = 1
    square = 7


@cuda.jit
def _enums(a, b, out):
    out[0] = a == b
    out[1] = a.value
    out[2] = Shape.square == 7


def _check_enum_arguments(out, get):
    _enums[1, 1](Color.red, Color.red, out)
    assert get(out).tolist() == [1, 1, 1]
    _enums[1, 1](Shape.square, Shape.circle, out)
    assert get(out).tolist() == [0, 7, 1]


def test_enum_members_are_kernel_arguments(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    _check_enum_arguments(np.zeros(3, np.int64), np.asarray)
    from gpureplace.runtime import arguments
    key, values = arguments.value_key(Color.green)
    assert values == (2,) and str(arguments.numba_type_of_key(key)) == "Enum<int64>(Color)"
    pkey, pvalues = arguments.value_key(Planet.mars)             # a member of tuple value
    assert pvalues == (6.42e23, 3.39e6)

    @cuda.jit
    def radius(p, q, out):
        out[0] = p == q
        out[1] = p.value[1]

    out = np.zeros(2)
    radius[1, 1](Planet.mars, Planet.earth, out)
    assert out.tolist() == [0.0, 3.39e6]
    psig = (arguments.numba_type_of_key(pkey),) * 2 + (nbt.float64[::1],)
    radius.compile(psig)
    assemble(radius.inspect_asm(psig))
    _enums.compile((arguments.numba_type_of_key(key),) * 2 + (nbt.int64[::1],))
    assemble(_enums.inspect_asm((arguments.numba_type_of_key(key),) * 2 + (nbt.int64[::1],)))


def test_typing_and_lowering_registered_after_kernels_compiled_are_found():
    # Contexts skip a refresh while no registry has grown (compiler/target.py): one registered
    # after kernels have compiled must still be installed when a kernel first uses it.
    _uses_numba_extensions.compile((nbt.int64[::1], nbt.int64))

    def tripled(x):
        raise NotImplementedError("host stand-in")

    @type_callable(tripled)
    def _type_tripled(context):
        def typer(x):
            if isinstance(x, types.Integer):
                return x
        return typer

    @lower(tripled, types.Integer)
    def _lower_tripled(context, builder, sig, args):
        return builder.mul(args[0], context.get_constant(sig.args[0], 3))

    @cuda.jit
    def uses_late(out, a):
        out[0] = tripled(a)

    sig = (nbt.int64[::1], nbt.int64)
    uses_late.compile(sig)
    ptx = uses_late.inspect_asm(sig)
    assert re.search(r"mul\.lo\.s64\s+%rd\d+, %rd\d+, 3;", ptx), ptx   # a * 3, as lowered
    assemble(ptx)


def test_an_intrinsic_whose_lowering_fails_is_numbas_lowering_error():
    # numba-cuda code catches LoweringError (a non-void intrinsic whose codegen returns None);
    # a void one that returns None is fine
    from numba.core.errors import LoweringError

    @intrinsic
    def void_func(typingctx, a):
        def codegen(context, builder, signature, args):
            pass
        return types.void(types.int32), codegen

    @intrinsic
    def non_void_func(typingctx, a):
        def codegen(context, builder, signature, args):
            pass                                 # (should return a value)
        return types.int32(types.int32), codegen

    @cuda.jit
    def call_void_func():
        void_func(1)

    def helper():
        return non_void_func(1)

    @cuda.jit
    def call_non_void_func(out):
        out[0] = helper()

    assemble(call_void_func.compile(()).ptx)
    with pytest.raises(LoweringError) as info:
        call_non_void_func.compile((nbt.int32[::1],))
    assert isinstance(info.value, CompileError)
    assert "non-void function returns None" in info.value.msg


def test_an_overload_whose_implementation_signature_differs_shows_both():
    def myoverload(a, b, c, kw=None):
        raise NotImplementedError("host stand-in")

    def impl(a, b, c, kw=12):
        return a

    @overload(myoverload)
    def ol_myoverload(a, b, c, kw=None):
        return impl

    @cuda.jit
    def foo(out, a):
        out[0] = myoverload(a, a, a, kw=a)

    try:
        with pytest.raises(TypingError) as info:
            foo.compile((nbt.int64[::1], nbt.int64))
        text = str(info.value)
        assert "Typing and implementation arguments differ in keyword argument default " \
               "values" in text
        assert "Typing signature: (a, b, c, kw=None)" in text
        assert "Implementation signature: (a, b, c, kw=12)" in text
    finally:
        gpureplace.default_context.remove_override(myoverload)
