"""``%load_ext gpureplace``: the ``GPUReplace`` object (options, magics, cell hooks) added to the
shell, and removed by ``%unload_ext``.

Loading registers the magics (``%%cuda`` -- or ``%%gpureplace`` where another extension, such as
nvcc4jupyter, already owns ``%%cuda`` -- and the reflection line magics), an input transformer
that runs a ``%%cuda`` cell's body as the cell's own code, and two cell hooks, all methods of the
one object.  ``post_execute`` converts the functions a ``%%cuda`` cell defined (also when it
failed part-way); ``post_run_cell`` compares the bindings compiled kernels depend on with their
current values: any change moves the world, and each affected kernel recompiles at its next
launch, or before it in the background while the user types (jit/ahead.py; ``pre_run_cell``
stops that when the next cell starts).  Where IPython's autoreload has just reloaded a module,
``pre_run_cell`` (kept after autoreload's) compares them too, so that the cell about to run
launches the module's new code (cells.AutoreloadWatch).  Unloading removes all of it.
"""

from __future__ import annotations

import os
import sys
import warnings

from .. import config, errors
from ..runtime import launch
from .cells import AutoreloadWatch, CudaCellDefinitions, CudaCellTransformer, teach_autoreload
from .magics import GPUReplace

_LINE_MAGICS = ("cuda_ptx", "cuda_sass", "cuda_llvm", "cuda_types", "cuda_deps", "cuda_cache",
                "cuda_timeit")

_loaded = None          # the GPUReplace object of the shell the extension is loaded in


def loaded():
    """The extension's ``GPUReplace`` object (None when it is not loaded)."""
    return _loaded


def load_ipython_extension(ip):
    global _loaded
    if _loaded is not None and _loaded.shell is ip:
        return
    ext = GPUReplace(shell=ip)          # (a Magics: it adds itself to ip.configurables)
    cell_magics = ip.magics_manager.magics["cell"]
    names = {"cell": {"gpureplace": "cuda"}, "line": {n: n for n in _LINE_MAGICS}}
    if cell_magics.get("cuda") is None:
        names["cell"]["cuda"] = "cuda"
    else:
        warnings.warn("another extension (nvcc4jupyter?) already registers %%cuda; gpureplace's "
                      "cell magic is available as %%gpureplace", stacklevel=2)
    for kind, table in names.items():
        for name, method in table.items():
            ip.magics_manager.register_function(getattr(ext, method), magic_kind=kind,
                                                magic_name=name)
    ext.magic_names = names
    ext.transformer = CudaCellTransformer(
        ext, [name for name, method in names["cell"].items() if method == "cuda"])
    ip.input_transformers_cleanup.append(ext.transformer)
    ext.definitions = CudaCellDefinitions(ext.transformer.names)
    ip.ast_transformers.append(ext.definitions)
    ext.reloads = AutoreloadWatch(ip, ext.pre_run_cell)
    teach_autoreload()
    ip.events.register("post_execute", ext.post_execute)
    ip.events.register("post_run_cell", ext.post_run_cell)
    ip.events.register("pre_run_cell", ext.pre_run_cell)
    errors.location_formatter = ext.location
    errors.source_formatter = ext.source_line
    _show_refusals_as_one_block(ip)
    _name_cells_in_warnings()
    launch.set_printf_listener(ext.start_capture)
    from ..tracking import bindings
    bindings.reporting = True           # (the cell hook says what each cell changed)
    _loaded = ext
    _notice_backend(ip)
    _say_config_notes(ip, ext)
    if ext.prewarm:
        # the compiler and CUDA warmed while the user types (gpureplace/runtime/prewarm.py: what it
        # does, and its hazards)
        from .. import prewarm
        prewarm.start()


def _notice_backend(ip):
    """Say once, where the notebook shows it, that kernels will run in the CPU simulator: when
    the extension is loaded from a cell and no GPU can be there, now, as a plain line; else at
    the first launch that finds none, on stdout (in order with the cell's output), not as a
    separate stderr box."""
    settings = config.settings
    settings.notice_stream = "stdout"
    running = getattr(ip.displayhook, "exec_result", None) is not None
    if running and not settings.no_gpu_noticed and settings.gpu_surely_absent():
        settings.no_gpu_noticed = True
        print(config.NO_GPU_NOTICE)


_LAUNCHER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jit",
                         "launcher.py")


def _launch_refusal(exc):
    """Whether ``exc`` is a ``TypeError`` that a launch raised to refuse what it was given --
    a keyword argument (``k[1, 32](x, stream=0)``), arguments to a prepared launch -- from one
    of the ``_refuse_...`` functions of ``jit/launcher.py``, without the one-block rendering
    gpureplace's other launch errors have."""
    if not isinstance(exc, TypeError) or getattr(exc, "_render_traceback_", None) is not None:
        return False
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return code.co_name.startswith("_refuse") and \
        os.path.abspath(code.co_filename) == _LAUNCHER


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The host API's entry points (``cuda.device_array``, ``d.copy_to_host``, ``d[i]``...): a
#: refusal of what they were given is said at the user's line.
_HOST_API = tuple(os.path.join(_PACKAGE, *part) for part in (
    ("hostapi", ""), ("simulator", "host.py"), ("simulator", "arrays.py"), ("cuda.py",)))


