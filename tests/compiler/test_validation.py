"""Validation before emission: calls the device cannot run are Python errors, never an LLVM abort."""

import subprocess
import sys
import textwrap

import pytest
from numba.core import types
from numba.core.typing import signature

from gpureplace import CompileError, cuda

host_only = types.ExternalFunction("my_host_function", signature(types.float64, types.float64))


def uses_external(x):
    return host_only(x) + 1.0


@cuda.jit
def kern_external(out):
    out[0] = uses_external(out[0])


def test_call_to_a_host_symbol_is_a_compile_error_with_line():
    with pytest.raises(CompileError) as info:
        kern_external.compile("void(float64[:])")
    err = info.value
    assert "my_host_function" in str(err) and "no device implementation" in str(err)
    assert err.function == "uses_external"
    assert err.lineno == uses_external.__code__.co_firstlineno + 1
    assert err.chain == ("kern_external", "uses_external")


def test_unselectable_llvm_intrinsic_raises_instead_of_aborting():
    # Run in a subprocess: if validation failed, LLVM would abort the whole interpreter.
    code = textwrap.dedent("""
        from numba.extending import intrinsic
        from numba.core import types
        from llvmlite import ir
        from gpureplace import cuda, CompileError

        @intrinsic
        def llvm_sin(typingctx, x):
            def codegen(context, builder, sig, args):
                fn = builder.module.declare_intrinsic("llvm.sin", [ir.DoubleType()])
                return builder.call(fn, args)
            return types.float64(types.float64), codegen

        @cuda.jit
        def k(out):
            out[0] = llvm_sin(out[0])

        try:
            k.compile("void(float64[:])")
        except CompileError as e:
            print("CompileError:", e)
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "CompileError: in k" in proc.stdout
    assert "llvm.sin.f64" in proc.stdout and "NVPTX back end cannot compile" in proc.stdout
