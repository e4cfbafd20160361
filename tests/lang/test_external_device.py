"""``cuda.declare_device`` and ``cuda.jit(link=...)``: device functions written in CUDA C or PTX,
called from Python kernels (numba-cuda's ABI and the plain C ABI), linked when the kernel loads."""

import re

import numpy as np
import pytest

from conftest import assemble
from gpureplace import CompileError, LaunchError, cuda
from gpureplace.runtime import linking

CUDA_SOURCE = r'''
extern "C" __device__ int mul_f32(float *ret, float a, float b) { *ret = a * b; return 0; }
extern "C" __device__ float add_c(float a, float b) { return a + b; }
'''

mul = cuda.declare_device("mul_f32", "float32(float32, float32)")
add_c = cuda.declare_device("add_c", "float32(float32, float32)", abi="c")


def _kernel(link=None):
    @cuda.jit(link=link)
    def combine(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = mul(x[i], y[i]) + add_c(x[i], np.float32(1.0))
    return combine


SIG = "void(float32[::1], float32[::1], float32[::1])"


def test_declared_functions_are_external_in_the_ptx():
    ptx = _kernel().inspect_ptx(SIG)
    decls = re.findall(r"\.extern \.func\s*\(\.param \.b32 func_retval0\) (\w+)\s*\(([^)]*)\)",
                       ptx)
    params = {name: body.count(".param") for name, body in decls}
    assert params == {"mul_f32": 3, "add_c": 2}        # numba ABI: a result pointer first
    assert linking.external_symbols(ptx) == {"mul_f32", "add_c"}
    # relocatable code: the symbols are resolved when the kernel is linked at load time
    assemble(ptx, relocatable=True)


def test_array_arguments_pass_numba_cudas_flattened_array():
    """Under numba-cuda's ABI an array argument is Numba's array structure, flattened: meminfo,
    parent, nitems, itemsize, data, then the shape and the strides."""
    first = cuda.declare_device("first_of", "int32(float32[:, :])")
    assert first.name == "first_of" and first.sig.args[0].ndim == 2

    @cuda.jit
    def k(x, out):
        out[0] = first(x)

    ptx = k.inspect_ptx("void(float32[:, ::1], int32[::1])")
    decl = re.search(r"\.extern \.func\s*\(\.param \.b32 func_retval0\) first_of\s*\(([^)]*)\)",
                     ptx)
    assert decl and decl.group(1).count(".param .b64") == 1 + 5 + 2 * 2, ptx
    assemble(ptx, relocatable=True)


def test_link_files_are_found_for_the_symbols_a_kernel_calls(tmp_path):
    cu = tmp_path / "funcs.cu"
    cu.write_text(CUDA_SOURCE)
    declared = cuda.declare_device("mul_f32", "float32(float32, float32)", link=str(cu))
    ptx = _kernel().inspect_ptx(SIG)
    assert linking.files_for(ptx, ()) == [str(cu)]
    other = tmp_path / "more.ptx"
    other.write_text("// nothing")
    assert linking.files_for(ptx, (str(other),)) == [str(other), str(cu)]
    assert linking.files_for("// no externs\n.extern .func vprintf\n(", ()) == []
    cuda.declare_device("mul_f32", "float32(float32, float32)")      # declared again, no link
    assert linking.files_for(ptx, ()) == [] and declared.link == (str(cu),)


def test_bad_declarations_are_named():
    with pytest.raises(ValueError, match="identifier"):
        cuda.declare_device("no-dash", "float32(float32)")
    with pytest.raises(ValueError, match="abi"):
        cuda.declare_device("f", "float32(float32)", abi="fortran")
    with pytest.raises(TypeError, match="argument 0 .* arrays under abi='numba'"):
        cuda.declare_device("f", "float32(float32[:])", abi="c")
    with pytest.raises(TypeError, match="Return type must be provided"):
        cuda.declare_device("f", "(float32[:],)")
    with pytest.raises(FileNotFoundError, match="nope.cu"):
        cuda.declare_device("f", "float32(float32)", link="nope.cu")
    with pytest.raises(FileNotFoundError, match="nope.cu"):
        cuda.jit(link=["nope.cu"])(lambda x: None)
    with pytest.raises(RuntimeError, match="only be called from kernels"):
        mul(1.0, 2.0)


def test_an_undeclared_external_function_is_still_refused():
    import ctypes
    libm = ctypes.CDLL(None)

    @cuda.jit
    def k(x):
        x[0] = libm.cos(x[0])
    with pytest.raises(CompileError):
        k.compile("void(float64[::1])")


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_cuda_c_functions_are_linked_and_called(tmp_path):
    import cupy as cp
    cu = tmp_path / "funcs.cu"
    cu.write_text(CUDA_SOURCE)
    x = cp.arange(1000, dtype=cp.float32)
    y = cp.full(1000, 3.0, cp.float32)
    out = cp.zeros_like(x)
    _kernel(link=[str(cu)])[4, 256](x, y, out)
    np.testing.assert_allclose(cp.asnumpy(out), cp.asnumpy(x * 3 + x + 1))

    # the same functions as PTX, linked through the declaration
    from cupy_backends.cuda.libs import nvrtc
    prog = nvrtc.createProgram(CUDA_SOURCE, "f.cu", (), ())
    cc = cp.cuda.Device().compute_capability
    nvrtc.compileProgram(prog, (f"-arch=compute_{cc}", "-rdc=true"))
    (tmp_path / "funcs.ptx").write_bytes(nvrtc.getPTX(prog))
    nvrtc.destroyProgram(prog)
    cuda.declare_device("mul_f32", "float32(float32, float32)", link=str(tmp_path / "funcs.ptx"))
    out[:] = 0
    _kernel()[4, 256](x, y, out)
    np.testing.assert_allclose(cp.asnumpy(out), cp.asnumpy(x * 3 + x + 1))
    cuda.declare_device("mul_f32", "float32(float32, float32)")


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_a_missing_definition_fails_at_load_naming_the_symbol():
    import cupy as cp
    cuda.declare_device("mul_f32", "float32(float32, float32)")
    x = cp.ones(4, cp.float32)
    with pytest.raises(LaunchError, match="mul_f32"):
        _kernel()[1, 4](x, x, x)



ARRAY_SOURCE = r'''
extern "C" __device__ int first_of(int *ret, void *meminfo, void *parent, long long nitems,
                                   long long itemsize, float *data, long long rows,
                                   long long cols, long long row_stride, long long col_stride)
{
    *ret = (int)data[0] + (int)(rows * 1000 + cols * 10) + (int)(row_stride / itemsize);
    return 0;
}
'''


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_an_array_argument_reaches_cuda_c_as_numba_cuda_passes_it(tmp_path):
    import cupy as cp
    cu = tmp_path / "arrays.cu"
    cu.write_text(ARRAY_SOURCE)
    first = cuda.declare_device("first_of", "int32(float32[:, :])", link=str(cu))

    @cuda.jit
    def k(x, out):
        out[0] = first(x)

    x = cp.full((3, 7), 5.0, cp.float32)
    out = cp.zeros(1, cp.int32)
    k[1, 1](x, out)
    assert int(out[0]) == 5 + 3 * 1000 + 7 * 10 + 7
    cuda.declare_device("first_of", "int32(float32[:, :])")


def test_nvrtc_search_paths_is_a_list_of_folders(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "_nvrtc_search_paths", ())
    settings.nvrtc_search_paths = "/one" + __import__("os").pathsep + "/two"
    assert settings.nvrtc_search_paths == ("/one", "/two")
    settings.nvrtc_search_paths = ["/three"]
    assert settings.nvrtc_search_paths == ("/three",)
    with pytest.raises(TypeError, match="nvrtc_search_paths must be folders"):
        settings.nvrtc_search_paths = [3]
    assert settings.nvrtc_search_paths == ("/three",)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_headers_of_linked_cuda_c_are_found_in_the_search_paths(tmp_path, monkeypatch):
    """A .cu file including a header of another folder: NVRTC finds it in the folders of
    ``settings.nvrtc_search_paths`` (numba-cuda's CUDA_NVRTC_EXTRA_SEARCH_PATHS)."""
    import cupy as cp

    from gpureplace.config import settings
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "scale_by.h").write_text("#define SCALE_BY 7.0f\n")
    (tmp_path / "src").mkdir()
    cu = tmp_path / "src" / "scaled.cu"
    cu.write_text('#include "scale_by.h"\nextern "C" __device__ int scaled(float *r, float a) '
                  '{ *r = a * SCALE_BY; return 0; }\n')
    scaled = cuda.declare_device("scaled", "float32(float32)", link=str(cu))

    @cuda.jit
    def k(x, out):
        out[0] = scaled(x[0])

    monkeypatch.setattr(settings, "_nvrtc_search_paths", ())
    x, out = cp.full(1, 2.0, cp.float32), cp.zeros(1, cp.float32)
    with pytest.raises((CompileError, LaunchError), match="scale_by.h"):
        k[1, 1](x, out)
    settings.nvrtc_search_paths = str(tmp_path / "inc")
    cuda.jit(k.py_func)[1, 1](x, out)
    assert float(out[0]) == 14.0
    cuda.declare_device("scaled", "float32(float32)")


