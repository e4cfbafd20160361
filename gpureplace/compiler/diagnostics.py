"""Compile errors in the user's terms: Numba's messages turned into one line that names the
construct, the user's line and what to do instead; refusals of constructs device code cannot run
(containers, ``with``, dynamic ``raise``, host functions, walrus); errors inside library code
reported at the user's call."""

from __future__ import annotations

import functools
import inspect
import re
import sys

import numpy as np

from numba.core import errors as nb_errors

from ..errors import CompileError, close_names
from . import constructs
from .constructs import instructions_with_lines
from .host_values import functions_container_reason, host_value_reason, int_enum_reason


def name_of(pyfunc):
    return getattr(pyfunc, "__qualname__", repr(pyfunc))


def file_of(pyfunc):
    code = getattr(pyfunc, "__code__", None)
    return code.co_filename if code else ""


def first_line_of(pyfunc):
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


#: What ``inspect.Signature.bind`` says of arguments that do not fit a signature.
_BIND_FAILURE = re.compile(r"missing a required argument|too many positional arguments|got an "
                           r"unexpected keyword argument|multiple values for argument|missing a "
                           r"required keyword-only argument")


def _says_nothing(m, msg):
    """Whether the specific error a typing template raised (``m``, a match of "raised a specific
    error" in Numba's message ``msg``: the error's class and text) says nothing about the call
    the user wrote: an assertion inside Numba (parfors' typing of ``reduce``, "len(args) != 3"),
    or the arguments not binding to the signature of one of several ``@overload`` generators
    while another candidate took them and refused their types (``np.dot(x, y)`` of two floats:
    its three-argument overload says "missing a required argument: 'out'"), which only means
    that candidate takes other arguments.  Then Numba's "No implementation ... for argument
    types (...)" is the truthful reason.  (When every candidate fails to bind, the binding
    error is the reason: the call has the wrong number of arguments.)"""
    if "Assertion" in (m.group(1) or ""):
        return True
    raised_from = re.search(r"raised from (\S+)", msg[m.end():])
    where = raised_from.group(1).replace("\\", "/") if raised_from else ""
    if where.rsplit(":", 1)[0].endswith("numba/cpython/setobj.py"):
        # Numba's set operators (numba/cpython/setobj.py's overloads, registered once a CPU
        # njit has compiled in the process) refuse numbers with "All arguments must be Sets":
        # said of ``v ^= b[i]`` on a float, that speaks of sets the user never wrote
        return True
    if not (_BIND_FAILURE.search(m.group(2)) and "numba/core/typing/templates.py" in where):
        return False
    candidates = re.split(r"- Of which \d+ did not match due to:", msg)[1:]
    return any(not _BIND_FAILURE.search(c) for c in candidates)


def _short_reason(msg):
    """The first meaningful lines of a Numba message, without its pipeline boilerplate."""
    msg = re.sub(r"\x1b\[[0-9;]*m", "", str(msg))
    # A typing template that raised says why in its own words: prefer those (the first that
    # says something about the call: see _says_nothing).
    m = next((m for m in re.finditer(r"raised a specific error:\s*\n\s*(?:(\w+Error): )?(.+)",
                                     msg) if not _says_nothing(m, msg)), None)
    if m:
        # with the lines that go on saying it (the two signatures of an overload whose typing
        # and implementation differ), up to Numba's "raised from" line
        said = [m.group(2).strip()]
        for line in msg[m.end():].splitlines()[1:]:
            s = line.strip()
            if not s or s.startswith(("raised from", "During:", "File ")) or len(said) >= 4:
                break
            said.append(re.sub(r"\s+", " ", s))
        if len(said) > 1:
            said[0] = said[0].rstrip(".")
        return "; ".join(said)
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
    return " ".join(keep) or next(iter(msg.strip().splitlines()), "")


def _unexplained(pyfunc, exc):
    """(reason, line of ``pyfunc`` or None) for ``exc``, an exception that says nothing: the
    place in Numba that raised it, and the statement of the user's function that Numba was
    compiling then (a ``loc``, ``inst`` or ``expr`` of its frames, the innermost one in the
    function's file)."""
    from numba.core import ir as nb_ir
    raised_in, line = None, None
    path = file_of(pyfunc)
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        code = frame.f_code
        if "numba" in code.co_filename.replace("\\", "/").split("/"):
            tail = code.co_filename.replace("\\", "/").rsplit("/numba/", 1)[-1]
            raised_in = f"numba/{tail}:{tb.tb_lineno}, in {code.co_name}"
        for name in ("loc", "inst", "expr"):
            value = frame.f_locals.get(name)
            at = value if isinstance(value, nb_ir.Loc) else getattr(value, "loc", None)
            if isinstance(at, nb_ir.Loc) and at.filename == path and at.line:
                line = at.line
                break
        tb = tb.tb_next
    where = f" ({raised_in})" if raised_in else ""
    return (f"Numba's compiler failed with a bare {type(exc).__name__}{where} while compiling "
            f"this line: what it does is not supported in device code (write it another way, "
            f"or with plainer types)"), line


def _generator_frames(exc):
    """``(template, traceback entry of the generator, entries before it)`` where ``exc`` was
    raised inside an ``@overload`` generator that Numba's typing called (a bug in the code that
    picks the implementation: a ``KeyError``, a ``NameError``), else None.  Numba's own errors
    (a ``TypingError`` a generator raises on purpose) are Numba's protocol, not this."""
    if isinstance(exc, nb_errors.NumbaError):
        return None
    from numba.core.typing.templates import _OverloadFunctionTemplate
    tb, outer = exc.__traceback__, []
    while tb is not None and tb.tb_next is not None:
        frame = tb.tb_frame
        template = frame.f_locals.get("self") if frame.f_code.co_name == "_build_impl" else None
        if isinstance(template, _OverloadFunctionTemplate):
            generator = getattr(template, "_overload_func", None)
            if tb.tb_next.tb_frame.f_code is getattr(generator, "__code__", None):
                return template, tb.tb_next, outer
        outer.append(tb)
        tb = tb.tb_next
    return None


def raised_by_generator(exc):
    """Whether ``exc`` was raised inside an ``@overload`` generator Numba's typing called."""
    return _generator_frames(exc) is not None