def _host_api_refusal(exc):
    """Whether ``exc`` is a ``ValueError``, ``TypeError`` or ``IndexError`` with which the host
    API refused its arguments (``cuda.device_array(-1)``, ``d.copy_to_host(wrong_shape)``, an
    index out of a device array): raised below a call from the user's code into the host API,
    with no frame of the user's code after it -- NumPy's or CuPy's own refusal underneath
    included, a user's callback run from there not."""
    if not isinstance(exc, (ValueError, TypeError, IndexError)) or \
            getattr(exc, "_render_traceback_", None) is not None:
        return False
    tb, entered = exc.__traceback__, False
    while tb is not None:
        path = os.path.abspath(tb.tb_frame.f_code.co_filename)
        ours = path.startswith(_PACKAGE + os.sep)
        if not entered:
            if ours:
                if not path.startswith(_HOST_API):
                    return False
                entered = True
        elif not ours and not _library(path):
            return False                          # (user code called back from the host API)
        tb = tb.tb_next
    return entered


def _library(path):
    """Whether ``path`` is a file of NumPy, CuPy or the standard library (not the user's)."""
    parts = path.replace("\\", "/").split("/")
    return any(p in ("numpy", "cupy", "cupyx", "cupy_backends") for p in parts) or \
        path.startswith(os.path.dirname(os.__file__))


def _show_refusals_as_one_block(ip):
    """IPython shows a launch's refusal of what it was given (``_launch_refusal``) as it shows
    gpureplace's other launch errors: one block naming the user's line
    (``errors.render_one_block``), not a traceback through gpureplace's launcher.  The shell's
    ``showtraceback`` (which every error shown goes through) gives it that rendering first;
    unloading puts IPython's back."""
    if getattr(ip.__dict__.get("showtraceback"), "_gpureplace", False):
        return
    shown = ip.showtraceback

    def showtraceback(exc_tuple=None, *args, **kwargs):
        try:
            exc = exc_tuple[1] if exc_tuple is not None else sys.exc_info()[1]
            if _launch_refusal(exc) or _host_api_refusal(exc):
                errors.render_as_one_block(exc)
        except Exception:                    # showing an error must never fail over this
            pass
        return shown(exc_tuple, *args, **kwargs)
    showtraceback._gpureplace = True
    showtraceback.__wrapped__ = shown
    ip.showtraceback = showtraceback


def _name_cells_in_warnings():
    """gpureplace's warnings about a line of a cell (a kernel's raise in the simulator, named
    by the kernel's line) say ``Cell In[3], line 5`` as its other messages do
    (``errors.describe_location``), not the cell's file (``<ipython-input-3-...>:5``, in
    Jupyter ``/tmp/ipykernel_.../....py:5``): ``warnings.formatwarning`` is wrapped while the
    extension is loaded.  Other warnings, and lines outside cells, are left as they are."""
    if getattr(warnings.formatwarning, "_gpureplace", False):
        return
    formatted = warnings.formatwarning

    def formatwarning(message, category, filename, lineno, line=None):
        text = formatted(message, category, filename, lineno, line)
        try:
            if getattr(category, "__module__", "").partition(".")[0] != "gpureplace":
                return text
            ext = _loaded
            where = ext.location(filename, lineno) if ext is not None else None
            if where is None or not where.startswith("Cell In["):
                return text
            prefix = f"{filename}:{lineno}: "
            if text.startswith(prefix):
                return f"{where}: {text[len(prefix):]}"
        except Exception:                    # a warning must never fail over this
            pass
        return text
    formatwarning._gpureplace = True
    formatwarning.__wrapped__ = formatted
    warnings.formatwarning = formatwarning


def _say_config_notes(ip, ext):
    """The configured values loading left out (``GPUReplace._load_config``), one line each:
    now when the extension is loaded from a cell (``%load_ext``, ``%reload_ext``), else --
    a kernel started with them in its configuration -- at the top of the first cell, where the
    notebook shows them."""
    if not ext.config_notes:
        return
    if getattr(ip.displayhook, "exec_result", None) is not None:
        for note in ext.config_notes:
            print(note)
        ext.config_notes = []


def unload_ipython_extension(ip):
    global _loaded
    ext = _loaded
    if ext is None or ext.shell is not ip:
        return
    for event, hook in (("post_execute", ext.post_execute),
                        ("post_run_cell", ext.post_run_cell),
                        ("pre_run_cell", ext.pre_run_cell)):
        try:
            ip.events.unregister(event, hook)
        except ValueError:
            pass
    cleanup = ip.input_transformers_cleanup
    if ext.transformer in cleanup:
        cleanup.remove(ext.transformer)
    if ext.definitions in ip.ast_transformers:
        ip.ast_transformers.remove(ext.definitions)
    for kind, table in ext.magic_names.items():
        for name in table:
            ip.magics_manager.magics[kind].pop(name, None)
    if ext in ip.configurables:
        ip.configurables.remove(ext)
    errors.location_formatter = None
    errors.source_formatter = None
    if getattr(ip.__dict__.get("showtraceback"), "_gpureplace", False):
        del ip.showtraceback                 # (IPython's own again)
    if getattr(warnings.formatwarning, "_gpureplace", False):
        warnings.formatwarning = warnings.formatwarning.__wrapped__
    config.settings.notice_stream = "stderr"
    launch.set_printf_listener(None)
    ext.capture.stop()
    _loaded = None
    # What the cells up to this one redefined is seen now; from here on, as outside IPython,
    # nothing looks after a cell: said, unless IPython is reloading the extension (%reload_ext
    # unloads it and loads it again at once).
    from ..tracking import bindings
    bindings.check()
    bindings.reporting = False
    if not _reloading():
        print("gpureplace: extension unloaded: kernels no longer recompile by themselves when a "
              "cell redefines what they use; call gpureplace.refresh() after a redefinition, "
              "or %load_ext gpureplace again")


def _reloading():
    """Whether IPython's ``reload_extension`` is what unloads the extension now."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "reload_extension" and \
                "IPython" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False
