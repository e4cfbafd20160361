"""Fills the built-in context: math, NumPy ufuncs and builtins -> device math (libdevice)."""

from ..compiler.intrinsics.devicemath import builtin_table
from .context import Override, builtin_context, host_key


def _fill():
    for host, impl in builtin_table().items():
        builtin_context._table[host_key(host)] = Override(host, impl, builtin_context)


_fill()
