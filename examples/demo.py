"""gpureplace demo: the saxpy kernel from the README, with an undecorated helper.

    python examples/demo.py

Without a GPU it compiles the kernel to PTX and prints it (nothing needs a GPU to compile), says
that no GPU was found, and runs the kernel in the CPU simulator instead.  With a GPU (and CuPy)
it launches the kernel on 2**20 float32 values.  Either way it checks the result against NumPy.
"""

import math
import sys

import numpy as np

from gpureplace import cuda

SIGNATURE = "void(float32, float32[:], float32[:], float32[:])"
N = 2**20
THREADS = 256
BLOCKS = N // THREADS          # 4096


def scale(v):                  # a plain Python function: compiled as device code when reached
    return 2.0 * v


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = scale(a) * x[i] + math.sin(y[i])


def show_ptx():
    spec = saxpy.compile(SIGNATURE)        # no GPU needed
    print(f"PTX of saxpy{SIGNATURE[4:]} ({len(spec.ptx.splitlines())} lines):")
    print(spec.ptx)


def run_on_gpu():
    import cupy as cp

    rng = np.random.default_rng(0)
    x = rng.standard_normal(N, dtype=np.float32)
    y = rng.standard_normal(N, dtype=np.float32)

    d_x, d_y = cp.asarray(x), cp.asarray(y)
    d_out = cp.zeros(N, dtype=cp.float32)
    saxpy[BLOCKS, THREADS](1.5, d_x, d_y, d_out)     # saxpy[4096, 256]
    cp.cuda.Device().synchronize()
    out = cp.asnumpy(d_out)

    # As in the kernel: scale(1.5) in float64, times x, plus the float32 sine of y.
    expected = (scale(1.5) * x.astype(np.float64)
                + np.sin(y).astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    print(f"saxpy[{BLOCKS}, {THREADS}] on {N} float32 values agrees with NumPy: ok")


def run_in_simulator():
    """The same launch on the CPU simulator, on NumPy arrays (a smaller size: it is Python)."""
    from gpureplace import simulator

    n = 4096
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    out = np.zeros(n, dtype=np.float32)
    simulator.run(saxpy, n // THREADS, THREADS, np.float32(1.5), x, y, out)
    expected = (scale(1.5) * x.astype(np.float64)
                + np.sin(y).astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    print(f"saxpy[{n // THREADS}, {THREADS}] on {n} float32 values in the CPU simulator agrees "
          f"with NumPy: ok")


def main():
    show_ptx()
    if not cuda.is_available():
        print("No GPU was found (no CUDA device, or CuPy is not installed): the kernel was "
              "compiled to PTX above but not launched on a GPU.")
        run_in_simulator()
        return 0
    run_on_gpu()
    return 0


if __name__ == "__main__":
    sys.exit(main())
