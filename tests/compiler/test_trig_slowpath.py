"""libdevice's trigonometric reduction compiled once (compiler/trig_slowpath.py): a kernel without
loops gets the reduction's PTX .func spliced in; a kernel with a loop, a float kernel, and fast
math / debug / line-information compiles keep it inlined; the PTX assembles; on a GPU the
results equal NumPy's for huge arguments (where the reduction runs) as for small ones."""

import math
import re

import numpy as np
import pytest

from conftest import assemble
from gpureplace import cuda
from gpureplace.compiler import libdevice_link, trig_slowpath

F64 = "void(float64[::1], float64[::1])"
F64_N = "void(float64[::1], float64[::1], int64)"
CALL = re.compile(r"^\s*call", re.M)
DEFINED = re.compile(r"^\.func\b[^\n]*\b__internal_trig_reduction_slowpathd\b", re.M)


def _single(x, o):
    i = cuda.grid(1)
    if i < o.size:
        o[i] = math.sin(x[i])


def _two(x, o):
    i = cuda.grid(1)
    if i < o.size:
        o[i] = math.cos(x[i]) + math.tan(x[i] * 0.5)


def _looped(x, o):
    i = cuda.grid(1)
    if i < o.size:
        acc = 0.0
        for k in range(3):
            acc += math.sin(x[i] + k)
        o[i] = acc


def _helper(v):
    return math.sin(v)


def _loop_around_a_helper(x, o):
    for i in range(cuda.grid(1), o.size, cuda.gridsize(1)):
        o[i] = _helper(x[i])


def _branches_inside(x, o, n):
    """No loop, but integer // and % and a conditional expression: Numba's lowering adds
    if/else blocks inside its own blocks (B66.endif.else ...), laid out after all of them."""
    i = cuda.grid(1)
    if i < o.size:
        j = (i * 7) // n
        v = x[i] if j % 3 else -x[i]
        o[i] = math.sin(v) + abs(j)


def _while_halving(x, o, n):
    i = cuda.grid(1)
    if i < o.size:
        s = n
        acc = 0.0
        while s > 0:
            acc += math.cos(x[i] * s)
            s //= 2
        o[i] = acc


def _looping_helper(v, n):
    acc = 0.0
    for k in range(n):
        acc += v * k
    return acc


def _loop_in_a_callee(x, o, n):
    i = cuda.grid(1)
    if i < o.size:
        o[i] = math.sin(_looping_helper(x[i], n))


def _fresh(fn):
    """A new function object each time (the compile is not served from any cache)."""
    import types
    g = dict(fn.__globals__)
    copy = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    return copy


@pytest.mark.parametrize("fn", [_single, _two])
def test_a_kernel_without_loops_gets_the_reduction_compiled_once(fn):
    ptx = cuda.jit(_fresh(fn)).compile(F64, arch="sm_90").ptx
    assert len(DEFINED.findall(ptx)) == 1
    assert ".extern" not in ptx and CALL.search(ptx)
    assert "__internal_trig_reduction_slowpathd" in ptx.split(".entry", 1)[1]   # called there
    assemble(ptx)


def test_branches_the_lowering_adds_are_not_loops():
    ptx = cuda.jit(_fresh(_branches_inside)).compile(F64_N, arch="sm_90").ptx
    assert len(DEFINED.findall(ptx)) == 1
    assemble(ptx)


@pytest.mark.parametrize("fn, sig", [(_looped, F64), (_loop_around_a_helper, F64),
                                     (_while_halving, "F64_N"), (_loop_in_a_callee, "F64_N")])
def test_a_kernel_with_a_loop_keeps_it_inlined(fn, sig):
    sig = F64_N if sig == "F64_N" else sig
    ptx = cuda.jit(_fresh(fn)).compile(sig, arch="sm_90").ptx
    assert "__internal_trig_reduction_slowpathd" not in ptx
    assert not CALL.search(ptx.split(".entry", 1)[1])
    assemble(ptx)


@pytest.mark.parametrize("options", [{"fastmath": True}, {"lineinfo": True}, {"debug": True,
                                                                               "opt": False}])
def test_fast_math_and_debug_compiles_keep_it_inlined(options):
    ptx = cuda.jit(_fresh(_single), **options).compile(F64, arch="sm_90").ptx
    assert not DEFINED.findall(ptx)
    assemble(ptx)


def test_float_kernels_are_untouched():
    ptx = cuda.jit(_fresh(_single)).compile("void(float32[::1], float32[::1])",
                                            arch="sm_90").ptx
    assert "__internal_trig_reduction_slowpathd" not in ptx