def _generator_error(pyfunc, exc):
    """The CompileError for ``exc``, raised inside an ``@overload`` (``overload_method``,
    ``overload_attribute``) generator while ``pyfunc`` was typed, or None: the exception's type
    and message, the generator's line where it raised (and the innermost line of the user's
    code below it, where that is another function's), at the line of ``pyfunc`` that makes the
    call."""
    from numba.core import ir as nb_ir

    from ..errors import describe_location, is_library_file
    found = _generator_frames(exc)
    if found is None:
        return None
    template, gen_tb, outer = found
    generator = template._overload_func
    path = file_of(pyfunc)
    call_line = None
    for tb in outer:                  # (the innermost statement of pyfunc being typed)
        for name in ("loc", "inst", "expr"):
            value = tb.tb_frame.f_locals.get(name)
            at = value if isinstance(value, nb_ir.Loc) else getattr(value, "loc", None)
            if isinstance(at, nb_ir.Loc) and at.filename == path and at.line:
                call_line = at.line
                break
    raised_at, tb = None, gen_tb.tb_next
    while tb is not None:             # (a helper of the user's that the generator called)
        code = tb.tb_frame.f_code
        if not is_library_file(code.co_filename):
            raised_at = (code, tb.tb_lineno)
        tb = tb.tb_next
    from .overload_redefinitions import method_templates
    methods = method_templates(generator)
    if methods:
        key = methods[0].key
        kind = "overload_attribute" if not getattr(methods[0], "is_method", False) \
            else "overload_method"
        of = f"{getattr(key, '__name__', key)}.{methods[0]._attr}"
    else:
        kind, of = "overload", getattr(template.key, "__name__", None) or str(template.key)
    if is_linalg_check(exc):
        # (np.linalg.inv, norm ...: Numba's generator asks for SciPy's LAPACK first)
        err = CompileError(linalg_reason(pyfunc, call_line), function=name_of(pyfunc),
                           filename=path, lineno=call_line or first_line_of(pyfunc),
                           chain=(name_of(pyfunc),), detail=str(exc))
        err.typing, err.lowering, err.array_return = True, False, False
        return err
    said = str(exc)
    reason = f"{type(exc).__name__}: {said}" if said else type(exc).__name__
    where = describe_location(generator.__code__.co_filename, gen_tb.tb_lineno)
    reason += (f" raised by {generator.__name__}, the @{kind} generator of {of} "
               f"({where})")
    if raised_at is not None:
        code, line = raised_at
        reason += f", in {code.co_name} ({describe_location(code.co_filename, line)})"
    import traceback
    detail = "".join(traceback.format_exception(type(exc), exc, gen_tb))
    err = CompileError(reason, function=name_of(pyfunc), filename=path,
                       lineno=call_line or first_line_of(pyfunc), chain=(name_of(pyfunc),),
                       detail=detail)
    err.typing = err.lowering = err.array_return = False     # (the user's own exception)
    return err


