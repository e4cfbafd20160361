"""Python statements and expressions that device code cannot run, refused before the front end.

Numba meets these deep in its pipeline and says so in its own terms ("Unknown attribute 'append'
of type list(undefined)", "Raised from None" at the ``def``); here each is named, at its line, with
what to write instead.  The function's source is read when it can be (exact constructs and lines);
without it (code built by ``exec``), its bytecode says most of the same.  Only what never compiles
is refused: a construct that might work is left to the front end.
"""

from __future__ import annotations

import ast
import dis
import functools
import inspect
import linecache
import re
import textwrap

from ..errors import CompileError

_HEAP = "it would need the heap, which device code does not have"
_LOCAL_ARRAY = ("fill a cuda.local.array(n, dtype) (or an array argument) in a for loop, or use "
                "a tuple of fixed length")

_COMPREHENSIONS = {
    ast.ListComp: "a list comprehension",
    ast.SetComp: "a set comprehension",
    ast.DictComp: "a dict comprehension",
}

TRY_REASON = ("a GPU thread cannot catch exceptions; test the condition with an if before the "
              "operation instead (e.g. if d != 0: q = n / d)")
WITH_REASON = ("the with statement is not supported in device code: a context manager runs host "
               "code on entry and exit; write its setup and cleanup as plain statements, or put "
               "the with block around the launch on the host")
GENEXP_REASON = ("generator expressions are not supported in device code; write the loop out "
                 "(s = 0, then for i in range(n): s += x[i])")
DEL_REASON = ("del is not supported in device code; a local variable needs no freeing: stop "
              "using it, or assign it a new value")
IMPORT_REASON = ("import is not supported inside device code; import the module at the top of "
                 "the file, outside the function (device code can use a module bound as a "
                 "global, e.g. math.sqrt)")
RAISE_FROM_REASON = ("raise ... from ... is not supported in device code; write raise "
                     "ValueError(\"...\") without from (a raised exception stops the GPU thread)")


def comprehension_reason(what):
    return f"{what} is not supported in device code ({_HEAP}); {_LOCAL_ARRAY}"


def global_reason(name):
    return (f"assigning the global {name!r} is not supported in device code: a GPU thread "
            f"cannot change Python's globals; write the value into an array argument instead")


def try_reason(kind="try/except"):
    if kind == "try/finally":
        return ("try/finally is not supported in device code (a GPU thread raises no exceptions "
                "to clean up after); write the finally block's statements after the try block's")
    return f"{kind} is not supported in device code: {TRY_REASON}"


def _try_kind(node):
    star = "*" if type(node).__name__ == "TryStar" else ""
    if not node.handlers:
        return "try/finally"
    return f"try/except{star}" + ("/finally" if node.finalbody else "")


class _Finder(ast.NodeVisitor):
    """The first construct device code cannot run, as (line, reason); lines are the source's."""

    def __init__(self):
        self.found = []

    def add(self, node, reason):
        self.found.append((node.lineno, reason))

    def visit_Try(self, node):
        self.add(node, try_reason(_try_kind(node)))
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_With(self, node):
        self.add(node, WITH_REASON)
        self.generic_visit(node)

    def visit_AsyncWith(self, node):
        self.add(node, "async with is not supported in device code (device functions cannot be "
                       "async); write its setup and cleanup as plain statements")
        self.generic_visit(node)

    def visit_comprehension_node(self, node):
        self.add(node, comprehension_reason(_COMPREHENSIONS[type(node)]))
        self.generic_visit(node)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_comprehension_node

    def visit_GeneratorExp(self, node):
        self.add(node, GENEXP_REASON)
        self.generic_visit(node)

    def visit_Delete(self, node):
        self.add(node, DEL_REASON)
        self.generic_visit(node)

    def visit_Import(self, node):
        self.add(node, IMPORT_REASON)

    visit_ImportFrom = visit_Import

    def visit_Raise(self, node):
        if node.cause is not None:
            self.add(node, RAISE_FROM_REASON)
        self.generic_visit(node)


_DEF_LINE = re.compile(r"^(\s*def\s)|(\s*async\s+def\s)|(.*(?<!\w)lambda(:|\s))|^(\s*@)")