def test_the_reduction_is_reached_only_from_the_double_trigonometry():
    assert libdevice_link.reaches("__nv_sin", trig_slowpath.SLOWPATH)
    assert libdevice_link.reaches("__nv_sincos", trig_slowpath.SLOWPATH)
    assert not libdevice_link.reaches("__nv_sinf", trig_slowpath.SLOWPATH)
    assert not libdevice_link.reaches("__nv_exp", trig_slowpath.SLOWPATH)


LOOP = '''define i32 @f(i32 %n) {
entry:
  br label %"B0"
B0:
  %c = icmp slt i32 %n, 3
  br i1 %c, label %"B0.body", label %"B9"
"B0.body":
  br label %"B0"
B9:
  ret i32 0
}
'''
NO_LOOP = '''define i32 @f(i32 %n) {
entry:
  switch i32 %n, label %"B2" [i32 0, label %"B1"
      i32 1, label %"B3"]
B1:
  br label %"B3"
B2:
  br label %"B3"
B3:
  ret i32 0
}
'''
SWITCH_BACK = NO_LOOP.replace('B2:\n  br label %"B3"', 'B2:\n  switch i32 %n, label %"B3" '
                                                    '[i32 7, label %"B1"]')


ADDED_BLOCKS = '''define i32 @f(i32 %n) {
entry:
  br label %"B0"
B0:
  br i1 %c, label %"B0.if", label %"B0.endif"
B40:
  ret i32 0
"B0.if":
  br label %"B0.endif"
"B0.endif":
  br label %"B40"
"for.cond":
  br i1 %c, label %"for.body", label %"for.end"
"for.body":
  br label %"for.cond"
"for.end":
  ret i32 1
}
'''


def test_loops_are_found_in_ir_text():
    assert trig_slowpath.has_loop([LOOP])
    assert not trig_slowpath.has_loop([NO_LOOP])
    assert trig_slowpath.has_loop([SWITCH_BACK])
    assert trig_slowpath.has_loop(["; header\n", NO_LOOP, LOOP])
    # blocks the lowering adds inside B0 go forward from B0's place; its own loops count
    without_for = ADDED_BLOCKS.split('"for.cond"')[0] + "}\n"
    assert not trig_slowpath.has_loop([without_for])
    assert trig_slowpath.has_loop([ADDED_BLOCKS])


def test_splice_refuses_what_it_cannot_place():
    body = ".global .align 8 .b8 table[8];\n.func (.param .b64 r) " \
           "__internal_trig_reduction_slowpathd(.param .b64 a)\n{\nret;\n}\n"
    assert trig_slowpath.splice(".entry k()\n{\nret;\n}\n", body) is None    # no declaration
    declared = (".extern .func  (.param .b64 r) __internal_trig_reduction_slowpathd\n(\n"
                "\t.param .b64 a\n)\n;\n.entry k()\n{\nret;\n}\n")
    assert trig_slowpath.splice(".global .align 8 .b8 table[8];\n" + declared, body) is None
    assert trig_slowpath.splice(".visible .global .align 8 .b8 table[8];\n" + declared,
                                body) is None
    spliced = trig_slowpath.splice(declared, body)
    assert spliced.startswith(body) and ".extern" not in spliced


def test_a_splice_that_cannot_be_made_compiles_the_kernel_inlined(monkeypatch):
    from gpureplace.compiler import diskcache
    monkeypatch.setattr(diskcache, "enabled", False)       # (not the spliced kernel of a test above)
    monkeypatch.setattr(trig_slowpath, "splice", lambda ptx, body: None)
    spec = cuda.jit(_fresh(_single)).compile(F64, arch="sm_90")
    assert "__internal_trig_reduction_slowpathd" not in spec.ptx
    assert not re.search(r"^(declare|define)[^\n]*@__internal_trig_reduction_slowpathd\(",
                         spec.llvm_ir, re.M)                         # inlined: no function left
    assemble(spec.ptx)


@pytest.mark.gpu
@pytest.mark.gpu_only          # (the compiled code itself, which the simulator does not run)
@pytest.mark.parametrize("fn", [_single, _looped])
def test_results_equal_numpys_for_huge_and_small_arguments(fn):
    import cupy as cp
    x = np.concatenate([np.linspace(-10.0, 10.0, 1000),
                        np.array([2.0 ** 31, -(2.0 ** 31) - 3.5, 1e10, -3e15, 1e22, 1e300,
                                  -1.7976931348623157e308, 123456789.123])])
    k = cuda.jit(_fresh(fn))
    xd = cp.asarray(x)
    out = cp.empty_like(xd)
    k[(x.size + 127) // 128, 128](xd, out)
    got = cp.asnumpy(out)
    if fn is _single:
        want = np.sin(x)
    else:
        want = sum(np.sin(x + k) for k in range(3))
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
    spliced = bool(DEFINED.findall(k.overloads[next(iter(k.overloads))].ptx))
    assert spliced == (fn is _single)
