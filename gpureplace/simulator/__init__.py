"""The CPU simulator: run kernels without a GPU, with the device's semantics.

    from gpureplace import cuda, simulator

    @cuda.jit
    def saxpy(a, x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]

    simulator.run(saxpy, blocks, threads, a, x, y, out)      # NumPy arrays, changed in place

Kernels run as Python (``print`` and ``pdb.set_trace()`` work inside them); names resolve through
the kernel's Context as the compiler resolves them; float32 stays float32 and integers wrap as on
the device; an index out of bounds raises an IndexError naming the thread, block, line and index.
By default each kernel is also type-checked and compiled to PTX first (``compile=False`` skips it).
"""

from __future__ import annotations

import types as _pytypes

from ..jit import GPUFunction
from . import host  # noqa: F401  (the host API's twins: hostapi calls them)
from . import runner as _runner
from .arrays import SimArray  # noqa: F401
from .blocks import KernelDeadlock  # noqa: F401
from .runner import check, launch  # noqa: F401  (check: prepared launches, graph captures)
from .runner import GridSyncWarning  # noqa: F401

_wrapped = {}


def run(kernel, grid, block, *args, shared=0, stream=None, compile=None):
    """``kernel[grid, block, stream, shared](*args)`` on the simulator.

    ``kernel``: a ``cuda.jit`` kernel, or a plain Python function (treated as one).
    """
    if isinstance(kernel, _pytypes.FunctionType):
        gf = _wrapped.get(kernel)
        if gf is None:
            gf = _wrapped[kernel] = GPUFunction(kernel)
        kernel = gf
    return launch(kernel, grid, block, stream, shared, args, compile=compile)


def set_compile(enabled):
    """Type-check and compile kernels before simulating them (default True; also
    ``GPUREPLACE_SIM_COMPILE=0``)."""
    _runner.compile_kernels = bool(enabled)


__all__ = ["launch", "run", "set_compile", "SimArray", "KernelDeadlock", "GridSyncWarning"]
