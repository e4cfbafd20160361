"""Errors of calls from the user's device code into library code (Numba's implementations of
builtins and NumPy, the standard library, IPython's), said at the user's call: what the line
calls, why it has no device implementation, and what to write instead."""

from __future__ import annotations

import re
import sys

from ..errors import CompileError
from .constructs import instructions_with_lines
from .diagnostics import (_CONTAINER_BUILTINS, _array_return_reason, _host_callable_reason,
                          _host_callables_at, _numpy_call_at, debugger_entry, file_of,
                          host_function_reason, line_referring_to, linalg_reason, name_of,
                          package_of)


def library_call_error(caller, callee, exc, loc):
    """The CompileError for a call from the user's ``caller`` into library code ``callee``
    that failed to compile (``exc``), at the caller's line: a library function other than
    Numba's implementations of builtins is host code; for those, what failed inside is said,
    prefixed with the builtin the line calls.  ``exc`` None: ``callee`` was not compiled (a
    debugger's entry, a library function whose parameters device code cannot have)."""
    line = _call_line(caller, callee, loc)
    name = _name_called(caller, callee, line)
    debugger = debugger_entry(callee)
    if package_of(callee) == "numba" and exc is not None and debugger is None:
        reason = exc.reason
        numpy_call = _numpy_call_at(caller, line)
        array_return = numpy_call and getattr(exc, "array_return", False)
        if array_return:
            # the NumPy function the user called, not the library function inside it
            reason = _array_return_reason(
                f"{numpy_call}() returns an array that is not one of its arguments")
        hosts = _host_callables_at(caller, line)
        # (a builtin that builds a container on the line is the one at fault: str in
        # len(str(x)), not len)
        host = next((h for h in hosts if h[0] in _CONTAINER_BUILTINS), None) or \
            (hosts[0] if hosts else None)
        heap = getattr(exc, "heap_use", None) if exc.filename != file_of(caller) else None
        what = None
        if heap is not None and not array_return:
            what = f"{host[0]}()" if host is not None else \
                f"{numpy_call}()" if numpy_call else _method_called_at(caller, line)
        if host is not None and host[0] in _CONTAINER_BUILTINS:
            reason = _host_callable_reason(host)
        elif numpy_call and numpy_call[3:] in _REDUCTIONS and _passes_axis(caller, line):
            reason = (f"{numpy_call}(..., axis=...) is not supported in device code: a "
                      f"reduction along an axis returns a new array, which device code cannot "
                      f"allocate; {numpy_call}(a) of the whole array is (a number), or reduce "
                      f"along the axis with a loop")
        elif what is not None:
            # a heap refusal inside Numba's implementation (quicksort's lists under a.sort(),
            # the string hash() asks hasattr with): not the user's construct, which is what
            # has no device implementation
            reason = _no_device_implementation(what, heap)
        elif host is not None and not reason.startswith(f"{host[0]}()"):
            reason = f"{host[0]}(): {reason}"
    else:
        reason = host_function_reason(name or callee.__name__, callee)
    detail = (exc.detail or str(exc)) if exc is not None else None
    new = CompileError(reason, function=name_of(caller), filename=file_of(caller),
                       lineno=line, chain=(), detail=detail)
    new.at_caller = True          # the caller's own line: its compile starts the chain anew
    # (still a TypingError for the user; a call that was not compiled fails in typing)
    new.typing = getattr(exc, "typing", False) if exc is not None else True
    new.lowering = getattr(exc, "lowering", False)
    new.simulator_only = debugger is not None
    return new


def linalg_error(caller, callee, exc, loc):
    """The CompileError for a call from the user's ``caller`` whose implementation (``callee``,
    Numba's ``np.dot`` or ``@``) is linear algebra: Numba's lowering asked for SciPy's BLAS
    (``exc``, its ImportError), which device code could not call anyway."""
    line = _call_line(caller, callee, loc)
    new = CompileError(linalg_reason(caller, line), function=name_of(caller),
                       filename=file_of(caller), lineno=line, chain=(), detail=str(exc))
    new.at_caller = True
    new.typing = new.lowering = False
    return new


