"""The front end: Python function + argument types + context -> typed, lowered device function.

Reads like the pipeline it runs:
  1. front end  (Numba's untyped and typed passes; globals resolved through the context)
  2. lowering   (Numba's lowering into our library, no wrappers)
  3. records    (globals read, overrides used, callees) for redefinition tracking
Kernels add a wrapper and go through the back end in ``compiler.pipeline``.  What it produces:
``compiled.py``; errors in the user's terms: ``diagnostics.py``; reuse of lowered code when only a
callee changed: ``relink.py``.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
import types as pytypes

from numba.core import errors as nb_errors
from numba.core import funcdesc, lowering
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.target_extension import target_override
from numba.core.compiler_machinery import FunctionPass, LoweringPass, register_pass
from numba.core.typed_passes import (AnnotateTypes, IRLegalization,
                                     NoPythonSupportedFeatureValidation)
from numba.core.untyped_passes import InlineClosureLikes

from ..errors import CompileError
from ..tracking import bindings, deps, stats
from ..tracking.stats import counters
from . import builtins as _builtins  # noqa: F401  (fills the built-in table)
from . import constructs, libdevice_link, resolve
from .compiled import CompiledFunction
from .constant_writes import RefuseConstantWrites
from .constructs import instructions_with_lines
from .diagnostics import (convert_error, file_of, first_line_of, line_referring_to, name_of,
                          package_of, raised_by_generator)
from .fold_shapes import FoldArrayShapes
from .numba_overhead import GPUFlags, LeanPassManager, install as _lean_numba
from .overloads import generator_reads
from .relink import relink
from .rangeloops import constant_trip_counts
from .records import collect_global_reads, override_reads
from .target import compilers
from .view_returns import typed_passes

_lock = threading.RLock()
_lean_numba()



# ---------------------------------------------------------------------------------------------
# Numba pipeline pieces


_lowering = threading.local()      # .loc / .name: the statement being lowered, its function


def lowering_location():
    """(function name, file, line) of the statement being lowered on this thread, or None."""
    loc = getattr(_lowering, "loc", None)
    if loc is None or loc.filename is None or loc.line is None:
        return None
    return (_lowering.name, loc.filename, loc.line)


class _TrackingLower(lowering.Lower):
    """Numba's lowering, noting where a call the device cannot run was introduced."""

    def lower_inst(self, inst):
        before = len(self.module.globals)
        _lowering.loc = self.loc
        _lowering.name = self.func_ir.func_id.func_name
        try:
            super().lower_inst(inst)
        except Exception as exc:
            if getattr(exc, "loc", None) is None:
                try:
                    exc.loc = self.loc          # so the error names the user's line
                except AttributeError:
                    pass
            raise
        if len(self.module.globals) != before:
            from .validate import invalid_declarations
            cf = current_compiled()
            if cf is not None:
                for name in invalid_declarations(self.module):
                    if all(name != seen for seen, _ in cf.bad_calls):
                        cf.bad_calls.append((name, self.loc))


@register_pass(mutates_CFG=True, analysis_only=False)
class GPULowering(LoweringPass):
    _name = "gpureplace_lowering"

    def __init__(self):
        LoweringPass.__init__(self)

    def run_pass(self, state):
        targetctx = state.targetctx
        library = state.library
        cf = current_compiled()
        own = cf is not None and state.func_ir.func_id.func is cf.pyfunc
        if own:
            # What the function reads, before lowering: a global array is lowered from the
            # snapshot its record keeps (compiler/target.py), never from the live array.
            cf.global_reads = collect_global_reads(state.func_ir)
            cf.constant_range_trips = constant_trip_counts(state.func_ir, state.typemap)
        fndesc = funcdesc.PythonFunctionDescriptor.from_specialized_function(
            state.func_ir, state.typemap, state.return_type, state.calltypes,
            mangler=targetctx.mangler, inline=False, noalias=False,
            abi_tags=[state.flags.get_mangle_string()])
        if own:
            check_self_calls(cf, state.return_type)
            cf.lowering_fndesc = fndesc      # what a call of itself calls (resolve.py)
        with targetctx.push_code_library(library):
            lower = _TrackingLower(targetctx, library, fndesc, state.func_ir,
                                   metadata=state.metadata)
            lower.lower()
        state["fndesc"] = fndesc
        state.cr = fndesc          # tells Numba's pipeline runner that we are done
        return True


