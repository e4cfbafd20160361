"""Every libdevice function, callable from device code: ``libdevice.sinf(x)`` calls ``__nv_sinf``.

Names are libdevice's without the ``__nv_`` prefix (as in numba-cuda's ``cuda.libdevice``).
Functions that write through pointers return tuples: ``s, c = libdevice.sincosf(x)``.
"""

from .compiler.intrinsics import libdevice_calls as _calls


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _calls.get(name)


def __dir__():
    return _calls.names()
