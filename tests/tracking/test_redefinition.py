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

# (they count compiles: a cache left by an earlier run would make some disk hits)
pytestmark = pytest.mark.usefixtures("own_disk_cache")


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
    d0, r0 = gpureplace.stats()["device_compiles"], gpureplace.stats()["relinks"]
    s.run("def b(v):\n    return v * 5.0")
    ptx = s.compile().ptx
    # only b is lowered again; kern keeps its code (its call now reaches the new b); a is reused
    assert gpureplace.stats()["device_compiles"] == d0 + 1
    assert gpureplace.stats()["relinks"] == r0 + 1
    assert "0d4014000000000000" in ptx                     # 5.0: the new b is in the kernel


def _counts():
    st = gpureplace.stats()
    return st["device_compiles"], st["relinks"], st["kernel_compiles"]


def test_relinked_callers_through_a_chain_run_the_new_leaf():
    s = Session("relink_chain")
    s.run("""
        from gpureplace import cuda
        def leaf(v):
            return v + 3.0
        def mid(v):
            return leaf(v) * 7.0
        @cuda.jit
        def kern(out):
            out[0] = mid(out[0])
    """)
    s.compile()
    d0, r0, k0 = _counts()
    s.run("def leaf(v):\n    return v + 11.0")
    ptx = s.compile().ptx
    d1, r1, k1 = _counts()
    assert (d1 - d0, r1 - r0, k1 - k0) == (1, 2, 1)       # leaf compiled; mid and kern relinked
    assert "0d4026000000000000" in ptx and "0d4008000000000000" not in ptx   # 11.0, not 3.0
    # the relinked kernel's records follow the new leaf: a further change is noticed too
    s.run("def leaf(v):\n    return v + 13.0")
    assert "0d402A000000000000" in s.compile().ptx.upper().replace("0D", "0d")
    # a new callee graph under the redefined function is linked in
    s.run("def twice(v):\n    return v * 2.5\ndef leaf(v):\n    return twice(v)")
    assert "0d4004000000000000" in s.compile().ptx          # 2.5 from twice


def test_a_callee_whose_return_type_changes_retypes_its_callers():
    s = Session("relink_retype")
    s.run("""
        from gpureplace import cuda
        def pick(v):
            return v * 2.0
        @cuda.jit
        def kern(out):
            out[0] = pick(out[0])
    """)
    s.compile()
    d0, r0, _ = _counts()
    s.run("def pick(v):\n    return 3")                    # now an int: kern must be retyped
    spec = s.compile()
    d1, r1, _ = _counts()
    assert r1 == r0 and d1 - d0 == 2
    assert "int" in s.ns["kern"].inspect_types(SIG).split("def pick", 1)[0]
    assert str(0x4008000000000000) in spec.ptx               # stores the bits of 3.0


def test_cuda_jit_device_callees_are_relinked_too():
    # what %%cuda cells make of every function
    s = Session("relink_device")
    s.run("""
        from gpureplace import cuda
        @cuda.jit(device=True)
        def leaf(v):
            return v + 3.0
        @cuda.jit(device=True)
        def mid(v):
            return leaf(v) * 7.0
        @cuda.jit
        def kern(out):
            out[0] = mid(out[0])
    """)
    s.compile()
    d0, r0, _ = _counts()
    s.run("@cuda.jit(device=True)\ndef leaf(v):\n    return v + 11.0")
    ptx = s.compile().ptx
    d1, r1, _ = _counts()
    assert (d1 - d0, r1 - r0) == (1, 2)
    assert "0d4026000000000000" in ptx and "0d4008000000000000" not in ptx
    # device code calls a cuda.jit kernel object like a device function: relinked the same way
    s.run("@cuda.jit\ndef leaf(v):\n    return v + 12.0")
    assert "0d4028000000000000" in s.compile().ptx


def test_a_callee_with_a_new_default_argument_is_not_relinked():
    s = Session("relink_defaults")
    s.run("""
        from gpureplace import cuda
        def g(v, k=2.0):
            return v * k
        @cuda.jit
        def kern(out):
            out[0] = g(out[0])
    """)
    s.compile()
    r0 = gpureplace.stats()["relinks"]
    s.run("def g(v, k=9.0):\n    return v * k")      # the caller folds the default anew
    ptx = s.compile().ptx
    assert gpureplace.stats()["relinks"] == r0
    assert "0d4022000000000000" in ptx                     # 9.0


def test_relink_is_refused_when_the_new_function_resolves_to_an_override():
    s = Session("relink_override")
    s.run("""
        from gpureplace import cuda, Context
        def f(v):
            return v + 1.0
        @cuda.jit
        def kern(out):
            out[0] = f(out[0])
    """)
    s.compile()
    s.run("""
        def f(v):
            return v + 2.0
        def f_fast(v):
            return v + 17.0
        gpureplace_ctx = kern.context
        gpureplace_ctx.override(f)(f_fast)
    """)
    try:
        ptx = s.compile().ptx
        assert "0d4031000000000000" in ptx                 # 17.0: the override of the new f
    finally:
        # (the default context outlives the test: a later one pickles it whole, and a worker
        # process cannot import this made-up module)
        s.ns["gpureplace_ctx"].remove_override(s.ns["f"])


@pytest.mark.gpu
@pytest.mark.gpu_only    # device printf through the CUDA driver, in a subprocess
def test_seed_scenario_redefined_callee_stores_and_prints_the_new_value(tmp_path):
    """A kernel calls doit(ptr), which stores and prints; doit is redefined; the next launch
    stores and prints the new value (run in a subprocess to read the device's printf)."""
    import subprocess
    import sys
    code = textwrap.dedent("""
        import cupy as cp
        import gpureplace
        from gpureplace import cuda
        ns = {"cuda": cuda}
        exec("def doit(ptr):\\n    ptr[0] = 1\\n    print('doit stores', 1)", ns)
        exec("@cuda.jit\\ndef kern(ptr):\\n    doit(ptr)", ns)
        a = cp.zeros(1, dtype=cp.int64)
        ns["kern"][1, 1](a)
        cp.cuda.runtime.deviceSynchronize()
        print("host sees", int(a[0]), flush=True)
        exec("def doit(ptr):\\n    ptr[0] = 2\\n    print('doit stores', 2)", ns)
        gpureplace.refresh()
        ns["kern"][1, 1](a)
        cp.cuda.runtime.deviceSynchronize()
        print("host sees", int(a[0]), flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    assert lines == ["doit stores 1", "host sees 1", "doit stores 2", "host sees 2"], lines


@pytest.mark.gpu
def test_launches_from_threads_while_redefining_never_run_stale_code():
    import threading

    import cupy as cp
    s = Session("thread_cells")
    s.run("""
        from gpureplace import cuda
        VALUE = 1
        @cuda.jit
        def kern(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = VALUE
    """)
    errors = []
    outs = [cp.zeros(256, dtype=cp.int64) for _ in range(4)]

    def worker(out):
        try:
            for _ in range(50):
                s.ns["kern"][1, 256](out)
        except Exception as exc:        # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(o,)) for o in outs]
    for t in threads:
        t.start()
    for v in range(2, 6):
        s.run(f"VALUE = {v}")
    for t in threads:
        t.join()
    assert not errors
    # after the last redefinition, every launch uses the last value
    for o in outs:
        s.ns["kern"][1, 256](o)
    cp.cuda.runtime.deviceSynchronize()
    assert all(int(o.min()) == 5 == int(o.max()) for o in outs)