def convert_error(pyfunc, exc):
    generated = _generator_error(pyfunc, exc)
    if generated is not None:
        return generated
    loc = getattr(exc, "loc", None)
    filename = getattr(loc, "filename", None) or file_of(pyfunc)
    lineno = getattr(loc, "line", None) or first_line_of(pyfunc)
    reason = _short_reason(getattr(exc, "msg", None) or str(exc))
    if not reason:
        # an exception without a message (a bare ``assert`` failing in one of Numba's typing
        # templates): what failed, where, and the user's line Numba was at
        reason, at = _unexplained(pyfunc, exc)
        if at is not None and getattr(loc, "line", None) is None:
            lineno = at
    ufunc = re.search(r"Untyped global name '(\w+)'.*?Cannot determine Numba type of <class "
                      r"'gpureplace\.cuda_vectorize\.\w+\.(CUDAG?UFunc)'>",
                      str(exc), re.S)
    if ufunc:
        name, kind = ufunc.group(1), ufunc.group(2)
        decorator = "cuda.guvectorize" if kind == "CUDAGUFunc" else "cuda.vectorize"
        reason = (f"Untyped global name '{name}': {name} is a {decorator} function, which "
                  f"launches from the host over whole arrays; device code cannot call it (call "
                  f"a cuda.jit(device=True) function with its element code instead)")
    elif isinstance(exc, nb_errors.TypingError) and "Untyped global name" in reason:
        reason = reason.replace("Untyped global name", "cannot use global name")
    no_impl = re.match(r"(\w+)\(\) has no implementation for argument types", reason)
    if no_impl:
        # the callable as the user's line spells it (np.dot, functools.reduce), not as Numba
        # names its implementation (pow's device meaning is the intrinsic ufunc_pow)
        shown = _spelled_at(pyfunc, lineno, no_impl.group(1))
        if shown:
            reason = shown + reason[len(no_impl.group(1)):]
    returned = re.match(r"No conversion from (.+) to (.+) for '\$[^']*return_value[^']*'",
                        reason)
    if returned:
        # a function whose declared return type (a cuda.jit signature) its return cannot
        # convert to: Numba names its internal return variable, "defined at None"
        got, declared = returned.groups()
        reason = (f"{pyfunc.__name__} returns {got}, which cannot convert to {declared}, the "
                  f"return type its signature declares: return a {declared}, or declare the "
                  f"return type it has")
    array_return = reason.startswith("Only accept returning of array passed into the function")
    if array_return:
        # Numba's check, for a function (often one of Numba's NumPy implementations) that
        # returns an array other than one of its arguments
        numpy_call = _numpy_call_at(pyfunc, lineno)
        if not numpy_call and getattr(loc, "line", None) is None:
            lineno = _last_return_line(pyfunc) or lineno
        reason = _array_return_reason(f"{numpy_call}() returns a new array") if numpy_call \
            else ("this function returns an array that is neither one of its arguments nor a "
                  "view of one (a[i], a[1:], a.T, a.reshape(...)): device code cannot allocate "
                  "a new one (there is no heap), and a cuda.local.array ends with the function "
                  "that made it; pass the output array in as an argument")
    attr = re.search(r"Unknown attribute '(\w+)' of type Module\(<module '([\w.]+)'", reason)
    if attr:
        name, module = attr.groups()
        if getattr(loc, "line", None) is None:
            # (Numba's error has no location here: the line that reads the attribute)
            lineno = line_reading_attribute(pyfunc, name) or lineno
        mod = sys.modules.get(module)
        value = getattr(mod, name, None) if mod is not None else None
        if isinstance(value, np.ndarray):
            from .typing_context import NAME, unreadable_array
            reason = f"{module}.{name} is " + unreadable_array(
                value, "Numba cannot type it").replace(NAME, f"{module}.{name}")
        elif mod is not None and hasattr(mod, name) and not callable(value):
            reason = (f"{module}.{name} is a {type(value).__module__}.{type(value).__qualname__}"
                      f" object, which device code cannot read (numbers, arrays, tuples of them "
                      f"and functions can)")
        elif module.split(".")[:2] == ["numba", "cuda"] and mod is not None and \
                hasattr(mod, name):
            # (a cell or module still importing numba-cuda's: the port changes that import)
            reason = (f"{module}.{name} is numba-cuda's kernel language; gpureplace compiles its "
                      f"own: import it with `from gpureplace import cuda` (then cuda.{name})")
        elif debugger_entry(value) is not None:
            reason = debugger_reason(debugger_entry(value))      # (sys.breakpointhook)
        elif mod is not None and hasattr(mod, name):
            reason = (f"{module}.{name} has no device implementation: it cannot be called in "
                      f"kernels or device functions (give it one with "
                      f"Context.override({module}.{name}, ...))")
        else:
            reason = f"module {module!r} has no attribute {name!r}"
    missing_attr = re.fullmatch(r"module '[\w.]+' has no attribute '(\w+)'", reason) or \
        re.match(r"libdevice has no function __nv_(\w+)", reason) or \
        re.match(r"cuda\.\w+ has no attribute '(\w+)'", reason)
    if missing_attr and getattr(loc, "line", None) is None:
        # (Python's own AttributeError, raised while the front end read the module: no location)
        lineno = line_reading_attribute(pyfunc, missing_attr.group(1)) or lineno
    module_attr = re.fullmatch(r"module '([\w.]+)' has no attribute '(\w+)'", reason)
    if module_attr and module_attr.group(1) in sys.modules:
        names = [n for n in dir(sys.modules[module_attr.group(1)]) if not n.startswith("_")]
        reason += close_names(module_attr.group(2), names)
    if "UndefinedType" in reason:
        missing = _undefined_globals(pyfunc, lineno)
        if missing:
            reason = (f"name {missing[0]!r} is not defined (it is neither a global of "
                      f"{pyfunc.__module__} nor a builtin)")
    scalar_indexed = re.match(r"cannot (?:index (\w+) with|store \w+ into (\w+) at index)",
                              reason)
    if scalar_indexed and _is_number_type(scalar_indexed.group(1) or scalar_indexed.group(2)):
        reason = _scalar_indexed_reason(pyfunc, filename, lineno, reason,
                                        scalar_indexed.group(1) or scalar_indexed.group(2))
    if "as a callable" in reason and "No type info available for" in reason:
        reason = _not_callable_reason(pyfunc, filename, lineno, reason)
    if reason.startswith("Unsupported use of cell variable"):
        reason, lineno = _cell_variable_reason(pyfunc, lineno)
    reason, lineno = _construct_reason(pyfunc, exc, reason, lineno)
    reason, lineno = _kernel_language_reason(pyfunc, exc, reason, lineno)
    if reason.startswith("Cannot modify readonly array"):
        reason = _read_only_write_reason(pyfunc, filename, lineno, reason)
    if "NRT required but not enabled" in reason:
        stmt = _LOWERING_AT.search(str(exc))
        if stmt is not None and re.match(r"\w[\w.$]*\[[^\]]*\] = ", stmt.group("stmt")):
            reason = ("assigning an array to a slice of another copies through a temporary "
                      "array when the two may share memory, which device code cannot allocate "
                      "(there is no heap); copy element by element in a loop (a[i, 1 + k] = "
                      "b[i, k]), or assign one number to the whole slice (a[i, :] = 0)")
        else:
            reason = ("this line needs Numba's runtime to allocate memory, which device code "
                      "does not have (there is no heap); work element by element")
    kind = re.match(r"(lists|dicts|sets) are not supported in device code \(they need a heap\)",
                    reason)
    if kind and not is_library(pyfunc):
        reason, lineno = _container_site(pyfunc, reason, lineno, kind.group(1))
    if "Unknown attribute '_allocate'" in reason:
        # Numba's allocation of a new array, reached from a line of the user's
        reason, where = _allocation_reason(pyfunc, str(exc))
        if where is not None:
            filename, lineno = where
    err = CompileError(reason, function=name_of(pyfunc), filename=filename, lineno=lineno,
                       chain=(name_of(pyfunc),), detail=str(exc))
    err.typing = isinstance(exc, nb_errors.TypingError)
    err.lowering = isinstance(exc, nb_errors.LoweringError)
    err.array_return = array_return
    # (what it needs a heap for: said as its caller's call having no device implementation when
    # this is a library's code, library_call_error)
    err.heap_use = _heap_use(reason)
    # (pdb.set_trace(), breakpoint(): the simulator, which runs the kernel as Python, can skip
    # its compile to PTX, the one thing that refuses them)
    err.simulator_only = DEBUGGER_PHRASE in reason
    return err


_LOWERING_AT = re.compile(r'During: (?:lowering|typing of [^"\n]*?) "?(?P<stmt>[^\n]*?)"? at '
                         r'(?P<file>[^\n]+?) \((?P<line>\d+)\)')


def _allocation_reason(pyfunc, text):
    """``(reason, (file, line) or None)`` for Numba's "Unknown attribute '_allocate'": an
    operation that makes a new array (Numba's CPU runtime allocates it) reached device code; the
    line is the last of ``pyfunc``'s own file that Numba's message names."""
    where, statement = None, ""
    own = file_of(pyfunc)
    for m in _LOWERING_AT.finditer(text):
        if m.group("file") == own:
            where, statement = (own, int(m.group("line"))), m.group("stmt")
    if re.search(r"= getitem\(value=\w[\w.$]*, index=", statement):
        what = "indexing an array by an array (or a list) makes a new array"
    else:
        what = ("this line makes a new array (indexing by an array, a copy, an operation on "
                "whole arrays)")
    return (f"{what}, which device code cannot do (there is no heap); work element by element, "
            f"writing into an array passed in or a cuda.local.array"), where


def _last_return_line(pyfunc):
    """Line of ``pyfunc``'s last ``return`` (where it returns an array it may not), or None."""
    last = None
    try:
        for ins, line in constructs.instructions_with_lines(pyfunc):
            if ins.opname in ("RETURN_VALUE", "RETURN_CONST"):
                last = line
    except (TypeError, ValueError):
        return None
    return last


def _array_return_reason(what):
    """The reason for Numba's "Only accept returning of array passed into the function", for
    ``what`` returns the array."""
    return (f"{what}, which device code cannot allocate (there is no heap); pass the output "
            f"array in as an argument, or use cuda.local.array for scratch space")