# -- code held in memory: numba-cuda's linkable code objects ----------------------------------

def test_linkable_code_objects_are_link_items():
    from gpureplace.compiler.intrinsics.external import link_files
    src = cuda.CUSource(CUDA_SOURCE)
    assert link_files(src, "x") == (src,) and src.name == "<unnamed-CUSource>.cu"
    assert link_files([src, cuda.PTXSource(b"//", name="p.ptx")], "x")[1].name == "p.ptx"
    with pytest.raises(TypeError, match="data must be the code as str or bytes"):
        cuda.Cubin(42)
    with pytest.raises(TypeError, match="neither a file path nor linkable code"):
        link_files([3.5], "cuda.jit(link=...)")
    decl = cuda.declare_device("mul_f32", "float32(float32, float32)", link=src)
    assert decl.link == (src,)
    cuda.declare_device("mul_f32", "float32(float32, float32)")
    _kernel(link=[src]).compile(SIG)                       # nothing is linked before a load


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_cuda_source_and_ptx_in_memory_are_linked_and_the_callbacks_run():
    import cupy as cp
    loaded = []
    src = cuda.CUSource(CUDA_SOURCE, setup_callback=lambda mod: loaded.append(mod))
    x = cp.arange(100, dtype=cp.float32)
    y = cp.full(100, 3.0, cp.float32)
    out = cp.zeros_like(x)
    _kernel(link=[src])[1, 128](x, y, out)
    np.testing.assert_allclose(cp.asnumpy(out), cp.asnumpy(x * 3 + x + 1))
    assert len(loaded) == 1
    from cupy_backends.cuda.libs import nvrtc
    prog = nvrtc.createProgram(CUDA_SOURCE, "f.cu", (), ())
    cc = cp.cuda.Device().compute_capability
    nvrtc.compileProgram(prog, (f"-arch=compute_{cc}", "-rdc=true"))
    ptx = cuda.PTXSource(nvrtc.getPTX(prog), name="funcs.ptx")
    nvrtc.destroyProgram(prog)
    out[:] = 0
    _kernel(link=[ptx])[1, 128](x, y, out)
    np.testing.assert_allclose(cp.asnumpy(out), cp.asnumpy(x * 3 + x + 1))
    with pytest.raises(LaunchError, match="LTO-IR is NVVM's link-time format"):
        _kernel(link=[cuda.LTOIR(b"\0", name="f.ltoir")])[1, 128](x, y, out)


