"""The pipeline driver: Python function + argument types + context -> typed, lowered device function.

Reads like the pipeline it runs:
  1. front end  (Numba's untyped and typed passes; globals resolved through the context)
  2. lowering   (Numba's lowering into our library, no wrappers)
  3. records    (globals read, overrides used, callees) for redefinition tracking
Kernels add a wrapper and go through the back end in ``compiler.kernel``.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import dataclasses
from dataclasses import dataclass

from numba.core import errors as nb_errors
from numba.core import funcdesc, lowering
from numba.core.compiler import CompilerBase, DefaultPassBuilder, Flags
from numba.core.target_extension import target_override
from numba.core.compiler_machinery import LoweringPass, PassManager, register_pass
from numba.core.typed_passes import (AnnotateTypes, IRLegalization,
                                     NoPythonSupportedFeatureValidation)

from ..errors import CompileError
from ..tracking import bindings, deps
from ..tracking.stats import counters
from . import constructs, resolve
from .fold_shapes import FoldArrayShapes
from ..tracking.fingerprint import fingerprint
from .records import GlobalRead, collect_global_reads

_lock = threading.RLock()


@dataclass(frozen=True)
class Options:
    """Compile options that change generated code (part of every cache key)."""
    fastmath: bool = False
    arch: str = "sm_90"
    opt: int = 3
    lineinfo: bool = False
    #: Kernel entry directives (``cuda.jit(max_registers=, launch_bounds=)``): they change only
    #: the kernel's own PTX, so device functions compile without them (``for_device``).
    max_registers: int = 0
    launch_bounds: tuple = ()

    def for_device(self):
        if not (self.max_registers or self.launch_bounds):
            return self
        return dataclasses.replace(self, max_registers=0, launch_bounds=())


class CompiledFunction:
    """One Python function compiled for one argument-type tuple in one context."""

    def __init__(self, pyfunc, context, argtypes, options):
        self.pyfunc = pyfunc
        self.context = context
        self.argtypes = tuple(argtypes)
        self.options = options
        self.restype = None
        self.declared_restype = None    # the return type a given signature declares
        self.fndesc = None
        self.library = None
        self.type_annotation = None
        self.global_reads: list[GlobalRead] = []
        self.overrides_used = []     # (host, Override) that lowering used
        self.resolutions = []        # (host, start layer, Override or None) looked up in typing
        self.checked_age = -1        # world age at which the records were last found valid
        self.world = -1              # same, for device functions used as specialisations
        self.callees: list[CompiledFunction] = []
        self.bad_calls = []        # (symbol, loc) left by lowering that the device cannot run
        self.mask = {}             # the override mask it was compiled under (resolve.Frame)
        self._ir_texts = None

    def ir_texts(self):
        """LLVM IR text of each lowered module (computed once; linking parses fresh copies)."""
        if self._ir_texts is None:
            from .backend import exact_remainders
            self._ir_texts = [exact_remainders(str(m)) for m in self.library.modules]
        return self._ir_texts

    @property
    def mangled_name(self):
        return self.fndesc.mangled_name

    @property
    def qualname(self):
        return f"{self.pyfunc.__module__}.{self.pyfunc.__qualname__}"

    def closure(self):
        """This function and every device function it calls, transitively, each once."""
        out, seen, stack = [], set(), [self]
        while stack:
            cf = stack.pop()
            if id(cf) in seen:
                continue
            seen.add(id(cf))
            out.append(cf)
            stack.extend(cf.callees)
        return out

    def __repr__(self):
        args = ", ".join(str(a) for a in self.argtypes)
        return f"<CompiledFunction {self.qualname}({args}) in {self.context.name!r}>"


# ---------------------------------------------------------------------------------------------
# Numba pipeline pieces


class _TrackingLower(lowering.Lower):
    """Numba's lowering, noting where a call the device cannot run was introduced."""

    def lower_inst(self, inst):
        before = len(self.module.globals)
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
            cf = _current_compiled()
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
        cf = _current_compiled()
        if cf is not None and state.func_ir.func_id.func is cf.pyfunc:
            # What the function reads, before lowering: a global array is lowered from the
            # snapshot its record keeps (compiler/target.py), never from the live array.
            cf.global_reads = collect_global_reads(state.func_ir)
        fndesc = funcdesc.PythonFunctionDescriptor.from_specialized_function(
            state.func_ir, state.typemap, state.return_type, state.calltypes,
            mangler=targetctx.mangler, inline=False, noalias=False,
            abi_tags=[state.flags.get_mangle_string()])
        with targetctx.push_code_library(library):
            lower = _TrackingLower(targetctx, library, fndesc, state.func_ir,
                                   metadata=state.metadata)
            lower.lower()
        state["fndesc"] = fndesc
        state.cr = fndesc          # tells Numba's pipeline runner that we are done
        return True