class _AlsoNumbas(CompileError):
    """A compile error that is also one of Numba's (the second base of a subclass), so code
    written for numba-cuda (``except TypingError``) catches it; rendered as a CompileError."""

    def __init__(self, reason, **where):
        CompileError.__init__(self, reason, **where)
        self.msg, self.loc = self._message(), None

    def _render_traceback_(self):
        return [f"CompileError: {self._message()}"]


class TypingCompileError(_AlsoNumbas, nb_errors.TypingError):
    """A compile error whose cause is a typing error: also Numba's ``TypingError``.  Made only
    where a compile the user asked for ends (``for_user``), never inside Numba's type
    inference, which takes a TypingError for "try the next overload" and would bury the
    precise error."""


class LoweringCompileError(_AlsoNumbas, nb_errors.LoweringError):
    """A compile error whose cause is Numba's ``LoweringError`` (an extension's lowering that
    fails, say): also a ``LoweringError``, as numba-cuda raises it."""


def for_user(exc):
    """The error a compile the user asked for raises: a typing cause is also a TypingError, a
    lowering one a LoweringError."""
    if isinstance(exc, _AlsoNumbas):
        return exc
    if getattr(exc, "typing", False):
        make = TypingCompileError
    elif getattr(exc, "lowering", False):
        make = LoweringCompileError
    else:
        return exc
    out = make(exc.reason, function=exc.function, filename=exc.filename, lineno=exc.lineno,
               chain=exc.chain, detail=exc.detail)
    out.typing, out.lowering = make is TypingCompileError, make is LoweringCompileError
    out.simulator_only = getattr(exc, "simulator_only", False)
    return out.with_traceback(exc.__traceback__)


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


def in_standard_library(filename):
    """Whether ``filename`` is a module of Python's standard library (not an installed package)."""
    return filename.startswith(_stdlib_dirs()) and "-packages" not in filename


def is_library(pyfunc):
    """Whether ``pyfunc`` is a library's code rather than the user's (see _LIBRARY_PACKAGES)."""
    return package_of(pyfunc) in _LIBRARY_PACKAGES or in_standard_library(file_of(pyfunc))


def package_of(pyfunc):
    """The top-level package that defines ``pyfunc`` (its globals' ``__name__``: a wrapper's
    ``__module__`` may name another, as IPython's open says it is io's)."""
    globs = getattr(pyfunc, "__globals__", None) or {}
    return (globs.get("__name__") or getattr(pyfunc, "__module__", None) or "").split(".", 1)[0]


def is_linalg_check(exc):
    """Whether ``exc`` is the ImportError of Numba's check for SciPy's BLAS / LAPACK
    (``numba/np/linalg.py``'s ``ensure_blas`` / ``ensure_lapack``), which its linear algebra
    (``np.dot``, ``@``, ``np.linalg``) makes while typing or lowering a call."""
    if not isinstance(exc, ImportError):
        return False
    tb, last = exc.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None:
        return False
    code = last.tb_frame.f_code
    return code.co_name in ("ensure_blas", "ensure_lapack") and \
        code.co_filename.replace("\\", "/").endswith("numba/np/linalg.py")


def linalg_reason(pyfunc, lineno):
    """Why the linear algebra called on ``lineno`` of ``pyfunc`` cannot run in device code."""
    what = _linalg_call_at(pyfunc, lineno) if lineno else None
    return (f"{what or 'this line'}: linear algebra (BLAS/LAPACK) has no device implementation "
            f"(Numba's calls the host's BLAS and LAPACK libraries); write the loop yourself (a "
            f"dot product: s = 0.0, then for i in range(a.size): s += a[i] * b[i]), or do it on "
            f"the host before or after the launch")


def _linalg_call_at(pyfunc, lineno):
    """``np.dot()`` / ``np.linalg.inv()`` as ``lineno`` spells it, or "a @ b" for the
    operator, or None."""
    import numpy
    dotted = _dotted_at(pyfunc, lineno)
    globs = getattr(pyfunc, "__globals__", {})
    for parts in dotted:
        root = globs.get(parts[0])
        if len(parts) > 1 and getattr(root, "__name__", "").split(".")[0] == "numpy":
            return ".".join(parts) + "()"
        if len(parts) == 1 and callable(root) and root in (numpy.dot, numpy.vdot,
                                                           numpy.matmul):
            return parts[0] + "()"             # (from numpy import dot)
    for ins, line in instructions_with_lines(pyfunc):
        if line == lineno and ins.opname in ("BINARY_OP", "BINARY_MATRIX_MULTIPLY",
                                             "INPLACE_MATRIX_MULTIPLY") and \
                (ins.opname != "BINARY_OP" or ins.argrepr.startswith("@")):
            return "the @ operator (matrix product)"
    return None


def _dotted_at(pyfunc, lineno):
    """The dotted names ``lineno`` of ``pyfunc`` reads (``["np", "linalg", "inv"]``: a global
    and the attributes read from it one after another), in order."""
    dotted, current = [], None
    try:
        pairs = list(instructions_with_lines(pyfunc))
    except (TypeError, ValueError):
        return []
    for ins, line in pairs:
        if line != lineno:
            current = None
        elif ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF"):
            current = [ins.argval]
            dotted.append(current)
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and current is not None:
            current.append(ins.argval)
        else:
            current = None
    return dotted


def _heap_use(reason):
    """What a refusal of ``convert_error`` (its ``reason``) says the code needs a heap for, as
    "uses lists" / "allocates memory through Numba's runtime" / "makes a new array"; None for
    other refusals.  A caller that reached this code inside a library says so of its own
    call (library_call_error)."""
    m = re.search(r"\b(\w+(?: \w+)?) are not supported in device code \(they need a heap\)",
                  reason)
    if m:
        return f"uses {m.group(1)}"
    if "needs Numba's runtime to allocate memory" in reason or \
            "copies through a temporary array" in reason:
        return "allocates memory through Numba's runtime"
    if "makes a new array" in reason or "allocates a new array" in reason or \
            "returns a new array" in reason:
        return "makes a new array"
    return None


#: The words of every refusal of a debugger's entry (what the simulator's compile looks for).
DEBUGGER_PHRASE = "stops in the debugger only in the CPU simulator"


