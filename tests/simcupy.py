"""A stand-in for CuPy over NumPy, for running the GPU tests under the CPU simulator.

With ``GPUREPLACE_TEST_SIMULATOR=1`` the test suite puts this module in ``sys.modules["cupy"]``:
it reports no GPU, so gpureplace launches kernels in its simulator, and the GPU tests' CuPy calls
(``cp.asarray``, ``cp.zeros``, ``cp.asnumpy``, streams...) act on NumPy arrays.  Like CuPy, moving
data in and out copies it.
"""

import types

import numpy as np

__version__ = "0-simulated"


class _Runtime:
    @staticmethod
    def getDeviceCount():
        return 0                      # no GPU: gpureplace chooses its simulator

    @staticmethod
    def deviceSynchronize():
        return None


class Stream:
    def __init__(self, non_blocking=False, null=False):
        self.ptr = 0

    def synchronize(self):
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


cuda = types.SimpleNamespace(runtime=_Runtime, Stream=Stream,
                             get_current_stream=lambda device_id=-1: Stream())


class ndarray(np.ndarray):
    """A "device" array: a NumPy array with CuPy's ``get()``."""

    def get(self, stream=None):
        return np.array(self, copy=True)


def _device(a):
    return a.view(ndarray) if isinstance(a, np.ndarray) and not isinstance(a, ndarray) else a


def asarray(a, dtype=None, order=None):
    return _device(np.array(a, dtype=dtype, order=order if order is not None else "K", copy=True))


def asnumpy(a):
    return np.array(a, copy=True)


def asfortranarray(a, dtype=None):
    return _device(np.asfortranarray(np.array(a, dtype=dtype, copy=True)))


def __getattr__(name):
    attr = getattr(np, name)
    if callable(attr) and not isinstance(attr, type):
        def device_version(*args, **kwargs):
            return _device(attr(*args, **kwargs))
        device_version.__name__ = name
        return device_version
    return attr
