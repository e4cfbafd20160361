"""The pipeline driver: Python function + argument types + context -> typed, lowered device function.

Reads like the pipeline it runs:
  1. front end  (Numba's untyped and typed passes; globals resolved through the context)
  2. lowering   (Numba's lowering into our library, no wrappers)
  3. records    (globals read, overrides used, callees) for redefinition tracking
Kernels add a wrapper and go through the back end in ``compiler.kernel``.
"""

from __future__ import annotations

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
from . import resolve
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
            self._ir_texts = [str(m) for m in self.library.modules]
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
    a signature given to cuda.jit declares (the value returned is converted to it)."""
    key = cache_key(pyfunc, context, mask, argtypes, options, restype)
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
    if isinstance(exc, AttributeError) and "set_try_status" in str(exc):
        reason = ("try/except is not supported in device code: a GPU thread cannot raise or "
                  "catch exceptions (check the condition with an if instead)")
    if "UndefinedType" in reason:
        missing = _undefined_globals(pyfunc, lineno)
        if missing:
            reason = (f"name {missing[0]!r} is not defined (it is neither a global of "
                      f"{pyfunc.__module__} nor a builtin)")
    return CompileError(reason, function=_qualname(pyfunc), filename=filename, lineno=lineno,
                        chain=(_qualname(pyfunc),), detail=str(exc))


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
    """(bytecode instruction, source line) pairs of ``pyfunc`` (works on Python 3.10 too)."""
    import dis
    line = pyfunc.__code__.co_firstlineno
    for ins in dis.get_instructions(pyfunc):
        pos = getattr(ins, "positions", None)
        if pos is not None and pos.lineno is not None:
            line = pos.lineno
        elif ins.starts_line:
            line = ins.starts_line
        yield ins, line