def debugger_entry(value):
    """``pdb.set_trace()`` / ``breakpoint()``: how a refusal names ``value`` when it is a way
    into a Python debugger, else None."""
    import builtins
    if value is None:
        return None
    if value is getattr(builtins, "breakpoint", None):
        return "breakpoint()"
    # (what is bound there now: pytest, for one, puts its own debugger's methods in
    # pdb.set_trace and sys.breakpointhook)
    if _same(value, getattr(sys, "breakpointhook", None)) or \
            _same(value, getattr(sys, "__breakpointhook__", None)):
        return "sys.breakpointhook()"
    if _same(value, getattr(sys.modules.get("pdb"), "set_trace", None)):
        return "pdb.set_trace()"
    module = getattr(value, "__module__", None) or ""
    if module.split(".")[0] in ("pdb", "bdb", "ipdb", "pudb") or \
            module == "IPython.core.debugger":
        return f"{module}.{getattr(value, '__name__', 'set_trace')}()"
    return None


def _same(value, other):
    """``value`` is ``other`` (a bound method: the same method of the same object)."""
    if value is other:
        return True
    return inspect.ismethod(value) and inspect.ismethod(other) and \
        value.__func__ is other.__func__ and value.__self__ is other.__self__


def debugger_reason(shown):
    """Why ``shown`` (a debugger's entry, ``pdb.set_trace()``) cannot be compiled: the simulator
    runs kernels as Python, where it stops; compiled device code cannot stop in pdb."""
    return (f"{shown} {DEBUGGER_PHRASE}, which runs kernels as Python "
            f"(GPUREPLACE_BACKEND=simulator); compiled device code cannot stop in pdb, so the "
            f"compile to PTX refuses it (the simulator skips that compile with "
            f"GPUREPLACE_SIM_COMPILE=0); remove the call to run the kernel on the GPU")


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
    m = re.search(r"Untyped global name '(\w+)': ((?:a|an) [^\n]*?, which device code cannot "
                  r"read[^\n]*)", text)
    if m:                 # (typing_context.resolve_value_type: it raised, looked at; an array)
        from .typing_context import NAME
        return f"{m.group(1)} is {m.group(2).replace(NAME, m.group(1))}", lineno
    m = re.search(r"Untyped global name '(\w+)': Cannot determine Numba type of <class", text)
    if m and (why := host_value_reason(pyfunc, m.group(1), lineno)):
        return why, lineno
    if "Cannot type list element type" in reason:
        # a global list holding what Numba cannot type (functions: say so, as for a tuple)
        return functions_container_reason(pyfunc, lineno) or _container_reason("lists"), lineno
    if re.search(r"operator % is not defined for (?:Literal\[str\]|unicode_type)", reason):
        return formatting_reason("%"), lineno
    if re.search(r"Unknown attribute 'format(?:_map)?' of type (?:Literal\[str\]|unicode_type)",
                 reason):
        return formatting_reason("str.format()"), lineno
    m = re.search(r"Cannot cast IntEnum<\w+>\((\w+)\) to (\w+)", text)
    if m:
        return int_enum_reason(pyfunc, lineno, *m.groups()), lineno
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


#: The registers of a thread's position, each three numbers (.x, .y, .z), and what they count in.
_DIM3 = {"threadIdx": "block", "blockIdx": "grid", "blockDim": "block", "gridDim": "grid"}

#: How many, in words (cuda.grid's results).
_COUNT = {1: "one", 2: "two", 3: "three"}


def _kernel_language_reason(pyfunc, exc, reason, lineno):
    """``(reason, line)`` for the kernel language's beginner mistakes, which Numba refuses at the
    right line but in words that give no hint of what to write (the message and line as they
    were otherwise): cuda.grid() without its number of dimensions, cuda.threadIdx used as a
    number or with an axis misspelt, .format() on a string, a builtin's name rebound at module
    level, an index past the end of a shape, cuda.grid(1) unpacked into two names."""
    text = str(exc)
    m = re.search(r"No implementation of function Function\(<device intrinsic "
                  r"cuda\.(grid|gridsize)>\) found for signature:\s*\n\s*>>> \w+\((.*)\)", text)
    if m and "raised a specific error" not in text:
        # (no argument, two, a float: the template's own words cover a constant out of range
        # and a value known only at run time)
        return _grid_arguments_reason(*m.groups()), lineno
    registers = "|".join(_DIM3)
    m = re.search(rf"Unknown attribute '(\w+)' of type cuda\.({registers})\b", reason)
    if m:
        attr, register = m.groups()
        # (cuda.threadIdx.X: difflib finds no match for another case, the lower case does)
        hint = close_names(attr, "xyz") or close_names(attr.lower(), "xyz")
        return (f"cuda.{register} has no attribute {attr!r}{hint}: its attributes are x, y "
                f"and z (cuda.{register}.x)"), lineno
    m = re.match(rf"failed to unpack cuda\.({registers})\b", reason)
    if m:
        register = m.group(1)
        return (f"cuda.{register} cannot be unpacked (it is no tuple): read its numbers one "
                f"by one, cuda.{register}.x, cuda.{register}.y and cuda.{register}.z"), lineno
    m = re.search(rf"(?<![\w.])cuda\.({registers})(?![\w.])", reason)
    if m and "numba-cuda's kernel language" not in reason:   # (numba.cuda's stub: said so)
        register = m.group(1)
        return (f"cuda.{register} is used here as a number, but it holds three, one per "
                f"dimension: write cuda.{register}.x (or .y, .z in a 2-D or 3-D "
                f"{_DIM3[register]})"), lineno
    m = re.match(r"Modified builtin '(\w+)'", reason)
    if m:
        return _rebound_builtin_reason(pyfunc, m.group(1)), lineno
    if reason.startswith("tuple index out of range"):
        return _tuple_index_reason(exc, lineno) or reason, lineno
    m = re.match(r"failed to unpack (.+)", reason) or \
        re.search(r"wrong tuple length for [^:]*: ', 'expected (\d+), got (\d+)", reason)
    if m:
        return _unpack_reason(pyfunc, lineno, m), lineno
    return reason, lineno


def _grid_arguments_reason(name, args):
    """cuda.grid / cuda.gridsize (``name``) called with ``args`` (Numba's types, as text) that
    are not one number of dimensions."""
    # (Numba's constants, Literal[int](1), as the user wrote them)
    shown = [re.sub(r"^Literal\[\w+\]\((.*)\)$", r"\1", arg) for arg in _split_top(args)]
    given = f"it was given {', '.join(shown)}" if shown else "it was given no argument"
    if name == "grid":
        examples = ("i = cuda.grid(1) is the thread's index in a 1-D grid, i, j = cuda.grid(2) "
                    "its indices in a 2-D grid")
    else:
        examples = ("n = cuda.gridsize(1) is the number of threads in a 1-D grid, nx, ny = "
                    "cuda.gridsize(2) the numbers in a 2-D grid")
    return (f"cuda.{name}(ndim) takes the number of dimensions of the grid, a constant 1, 2 or "
            f"3 ({given}): {examples}")


