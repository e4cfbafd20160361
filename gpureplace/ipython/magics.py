"""The extension's one object, ``GPUReplace``: its options (``%config GPUReplace.fastmath =
True``, or ``c.GPUReplace.fastmath = True`` in ``ipython_config.py`` or
``ipython_kernel_config.py``), its magics (``%%cuda`` cells and the reflection line magics) and
its cell hooks.

Every option takes effect at once (traitlets observers write ``gpureplace.config.settings`` and
the disk cache's settings).  An option not configured keeps what the process already has: its
default is read from those settings, so ``GPUREPLACE_CACHE=0`` or ``GPUREPLACE_BACKEND`` (and
anything set before the extension loaded) stay in force when it loads or reloads.
"""

from __future__ import annotations

import linecache
import math
import os
import shlex
import sys
import types as pytypes
import warnings

import numpy as np
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, TraitError, Tuple, Unicode, Union, default, observe, validate

from .. import config, cuda as cuda_ns, probe
from ..arch import normalize_arch
from ..compiler import diskcache
from ..compiler.signature import SignatureParseError, normalize_signature
from ..dask import push_redefinitions, sent_elsewhere
from ..jit import collect
from ..dispatch.context import Context
from ..errors import DeviceFunctionError, GPUReplaceError
from ..jit import GPUFunction, ahead
from ..jit.function import latest_birth
from ..runtime import launch
from ..tracking import world
from ..tracking.stats import snapshot as stats_snapshot
from . import render
from .cells import OpenCell, cell_option_changes, check_bindings, decorate_definitions
from .cells import made_in_cell
from .cells import show_first_line_as_typed, show_from_now, with_cell_options
from .output import FdCapture


def _not_compiled(kernel):
    """What to say of a kernel with no compiled code whose last compile failed (its code went
    stale and compiling it again raised), or None."""
    error = getattr(kernel, "last_compile_error", None)
    return None if error is None else (
        f"{kernel.__qualname__} has no current compiled code: its last compile failed "
        f"({error})")


def _a(word):
    return f"an {word}" if word[:1].lower() in "aeiou" else f"a {word}"


def _warn_hook_failure(what, exc):
    warnings.warn(f"gpureplace: {what} failed after this cell: {type(exc).__name__}: {exc}",
                  RuntimeWarning, stacklevel=2)


