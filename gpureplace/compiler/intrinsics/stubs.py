"""Host-side stand-ins for device intrinsics.

A stub is what a name in ``gpureplace.cuda`` refers to on the host.  In device code the compiler
types and lowers it; called on the host it raises an error that says so.
"""

from __future__ import annotations


class Stub:
    """A device-only function, such as ``cuda.syncthreads``."""

    def __init__(self, name, doc="", namespace="cuda"):
        self.__name__ = name
        self.__qualname__ = f"{namespace}.{name}"
        self.__module__ = f"gpureplace.{namespace}"
        self.__doc__ = doc

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.__qualname__}() can only be used inside a kernel or device "
                           f"function (or under the simulator backend)")

    def __repr__(self):
        return f"<device intrinsic {self.__qualname__}>"

    def __reduce__(self):
        return self.__qualname__


class Namespace:
    """A device-only namespace of stubs, such as ``cuda.atomic`` or ``cuda.shared``."""

    def __init__(self, name, **members):
        self.__name__ = name
        self.__qualname__ = f"cuda.{name}"
        self.__module__ = "gpureplace.cuda"
        for key, value in members.items():
            setattr(self, key, value)

    def __repr__(self):
        return f"<device namespace {self.__qualname__}>"


class Dim3Stub:
    """``threadIdx``, ``blockIdx``, ``blockDim`` and ``gridDim``: .x, .y, .z in device code."""

    def __init__(self, name):
        self.__name__ = name
        self.__qualname__ = f"cuda.{name}"
        self.__module__ = "gpureplace.cuda"

    def __getattr__(self, attr):
        if attr in ("x", "y", "z"):
            raise RuntimeError(f"cuda.{self.__name__}.{attr} only has a value inside a kernel")
        raise AttributeError(attr)

    def __repr__(self):
        return f"<device register cuda.{self.__name__}>"
