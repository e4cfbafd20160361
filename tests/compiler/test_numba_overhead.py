"""The lean pieces of compiler/numba_overhead.py answer as Numba's would: flags compare and hash
alike, pass errors keep Numba's context, pass timings and Numba's compiler events still work,
ABI sizes and the ``loc`` question are the same answers."""

import numba.core.event as nb_event
import numpy as np
import pytest
from llvmlite import ir
from numba.core.compiler import Flags

from gpureplace import cuda
from gpureplace.compiler import backend, frontend, numba_overhead
from gpureplace.errors import CompileError

SIG = "void(float32[::1], float32)"


def _flags(cls, **set_):
    f = cls()
    for k, v in set_.items():
        setattr(f, k, v)
    return f


@pytest.mark.parametrize("settings", [{}, {"no_compile": True}, {"no_compile": True,
                                                                  "error_model": "python",
                                                                  "fastmath": True}])
def test_flags_values_hash_and_equality_are_numbas(settings):
    ours, numbas = _flags(numba_overhead.GPUFlags, **settings), _flags(Flags, **settings)
    assert ours.values() == numbas.values()
    assert hash(ours) == hash(numbas)
    assert ours == numbas and numbas == ours
    assert ours == ours.copy() and isinstance(ours.copy(), numba_overhead.GPUFlags)
    other = _flags(numba_overhead.GPUFlags, **settings)
    other.debuginfo = not ours.debuginfo
    assert ours != other and other.values() != ours.values()
    # a value set to its default equals one left unset, as with Numba's flags
    explicit = _flags(numba_overhead.GPUFlags, **settings)
    explicit.boundscheck = Flags.options["boundscheck"].default
    assert explicit == ours


def test_flags_in_a_dict_key_find_numbas():
    key = {(1, _flags(Flags, no_compile=True)): "x"}
    assert key[(1, _flags(numba_overhead.GPUFlags, no_compile=True))] == "x"


def test_abi_sizes_are_llvms():
    td = backend.target_data()
    for ty in (ir.IntType(8), ir.IntType(64), ir.FloatType(), ir.DoubleType(),
               ir.LiteralStructType([ir.IntType(8), ir.DoubleType(), ir.IntType(32)]),
               ir.ArrayType(ir.FloatType(), 7), ir.IntType(8).as_pointer()):
        assert numba_overhead.abi_sizeof(td, ty) == ty.get_abi_size(td)
        assert numba_overhead.abi_sizeof(td, ty) == ty.get_abi_size(td)   # from the cache


def test_has_loc_answers_per_function():
    def with_loc(context, builder, sig, args, loc=None):
        pass

    def without(context, builder, sig, args):
        pass

    for _ in range(2):
        assert numba_overhead._has_loc(with_loc) is True
        assert numba_overhead._has_loc(without) is False
    import numba.core.base as nb_base
    assert nb_base._has_loc is numba_overhead._has_loc      # installed with the front end


def _kernel(body):
    ns = {"cuda": cuda, "np": np}
    exec("def k(x, a):\n    i = cuda.grid(1)\n" + body, ns)
    return cuda.jit(ns["k"])


def test_a_typing_error_still_names_the_line_and_compiles_after():
    k = _kernel("    if i < x.size:\n        x[i] = a + 'text'\n")
    with pytest.raises(CompileError) as info:
        k.compile(SIG)
    assert "line 4" in str(info.value) or ":4" in str(info.value)
    ok = _kernel("    if i < x.size:\n        x[i] = a * 2\n")
    assert ".entry" in ok.compile(SIG).ptx


def test_numba_event_listeners_still_hear_every_pass():
    heard = []

    class Listener(nb_event.Listener):
        def on_start(self, event):
            heard.append(event.data["name"])

        def on_end(self, event):
            pass

    k = _kernel("    if i < x.size:\n        x[i] = a\n")
    with nb_event.install_listener("numba:run_pass", Listener()):
        k.compile(SIG)
    assert any(name.startswith("nopython_type_inference") for name in heard)
    assert any(name.startswith("gpureplace_lowering") for name in heard)


def test_pass_timings_recorded_without_listeners(monkeypatch):
    seen = {}
    original = frontend.GPUPipeline.compile_extra

    def keep(self, func):
        try:
            return original(self, func)
        finally:
            seen.update(self.state.metadata.get("pipeline_times", {}).get("gpureplace", {}))

    monkeypatch.setattr(frontend.GPUPipeline, "compile_extra", keep)
    _kernel("    if i < x.size:\n        x[i] = a - 1\n").compile(SIG)
    names = [k.split("_", 1)[1] for k in seen]
    assert "nopython_type_inference" in names and "gpureplace_lowering" in names
    assert all(t.run >= 0 for t in seen.values())