class _GPUPipeline(CompilerBase):
    def define_pipelines(self):
        dpb = DefaultPassBuilder
        pm = PassManager("gpureplace")
        pm.passes.extend(dpb.define_untyped_pipeline(self.state).passes)
        pm.add_pass(FoldArrayShapes, "fold constant array shapes")
        pm.passes.extend(dpb.define_typed_pipeline(self.state).passes)
        pm.add_pass(NoPythonSupportedFeatureValidation, "check supported features")
        pm.add_pass(IRLegalization, "legalise IR")
        pm.add_pass(AnnotateTypes, "annotate types")
        pm.add_pass(GPULowering, "lower to LLVM IR")
        pm.finalize()
        return [pm]


def _flags(options):
    flags = Flags()
    flags.no_compile = True
    flags.no_cpython_wrapper = True
    flags.no_cfunc_wrapper = True
    flags.nrt = False
    flags.error_model = "numpy"
    # lineinfo: line tables only (DebugDirectivesOnly), as numba-cuda's lineinfo=True
    flags.debuginfo = flags.dbg_directives_only = bool(options.lineinfo)
    flags.boundscheck = False
    if options.fastmath:
        flags.fastmath = True
    return flags


# ---------------------------------------------------------------------------------------------
# Compiling device functions

_cache = {}          # (pyfunc, context uid, mask key, argtypes, options) -> CompiledFunction
_in_progress = []    # CompiledFunction being compiled on this thread (innermost last)



def _current_compiled():
    return _in_progress[-1] if _in_progress else None


def forget(stale):
    """Drop compiled functions from the cache so their next use compiles them afresh."""
    ids = {id(cf) for cf in stale}
    with _lock:
        for key in [k for k, cf in _cache.items() if id(cf) in ids]:
            del _cache[key]
    counters["invalidations"] += len(ids)


