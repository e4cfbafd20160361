"""Call types kept per typing context (compiler/call_types.py): Numba's templates are asked once
per function and argument types; the answers, the code and the dependencies recorded are the
same as when every question goes to the templates; answers that resolved a value through the
dispatch context or compiled something are never kept; a registry added drops them all."""

import math
import operator
import re

import pytest
from numba.core import types as nbt
from numba.core.typing.templates import AbstractTemplate, Registry, signature

import gpureplace
from gpureplace import CompileError, cuda
from gpureplace.compiler import call_types
from gpureplace.compiler.target import compilers
from numba.extending import overload as numba_overload

SIG = (nbt.float32[::1], nbt.float32[::1], nbt.float32)


def _kernel(n):
    src = (f"def k_{n}(x, y, a):\n"
           f"    i = cuda.grid(1)\n"
           f"    if i < x.size:\n"
           f"        x[i] = x[i] + y[i] * a + {n}.0\n")
    ns = {"cuda": cuda}
    exec(src, ns)
    return cuda.jit(ns[f"k_{n}"])


@pytest.fixture
def asked(monkeypatch):
    """The (function type, argument types) Numba's templates are asked about."""
    seen = []
    numbas = call_types._numba_get_call_type

    def counting(self, context, args, kws):
        seen.append((self, tuple(args)))
        return numbas(self, context, args, kws)
    monkeypatch.setattr(call_types, "_numba_get_call_type", counting)
    return seen


def _add(seen):
    return [args for fnty, args in seen if fnty.typing_key is operator.add]


def test_templates_are_asked_once_per_function_and_types(asked):
    _kernel(0).compile(SIG)          # (a process's first lowering may install registries)
    compilers(gpureplace.default_context)[0].call_types.clear()
    del asked[:]
    first = _kernel(1)
    first.compile(SIG)
    assert (nbt.float32, nbt.float32) in _add(asked), asked
    del asked[:]
    second = _kernel(2)
    second.compile(SIG)
    # the same operations in a new kernel: answered from what the context kept
    assert not _add(asked), asked
    assert "add.f32" in second.inspect_asm(SIG) or "fma.rn.f32" in second.inspect_asm(SIG)


def test_code_is_the_same_as_with_every_question_asked(monkeypatch):
    kept = _kernel(3)
    kept.compile(SIG)
    kept_ptx = _kernel(4)
    kept_ptx.compile(SIG)
    monkeypatch.setattr(call_types.CallTypes, "answer",
                        lambda self, func, args, kws, ask, fnty=None: ask())
    asked = _kernel(4)
    asked.compile(SIG)
    def same(text):                  # (the mangled names number each definition)
        return re.sub(r"B\d+v\d+B", "BvB", text)
    assert same(kept_ptx.inspect_asm(SIG)) == same(asked.inspect_asm(SIG))
    assert same(kept_ptx.inspect_llvm(SIG)) == same(asked.inspect_llvm(SIG))


def test_an_answer_sets_the_implementation_lowering_uses_again():
    typingctx, _ = compilers(gpureplace.default_context)
    add = typingctx.resolve_value_type(operator.add)
    sig = typingctx.resolve_function_type(add, (nbt.float32, nbt.float64), {})
    impl = add._impl_keys[sig.args]
    add._impl_keys[sig.args] = "something else"          # another answer's, meanwhile
    again = typingctx.resolve_function_type(add, (nbt.float32, nbt.float64), {})
    assert again == sig and add._impl_keys[sig.args] == impl


def test_an_added_registry_drops_the_kept_answers(asked):
    typingctx, _ = compilers(gpureplace.default_context)
    add = typingctx.resolve_value_type(operator.add)
    typingctx.resolve_function_type(add, (nbt.int16, nbt.int64), {})
    del asked[:]
    typingctx.resolve_function_type(add, (nbt.int16, nbt.int64), {})
    assert not asked
    typingctx.install_registry(Registry())
    typingctx.resolve_function_type(add, (nbt.int16, nbt.int64), {})
    assert asked