def check_self_calls(cf, restype):
    """A function that calls itself was typed with the return type its other returns gave at
    that point; refuse, naming the types, a function whose final return type differs."""
    for assumed in cf.self_call_restypes:
        if assumed != restype:
            raise CompileError(
                f"{name_of(cf.pyfunc)} calls itself, and that call was typed as returning "
                f"{assumed} (what its other returns give) but the function returns {restype}: "
                f"give cuda.jit a signature, e.g. cuda.jit(\"{restype}({', '.join(map(str, cf.argtypes))})\", "
                f"device=True), or make every return the same type",
                function=name_of(cf.pyfunc), filename=file_of(cf.pyfunc),
                lineno=line_referring_to(cf.pyfunc, cf.pyfunc.__name__),
                chain=(name_of(cf.pyfunc),))


_defining = threading.local()        # .funcs: {Python function: its cuda.jit, compiling eagerly}


@contextlib.contextmanager
def defining(pyfunc, jitted):
    """While ``cuda.jit("sig")`` compiles ``pyfunc`` eagerly, before its name is bound in its
    module, the body's use of its own name means ``jitted`` (a function calling itself)."""
    funcs = _defining.__dict__.setdefault("funcs", {})
    funcs[pyfunc] = jitted
    try:
        yield
    finally:
        del funcs[pyfunc]


@register_pass(mutates_CFG=False, analysis_only=False)
class BindOwnName(FunctionPass):
    """Its own name, not yet bound while ``cuda.jit("sig")`` compiles a function eagerly (or
    bound to the definition a re-run cell replaces), is the function being defined (see
    ``defining``)."""
    _name = "gpureplace_bind_own_name"

    def __init__(self):
        FunctionPass.__init__(self)

    def run_pass(self, state):
        from numba.core import ir as nir
        func_id = state.func_ir.func_id
        jitted = getattr(_defining, "funcs", {}).get(func_id.func)
        if jitted is None:
            return False
        changed = False
        for block in state.func_ir.blocks.values():
            for inst in block.body:
                # (unbound, or still the previous definition of a re-run cell)
                # (a closure's own name is a free variable: its cell is empty until then)
                if not isinstance(inst, nir.Assign) or \
                        not isinstance(inst.value, (nir.Global, nir.FreeVar)) or \
                        inst.value.name != func_id.func_name or \
                        isinstance(inst.value.value, pytypes.ModuleType):
                    continue
                if isinstance(inst.value, nir.Global):
                    inst.value = nir.Global(inst.value.name, jitted, inst.value.loc)
                else:
                    inst.value = nir.FreeVar(inst.value.index, inst.value.name, jitted,
                                             inst.value.loc)
                changed = True
        return changed


#: Names whose use may give Numba's closure inliner something to do without a nested function:
#: ``functools.reduce``, stencils, and a list built in a loop and made an array.
_INLINER_NAMES = frozenset({"reduce", "stencil", "array", "asarray", "append"})


@register_pass(mutates_CFG=True, analysis_only=False)
class InlineClosureLikesWhereAny(InlineClosureLikes):
    """Numba's ``inline_closure_likes``, run only where the function's code could have what it
    inlines: a nested function (a closure, lambda, comprehension or generator expression: a code
    object among its constants) or a call it rewrites (``_INLINER_NAMES``).  Elsewhere it
    changes nothing, at half a millisecond of a small kernel's compile."""
    _name = "gpureplace_inline_closure_likes"

    def run_pass(self, state):
        code = state.func_id.code
        if not any(isinstance(c, pytypes.CodeType) for c in code.co_consts) and \
                _INLINER_NAMES.isdisjoint(code.co_names):
            return False
        return InlineClosureLikes.run_pass(self, state)


class GPUPipeline(CompilerBase):
    def define_pipelines(self):
        dpb = DefaultPassBuilder
        pm = LeanPassManager("gpureplace")
        pm.passes.extend((InlineClosureLikesWhereAny if cls is InlineClosureLikes else cls, what)
                         for cls, what in dpb.define_untyped_pipeline(self.state).passes)
        pm.add_pass(BindOwnName, "bind the function's own name")
        pm.add_pass(FoldArrayShapes, "fold constant array shapes")
        pm.passes.extend(typed_passes(self.state))
        pm.add_pass(RefuseConstantWrites, "refuse writes into host constants")
        pm.add_pass(NoPythonSupportedFeatureValidation, "check supported features")
        pm.add_pass(IRLegalization, "legalise IR")
        pm.add_pass(AnnotateTypes, "annotate types")
        pm.add_pass(GPULowering, "lower to LLVM IR")
        pm.finalize()
        return [pm]


