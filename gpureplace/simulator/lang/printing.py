"""``print()`` in the simulator: one printed item, as the device's printf renders it."""

from __future__ import annotations

import numpy as np

from .indexing import Dim3Like


def device_format(value):
    """One printed item, as the device's printf renders it."""
    if value is None:
        return "None"
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return "%f" % float(value)
    if isinstance(value, (complex, np.complexfloating)):
        return "(%f%+fj)" % (float(value.real), float(value.imag))
    if isinstance(value, Dim3Like):
        value = (value.x, value.y, value.z)
    if isinstance(value, tuple):
        inner = ", ".join(device_format(v) for v in value)
        return f"({inner}{',' if len(value) == 1 else ''})"
    raise TypeError(f"print() in device code cannot print a value of type "
                    f"{type(value).__name__}; it prints numbers, booleans, None, string "
                    f"constants and tuples of these")
