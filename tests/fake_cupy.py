"""Stand-ins shaped like CuPy arrays, for checking the argument and launch code on the CPU
(``tests/jit/test_binder.py``, ``tests/lang/test_vector_types.py``)."""

import numpy as np


class _Mem:
    def __init__(self, ptr, device_id=0):
        self.ptr = ptr
        self.device_id = device_id           # CuPy's MemoryPointer.device_id


class ndarray:  # noqa: N801 - named like CuPy's so the argument code treats it as one
    __module__ = "cupy._core.core"

    def __init__(self, shape, dtype, strides=None, ptr=0x7000, device=0):
        host = np.empty(shape, dtype)
        self.shape = host.shape
        self.dtype = host.dtype
        self.strides = host.strides if strides is None else strides
        self.ndim = len(self.shape)
        self.size = host.size
        self.data = _Mem(ptr, device)
        if self.flags:      # CuPy's contiguity flags, as CuPy computes them (size-1 axes ignored)
            view = np.lib.stride_tricks.as_strided(np.empty(64 * host.size + 64, host.dtype),
                                                   self.shape, self.strides)
            self._c_contiguous = view.flags.c_contiguous
            self._f_contiguous = view.flags.f_contiguous

    flags = True


class ndarray_without_flags(ndarray):  # noqa: N801 - a CuPy without _c_contiguous: strides compared
    __module__ = "cupy._core.core"
    flags = False


ndarray_without_flags.__name__ = "ndarray"