def cache_key(pyfunc, context, mask, argtypes, options, restype=None):
    key = (pyfunc, context.uid, resolve._mask_key(mask), tuple(argtypes), options)
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
    refused with the chain that got there; a RecursionError all the same becomes a CompileError."""
    key = cache_key(pyfunc, context, mask, argtypes, options, restype)
    if getattr(_deep, "active", False):
        return _compile_device(pyfunc, context, mask, argtypes, options, restype, key)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and deps.check(hit) is None:
            return hit
    _deep.active = True
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
        f"{_qualname(pyfunc)} is nested too deeply for the compiler (Python's recursion limit, "
        f"raised to {_DEEP_RECURSION_LIMIT}, was reached): split deeply nested expressions or "
        f"calls into separate statements or functions", function=_qualname(pyfunc),
        filename=_filename(pyfunc), lineno=_firstline(pyfunc), chain=(_qualname(pyfunc),))


def _too_deep(pyfunc):
    """The error for a call that would nest device functions deeper than MAX_DEPTH."""
    funcs = [f.pyfunc for f in resolve.frames()] + [pyfunc]
    names = [_qualname(f) for f in funcs]
    shown = names if len(names) <= 8 else \
        names[:4] + [f"... ({len(names) - 7} more)"] + names[-3:]
    caller = funcs[-2]
    exc = CompileError(
        f"device functions nest more than {MAX_DEPTH} calls deep ({' -> '.join(shown)}), more "
        f"than the compiler follows: call fewer helpers inside one another (inline some, or "
        f"write a recursion as a loop)", function=_qualname(caller), filename=_filename(caller),
        lineno=_line_referring_to(caller, pyfunc.__name__), chain=())
    exc.complete = True           # the callers on the way out add nothing to the chain
    return exc


def _compile_device(pyfunc, context, mask, argtypes, options, restype, key):
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            # Cached code is reused only while its records still match the current bindings.
            if deps.check(hit) is None:
                return hit
            relinked = _relink(hit)
            if relinked is not None:
                _cache[key] = relinked
                return relinked
            forget([hit])
        for frame in resolve.frames():
            if frame.key == key:
                # Reported at the call that closes the cycle; the callers on the way out
                # prefix themselves to the chain.
                caller = resolve.frames()[-1].pyfunc
                raise CompileError(
                    f"recursive calls are not supported in device code ({_qualname(caller)} "
                    f"calls {_qualname(pyfunc)}, which is already being compiled for the same "
                    f"argument types); write the recursion as a loop",
                    function=_qualname(caller), filename=_filename(caller),
                    lineno=_line_referring_to(caller, pyfunc.__name__),
                    chain=(_qualname(pyfunc),))
        if len(resolve.frames()) >= MAX_DEPTH:
            raise _too_deep(pyfunc)
        cf = CompiledFunction(pyfunc, context, argtypes, options)
        cf.declared_restype = restype
        cf.mask = dict(mask or {})
        _run_front_end(cf, mask, key)
        _cache[key] = cf
        counters["device_compiles"] += 1
        return cf


def _relink(hit):
    """Reuse the lowered code of a stale function whose only changes are in what it calls.

    When a callee was redefined (a plain Python function bound to the same name, resolving
    through the context as before) or went stale itself, and the callee compiles again to the
    same return type, the caller's typed and lowered code is unchanged but for the callee's symbol:
    recompile the callees, rename the calls, keep the rest.  This is what makes a recompile after
    redefining a helper cost the helper, not every caller above it.  Returns the new
    CompiledFunction, or None when anything else changed (then the caller compiles afresh).
    """
    import inspect
    if hit.library is None or getattr(hit, "context_fp", None) is not None:
        return None
    if any(deps.resolution_changed(hit, res) for res in hit.resolutions):
        return None
    replaced, reads = {}, []
    for rec in hit.global_reads:
        if deps._read_changed(hit, rec) is None:
            reads.append(rec)
            continue
        now = deps.current_value(hit, rec)
        old_py, new_py = _device_pyfunc(rec.value), _device_pyfunc(now)
        if old_py is None or new_py is None or \
                not any(c.pyfunc is old_py for c in hit.callees):
            return None                   # a constant, a module, a kernel...: retype
        if inspect.signature(new_py) != inspect.signature(old_py):
            return None                   # the call folds its arguments (defaults) anew
        for res in hit.resolutions:
            if res.host is rec.value and (res.start is False or
                                          deps.resolution_changed(hit, res, now)):
                return None               # the new function would resolve differently
        replaced[id(old_py)] = (rec.value, now, new_py)
        reads.append(GlobalRead(rec.kind, rec.namespace, rec.name, now, rec.lineno, rec.owner,
                                fingerprint(now)))
    callees, renames = [], {}
    for c in hit.callees:
        old_new = replaced.get(id(c.pyfunc))
        if old_new is None and deps.check(c) is None:
            callees.append(c)
            continue
        new_py = c.pyfunc if old_new is None else old_new[2]
        try:
            n = compile_device(new_py, c.context, c.mask, c.argtypes, c.options,
                               c.declared_restype)
        except CompileError:
            return None                   # the full compile reports it, in the caller's terms
        if n.restype != c.restype:
            return None                   # the caller's typing depends on it: retype
        if n.mangled_name != c.mangled_name:
            renames[c.mangled_name] = n.mangled_name
        callees.append(n)
    cf = CompiledFunction(hit.pyfunc, hit.context, hit.argtypes, hit.options)
    for attr in ("restype", "fndesc", "library", "type_annotation", "overrides_used",
                 "bad_calls", "mask"):
        setattr(cf, attr, getattr(hit, attr))
    cf.global_reads = reads
    cf.callees = callees
    hosts = {id(old): new for old, new, _ in replaced.values()}
    cf.resolutions = [resolve.Resolution(hosts.get(id(r.host), r.host), r.start, r.candidates,
                                         r.line) for r in hit.resolutions]
    cf._ir_texts = [_rename_symbols(text, renames) for text in hit.ir_texts()]
    _, targetctx = cf.context.compilers()
    targetctx.insert_user_function(cf, cf.fndesc, [cf.library])
    bindings.track_compiled(cf)
    counters["relinks"] += 1
    return cf


def _device_pyfunc(value):
    """The Python function a callable compiles from when device code calls it (resolve.py): a
    plain function, a ``cuda.jit`` function's, a Numba CPU dispatcher's; else None."""
    import inspect
    if inspect.isfunction(value):
        return value
    from ..kernel import GPUFunction
    if isinstance(value, GPUFunction):
        return value.py_func
    py = getattr(value, "py_func", None)
    if inspect.isfunction(py) and hasattr(value, "targetoptions"):
        return py
    return None


def _rename_symbols(text, renames):
    import re
    for old, new in renames.items():
        text = re.sub(r'@("?)' + re.escape(old) + r'(?![-\w$.])', lambda m: f"@{m.group(1)}{new}",
                      text)
    return text


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
                function=_qualname(pyfunc), filename=_filename(pyfunc), lineno=line,
                chain=(_qualname(pyfunc),))


def _run_front_end(cf, mask, key):
    from .validate import check_compiled
    constructs.refuse(cf.pyfunc, _qualname(cf.pyfunc), _filename(cf.pyfunc))
    _refuse_fstrings(cf.pyfunc)
    typingctx, targetctx = cf.context.compilers()
    frame = resolve.Frame(cf.pyfunc, cf.context, mask, cf.options, key)
    library = targetctx.codegen().create_library(cf.qualname)
    resolve.frames().append(frame)
    _in_progress.append(cf)
    try:
        try:
            # Numba's generic @overload machinery asks "the current target" where to register
            # lowerings; make that ours, not the CPU's (whose registries it would reload).
            with target_override("gpureplace"):
                pipeline = _GPUPipeline(typingctx, targetctx, library, cf.argtypes,
                                        cf.declared_restype, _flags(cf.options), {})
                pipeline.compile_extra(cf.pyfunc)
        except CompileError as exc:
            if getattr(exc, "at_caller", False):
                exc.at_caller = False
                exc.chain = (_qualname(cf.pyfunc),)
            elif not getattr(exc, "complete", False):
                exc.chain = (_qualname(cf.pyfunc),) + tuple(exc.chain or (exc.function,))
            raise exc from None
        except (nb_errors.NumbaError, nb_errors.UnsupportedBytecodeError, NotImplementedError,
                TypeError, ValueError, AttributeError, KeyError, IndexError,
                AssertionError) as exc:
            raise _convert_error(cf.pyfunc, exc) from None
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
        cf.overrides_used = [(r.host, r.hit) for r in frame.resolutions if r.hit is not None]
        cf.callees = frame.callees
        targetctx.insert_user_function(cf, cf.fndesc, [library])
        bindings.track_compiled(cf)
        check_compiled(cf)
    finally:
        _in_progress.pop()
        resolve.frames().pop()


# ---------------------------------------------------------------------------------------------
# Errors


def _qualname(pyfunc):
    return getattr(pyfunc, "__qualname__", repr(pyfunc))


def _filename(pyfunc):
    code = getattr(pyfunc, "__code__", None)
    return code.co_filename if code else ""


def _firstline(pyfunc):
    code = getattr(pyfunc, "__code__", None)
    return code.co_firstlineno if code else 0


def _split_top(text):
    """``text`` split at the commas outside any brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


