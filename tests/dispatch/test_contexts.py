"""Contextual dispatch for users: overrides, named and stacked contexts, records, errors."""

import math

import numba
import numpy as np
import pytest

import gpureplace
from gpureplace import CompileError, Context, cuda, default_context, libdevice
import mylib_host
from conftest import assemble
from corpus import sin_kernel

SIG32 = "void(float32[:], float32[:])"
SIG64 = "void(float64[:], float64[:])"


@pytest.fixture
def ctx():
    """A fresh context under the default one (nothing leaks into other tests)."""
    return Context("test", parent=default_context)


def test_default_and_fast_contexts_differ_as_expected():
    default = sin_kernel.compile(SIG32)
    fast = sin_kernel.with_context(gpureplace.fastmath_context).compile(SIG32)
    assert "__nv_sinf" in default.compiled.ir_texts()[0]
    assert "__nv_fast_sinf" in fast.compiled.ir_texts()[0]
    assert "sin.approx" in fast.ptx and "sin.approx" not in default.ptx
    assert default is not fast
    assert sin_kernel.with_context(gpureplace.fastmath_context) is \
        sin_kernel.with_context(gpureplace.fastmath_context)
    assemble(fast.ptx)


@cuda.jit
def norm_kernel(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = mylib_host.uses_norm(x[i], 2.0 * x[i])


def test_override_of_a_host_library_function_appears_in_the_ptx(ctx):
    with pytest.raises(CompileError):
        norm_kernel.with_context(ctx).compile(SIG32)     # lists, generators: not device code

    @ctx.override(mylib_host.slow_norm)
    def _norm(x, y):
        return libdevice.hypotf(x, y)

    spec = norm_kernel.with_context(ctx).compile(SIG32)
    assemble(spec.ptx)
    report = norm_kernel.with_context(ctx).dispatch_report(SIG32)
    row = [r for r in report if r["callable"] == "mylib_host.slow_norm"][0]
    assert row["layer"] == "test" and row["function"] == "uses_norm"
    assert row["implementation"].startswith("device function")
    assert row["line"] == mylib_host.uses_norm.__code__.co_firstlineno + 1


def test_stacked_lookup_nearest_wins_and_falls_back_to_parents():
    grand = Context("grand", parent=default_context)
    parent = Context("parent", parent=grand)
    child = Context("child", parent=parent)
    grand.override(math.sin, lambda x: x * 3.0)
    parent.override(math.sin, lambda x: x * 5.0)
    assert child.lookup(math.sin).context is parent
    assert "0d4014000000000000" in sin_kernel.with_context(child).compile(SIG64).ptx   # 5.0
    parent.remove_override(math.sin)
    assert child.lookup(math.sin).context is grand
    assert "0d4008000000000000" in sin_kernel.with_context(child).compile(SIG64).ptx   # 3.0
    grand.remove_override(math.sin)
    assert child.lookup(math.sin).context is gpureplace.builtin_context


def test_override_may_call_the_function_it_overrides(ctx):
    @ctx.override(math.exp)
    def doubled_exp(x):
        return 2.0 * math.exp(x)          # the next layer down: libdevice's exp

    @cuda.jit
    def k(out, x):
        out[0] = math.exp(x[0])

    spec = k.with_context(ctx).compile(SIG64)
    names = [cf.pyfunc.__name__ for cf in spec.compiled.closure()]
    assert names == ["k", "doubled_exp"]                  # no recursion into itself
    assert "__nv_exp" in "".join(t for cf in spec.compiled.closure() for t in cf.ir_texts())
    deps = spec.dependencies()
    used = {(o["function"].rsplit(".", 1)[-1], o["host"], o["context"]) for o in deps["overrides"]}
    assert ("k", "math.exp", "test") in used
    assert ("doubled_exp", "math.exp", "builtin") in used


def test_a_host_function_as_the_replacement_means_what_it_means_in_the_context(ctx):
    """override(math.exp, math.sin): the replacement is resolved like any call of math.sin in
    the context (libdevice's sin, then the user's own override of sin, which invalidates)."""
    ctx.override(math.exp, math.sin)

    @cuda.jit
    def k(out, x):
        out[0] = math.exp(x[0])

    spec = k.with_context(ctx).compile(SIG64)
    ir = "".join(spec.compiled.ir_texts())
    assert '@"__nv_sin"' in ir and "__nv_exp" not in ir
    assemble(spec.ptx)
    ctx.override(math.sin, lambda v: v * 17.0)
    again = k.with_context(ctx).compile(SIG64)
    assert again is not spec and "0d4031000000000000" in again.ptx      # 17.0
    ctx.override(math.sin, math.exp)          # each masks the other: exp here is libdevice's
    swapped = k.with_context(ctx).compile(SIG64)
    assert '@"__nv_exp"' in "".join(t for cf in swapped.compiled.closure() for t in cf.ir_texts())
    ctx.override(math.exp, np.float32)        # a type as the replacement: a conversion
    assert "cvt.rn.f32.f64" in k.with_context(ctx).compile(SIG64).ptx


def test_typed_overrides_fall_back_for_other_types(ctx):
    @ctx.override(math.sin, types=(numba.float32,))
    def sin32(x):
        return x * np.float32(7.0)

    f32 = sin_kernel.with_context(ctx).compile(SIG32)
    f64 = sin_kernel.with_context(ctx).compile(SIG64)
    assert "0f40E00000" in f32.ptx                        # 7.0f: the float32 override
    assert "__nv_sin" not in "".join(f32.compiled.ir_texts())
    assert '@"__nv_sin"' in "".join(f64.compiled.ir_texts())   # float64: the built-in layer

    ctx.override(math.sin, lambda x: x * 9.0, types=("float64",))
    f64b = sin_kernel.with_context(ctx).compile(SIG64)
    assert "0d4022000000000000" in f64b.ptx               # 9.0


def test_override_applies_inside_helper_chains_and_other_overrides(ctx):
    def inner(v):
        return math.cos(v)

    def outer(v):
        return inner(v) + 1.0

    @cuda.jit
    def k(out, x):
        out[0] = outer(x[0]) + math.sin(x[0])

    ctx.override(math.cos, lambda v: v * 11.0)

    def sin_via_cos(v):
        return math.cos(v) * 13.0            # an override calling another overridden function
    ctx.override(math.sin, sin_via_cos)
    ptx = k.with_context(ctx).compile(SIG64).ptx
    assert "0d4026000000000000" in ptx       # 11.0, from both the helper chain and the override
    assert "0d402A000000000000" in ptx      # 13.0, from the override that calls cos
    assert "cos" not in ptx


def test_override_of_a_device_function(ctx):
    @cuda.jit(device=True)
    def f(v):
        return v + 1.0

    @cuda.jit
    def k(out, x):
        out[0] = f(x[0])

    ctx.override(f, lambda v: v + 17.0)
    assert "0d4031000000000000" in k.with_context(ctx).compile(SIG64).ptx
    assert "0d4031000000000000" not in k.compile(SIG64).ptx


def test_compile_ptx_per_context_and_jit_bound_context(ctx):
    ctx.override(math.sin, lambda x: x * 19.0)
    ptx, _ = cuda.compile_ptx(sin_kernel.py_func, SIG64, context=ctx)
    assert "0d4033000000000000" in ptx

    @cuda.jit(context=ctx)
    def bound(out, x):
        out[0] = math.sin(x[0])
    assert "0d4033000000000000" in bound.compile(SIG64).ptx


def test_reregistering_an_override_invalidates_exactly_its_dependents():
    a = Context("A", parent=default_context)
    a_child = Context("A-child", parent=a)
    b = Context("B", parent=default_context)

    @cuda.jit
    def uses_exp(out, x):
        out[0] = math.exp(x[0])

    @cuda.jit
    def no_exp(out, x):
        out[0] = x[0] + 1.0

    specs = {(k.__name__, c.name): k.with_context(c).compile(SIG64)
             for k in (uses_exp, no_exp) for c in (a, a_child, b)}
    before = gpureplace.stats()["kernel_compiles"]
    a.override(math.exp, lambda x: x * 23.0)
    again = {(k.__name__, c.name): k.with_context(c).compile(SIG64)
             for k in (uses_exp, no_exp) for c in (a, a_child, b)}
    assert gpureplace.stats()["kernel_compiles"] == before + 2
    changed = {key for key in specs if specs[key] is not again[key]}
    assert changed == {("uses_exp", "A"), ("uses_exp", "A-child")}


def test_override_signature_mismatch_is_refused_at_definition(ctx):
    with pytest.raises(TypeError, match=r"takes 1 positional argument\(s\), but calls of "
                                        r"mylib_host.slow_norm pass 2"):
        ctx.override(mylib_host.slow_norm, lambda x: x)
    with pytest.raises(TypeError, match="not a type"):
        ctx.override(math.sin, lambda x: x, types=("no_such_type",))


def test_override_called_with_unacceptable_arguments_names_override_and_call_site(ctx):
    def two(x, y):
        return x + y

    def host(*args):
        return args

    ctx.override(host, two)

    @cuda.jit
    def k(out, x):
        out[0] = host(x[0], x[0], x[0])

    with pytest.raises(CompileError) as info:
        k.with_context(ctx).compile(SIG64)
    text = str(info.value)
    assert "the override of" in text and "host" in text and "context 'test'" in text
    assert info.value.lineno == k.py_func.__code__.co_firstlineno + 2


def test_override_recursing_into_itself_is_a_clear_error(ctx):
    def host(x):
        return x

    def bad(x):
        return bad(x - 1.0)

    ctx.override(host, bad)

    @cuda.jit
    def k(out, x):
        out[0] = host(x[0])

    with pytest.raises(CompileError, match="recursive"):
        k.with_context(ctx).compile(SIG64)


def test_context_cycles_are_refused():
    a = Context("cyc-a", parent=default_context)
    b = Context("cyc-b", parent=a)
    with pytest.raises(ValueError, match="context cycle"):
        a.parent = b
    with pytest.raises(ValueError, match="context cycle"):
        a.parent = a


# -- on the GPU ----------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.gpu_only    # libdevice accuracy; the simulator computes both on the host
def test_fast_and_default_sin_accuracy_on_device():
    import cupy as cp
    x = np.linspace(-np.pi, np.pi, 1 << 16, dtype=np.float32)
    ref = np.sin(x.astype(np.float64))
    dx = cp.asarray(x)
    out = cp.empty_like(dx)
    sin_kernel[256, 256](out, dx)
    default = cp.asnumpy(out).astype(np.float64)
    sin_kernel.with_context(gpureplace.fastmath_context)[256, 256](out, dx)
    fast = cp.asnumpy(out).astype(np.float64)
    # CUDA's documented bounds: sinf 2 ulp; __sinf absolute error 2^-21.41 on [-pi, pi]
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(default - ref) / ulp) <= 2.0
    assert np.max(np.abs(fast - ref)) <= 2.0 ** -21.41
    assert np.any(fast != default)           # really a different implementation


