"""numba-cuda's compile-only entry points as ported code calls them: architecture-specific and
family targets, the errors its tests (and users' ``except`` clauses) expect."""

import pytest

from conftest import assemble
from gpureplace import cuda
from gpureplace.cuda import int32, uint32


@pytest.mark.parametrize("cc, target", [((9, 0, "a"), "sm_90a"), ((10, 0, "f"), "sm_100f"),
                                        ("sm_90a", "sm_90a")])
def test_architecture_specific_and_family_targets(cc, target):
    ptx, _ = cuda.compile_ptx(lambda x: None, (int32,), cc=cc)
    assert f".target {target}\n" in ptx
    assemble(ptx, arch=target)


def test_a_malformed_architecture_names_the_forms():
    with pytest.raises(ValueError, match=r"\(9, 0, 'a'\)"):
        cuda.compile_ptx(lambda: None, (), cc=(9, 0, "b"))


def test_a_kernel_returning_a_value_is_a_type_error():
    def f(x, y):
        return x[0] + y[0]

    for compile_ in (lambda: cuda.compile_ptx(f, (uint32[::1], uint32[::1])),
                     lambda: cuda.compile_all(f, (uint32[::1], uint32[::1]), device=False,
                                              abi="numba")):
        with pytest.raises(TypeError, match="must have void return type") as info:
            compile_()
        assert "returns uint64" in str(info.value) and "write results into" in str(info.value)


def test_the_c_abi_is_refused_for_kernels_when_asked_for():
    def f(x, y):
        return x + y

    for compile_ in (lambda: cuda.compile_ptx(f, (int32, int32), abi="c"),
                     lambda: cuda.compile_all(f, (int32, int32), abi="c", device=False)):
        with pytest.raises(NotImplementedError, match="The C ABI is not supported for kernels"):
            compile_()

    def k(x):
        x[0] = 1
    # not asked for: cuda.compile's default ABI is C for device functions, Numba's for kernels
    ptx, _ = cuda.compile(k, (int32[::1],), device=False)
    assert ".entry k(" in ptx


def test_forced_inlining_is_refused_where_it_needs_lto_ir():
    def set_zero(a):
        a[0] = 0

    with pytest.raises(ValueError, match="Can only designate forced inlining in LTO-IR"):
        cuda.compile(set_zero, (cuda.float32[::1],), device=True, forceinline=True)


def test_descriptor_gives_the_default_contexts_typing_and_target_contexts():
    import enum

    from numba.core import types

    from gpureplace.compiler.target import compilers
    from gpureplace.dispatch.context import current_default

    class Shape(enum.IntEnum):
        circle = 1

    target = cuda.descriptor.cuda_target
    assert (target.typing_context, target.target_context) == compilers(current_default())
    member = types.IntEnumMember(Shape, types.int64)
    assert target.typing_context.can_convert(member, types.int64[::1]) is None
    assert target.typing_context.can_convert(member, types.float64) is not None
