"""Numba's own ``numba.extending.overload`` reaching gpureplace kernels, as numba-cuda code
writes it: ``target="cuda"`` as well as generic overloads, ``inline="always"`` included; and an
overload defined again (its cell run again) is a redefinition: the kernels that call the
overloaded function recompile with the new meaning, the others stay compiled."""

import struct

import numpy as np
import pytest
from numba.core import types as nbt
from numba.extending import overload

import gpureplace
from conftest import assemble
from gpureplace import cuda

SIG = (nbt.float32[::1],)


def _bits(value):
    """How PTX writes the float32 ``value`` stored as an immediate (its bits as an integer)."""
    return str(struct.unpack("<I", struct.pack("<f", value))[0])


def _host():
    def get_value():
        raise NotImplementedError("host stand-in: the device meaning comes from the overload")
    return get_value


def test_a_cuda_target_overload_reaches_kernels():
    get_value = _host()

    @overload(get_value, target="cuda")
    def ol_get_value():
        return lambda: 42.0

    @cuda.jit
    def kernel(a):
        a[0] = get_value()

    ptx = kernel.compile(SIG).ptx
    assert _bits(42.0) in ptx
    assemble(ptx)


def _inlined_local_array_kernel():
    """numba-cuda's issue 718: a kernel storing what an overload inlined into it returns, 42.0
    from the overload's local array."""
    get_value = _host()

    @overload(get_value, target="cuda", inline="always")
    def ol_get_value():
        def impl():
            a = cuda.local.array(1, dtype=np.float32)
            a[0] = 42.0
            return a[0]
        return impl

    @cuda.jit
    def kernel(a):
        a[0] = get_value()
    return kernel


def test_an_inline_always_overload_with_a_local_array():
    # the overload inlined into the kernel keeps its local array
    spec = _inlined_local_array_kernel().compile(SIG)
    assert _bits(42.0) in spec.ptx
    assemble(spec.ptx)
    # inlined at Numba's level: no device function of the overload's implementation is called
    assert ".func" not in spec.ptx


def test_an_overload_inlined_by_a_cost_model():
    scaled = _host()

    def only_for_floats(expr, caller_info, callee_info):
        return True

    @overload(scaled, target="cuda", inline=only_for_floats)
    def ol_scaled(x):
        return lambda x: x * 3.0

    @cuda.jit
    def kernel(a):
        a[0] = scaled(a[1])

    spec = kernel.compile(SIG)
    assert "3.0" in kernel.inspect_llvm(SIG) or "3.000000e+00" in kernel.inspect_llvm(SIG)
    assemble(spec.ptx)


def test_a_global_none_tested_in_a_branch():
    # ``if cond`` with ``cond = None``: Numba types it through an inlined overload
    ns = {"cuda": cuda, "float32": nbt.float32, "cond": None}
    exec("def f(b_arg):\n"
         "    b_smem = cuda.shared.array(shape=(1,), dtype=float32)\n"
         "    if cond:\n"
         "        b_smem[0] = b_arg[0]\n", ns)
    kernel = cuda.jit("void(float32[::1])")(ns["f"])
    assemble(kernel.compile(SIG).ptx)


def test_an_overload_defined_again_recompiles_only_its_callers(own_disk_cache):
    ns = {"cuda": cuda, "overload": overload}
    exec("def get_value():\n    raise NotImplementedError()\n", ns)
    cell = ("@overload(get_value, target='cuda')\n"
            "def ol_get_value():\n    return lambda: {value}\n")
    exec(cell.format(value=42.0), ns)
    exec("def kernel(a):\n    a[0] = get_value()\n"
         "def other(a):\n    a[0] = 1.0\n", ns)
    kernel, other = cuda.jit(ns["kernel"]), cuda.jit(ns["other"])
    assert _bits(42.0) in kernel.compile(SIG).ptx
    other.compile(SIG)
    before = gpureplace.stats()

    exec(cell.format(value=43.0), ns)             # the overload's cell run again
    # a kernel compiled afterwards sees the new meaning, not the first one (Numba's registry
    # keeps both, the first answering)
    exec("def fresh(a):\n    a[0] = get_value()\n", ns)
    assert _bits(43.0) in cuda.jit(ns["fresh"]).compile(SIG).ptx
    gpureplace.refresh()                          # (what the cell hook does in IPython)
    ptx = kernel.compile(SIG).ptx
    assert _bits(43.0) in ptx and _bits(42.0) not in ptx
    other.compile(SIG)
    after = gpureplace.stats()
    # fresh and kernel compiled; other revalidated from memory
    assert after["kernel_compiles"] - before["kernel_compiles"] == 2
    assert after["memory_hits"] - before["memory_hits"] == 1
    assemble(ptx)


