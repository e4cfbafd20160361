"""The magics: ``%%cuda`` cells and the reflection line magics."""

from __future__ import annotations

import ast
import math
import re
import shlex
import sys
import types as pytypes

import numpy as np
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring


def _show(text, language):
    """Highlighted in notebooks (IPython.display.Code), plain text in a terminal."""
    from IPython.display import Code, display
    display(Code(text, language=language))


class CudaCellTransformer:
    """Turns a ``%%cuda`` cell into the cell's own Python code, preceded by one call that opens
    it: the first line ``%%cuda ARGS`` becomes ``get_ipython().run_cell_magic('cuda', ARGS,
    None)`` and the body's lines stay where they are.

    IPython's own cell-magic transformer would hand the body to the magic as a string, to be
    run inside the cell that calls it.  Run this way instead, the body is the cell: a syntax
    error fails the cell before anything runs, an exception fails it and stops Run All, the
    traceback shows the lines as typed (line 1 is ``%%cuda``), functions defined in it are
    named after this cell (``Cell In[n]``), and history and the cell hooks see one cell.  The
    functions are converted when the cell ends (``GPUReplaceMagics.finish_cells``).

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


def _show_first_line_as_typed(shell):
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


class _OpenCell:
    """A ``%%cuda`` cell whose body is running: what it converts when it ends."""

    def __init__(self, args, context, before, result):
        self.args = args
        self.context = context
        self.before = before           # the namespace when the body began (name -> object)
        self.result = result           # the running cell's ExecutionResult (None: unknown)


@magics_class
class GPUReplaceMagics(Magics):

    def __init__(self, shell=None, **kwargs):
        super().__init__(shell=shell, **kwargs)
        self._open_cells = []

    # -- %%cuda ---------------------------------------------------------------------------------
    @magic_arguments()
    @argument("--context", default=None, help="name of the Context to compile in")
    @argument("--fastmath", action="store_true", help="fast math for these functions")
    @argument("--arch", default=None, help="sm_XX to compile for")
    @argument("--show", choices=("ptx", "llvm", "types"), default=None,
              help="show the code of each specialisation these functions compile")
    @argument("--verbose", action="store_true", help="list the functions the cell defined")
    @cell_magic
    def cuda(self, line, cell):
        """Run the cell as Python; every top-level function it defines becomes a gpureplace
        function: a kernel (``f[blocks, threads](...)``) and a device function for other kernels.
        ``cuda``, ``math`` and ``np`` are available in the cell.

        The cell runs as the notebook's own cell: an error fails it (and stops Run All), and
        the functions it defined before the error are converted all the same."""
        if cell is None:
            # CudaCellTransformer's call: the cell's own code follows this line, and
            # finish_cells converts its functions when the cell ends.
            _show_first_line_as_typed(self.shell)
            self._open_cells.append(self._open(line))
            return None
        opened = self._open(line)
        # Called with the body as a string (get_ipython().run_cell_magic("cuda", line, body)).
        try:
            self._run_body(cell)
        finally:
            self._convert(opened)
        return None

    def _open(self, line):
        from .. import cuda as cuda_ns
        from ..dispatch.context import Context
        args = parse_argstring(self.cuda, line)
        try:
            context = Context.named(args.context) if args.context else None
        except KeyError as exc:        # a usage error: no traceback through the magic
            raise UsageError(f"%%cuda --context: {exc.args[0]}") from None
        if args.arch:
            from ..compiler.backend import arch_number
            try:
                arch_number(args.arch)
            except ValueError as exc:
                raise UsageError(f"%%cuda --arch: {exc}") from None
        ns = self.shell.user_ns
        for name, value in (("cuda", cuda_ns), ("math", math), ("np", np)):
            ns.setdefault(name, value)
        result = getattr(self.shell.displayhook, "exec_result", None)
        return _OpenCell(args, context, dict(ns), result)

    def _run_body(self, body):
        """Run ``body`` in the user's namespace, registered (for tracebacks and error locations)
        under the cell running now; exceptions propagate to the caller."""
        shell = self.shell
        running = getattr(shell.displayhook, "exec_result", None)
        number = running.execution_count if running is not None else shell.execution_count
        source = shell.transform_cell(body)
        name = shell.compile.cache(source, number, raw_code=body)
        code = shell.compile(shell.transform_ast(shell.compile.ast_parse(source, filename=name)),
                             name, "exec")
        exec(code, shell.user_global_ns, shell.user_ns)

    def finish_cells(self):
        """Convert the functions of the ``%%cuda`` cell that just ended, whether it succeeded or
        failed part-way (called from the ``post_execute`` event).  Returns the errors met."""
        done = self.shell.last_execution_result
        errors = []
        for opened in list(self._open_cells):
            if opened.result is None or opened.result is done:
                self._open_cells.remove(opened)
                try:
                    self._convert(opened)
                except Exception as exc:       # reported by the caller (a warning)
                    errors.append(exc)
        return errors

    def _convert(self, opened):
        """Every top-level function the cell (re)defined becomes a GPUFunction."""
        from ..kernel import GPUFunction
        args = opened.args
        ns = self.shell.user_ns
        own_globals = self.shell.user_global_ns
        defined = []
        for name, value in list(ns.items()):
            if not isinstance(value, pytypes.FunctionType) or opened.before.get(name) is value:
                continue
            if value.__qualname__ != name or value.__globals__ is not own_globals:
                continue      # nested, aliased or imported: only functions the cell defines
            ns[name] = GPUFunction(value, context=opened.context, fastmath=args.fastmath,
                                   arch=args.arch)
            defined.append(name)
        if args.verbose and defined:
            print(f"gpureplace: defined {', '.join(defined)}")
        if args.show:
            # Each function shows its code whenever it compiles a specialisation (at its first
            # launch with new argument types, or kernel.compile(sig)).
            what = args.show
            for name in defined:
                ns[name].on_compile = (lambda spec, what=what:
                                       _show(_REFLECTORS[what](spec), _LANGUAGE[what]))

    # -- reflection -----------------------------------------------------------------------------
    def _kernel_and_sig(self, line):
        parts = shlex.split(line)
        if not parts:
            raise ValueError("usage: %cuda_ptx KERNEL [SIGNATURE]")
        obj = self.shell.ev(parts[0])
        sig = " ".join(parts[1:]) or None
        return obj, sig

    def _reflect(self, line, what):
        kernel, sig = self._kernel_and_sig(line)
        method = {"ptx": kernel.inspect_ptx, "llvm": kernel.inspect_llvm,
                  "types": kernel.inspect_types, "sass": kernel.inspect_sass}[what]
        out = method(sig)
        texts = [out] if isinstance(out, str) else list(out.values())
        if not texts:
            print(f"{kernel.__qualname__} has not been compiled yet: launch it, or give a "
                  f"signature such as %cuda_{what} {line.split()[0]} \"void(float32[:])\"")
        for text in texts:
            _show(text, _LANGUAGE[what])

    @line_magic
    def cuda_ptx(self, line):
        """``%cuda_ptx KERNEL [SIGNATURE]``: PTX of the kernel's specialisations."""
        self._reflect(line, "ptx")

    @line_magic
    def cuda_sass(self, line):
        """``%cuda_sass KERNEL [SIGNATURE]``: machine code (ptxas + nvdisasm, no GPU needed)."""
        self._reflect(line, "sass")

    @line_magic
    def cuda_llvm(self, line):
        """``%cuda_llvm KERNEL [SIGNATURE]``: optimised LLVM IR."""
        self._reflect(line, "llvm")

    @line_magic
    def cuda_types(self, line):
        """``%cuda_types KERNEL [SIGNATURE]``: Numba's typed IR of the whole call graph."""
        self._reflect(line, "types")

    @line_magic
    def cuda_deps(self, line):
        """``%cuda_deps KERNEL [SIGNATURE]``: what the kernel depends on, and what changed."""
        kernel, sig = self._kernel_and_sig(line)
        deps = kernel.dependencies(sig)
        tables = [deps] if sig is not None else list(deps.values())
        if not tables:
            print(f"{kernel.__qualname__} has not been compiled yet")
        for table in tables:
            print("functions: " + ", ".join(f.rsplit(".", 1)[-1] for f in table["functions"]))
            for g in table["globals"]:
                state = " (deleted)" if g["deleted"] else " (changed)" if g["changed"] else ""
                print(f"  {g['function'].rsplit('.', 1)[-1]}, line {g['line']}: {g['name']}"
                      f"{state}")
            for o in table["overrides"]:
                print(f"  override: {o['host']} -> {o['impl']} in context {o['context']!r}")

    @line_magic
    def cuda_cache(self, line):
        """``%cuda_cache [stats|clear]``: compile and cache counters, or empty the disk cache."""
        import gpureplace
        from ..tracking import cache
        action = line.strip() or "stats"
        if action == "clear":
            n = cache.clear()
            print(f"gpureplace: removed {n} cached kernel(s) from {cache.directory()}")
        elif action == "stats":
            info = cache.info()
            stats = gpureplace.stats()
            print(", ".join(f"{k} {v}" for k, v in stats.items()))
            if info["problem"]:
                print(f"disk cache: not used: {info['directory']}: {info['problem']}")
            else:
                print(f"disk cache: {info['entries']} kernel(s), {info['bytes']} bytes in "
                      f"{info['directory']} ({'on' if info['enabled'] else 'off'})")
        else:
            print("usage: %cuda_cache [stats|clear]")


_REFLECTORS = {"ptx": lambda s: s.ptx, "llvm": lambda s: s.llvm_ir,
               "types": lambda s: str(s.compiled.type_annotation)}
_LANGUAGE = {"ptx": "text", "llvm": "llvm", "types": "python", "sass": "text"}
