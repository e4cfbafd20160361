"""How a ``%%cuda`` cell runs as the notebook's own cell: the input transformer that turns it into
the cell's code after one opening call, the traceback line put back as typed, and what an open
cell converts when it ends.  And what the cell hooks check around every cell: the bindings
compiled kernels depend on (``check_bindings``), after each cell and, where IPython's autoreload
has just reloaded a module, before it (``AutoreloadWatch``).  And what a cell's functions become:
gpureplace functions with the cell's options, showing their code with ``--show``."""

from __future__ import annotations

import ast
import functools
import inspect
import re
import sys
import types

from ..arch import normalize_arch
from ..compiler.constructs import refuse_in_cuda_cell
from ..compiler.overload_redefinitions import note_overload_redefinitions
from ..jit import GPUFunction, live_functions
from ..tracking import bindings, deps
from . import render


class CudaCellTransformer:
    """Turns a ``%%cuda`` cell into the cell's own Python code, preceded by one call that opens
    it: the first line ``%%cuda ARGS`` becomes ``get_ipython().run_cell_magic('cuda', ARGS,
    None)`` and the body's lines stay where they are.

    IPython's own cell-magic transformer would hand the body to the magic as a string, to be
    run inside the cell that calls it.  Run this way instead, the body is the cell: a syntax
    error fails the cell before anything runs, an exception fails it and stops Run All, the
    traceback shows the lines as typed (line 1 is ``%%cuda``), functions defined in it are
    named after this cell (``Cell In[n]``), and history and the cell hooks see one cell.  The
    functions are converted when the cell ends (``GPUReplace.finish_cells``).

    Registered among IPython's ``input_transformers_cleanup``, which run before the cell-magic
    transformer.
    """

    # Not applied when IPython only asks whether the input is complete: the terminal still
    # waits for the blank line that ends a cell magic.
    has_side_effects = True

    def __init__(self, magics, names):
        self.magics = magics
        self.names = tuple(names)      # the cell-magic names that are gpureplace's %%cuda

    def __call__(self, lines):
        try:
            return self._transform(lines)
        except Exception:              # never break every cell's input over one of ours
            return lines

    def _transform(self, lines):
        if not lines or not lines[0].startswith("%%") or re.match(r"%%\w+\?", lines[0]):
            return lines
        name, _, args = lines[0][2:].rstrip().partition(" ")
        if name not in self.names or not "".join(lines[1:]).strip():
            return lines               # an empty body: IPython's usage error, as for any magic
        if self.magics.shell.magics_manager.magics["cell"].get(name) != self.magics.cuda:
            return lines               # someone else's %%cuda registered after ours
        return [f"get_ipython().run_cell_magic({name!r}, {args!r}, None)\n"] + lines[1:]


class CudaCellDefinitions:
    """Makes each top-level ``def`` of a ``%%cuda`` cell a gpureplace function as it is defined,
    so that the cell itself can launch what it defines (``k[1, 32](x)`` below ``def k``): an
    AST transformer (IPython's ``ast_transformers``) that gives those definitions one more
    decorator, applied last, ``define_in_cell`` (the cell's options; a ``@cuda.jit`` function
    passes through, and gets them when the cell ends).  Other cells are left alone."""

    def __init__(self, names):
        self.names = tuple(names)

    def visit(self, node):
        try:
            if isinstance(node, ast.Module) and node.body and self._opens_cuda(node.body[0]):
                decorate_definitions(node.body[1:])
        except Exception:              # never break a cell over this
            pass
        return node

    def _opens_cuda(self, stmt):
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        return (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "run_cell_magic" and len(call.args) == 3
                and isinstance(call.args[0], ast.Constant) and call.args[0].value in self.names
                and isinstance(call.args[2], ast.Constant) and call.args[2].value is None)


def decorate_definitions(body):
    """Give each ``def`` and ``async def`` among the statements ``body`` (and in the blocks of
    its ``if``, ``for``, ``with``, ``try`` ... statements, which define top-level functions
    too) the decorator ``define_in_cell``, outermost
    (``__import__('gpureplace.ipython.cells').ipython.cells.define_in_cell``: no name added to
    the user's namespace)."""
    for stmt in body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                for block in getattr(stmt, field, None) or ():
                    # (an except handler or a match case holds its statements in .body)
                    decorate_definitions([block] if isinstance(block, ast.stmt) else
                                         getattr(block, "body", ()))
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            given = decorator_options(stmt)
            deco = ast.parse("__import__('gpureplace.ipython.cells').ipython.cells" + (
                f".defined_with({', '.join(map(repr, given))})" if given else
                ".define_in_cell"), mode="eval").body
            # (placed where the first decorator or the def is: the code's first line stays)
            at = stmt.decorator_list[0] if stmt.decorator_list else stmt
            for sub in ast.walk(deco):
                ast.copy_location(sub, at)
                sub.end_lineno, sub.end_col_offset = at.lineno, at.col_offset
            stmt.decorator_list.insert(0, deco)