def test_the_simulator_runs_what_the_overloads_give_as_the_compiler_does():
    """In the CPU simulator a function with Numba overloads runs the implementation the
    overload gives for the arguments' types (a CUDA and a generic target; typed by argument:
    an integer and a float get different ones), and the latest definition after its cell ran
    again."""
    from gpureplace import simulator
    ns = {"cuda": cuda, "overload": overload, "nbt": nbt}
    exec("def plus(v):\n    return v\n"
         "def generic_one(v):\n    return v\n", ns)
    cell = ("@overload(plus, target='cuda')\n"
            "def ol_plus(v):\n"
            "    if isinstance(v, nbt.Integer):\n        return lambda v: v + {int_step}\n"
            "    return lambda v: v + {float_step}\n")
    exec(cell.format(int_step=1, float_step=0.5), ns)
    exec("@overload(generic_one)\ndef ol_generic(v):\n    return lambda v: v * 10\n", ns)
    exec("def kernel(f, i, out):\n"
         "    out[0] = plus(f[0])\n    out[1] = plus(i[0])\n"
         "    out[2] = generic_one(f[0])\n", ns)
    kernel = cuda.jit(ns["kernel"])
    f, i = np.array([2.0], np.float32), np.array([2], np.int64)
    out = np.zeros(3, np.float32)
    simulator.run(kernel, 1, 1, f, i, out)
    assert out.tolist() == [2.5, 3.0, 20.0]
    exec(cell.format(int_step=7, float_step=0.25), ns)        # the overload's cell run again
    gpureplace.refresh()
    simulator.run(kernel, 1, 1, f, i, out)
    assert out.tolist() == [2.25, 9.0, 20.0]


def test_overloads_a_factory_registers_for_one_function_all_stay():
    # one definition registering several overloads of one function (a factory in a loop) is not
    # a redefinition: each keeps answering for its types
    kind = _host()

    def register(numba_type, answer):
        @overload(kind, target="cuda")
        def ol_kind(x):
            if isinstance(x, numba_type):
                return lambda x: answer
    for numba_type, answer in ((nbt.Integer, 1.0), (nbt.Float, 2.0)):
        register(numba_type, answer)
    gpureplace.refresh()

    @cuda.jit
    def kernel(a, n):
        a[0] = kind(n) + kind(a[1]) * 10.0

    ptx = kernel.compile((nbt.float32[::1], nbt.int64)).ptx
    assert _bits(21.0) in ptx, ptx


def test_an_overload_cell_run_again_in_ipython(shell, capsys):
    shell.run_line_magic("config", "GPUReplace.verbose = True")
    shell.user_ns.update(overload=overload, SIG=SIG)
    cells = [
        "from gpureplace import cuda\n"
        "def clamp01(x):\n    raise NotImplementedError()\n",
        "@overload(clamp01, target='cuda')\n"
        "def ol_clamp01(x):\n    return lambda x: min(max(x, 0.0), 1.0)\n",
        "@cuda.jit\ndef uses(a):\n    a[0] = clamp01(a[1])\n"
        "@cuda.jit\ndef unrelated(a):\n    a[0] = 2.0\n"
        "first = uses.inspect_llvm(SIG); unrelated.compile(SIG)\n",
    ]
    for cell in cells:
        assert shell.run_cell(cell).success
    capsys.readouterr()
    # the overload's cell, edited and run again: the cell hook names what recompiles
    assert shell.run_cell("@overload(clamp01, target='cuda')\n"
                          "def ol_clamp01(x):\n    return lambda x: min(max(x, -1.0), 1.0)\n"
                          ).success
    out = capsys.readouterr().out
    assert "clamp01's overload redefined" in out and "uses will recompile" in out, out
    assert "unrelated" not in out
    assert shell.run_cell("second = uses.inspect_llvm(SIG)").success
    first, second = shell.user_ns["first"], shell.user_ns["second"]
    assert "-1.0" in second or "-1.000000e+00" in second, second
    assert "-1.0" not in first and "-1.000000e+00" not in first


@pytest.mark.parametrize("make", ["carray", "farray"])
def test_numba_carray_of_a_pointer_is_a_view(make):
    # Numba's own overload returns the array it makes of the pointer: no allocation
    import numba
    cfarray = getattr(numba, make)

    @cuda.jit(nbt.void(nbt.CPointer(nbt.float32)))
    def add(a_ptr):
        a = cfarray(a_ptr, (2, 3), dtype=np.float32)
        a[1, 0] += 1.5

    ptx = add.inspect_asm(add.signatures[0])
    # element [1, 0]: 3 floats in (C order) or 1 float in (F order) from the pointer
    offset = 12 if make == "carray" else 4
    assert f"[%rd2+{offset}]" in ptx, ptx
    assemble(ptx)


def test_a_new_array_from_numpy_is_still_refused_by_name():
    @cuda.jit
    def makes(out):
        tmp = np.zeros(4)
        out[0] = tmp[0]

    with pytest.raises(gpureplace.CompileError, match=r"np\.zeros\(\) allocates a new array"):
        makes.compile(SIG)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_numba_carray_on_the_gpu():
    import cupy as cp
    import numba

    @cuda.jit(nbt.void(nbt.CPointer(nbt.float32)))
    def add(a_ptr):
        a = numba.carray(a_ptr, (1,), dtype=np.float32)
        a[0] += 1.2

    a = cp.zeros(1, cp.float32)
    add[1, 1](a.data.ptr)
    cp.cuda.runtime.deviceSynchronize()
    assert float(a[0]) == np.float32(1.2)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_numba_overloads_on_the_gpu():
    import cupy as cp
    out = cp.zeros(1, cp.float32)
    _inlined_local_array_kernel()[1, 1](out)
    assert float(out[0]) == 42.0