def source_lines(code):
    """(lines, first line number) of the source of the function whose code is ``code``, as
    ``inspect.getsourcelines`` finds them, without its search of every imported module for the
    file (a few milliseconds a call, most of a small kernel's check here): the lines come from
    ``linecache`` by the code's file name (IPython registers its cells there), or, where it has
    none for a file (a zip import), from ``inspect``.  Raises OSError without source."""
    filename = code.co_filename
    generated = filename.startswith("<") and filename.endswith(">")   # exec's "<string>"
    if not generated:
        linecache.checkcache(filename)
    lines = linecache.getlines(filename)
    if not lines:
        if generated:                      # (inspect finds nothing more for these)
            raise OSError(f"no source for {filename}")
        return inspect.getsourcelines(code)
    at = code.co_firstlineno - 1
    if at >= len(lines):
        raise OSError(f"line {at + 1} is beyond the end of {filename}")
    while at > 0 and not _DEF_LINE.match(lines[at]):
        at -= 1
    return inspect.getblock(lines[at:]), at + 1


@functools.lru_cache(maxsize=2048)
def tree_of(code):
    """(AST of the function whose code is ``code``, line offset), or None without source."""
    try:
        lines, start = source_lines(code)
    except (OSError, TypeError, IndexError):
        return None
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            # the source found must be this function's (a lambda shares its line with others)
            if getattr(node, "name", "<lambda>") == code.co_name:
                return node, start - 1
    return None