@pytest.mark.gpu
def test_overridden_kernel_results_on_device(ctx):
    import cupy as cp
    ctx.override(mylib_host.slow_norm, lambda x, y: libdevice.hypotf(x, y))
    x = cp.arange(1, 1025, dtype=cp.float32)
    out = cp.empty_like(x)
    norm_kernel.with_context(ctx)[4, 256](out, x)
    xs = np.arange(1, 1025, dtype=np.float32)
    np.testing.assert_allclose(cp.asnumpy(out), np.hypot(xs, 2 * xs) + 1.0, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.gpu_only    # flushing and tanh.approx are the hardware's; the simulator is exact
def test_fast_math_flushes_denormals_and_approximates_tanh_on_device():
    import cupy as cp

    @cuda.jit
    def scaled_tanh(out, x, scale):
        i = cuda.grid(1)
        if i < x.size:
            out[i, 0] = x[i] * scale
            out[i, 1] = math.tanh(x[i])

    tiny = np.float32(1e-39)                         # a float32 denormal
    x = np.concatenate([np.full(4, tiny, np.float32),
                        np.linspace(-5, 5, 4092, dtype=np.float32)])
    dx = cp.asarray(x)
    out = cp.empty((x.size, 2), np.float32)
    scale = np.float32(1.0)
    scaled_tanh[16, 256](out, dx, scale)
    precise = cp.asnumpy(out)
    scaled_tanh.with_context(gpureplace.fastmath_context)[16, 256](out, dx, scale)
    fast = cp.asnumpy(out)
    assert (precise[:4, 0] == tiny).all() and (fast[:4, 0] == 0).all()     # flushed
    ref = np.tanh(x[4:].astype(np.float64))
    assert np.max(np.abs(precise[4:, 1] - ref)) <= 4 * np.spacing(np.float32(1))
    assert np.max(np.abs(fast[4:, 1] - ref) / np.maximum(np.abs(ref), 1e-30)) <= 2.0 ** -10.9
    assert np.any(fast[4:, 1] != precise[4:, 1])       # the hardware's approximation


def test_typing_asked_outside_a_compile_leaves_the_kernels_lowering_intact():
    """A typing question asked of a Context's typing context directly (numba-cuda's
    ``cuda.descriptor.cuda_target.typing_context``, an extension's helper) goes through Numba's
    @overload templates as a compile does: their kept answer must come with a lowering in
    gpureplace's target, or a later kernel using the same call failed with "No definition for
    lowering".  (A Context of its own: its typing context's templates have answered nothing.)"""
    from numba.core import types

    from gpureplace.compiler.target import compilers
    fresh = Context("typing_asked_directly")
    typing_context = compilers(fresh)[0]
    typing_context.refresh()
    sig = typing_context.resolve_function_type(max, (types.int32, types.float32), {})
    assert sig.return_type == types.float64
    assert cuda.descriptor.cuda_target.typing_context.resolve_function_type(
        min, (types.int64, types.float32), {}).return_type == types.float64

    def half_of_max(x, out):
        t = cuda.grid(1)
        out[t] = max(np.int32(7), x[t]) // 2 + min(np.int64(3), x[t])

    spec = cuda.jit(half_of_max, context=fresh).compile("void(float32[:], float64[:])",
                                                       arch="sm_90")
    assemble(spec.ptx)
    spec = cuda.jit(half_of_max).compile("void(float32[:], float64[:])", arch="sm_90")
    assemble(spec.ptx)


SCRIPT_CONTEXT = """
import math
from gpureplace import Context
ctx = Context("script_redefined"{options})
def my_exp(x):
    return x * {factor}
ctx.override(math.exp, my_exp)
"""


def test_a_context_created_again_by_the_same_module_is_redefined_in_place():
    """Outside IPython too (a script's cell run again, a module reloaded): creating a context
    with the name of a live one that the same module created defines that one again -- no
    ``gpureplace.refresh()`` needed -- and the kernels compiled in it recompile."""
    ns = {"__name__": "gr_script_like"}
    exec(SCRIPT_CONTEXT.format(options="", factor="29.0"), ns)
    held = ns["ctx"]

    @cuda.jit(context=held)
    def k(out, x):
        out[0] = math.exp(x[0])
    first = k.compile(SIG64)
    assert "0d403D000000000000" in first.ptx                                # 29.0
    version = held.version
    exec(SCRIPT_CONTEXT.format(options=", fastmath=True", factor="31.0"), ns)
    again = k.compile(SIG64)
    assert "0d403F000000000000" in again.ptx and "0d403D000000000000" not in again.ptx
    assert ns["ctx"] is held and Context.named("script_redefined") is held
    assert held.fastmath and held.version > version
    # created again without the override: math.exp is the built-in one again
    exec("from gpureplace import Context\nctx = Context('script_redefined')\n", ns)
    assert ns["ctx"] is held and held.overrides() == [] and not held.fastmath
    assert "0d403F000000000000" not in k.compile(SIG64).ptx


def test_a_context_of_another_modules_name_or_stacked_on_it_is_a_new_one():
    ns = {"__name__": "gr_library_like"}
    exec(SCRIPT_CONTEXT.format(options="", factor="29.0").replace(
        "script_redefined", "shared_name"), ns)
    lib_ctx = ns["ctx"]
    with pytest.warns(UserWarning, match="gr_library_like"):
        mine = Context("shared_name")                     # (this test module: another one)
    assert mine is not lib_ctx and lib_ctx.lookup(math.exp) is not None
    assert Context.named("shared_name") is mine
    # stacked on the live context of its name: a new layer, without a warning
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer = Context("shared_name", parent=mine)
    assert layer is not mine and layer.parent is mine
    # a redefinition refused (a parent that is not a Context) leaves the context as it was
    ns2 = {"__name__": "gr_redefines_badly"}
    exec("from gpureplace import Context\nctx = Context('bad_parent_ctx')\n", ns2)
    ctx = ns2["ctx"]
    ctx.override(math.exp, lambda x: x * 2.0)
    with pytest.raises(TypeError):
        exec("ctx = Context('bad_parent_ctx', parent='default')", ns2)
    assert ns2["ctx"] is ctx and ctx.lookup(math.exp) is not None


def test_contexts_a_function_makes_are_new_each_time():
    """Only top-level code (a cell, a module) defines a context again: a function that makes a
    context of one name at each call gets a new one each time, the earlier one untouched."""
    def make(factor):
        ctx = Context("made_per_call")
        ctx.override(math.exp, lambda x: x * factor)
        return ctx
    first = make(2.0)
    second = make(3.0)
    assert first is not second
    assert first.lookup(math.exp) is not None and second.lookup(math.exp) is not None
    assert Context.named("made_per_call") is second


def test_a_cell_run_again_redefines_its_own_context_not_a_layer_or_a_functions():
    """A layer stacked later on a context of the same name, or a context of that name a function
    made in between, is not taken for the cell's own context when the cell runs again: the
    kernels holding the cell's context follow the new definition, the layer keeps its own."""
    cell = "ctx = Context('cell_own')\nctx.override(math.exp, lambda x: x * {factor})\n"
    ns = {"__name__": "gr_cell_own", "Context": Context, "math": math}
    exec(cell.format(factor="29.0"), ns)
    own = ns["ctx"]
    exec("layer = Context('cell_own', parent=ctx)\nlayer.override(math.log, lambda x: x)\n"
         "def make():\n    return Context('cell_own')\nmade = make()\n", ns)
    layer, made = ns["layer"], ns["made"]
    assert layer is not own and made is not own and made is not layer

    @cuda.jit(context=own)
    def k(out, x):
        out[0] = math.exp(x[0])
    assert "0d403D000000000000" in k.compile(SIG64).ptx                     # 29.0
    exec(cell.format(factor="31.0"), ns)
    assert ns["ctx"] is own
    assert "0d403F000000000000" in k.compile(SIG64).ptx                     # 31.0
    assert layer.parent is own and layer.lookup(math.log) is not None
    # the layer's own cell run again redefines the layer, stacked on the same context
    exec("layer = Context('cell_own', parent=ctx)\n", ns)
    assert ns["layer"] is layer and layer.parent is own and layer.overrides() == []


def test_a_root_contexts_overrides_are_part_of_its_fingerprint():
    """A context without a parent is the user's, not the built-in table: its overrides are in
    the disk cache's key (two processes overriding differently got one another's PTX)."""
    root = Context("own_root", parent=None)
    root.override(math.cos, libdevice.cos)
    first = root.fingerprint()
    root.override(math.cos, libdevice.sin)
    assert first is not None and root.fingerprint() not in (None, first)
    child = Context("over_root", parent=root)
    before = child.fingerprint()
    root.override(math.cos, libdevice.cos)
    assert child.fingerprint() != before


def test_the_builtin_table_takes_no_overrides():
    with pytest.raises(TypeError, match=r"builtin_context\.override\(\): the built-in table is "
                                        r"gpureplace's own.*gpureplace\.override"):
        gpureplace.builtin_context.override(math.cos, lambda v: v + 100.0)
    before = gpureplace.builtin_context.lookup(math.cos).impl
    with pytest.raises(TypeError, match=r"builtin_context\.remove_override\(\)"):
        gpureplace.builtin_context.remove_override(math.cos)
    assert gpureplace.builtin_context.lookup(math.cos).impl is before
    assert "devicemath.cos" in repr(before)


class _Adder:
    def __call__(self, v):
        return v + 1.0

    def method(self, v):
        return v + 2.0


def test_a_replacement_device_code_cannot_call_is_refused_when_given(ctx):
    import functools

    def add(a, v):
        return v + a

    for impl, what in ((functools.partial(add, 3.0), "a functools.partial"),
                       (_Adder(), "an instance of _Adder"),
                       (_Adder().method, r"a bound method \(.*_Adder\.method\)")):
        with pytest.raises(TypeError, match=r"override\(math\.sin\): the replacement is " + what
                           + r", which device code cannot call; give a function"):
            ctx.override(math.sin, impl)
    assert ctx.overrides() == []
    # what device code can call stays accepted
    for impl in (lambda v: v * 2.0, math.cos, libdevice.sin, np.cos,
                 cuda.jit(device=True)(lambda v: v), numba.njit(lambda v: v)):
        ctx.override(math.sin, impl)


def test_a_context_refuses_options_it_does_not_have():
    with pytest.raises(TypeError, match=r"Context\('fastish'\): unknown option 'fast_math' "
                                        r"\(did you mean fastmath=\?\)"):
        Context("fastish", fast_math=True)
    with pytest.raises(TypeError, match=r"unknown option 'arch' \(compile options such as arch"):
        Context("fastish", arch="sm_80")
    with pytest.raises(KeyError):
        Context.named("fastish")                        # nothing was made


def test_remove_override_says_when_nothing_was_removed(ctx):
    ctx.override(math.sin, lambda v: v, types=("float32",))
    assert "overrides=1" in repr(ctx)
    with pytest.warns(UserWarning, match=r"context 'test' has no untyped override of math\.sin, "
                                         r"nothing removed; it has typed ones for \(float32,\)"):
        assert ctx.remove_override(math.sin) is False
    assert len(ctx.overrides()) == 1
    assert ctx.remove_override(math.sin, types=("float32",)) is True
    assert ctx.overrides() == []


def test_a_misspelt_libdevice_function_is_named_at_its_line():
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        b = x[i] + 1.0
        out[i] = libdevice.sinnf(b)

    with pytest.raises(CompileError) as err:
        k.compile(SIG32)
    assert err.value.lineno == k.py_func.__code__.co_firstlineno + 4
    assert "libdevice has no function __nv_sinnf (did you mean sinf" in str(err.value)