def numba_flags(options):
    flags = GPUFlags()
    flags.no_compile = True
    flags.no_cpython_wrapper = True
    flags.no_cfunc_wrapper = True
    flags.nrt = False
    # debug: Python's error model (a division by zero raises ZeroDivisionError), as numba-cuda
    # (with fast math, divisions stay unchecked there too)
    flags.error_model = "python" if options.debug and not options.fastmath else "numpy"
    # lineinfo: line tables only (DebugDirectivesOnly), as numba-cuda's lineinfo=True; debug:
    # full DWARF (variables and their types, for cuda-gdb), as numba-cuda's debug=True
    flags.debuginfo = bool(options.lineinfo or options.debug)
    flags.dbg_directives_only = not options.debug
    flags.boundscheck = False
    if options.fastmath:
        flags.fastmath = True
    return flags


# ---------------------------------------------------------------------------------------------
# Compiling device functions

_cache = {}          # (pyfunc, context uid, mask key, argtypes, options) -> CompiledFunction
_in_progress = []    # CompiledFunction being compiled on this thread (innermost last)



#: Numba's switches that print what its passes (and ours) produce, as numba-cuda honours them:
#: with one on, compiles run afresh (no memory or disk cache) so that there is something to print.
DUMP_SWITCHES = ("DUMP_BYTECODE", "DUMP_CFG", "DUMP_IR", "DUMP_SSA", "DUMP_ANNOTATION",
                 "DUMP_LLVM", "DUMP_FUNC_OPT", "DUMP_OPTIMIZED", "DUMP_ASSEMBLY", "DEBUG_TYPEINFER")


def dumps_requested():
    """Whether one of Numba's DUMP_* switches is on (``NUMBA_DUMP_IR=1``, or
    ``numba.core.config.DUMP_IR = True``)."""
    from numba.core import config
    return any(getattr(config, name, False) for name in DUMP_SWITCHES)


def current_compiled():
    return _in_progress[-1] if _in_progress else None


def forget(stale):
    """Drop compiled functions from the cache so their next use compiles them afresh."""
    ids = {id(cf) for cf in stale}
    with _lock:
        for key in [k for k, cf in _cache.items() if id(cf) in ids]:
            del _cache[key]
    counters["invalidations"] += len(ids)


def retain(live, bodies):
    """Forget the compiled functions not in ``live`` (those the live kernels' and device
    functions' specialisations reach: jit/collect.py), unless compiled from one of the Python
    functions ``bodies`` (a live ``cuda.jit`` function's own, kept for a relink).  A helper a cell
    redefined leaves its old compiled code, with the values it read (an old array, say), to
    nothing else: dropped here from the cache, from the target contexts' user functions and from
    the device-function types made for it.  So is what is kept for a Context no kept code was
    compiled in (``_contexts_in_use``), which would keep a Context nothing else holds, and an
    old version of a user's ``@overload`` (``_replaced_overloads``).  Returns False, doing
    nothing, while a compile runs (the next call does it)."""
    if not _lock.acquire(blocking=False):
        return False
    try:
        if _in_progress:          # (asked from inside a compile: the next call does it)
            return False
        keep = {id(cf) for cf in live}
        for key, cf in _cache.items():
            if id(key[0]) in bodies:
                keep.update(id(each) for each in cf.closure())
        for key in [k for k, cf in _cache.items() if id(cf) not in keep]:
            del _cache[key]
        pyfuncs = set(bodies)
        pyfuncs.update(id(cf.pyfunc) for cf in _cache.values())
        pyfuncs.update(id(getattr(cf, "pyfunc", None)) for cf in live)
        serials = {cf.serial for cf in live if isinstance(cf, CompiledFunction)}
        serials.update(cf.serial for cf in _cache.values())
        from .target import forget_answers, forget_implementations, live_contexts
        gone = resolve.DeviceFunctionType.forget_except(pyfuncs, keep)
        contexts = live_contexts()
        pairs = [pair for _, pair in contexts]
        in_use = _contexts_in_use(live)
        gone |= _forget_types_of_unused_contexts(in_use)
        unused = [(context, typingctx) for context, (typingctx, _) in contexts
                  if id(context) not in in_use]
        if unused:
            # (an @overload's answers in such a Context hold its implementation compiled there)
            forget_answers([typingctx for _, typingctx in unused], overloads_only=True)
            forget_implementations({id(context) for context, _ in unused})
        gone |= _replaced_overloads(contexts)
        for _, targetctx in pairs:
            defns = targetctx._defns
            for key in [k for k in defns if _unused_definition(k, keep, pyfuncs, serials)]:
                del defns[key]
            if gone:
                # Numba's lookups remember their answers by the argument types: a forgotten
                # helper's type (a constant of it, a call) would keep it, and all it read
                for selector in [targetctx._casts, targetctx._get_constants, *defns.values(),
                                 *targetctx._getattrs.values(), *targetctx._setattrs.values()]:
                    memo = selector._cache
                    for sig in [s for s in memo if any(id(t) in gone for t in s)]:
                        del memo[sig]
        return True
    finally:
        _lock.release()


