"""A Context lives as long as someone holds it, not as long as the process: once the user and
every kernel dropped one that compiled, it goes, and with it its Numba typing and target
contexts (about a megabyte each; compiler/target.py).  Their making no longer grows with the
Contexts made before (Numba's method and attribute overloads registered their lowering once per
typing context), and the collection after a cell walks only the live ones.  A kernel keeps the
variants ``with_context`` made for it (and their Contexts) while it lives; a live Context's
kernels go on working, and a Context defined again under its name is still the same object.

Each test runs in a process of its own: it counts the objects of its own making.
"""

import json

from conftest import python_process

_PRELUDE = """
import gc, json, weakref
import numpy as np
from gpureplace import cuda, Context
from gpureplace.compiler import target
from gpureplace.compiler.typing_context import GPUTypingContext
from gpureplace.jit import collect

x = np.arange(32, dtype=np.float32)
out = np.zeros(32, np.float32)

def act(v):
    return v + 1.0

def make_kernel():
    @cuda.jit
    def kern(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = act(x[i])
    return kern

def settle():
    for _ in range(3):
        collect.collect()
        gc.collect()

def counts(refs):
    settle()
    objs = gc.get_objects()
    return {"alive": sum(r() is not None for r in refs),
            "compilers": len(target._compilers),
            "target_contexts": sum(isinstance(o, target.GPUTargetContext) for o in objs),
            "typing_contexts": sum(isinstance(o, GPUTypingContext) for o in objs)}
"""


def _run(tmp_path, body, **env):
    out = python_process(_PRELUDE + body, GPUREPLACE_BACKEND="simulator",
                         GPUREPLACE_CACHE_DIR=str(tmp_path / "cache"), **env)
    return json.loads(out.strip().splitlines()[-1])


def test_a_context_dropped_with_its_kernel_is_freed_with_its_compilers(tmp_path):
    # a sweep: a Context per experiment, a kernel launched in it (simulated), both dropped
    got = _run(tmp_path, """
make_kernel()[1, 32](x, out)
refs = []
for i in range(12):
    ctx = Context(f"trial{i}")
    k = make_kernel()
    k.with_context(ctx)[1, 32](x, out)
    assert out[3] == 4.0
    refs.append(weakref.ref(ctx))
    del ctx, k
print(json.dumps(counts(refs)))
""")
    assert got["alive"] == 0
    assert got["compilers"] == 1                 # the default context's
    # (the simulator's operators of a freed Context's typing context hold an empty shell of
    # it: no target context stays with it)
    assert got["target_contexts"] == 1


def test_compile_only_contexts_free_their_typing_contexts_too(tmp_path):
    # compiled (PTX), never launched: Numba's templates kept their answers per typing
    # context (an @overload's implementation, an intrinsic's signature) in dictionaries of
    # their classes, which held each typing context for good
    got = _run(tmp_path, """
make_kernel().compile("void(float32[:], float32[:])")
refs = []
for i in range(10):
    ctx = Context(f"trial{i}")
    make_kernel().with_context(ctx).compile("void(float32[:], float32[:])")
    refs.append(weakref.ref(ctx))
    del ctx
print(json.dumps(counts(refs)))
""")
    assert got == {"alive": 0, "compilers": 1, "target_contexts": 1, "typing_contexts": 1}


def test_a_context_goes_while_the_helper_it_compiled_lives_on(tmp_path):
    # ``act`` is called by a kernel kept in the default context: the device-function type
    # made for it in each trial's Context held that Context while ``act`` lived
    got = _run(tmp_path, """
keep = make_kernel()
keep[1, 32](x, out)
refs = []
for i in range(8):
    ctx = Context(f"trial{i}")
    make_kernel().with_context(ctx)[1, 32](x, out)
    refs.append(weakref.ref(ctx))
    del ctx
out[:] = 0
keep[1, 32](x, out)                       # the kept kernel still runs
assert out[3] == 4.0
print(json.dumps(counts(refs)))
""")
    assert got["alive"] == 0
    assert got["compilers"] == 1 and got["target_contexts"] == 1


def test_contexts_made_leave_the_lowering_registry_as_it_was(tmp_path):
    # every typing context made an instance of each overload_method / overload_attribute
    # template, and each instance appended its lowering to Numba's registry (holding its typing
    # context): the registry, and what each new target context installs, grew with every
    # Context made.  A user's method overload works in each of them, made before or after.
    got = _run(tmp_path, """
from numba.core import types
from gpureplace.cuda import extending
from gpureplace.dispatch.context import default_context

def registrations():
    # every lowering registered in the registries gpureplace's target contexts install
    targetctx = target.compilers(default_context)[1]
    return sum(len(getattr(reg, name)) for reg in targetctx._registries
               for name in ("functions", "getattrs", "setattrs", "casts", "constants"))

@extending.overload_method(types.Array, "twice_first")
def ov_twice_first(arr):
    def impl(arr):
        return arr[0] * 2
    return impl

def make_method_kernel():
    @cuda.jit
    def mk(x, out):
        out[0] = x.twice_first()
    return mk

xs = np.full(4, 3.0, np.float32)
res = np.zeros(1, np.float32)
make_method_kernel()[1, 1](xs, res)
assert res[0] == 6.0
before = registrations()
kept = []
for i in range(6):
    ctx = Context(f"trial{i}")
    res[:] = 0
    xs[:] = i
    k = make_method_kernel().with_context(ctx)
    k[1, 1](xs, res)
    assert res[0] == 2 * i, (i, res[0])
    kept.append((ctx, k))
after = registrations()
refs = [weakref.ref(c) for c, _ in kept]
del kept, ctx, k
print(json.dumps({"grew": after - before, **counts(refs)}))
""")
    assert got["grew"] == 0
    assert got["alive"] == 0 and got["target_contexts"] == 1


