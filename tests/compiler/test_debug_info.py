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
