"""The compiler core: the issue's saxpy example compiles, PTX assembles, helpers are device code."""

import math

import pytest

from gpureplace import cuda
from conftest import assemble


def scale(v):
    return 2.0 * v


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = scale(a) * x[i] + math.sin(y[i])


SIG = "void(float32, float32[:], float32[:], float32[:])"


def test_saxpy_compiles_to_ptx_that_ptxas_accepts():
    ptx, ret = cuda.compile_ptx(saxpy, SIG)
    assert ".visible .entry saxpy(" in ptx
    assert ".target sm_90" in ptx
    assemble(ptx)


def test_libdevice_is_linked_and_internalized():
    spec = saxpy.compile(SIG)
    # sin comes from libdevice (__nv_sinf), inlined: no call or declaration left in the PTX
    assert "__nv_sinf" not in spec.ptx
    assert "call" not in spec.ptx.split(".entry")[1] or "__nv" not in spec.ptx
    assert "__nv_sinf" in spec.compiled.closure()[0].ir_texts()[0] or any(
        "__nv_sinf" in t for cf in spec.compiled.closure() for t in cf.ir_texts())


def test_a_kept_compile_holds_its_ir_as_text_not_as_llvmlite_objects():
    """Once a function's IR text is taken (to link it), llvmlite's objects of its lowered
    modules are let go (three quarters of what a kept compile held); the text still serves
    inspect_llvm, the kernel's next link and a relink after a helper's redefinition."""
    import llvmlite.ir

    def helper_of_kept(v):
        return math.cos(v) * 2.0

    def kept(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = helper_of_kept(x[i])

    k = cuda.jit(kept)
    spec = k.compile("void(float32[::1])", arch="sm_90")
    assemble(spec.ptx)
    closure = spec.compiled.closure()
    assert len(closure) == 2
    for cf in closure:
        assert cf.library.modules == []
        assert cf.ir_texts() and all(isinstance(t, str) and "define" in t for t in cf.ir_texts())
    assert not any(isinstance(m, llvmlite.ir.Module) for cf in closure
                   for m in vars(cf.library).values())
    assert "helper_of_kept" in k.inspect_llvm("void(float32[::1])")


def test_pruning_falls_back_to_llvm_when_the_text_does_not_parse(monkeypatch):
    import llvmlite.binding as llvm

    from gpureplace.compiler import backend
    from gpureplace.compiler import libdevice_link as libdevice
    backend.initialize_llvm()
    monkeypatch.setattr(libdevice._TextIndex, "module_text", lambda self, wanted: "garbage")
    mod = llvm.parse_bitcode(libdevice._prune(frozenset({"__nv_cosf"}),
                                              backend.reflect_values("sm_90", False)))
    assert [f.name for f in mod.functions if not f.is_declaration] == ["__nv_cosf"]


def test_libdevice_signatures_read_from_its_text_match_llvms():
    from gpureplace.compiler import libdevice_bitcode, libdevice_link
    table = libdevice_link.function_table()
    expected = {}
    for fn in libdevice_bitcode._load().functions:
        if not fn.is_declaration and fn.name.startswith("__nv_"):
            expected[fn.name] = (str(fn.global_value_type).split(" (", 1)[0],
                                 tuple(str(a.type) for a in fn.arguments))
    assert len(table) > 300 and table == expected
    assert table["__nv_float2half_rn"] == ("i16", ("float",))        # "zeroext i16" in the text
    assert table["__nv_sincosf"] == ("void", ("float", "ptr", "ptr"))


def test_pruned_libdevice_holds_exactly_what_the_kernel_reaches():
    """Pruning assembles the requested functions and everything they call from libdevice's
    text; the requested ones stay external (the kernel's declarations bind to them), the rest
    internal."""
    import llvmlite.binding as llvm

    from gpureplace.compiler import backend
    from gpureplace.compiler import libdevice_link as libdevice
    backend.initialize_llvm()
    reflect = backend.reflect_values("sm_90", False)
    mod = llvm.parse_bitcode(libdevice._prune(frozenset({"__nv_sin", "__nv_expf"}), reflect))
    defined = {f.name: f.linkage.name for f in mod.functions if not f.is_declaration}
    assert defined == {"__nv_sin": "external", "__nv_expf": "external",
                       "__internal_trig_reduction_slowpathd": "internal"}
    assert {g.name for g in mod.global_variables} >= {"__cudart_sin_cos_coeffs",
                                                      "__cudart_i2opi_d"}
    everything = frozenset(libdevice.function_table())
    whole = llvm.parse_bitcode(libdevice._prune(everything, reflect))
    assert {f.name for f in whole.functions if not f.is_declaration} >= everything
    with pytest.raises(KeyError, match="__nv_no_such"):
        libdevice._prune(frozenset({"__nv_no_such"}), reflect)
    # the fallback, for a libdevice whose text would not cut cleanly, prunes to the same functions
    slow = llvm.parse_assembly(libdevice._pruned_by_llvm(frozenset({"__nv_sin", "__nv_expf"})))
    assert {f.name for f in slow.functions if not f.is_declaration} == set(defined)


def test_inspect_sass_lists_the_machine_code_without_a_gpu():
    """ptxas and nvdisasm from the test extra's wheels (nvidia-cuda-nvcc, nvidia-cuda-nvdisasm);
    without nvdisasm the error says which package to install."""
    from gpureplace.compiler.toolchain import find_tool
    saxpy.compile(SIG)
    if find_tool("nvdisasm") is None:
        with pytest.raises(RuntimeError, match="pip install nvidia-cuda-nvdisasm"):
            saxpy.inspect_sass(SIG)
        return
    sass = saxpy.inspect_sass(SIG)
    assert ".text.saxpy" in sass and "EXIT" in sass and "FFMA" in sass
    assert list(saxpy.inspect_sass().values())[0] == sass or len(saxpy.inspect_sass()) > 1

    def helper(v):
        return v

    with pytest.raises(TypeError, match="inspect_sass.*is for kernels"):
        cuda.jit(device=True)(helper).inspect_sass("float32(float32)")


def test_inspect_ptx_lists_specializations():
    saxpy.compile(SIG)
    allptx = saxpy.inspect_ptx()
    assert isinstance(allptx, dict) and len(allptx) >= 1
    assert all(".entry saxpy" in p for p in allptx.values())


@cuda.jit
def indices(out):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    j = cuda.threadIdx.y + cuda.blockIdx.y * cuda.blockDim.y
    k = cuda.threadIdx.z + cuda.gridDim.z * cuda.blockIdx.z
    out[0] = i + j + k + cuda.gridDim.x + cuda.gridDim.y + cuda.blockDim.z
    out[1] = cuda.laneid + cuda.warpsize
    n = cuda.gridsize(1)
    a, b = cuda.grid(2)
    c, d, e = cuda.gridsize(3)
    out[2] = n + a + b + c + d + e


def test_every_index_register_is_read():
    ptx = indices.compile("void(int64[:])").ptx
    assemble(ptx)
    for reg in ("tid.x", "tid.y", "tid.z", "ctaid.x", "ctaid.y", "ctaid.z", "ntid.x", "ntid.y",
                "ntid.z", "nctaid.x", "nctaid.y", "nctaid.z", "laneid"):
        assert f"%{reg}" in ptx, reg


def test_nvvm_reflect_folded_for_precision_and_fast_math():
    from gpureplace import libdevice

    def body(out, x):
        out[0] = libdevice.sqrtf(x[0]) + libdevice.hypotf(x[0], x[1])

    precise = cuda.jit(body).compile("void(float32[:], float32[:])").ptx
    fast = cuda.jit(fastmath=True)(body).compile("void(float32[:], float32[:])").ptx
    assert "sqrt.rn.f32" in precise and "sqrt.approx" not in precise
    assert "sqrt.approx.ftz.f32" in fast and "sqrt.rn" not in fast
    assert "__nvvm_reflect" not in precise + fast
    assemble(precise)
    assemble(fast)


def test_fast_math_flushes_denormals_everywhere_as_numba_cuda_and_nvcc_do():
    """fastmath=True: single-precision arithmetic flushes denormals (the .ftz instructions,
    CUDA C's -ftz=true under --use_fast_math), in the kernel, its device functions and the
    libdevice code they inline; float32 tanh is the hardware's tanh.approx from sm_75 on."""
    import math

    def helper(a, b):
        return a * b + math.exp(a)

    def body(out, x, y):
        out[0] = x / y + helper(x, y)
        out[1] = math.tanh(x)

    sig = "void(float32[:], float32, float32)"
    fast = cuda.jit(sig, fastmath=True)(body).inspect_asm(sig)
    precise = cuda.jit(sig)(body).inspect_asm(sig)
    for ptx in (fast, precise):
        assemble(ptx)
        assert "call" not in ptx.replace("// .globl", "")          # everything inlined
    fast_ops = {line.split()[0] for line in fast.splitlines() if ".f32" in line}
    assert {"div.approx.ftz.f32", "fma.rn.ftz.f32", "tanh.approx.f32"} <= fast_ops
    assert not [op for op in fast_ops if op.startswith(("add.", "mul.", "fma.", "sub.", "div."))
                and ".ftz." not in op]
    assert "div.rn.f32" in precise and "tanh.approx" not in precise
    assert not [line for line in precise.splitlines()
                if line.split()[:1] and line.split()[0].startswith(("add.", "mul.", "fma.", "div."))
                and ".ftz." in line.split()[0]]
    old_gpu, _ = cuda.compile_ptx(body, sig, fastmath=True, cc=(7, 0))
    assert "tanh.approx" not in old_gpu and "div.approx.ftz.f32" in old_gpu
    assert ".target sm_70" in old_gpu                # (this ptxas no longer assembles sm_70)


def test_denormal_attribute_goes_on_every_definition():
    import llvmlite.binding as llvm

    from gpureplace.compiler import backend
    text = (
        'target triple = "nvptx64-nvidia-cuda"\n'
        'define internal fastcc float @a(ptr addrspace(1) %p, float %x) unnamed_addr #0 {\n'
        '  ret float %x\n}\n'
        'define float @"b.quoted(name)"(float %x) local_unnamed_addr #1 !dbg !3 {\n'
        '  ret float %x\n}\n'
        'define void @c() {\n  ret void\n}\n'
        'declare float @d(float)\n'
        'attributes #0 = { nounwind }\nattributes #1 = { "x"="y" }\n'
        '!llvm.module.flags = !{!0}\n!0 = !{i32 2, !"Debug Info Version", i32 3}\n'
        '!1 = distinct !DICompileUnit(language: DW_LANG_C, file: !2, emissionKind: FullDebug)\n'
        '!2 = !DIFile(filename: "f.py", directory: "/")\n'
        '!3 = distinct !DISubprogram(name: "b", scope: !2, file: !2, line: 1, '
        'unit: !1, spFlags: DISPFlagDefinition)\n'
        '!llvm.dbg.cu = !{!1}\n')
    mod = llvm.parse_assembly(backend.flush_denormals(text))
    for fn in mod.functions:
        attrs = " ".join(str(a) for a in fn.attributes)
        if fn.is_declaration:
            assert "denormal" not in attrs
        else:
            assert "preserve-sign" in attrs, fn.name
    assert "nounwind" in " ".join(str(a) for a in mod.get_function("a").attributes)


def test_new_architectures_get_the_ptx_isa_they_need_and_unknown_ones_an_error(monkeypatch):
    import re

    from numba import int32

    from conftest import assemble
    from gpureplace import CompileError, cuda
    from gpureplace import probe

    def f(x, n):
        x[0] = n

    # (LLVM aborts the whole process on a PTX ISA older than the architecture needs)
    monkeypatch.setattr(probe, "driver_version", lambda: None)       # no driver to ask
    for cc, version in (((10, 0), "8.6"), ((12, 0), "8.7"), ((8, 0), "8.0")):
        ptx, _ = cuda.compile_ptx(f, (int32[:], int32), cc=cc)
        assert re.search(r"\.version (\S+)", ptx).group(1) == version
        assemble(ptx, arch=f"sm_{cc[0]}{cc[1]}")
    with pytest.raises(CompileError, match="unknown GPU architecture 'sm_200'"):
        cuda.compile_ptx(f, (int32[:], int32), cc=(20, 0))
    monkeypatch.setattr(probe, "driver_version", lambda: 13000)      # a CUDA 13.0 driver
    ptx, _ = cuda.compile_ptx(f, (int32[:], int32), cc=(10, 0))
    assert re.search(r"\.version (\S+)", ptx).group(1) == "9.0"
    monkeypatch.setattr(probe, "driver_version", lambda: 12000)      # a CUDA 12.0 driver
    with pytest.raises(CompileError, match="update the driver"):
        cuda.compile_ptx(f, (int32[:], int32), cc=(10, 0))


def _lineinfo_helper(v):
    return math.sin(v) * 2                               # line of the helper


def _lineinfo_body(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += _lineinfo_helper(x[i])


def test_lineinfo_puts_source_lines_in_the_ptx_and_the_sass():
    import re
    import warnings

    from gpureplace.compiler.toolchain import find_tool
    code = _lineinfo_body.__code__
    first, helper_line = code.co_firstlineno, _lineinfo_helper.__code__.co_firstlineno + 1
    spec = cuda.jit("void(float32[:])", lineinfo=True)(_lineinfo_body).compile(
        "void(float32[:])")
    files = dict(re.findall(r'\.file\s+(\d+) "([^"]+)"', spec.ptx))
    assert __file__ in files.values()
    this = [k for k, v in files.items() if v == __file__][0]
    lines = {int(n) for n in re.findall(rf"\.loc\s+{this} (\d+) ", spec.ptx)}
    assert {first + 1, first + 2, first + 3, helper_line} <= lines
    assemble(spec.ptx)
    plain = cuda.jit("void(float32[:])")(_lineinfo_body).compile("void(float32[:])").ptx
    assert not re.search(r"\.(loc|file)\s", plain)
    assert re.sub(r"\s*\.(loc|file)\b.*", "", spec.ptx).count("\n") < 2 * plain.count("\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        debug = cuda.jit("void(float32[:])", debug=True)(_lineinfo_body)
    assert re.search(r"\.loc\s", debug.compile("void(float32[:])").ptx)
    if find_tool("nvdisasm") is not None and find_tool("ptxas") is not None:
        sass = cuda.jit(lineinfo=True)(_lineinfo_body).inspect_sass("void(float32[:])")
        assert re.search(rf"line {first + 3}\b", sass)


def _remainders(x, y, out):
    out[0] = x[0] % y[0]
    out[1] = x[0] // y[0]
    out[2] = math.fmod(x[0], y[0])


@pytest.mark.parametrize("fastmath", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_remainders_call_libdevice_fmod_never_frem(fastmath, dtype, ptxas_check):
    """NVPTX expands LLVM's frem to x - trunc(x / y) * y, inexact once x / y is large."""
    from numba.core import types

    from gpureplace import cuda
    from gpureplace.compiler.backend import exact_remainders
    ty = getattr(types, dtype)[::1]
    spec = cuda.jit(_remainders, fastmath=fastmath).compile((ty, ty, ty))
    assert " frem " not in spec.llvm_ir
    ptxas_check(spec.ptx)
    text = ('  %".5" = frem fast float %".1", 0x4008000000000000, !dbg !7\n'
            '  %x = frem double %a, %"b.2"\n')
    out = exact_remainders(text)
    assert '%".5" = call float @__nv_fmodf(float %".1", float 0x4008000000000000), !dbg !7' \
        in out
    assert '%x = call double @__nv_fmod(double %a, double %"b.2")' in out
    assert out.count("declare float @__nv_fmodf(float, float)") == 1
    assert out.count("declare double @__nv_fmod(double, double)") == 1


def test_the_first_compile_imports_neither_scipy_nor_cffi(tmp_path):
    """Numba's array reductions (which every typing context installs) ask at their import
    whether SciPy's BLAS is there: 300-450 ms of a first compile where SciPy is installed.  The
    question waits until host code reads the answer, which is then Numba's own."""
    import subprocess
    import sys
    fake = tmp_path / "scipy" / "linalg"
    fake.mkdir(parents=True)
    (tmp_path / "scipy" / "__init__.py").write_text("__version__ = '1.16.0'\n")
    (fake / "__init__.py").write_text("")
    (fake / "cython_blas.py").write_text("")          # what Numba's check imports
    script = """
import sys
import numba.np.linalg
numba.np.linalg._check_lapack_int_width = lambda: None   # (the stand-in SciPy has no LAPACK)
import numpy as np
from gpureplace import cuda

@cuda.jit
def total(x, out):
    out[0] = np.sum(x)

total.compile("void(float32[::1], float32[::1])")
print("numba.np.arraymath" in sys.modules, "scipy.linalg" in sys.modules,
      "cffi" in sys.modules or "numba.core.typing.cffi_utils" in sys.modules)
import numba.np.arraymath as am
print(bool(am._HAVE_BLAS), "scipy.linalg.cython_blas" in sys.modules,
      am.ensure_blas is numba.np.linalg.ensure_blas)
"""
    env = dict(__import__("os").environ, PYTHONPATH=str(tmp_path), GPUREPLACE_CACHE="0")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    # (nor CFFI, which Numba's typeof imports to ask whether a module or an operator is a CFFI
    # function: none can be while CFFI is not loaded)
    assert res.stdout.split() == ["True", "False", "False", "True", "True", "True"]


def test_the_first_compile_does_not_load_numba_typed_to_type_a_class():
    """Numba's typeof of any class (``bool``, ``float``, a named tuple's) imports numba.typed's
    Dict, List and Set to ask whether the class derives from them, which builds Numba's CPU
    target: ~25 ms of a first compile (more on slower hosts).  No class can derive from them
    while they are not loaded; the classes still type as before."""
    from conftest import python_process
    out = python_process("""
import sys, collections
import numpy as np
from gpureplace import cuda

Pair = collections.namedtuple("Pair", "a b")

@cuda.jit
def k(x, out):
    i = cuda.grid(1)
    if i < x.size:
        p = Pair(x[i], 2.0)
        out[i] = (1.0 if bool(x[i]) else 0.0) + np.float32(p.a) * p.b + int(x[i]) + float(x[i])
        if x[i] < -1e30:
            raise ValueError("too small")

spec = k.compile("void(float32[::1], float32[::1])")
print(any(m in sys.modules for m in ("numba.typed.typeddict", "numba.typed.typedlist",
                                     "numba.typed.typedset")))
print(".entry" in spec.ptx)
""", GPUREPLACE_CACHE="0")
    assert out.split() == ["False", "True"]


def test_the_garbage_collector_waits_while_the_front_end_runs():
    """A compile makes many objects; collections of a notebook's whole heap in the middle of it
    cost tens of milliseconds.  None runs while the front end does on the main thread; the
    collector is on again after (and stays off when the program had turned it off).  A compile
    on another thread (the warm-up's) leaves the collector alone: turning it on again when done
    could undo a gc.disable() the program made meanwhile."""
    import gc

    from gpureplace.compiler import frontend
    ran_inside = []

    def watch(phase, info):
        if phase == "start":
            ran_inside.append(getattr(frontend._deep, "active", False))

    def fresh_kernel(k):
        ns = {"cuda": cuda}
        exec(f"@cuda.jit\ndef gc_kernel_{k}(x):\n    x[0] = x[0] * {k}.0 + 1.0\n", ns)
        return ns[f"gc_kernel_{k}"]

    old = gc.get_threshold()
    gc.callbacks.append(watch)
    gc.set_threshold(10)                       # a collection every ten objects
    try:
        fresh_kernel(1).compile("void(float32[::1])")
        assert gc.isenabled()
        assert ran_inside and not any(ran_inside)        # collections ran, none inside
        gc.disable()
        try:
            fresh_kernel(2).compile("void(float32[::1])")
            assert not gc.isenabled()
        finally:
            gc.enable()
        import threading
        seen = []

        def compile_elsewhere():
            seen.append(gc.isenabled())        # (the watch below runs while it compiles)
            fresh_kernel(3).compile("void(float32[::1])")
            seen.append(gc.isenabled())
        watch_thread = []
        gc.callbacks.append(lambda phase, info: watch_thread.append(phase))
        try:
            t = threading.Thread(target=compile_elsewhere)
            t.start()
            t.join()
        finally:
            gc.callbacks.pop()
        assert seen == [True, True] and "start" in watch_thread    # collections ran meanwhile
    finally:
        gc.callbacks.remove(watch)
        gc.set_threshold(*old)


def test_the_first_compile_reads_libdevice_ahead_and_a_fork_waits_for_it():
    """Without the disk cache, reading libdevice (parsing and printing its bitcode) takes 100-150
    ms, mostly in LLVM: the first compile starts it in a thread while its front end runs.  A
    fork meanwhile waits for that thread (a child would otherwise inherit its locks held)."""
    import subprocess
    import sys
    script = """
import os, time
from gpureplace import cuda
from gpureplace.compiler import libdevice_link as lb
assert lb._ahead is None and lb._index is None
read = lb._ir_text
def slow_read(*args, **kwargs):
    time.sleep(1.0)
    return read(*args, **kwargs)
lb._ir_text = slow_read
@cuda.jit
def plain(x):
    x[0] = 1.0
plain.compile("void(float32[::1])")        # needs no libdevice: does not wait for the read
alive = lb._ahead.is_alive()
pid = os.fork()
if pid == 0:
    os._exit(0 if lb._index is not None else 1)
_, status = os.waitpid(pid, 0)
print(lb._ahead.name, alive, os.waitstatus_to_exitcode(status), lb._index is not None)
"""
    env = dict(__import__("os").environ, GPUREPLACE_CACHE="0")
    res = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["gpureplace-libdevice", "True", "0", "True"]


def test_libdevice_read_ahead_reaches_the_disk_cache_only_once_a_kernel_uses_it(tmp_path):
    """The read-ahead's printed text (2.6 MB) goes to the disk cache for later processes only
    when a compile in this one has used libdevice."""
    import glob
    import subprocess
    import sys
    script = """
import glob, math, sys
from gpureplace import cuda
from gpureplace.compiler import libdevice_link as lb
@cuda.jit
def plain(x):
    x[0] = 1.0
plain.compile("void(float32[::1])")
lb._ahead.join(60)
texts = lambda: len(glob.glob(sys.argv[1] + "/**/text-*.ll", recursive=True))
print(lb._index is not None, texts())
@cuda.jit
def sines(x):
    x[0] = math.sin(x[0])
sines.compile("void(float32[::1])")
print(texts())
"""
    env = dict(__import__("os").environ, GPUREPLACE_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("GPUREPLACE_CACHE", None)
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path / "cache")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "0", "1"]
    assert glob.glob(str(tmp_path / "cache" / "**" / "text-*.ll"), recursive=True)


@cuda.jit
def _mixed(x, y, a, t, rec):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = y[i, 0] * a + t[0] + rec[0]


@pytest.mark.parametrize("sig", [
    "void(float32[::1], float32[:, ::1], float64, UniTuple(int32, 2), int8[:])",
    "void(float32[:], float32[:, :], int16, Tuple(float32, int64), uint64[::1])",
    "void(complex128[:], float64[::1, :], complex64, UniTuple(float32, 3), float32[:])",
])
def test_a_kept_wrapper_is_the_one_built_for_its_names(sig):
    # The kernel entry is built once per argument types with stand-in names (pipeline.py);
    # given its names, it is the text built for them, names that need quoting included.
    from gpureplace.compiler import pipeline
    spec = _mixed.compile(sig)
    cf = spec.compiled
    for name in ("_mixed", "k_2", "a name with spaces", 'q"uote'):
        kept = pipeline._wrapper_module(cf, name, ())
        assert kept == pipeline._build_wrapper(cf, name, cf.mangled_name, (), False)
        assert pipeline._ENTRY not in kept and pipeline._CALLEE not in kept
    assemble(spec.ptx)