def _contexts_in_use(live):
    """The ids of the Contexts that compiled code kept (in the cache or ``live``) was compiled
    in.  What is kept for a Context outside them -- device-function types, Numba's templates'
    answers -- is let go: it holds the Context, which would otherwise stay alive for as long as
    that is kept (a helper every kernel calls, Numba's templates: for good), with its typing and
    target contexts.  A compile in such a Context makes them again."""
    in_use = {id(getattr(cf, "context", None)) for cf in _cache.values()}
    in_use.update(id(getattr(cf, "context", None)) for cf in live)
    return in_use


def _forget_types_of_unused_contexts(in_use):
    """Drop the types made in Contexts whose ids are not in ``in_use`` (``_contexts_in_use``):
    the device-function types, the ufuncs' (``ufunc_arrays.UfuncType``) and the typed
    overrides' choices (``resolve.OverrideChoiceType``), each of which holds its Context;
    returns the ids of the types dropped."""
    from .ufunc_arrays import UfuncType
    gone = set()
    for instances, context_of in (
            (resolve.DeviceFunctionType._instances, lambda inst: inst.dispatch_context),
            (UfuncType._instances, lambda inst: inst._context),
            (resolve.OverrideChoiceType._instances, lambda inst: inst._context)):
        for key in [k for k, inst in instances.items() if id(context_of(inst)) not in in_use]:
            gone.add(id(instances.pop(key)))
    return gone


#: At the last look: the Numba function types of the overloads in the Contexts' tables (held,
#: so that their ids stand for them), those overloads (id -> weak reference) and the sizes of
#: Numba's registries
_overloads_seen = {"current": {}, "overloads": {}, "sizes": None}


def _replaced_overloads(contexts):
    """The ids of the Numba function types of users' ``@overload``s that a later definition
    replaced (the cell run again) or that no Context has any more, found in the target
    contexts' memos (``contexts``: ``target.live_contexts()``): Numba's lookups remember
    their answers by argument types, and a constant of such a type (the overloaded function
    read as a value) kept the old version's template, generator and implementation for good.
    Looked for only when the overloads in the Contexts' tables, their function types or Numba's
    registries (where ``numba.extending.overload`` adds one) changed since the last look."""
    import weakref

    from numba.core import types
    from numba.core.typing.templates import builtin_registry

    from .overload_redefinitions import overload_site
    from .overloads import NumbaOverload
    current, overloads, layers = {}, {}, set()
    for context, _ in contexts:
        for layer in context.stack():
            if id(layer) not in layers:
                layers.add(id(layer))
                for ovr in layer.overrides():
                    if isinstance(ovr.impl, NumbaOverload):
                        overloads[id(ovr.impl)] = ovr.impl
                        if ovr.impl._type is not None:
                            current[id(ovr.impl._type)] = ovr.impl._type
    sizes = (len(builtin_registry.globals), len(builtin_registry.attributes))
    seen = _overloads_seen
    if seen["sizes"] == sizes and seen["current"].keys() == current.keys() and \
            seen["overloads"].keys() == overloads.keys() and \
            all(ref() is not None for ref in seen["overloads"].values()):
        return set()
    seen.update(current=current, sizes=sizes,
                overloads={key: weakref.ref(impl) for key, impl in overloads.items()})
    # the latest definition of each user's overload in Numba's registry (numba.extending's)
    latest = {}
    for _, ty in list(builtin_registry.globals):
        for template in getattr(ty, "templates", ()):
            site = overload_site(template)
            if site is not None:
                latest[site[0]] = site[1]

    def replaced(fnty):
        sites = [site for site in map(overload_site, fnty.templates) if site is not None]
        return bool(sites) and id(fnty) not in current and \
            any(latest.get(where) is not code for where, code in sites)

    stale, checked = set(), set()
    for _, (_, targetctx) in contexts:
        for selector in [targetctx._casts, targetctx._get_constants,
                         *targetctx._defns.values(), *targetctx._getattrs.values(),
                         *targetctx._setattrs.values()]:
            for sig in list(selector._cache):
                for t in sig:
                    if type(t) is types.Function and id(t) not in checked:
                        checked.add(id(t))
                        if replaced(t):
                            stale.add(id(t))
    return stale


