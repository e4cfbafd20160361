"""Undecorated helpers in another module, called from kernels in lang/test_lang_device_functions.py
and lang/test_lang_tuples.py.

They are plain Python: the same functions compute the host reference in the GPU tests.
"""

import math

OFFSET = 1.5


def _square(v):
    return v * v


def poly(v):
    """v*v + 2*v + OFFSET, through another helper of this module and a module global."""
    return _square(v) + 2.0 * v + OFFSET


def clamp(v, lo=0.0, hi=1.0):
    """Defaults and keyword arguments on an undecorated helper; min/max builtins."""
    return min(max(v, lo), hi)


def divmod_pair(a, b):
    """Returns a tuple."""
    return a // b, a % b


def norm2(x, y):
    return math.sqrt(_square(x) + _square(y))
