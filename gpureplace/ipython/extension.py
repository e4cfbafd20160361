"""``%load_ext gpureplace``: magics, configuration and the cell hook that keeps kernels true to
the notebook.

Loading registers the ``GPUReplace`` configurable, the magics (``%%cuda`` -- or ``%%gpureplace``
where another extension, such as nvcc4jupyter, already owns ``%%cuda`` -- and the reflection line
magics), an input transformer that runs a ``%%cuda`` cell's body as the cell's own code, and
two cell hooks.  ``post_execute`` converts the functions a ``%%cuda`` cell defined (also when
it failed part-way); ``post_run_cell`` compares the bindings compiled kernels depend on with
their current values: any change moves the world, and each affected kernel recompiles at its
next launch.  An error inside these hooks is a warning: it never fails the user's cell nor
replaces the user's error.  Unloading removes all of it.
"""

from __future__ import annotations

import warnings

from ..tracking import bindings

_state = {}


def _reads_binding(cf, change):
    for each in cf.closure():
        for rec in each.global_reads:
            if rec.kind == "global" and rec.name == change[1] and \
                    each.pyfunc.__globals__ is change.namespace:
                return True
            if rec.kind == "attr" and rec.attr == change[1] and rec.owner is not None and \
                    vars(rec.owner) is change.namespace:
                return True
    return False


def _dependents(changed):
    """Names of live kernels whose compiled code read one of the ``changed`` bindings."""
    from ..kernel import live_functions
    hits = set()
    for fn in live_functions():
        for spec in list(fn._specs.values()):
            cf = spec if fn.device else spec.compiled
            if any(_reads_binding(cf, change) for change in changed):
                hits.add(fn.__qualname__)
                break
    return sorted(hits)


class FdCapture:
    """Captures what the process writes to file descriptor 1 (where the CUDA driver prints device
    ``printf`` output, at synchronisation points), to hand it to the cell's own stdout.

    A notebook kernel's ``sys.stdout`` is a message stream, not fd 1: without this, device output
    would reach the Jupyter server's terminal (or another cell), not the cell that launched the
    kernel.
    """

    def __init__(self):
        self._saved = None
        self._file = None

    @staticmethod
    def _flush_c():
        import ctypes
        try:
            ctypes.CDLL(None).fflush(None)
        except (OSError, AttributeError):
            pass

    @property
    def active(self):
        return self._saved is not None

    def start(self):
        if self._saved is not None:
            return
        import os
        import sys
        import tempfile
        try:
            sys.stdout.flush()
        except (AttributeError, ValueError):
            pass
        self._flush_c()
        file = tempfile.TemporaryFile()
        saved = None
        try:
            saved = os.dup(1)
            os.dup2(file.fileno(), 1)
        except BaseException:
            if saved is not None:
                os.close(saved)
            file.close()
            raise
        self._file, self._saved = file, saved

    def stop(self):
        """Restore fd 1; return what was written meanwhile."""
        if self._saved is None:
            return ""
        import os
        self._flush_c()
        os.dup2(self._saved, 1)
        os.close(self._saved)
        self._saved = None
        self._file.seek(0)
        text = self._file.read().decode("utf-8", "replace")
        self._file.close()
        self._file = None
        return text


_capture = FdCapture()