def _unused_definition(key, keep, pyfuncs, serials):
    """Whether the target context's definition under ``key`` is a compiled function's no code in
    use calls (one not kept: a caller compiled later gets its callee from the cache, or compiles
    it again), or the lowering of a call of itself by such a function (resolve._self_call_key)."""
    if isinstance(key, CompiledFunction):
        return id(key) not in keep
    return type(key) is tuple and len(key) == 3 and key[0] == "self-call" and \
        key[1] not in serials


def cached():
    """The compiled functions in the cache now (with every function each calls)."""
    with _lock:
        roots = list(_cache.values())
    return closures(roots)


def closures(roots):
    """Each compiled function of the call graphs of ``roots`` (``closure()``), once."""
    out, seen = [], set()
    for root in roots:
        for cf in root.closure():
            if id(cf) not in seen:
                seen.add(id(cf))
                out.append(cf)
    return out


@contextlib.contextmanager
def uncounted():
    """Compiles made inside, on this thread, are left out of ``stats()``, which counts the
    user's work: the background warm-up's and the front ends run ahead on a Dask worker.  They
    are never counted (tracking/stats.py), not counted and taken back after, which a
    ``stats()`` read meanwhile (a Dask worker's, from another thread) would see.  (The front
    end's lock is held, as before: what runs inside is one compile after another's.)"""
    with _lock, stats.uncounted():
        yield


def compile_ahead(pyfunc, context, argtypes, options):
    """The front end of a kernel's body, run before anything asks for it (in the background, on a
    Dask worker that loaded the kernel from the disk cache), so that a later change to one of its
    callees relinks it; not counted as a compile."""
    with uncounted():
        compile_device(pyfunc, context, {}, argtypes, options)


def cache_key(pyfunc, context, mask, argtypes, options, restype=None):
    key = (pyfunc, context.uid, resolve.mask_key(mask), tuple(argtypes), options)
    return key if restype is None else key + (restype,)


def compile_device(pyfunc, context, mask, argtypes, options, restype=None) -> CompiledFunction:
    """Compile ``pyfunc`` for ``argtypes`` in ``context`` (cached); ``restype``: the return type
    a signature given to cuda.jit declares (the value returned is converted to it).

    Numba's front end recurses into each device function a function calls, some twenty Python
    frames a level, so a chain of helpers 50 deep would exhaust Python's default recursion
    limit.  The outermost compile that has work to do therefore raises the limit, on the
    caller's own thread, for as long as it runs (the limit protects the C stack, and a level
    takes under 3 KB of it: ``MAX_DEPTH`` levels fit easily in a thread's default 8 MB).  A
    thread of its own would deadlock a compile made while its module is being imported (Numba
    imports the function's module), so there is none.  Nesting deeper than ``MAX_DEPTH`` is
    refused with the chain that got there; a RecursionError all the same becomes a CompileError.

    The same outermost compile, on the main thread, holds Python's cyclic garbage collector off
    while it runs: a compile makes some hundred thousand objects, and each seven hundred of them
    set off a collection of the young generation, every tenth of those the middle one and, in
    turn, the whole heap -- a notebook's arrays and objects included (20-150 ms at a time with
    300,000 objects alive, 3-10 ms on average per compile).  Held off, the compile's garbage is
    collected once, after it (nothing is kept alive longer than that; a collector the program
    turned off itself stays off)."""
    resolve.active()
    key = cache_key(pyfunc, context, mask, argtypes, options, restype)
    if getattr(_deep, "active", False):
        return _compile_device(pyfunc, context, mask, argtypes, options, restype, key)
    with _lock:
        hit = None if dumps_requested() else _cache.get(key)
        if hit is not None and deps.check(hit) is None:
            return hit
    _deep.active = True
    # (the main thread's only: the program's own thread, whose cells and scripts run there and
    # which cannot change the collector meanwhile; a warm-up thread that turned it on again
    # when done could undo a gc.disable() the program made while it ran)
    collector = threading.current_thread() is threading.main_thread() and gc.isenabled()
    if collector:
        gc.disable()
    with _deep_lock:
        if _deep_users[0] == 0:
            _deep_users[1] = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_deep_users[1], _DEEP_RECURSION_LIMIT))
        _deep_users[0] += 1
    try:
        return _compile_device(pyfunc, context, mask, argtypes, options, restype, key)
    except RecursionError:
        raise _recursion_error(pyfunc) from None
    finally:
        _deep.active = False
        with _deep_lock:
            _deep_users[0] -= 1
            if _deep_users[0] == 0:
                sys.setrecursionlimit(_deep_users[1])
        if collector:
            gc.enable()