def test_a_declaration_changed_is_a_new_dependency_on_disk_and_in_the_session(tmp_path):
    """A kernel calling ``declare_device("f", sig, abi=...)`` compiles its call for that signature
    and ABI: declaring ``f`` again with another signature, ABI or link code must reach the
    kernel -- from the disk cache in a new process and after a redefinition in the same one (a
    declaration was fingerprinted by its name alone, so both served the old call)."""
    from conftest import python_process
    program = """
import sys
import gpureplace
from gpureplace import cuda
f = cuda.declare_device("f", sys.argv[1], abi=sys.argv[2])

@cuda.jit
def k(x):
    x[0] = f(x[0])

ptx = k.compile("void(float32[:])").ptx
print(gpureplace.stats()["disk_hits"], "cvt.f64.f32" in ptx, "func_retval0" in ptx)
"""
    env = {"GPUREPLACE_CACHE_DIR": str(tmp_path / "cache")}

    def run(sig, abi):
        import subprocess
        import sys
        import os
        proc = subprocess.run([sys.executable, "-c", program, sig, abi], capture_output=True,
                              text=True, env=dict(os.environ, **env), timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    assert run("float32(float32)", "numba") == ["0", "False", "True"]
    assert run("float32(float32)", "numba") == ["1", "False", "True"]     # the same: a hit
    assert run("float64(float64)", "numba") == ["0", "True", "True"]      # converts to f64
    assert run("float32(float32)", "c")[0] == "0"                          # another ABI
    out = python_process("""
from gpureplace import cuda
from gpureplace.tracking import bindings
ns = {"cuda": cuda}
exec('f = cuda.declare_device("f", "float32(float32)")', ns)
exec("@cuda.jit\\ndef k(x):\\n    x[0] = f(x[0])", ns)
before = ns["k"].compile("void(float32[:])").ptx
exec('f = cuda.declare_device("f", "float64(float64)")', ns)
print([c[1:] for c in bindings.check()])
after = ns["k"].compile("void(float32[:])").ptx
print("cvt.f64.f32" in before, "cvt.f64.f32" in after)
""", GPUREPLACE_CACHE_DIR=str(tmp_path / "cache2"))
    assert out.split("\n")[:2] == ["[('f', 'redefined')]", "False True"]