def _start_capture():
    """The printf listener: called inside the user's launch, so it must not fail it."""
    try:
        _capture.start()
    except Exception as exc:         # device output then goes to fd 1 as is
        warnings.warn(f"gpureplace: cannot capture device output for this cell: "
                      f"{type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)


def _flush_device_output():
    """Device printf output reaches stdout when the GPU synchronises: synchronise while this cell
    is still running and print what the kernels wrote into the cell that launched them."""
    import sys

    from ..runtime import launch
    if not launch.printf_pending():
        return
    launch.clear_printf_pending()
    from ..runtime import device
    try:
        if device.available():
            device.cupy_module().cuda.runtime.deviceSynchronize()
    finally:
        text = _capture.stop()
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()


def _warn_hook_failure(what, exc):
    """An error in gpureplace's own cell hooks is shown as a warning: it must neither fail the
    user's cell nor replace the user's error as the cell's last traceback."""
    warnings.warn(f"gpureplace: {what} failed after this cell: {type(exc).__name__}: {exc}",
                  RuntimeWarning, stacklevel=2)


def _post_execute():
    """When a cell ends (ran, failed part-way, or silent): the %%cuda cell's functions become
    gpureplace functions, before the redefinition check sees them."""
    magics = _state.get("magics_obj")
    if magics is None:
        return
    try:
        errors = magics.finish_cells()
    except Exception as exc:         # see _warn_hook_failure
        errors = [exc]
    for exc in errors:
        _warn_hook_failure("converting the %%cuda cell's functions", exc)


def _post_run_cell(result=None):
    try:
        _check_after_cell()
    except Exception as exc:         # see _warn_hook_failure
        _warn_hook_failure("the redefinition check", exc)


def _check_after_cell():
    config = _state.get("config")
    _flush_device_output()
    if config is not None and not config.check_redefinitions:
        return
    changed = bindings.check()
    if changed and config is not None and config.verbose:
        what = ", ".join(f"{name} {how}" for _, name, how in changed)
        kernels = _dependents(changed)
        tail = (f"{', '.join(kernels)} will recompile on next launch" if kernels
                else "no compiled kernel uses it")
        print(f"gpureplace: {what} — {tail}")


def _location(filename, lineno):
    """``Cell In[3], line 5`` for code typed in a cell; ``file, line N`` otherwise."""
    ip = _state.get("shell")
    count = None
    if ip is not None:
        try:
            count = ip.compile._filename_map.get(filename)
        except Exception:            # formatting an error must not fail
            count = None
    if count is not None:
        return f"Cell In[{count}], line {lineno}"
    return f"{filename}, line {lineno}"


def load_ipython_extension(ip):
    if _state.get("shell") is ip:
        return
    from . import magics as magics_module
    from .config import GPUReplace
    from .. import errors
    config = GPUReplace(parent=ip)
    ip.configurables.append(config)
    m = magics_module.GPUReplaceMagics(ip)
    cell_magics = ip.magics_manager.magics["cell"]
    owner = cell_magics.get("cuda")
    names = {"cell": {"gpureplace": "cuda"}, "line": {}}
    if owner is None:
        names["cell"]["cuda"] = "cuda"
    else:
        warnings.warn("another extension (nvcc4jupyter?) already registers %%cuda; gpureplace's "
                      "cell magic is available as %%gpureplace", stacklevel=2)
    for line_name in ("cuda_ptx", "cuda_sass", "cuda_llvm", "cuda_types", "cuda_deps",
                      "cuda_cache"):
        names["line"][line_name] = line_name
    for kind, table in names.items():
        for name, method in table.items():
            ip.magics_manager.register_function(getattr(m, method), magic_kind=kind,
                                                magic_name=name)
    transformer = magics_module.CudaCellTransformer(
        m, [name for name, method in names["cell"].items() if method == "cuda"])
    ip.input_transformers_cleanup.append(transformer)
    ip.events.register("post_execute", _post_execute)
    ip.events.register("post_run_cell", _post_run_cell)
    errors.location_formatter = _location
    from ..runtime import launch
    launch.set_printf_listener(_start_capture)
    _state.update(shell=ip, config=config, magics=names, magics_obj=m, transformer=transformer)


def unload_ipython_extension(ip):
    if _state.get("shell") is not ip:
        return
    from .. import errors
    for event, hook in (("post_execute", _post_execute), ("post_run_cell", _post_run_cell)):
        try:
            ip.events.unregister(event, hook)
        except ValueError:
            pass
    transformer = _state.get("transformer")
    cleanup = ip.input_transformers_cleanup
    if transformer in cleanup:
        cleanup.remove(transformer)
    for kind, table in _state.get("magics", {}).items():
        for name in table:
            ip.magics_manager.magics[kind].pop(name, None)
    for obj in (_state.get("config"), _state.get("magics_obj")):
        if obj is not None and obj in ip.configurables:
            ip.configurables.remove(obj)
    errors.location_formatter = None
    from ..runtime import launch
    launch.set_printf_listener(None)
    _capture.stop()
    _state.clear()