def _rebound_builtin_reason(pyfunc, name):
    """Numba's "Modified builtin 'range'": the name ``pyfunc`` calls is a global of its module
    bound to something else, which Numba will not call in place of the builtin."""
    globs = getattr(pyfunc, "__globals__", None) or {}
    if name not in globs:
        return (f"the name {name!r} is bound to something other than Python's builtin {name}() "
                f"where {pyfunc.__name__} is defined, so {name}() here is not the builtin: "
                f"rename that variable")
    value = globs[name]
    shown = repr(value) if len(repr(value)) <= 40 else f"a {type(value).__name__}"
    module = globs.get("__name__") or getattr(pyfunc, "__module__", "?")
    return (f"the global name {name!r} is bound to {shown} in the module of {pyfunc.__name__} "
            f"({module}), so {name}() here is not Python's builtin {name}(): rename that global "
            f"(or del {name} to get the builtin back)")


def _type_inferer(exc):
    """Numba's ``TypeInferer`` that raised ``exc`` (the innermost on its traceback), or None: its
    ``func_ir`` and the types it had found say what the user's line was doing."""
    from numba.core.typeinfer import TypeInferer
    found, tb = None, exc.__traceback__
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if isinstance(candidate, TypeInferer):
            found = candidate
        tb = tb.tb_next
    return found


def _type_found(infer, var):
    """The type ``infer`` had found for the IR variable ``var``, or None."""
    typevar = infer.typevars.get(var.name)
    return getattr(typevar, "type", None) if typevar is not None else None


def _user_name(var):
    """The name the user wrote for the IR variable ``var``, or None for Numba's temporaries."""
    name = var.unversioned_name
    return None if name.startswith("$") else name


def _tuple_index_reason(exc, lineno):
    """Numba's "tuple index out of range" for a constant index on ``lineno``: which tuple, how
    many entries it has; for ``a.shape[k]`` (or strides), how many dimensions ``a`` has.  None
    where the statement is not found."""
    from numba.core import ir as nb_ir
    from numba.core import types as nb_types
    infer = _type_inferer(exc)
    if infer is None:
        return None
    for block in infer.func_ir.blocks.values():
        for stmt in block.body:
            expr = getattr(stmt, "value", None)
            if not (isinstance(stmt, nb_ir.Assign) and stmt.loc.line == lineno and
                    isinstance(expr, nb_ir.Expr) and expr.op == "static_getitem" and
                    isinstance(expr.index, int)):
                continue
            tup = _type_found(infer, expr.value)
            if not isinstance(tup, nb_types.BaseTuple) or -len(tup) <= expr.index < len(tup):
                continue
            try:
                made = infer.func_ir.get_definition(expr.value)
            except KeyError:
                made = None
            if isinstance(made, nb_ir.Expr) and made.op == "getattr" and \
                    made.attr in ("shape", "strides") and \
                    isinstance(_type_found(infer, made.value), nb_types.Array):
                array = _user_name(made.value) or "the array"
                ndim = _type_found(infer, made.value).ndim
                return (f"{array}.{made.attr}[{expr.index}] is out of range: {array} has {ndim} "
                        f"dimension{'s' if ndim != 1 else ''}, so {array}.{made.attr} has "
                        f"{_entries(f'{array}.{made.attr}', ndim)}")
            name = _user_name(expr.value)
            shown = f"{name}[{expr.index}]" if name else f"index {expr.index}"
            return (f"{shown} is out of range: {name or 'the tuple'} is a tuple of "
                    f"{_entries(name or 'it', len(tup), ('value', 'values'))}")
    return None


def _entries(of, n, noun=("entry", "entries")):
    """"2 entries: t[0] and t[1]" -- the ``n`` entries of the tuple ``of``, named."""
    if n == 0:
        return f"no {noun[1]}"
    named = f"{of}[0]" if n == 1 else f"{of}[0] and {of}[1]" if n == 2 else \
        f"{of}[0] to {of}[{n - 1}]"
    return f"{n} {noun[n != 1]}: {named}"


def _unpack_reason(pyfunc, lineno, m):
    """Numba's "failed to unpack int64" / "wrong tuple length" (``m``, its match) for the
    unpacking on ``lineno``: how many values there are, how many names; for cuda.grid(n) (or
    gridsize), what it returns and what to write."""
    if m.lastindex == 2:                     # (a tuple of m[2] values, unpacked into m[1] names)
        names, values, what = int(m.group(1)), int(m.group(2)), None
    else:
        names = next((ins.arg for ins, line in instructions_with_lines(pyfunc)
                      if line == lineno and ins.opname == "UNPACK_SEQUENCE"), None)
        values, what = 1, m.group(1)
    call = _grid_call_at(pyfunc, lineno)
    into = f"{names} names" if names else "several names"
    if call is not None and call[1] == values:
        name, ndim = call
        single = "i = cuda.grid(1)" if name == "grid" else "n = cuda.gridsize(1)"
        several = {2: "i, j", 3: "i, j, k"} if name == "grid" else {2: "nx, ny", 3: "nx, ny, nz"}
        returns = "one int" if ndim == 1 else f"a tuple of {_COUNT[ndim]} ints"
        written = single if ndim == 1 else f"{several[ndim]} = cuda.{name}({ndim})"
        said = (f"cuda.{name}({ndim}) returns {returns}, which cannot be unpacked into {into}: "
                f"write {written}")
        # (the call that does return as many as the names: the grid the line may have meant)
        other = names if names in (2, 3) else 2 if ndim == 1 else None
        if other is not None:
            said += (f"; cuda.{name}({other}) returns a tuple of {_COUNT[other]} "
                     f"({several[other]} = cuda.{name}({other}))")
        return said
    if what is not None:
        return f"cannot unpack {what}, a single value, into {into}"
    return f"cannot unpack a tuple of {values} values into {into}"