#: How deeply device functions may call one another (kernel -> h0 -> h1 -> ...).  Measured on
#: CPython 3.11: some 21 Python frames and under 3 KB of C stack a level, so 500 levels need
#: about 1.5 MB of a thread's stack.
MAX_DEPTH = 500
_DEEP_RECURSION_LIMIT = 30 * MAX_DEPTH + 5_000
_deep = threading.local()              # .active: an outermost compile runs on this thread
_deep_lock = threading.Lock()
_deep_users = [0, 0]                   # outermost compiles running now, the limit before them


def _recursion_error(pyfunc):
    """What a RecursionError in the front end (not a chain of calls, which MAX_DEPTH bounds:
    an expression or statement nested beyond what the compiler can follow) becomes."""
    return CompileError(
        f"{name_of(pyfunc)} is nested too deeply for the compiler (Python's recursion limit, "
        f"raised to {_DEEP_RECURSION_LIMIT}, was reached): split deeply nested expressions or "
        f"calls into separate statements or functions", function=name_of(pyfunc),
        filename=file_of(pyfunc), lineno=first_line_of(pyfunc), chain=(name_of(pyfunc),))


def _too_deep(pyfunc):
    """The error for a call that would nest device functions deeper than MAX_DEPTH."""
    funcs = [f.pyfunc for f in resolve.frames()] + [pyfunc]
    names = [name_of(f) for f in funcs]
    shown = names if len(names) <= 8 else \
        names[:4] + [f"... ({len(names) - 7} more)"] + names[-3:]
    caller = funcs[-2]
    exc = CompileError(
        f"device functions nest more than {MAX_DEPTH} calls deep ({' -> '.join(shown)}), more "
        f"than the compiler follows: call fewer helpers inside one another (inline some, or "
        f"write a recursion as a loop)", function=name_of(caller), filename=file_of(caller),
        lineno=line_referring_to(caller, pyfunc.__name__), chain=())
    exc.complete = True           # the callers on the way out add nothing to the chain
    return exc


def _compile_device(pyfunc, context, mask, argtypes, options, restype, key):
    with _lock:
        hit = None if dumps_requested() else _cache.get(key)
        if hit is not None:
            # Cached code is reused only while its records still match the current bindings.
            if deps.check(hit) is None:
                return hit
            relinked = relink(hit, compile_device)
            if relinked is not None:
                _cache[key] = relinked
                return relinked
            forget([hit])
        frames = resolve.frames()
        for frame in frames:
            if frame.key == key:
                if frame is frames[-1] and _in_progress and _in_progress[-1].pyfunc is pyfunc:
                    # A function calling itself: the call is typed and lowered by the caller's
                    # DeviceFunctionType (resolve.py) as a call of the function being built.
                    return _in_progress[-1]
                # Reported at the call that closes the cycle; the callers on the way out
                # prefix themselves to the chain.
                caller = frames[-1].pyfunc
                raise CompileError(
                    f"mutually recursive device functions are not supported ({name_of(caller)} "
                    f"calls {name_of(pyfunc)}, which is already being compiled for the same "
                    f"argument types, and calls it in turn); a function may call itself, or "
                    f"write the recursion as a loop",
                    function=name_of(caller), filename=file_of(caller),
                    lineno=line_referring_to(caller, pyfunc.__name__),
                    chain=(name_of(pyfunc),))
        if len(resolve.frames()) >= MAX_DEPTH:
            raise _too_deep(pyfunc)
        cf = CompiledFunction(pyfunc, context, argtypes, options)
        cf.declared_restype = restype
        cf.mask = dict(mask or {})
        _run_front_end(cf, mask, key)
        _cache[key] = cf
        stats.count("device_compiles")
        return cf


