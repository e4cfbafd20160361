"""Every function of ``cuda.libdevice`` (libdevice's ``__nv_*``, numba-cuda's API) compiles to
PTX that ptxas assembles: ``__nv_fast_tanhf`` (``llvm.tanh.f32`` from sm_75 on) and
``__nv_half2float`` (``llvm.convert.from.fp16.f32``) call intrinsics LLVM's NVPTX back end does
not select, and both were refused as unresolved calls."""

import re

import numpy as np

from gpureplace import cuda
from conftest import assemble

#: functions whose pointer parameter is an input (a C string, an array of lengths), not a result
POINTER_INPUTS = {"nan", "nanf", "norm", "normf", "rnorm", "rnormf"}
_ARRAY = {"float": "f32", "double": "f64", "i32": "i32", "i64": "i64", "i16": "i16"}


def _every_call_kernel():
    """One kernel calling every libdevice function once on elements of its typed inputs, each
    result (and each element of a tuple result) stored in ``out`` as float64."""
    lines, slot = [], 0
    names = sorted(n for n in dir(cuda.libdevice) if not n.startswith("_"))
    for name in names:
        stub = getattr(cuda.libdevice, name)
        if name in POINTER_INPUTS:
            continue
        ins = [a for a in stub.llvm_args if a != "ptr"]
        outs = len(stub.llvm_args) - len(ins) + (stub.llvm_ret != "void")
        args = ", ".join(f"{_ARRAY[a]}[{j}]" for j, a in enumerate(ins))
        lines.append(f"    r = cuda.libdevice.{name}({args})")
        if outs == 1:
            lines.append(f"    out[{slot}] = float64(r)")
        else:
            lines.extend(f"    out[{slot + m}] = float64(r[{m}])" for m in range(outs))
        slot += outs
    src = "def every_call(f32, f64, i32, i64, i16, out):\n" + "\n".join(lines) + "\n"
    ns = {"cuda": cuda, "float64": np.float64}
    exec(compile(src, "<every libdevice call>", "exec"), ns)
    return cuda.jit(ns["every_call"]), len(names) - len(POINTER_INPUTS)


def test_every_libdevice_function_compiles_and_assembles():
    kernel, count = _every_call_kernel()
    assert count >= 340
    spec = kernel.compile("void(float32[:], float64[:], int32[:], int64[:], int16[:], "
                          "float64[:])", arch="sm_90")
    assemble(spec.ptx, arch="sm_90")
    assert "tanh.approx.f32" in spec.ptx                 # fast_tanhf from sm_75 on
    assert re.search(r"cvt\.f(32|64)\.f16", spec.ptx)   # half2float


def test_half2float_and_fast_tanhf_in_a_kernel():
    @cuda.jit
    def k(bits, x, out, t):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = cuda.libdevice.half2float(bits[i])
            t[i] = cuda.libdevice.fast_tanhf(x[i])

    h = np.array([1.5, -2.0, 65504.0, -0.0], np.float16)
    x = np.array([0.5, -1.0, 3.0, 0.0], np.float32)
    out, t = np.zeros(4, np.float32), np.zeros(4, np.float32)
    k[1, 4](h.view(np.int16), x, out, t)
    np.testing.assert_array_equal(out, h.astype(np.float32))
    np.testing.assert_allclose(t, np.tanh(x), rtol=1e-3)
    sig = "void(int16[:], float32[:], float32[:], float32[:])"
    ptx = k.compile(sig, arch="sm_90").ptx
    assemble(ptx)
    assert "tanh.approx.f32" in ptx
    # before sm_75, libdevice's own tanh (CUDA 13's ptxas assembles nothing below sm_75)
    assert "tanh.approx.f32" not in k.compile(sig, arch="sm_70").ptx
