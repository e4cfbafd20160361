"""Kernels given signatures in ``cuda.jit("void(int32[:], int32)")`` take only those, as in
numba-cuda: scalars convert to the declared types (a Python int becomes an int32), arrays of
any layout go to an ``[:]`` (any-layout) parameter, and nothing else is compiled."""

import re

import numpy as np
import pytest

from gpureplace import CompileError, LaunchError, cuda
from gpureplace.config import settings


def clz_into(ary, c):
    ary[0] = cuda.clz(c)


def scaled(out, x, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * a


def _run(xp):
    clz32 = cuda.jit("void(int32[:], int32)")(clz_into)
    ary = xp.zeros(1, dtype=np.int32)
    clz32[1, 1](ary, 0x00100000)                 # a Python int, declared int32: 11, not 43
    assert int(ary[0]) == 11
    both = cuda.jit(["void(float32[:], float32[:], float32)",
                     "void(float64[:], float64[:], float64)"])(scaled)
    x32 = xp.arange(8, dtype=np.float32)
    out32 = xp.zeros(8, np.float32)
    both[1, 8](out32, x32, 0.1)                  # float64 scalar -> float32 signature
    expect = np.arange(8, dtype=np.float32) * np.float32(0.1)
    np.testing.assert_array_equal(np.asarray(out32.get() if hasattr(out32, "get") else out32),
                                  expect)
    x64 = xp.arange(8, dtype=np.float64)
    out64 = xp.zeros(8, np.float64)
    both[1, 8](out64, x64[::1], 3)              # an int converts to float64
    assert float(out64[7]) == 21.0
    strided = xp.arange(16, dtype=np.float32)[::2]
    both[1, 8](out32, strided, np.float32(2))    # a strided array fits [:]
    assert float(out32[3]) == 12.0
    assert len(both.overloads) == 2              # nothing else was compiled
    with pytest.raises(TypeError, match=r"No matching definition for argument type\(s\) "
                                        r"\(array\(int64"):
        both[1, 8](xp.zeros(8, np.int64), x32, 1.0)
    with pytest.raises(LaunchError, match="takes no others"):
        clz32[1, 1](ary, 1.5)                    # a float does not become an int
    assert len(both.overloads) == 2


def test_declared_signatures_in_the_simulator(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    _run(np)


def test_explicit_argument_conversion_rules():
    from numba import types as t

    from gpureplace.runtime import conversion as a
    f32c = ("array", np.dtype("float32"), 1, "C")
    keys, vals = a.match_signature([(t.float32[:], t.int32)], [f32c, ("int64",)],
                                   [(100, 8), (5,)])
    assert keys == [("array", np.dtype("float32"), 1, "A"), ("scalar", np.dtype("int32"))]
    assert vals == [100, 8, 4, 5]                # strides added for the any-layout parameter
    assert a.match_signature([(t.float32[::1], t.int32)], [f32c, ("float64",)],
                             [(100, 8), (5.0,)]) is None
    assert a.match_signature([(t.float32[:, ::1],)], [f32c], [(100, 8)]) is None
    keys, _ = a.match_signature([(t.UniTuple(t.float32, 2),)],
                                [("tuple", ("int64",), ("float64",))], [(1, 2.0)])
    assert keys == [("tuple", ("scalar", np.dtype("float32")), ("scalar", np.dtype("float32")))]


@pytest.mark.gpu
def test_declared_signatures_on_the_gpu():
    import cupy as cp
    _run(cp)


def test_the_best_fitting_signature_wins_and_ties_are_errors(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    from gpureplace.errors import SignatureError

    def add(r, x, y):
        r[0] = x + y
    f = cuda.jit(["(float64[::1], float32, float32)", "(float64[::1], float64, float64)"])(add)
    r = np.zeros(1)
    f[1, 1](r, np.float32(1), np.float32(2**-25))       # exact: the float32 signature
    assert r[0] == 1.0
    f[1, 1](r, 1, 2**-25)                               # fewer unsafe conversions: float64
    assert r[0] == 1.0000000298023224
    g = cuda.jit(["(float64[::1], float32, float64)", "(float64[::1], float64, float32)"])(add)
    with pytest.raises(SignatureError, match="ambiguous"):
        g[1, 1](r, 1.0, 2.0)
    with pytest.raises(TypeError):                      # SignatureError is a TypeError too
        g[1, 1](r, 1j, 2.0)


@cuda.jit("int32(int32, int32)", device=True)
def pack_bytes(a, b):
    return (a & 0xFF) | ((b & 0xFF) << 8)


@cuda.jit(["(int64, int64)"], device=True)
def add_ints(a, b):
    return a + b


@cuda.jit
def use_declared_device(ch, out, wide):
    out[0] = pack_bytes(ch[0], ch[1])       # float32 arguments convert to the declared int32
    wide[0] = add_ints(1.5, 2.5)             # float64 -> int64: 1 + 2


def test_device_functions_given_signatures_convert_their_arguments(monkeypatch):
    from gpureplace import CompileError, simulator
    spec = use_declared_device.compile("void(float32[::1], int32[::1], int64[::1])")
    assert "cvt.rzi.s32.f32" in spec.ptx
    ch, out, wide = np.array([3.7, 1.2], np.float32), np.zeros(1, np.int32), np.zeros(1, np.int64)
    simulator.run(use_declared_device, 1, 1, ch, out, wide)
    assert out[0] == 3 | (1 << 8) and wide[0] == 3
    assert len(pack_bytes.overloads) == 1

    @cuda.jit
    def complex_arg(r, x):
        r[0] = add_ints(x, 1j)
    with pytest.raises(CompileError, match="No matching definition"):
        complex_arg.compile("void(int64[::1], float64)")


@cuda.jit("float32(float32, float32)", device=True)
def scaled_sum32(a, b):
    return a * 1.1 + b              # float64 arithmetic: the declared float32 is what returns


@cuda.jit
def use_declared_return(out, x):
    out[0] = scaled_sum32(x[0], x[1])


def test_device_functions_return_their_declared_type(monkeypatch):
    """numba-cuda converts a device function's value to the return type its signature declares;
    a caller storing it into a float64 array sees the float32 rounding."""
    from numba import types as t

    from gpureplace import simulator
    spec = use_declared_return.compile("void(float64[::1], float32[::1])")
    assert "cvt.rn.f32.f64" in spec.ptx
    assert scaled_sum32.compile((t.float32, t.float32)).restype == t.float32
    ptx, restype = cuda.compile_ptx(scaled_sum32.py_func, "float32(float32, float32)",
                                    device=True)
    assert restype == t.float32 and ".param .b32 func_retval0" in ptx
    x, out = np.array([0.1, 0.0], np.float32), np.zeros(1)
    simulator.run(use_declared_return, 1, 1, out, x)
    assert out[0] == float(np.float32(np.float64(np.float32(0.1)) * 1.1)) != 0.1 * 1.1


@pytest.mark.gpu
def test_declared_return_type_on_the_gpu():
    import cupy as cp
    x, out = cp.asarray(np.array([0.1, 0.0], np.float32)), cp.zeros(1)
    use_declared_return[1, 1](out, x)
    assert float(out[0]) == float(np.float32(np.float64(np.float32(0.1)) * 1.1))


def test_compile_for_c_callers():
    """``cuda.compile`` (numba-cuda's): a device function under the C ABI, named after the
    Python function or ``abi_info["abi_name"]``; PTX that ptxas assembles as a relocatable."""
    from numba import types as t

    from conftest import assemble

    def axpy(a, x, y):
        return a * x + y

    ptx, restype = cuda.compile(axpy, "float32(float32, float32, float32)")
    assert restype == t.float32
    assert re.search(r"\.visible \.func\s+\(\.param \.b32 func_retval0\) axpy\(", ptx)
    ptx2, _ = cuda.compile_ptx(axpy, "float64(float64, float64, float64)", device=True,
                               abi="c", abi_info={"abi_name": "daxpy"})
    assert ".visible .func  (.param .b64 func_retval0) daxpy(" in ptx2
    for text in (ptx, ptx2):
        assemble(text, relocatable=True)
    assert ".target sm_90" in cuda.compile_ptx_for_current_device(axpy, "float64(float64, "
                                                                  "float64, float64)",
                                                                  device=True)[0]
    code, restype = cuda.compile_for_current_device(axpy, "float32(float32, float32, float32)")
    assert code == ptx and restype == t.float32           # C ABI, this machine's architecture

    def first(x):
        return x[0]

    with pytest.raises(CompileError, match="C ABI takes integers, floats and booleans"):
        cuda.compile(first, "float32(float32[:])")
    with pytest.raises(NotImplementedError, match="ltoir"):
        cuda.compile(axpy, "float32(float32, float32, float32)", output="ltoir")
    with pytest.raises(NotImplementedError, match="The C ABI is not supported for kernels: "
                                                  "abi='c' is for device functions"):
        cuda.compile_ptx(axpy, "void(float32, float32, float32)", abi="c")
    with pytest.raises(NotImplementedError, match="Unsupported ABI: fastcall"):
        cuda.compile_ptx(axpy, "void(float32, float32, float32)", abi="fastcall")
    with pytest.raises(NotImplementedError, match="Unsupported output type: illegal"):
        cuda.compile_all(axpy, "float32(float32, float32, float32)", output="illegal")


def test_compile_all_gives_the_code_and_what_links_with_it():
    src = cuda.CUSource("extern \"C\" __device__ int twice(int *r, int a) { *r = 2 * a; "
                        "return 0; }")
    twice = cuda.declare_device("twice", "int32(int32)", link=src)

    def calls(x):
        return twice(x) + 1

    codes, restype = cuda.compile_all(calls, "int32(int32)", abi="numba")
    assert len(codes) == 2 and ".extern .func" in codes[0] and codes[1] is src
    assert str(restype) == "int32"
    codes, _ = cuda.compile_all(lambda x: x + 1, "int32(int32)")
    assert len(codes) == 1 and "_lambda_(" in codes[0]


def _pointer_axpy():
    from numba import types as t
    ptr = t.CPointer(t.int32)

    @cuda.jit(t.void(ptr, t.int32, ptr, ptr, t.uint32))
    def axpy(r, a, x, y, n):
        i = cuda.grid(1)
        if i < n:
            r[i] = a * x[i] + y[i]
    return axpy


def test_pointer_parameters_take_device_addresses(monkeypatch):
    """numba-cuda's kernels declared with ``CPointer`` parameters take raw addresses (ints)."""
    from numba import types as t

    from conftest import assemble
    from gpureplace.runtime import conversion as a
    axpy = _pointer_axpy()
    ptx = next(iter(axpy.inspect_ptx().values()))
    assemble(ptx)
    assert ptx.count(".param .u64 .ptr") == 3
    keys, vals = a.match_signature(axpy.declared_signatures, [("int64",)] * 5,
                                   [(0x1000,), (5,), (0x2000,), (0x3000,), (10,)])
    assert keys[0] == ("pointer", np.dtype("int32")) and vals == [0x1000, 5, 0x2000, 0x3000, 10]
    assert a.numba_type_of_key(keys[0]) == t.CPointer(t.int32)
    assert a.match_signature(axpy.declared_signatures, [("float64",)] + [("int64",)] * 4,
                             [(1.0,), (5,), (1,), (1,), (1,)]) is None
    monkeypatch.setattr(settings, "backend", "simulator")
    hx = np.arange(10, dtype=np.int32)
    hy = hx * 2
    r = np.zeros(10, np.int32)
    axpy[1, 32](r.ctypes.data, 5, hx.ctypes.data, hy.ctypes.data, 10)
    assert (r == 5 * hx + hy).all()
    # numba-cuda's test of this: addresses from the device arrays' interface
    dx, dy = cuda.to_device(hx), cuda.to_device(hy)
    dr = cuda.device_array_like(dx)
    axpy[1, 32](*[d.__cuda_array_interface__["data"][0] for d in (dr,)], 3,
                dx.__cuda_array_interface__["data"][0], dy.__cuda_array_interface__["data"][0],
                10)
    assert (dr.copy_to_host() == 3 * hx + hy).all()


def test_a_pointer_past_its_allocation_is_an_error_in_the_simulator(monkeypatch):
    """The simulator's device memory is the process's own: a store through a pointer past the
    array it points into raises (naming the thread and line) instead of corrupting the heap."""
    monkeypatch.setattr(settings, "backend", "simulator")
    axpy = _pointer_axpy()
    hx = np.arange(10, dtype=np.int32)
    dx, dy, dr = cuda.to_device(hx), cuda.to_device(2 * hx), cuda.device_array(10, np.int32)
    addr = [d.__cuda_array_interface__["data"][0] for d in (dr, dx, dy)]
    with pytest.raises(IndexError, match=r"index 10 of a pointer to int32 is outside the "
                                         r"allocation it points into \(40 bytes; indices 0 to 9"
                                         r".*in axpy at .*threadIdx=\(10, 0, 0\)"):
        axpy[1, 32](addr[0], 5, addr[1], addr[2], 16)           # n=16 over 10 elements
    # a pointer into the middle of a view: bounds are the whole allocation's
    dr.copy_to_device(np.full(10, -1, np.int32))
    mid = dr[4:].__cuda_array_interface__["data"][0]
    axpy[1, 32](mid, 1, addr[1], addr[2], 6)
    assert (dr.copy_to_host() == np.r_[[-1] * 4, 3 * hx[:6]]).all()
    with pytest.raises(IndexError, match="indices -4 to 5 from this pointer"):
        axpy[1, 32](mid, 1, addr[1], addr[2], 7)
    # host arrays given as arguments of the same launch count as allocations too
    hr = np.zeros(10, np.int32)

    @cuda.jit("void(int32[:], CPointer(int32), int32)")
    def fill(arr, p, n):
        i = cuda.grid(1)
        if i < n:
            p[i] = arr[0] + i
    fill[1, 16](hr, hr.ctypes.data, 10)
    assert (hr == np.arange(10)).all()
    with pytest.raises(IndexError, match="index 10 of a pointer"):
        fill[1, 16](hr, hr.ctypes.data, 11)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_pointer_parameters_on_the_gpu():
    import cupy as cp
    axpy = _pointer_axpy()
    hx = cp.arange(10, dtype=cp.int32)
    hy = hx * 2
    r = cp.zeros(10, cp.int32)
    axpy[1, 32](r.data.ptr, 5, hx.data.ptr, hy.data.ptr, 10)
    axpy[1, 32](r.data.ptr, 5, hx.data.ptr, hy.data.ptr, 10)      # the cached launch
    assert (cp.asnumpy(r) == 5 * cp.asnumpy(hx) + cp.asnumpy(hy)).all()


@cuda.jit(["(float32, float64)", "(float64, float32)", "(int64, int64)"], device=True)
def _add_tied(x, y):
    return x + y


@cuda.jit
def _use_tied(r, x, y):
    r[0] = _add_tied(x, y)


def test_a_tie_between_device_function_signatures_takes_the_first(monkeypatch):
    """Numba's typing resolves a tie among a device function's declared signatures with the one
    declared first (a kernel launch refuses a tie instead); numba-cuda behaves the same."""
    spec = _use_tied.compile("void(float64[::1], float64, float64)")
    assert "cvt.rn.f32.f64" in spec.ptx             # x went through float32: the first signature
    monkeypatch.setattr(settings, "backend", "simulator")
    r = np.zeros(1)
    _use_tied[1, 1](r, 1.5, 2.5)
    assert r[0] == 4.0
    _use_tied[1, 1](r, 0.1, 0.0)
    assert r[0] == float(np.float32(0.1))             # float32(0.1) + 0.0, as compiled


def test_device_function_signatures_with_arrays_in_the_simulator(monkeypatch):
    """A device function given array signatures is called with the simulator's array views."""
    @cuda.jit(["float64(float64[:], int64)", "float32(float32[:], int64)"], device=True,
              inline="always")
    def at(a, i):
        return a[i] * 2

    @cuda.jit(["int64(Tuple((int64[:], int64)))"], device=True)
    def first_of(pair):
        return pair[0][pair[1]]

    @cuda.jit
    def kernel(x, y, z, n):
        i = cuda.grid(1)
        if i < y.size:
            y[i] = at(x, i)
            z[i] = first_of((n, i)) + at(y, i)
    monkeypatch.setattr(settings, "backend", "simulator")
    x = np.arange(5, dtype=np.float32)
    y, z, n = np.zeros_like(x), np.zeros(5, np.int64), np.arange(10, 15)
    kernel[1, 8](x, y, z, n)
    assert (y == 2 * x).all() and (z == n + 4 * x).all()
    with pytest.raises(CompileError, match=r"line \d+\): No matching definition for argument "
                                          r"type\(s\) \(array\(int32, 1d, C\), int64\)"):
        kernel[1, 8](np.arange(5, dtype=np.int32), y, z, n)


def test_signatures_and_overloads_answer_numba_cudas_questions():
    """``kernel.signatures`` and each overload's ``inspect_llvm`` / ``inspect_asm`` /
    ``cooperative``, as numba-cuda code reads them."""
    @cuda.jit(["void(float32[:], float32)", "void(float64[:], float64)"])
    def fill(out, v):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = v

    sigs = fill.signatures
    assert len(sigs) == 2 and all(isinstance(s, tuple) for s in sigs)
    first = fill.overloads[sigs[0]]
    assert first.inspect_asm().startswith("//") and ".entry fill" in first.inspect_asm((9, 0))
    assert "define" in first.inspect_llvm() and not first.cooperative

    @cuda.jit("void(float32[:])")
    def synced(x):
        cuda.cg.this_grid().sync()
        x[0] = 1
    assert synced.overloads[synced.signatures[0]].cooperative


def test_c_abi_names_are_c_identifiers_never_an_llvm_abort():
    """A lambda's name (<lambda>) or a non-ASCII one would reach LLVM as a symbol it refuses
    with a fatal error that kills the process: the name is made a C identifier, and a given
    one is checked."""
    from numba import int32
    ptx, _ = cuda.compile_ptx(lambda x: x, int32(int32), device=True, abi="c")
    assert "_lambda_(" in ptx
    assert "NumbaEnv" not in ptx

    def dévelop(a):
        return a + 1

    ptx, _ = cuda.compile_ptx(dévelop, int32(int32), device=True, abi="c")
    assert "d_velop(" in ptx
    with pytest.raises(ValueError, match=r"abi_name'\] must be a C identifier, got 'a b'"):
        cuda.compile_ptx(dévelop, int32(int32), device=True, abi="c",
                         abi_info={"abi_name": "a b"})


def test_an_integer_wraps_into_a_narrower_declared_parameter_as_in_c():
    """numba-cuda passes 0xFFFFFFFF for an int32 parameter as -1 (a C conversion)."""
    from numba.core import types
    from gpureplace.runtime import conversion
    keys, values = conversion.match_signature([(types.int32, types.uint8)], [("int64",)] * 2,
                                              [(0xFFFFFFFF,), (-1,)])
    assert values == [-1, 255]
    keys, values = conversion.match_signature([(types.int64,)], [("int64",)], [(5,)])
    assert values == [5]


def test_a_kernel_of_one_signature_answers_the_drivers_questions_for_it():
    """numba-cuda's specialised dispatcher: a kernel given one signature (or made by
    ``specialize``) answers ``get_regs_per_thread()`` and the other driver attributes with the
    value for it; ``inspect_llvm()``, ``inspect_asm()`` ... give ``{argtypes: text}`` always,
    as numba-cuda's do (its own tests call ``.values()`` on them)."""
    one = cuda.jit("void(float32[::1])")(_fill)
    assert isinstance(one.inspect_ptx(), dict) and isinstance(one.inspect_asm(), dict)
    # (the attribute itself needs a GPU: the selection is what differs)
    assert one._reflect(None, lambda s: s.argtypes, single=True) == one.signatures[0]
    two = cuda.jit(["void(float32[::1])", "void(float64[::1])"])(_fill)
    assert len(two._reflect(None, lambda s: s.argtypes, single=True)) == 2
    lazy = cuda.jit(_fill)
    lazy.compile("void(float32[::1])")
    assert isinstance(lazy._reflect(None, lambda s: s.argtypes, single=True), dict)


def _fill(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = 1


def test_device_functions_compile_device_and_numba_cuda_exception_types():
    from numba.core.types import int32, int64

    @cuda.jit(device=True)
    def add(x, y):
        return x + y

    cres = add.compile_device((int32, int32))
    assert cres.restype == int64 and "add" in cres.fndesc.mangled_name
    assert cres.fndesc.mangled_name in add.inspect_llvm((int32, int32))
    assert add.compile_device((int32, int32), int32).restype == int32
    # numba-cuda raises RuntimeError for these; gpureplace's errors are TypeErrors too
    with pytest.raises(RuntimeError, match="Cannot compile a device function as a kernel"):
        add[1, 1]
    with pytest.raises(TypeError, match="Cannot compile a device function as a kernel"):
        add[1, 1]
    with pytest.raises(RuntimeError, match="Cannot inspect SASS of a device function"):
        add.inspect_sass((int32, int32))
    with pytest.raises(TypeError, match="is a kernel"):
        cuda.jit(_fill).compile_device((int32,))