_OPERATORS = {"add": "+", "iadd": "+=", "sub": "-", "isub": "-=", "mul": "*", "imul": "*=",
              "truediv": "/", "itruediv": "/=", "floordiv": "//", "ifloordiv": "//=",
              "mod": "%", "imod": "%=", "pow": "**", "ipow": "**=", "lshift": "<<",
              "rshift": ">>", "and_": "&", "or_": "|", "xor": "^", "matmul": "@", "lt": "<",
              "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _no_implementation(msg):
    """Numba's "No implementation of function ... found for signature: >>> f(types)" in words
    that name the operation, or None for other messages."""
    import re
    m = re.search(r"No implementation of function Function\((?:<built-in function (\w+)>|"
                  r"<function (\w+)[^>]*>|[^)]*)\) found for signature:\s*\n\s*>>> (\w+)\((.*)\)\s*$",
                  msg, re.M)
    if not m:
        return None
    name = m.group(1) or m.group(2) or m.group(3)
    args = _split_top(m.group(4))
    if name == "getitem" and len(args) == 2:
        kernel = re.fullmatch(r"device_function\(([\w.<>]+)\.(\w+),.*\)", args[0])
        if kernel:
            fn = kernel.group(2)
            return (f"{fn}[...] launches a kernel from device code, which is not supported "
                    f"(no dynamic parallelism): call {fn}(...) instead, which runs it as a device "
                    f"function in the calling thread")
        return f"cannot index {args[0]} with {args[1]}"
    if name == "setitem" and len(args) == 3:
        return f"cannot store {args[2]} into {args[0]} at index {args[1]}"
    if name in _OPERATORS and len(args) == 2:
        return f"operator {_OPERATORS[name]} is not defined for {args[0]} and {args[1]}"
    unary = {"neg": "-", "pos": "+", "invert": "~", "not_": "not"}
    if name in unary and len(args) == 1:
        return f"unary operator {unary[name]} is not defined for {args[0]}"
    return f"{name}() has no implementation for argument types ({', '.join(args)})"


def _short_reason(msg):
    """The first meaningful lines of a Numba message, without its pipeline boilerplate."""
    import re
    msg = re.sub(r"\x1b\[[0-9;]*m", "", str(msg))
    # A typing template that raised says why in its own words: prefer those.
    m = re.search(r"raised a specific error:\s*\n\s*(?:\w+Error: )?(.+)", msg)
    if m:
        return m.group(1).strip()
    plain = _no_implementation(msg)
    if plain:
        return plain
    keep = []
    for line in msg.splitlines():
        s = line.strip()
        if not s:
            if keep:
                break
            continue
        if s.startswith(("During:", "File ", "- Resolution failure", "Failed in ",
                         "Rewrite ", "This error may have been caused", "The function")):
            if keep:
                break
            continue
        keep.append(s)
        if len(keep) >= 3:
            break
    return " ".join(keep) or msg.strip().splitlines()[0]


def _convert_error(pyfunc, exc):
    loc = getattr(exc, "loc", None)
    filename = getattr(loc, "filename", None) or _filename(pyfunc)
    lineno = getattr(loc, "line", None) or _firstline(pyfunc)
    reason = _short_reason(getattr(exc, "msg", None) or str(exc))
    if isinstance(exc, nb_errors.TypingError) and "Untyped global name" in reason:
        reason = reason.replace("Untyped global name", "cannot use global name")
    attr = re.search(r"Unknown attribute '(\w+)' of type Module\(<module '([\w.]+)'", reason)
    if attr:
        name, module = attr.groups()
        mod = sys.modules.get(module)
        if mod is not None and hasattr(mod, name):
            reason = (f"{module}.{name} has no device implementation: it cannot be called in "
                      f"kernels or device functions (give it one with "
                      f"Context.override({module}.{name}, ...))")
        else:
            reason = f"module {module!r} has no attribute {name!r}"
    if "UndefinedType" in reason:
        missing = _undefined_globals(pyfunc, lineno)
        if missing:
            reason = (f"name {missing[0]!r} is not defined (it is neither a global of "
                      f"{pyfunc.__module__} nor a builtin)")
    reason, lineno = _construct_reason(pyfunc, exc, reason, lineno)
    return CompileError(reason, function=_qualname(pyfunc), filename=filename, lineno=lineno,
                        chain=(_qualname(pyfunc),), detail=str(exc))


#: Python operations Numba's front end refuses by opcode, in the user's words.
_OPCODES = {
    "STORE_GLOBAL": "assigning a global variable is not supported in device code: a GPU thread "
                    "cannot change Python's globals; write the value into an array argument",
    "DELETE_GLOBAL": constructs.DEL_REASON,
    "IMPORT_NAME": constructs.IMPORT_REASON,
    "IMPORT_FROM": constructs.IMPORT_REASON,
    "GET_YIELD_FROM_ITER": "yield from is not supported in device code; write the loop out "
                           "(for v in it: yield v)",
}

#: Host builtins that build a container device code cannot hold: (what it builds, the kind).
_CONTAINER_BUILTINS = {"list": ("a list", "lists"), "dict": ("a dict", "dicts"),
                       "set": ("a set", "sets"), "frozenset": ("a set", "sets"),
                       "sorted": ("a list", "lists"), "bytearray": ("a byte array", "byte arrays"),
                       "bytes": ("a byte string", "strings"), "str": ("a string", "strings"),
                       "repr": ("a string", "strings"), "format": ("a string", "strings"),
                       "ascii": ("a string", "strings")}


#: Packages whose Python functions are library code when device code reaches them (Numba's
#: implementations of builtins, IPython's replacement of open); so is the standard library.
_LIBRARY_PACKAGES = frozenset({"numba", "IPython", "ipykernel", "llvmlite", "numpy"})


@functools.lru_cache(maxsize=None)
def _stdlib_dirs():
    import sysconfig
    paths = sysconfig.get_paths()
    return tuple(p for p in {paths.get("stdlib"), paths.get("platstdlib")} if p)


def is_library(pyfunc):
    """Whether ``pyfunc`` is a library's code rather than the user's (see _LIBRARY_PACKAGES)."""
    if _package(pyfunc) in _LIBRARY_PACKAGES:
        return True
    filename = _filename(pyfunc)
    return filename.startswith(_stdlib_dirs()) and "-packages" not in filename


def _package(pyfunc):
    """The top-level package that defines ``pyfunc`` (its globals' ``__name__``: a wrapper's
    ``__module__`` may name another, as IPython's open says it is io's)."""
    globs = getattr(pyfunc, "__globals__", None) or {}
    return (globs.get("__name__") or getattr(pyfunc, "__module__", None) or "").split(".", 1)[0]


def library_call_error(caller, callee, exc, loc):
    """The CompileError for a call from the user's ``caller`` into library code ``callee``
    that failed to compile (``exc``), at the caller's line: a library function other than
    Numba's implementations of builtins is host code; for those, what failed inside is said,
    prefixed with the builtin the line calls."""
    import builtins
    line = loc.line if loc is not None and getattr(loc, "filename", None) == _filename(caller) \
        else _line_referring_to(caller, callee.__name__)
    name = None
    for ins, at in instructions_with_lines(caller):
        if at == line and ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR",
                                         "LOAD_METHOD"):
            value = caller.__globals__.get(ins.argval, getattr(builtins, ins.argval, None))
            if value is callee or ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and \
                    ins.argval == callee.__name__:
                name = ins.argval
                break
    if _package(callee) == "numba":
        reason = exc.reason
        host = _host_callable_at(caller, line)
        if host is not None and host[0] in _CONTAINER_BUILTINS:
            reason = _host_callable_reason(host)
        elif host is not None and not reason.startswith(f"{host[0]}()"):
            reason = f"{host[0]}(): {reason}"
    else:
        reason = host_function_reason(name or callee.__name__, callee)
    new = CompileError(reason, function=_qualname(caller), filename=_filename(caller),
                       lineno=line, chain=(), detail=exc.detail or str(exc))
    new.at_caller = True          # the caller's own line: its compile starts the chain anew
    return new


