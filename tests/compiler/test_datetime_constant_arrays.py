"""A datetime64 / timedelta64 array read from a global, a closure or ``cuda.const.array_like``
is compiled into the code as any other constant array (its values are int64s on the device), in
the code and in device memory for a large one: Numba's constant arrays read the data through
Python's buffer protocol, which has no such dtypes ("cannot include dtype 'M' in a buffer")."""

import numpy as np

from numba.core import types
from numba.np.numpy_support import from_dtype

from gpureplace import cuda

DAYS = np.array(["2020-01-01", "2021-01-01", "2024-02-29"], "datetime64[D]")
STEPS = np.array([1, 2, 3], "timedelta64[h]")
MANY = np.arange(20_000).astype("timedelta64[s]")      # 160 KB: in device memory


@cuda.jit
def from_const(i, out):
    c = cuda.const.array_like(DAYS)
    out[0] = c[i]


@cuda.jit
def from_global(i, out):
    out[0] = DAYS[i]


@cuda.jit
def from_global_steps(i, out):
    out[0] = STEPS[i] + STEPS[0]


@cuda.jit
def from_large_global(i, out):
    out[0] = MANY[i]


def test_datetime_and_timedelta_constant_arrays_compile_and_run(ptxas_check):
    for kernel, out, expected in (
            (from_const, np.zeros(1, "datetime64[D]"), DAYS[2]),
            (from_global, np.zeros(1, "datetime64[D]"), DAYS[2]),
            (from_global_steps, np.zeros(1, "timedelta64[h]"), STEPS[2] + STEPS[0])):
        kernel[1, 1](2, out)
        assert out[0] == expected, kernel.__name__
        ptxas_check(kernel.inspect_ptx((types.int64, from_dtype(out.dtype)[::1])))
    out = np.zeros(1, "timedelta64[s]")
    from_large_global[1, 1](12_345, out)
    assert out[0] == MANY[12_345]
    spec = from_large_global.compile((types.int64, from_dtype(out.dtype)[::1]))
    (_, data), = spec.device_arrays
    assert data.nbytes == MANY.nbytes and (data.view(np.int64) == MANY.view(np.int64)).all()
