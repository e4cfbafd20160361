"""An ``extending.overload`` whose implementation uses the kernel language (a shuffle,
``cuda.threadIdx``) and an ``overload_method`` of arrays run in the simulator as the device
code they compile to.  In a process of its own: the overloads register in the default context
and in Numba's registries for the process's life, which other tests (Dask tokens of the
default context) must not see."""

from conftest import python_process

PROGRAM = r'''
import numpy as np
from numba.core import types
from gpureplace import cuda
from gpureplace.cuda import extending

def warp_bcast(v):
    pass

@extending.overload(warp_bcast)
def _warp_bcast(v):
    def impl(v):
        return cuda.shfl_sync(0xFFFFFFFF, v, 0) + cuda.threadIdx.x * 0
    return impl

@cuda.jit
def bcast_kernel(out):
    i = cuda.threadIdx.x
    out[i] = warp_bcast(i + 100)

@extending.overload_method(types.Array, "first_plus", target="cuda")
def _first_plus(a, i):
    def impl(a, i):
        return a[0] + i + cuda.threadIdx.x * 0
    return impl

@cuda.jit
def method_kernel(a, out):
    i = cuda.threadIdx.x
    out[i] = a.first_plus(i)

print("shfl.sync" in bcast_kernel.compile("void(int64[:])").ptx)
out = np.zeros(32, np.int64)
bcast_kernel[1, 32](out)
print(out.tolist() == [100] * 32)
assert method_kernel.compile("void(int64[:], int64[:])").ptx
out = np.zeros(4, np.int64)
method_kernel[1, 4](np.arange(4, dtype=np.int64) + 5, out)
print(out.tolist())
'''


def test_overload_implementations_using_the_kernel_language_run_as_device_code():
    out = python_process(PROGRAM, GPUREPLACE_BACKEND="simulator")
    assert out.split("\n")[:3] == ["True", "True", "[5, 6, 7, 8]"], out