def test_a_kernel_keeps_its_variants_and_lets_them_go_with_it(tmp_path):
    # the redefinition guarantees: a kernel compiled in a live Context works after any number
    # of collections, its with_context variant is reused (not compiled again), and a Context
    # defined again under its name is the same object; a kernel's variants (and the Contexts
    # only they hold) go with the kernel
    got = _run(tmp_path, """
kern = make_kernel()
live = Context("live")
v = kern.with_context(live)
v[1, 32](x, out)
settle()
assert kern.with_context(live) is v
out[:] = 0
v[1, 32](x, out)
assert out[3] == 4.0
again = Context("live")                   # the top-level code run again: defined in place
assert again is live
sweep = []
for i in range(5):
    ctx = Context(f"trial{i}")
    kern.with_context(ctx)[1, 32](x, out)
    sweep.append(weakref.ref(ctx))
    del ctx
kept_while_kernel_lives = counts(sweep)["alive"]
out[:] = 0
kern.with_context(live)[1, 32](x, out)
assert out[3] == 4.0
live_ref = weakref.ref(live)
del kern, v, live, again
got = counts(sweep)
print(json.dumps({"kept": kept_while_kernel_lives, "live_freed": live_ref() is None, **got}))
""")
    assert got["kept"] == 5                    # the kernel holds its variants' Contexts
    assert got["alive"] == 0 and got["live_freed"]
    assert got["compilers"] == 1 and got["target_contexts"] == 1



def test_contexts_whose_kernels_call_ufuncs_or_typed_overrides_are_freed(tmp_path):
    # the types of a NumPy ufunc (np.sqrt) and of a callable with typed overrides, made in a
    # Context, hold it: kept for good in their classes' caches, they kept every such Context
    # (5 of 5), its compilers with it.  A Context still in use keeps them: its kernel works
    # after the collections
    got = _run(tmp_path, """
def host(v):
    return v * 3.0

def repl(v):
    return v * 2.0

def make_ufunc_kernel():
    @cuda.jit
    def kern(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = np.sqrt(x[i])
    return kern

def make_override_kernel():
    @cuda.jit
    def kern(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = host(x[i])
    return kern

make_ufunc_kernel()[1, 32](x, out)
make_override_kernel()[1, 32](x, out)
kept = Context("kept")
kept.override(host, repl, types=("float32",))
kept_ufunc = make_ufunc_kernel().with_context(kept)
kept_override = make_override_kernel().with_context(kept)
kept_ufunc[1, 32](x, out)
kept_override[1, 32](x, out)
ufunc_refs, override_refs = [], []
for i in range(5):
    ctx = Context(f"ufunc{i}")
    make_ufunc_kernel().with_context(ctx)[1, 32](x, out)
    assert out[4] == 2.0
    ufunc_refs.append(weakref.ref(ctx))
    ctx = Context(f"override{i}")
    ctx.override(host, repl, types=("float32",))
    make_override_kernel().with_context(ctx)[1, 32](x, out)
    assert out[3] == 6.0
    override_refs.append(weakref.ref(ctx))
    del ctx
ufunc = counts(ufunc_refs)
override = counts(override_refs)
out[:] = 0
kept_ufunc[1, 32](x, out)
assert out[4] == 2.0
kept_override[1, 32](x, out)
assert out[3] == 6.0
print(json.dumps({"ufunc": ufunc["alive"], "override": override["alive"], **override}))
""")
    assert (got["ufunc"], got["override"]) == (0, 0)
    assert got["compilers"] == 2                 # the default context's and "kept"'s


METHOD_AFTER_A_CONTEXT_WENT = r"""
import gc, weakref
import numpy as np
from gpureplace import Context, cuda
from gpureplace.jit import collect

x = np.arange(1, 33, dtype=np.float32)

def make(c):
    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x.sum() + c
    return k

ctx = Context("types_sum_first")
out = np.zeros(32, np.float32)
make(1.0).with_context(ctx)[1, 32](x, out)       # it types x.sum() first
keep = make(2.0)
keep[1, 32](x, out)                              # the default context: Numba's shared type
gone = weakref.ref(ctx)
del ctx
for _ in range(3):
    collect.collect()
    gc.collect()
make(3.0)[1, 32](x, out)                         # a new kernel, after the Context went
print(gone() is None, out[0])
"""


def test_a_method_typed_first_in_a_context_that_went_still_types_elsewhere():
    # Numba shares a bound-method type (x.sum) between typing contexts, holding the one that
    # made it first: emptying a freed Context's typing context failed every later compile of
    # x.sum() in any context ("Unknown attribute 'bitwidth' of type class(int64)")
    out = python_process(METHOD_AFTER_A_CONTEXT_WENT, GPUREPLACE_BACKEND="simulator").split()
    assert out == ["True", "531.0"]