def _global_stores(code):
    """(line, reason) of each assignment to (or del of) a global, nested functions included."""
    found = [(line, global_reason(ins.argval)) for ins, line in instructions_with_lines(code)
             if ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL")]
    for const in code.co_consts:
        if inspect.iscode(const):
            found += _global_stores(const)
    return found


def find(pyfunc):
    """(line, reason) of the first construct in ``pyfunc`` that device code cannot run, or
    None.  Nested functions (closures, lambdas) count as part of it."""
    found = _find_in_code(pyfunc.__code__)
    return min(found) if found else None


@functools.lru_cache(maxsize=2048)
def _find_in_code(code):
    tree = tree_of(code)
    if tree is None:
        return tuple(_find_in_bytecode(code))
    node, offset = tree
    finder = _Finder()
    for stmt in (node.body if isinstance(node.body, list) else [node.body]):
        finder.visit(stmt)
    return tuple([(line + offset, reason) for line, reason in finder.found] +
                 _global_stores(code))


def _find_in_bytecode(code):
    """What the bytecode shows, where there is no source: with, comprehensions, generator
    expressions, del, import, raise from, assignment to a global, try (at the first line it
    guards)."""
    found = []
    instructions = list(instructions_with_lines(code))
    lines = {ins.offset: line for ins, line in instructions}
    handled = False          # a with or comprehension explains an exception table
    for ins, line in instructions:
        op = ins.opname
        if op in ("SETUP_WITH", "BEFORE_WITH", "SETUP_ASYNC_WITH", "BEFORE_ASYNC_WITH"):
            found.append((line, WITH_REASON))
            handled = True
        elif op in ("LIST_APPEND", "SET_ADD", "MAP_ADD"):
            what = {"LIST_APPEND": "a list", "SET_ADD": "a set", "MAP_ADD": "a dict"}[op]
            found.append((line, comprehension_reason(f"{what} comprehension")))
            handled = True
        elif op.startswith("DELETE_") and op != "DELETE_GLOBAL":
            found.append((line, DEL_REASON))
        elif op == "IMPORT_NAME":
            found.append((line, IMPORT_REASON))
        elif op == "RAISE_VARARGS" and ins.arg == 2:
            found.append((line, RAISE_FROM_REASON))
        elif op in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            found.append((line, global_reason(ins.argval)))
        elif op == "SETUP_FINALLY":                     # 3.10
            found.append((line, try_reason("try")))
    if not handled:
        starts = _exception_table_starts(code)
        if starts:
            found.append((lines.get(starts[0], code.co_firstlineno), try_reason("try")))
    for const in code.co_consts:
        if inspect.iscode(const):
            if const.co_name == "<genexpr>":
                found.append((const.co_firstlineno, GENEXP_REASON))
            elif const.co_name in ("<listcomp>", "<setcomp>", "<dictcomp>"):
                what = f"a {const.co_name[1:-5]} comprehension"
                found.append((const.co_firstlineno, comprehension_reason(what)))
            else:
                found += _find_in_bytecode(const)
    return found


def _exception_table_starts(code):
    """Offsets where try blocks begin (3.11+: the code's exception table), first first."""
    table = getattr(code, "co_exceptiontable", b"")
    if not table:
        return []
    try:
        entries = dis._parse_exception_table(code)
    except Exception:       # a Python whose table dis reads differently
        return []
    return sorted(e.start for e in entries)


def async_reason(pyfunc, role):
    """Why an ``async def`` (or async generator) cannot be ``role`` ("a kernel", "a device
    function"), or None for a plain function."""
    flags = pyfunc.__code__.co_flags
    if flags & inspect.CO_ASYNC_GENERATOR:
        what = "an async generator (async def with yield)"
    elif flags & (inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE):
        what = "an async def function"
    else:
        return None
    return (f"{pyfunc.__qualname__} is {what}, which cannot be {role}: GPU code has no event "
            f"loop and nothing awaits it; define it with a plain def")


def kernel_reason(pyfunc):
    """Why ``pyfunc`` cannot be launched as a kernel though it can be called from one (a
    ``cuda.jit`` function serves as both, as in numba-cuda), or None: a generator, ``*args``."""
    name = pyfunc.__qualname__
    if inspect.isgeneratorfunction(pyfunc):
        return (f"{name} is a generator (its body has yield), which a kernel cannot be: a "
                f"kernel returns nothing, so write its results into an array argument (a "
                f"generator helper that a kernel iterates works: for v in gen(n))")
    for p in inspect.signature(pyfunc).parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            return (f"{name} takes *{p.name}, which a kernel cannot (a launch passes each "
                    f"argument as a parameter of its own): name the parameters (a kernel may "
                    f"call it as a device function)")
    return None


def refuse_in_cuda_cell(pyfunc):
    """Raise, at its ``def``, the CompileError of a ``%%cuda`` cell's function that the cell
    cannot make a kernel: an ``async def`` (never device code) or a generator (a kernel
    returns nothing; ``@cuda.jit(device=True)`` on it, or a plain cell, keeps it a helper that
    kernels iterate).  A ``cuda.jit`` generator is refused only when launched (it may be a
    device function), but a cell's plain ``def`` is meant as a kernel."""
    name = pyfunc.__qualname__
    why = async_reason(pyfunc, "a kernel")
    if why is None and inspect.isgeneratorfunction(pyfunc):
        why = (f"{name} is a generator (its body has yield), which a kernel cannot be: kernels "
               f"cannot yield; a kernel returns nothing, so write its results into an array "
               f"argument (a generator helper that kernels iterate, for v in {name}(n), works "
               f"decorated @cuda.jit(device=True) in the %%cuda cell, or defined in a plain "
               f"cell)")
    if why is not None:
        code = pyfunc.__code__
        raise CompileError(why, function=name, filename=code.co_filename,
                           lineno=code.co_firstlineno, chain=(name,))


def refuse_as_kernel(pyfunc, qualname):
    """Raise the CompileError of ``kernel_reason`` (at the def line), if there is one."""
    why = kernel_reason(pyfunc)
    if why is not None:
        code = pyfunc.__code__
        raise CompileError(why, function=qualname, filename=code.co_filename,
                           lineno=code.co_firstlineno, chain=(qualname,))


def signature_reason(pyfunc, role):
    """Why ``pyfunc``'s parameters do not suit ``role`` ("a kernel", "a device function"), or
    None: keyword-only parameters and ``**kwargs`` never do (Numba folds calls positionally)."""
    params = list(inspect.signature(pyfunc).parameters.values())
    name = pyfunc.__qualname__
    for p in params:
        if p.kind is p.VAR_KEYWORD:
            return (f"{name} takes **{p.name}, which {role} cannot: name each parameter it "
                    f"needs (def {pyfunc.__name__}(..., scale=1.0))")
    kwonly = [p.name for p in params if p.kind is p.KEYWORD_ONLY]
    if kwonly:
        plain = ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}"
                          for p in params if p.kind is not p.VAR_POSITIONAL)
        by_name = " (callers may still pass them by name)" if role != "a kernel" else ""
        return (f"{name} has keyword-only parameters ({', '.join(kwonly)}), which {role} "
                f"cannot have: make them ordinary parameters, def {pyfunc.__name__}({plain})"
                f"{by_name}")
    return None


def refuse(pyfunc, qualname, filename):
    """Raise a CompileError naming the first construct of ``pyfunc`` device code cannot run."""
    why = async_reason(pyfunc, "a device function")
    if why is not None:
        raise CompileError(why, function=qualname, filename=filename,
                           lineno=pyfunc.__code__.co_firstlineno, chain=(qualname,))
    hit = find(pyfunc)
    if hit is not None:
        line, reason = hit
        raise CompileError(reason, function=qualname, filename=filename, lineno=line,
                           chain=(qualname,))


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