def _call_line(caller, callee, loc):
    """The line of ``caller`` whose call reached ``callee``: the statement Numba is typing
    (``loc``) when it is the caller's, else the caller's statement being compiled further out
    on the stack (Numba lowering ``a.sort()`` compiles its quicksort there, typing Numba's code
    at Numba's own lines), else the line that reads ``callee`` by name."""
    if loc is not None and getattr(loc, "filename", None) == file_of(caller):
        return loc.line
    return _line_on_stack(caller) or line_referring_to(caller, callee.__name__)


def _line_on_stack(pyfunc):
    """The line of ``pyfunc`` that Numba is typing or lowering further out on the Python stack
    (the innermost ``loc``, ``inst`` or ``expr`` of a frame that is one of ``pyfunc``'s lines),
    or None."""
    from numba.core import ir as nb_ir
    path = file_of(pyfunc)
    try:
        lines = {line for _, line in instructions_with_lines(pyfunc)}
    except (TypeError, ValueError):
        return None
    frame = sys._getframe(1)
    while frame is not None:
        local = frame.f_locals
        for name in ("loc", "inst", "expr"):
            value = local.get(name)
            at = value if isinstance(value, nb_ir.Loc) else getattr(value, "loc", None)
            if isinstance(at, nb_ir.Loc) and at.filename == path and at.line in lines:
                return at.line
        frame = frame.f_back
    return None


def _name_called(caller, callee, line):
    """The name by which ``line`` of ``caller`` reads ``callee`` (a global, or an attribute of
    that name), or None."""
    import builtins
    for ins, at in instructions_with_lines(caller):
        if at == line and ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR",
                                         "LOAD_METHOD"):
            value = caller.__globals__.get(ins.argval, getattr(builtins, ins.argval, None))
            if value is callee or ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and \
                    ins.argval == callee.__name__:
                return ins.argval
    return None


def _method_called_at(pyfunc, lineno):
    """``a.sort()`` for the first method ``lineno`` of ``pyfunc`` calls on a local variable (a
    parameter, an array it made), or None."""
    previous = None
    for ins, line in instructions_with_lines(pyfunc):
        if line != lineno:
            previous = None
            continue
        method = ins.opname == "LOAD_METHOD" or (
            ins.opname == "LOAD_ATTR" and sys.version_info >= (3, 12) and (ins.arg or 0) & 1)
        if method and previous is not None and previous.opname in ("LOAD_FAST", "LOAD_DEREF"):
            return f"{previous.argval}.{ins.argval}()"
        previous = ins
    return None


#: NumPy's reductions that device code takes of a whole array only (README: without ``axis``).
_REDUCTIONS = frozenset({"sum", "prod", "mean", "var", "std", "min", "max", "amin", "amax",
                         "all", "any", "nansum", "nanprod", "nanmean", "nanmin", "nanmax",
                         "count_nonzero", "argmin", "argmax", "median", "nanmedian"})


def _passes_axis(pyfunc, lineno):
    """Whether ``lineno`` of ``pyfunc`` passes an ``axis`` (by keyword, as the source says)."""
    import linecache
    line = linecache.getline(file_of(pyfunc), lineno or 0)
    return re.search(r"\baxis\s*=", line) is not None


#: What to write instead of a call whose Numba implementation device code cannot run, by the
#: name of the function or method called (the rest: _NO_DEVICE_HINT).
_NO_DEVICE_HINTS = {
    "sort": "sort with a loop of your own over the array (an insertion sort suits a few elements "
            "a thread), or sort on the host before the launch",
    "getattr": "read the attribute itself (a.size, not getattr(a, \"size\"))",
}
_NO_DEVICE_HINTS["argsort"] = _NO_DEVICE_HINTS["sort"]
_NO_DEVICE_HINT = "write it as a loop over the values, or do it on the host before or after " \
    "the launch"


def _no_device_implementation(what, heap):
    """``what`` (``a.sort()``, ``hash()``) has no device implementation: Numba's implementation
    of it does what ``heap`` says (``uses lists``), which needs a heap."""
    called = what[:-2].rsplit(".", 1)[-1]
    hint = _NO_DEVICE_HINTS.get(called, _NO_DEVICE_HINT)
    return (f"{what} has no device implementation: Numba's implementation of it {heap}, and "
            f"device code has no heap; {hint}")