# -- list_vars: the same variables, in the same order, as Numba's own walk -------------------------

def _shapes(x, y, n):
    total = 0.0
    for i in range(n):
        a, b = x[i], y[i:i + 2]
        total += a * b[0] if a > 0 else -a
    return total, (x[1], n)


def _calls(x, k=3, *rest):
    def inner(v, w=2):
        return v + w + k
    s = 0
    for v in rest:
        s += inner(v, w=1)
    while s > 10:
        s //= 2
    return [inner(x), {"a": k}, {k, 1}], print(s, x, sep="")


def _generator(n):
    for i in range(n):
        yield i * 2


def _numbas(inst):
    """Numba's own answer: its ``list_vars`` as it was before install(), all the way down."""
    from numba.core import ir as nir
    ours = nir.Inst._rec_list_vars, nir.Stmt.list_vars, nir.Expr.list_vars
    nir.Inst._rec_list_vars = numba_overhead._numba_rec_list_vars
    nir.Stmt.list_vars = numba_overhead._numba_stmt_list_vars
    nir.Expr.list_vars = numba_overhead._numba_expr_list_vars
    try:
        return inst.list_vars()
    finally:
        nir.Inst._rec_list_vars, nir.Stmt.list_vars, nir.Expr.list_vars = ours


@pytest.mark.parametrize("pyfunc", [_shapes, _calls, _generator])
def test_list_vars_are_numbas_for_every_instruction(pyfunc):
    from numba.core import ir as nir
    from numba.core.compiler import run_frontend
    assert nir.Stmt.list_vars is numba_overhead._stmt_list_vars   # installed by the front end
    func_ir = run_frontend(pyfunc)
    seen = 0
    for block in func_ir.blocks.values():
        for stmt in block.body:
            for inst in [stmt] + [v for v in vars(stmt).values() if isinstance(v, nir.Inst)]:
                ours = inst.list_vars()
                assert ours == _numbas(inst)
                assert [id(v) for v in ours] == [id(v) for v in _numbas(inst)]
                seen += len(ours)
    assert seen > 10


def test_list_vars_of_an_instruction_with_its_own_method_nested_in_containers():
    from numba.core import ir as nir
    scope = nir.Scope(None, nir.Loc("f.py", 1))
    loc = nir.Loc("f.py", 1)
    a, b, c = (scope.redefine(name, loc) for name in "abc")

    class Own(nir.Stmt):                   # a statement listing only what it chooses
        def __init__(self, keep, skip):
            self.keep, self.skip, self.loc = keep, skip, loc

        def list_vars(self):
            return [self.keep]

    class Holder(nir.Stmt):                # Numba's generic walk over its attributes
        def __init__(self):
            self.items = {"x": [a, (Own(b, c), nir.Yield(c, loc, 0))], "y": "text", "z": 3}
            self.loc = loc

    holder = Holder()
    assert holder.list_vars() == [a, b, c]
    assert holder.list_vars() == _numbas(holder)


# -- post-processing: analyses left lazy inside our passes -----------------------------------------

POST_KERNELS = {
    "loops": "    s = 0.0\n    for j in range(i, x.size, 7):\n        if x[j] > a:\n"
             "            s += x[j]\n        else:\n            s -= a\n"
             "    while s > 100.0:\n        s = s / 2.0\n    if i < x.size:\n        x[i] = s\n",
    "tuples": "    t = (1, 2.5, 3)\n    s = 0.0\n    for v in literal_unroll(t):\n        s += v\n"
              "    if i < x.size:\n        x[i] = s * a\n",
    "closure": "    def inner(v):\n        return v * a + 1.0\n    if i < x.size:\n"
               "        x[i] = inner(x[i])\n",
    "break": "    for j in range(10):\n        if j * a > 3.0:\n            break\n"
             "    if i < x.size:\n        x[i] = j\n",
}


def _compiled(body, name):
    import re
    from numba import literal_unroll
    ns = {"cuda": cuda, "np": np, "literal_unroll": literal_unroll}
    exec(f"def {name}(x, a):\n    i = cuda.grid(1)\n" + body, ns)
    spec = cuda.jit(ns[name]).compile(SIG)
    # (what differs: the function's name, the unique number in each mangled name, and the
    # process-wide numbers of the exceptions a function may raise)
    ir_text = re.sub(r"_ZN[\w$.]*", "M", spec.compiled.ir_texts()[0])
    return spec.ptx.replace(name, "K"), re.sub(r"ret i32 [1-9]\d*", "ret i32 N", ir_text)