#: The cell options a ``@cuda.jit(...)`` decorator may give itself, where its value stands
#: against the cell's (``context`` and ``arch`` are None when not given; ``fastmath`` is False
#: both when not given and when given False, so whether the decorator names it is read from
#: the cell's code)
DECORATOR_OPTIONS = ("fastmath",)


def decorator_options(stmt):
    """The options of ``DECORATOR_OPTIONS`` that a decorator of the ``def`` ``stmt`` gives by
    keyword (``@cuda.jit(fastmath=False)``), sorted."""
    return sorted({kw.arg for deco in stmt.decorator_list if isinstance(deco, ast.Call)
                   for kw in deco.keywords if kw.arg in DECORATOR_OPTIONS})


def define_in_cell(fn, given=()):
    """The decorator ``decorate_definitions`` gives: ``fn`` as the running ``%%cuda`` cell makes
    it (a plain function becomes a gpureplace function with the cell's options; ``given``: the
    options its own decorator sets, which the cell's leave alone).  A generator
    or an ``async def`` fails the cell at its ``def`` (``constructs.refuse_in_cuda_cell``), as
    any error does: what the cell defined above it is converted all the same, and the name
    keeps what it was bound to before the cell."""
    from . import extension
    ext = extension.loaded()
    if ext is None:
        return fn
    if isinstance(fn, types.FunctionType) and "." not in fn.__qualname__:
        refuse_in_cuda_cell(fn)
    return ext.define_in_cell(fn, given)


def defined_with(*given):
    """``define_in_cell`` for a ``def`` whose decorator sets the options ``given`` itself."""
    return functools.partial(define_in_cell, given=frozenset(given))


def show_first_line_as_typed(shell):
    """Tracebacks through the cell show its lines from ``linecache``, where IPython stored the
    transformed code: put back ``%%cuda ARGS`` as line 1 of the cell running this call."""
    import linecache
    frame = sys._getframe(1)
    for _ in range(8):
        frame = frame.f_back
        if frame is None:
            return
        filename = frame.f_code.co_filename
        if filename in getattr(shell.compile, "_filename_map", ()):
            break
    else:
        return
    entry = linecache.cache.get(filename)
    if frame.f_lineno != 1 or not entry or len(entry) != 4 or not entry[2]:
        return
    try:
        call = ast.parse(entry[2][0]).body[0].value
        name, args = (ast.literal_eval(a) for a in call.args[:2])
    except (SyntaxError, ValueError, AttributeError, IndexError, TypeError):
        return
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "run_cell_magic"):
        return
    entry[2][0] = f"%%{name} {args}".rstrip() + "\n"


class OpenCell:
    """A ``%%cuda`` cell whose body is running: what it converts when it ends."""

    def __init__(self, args, context, before, result):
        self.args = args
        self.context = context
        self.before = before           # the namespace when the body began (name -> object)
        self.result = result           # the running cell's ExecutionResult (None: unknown)
        self._given = {}               # id(GPUFunction) -> (it, the options its decorator set)

    def note_given(self, fn, given):
        """``fn``, a ``@cuda.jit`` function of the cell, sets the options ``given`` itself."""
        if given:
            self._given[id(fn)] = (fn, frozenset(given))

    def given(self, fn):
        """The options ``fn``'s decorator sets itself (``note_given``)."""
        held = self._given.get(id(fn))
        return held[1] if held is not None and held[0] is fn else frozenset()


# -- what the cell's functions become ----------------------------------------------------------
def made_in_cell(fn, opened):
    """A plain function of the ``%%cuda`` cell ``opened`` as a gpureplace function with the
    cell's options; with ``--show`` it shows its code whenever it compiles a specialisation
    (at its first launch with new argument types, or ``kernel.compile(sig)``)."""
    args = opened.args
    made = GPUFunction(fn, context=opened.context, fastmath=args.fastmath, arch=args.arch)
    if args.show:
        made.on_compile = show_hook(fn.__name__, args.show, made)
    return made