def _construct_reason(pyfunc, exc, reason, lineno):
    """``(reason, line)`` in the user's terms for Numba's messages about Python constructs and
    host functions that device code cannot use (the message and line as they were otherwise).
    Most constructs are refused before the front end (compiler/constructs.py); this covers the
    functions whose source cannot be read, and what depends on types."""
    text = str(exc)
    if isinstance(exc, AttributeError) and "return_dynamic_user_exc" in text:
        return _dynamic_raise_reason(pyfunc, lineno), lineno
    if "set_try_status" in text or "Exception matching is limited" in text or \
            "Exception object cannot be stored" in text:
        return constructs.try_reason(), _line_of_op(pyfunc, lineno, ("NOP",), before=True)
    if "Unsupported context manager" in text or "construct is not supported" in text and \
            "with (context manager)" in text:
        return constructs.WITH_REASON, _line_of_op(pyfunc, lineno, (
            "BEFORE_WITH", "SETUP_WITH", "BEFORE_ASYNC_WITH", "SETUP_ASYNC_WITH"))
    if "yield in a closure" in text:
        return constructs.GENEXP_REASON, lineno
    if "Multiple argument raise" in text:
        return constructs.RAISE_FROM_REASON, lineno
    if "Illegal IR, del found" in text:
        return constructs.DEL_REASON, lineno
    m = re.search(r"unsupported opcode \((\w+)\) found(?:\. Raised from .*? \((\d+)\))?", text)
    if m:
        line = int(m.group(2)) if m.group(2) else lineno
        why = _OPCODES.get(m.group(1))
        return (why or f"the Python operation {m.group(1)} is not supported in device code"), line
    m = re.search(r"Unknown attribute '(\w+)' of type (list|reflected list|set|dict)\b", reason)
    if m or re.search(r"of type range_iter\w*", reason) and "'add'" in reason:
        kind = {"set": "sets", "dict": "dicts"}.get(m.group(2) if m else "set", "lists")
        return _container_reason(kind), lineno
    if "does not support keyword arguments" in text and "print" in text:
        return ("print() in device code takes no keyword arguments (sep=, end=, file= and flush= "
                "are the host's): it prints its arguments separated by spaces, one line per "
                "call, to the terminal's standard output; drop the keywords"), lineno
    m = re.search(r"Cannot determine Numba type of <class '(\w+)'>", reason)
    if m:
        host = _host_callable_at(pyfunc, lineno)
        if host is not None:
            return _host_callable_reason(host), lineno
    m = re.search(r"Type of variable '\$[^']*' cannot be determined", reason)
    if m:
        return ("the type of an intermediate value on this line cannot be determined (the front "
                "end cannot follow this expression); split it into simpler statements"
                + (", e.g. assign the := expression's value on a line of its own before the "
                   "condition" if _has_walrus(pyfunc, lineno) else "")), lineno
    if "unhashable type: 'dict'" in text:
        return ("a call with **keyword arguments is not supported in device code; pass the "
                "arguments by name, one by one"), lineno
    return reason, lineno


