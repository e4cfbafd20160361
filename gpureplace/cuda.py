"""The kernel language, compatible with numba-cuda's ``numba.cuda``: change one import.

    from gpureplace import cuda

    @cuda.jit
    def saxpy(a, x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]
"""

from . import libdevice  # noqa: F401  (cuda.libdevice.X, as in numba-cuda)
from .compiler.intrinsics import registry as _registry
from .jit import (compile_for_current_device, compile_ptx,  # noqa: F401
                  compile_ptx_for_current_device, jit)
from .jit import cuda_compile as compile  # noqa: F401,A004  (numba-cuda's cuda.compile)

for _mod in _registry.language_modules():
    for _name in getattr(_mod, "__all__", ()):
        globals()[_name] = getattr(_mod, _name)
del _mod, _name


def is_available():
    """True when a CUDA GPU (and CuPy) can be used."""
    from . import probe
    return probe.available()
from .hostapi import *  # noqa: F401,F403,E402  (numba-cuda host API: to_device, streams, events, devices)
from . import cuda_random as random  # noqa: E402,F401  (cuda.random, "gpureplace.cuda.random": numba.cuda.random)
from .cuda_reduce import Reduce, reduce  # noqa: E402,F401  (numba-cuda's cuda.reduce)
from numba.core.types import (boolean, complex64, complex128, float16, float32,  # noqa: E402,F401
                              float64, int8, int16, int32, int64, intp, uint8, uint16, uint32,
                              uint64, uintp, void)  # (cuda.float32 ..., as numba-cuda offers)