def cell_option_changes(fn, context, args, given=()):
    """What the ``%%cuda`` cell's options change of ``fn``, a ``@cuda.jit`` function the cell
    defined, where its decorator left them unset: ``(changes, kept)``, ``changes`` for
    ``fn.rebuilt`` (``--context`` and ``--arch`` unless the decorator gave another,
    ``--fastmath`` added unless it gave ``fastmath=False``: ``given``, the options it names),
    ``kept`` the options its decorator's value stands against."""
    changes, kept = {}, []
    if context is not None:
        if fn._context is None:
            changes["context"] = context
        elif fn._context is not context:
            kept.append(f"--context {args.context} (its decorator gives context="
                        f"{fn._context.name!r})")
    if args.arch:
        arch = normalize_arch(args.arch, "arch")
        if fn._arch is None:
            changes["arch"] = arch
        elif fn._arch != arch:
            kept.append(f"--arch {args.arch} (its decorator gives arch={fn._arch!r})")
    if args.fastmath and not fn._fastmath:
        if "fastmath" in given:
            kept.append("--fastmath (its decorator gives fastmath=False)")
        else:
            changes["fastmath"] = True
    return changes, kept


def with_cell_options(name, fn, context, args, given=()):
    """``fn`` (a ``@cuda.jit`` function the ``%%cuda`` cell defined) with the cell's options
    (``cell_option_changes``; a line says which its decorator's values override)."""
    changes, kept = cell_option_changes(fn, context, args, given)
    for what in kept:
        print(f"gpureplace: %%cuda {what} does not apply to {name}")
    return fn.rebuilt(**changes) if changes else fn


def show_compiled(name, what, fn, spec):
    """``%%cuda --show``: the code of ``spec``, a specialisation ``fn`` just compiled (labelled
    with its options where ``fn`` holds others of the same argument types, or where they are
    not the options a launch uses now), as ``%cuda_ptx`` and the others show it.  The typed IR
    of a specialisation loaded from the disk cache (which keeps none) comes from compiling its
    front end, which shows it through the hook."""
    variants = [v for v in fn._compiled_variants(calls=False, current=False)
                if v.argtypes == spec.argtypes]
    found = next((v for v in variants if v.value is spec), None)
    read, from_disk_too = fn._reader(what)
    if not from_disk_too and getattr(spec, "from_disk", False) and found is not None:
        fn._specialize(spec.argtypes, found.options, disk=False)
        return
    titles = render.variant_titles(name, variants)
    title = next((t for t, v in zip(titles, variants) if v is found), None)
    render.show([render.Listing(title or render.signature_text(name, spec.argtypes), what,
                                read(spec), spec.ptx if what == "ptx" else None)])


def show_hook(name, what, fn):
    """The ``on_compile`` of ``fn`` in a ``%%cuda --show`` cell."""
    return functools.partial(show_compiled, name, what, fn)


def shows(fn):
    """Whether ``fn`` shows its code as it compiles (``show_hook``)."""
    hook = fn.on_compile
    return isinstance(hook, functools.partial) and hook.func is show_compiled


def show_from_now(name, what, fn):
    """``fn``, a ``@cuda.jit`` kernel of a ``%%cuda --show`` cell, shows its code from now on,
    and now what it compiled before (given signatures compile when the decorator runs, before
    any hook): the specialisations it holds, else -- a kernel the cell's options rebuilt -- the
    signatures its decorator gave, compiled here.  A function that already shows, or a
    device function (which shows nothing), is left as it is."""
    if fn.device or shows(fn):
        return
    fn.on_compile = show_hook(name, what, fn)
    compiled = [v.value for v in fn._compiled_variants(calls=False, current=False)]
    for spec in compiled:
        show_compiled(name, what, fn, spec)
    if not compiled:
        for argtypes in fn.declared_signatures:
            fn.compile(argtypes)          # (shown by the hook)


# -- the redefinition check around cells -------------------------------------------------------
def check_bindings(verbose):
    """Compare the bindings compiled kernels depend on with their values now (any change moves
    the world: each affected kernel recompiles at its next launch); with ``verbose``, say what
    changed and which kernels recompile."""
    overloads = note_overload_redefinitions()     # (a Numba @overload run again)
    changed = bindings.check()
    if (changed or overloads) and verbose:
        live = live_functions()
        kernels = sorted(set(deps.dependents(live, changed)) |
                         set(deps.overload_dependents(live, overloads)))
        # (a kernel whose last compile failed has no compiled code to read the change, and
        # compiles again at its next launch whatever changed: said, not "nothing uses it")
        failed = sorted({fn.__qualname__ for fn in live if fn.last_compile_error and
                         any(_names(fn.py_func, c.namespace, c[1]) for c in changed)} -
                        set(kernels))
        print(render.redefinition_message(
            [(name, how) for _, name, how in changed] +
            [(f"{fn.__name__}'s overload", "redefined") for fn in overloads], kernels, failed))


