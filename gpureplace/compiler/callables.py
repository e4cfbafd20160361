"""What the compiler knows of a compiled device function that device code calls (a
``cuda.jit(device=True)`` function): this small protocol, so that the compiler never imports the
layer that defines the function object (``jit``).

A ``DeviceCallable`` has
    py_func               the Python function a call compiles
    declared_signatures   argument-type tuples given to ``cuda.jit("sig")``; empty: any types
    declared_returns      ``{argument types: return type}`` that those signatures declare
"""

from __future__ import annotations


class DeviceCallable:
    """Base of the objects device code calls as compiled device functions (``jit.GPUFunction``)."""

    __slots__ = ()
    py_func = None
    declared_signatures = ()
    declared_returns = {}