@pytest.mark.parametrize("which", sorted(POST_KERNELS))
def test_lean_post_processing_gives_numbas_code(which, monkeypatch):
    from numba.core import postproc
    assert postproc.PostProcessor.run is numba_overhead._post_process      # installed
    calls = []
    lean = numba_overhead._post_process

    def counting(self, *args, **kws):
        calls.append(getattr(numba_overhead._lean, "on", False))
        return lean(self, *args, **kws)

    monkeypatch.setattr(postproc.PostProcessor, "run", counting)
    ours = _compiled(POST_KERNELS[which], f"lean_{which}")
    assert any(calls)                       # some post-processing was lean
    monkeypatch.setattr(postproc.PostProcessor, "run", numba_overhead._numba_post_process)
    numbas = _compiled(POST_KERNELS[which], f"numb_{which}")
    assert ours[0] == numbas[0]
    assert ours[1].split("\n", 1)[1] == numbas[1].split("\n", 1)[1]   # (after the module id)


def test_block_entry_vars_are_numbas_when_read():
    from numba.core import postproc
    from numba.core.compiler import run_frontend

    def f(x, n):
        s = 0
        for i in range(n):
            if x[i] > 5:
                continue
            if x[i] > 0:
                s += x[i]
            else:
                t = x[i] * 2
                s -= t
        return s

    eager, lazy = run_frontend(f), run_frontend(f)
    for func_ir in (eager, lazy):          # blocks out of order, as after some rewrites
        func_ir.blocks = dict(reversed(list(func_ir.blocks.items())))
    numba_overhead._numba_post_process(postproc.PostProcessor(eager))
    numba_overhead._lean.on = True
    try:
        numba_overhead._post_process(postproc.PostProcessor(lazy))
    finally:
        numba_overhead._lean.on = False
    assert isinstance(lazy.block_entry_vars, numba_overhead._EntryVars)
    assert list(eager.blocks) == list(lazy.blocks)
    for offset in eager.blocks:
        assert eager.get_block_entry_vars(eager.blocks[offset]) == \
            lazy.get_block_entry_vars(lazy.blocks[offset])
    assert lazy.variable_lifetime.livemap == eager.variable_lifetime.livemap
    copied = lazy.copy()                    # (a copy keeps each block's entry)
    assert all(block in copied.block_entry_vars for block in copied.blocks.values())


def test_the_closure_inliner_runs_only_where_there_may_be_something_to_inline(monkeypatch):
    """Numba's closure inliner is skipped for code with no nested function and none of the calls
    it rewrites; where there is one, it still inlines (the results show it) and runs."""
    import functools

    from numba.core.inline_closurecall import InlineClosureCallPass

    ran = []
    real = InlineClosureCallPass.run
    monkeypatch.setattr(InlineClosureCallPass, "run",
                        lambda self: ran.append(self.func_ir.func_id.func_name) or real(self))

    @cuda.jit
    def plain(out, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = out[i] * a

    def inner_add(x, y):
        return x + y

    @cuda.jit
    def with_closure(out, a):
        def scaled(v):
            return v * a
        i = cuda.grid(1)
        if i < out.size:
            out[i] = scaled(out[i]) + 3.0

    @cuda.jit
    def with_reduce(out, a):
        out[0] = functools.reduce(inner_add, out, a)

    for kernel in (plain, with_closure):
        kernel.compile(SIG)
    with pytest.raises(CompileError, match="reduce"):    # (device code has no reduce)
        with_reduce.compile(SIG)
    assert "plain" not in ran and {"with_closure", "with_reduce"} <= set(ran)
    x = np.ones(4, np.float32)
    with_closure[1, 4](x, np.float32(2.0))
    assert x.tolist() == [5.0] * 4


def test_llvm_lock_events_are_made_only_for_listeners():
    import llvmlite.binding as llvm

    class Counting(nb_event.Listener):
        def __init__(self):
            self.started = self.ended = 0

        def on_start(self, event):
            self.started += 1

        def on_end(self, event):
            self.ended += 1

    # Numba's own callbacks (an event made and broadcast around every call into LLVM) are ours
    names = [enter.__qualname__ for enter, _ in llvm.ffi.lib._lock._cblist]
    assert "_initialize_llvm_lock_event.<locals>.enter_fn" not in names
    assert "_lock_entered" in names
    made = []
    real_start = nb_event.start_event
    nb_event.start_event = lambda kind, data=None: (made.append(kind), real_start(kind, data))
    try:
        cuda.jit(lambda x, a: None).compile(SIG)                  # nobody listens: none made
        assert "numba:llvm_lock" not in made
        listener = Counting()
        with nb_event.install_listener("numba:llvm_lock", listener):
            def k(x, a):
                x[0] = a
            cuda.jit(k).compile(SIG)
    finally:
        nb_event.start_event = real_start
    # a listener hears each call into LLVM, begun and ended
    assert listener.started > 20 and listener.started == listener.ended
