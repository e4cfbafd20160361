"""A kernel returns nothing: a signature that gives it a return type other than void is refused
wherever a kernel takes a signature (``compile``, the ``inspect_*`` reflection, ``cuda.jit
("sig")``), naming the kernel and the signature, as numba-cuda refuses it ("CUDA kernel must
have void return type"); device functions keep their return types."""

import pytest
from numba.core import types

from gpureplace import cuda
from gpureplace.compiler.signature import SignatureParseError


@cuda.jit
def fill(x):
    x[0] = 1


@cuda.jit(device=True)
def twice(v):
    return v * 2


@pytest.mark.parametrize("call", [
    lambda sig: fill.compile(sig),
    lambda sig: fill.inspect_ptx(sig),
    lambda sig: fill.inspect_llvm(sig),
    lambda sig: fill.inspect_types(sig),
    lambda sig: cuda.jit(sig)(fill.py_func),
])
def test_a_kernel_signature_with_a_return_type_is_refused(call):
    with pytest.raises(SignatureParseError) as info:
        call("int32(float32[:])")
    text = str(info.value)
    assert text.startswith("invalid signature 'int32(float32[:])': fill is a kernel, which "
                           "returns nothing: its signature's return type must be void, not "
                           "int32: write void(float32[:]) (column 1)")
    assert text.splitlines()[-1] == "    ^^^^^"             # under the return type
    assert isinstance(info.value, TypeError)                 # as numba-cuda's


def test_the_return_type_is_shown_as_written_and_signature_objects_too():
    with pytest.raises(SignatureParseError, match=r"not Tuple\(int32, int32\): write "
                                                  r"void\(float32\[:\], int32\)"):
        fill.compile(" Tuple(int32, int32)(float32[:], int32)")
    with pytest.raises(SignatureParseError, match="must be void, not float64"):
        fill.compile(types.float64(types.float32[:]))


@pytest.mark.parametrize("sig", ["void(float32[:])", "(float32[:],)", "none(float32[:])",
                                 types.void(types.float32[:]), (types.float32[:],)])
def test_void_and_bare_argument_types_are_taken(sig):
    assert fill.compile(sig).argtypes == (types.float32[:],)


def test_a_device_function_keeps_its_return_type():
    assert "i32" in twice.inspect_llvm("int32(int32)")


def test_compile_ptx_of_a_kernel_refuses_a_return_type_as_numba_cuda_does():
    """``cuda.compile_ptx(f, "int32(...)")`` for a kernel (device=False): numba-cuda raises
    "CUDA kernel must have void return type"; a device function keeps its return type."""
    from gpureplace import cuda

    def plain(a):
        a[0] = 1

    with pytest.raises(TypeError, match="return type must be void"):
        cuda.compile_ptx(plain, "int32(int32[:])")
    ptx, restype = cuda.compile_ptx(plain, "void(int32[:])")
    assert ".entry" in ptx and str(restype) == "none"

    def add(x):
        return x + 1

    ptx, restype = cuda.compile_ptx(add, "int32(int32)", device=True)
    assert ".func" in ptx and str(restype) == "int32"
