"""debug=True: full DWARF debug information in the PTX (``.section .debug_info``: the kernel's
variables, its arguments and their types, for cuda-gdb), as numba-cuda's debug=True gives;
lineinfo=True only line directives; neither by default.  Every listing is assembled by ptxas."""

import re

import numpy as np
import pytest

from conftest import assemble
from gpureplace import cuda

SECTION = re.compile(r"\.section\s+\.debug_info\s+{")


def _kernel(**options):
    @cuda.jit(**options)
    def accumulate(x, depth):
        acc = 0
        flag = depth > 2
        half = cuda.float16(1.5)
        for i in range(depth):
            acc += i
        if flag:
            x[0] = acc + int(half)
    return accumulate


SIG = "void(int32[::1], int32)"


def test_debug_true_has_variables_and_types():
    k = _kernel(debug=True, opt=False)
    ptx = k.compile(SIG).ptx
    assert SECTION.search(ptx) and ".loc" in ptx
    assemble(ptx)
    ll = k.inspect_llvm(SIG)
    for name in ("acc", "flag", "half", "depth", "x"):
        assert re.search(rf'!DILocalVariable\([^)]*name: "{name}"', ll), name
    assert re.search(r'!DILocalVariable\(name: "depth", arg: 2', ll)
    assert re.search(r'!DIBasicType\(name: "bool", size: 8, encoding: DW_ATE_boolean\)', ll)
    assert re.search(r'!DIBasicType\(name: "float16", size: 16, encoding: DW_ATE_float\)', ll)
    # where each variable lives (dbg records, or the older intrinsic calls)
    assert re.search(r"#dbg_(declare|value)\(|llvm\.dbg\.(declare|value)", ll)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_debug_kernel_calling_device_functions_assembles(arch):
    @cuda.jit(device=True, debug=True)
    def leaf(v):
        w = v * 2
        return w + 1

    @cuda.jit(device=True)
    def middle(v):
        return leaf(v) - 1

    @cuda.jit(debug=True, opt=False)
    def kernel(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = middle(x[i])

    ptx = kernel.compile("void(float32[::1])", arch=arch).ptx
    assert len(SECTION.findall(ptx)) == 1
    assemble(ptx, arch)


def test_lineinfo_has_lines_only_and_default_neither():
    lines = _kernel(lineinfo=True).compile(SIG).ptx
    assert ".loc" in lines and not SECTION.search(lines)
    assemble(lines)
    plain = _kernel().compile(SIG).ptx
    assert ".loc" not in plain and not SECTION.search(plain)


def test_debug_kernel_runs_in_the_simulator():
    from gpureplace import simulator
    x = np.zeros(1, np.int32)
    simulator.run(_kernel(debug=True, opt=False), 1, 1, x, 4)
    assert x[0] == 0 + 1 + 2 + 3 + 1


@pytest.mark.gpu
def test_debug_kernel_loads_and_runs_on_the_gpu():
    import cupy as cp
    x = cp.zeros(1, cp.int32)
    _kernel(debug=True, opt=False)[1, 1](x, 4)
    assert int(x[0]) == 7


@cuda.jit(device=True)
def _twice(v):
    return 2 * v


def test_debug_describes_every_kind_of_variable():
    """Variables holding the kernel language's own objects (cuda.threadIdx, a namespace, a
    device function), tuples, shared arrays and vector values get a description too (the GPU
    found one that had none: a register's type)."""
    @cuda.jit(debug=True)
    def kernel(out, rec):
        tid = cuda.threadIdx
        i = tid.x
        ns = cuda.atomic
        fn = _twice
        sh = cuda.shared.array(4, cuda.int32)
        pair = (i, 2.5)
        v = cuda.float32x2(1.0, 2.0)
        b = cuda.bf16.bfloat16(1.5)
        sh[i % 4] = i
        cuda.syncthreads()
        if cuda.blockIdx.x == 1 and i == 2:
            out[0] = out.shape[-i] + pair[1] + fn(v.x) + cuda.float32(b) + rec.x
            ns.add(out, 1, 1.0)
    from numba.np.numpy_support import from_dtype
    rec = from_dtype(np.dtype([("x", np.float32), ("y", np.int8)]))
    for arch in ("sm_80", "sm_90"):
        ptx = kernel.compile((cuda.float32[::1], rec), arch=arch).ptx
        assert SECTION.search(ptx)
        assemble(ptx, arch)


def test_every_compile_entry_point_honours_debug():
    def f(x):
        x[0] = 1
    sig = "void(int32[::1])"
    assert SECTION.search(cuda.compile_ptx(f, sig, debug=True)[0])
    assert SECTION.search(cuda.compile(f, sig, device=False, debug=True)[0])
    assert SECTION.search(cuda.compile_all(f, sig, device=False, abi="numba", debug=True)[0][0])
    assert SECTION.search(cuda.compile_for_current_device(f, sig, device=False, debug=True)[0])
    assert not SECTION.search(cuda.compile(f, sig, device=False)[0])