def _names(pyfunc, namespace, name, depth=4, seen=None):
    """Whether ``pyfunc`` (a function whose compile failed: no record of what it read) reads the
    global ``name`` of ``namespace``, itself or through the functions of that namespace it
    calls by name, ``depth`` deep."""
    if namespace is None or getattr(pyfunc, "__globals__", None) is not namespace:
        return False
    code = pyfunc.__code__
    if name in code.co_names:
        return True
    seen = set() if seen is None else seen
    if depth == 0 or id(pyfunc) in seen:
        return False
    seen.add(id(pyfunc))
    for called in code.co_names:
        value = namespace.get(called)
        inner = getattr(value, "py_func", value)
        if inspect.isfunction(inner) and _names(inner, namespace, name, depth - 1, seen):
            return True
    return False


class AutoreloadWatch:
    """Whether IPython's autoreload has just reloaded a module, before a cell runs.

    ``%autoreload`` reloads the modules whose files changed in its own ``pre_run_cell`` hook,
    giving their functions new code in place or binding their names anew; the check after each
    cell would only see it once the cell had run, and the cell's launches would run the old
    code.  So the extension's ``pre_run_cell``, which runs after autoreload's (IPython calls a
    hook in the order of registration; ``settle`` moves ours after an autoreload loaded later),
    checks the bindings again -- only when autoreload has reloaded something since the last
    check: its record of the modules' times (``modules_mtimes``, a dict compared in C) then
    differs from the copy taken after the last cell.  Without autoreload, or when it reloaded
    nothing, a cell costs a look at the few ``pre_run_cell`` hooks."""

    def __init__(self, shell, hook):
        self.shell = shell
        self.hook = hook               # the extension's pre_run_cell (a bound method: compared ==)
        self._seen = {}                # id(reloader) -> (reloader, its modules' times then)

    def _reloaders(self):
        """The enabled reloaders of the autoreload hooks registered for ``pre_run_cell``: (those
        before our hook, those after it)."""
        before, after = [], []
        found = before
        for hook in self.shell.events.callbacks.get("pre_run_cell", ()):
            if hook == self.hook:
                found = after
                continue
            owner = getattr(hook, "__self__", None)
            if type(owner).__name__ != "AutoreloadMagics":
                continue
            reloader = getattr(owner, "_reloader", None)
            if getattr(reloader, "enabled", False):
                found.append(reloader)
        return before, after

    def reloaded(self):
        """Whether an autoreload that ran before our hook, as this cell starts, has reloaded a
        module since ``settle`` (one not seen then counts as having reloaded)."""
        for reloader in self._reloaders()[0]:
            seen = self._seen.get(id(reloader))
            if seen is None or seen[0] is not reloader or \
                    getattr(reloader, "modules_mtimes", None) != seen[1]:
                return True
        return False

    def settle(self):
        """After a cell: move our ``pre_run_cell`` after an autoreload hook registered since ours
        (``%load_ext autoreload`` after ``%load_ext gpureplace``), so that the next cell's check
        sees what it reloads; and remember the reloaders' modules' times."""
        before, after = self._reloaders()
        if after:
            self.shell.events.unregister("pre_run_cell", self.hook)
            self.shell.events.register("pre_run_cell", self.hook)
        self._seen = {id(r): (r, dict(getattr(r, "modules_mtimes", None) or {}))
                      for r in before + after}


def teach_autoreload():
    """Let IPython's autoreload update ``cuda.jit`` functions as it updates functions.  After
    reloading a module it updates each old object in place from the new one, so that names
    imported by name (``from mod import f``) see the new code; a ``cuda.jit`` function is an
    instance it knows nothing of, and a notebook's ``from mod import dev`` kept the old device
    function.  The rule added here updates the old one's Python function in place from the new
    one's (its ``__code__``, defaults...), which the redefinition tracking sees as it sees a
    plain function's (tracking/functions.py): its dependents recompile.  Added once; nothing
    where autoreload is not importable or has changed shape."""
    try:
        from IPython.extensions import autoreload
    except ImportError:
        return
    rules = getattr(autoreload, "UPDATE_RULES", None)
    update_function = getattr(autoreload, "update_function", None)
    if not isinstance(rules, list) or update_function is None or \
            any(getattr(rule[0], "_gpureplace", False) for rule in rules):
        return

    def both_cuda_jit(old, new):
        from ..jit import GPUFunction
        return isinstance(old, GPUFunction) and isinstance(new, GPUFunction)
    both_cuda_jit._gpureplace = True

    def update(old, new):
        update_function(old.py_func, new.py_func)
    rules.append((both_cuda_jit, update))
