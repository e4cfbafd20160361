"""``%load_ext gpureplace``: the cell hook that keeps kernels true to the notebook.

After each cell, the hook compares the bindings compiled kernels depend on with their current
values (``tracking.bindings.check``); any change moves the world, and each affected kernel
recompiles at its next launch.  Unloading removes every hook it registered.
"""

from __future__ import annotations

from ..tracking import bindings

_state = {}


def _post_run_cell(result=None):
    changed = bindings.check()
    if changed and _state.get("verbose"):
        names = ", ".join(f"{name} ({how})" for _, name, how in changed)
        print(f"gpureplace: {names} changed; kernels that use them recompile at their next "
              f"launch")


def load_ipython_extension(ip):
    if _state.get("shell") is ip:
        return
    ip.events.register("post_run_cell", _post_run_cell)
    _state["shell"] = ip


def unload_ipython_extension(ip):
    if _state.get("shell") is ip:
        try:
            ip.events.unregister("post_run_cell", _post_run_cell)
        except ValueError:
            pass
        _state.pop("shell", None)
