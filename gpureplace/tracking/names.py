"""How a host function, module or stub is named in messages and reports: ``math.sin``,
``mymodule.scale``, ``cuda.grid`` (gpureplace's own stubs by their user-facing name)."""

from __future__ import annotations

import types


def qualified_name(obj) -> str:
    """``module.qualname`` of ``obj`` (a module by its name; builtins without a module)."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    mod = getattr(obj, "__module__", None) or ""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    if mod.startswith("gpureplace.") and "." in name:
        return name                     # intrinsic stubs: "cuda.grid", "libdevice.sinf"
    return f"{mod}.{name}" if mod and mod != "builtins" else name