def _container_reason(kind):
    from .target import unsupported_message
    return unsupported_message(kind) + \
        (", filled in a loop" if kind in ("lists", "sets", "dicts") else "")


def _dynamic_raise_reason(pyfunc, lineno):
    """A raise (or assert message) whose arguments are not constants: Numba's GPU calling
    convention keeps only constant exception arguments, as numba-cuda's does."""
    asserts = any(ins.opname == "LOAD_ASSERTION_ERROR" and line == lineno
                  for ins, line in instructions_with_lines(pyfunc))
    if asserts:
        return ("assert with a message that is not a constant is not supported in device code: "
                "give it a constant message (assert x > 0, \"x must be positive\") or none; a "
                "failed assert stops the GPU thread and is not reported, as in numba-cuda without "
                "debug=True")
    return ("raise with exception arguments that are not constants is not supported in device "
            "code: pass constants only (raise ValueError(\"index out of range\")); a raised "
            "exception stops the GPU thread and is not reported, as in numba-cuda without "
            "debug=True, so write values you need to see into an array argument")


def _line_of_op(pyfunc, lineno, opnames, before=False):
    """The line of the first instruction named in ``opnames`` (with ``before``: the last one at
    or before ``lineno``), or ``lineno``."""
    lines = [line for ins, line in instructions_with_lines(pyfunc) if ins.opname in opnames]
    if before:
        lines = [line for line in lines if line <= lineno]
        return lines[-1] if lines else lineno
    return lines[0] if lines else lineno