def _grid_call_at(pyfunc, lineno):
    """``("grid", n)`` for a call cuda.grid(n) with a constant n on ``lineno`` (gridsize the
    same), or None."""
    from .intrinsics import indexing
    globs = getattr(pyfunc, "__globals__", None) or {}
    value = None                   # (what the instructions so far on the line loaded)
    for ins, line in instructions_with_lines(pyfunc):
        called = next((n for n in ("grid", "gridsize")
                       if value is not None and value is getattr(indexing, n)), None)
        if line != lineno:
            value = None
        elif ins.opname == "LOAD_CONST" and called is not None:
            if isinstance(ins.argval, int) and ins.argval in _COUNT:
                return called, ins.argval
            value = None
        elif ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            value = globs.get(ins.argval)
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and value is not None:
            try:              # (cuda.threadIdx.x raises on the host: no value outside a kernel)
                value = getattr(value, ins.argval, None)
            except Exception:
                value = None
        else:
            value = None
    return None


def _container_site(pyfunc, reason, lineno, kind):
    """``(reason, line)`` for the refusal of a list (dict, set: ``kind``) that device code typed
    where it is used (Numba refuses the call that takes it: ``weights[j]`` lines after
    ``weights = [...]``): at the assignment that builds it, naming the variable and the line
    that uses it, with the list written as a tuple where it is never changed.  Unchanged where
    no literal of that kind assigned to a name read on ``lineno`` is found (the line builds it
    itself, or the function's source cannot be read)."""
    found = _container_built_at(pyfunc, lineno, kind)
    if found is None:
        return reason, lineno
    line, name, as_tuple = found
    said = f"the {kind[:-1]} {name} is built here (and used on line {lineno}): {reason}"
    if as_tuple is not None:
        said += f" (as a tuple: {name} = {as_tuple})"
    return said, line


#: The literal that builds each kind of container (ast node classes, by the kind's name).
_CONTAINER_LITERALS = {"lists": "List", "dicts": "Dict", "sets": "Set"}


def _container_built_at(pyfunc, lineno, kind):
    """``(line, name, tuple)``: the assignment of a ``kind`` literal (``x = [...]``) to a name
    that ``lineno`` of ``pyfunc`` reads (the last such before it; in a loop, the first after
    it), and the literal's items written as a tuple where it is a non-empty list the function
    never changes (no ``x[i] = ...``, no method call, no ``+=``), else None in its place; None
    where there is none, or the line builds it itself."""
    import ast
    tree = constructs.tree_of(pyfunc.__code__) if hasattr(pyfunc, "__code__") else None
    literal = getattr(ast, _CONTAINER_LITERALS.get(kind, ""), None)
    if tree is None or literal is None:
        return None
    node, offset = tree
    read = sorted((n for n in ast.walk(node) if isinstance(n, ast.Name) and
                   isinstance(n.ctx, ast.Load) and n.lineno + offset == lineno),
                  key=lambda n: n.col_offset)
    built, changed = {}, set()
    for n in ast.walk(node):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and isinstance(n.value, literal):
            for target in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                if isinstance(target, ast.Name):
                    built.setdefault(target.id, []).append((n.lineno + offset, n.value))
        elif isinstance(n, ast.Subscript) and not isinstance(n.ctx, ast.Load) or \
                isinstance(n, ast.Attribute):
            changed.add(getattr(n.value, "id", None))
        elif isinstance(n, ast.AugAssign):
            changed.add(getattr(n.target, "id", None))
    for name in dict.fromkeys(n.id for n in read):
        sites = built.get(name)
        if not sites:
            continue
        before = [site for site in sites if site[0] < lineno]
        line, value = max(before, key=lambda s: s[0]) if before else \
            min(sites, key=lambda s: s[0])
        if line == lineno:
            return None
        as_tuple = None
        if literal is ast.List and value.elts and name not in changed:
            as_tuple = ast.unparse(ast.Tuple(elts=value.elts, ctx=ast.Load()))
            if len(as_tuple) > 60:
                as_tuple = None
        return line, name, as_tuple
    return None


def type_in_words(ty):
    """``ty``, a Numba type of a value the user's code made, as the user would say it: "an int
    (1)" for Numba's ``Literal[int](1)``, "float32", "a tuple of 2 values (1, 2)"; where a
    message names what a function returns, Numba's spelling of constants means nothing to
    someone who wrote ``return 1``."""
    from numba.core import types as nb_types
    if isinstance(ty, nb_types.Literal):
        value = ty.literal_value
        kind = {str: "a string", bool: "a bool", int: "an int", float: "a float"}.get(
            type(value))
        if kind is not None:
            return f"{kind} ({value!r})"
    if isinstance(ty, nb_types.Optional):
        return f"{type_in_words(ty.type)} on some paths and None on others"
    if isinstance(ty, (nb_types.Boolean, nb_types.Number)):
        return str(ty)                       # (as the user's signatures spell it: float32)
    if isinstance(ty, nb_types.BaseTuple):
        items = [repr(each.literal_value) if isinstance(each, nb_types.Literal) else str(each)
                 for each in ty.types]
        return (f"a tuple of {len(items)} value{'s' if len(items) != 1 else ''} "
                f"({', '.join(items)}{',' if len(items) == 1 else ''})")
    if isinstance(ty, nb_types.Array):
        return f"an array ({ty})"
    return str(ty)


def formatting_reason(how):
    """Why formatting a string with ``how`` ("%", "str.format()") cannot compile: one wording for
    every way of building a string from values (f-strings say the same, frontend.py), so that
    each names the way the line wrote and what to write instead."""
    return (f"formatting a string with {how} is not supported in device code (a string would "
            f"need the heap); a raise takes a constant message (raise ValueError(\"index out "
            f"of range\")), and print takes the values as arguments (print(\"bad\", i))")


def _container_reason(kind):
    from .host_only import unsupported_message
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
    tree = constructs.tree_of(pyfunc.__code__)
    if tree is None:
        return False
    import ast
    node, offset = tree
    return any(isinstance(n, ast.NamedExpr) and n.lineno + offset == lineno
               for n in ast.walk(node))


def _numpy_call_at(pyfunc, lineno):
    """``np.name`` of the first NumPy function called on ``lineno`` of ``pyfunc``, or None."""
    import numpy as np
    module = None
    for ins, line in instructions_with_lines(pyfunc):
        if line != lineno:
            continue
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            module = pyfunc.__globals__.get(ins.argval)
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and module is np:
            return f"np.{ins.argval}"
    return None


def _host_callable_at(pyfunc, lineno):
    """(name, value) of a builtin function or class read on ``lineno`` that Numba cannot
    type, or None."""
    found = _host_callables_at(pyfunc, lineno)
    return found[0] if found else None


