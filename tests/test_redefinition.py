"""Redefinition tracking in plain modules: GPUCompiler.jl's compile-count sequence and Triton's cases.

Each test runs "cells" (source strings) in one fresh module namespace, as a notebook would, and
counts kernel compiles through ``gpureplace.stats()``.
"""

import textwrap
import types

import pytest

import gpureplace
from gpureplace import CompileError, Context

SIG = "void(float64[:])"


class Session:
    def __init__(self, name="cells"):
        self.mod = types.ModuleType(name)
        self.ns = self.mod.__dict__
        import sys
        sys.modules[name] = self.mod

    def run(self, src):
        exec(compile(textwrap.dedent(src), f"<cell-{id(src)}>", "exec"), self.ns)
        gpureplace.refresh()     # what the IPython cell hook does after each cell

    def compile(self, name="kern"):
        return self.ns[name].compile(SIG)


def compiles():
    return gpureplace.stats()["kernel_compiles"]


def test_compile_count_sequence(tmp_path):
    s = Session("seq_cells")
    s.run("""
        from gpureplace import cuda
        import math
        N = 2.0
        def leaf(v):
            return v + 1.0
        def helper(v):
            return leaf(v) * 2.0
        @cuda.jit(device=True)
        def callee(v):
            return helper(v) + N
        def unrelated(v):
            return v
        @cuda.jit
        def kern(out):
            out[0] = callee(out[0]) + math.sin(out[0])
    """)
    c0 = compiles()
    first = s.compile()
    assert compiles() == c0 + 1                                  # first compile
    assert s.compile() is first and compiles() == c0 + 1         # cached
    s.run("""
        @cuda.jit
        def kern(out):
            out[0] = callee(out[0]) + math.sin(out[0]) + 0.5
    """)
    s.compile()
    assert compiles() == c0 + 2                                  # the kernel was redefined
    s.run("def unrelated(v):\n    return v * 3")
    s.compile()
    assert compiles() == c0 + 2                                  # unrelated: nothing recompiles
    s.run("""
        @cuda.jit(device=True)
        def callee(v):
            return helper(v) - N
    """)
    spec = s.compile()
    assert compiles() == c0 + 3                                  # a callee
    assert "sub.rn.f64" in spec.ptx or "add.rn.f64" in spec.ptx
    s.run("def leaf(v):\n    return v + 100.0")
    spec = s.compile()
    assert compiles() == c0 + 4                                  # two levels down, undecorated
    assert "0d4059000000000000" in spec.ptx                     # 100.0 is in the new code
    ctx = gpureplace.default_context
    import math as _m

    def my_sin(x):
        return x * 0.5
    ctx.override(_m.sin, my_sin)
    try:
        spec = s.compile()
        assert compiles() == c0 + 5                              # an override
        assert "__nv_sin" not in spec.llvm_ir
        s.run("N = 3.0")
        s.compile()
        assert compiles() == c0 + 6                              # a frozen global changed
        s.run("N = 3.0")
        s.compile()
        assert compiles() == c0 + 6                              # identical cell: nothing
    finally:
        ctx.remove_override(_m.sin)
    s.compile()
    assert compiles() == c0 + 7                                  # override removed
    fast = Context("fast_seq", fastmath=True)
    s.ns["kern"].with_context(fast).compile(SIG)
    assert compiles() == c0 + 8                                  # another context/option


def test_deleted_callee_raises_naming_it_and_fixing_recompiles():
    s = Session("del_cells")
    s.run("""
        from gpureplace import cuda
        def helper(v):
            return v * 2.0
        @cuda.jit
        def kern(out):
            out[0] = helper(out[0])
    """)
    s.compile()
    s.run("del helper")
    with pytest.raises(CompileError) as info:
        s.compile()
    assert "'helper'" in str(info.value) and "no longer defined" in str(info.value)
    assert info.value.lineno == 7          # the line that uses it
    # still refused, never the old code
    with pytest.raises(CompileError):
        s.compile()
    s.run("def helper(v):\n    return v * 4.0")
    spec = s.compile()
    assert "4.0" in spec.ptx or "0d4010000000000000" in spec.ptx


def test_broken_redefinition_raises_then_fix_recompiles():
    s = Session("broken_cells")
    s.run("""
        from gpureplace import cuda
        def helper(v):
            return v * 2.0
        @cuda.jit
        def kern(out):
            out[0] = helper(out[0])
    """)
    s.compile()
    s.run("def helper(v):\n    return v.no_such_attribute")
    with pytest.raises(CompileError, match="no_such_attribute"):
        s.compile()
    with pytest.raises(CompileError):
        s.compile()
    s.run("def helper(v):\n    return v * 8.0")
    assert "0d4020000000000000" in s.compile().ptx


def test_only_line_numbers_moved_does_not_recompile():
    s = Session("lines_cells")
    s.run("""
        from gpureplace import cuda
        def helper(v):
            return v * 2.0
        @cuda.jit
        def kern(out):
            out[0] = helper(out[0])
    """)
    s.compile()
    c = compiles()
    s.run("\n\n\n\ndef helper(v):\n    return v * 2.0")
    s.compile()
    assert compiles() == c


def test_local_shadowing_a_global_is_not_a_dependency():
    s = Session("shadow_cells")
    s.run("""
        from gpureplace import cuda
        SCALE = 2.0
        @cuda.jit
        def kern(out):
            SCALE = 5.0
            out[0] = out[0] * SCALE
    """)
    s.compile()
    c = compiles()
    s.run("SCALE = 7.0")
    s.compile()
    assert compiles() == c


def test_function_chosen_through_a_global_constant():
    s = Session("choose_cells")
    s.run("""
        from gpureplace import cuda
        def double(v):
            return v * 2.0
        def triple(v):
            return v * 3.0
        OP = double
        @cuda.jit
        def kern(out):
            out[0] = OP(out[0])
    """)
    s.compile()
    c = compiles()
    s.run("OP = triple")
    spec = s.compile()
    assert compiles() == c + 1
    assert "0d4008000000000000" in spec.ptx        # 3.0


def test_unchanged_device_functions_are_not_lowered_again():
    s = Session("incr_cells")
    s.run("""
        from gpureplace import cuda
        def a(v):
            return v + 1.0
        def b(v):
            return v * 2.0
        @cuda.jit
        def kern(out):
            out[0] = a(out[0]) + b(out[0])
    """)
    s.compile()
    d0 = gpureplace.stats()["device_compiles"]
    s.run("def b(v):\n    return v * 5.0")
    s.compile()
    # kern and b are lowered again; a is reused
    assert gpureplace.stats()["device_compiles"] == d0 + 2
