"""numba-cuda's transfer hints, ``cuda.In`` / ``cuda.Out`` / ``cuda.InOut``: a host array given to
one launch, copied to the device before it and back after it as the hint says
(``jit/launching.py`` does the copies; prepared launches and graphs refuse them)."""

from __future__ import annotations


class ArgHint:
    """numba-cuda's transfer hints for a host array given to a kernel launch:
    ``kernel[g, b](cuda.In(x), cuda.Out(y), cuda.InOut(z))`` copies ``x`` to the device before
    the launch, ``y`` back to the host after it, ``z`` both ways (the launch then waits for the
    kernel).  A device array in a hint is passed as it is."""

    copy_in = copy_out = False

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"cuda.{type(self).__name__}({self.value!r})"


class In(ArgHint):
    copy_in = True


class Out(ArgHint):
    copy_out = True


class InOut(ArgHint):
    copy_in = copy_out = True


def wrap_arg(value, default=InOut):
    """numba-cuda's ``args.wrap_arg``: ``value`` as a transfer hint (``default`` unless it is
    one already), for argument extensions that choose how host arrays travel."""
    return value if isinstance(value, ArgHint) else default(value)