def halved(x):
    raise NotImplementedError("host stand-in")


def test_a_failed_question_is_not_kept_and_a_template_registered_later_answers_it():
    from numba.core.imputils import Registry as LoweringRegistry

    ctx = gpureplace.Context("call-types-halved")    # (its own typing and target contexts)

    @cuda.jit
    def uses_halved(x, y, a):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = halved(y[i]) + a

    with pytest.raises(CompileError):
        uses_halved.with_context(ctx).compile(SIG)
    typing_registry, lowering = Registry(), LoweringRegistry()

    @typing_registry.register_global(halved)
    class _Halved(AbstractTemplate):
        def generic(self, args, kws):
            if len(args) == 1 and isinstance(args[0], nbt.Float):
                return signature(args[0], *args)

    @lowering.lower(halved, nbt.Float)
    def _lower(context, builder, sig, args):
        return builder.fmul(args[0], context.get_constant(sig.args[0], 0.5))
    typingctx, targetctx = compilers(ctx)
    typingctx.install_registry(typing_registry)
    targetctx.install_registry(lowering)

    @cuda.jit
    def uses_halved_again(x, y, a):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = halved(y[i]) + a

    spec = uses_halved_again.with_context(ctx).compile(SIG)
    assert "0f3F000000" in spec.ptx                                # * 0.5f


def tenfold(x):
    raise NotImplementedError("host stand-in")


@numba_overload(tenfold, target="gpureplace")
def _ol_tenfold(x):
    if isinstance(x, nbt.Float):
        return lambda x: x * 10.0


def test_answers_that_compile_are_not_kept_and_each_caller_keeps_its_callee():
    # Numba's own @overload for gpureplace's target: its template compiles the implementation
    # as a device function, which the caller's frame records; that answer is never kept.
    @cuda.jit
    def one(x, y, a):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = tenfold(y[i])

    @cuda.jit
    def two(x, y, a):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = tenfold(y[i]) + a

    specs = [one.compile(SIG), two.compile(SIG)]
    typingctx, _ = compilers(gpureplace.default_context)
    for func, _args, _kws in typingctx.call_types._entries:
        assert getattr(func, "typing_key", None) is not tenfold
    for spec in specs:
        assert "<lambda>" in [cf.pyfunc.__name__ for cf in spec.compiled.closure()], spec


def test_an_override_is_recorded_by_every_kernel_that_reads_it():
    # (values resolve through the dispatch context before any call type is asked)
    ctx = gpureplace.Context("call-types-hypot")

    def my_hypot(a, b):
        return math.sqrt(a * a + b * b) + 1.0
    ctx.override(math.hypot, my_hypot)
    for n in range(2):
        ns = {"cuda": cuda, "math": math}
        exec(f"def h_{n}(x, y, a):\n    i = cuda.grid(1)\n    if i < x.size:\n"
             f"        x[i] = math.hypot(y[i], a) + {n}.0\n", ns)
        spec = cuda.jit(ns[f"h_{n}"]).with_context(ctx).compile(SIG)
        assert any(host is math.hypot for host, _ in spec.compiled.overrides_used), n


def test_an_operator_override_added_later_is_not_answered_from_kept_call_types():
    # x[1] + x[2] was typed (and its answer kept) before the context overrode operator.add;
    # the recompile and a new kernel take the override (values resolve through the context).
    ctx = gpureplace.Context("call-types-operator")

    def body(x):
        x[0] = x[1] + x[2]
    first = cuda.jit(body).with_context(ctx)
    before = first.compile("void(float32[:])")
    assert re.findall(r"(add|sub)\.f32", before.ptx) == ["add"]
    ctx.override(operator.add, lambda a, b: a - b)
    gpureplace.refresh()
    assert re.findall(r"(add|sub)\.f32", first.compile("void(float32[:])").ptx) == ["sub"]

    def body2(x):
        x[0] = x[1] + x[2]
    again = cuda.jit(body2).with_context(ctx).compile("void(float32[:])")
    assert re.findall(r"(add|sub)\.f32", again.ptx) == ["sub"]
