"""Kernels that reach numba-cuda's own kernel language (``from numba import cuda`` in a cell
run from before the port: the compiled code takes numba-cuda's intrinsics, ``cuda.grid``, as
they are) run in the simulator with gpureplace's meaning of the same names (its other names, which the compiler
does not take, are refused saying what to import instead); a user's Numba ``@intrinsic``,
whose code is LLVM IR, is refused there with what to do instead.  In a process of its own:
importing ``numba.cuda`` must not reach the rest of the suite."""

from conftest import python_process

PROGRAM = r'''
import warnings
warnings.simplefilter("ignore")
import numpy as np
from gpureplace import cuda
from gpureplace.cuda.extending import intrinsic
from numba import cuda as ncuda
from numba.cuda import grid as nb_grid

@cuda.jit
def numba_names(out, counts):
    i = ncuda.grid(1)
    if i < out.size:
        out[i] = i + nb_grid(1) * 10
        cuda.atomic.add(counts, 0, 1)

@intrinsic
def twice(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.add(args[0], args[0])
    return x(x), codegen

@cuda.jit
def with_intrinsic(out):
    out[0] = twice(21)

out, counts = np.zeros(8, np.int64), np.zeros(1, np.int64)
numba_names[2, 4](out, counts)
print(out.tolist(), counts.tolist())
assert "add" in with_intrinsic.compile("void(int64[::1])").ptx
try:
    with_intrinsic[1, 1](np.zeros(1, np.int64))
except Exception as exc:
    print(type(exc).__name__, "|", str(exc).splitlines()[0])

@cuda.jit
def numba_stub(out):
    out[0] = ncuda.threadIdx.x
try:
    numba_stub.compile("void(int64[::1])")
except Exception as exc:
    print(str(exc).splitlines()[0])
'''


def test_numba_cudas_names_run_and_an_intrinsic_is_refused_clearly():
    lines = python_process(PROGRAM, GPUREPLACE_BACKEND="simulator").strip().splitlines()
    assert lines[0] == str([i * 11 for i in range(8)]) + " [8]"
    assert "the simulator cannot run twice(), a Numba @intrinsic" in lines[1], lines[1]
    assert "GPUREPLACE_BACKEND=gpu" in lines[1]
    # numba-cuda's other names (stubs the compiler does not take): what to import instead
    assert lines[2].endswith("numba.cuda.threadIdx is numba-cuda's kernel language; gpureplace "
                             "compiles its own: import it with `from gpureplace import cuda` "
                             "(then cuda.threadIdx)"), lines[2]