def _has_walrus(pyfunc, lineno):
    tree = constructs._tree_of(pyfunc.__code__)
    if tree is None:
        return False
    import ast
    node, offset = tree
    return any(isinstance(n, ast.NamedExpr) and n.lineno + offset == lineno
               for n in ast.walk(node))


def _host_callable_at(pyfunc, lineno):
    """(name, value) of a builtin function or class read on ``lineno`` that Numba cannot
    type, or None."""
    import builtins
    import types as pytypes
    for ins, line in instructions_with_lines(pyfunc):
        if line != lineno or ins.opname not in ("LOAD_GLOBAL", "LOAD_NAME"):
            continue
        name = ins.argval
        value = pyfunc.__globals__.get(name, getattr(builtins, name, None))
        if isinstance(value, (pytypes.BuiltinFunctionType, type)) or \
                getattr(builtins, name, None) is value is not None:
            return name, value
    return None


def _host_callable_reason(host):
    name, value = host
    import builtins
    builds = _CONTAINER_BUILTINS.get(name)
    if builds is not None and value is getattr(builtins, name, None):
        return f"{name}() builds {builds[0]}: " + _container_reason(builds[1])
    return host_function_reason(name, value)


def host_function_reason(name, value=None):
    """Why ``name`` (a host function: a builtin such as open or input, or a library's Python
    function) cannot be called in device code."""
    import builtins
    if hasattr(builtins, name) or value is None:
        what = "a Python builtin"
    else:
        what = f"from {_package(value) or 'the host'}"
    return (f"{name}() is a host function ({what}) with no device implementation: kernels and "
            f"device functions cannot call it; do this on the host, before or after the launch")


def _undefined_globals(pyfunc, lineno):
    """Global names read by ``pyfunc`` (on ``lineno`` first) that are bound nowhere."""
    import builtins
    names = []
    for ins, line in instructions_with_lines(pyfunc):
        if ins.opname == "LOAD_GLOBAL":
            name = ins.argval
            if name not in pyfunc.__globals__ and not hasattr(builtins, name):
                names.append((line != lineno, name))
    return [n for _, n in sorted(names)]


def _line_referring_to(pyfunc, name):
    """The first line of ``pyfunc`` that loads the global (or closure variable) ``name``."""
    for ins, line in instructions_with_lines(pyfunc):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME") and ins.argval == name:
            return line
    return _firstline(pyfunc)


def instructions_with_lines(pyfunc):
    """(bytecode instruction, source line) pairs of ``pyfunc`` or of a code object (works on
    Python 3.10 too)."""
    import dis
    code = getattr(pyfunc, "__code__", pyfunc)
    line = code.co_firstlineno
    for ins in dis.get_instructions(code):
        pos = getattr(ins, "positions", None)
        if pos is not None and pos.lineno is not None:
            line = pos.lineno
        elif ins.starts_line:
            line = ins.starts_line
        yield ins, line