def _host_callables_at(pyfunc, lineno):
    """[(name, value)] of the builtin functions and classes read on ``lineno``, in order."""
    import builtins
    import types as pytypes
    found = []
    for ins, line in instructions_with_lines(pyfunc):
        if line != lineno or ins.opname not in ("LOAD_GLOBAL", "LOAD_NAME"):
            continue
        name = ins.argval
        value = pyfunc.__globals__.get(name, getattr(builtins, name, None))
        if isinstance(value, (pytypes.BuiltinFunctionType, type)) or \
                getattr(builtins, name, None) is value is not None:
            found.append((name, value))
    return found


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
    debugger = debugger_entry(value)
    if debugger is not None:
        return debugger_reason(debugger)
    if hasattr(builtins, name) or value is None:
        what = "a Python builtin"
    else:
        what = f"from {package_of(value) or 'the host'}"
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


def _not_callable_reason(pyfunc, filename, lineno, reason):
    """A call of a global that holds no function (a helper's name rebound to a number)."""
    import linecache
    line = linecache.getline(filename or "", lineno or 0)
    glob = getattr(pyfunc, "__globals__", {})
    for name in re.findall(r"(?<![\w.])([A-Za-z_]\w*)\s*\(", line):
        if name in glob and not callable(glob[name]):
            value = glob[name]
            shown = repr(value) if len(repr(value)) <= 40 else type(value).__name__
            return (f"{name!r} is called here, but the global {name} is "
                    f"{type(value).__name__} {shown}, not a function (was it rebound?)")
    return reason


def _read_only_write_reason(pyfunc, filename, lineno, reason):
    """A store into a read-only array, said of what the array is after Numba's words (which
    numba-cuda's users and tests know: "Cannot modify readonly array of type: ..."): a global
    (or closure) array, which device code reads as a constant -- as a global record's write is
    refused (constant_writes.py) -- or a read-only argument."""
    import linecache
    line = linecache.getline(filename or "", lineno or 0)
    m = re.match(r"\s*([A-Za-z_]\w*)\s*\[.*\]\s*(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=)", line)
    name = m.group(1) if m else None
    code = getattr(pyfunc, "__code__", None)
    closure = dict(zip(code.co_freevars, pyfunc.__closure__ or ())) if code else {}
    if name is not None and (name in closure or (code is not None and
                                                 name not in code.co_varnames and
                                                 name in getattr(pyfunc, "__globals__", {}))):
        scope = "closure variable" if name in closure else "global"
        return (f"{reason}: {name} is a {scope} array, which device code reads as a constant "
                f"(what is written would be lost); pass the array as a kernel argument to "
                f"write it")
    which = f"{name} is" if name else "the array is"
    return (f"{reason}: {which} read-only here (a read-only host array or "
            f"__cuda_array_interface__, or a global array passed in, which device code reads "
            f"as a constant); write into a writable array argument instead")


def _is_number_type(name):
    return re.fullmatch(r"(u?int(8|16|32|64)|float(16|32|64)|complex(64|128)|bool|boolean|"
                        r"Literal\[\w+\]\(.*\))", name) is not None


def _scalar_indexed_reason(pyfunc, filename, lineno, reason, ty):
    """A number indexed as an array (a scalar passed where the kernel takes an array): the
    parameters indexed on that line, named."""
    import linecache
    line = linecache.getline(filename or "", lineno or 0)
    try:
        params = list(inspect.signature(pyfunc).parameters)
    except (TypeError, ValueError):
        params = []
    indexed = [p for p in params if re.search(rf"(?<![\w.]){re.escape(p)}\s*\[", line)]
    target = re.match(r"\s*(\w+)\s*\[.*\]\s*(?:[-+*/%&|^]|//|\*\*|<<|>>)?=(?!=)", line)
    if target is not None and target.group(1) in indexed:
        if reason.startswith("cannot store"):
            indexed = [target.group(1)]           # the array stored into
        elif len(indexed) > 1:
            indexed.remove(target.group(1))       # an array read from
    if not indexed:
        return f"{reason}: a number ({ty}) is indexed here as if it were an array"
    which = f"argument {indexed[0]!r} is" if len(indexed) == 1 else \
        f"one of the arguments {', '.join(repr(p) for p in indexed)} is"
    return (f"{which} a number ({ty}) where this line indexes an array; pass an array (a "
            f"1-element array to hold one value)")


def _cell_variable_reason(pyfunc, lineno):
    """Numba's "Unsupported use of cell variable": a function defined inside device code that
    calls itself, or reads a variable its enclosing function assigns again; at the inner
    function's line."""
    import types as pytypes
    code = getattr(pyfunc, "__code__", None)
    cells = set(getattr(code, "co_cellvars", ()))
    for const in getattr(code, "co_consts", ()):
        if isinstance(const, pytypes.CodeType) and cells & set(const.co_freevars):
            shared = sorted(cells & set(const.co_freevars))
            what = ("calls itself" if const.co_name in shared else
                    f"reads {', '.join(repr(n) for n in shared)} of the enclosing function")
            return (f"the function {const.co_name} defined inside {pyfunc.__name__} {what}, "
                    f"which device code cannot compile (a closure over a cell variable); "
                    f"define {const.co_name} at module level as a plain helper and pass it what "
                    f"it needs as arguments"), const.co_firstlineno
    return ("a function defined inside this one reads a variable of it that device code cannot "
            "share (a cell variable); define that function at module level and pass it what it "
            "needs as arguments"), lineno


def _spelled_at(pyfunc, lineno, name):
    """How ``lineno`` of ``pyfunc`` spells the callable Numba calls ``name`` (``np.dot`` for
    ``dot``, ``pow`` for its device intrinsic ``ufunc_pow``): the dotted global read there whose
    last part is ``name`` (or ends it after an underscore), or None."""
    names = [".".join(parts) for parts in _dotted_at(pyfunc, lineno)]
    for shown in names:
        if shown.rsplit(".", 1)[-1] == name:
            return shown
    for shown in names:
        if name.endswith("_" + shown.rsplit(".", 1)[-1]):
            return shown
    return None


def line_reading_attribute(pyfunc, name):
    """The first line of ``pyfunc`` that reads an attribute ``name`` (``math.foo``), or None."""
    for ins, line in instructions_with_lines(pyfunc):
        if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and ins.argval == name:
            return line
    return None


def line_referring_to(pyfunc, name):
    """The first line of ``pyfunc`` that loads the global (or closure variable) ``name``."""
    for ins, line in instructions_with_lines(pyfunc):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME") and ins.argval == name:
            return line
    return first_line_of(pyfunc)