@magics_class
class GPUReplace(Magics):
    """What ``%load_ext gpureplace`` adds to the shell: options, magics and cell hooks."""

    arch = Union([Unicode(), Tuple()], default_value="",
                 help="Compile for this sm_XX (e.g. 'sm_90', or numba-cuda's (9, 0)); empty: "
                      "the current GPU's (sm_90 without one).").tag(config=True)
    fastmath = Bool(False, help="Fast math for every kernel: f32 math through __nv_fast_*, "
                                "flush-to-zero, approximate division and square root.").tag(
        config=True)
    context = Unicode("default", help="Name of the Context that kernels without an explicit "
                                      "context compile in.").tag(config=True)
    verbose = Bool(False, help="After each cell, say which kernels will recompile and why; "
                               "at launch, how long recompiling took.").tag(config=True)
    cache = Bool(True, help="Keep compiled kernels in the disk cache across restarts.").tag(
        config=True)
    cache_dir = Unicode("", help="Disk cache directory (empty: the per-user default).").tag(
        config=True)
    backend = Unicode("auto", help="Where launches run: 'gpu', 'simulator' (the CPU simulator) "
                                   "or 'auto' (the GPU when there is one).").tag(config=True)
    host_arrays = Unicode("warn", help="A host NumPy array given to a launch: 'warn' (copied "
                                       "to the device and back, with a performance warning the "
                                       "first time per kernel), 'copy' (the same, silently) or "
                                       "'error' (refused).").tag(config=True)
    cuda_array_interface_sync = Bool(True, help="Wait for the stream a device array of another "
                                                "library names in its __cuda_array_interface__ "
                                                "before a launch uses it.").tag(config=True)
    low_occupancy_warnings = Bool(False, help="Warn (once per launch configuration of a "
                                              "kernel) of grids under 128 blocks, as "
                                              "numba-cuda does.").tag(config=True)
    check_redefinitions = Bool(True, help="After each cell, compare what compiled kernels "
                                          "depend on with the current bindings.").tag(config=True)
    prewarm = Bool(True, help="When the extension loads, warm the compiler and CUDA in a "
                              "background thread (gpureplace.prewarm), so that the first "
                              "kernel finds them ready.  Set it before %load_ext (e.g. in "
                              "ipython_kernel_config.py); GPUREPLACE_PREWARM=0 does the "
                              "same.").tag(config=True)
    recompile_ahead = Bool(True, help="After a cell that redefines what launched kernels "
                                      "depend on (or a kernel itself), compile and load the "
                                      "new code in a background thread while you type, so the "
                                      "next launch finds it ready; it stops when the next cell "
                                      "starts (gpureplace/jit/ahead.py); "
                                      "GPUREPLACE_RECOMPILE_AHEAD=0 turns it off.").tag(
        config=True)

    # Defaults: what the process has now (environment variables, earlier settings).
    @default("arch")
    def _arch_now(self):
        return config.settings.arch or ""

    @default("fastmath")
    def _fastmath_now(self):
        return bool(config.settings.fastmath)

    @default("context")
    def _context_now(self):
        ctx = config.settings.default_context
        return "default" if ctx is None else ctx.name

    @default("verbose")
    def _verbose_now(self):
        return bool(config.settings.verbose)

    @default("cache")
    def _cache_now(self):
        return bool(diskcache.enabled)

    @default("cache_dir")
    def _cache_dir_now(self):
        return diskcache.explicit_directory() or ""

    @default("cuda_array_interface_sync")
    def _cai_sync_now(self):
        return bool(config.settings.cuda_array_interface_sync)

    @default("low_occupancy_warnings")
    def _low_occupancy_now(self):
        return bool(config.settings.low_occupancy_warnings)

    @default("recompile_ahead")
    def _recompile_ahead_now(self):
        value = os.environ.get("GPUREPLACE_RECOMPILE_AHEAD", "1").strip().lower()
        return value not in ("0", "false", "no", "off")

    @default("backend")
    def _backend_now(self):
        return config.settings.backend

    @default("host_arrays")
    def _host_arrays_now(self):
        try:
            return config.settings.host_arrays
        except ValueError as exc:        # a bad GPUREPLACE_HOST_ARRAYS
            warnings.warn(f"{exc}; the extension uses 'warn'", RuntimeWarning, stacklevel=2)
            return "warn"

    @validate("host_arrays")
    def _valid_host_arrays(self, proposal):
        value = str(proposal["value"]).strip().lower()
        if value not in config.HOST_ARRAYS:
            raise TraitError(f"GPUReplace.host_arrays must be 'warn', 'copy' or 'error', got "
                             f"{proposal['value']!r}")
        return value

    @validate("arch")
    def _valid_arch(self, proposal):
        value = proposal["value"]
        if value or isinstance(value, tuple):
            try:
                # (a (major, minor) tuple becomes its 'sm_XX', the form the option then holds)
                return normalize_arch(value, "GPUReplace.arch")
            except ValueError as exc:
                raise TraitError(str(exc)) from None
        return value

    @validate("context")
    def _valid_context(self, proposal):
        if proposal["value"] != "default":
            try:
                Context.named(proposal["value"])
            except KeyError as exc:
                raise TraitError(exc.args[0]) from None
        return proposal["value"]

    def __init__(self, shell=None, **kwargs):
        # (a configured value the options refuse never fails loading: _load_config)
        self._config_refusals = []      # (name, value, why) of the values left out
        self._loading = True
        try:
            super().__init__(shell=shell, **kwargs)
        finally:
            self._loading = False
        #: one line for each configured value left out, said where the user sees it
        #: (extension.py: now in a cell, else at the top of the next one)
        self.config_notes = [
            f"gpureplace: ignoring the configured GPUReplace.{name} = {value!r}: {why}; "
            f"using {getattr(self, name)!r}"
            for name, value, why in self._config_refusals]
        self._open_cells = []
        self.capture = FdCapture()      # device printf output of the running cell
        self._cells_started = 0         # (a round of jit/ahead.py stops once it moves)
        self._ahead_age = world.age     # the world age the last round was scheduled for
        self._ahead_born = latest_birth()   # the newest kernel when it was scheduled
        # (reading each value also fixes a dynamic default: a later %config compares with it,
        # not with the trait's static default, and so never misses a change)
        for name in ("arch", "fastmath", "context", "verbose", "cache", "cache_dir", "backend",
                     "host_arrays", "cuda_array_interface_sync", "low_occupancy_warnings"):
            self._apply({"name": name, "new": getattr(self, name)})

    def _load_config(self, cfg, section_names=None, traits=None):
        """traitlets' loading of the configured values, which refuses them all for one bad one
        (a ``%config`` refused is kept in the shell's configuration, and ``c.GPUReplace...`` in
        a kernel's config file): while the extension loads, the values are taken one by one
        instead, each refused one left out of the shell's configuration and noted
        (``config_notes``), so that loading never fails on a value.  A ``%config`` at run time
        is refused as before (IPython says why)."""
        if not getattr(self, "_loading", False):
            return super()._load_config(cfg, section_names=section_names, traits=traits)
        try:
            return super()._load_config(cfg, section_names=section_names, traits=traits)
        except Exception:       # (nothing was set: traitlets rolls the values back)
            pass
        from traitlets.config import Config
        for name, value in self._find_my_config(cfg).items():
            try:
                super()._load_config(Config({type(self).__name__: {name: value}}),
                                     section_names=section_names, traits=traits)
            except Exception as exc:
                why = str(exc).strip().splitlines()[0] if str(exc).strip() else \
                    type(exc).__name__
                self._config_refusals.append((name, value, why))
                self._drop_configured(cfg, name)

    def _drop_configured(self, cfg, name):
        """Leave the option ``name`` out of ``cfg`` and the shell's configuration."""
        configs = [cfg] + [c for c in (getattr(self.parent, "config", None),)
                           if c is not None and c is not cfg]
        for held in configs:
            for section in self.section_names():
                if held._has_section(section) and name in held[section]:
                    del held[section][name]

    @validate("backend")
    def _valid_backend(self, proposal):
        value = proposal["value"].strip().lower()
        if value not in ("auto", "gpu", "simulator"):
            raise TraitError(f"GPUReplace.backend must be 'auto', 'gpu' or 'simulator', got "
                             f"{proposal['value']!r}")
        return value

    @observe("arch", "fastmath", "context", "verbose", "cache", "cache_dir", "backend",
             "host_arrays", "cuda_array_interface_sync", "low_occupancy_warnings")
    def _apply(self, change):
        name, new = change["name"], change["new"]
        if name == "arch":
            config.settings.arch = new or None
        elif name == "fastmath":
            config.settings.fastmath = bool(new)
        elif name == "context":
            config.settings.default_context = None if new == "default" else Context.named(new)
        elif name == "verbose":
            config.settings.verbose = bool(new)
        elif name == "cache":
            diskcache.enabled = bool(new)
        elif name == "cache_dir":
            diskcache.set_directory(new or None)
        elif name == "backend":
            config.settings.backend = new
        elif name == "host_arrays":
            config.settings.host_arrays = new
        elif name == "cuda_array_interface_sync":
            config.settings.cuda_array_interface_sync = bool(new)
        elif name == "low_occupancy_warnings":
            config.settings.low_occupancy_warnings = bool(new)

    # -- the cell hooks -------------------------------------------------------------------------
    # An error inside them is a warning: it never fails the user's cell nor replaces the user's
    # error as the cell's last traceback.
    def post_execute(self):
        """When a cell ends (ran, failed part-way, or silent): the %%cuda cell's functions become
        gpureplace functions, before the redefinition check sees them."""
        try:
            errors = self.finish_cells()
        except Exception as exc:
            errors = [exc]
        for exc in errors:
            _warn_hook_failure("converting the %%cuda cell's functions", exc)

    def post_run_cell(self, result=None):
        try:
            self.check_after_cell()
        except Exception as exc:
            _warn_hook_failure("the redefinition check", exc)
        try:
            self.reloads.settle()       # (what autoreload reloads before the next cell is seen)
        except Exception as exc:
            _warn_hook_failure("watching autoreload", exc)

    def pre_run_cell(self, info=None):
        try:
            self._cells_started += 1
            notes, self.config_notes = self.config_notes, []
            for message in notes + ahead.take_messages():
                # (configured values left out when the kernel started; what was recompiled
                # while the user typed)
                print(message)
            if self.check_redefinitions and self.reloads.reloaded():
                # %autoreload's hook, run before this one, reloaded a module: this cell's
                # launches must run its new code (cells.AutoreloadWatch)
                check_bindings(self.verbose)
        except Exception as exc:
            _warn_hook_failure("the start-of-cell hook", exc)

    def check_after_cell(self):
        """Device output into this cell; then compare the bindings compiled kernels depend on
        with their values now (any change moves the world), saying what recompiles if verbose;
        if the world moved, the stale kernels recompile in the background (jit/ahead.py)."""
        self.flush_device_output()
        if self.check_redefinitions:
            check_bindings(self.verbose)
        born = latest_birth()
        if world.age != self._ahead_age or born != self._ahead_born or collect.some_died():
            # (something was redefined, or kernels deleted: the code nothing uses goes)
            collect.collect()
        if world.age != self._ahead_age or born != self._ahead_born or sent_elsewhere():
            # (the world moved, or the cell defined kernels: their first launch is guessed; or
            # kernels went to Dask workers, which may have changed though nothing here moved)
            self._ahead_age, self._ahead_born = world.age, born
            if self.recompile_ahead:
                token = self._cells_started
                # (first, redefinitions of kernels Dask workers received are sent to them:
                # nothing without a distributed client)
                ahead.schedule(lambda: self._cells_started == token,
                               first=push_redefinitions)

    def start_capture(self):
        """The printf listener: called inside the user's launch, so it must not fail it."""
        try:
            self.capture.start()
        except Exception as exc:         # device output then goes to fd 1 as is
            warnings.warn(f"gpureplace: cannot capture device output for this cell: "
                          f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)

    def flush_device_output(self):
        """Device printf output reaches stdout when the GPU synchronises: synchronise while the
        cell is still running and print what the kernels wrote into the cell that launched them."""
        if not launch.printf_pending():
            return
        launch.clear_printf_pending()
        try:
            if probe.available():
                probe.cupy_module().cuda.runtime.deviceSynchronize()
        finally:
            text = self.capture.stop()
            if text:
                sys.stdout.write(text)
                sys.stdout.flush()

    def location(self, filename, lineno):
        """``Cell In[3], line 5`` for code typed in a cell; ``file, line N`` otherwise (how
        compile errors name the user's line)."""
        try:
            count = self.shell.compile._filename_map.get(filename)
        except Exception:            # formatting an error must not fail
            count = None
        if count is not None:
            return f"Cell In[{count}], line {lineno}"
        return f"{filename}, line {lineno}"

    def source_line(self, filename, lineno):
        """The cell's line ``lineno`` as the user typed it, where IPython ran another text: a
        line magic (``%cuda_timeit k[1, 32](x)``) or a shell escape, which IPython rewrote as
        ``get_ipython().run_line_magic(...)``; None where the typed text is what ran, or when
        the typed cell does not line up with what ran."""
        line = linecache.getline(filename, lineno)
        if "get_ipython()." not in line:
            return None
        count = self.shell.compile._filename_map.get(filename)
        raw = self.shell.history_manager.input_hist_raw
        if count is None or not 0 < count < len(raw):
            return None
        typed = raw[count].splitlines()
        ran = linecache.getlines(filename)
        if len(typed) != len(ran) or not 0 < lineno <= len(typed):
            return None
        return typed[lineno - 1]

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
            show_first_line_as_typed(self.shell)
            self._open_cells.append(self._open(line))
            return None
        opened = self._open(line)
        # Called with the body as a string (get_ipython().run_cell_magic("cuda", line, body)):
        # its functions too are converted as they are defined (define_in_cell)
        self._open_cells.append(opened)
        try:
            self._run_body(cell)
        finally:
            if opened in self._open_cells:
                self._open_cells.remove(opened)
            self._convert(opened)
        return None

    def _open(self, line):
        args = parse_argstring(self.cuda, line)
        try:
            context = Context.named(args.context) if args.context else None
        except KeyError as exc:        # a usage error: no traceback through the magic
            raise UsageError(f"%%cuda --context: {exc.args[0]}") from None
        if args.arch:
            try:
                normalize_arch(args.arch, "%%cuda --arch")
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        ns = self.shell.user_ns
        for name, value in (("cuda", cuda_ns), ("math", math), ("np", np)):
            ns.setdefault(name, value)
        result = getattr(self.shell.displayhook, "exec_result", None)
        return OpenCell(args, context, dict(ns), result)

    def _run_body(self, body):
        """Run ``body`` in the user's namespace, registered (for tracebacks and error locations)
        under the cell running now; exceptions propagate to the caller."""
        shell = self.shell
        running = getattr(shell.displayhook, "exec_result", None)
        number = running.execution_count if running is not None else shell.execution_count
        source = shell.transform_cell(body)
        name = shell.compile.cache(source, number, raw_code=body)
        tree = shell.transform_ast(shell.compile.ast_parse(source, filename=name))
        decorate_definitions(tree.body)
        code = shell.compile(tree, name, "exec")
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

    def define_in_cell(self, fn, given=()):
        """A top-level function of the running ``%%cuda`` cell as it is defined: a plain one
        becomes a gpureplace function with the cell's options (``_convert`` passes it when the
        cell ends: ``given``, the options its decorator sets itself), anything else stays as it
        is."""
        if not self._open_cells:
            return fn
        opened = self._open_cells[-1]
        if isinstance(fn, GPUFunction):
            opened.note_given(fn, given)
            # (a @cuda.jit one the cell's options leave as it is: with --show, what its given
            # signatures compiled and what it compiles from now on; _convert does the others)
            if opened.args.show and self._cell_defines(fn.py_func, fn.__name__) and \
                    fn._parent is None and not cell_option_changes(
                        fn, opened.context, opened.args, given)[0]:
                show_from_now(fn.__name__, opened.args.show, fn)
            return fn
        if not isinstance(fn, pytypes.FunctionType) or \
                not self._cell_defines(fn, fn.__name__):
            return fn
        return made_in_cell(fn, opened)

    def _cell_defines(self, fn, name):
        """Whether the Python function ``fn`` is a top-level one of the notebook named ``name``
        (what a ``%%cuda`` cell converts: not nested, aliased nor imported)."""
        return fn.__qualname__ == name and fn.__globals__ is self.shell.user_global_ns

    def _convert(self, opened):
        """Every top-level function the cell (re)defined becomes a GPUFunction."""
        args = opened.args
        ns = self.shell.user_ns
        defined = []
        for name, value in list(ns.items()):
            if opened.before.get(name) is value:
                continue
            if isinstance(value, GPUFunction):      # @cuda.jit in the cell: the cell's options
                if self._cell_defines(value.py_func, name) and value._parent is None:
                    ns[name] = with_cell_options(name, value, opened.context, args,
                                                 opened.given(value))
                    defined.append(name)
                continue
            if not isinstance(value, pytypes.FunctionType) or \
                    not self._cell_defines(value, name):
                continue      # nested, aliased or imported: only functions the cell defines
            ns[name] = made_in_cell(value, opened)
            defined.append(name)
        if args.verbose and defined:
            print(f"gpureplace: defined {', '.join(defined)}")
        if args.show:
            # (the cell's @cuda.jit functions too: each shows what it compiled before it could
            # show it -- its given signatures -- and its code whenever it compiles)
            for name in defined:
                try:
                    show_from_now(name, args.show, ns[name])
                except GPUReplaceError as exc:
                    print(f"gpureplace: %%cuda --show: {name}: {exc}")

    # -- reflection -----------------------------------------------------------------------------
    def _kernel_and_sig(self, line, magic, method):
        """The kernel a reflection magic's line names (evaluated in the notebook) and the
        signature after it (None: every specialisation so far); a ``UsageError`` saying what is
        wrong otherwise."""
        usage = f'%{magic} KERNEL [SIGNATURE], e.g. %{magic} saxpy "void(float32, float32[:])"'
        try:
            parts = shlex.split(line)
        except ValueError as exc:          # an unclosed quote
            raise UsageError(f"%{magic}: {exc} in {line!r}; usage: {usage}") from None
        if not parts:
            raise UsageError(f"%{magic} needs a kernel: {usage}")
        expr = parts[0]
        try:
            obj = self.shell.ev(expr)
        except NameError:
            raise UsageError(f"%{magic}: {expr!r} is not defined in this notebook (a kernel "
                             f"comes from a %%cuda cell or @cuda.jit)") from None
        except Exception as exc:
            raise UsageError(f"%{magic}: cannot evaluate {expr!r}: {type(exc).__name__}: "
                             f"{exc}") from None
        if not callable(getattr(obj, method, None)):
            raise UsageError(f"%{magic}: {expr} is {_a(type(obj).__name__)}, not a gpureplace "
                             f"kernel (define it in a %%cuda cell, or decorate it with "
                             f"@cuda.jit)")
        return obj, " ".join(parts[1:]) or None

    def _by_signature(self, kernel, magic, method, sig):
        """``{argument types: answer}`` of ``kernel.<method>(sig)`` (``_asking``)."""
        out = self._asking(magic, lambda: getattr(kernel, method)(sig))
        return out if sig is None else {normalize_signature(sig)[0]: out}

    @staticmethod
    def _asking(magic, call):
        """``call()``, a question to a kernel: a malformed signature, a device function where a
        kernel is needed and a missing tool (ptxas, nvdisasm) are a ``UsageError`` with their
        message."""
        try:
            return call()
        except (SignatureParseError, DeviceFunctionError) as exc:
            raise UsageError(f"%{magic}: {exc}") from None
        except RuntimeError as exc:
            if isinstance(exc, GPUReplaceError):
                raise
            raise UsageError(f"%{magic}: {exc}") from None

    def _reflect(self, line, what):
        magic = f"cuda_{what}"
        kernel, sig = self._kernel_and_sig(line, magic, f"inspect_{what}")
        # every specialisation, those of the same argument types under other options too
        # (labelled with their options; the one a launch runs first)
        variants = self._asking(magic, lambda: kernel.inspect_all(what, sig))
        if not variants:
            print(_not_compiled(kernel) or
                  f"{kernel.__qualname__} has not been compiled yet: launch it, or give a "
                  f"signature such as %{magic} {line.split()[0]} \"void(float32[:])\"")
            return
        # (SASS listings give ptxas's resource report of the PTX behind them)
        ptx = self._asking(magic, lambda: kernel.inspect_all("ptx", sig)) \
            if what == "sass" else None
        render.show(render.variant_listings(kernel.__qualname__, what, variants, ptx))

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
        """``%cuda_deps KERNEL [SIGNATURE]``: what the kernel depends on, and what changed: one
        table per specialisation (identical ones once), without the builtins, modules and
        library attributes no cell redefines."""
        kernel, sig = self._kernel_and_sig(line, "cuda_deps", "dependencies")
        tables = self._by_signature(kernel, "cuda_deps", "dependencies", sig)
        if not tables:
            print(_not_compiled(kernel) or f"{kernel.__qualname__} has not been compiled yet")
            return
        print(render.deps_report(kernel.__qualname__, tables))

    @line_magic
    def cuda_timeit(self, line):
        """``%cuda_timeit [--flops EXPR] [--bytes EXPR] [--warm] [--runs N] [--max-runs N]
        [--min-time SECONDS] [-o] kernel[blocks, threads](args)``: CUDA-event timing, as
        ``gpureplace.benchmark``, with bandwidth and FLOP/s against the device's peaks (no rates
        in the simulator); values are expressions, spaces allowed or quoted (``--flops 2 * n``)."""
        __tracebackhide__ = True  # noqa: F841  (the error of code timed: the user's frames)
        from .timing import cuda_timeit
        return cuda_timeit(self.shell, line)

    @line_magic
    def cuda_cache(self, line):
        """``%cuda_cache [stats|clear]``: compile and cache counters, or empty the disk cache."""
        action = line.strip() or "stats"
        if action == "clear":
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                n = diskcache.clear()
            for w in said:                # (said here, not at a line of IPython's)
                print(str(w.message).replace("gpureplace.cache.clear()", "%cuda_cache clear"),
                      file=sys.stderr)
            if not said:
                print(f"gpureplace: removed {n} cached kernel(s) from {diskcache.directory()}")
        elif action == "stats":
            info = diskcache.info()
            stats = stats_snapshot()
            print(", ".join(f"{k} {v}" for k, v in stats.items()))
            if info["enabled"] and info["problem"]:
                print(f"disk cache: not used: {info['directory']}: {info['problem']}")
            else:
                print(f"disk cache: {info['entries']} kernel(s), {info['bytes']} bytes in "
                      f"{info['directory']} ({'on' if info['enabled'] else 'off'})")
        else:
            raise UsageError(f"%cuda_cache: unknown action {action!r}; usage: %cuda_cache "
                             f"[stats|clear]")