#: Bytecode of f-strings that format a value (3.10-3.12; 3.13's FORMAT_SIMPLE/FORMAT_WITH_SPEC)
_FSTRING_OPS = frozenset({"FORMAT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC"})


def _refuse_fstrings(pyfunc):
    """An f-string that formats values needs a string at run time, which device code cannot
    build; Numba would fail deep inside its str() implementation, so say so at the line."""
    for ins, line in instructions_with_lines(pyfunc):
        if ins.opname in _FSTRING_OPS:
            raise CompileError(
                "f-strings are not supported in device code (a string would need the heap); "
                "print the values as arguments instead: print(\"value\", x[i])",
                function=name_of(pyfunc), filename=file_of(pyfunc), lineno=line,
                chain=(name_of(pyfunc),))


def _run_front_end(cf, mask, key):
    from .validate import check_compiled
    constructs.refuse(cf.pyfunc, name_of(cf.pyfunc), file_of(cf.pyfunc))
    if package_of(cf.pyfunc) != "numba":
        # (Numba's own implementations format messages in branches its pruning removes, as
        # check_axis_bounds for axis=None: what survives fails in typing, with Numba's words)
        _refuse_fstrings(cf.pyfunc)
    typingctx, targetctx = compilers(cf.context)
    # (the first compile's, while its front end runs; once the target context is made, whose
    # start registers Numba's C helpers with LLVM, call by call, under llvmlite's one lock)
    libdevice_link.load_ahead()
    frame = resolve.Frame(cf.pyfunc, cf.context, mask, cf.options, key)
    library = targetctx.codegen().create_library(cf.qualname)
    resolve.frames().append(frame)
    _in_progress.append(cf)
    try:
        try:
            # Numba's generic @overload machinery asks "the current target" where to register
            # lowerings; make that ours, not the CPU's (whose registries it would reload).
            with target_override("gpureplace"):
                pipeline = GPUPipeline(typingctx, targetctx, library, cf.argtypes,
                                        cf.declared_restype, numba_flags(cf.options), {})
                pipeline.compile_extra(cf.pyfunc)
        except CompileError as exc:
            if getattr(exc, "at_caller", False):
                exc.at_caller = False
                exc.chain = (name_of(cf.pyfunc),)
            elif not getattr(exc, "complete", False):
                exc.chain = (name_of(cf.pyfunc),) + tuple(exc.chain or (exc.function,))
            raise exc from None
        except (nb_errors.NumbaError, nb_errors.UnsupportedBytecodeError, NotImplementedError,
                TypeError, ValueError, AttributeError, KeyError, IndexError,
                AssertionError) as exc:
            raise convert_error(cf.pyfunc, exc) from None
        except Exception as exc:
            # (any other exception an @overload generator raised: said as a compile error
            # naming the generator's line and the call)
            if isinstance(exc, (RecursionError, MemoryError)) or not raised_by_generator(exc):
                raise
            raise convert_error(cf.pyfunc, exc) from None
        state = pipeline.state
        cf.restype = state.return_type
        cf.fndesc = state["fndesc"]
        cf.library = library
        cf.type_annotation = state.type_annotation
        cf.resolutions = frame.resolutions
        lines = {id(r.value): r.lineno for r in reversed(cf.global_reads)}
        for res in cf.resolutions:
            if not res.line:
                res.line = lines.get(id(res.host), 0)
        cf.global_reads = override_reads(cf.resolutions, cf.global_reads)
        cf.global_reads = generator_reads(cf, cf.global_reads)
        cf.overrides_used = [(r.host, r.hit) for r in frame.resolutions if r.hit is not None]
        cf.callees = frame.callees
        targetctx.insert_user_function(cf, cf.fndesc, [library])
        bindings.track_compiled(cf)
        check_compiled(cf)
    finally:
        _in_progress.pop()
        resolve.frames().pop()


# ---------------------------------------------------------------------------------------------
