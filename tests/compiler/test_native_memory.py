"""Native memory a compile leaves behind: a notebook that defines and redefines kernels for
hours must not grow by what each compile allocated inside LLVM."""

from conftest import python_process


def test_pass_manager_is_freed_after_optimising():
    # llvmlite 0.50's ModulePassManager never frees its passes (its first base class's empty
    # _dispose hides the real one): backend.optimize frees it itself
    import llvmlite.binding as llvm
    from gpureplace.compiler import backend

    backend.initialize_llvm()
    mpm = backend.pass_builder(3).getModulePassManager()
    assert not mpm.closed
    backend.free_pass_manager(mpm)
    assert mpm.closed
    backend.free_pass_manager(mpm)            # twice: nothing freed twice
    mod = llvm.parse_assembly('target triple = "nvptx64-nvidia-cuda"\n'
                              'define i32 @f(i32 %a) {\n  %b = add i32 %a, 1\n  ret i32 %b\n}\n')
    backend.optimize(mod, "sm_90", 80)         # and optimize still works after it
    assert "add i32" in str(mod)


MANY_KERNELS = r"""
import ctypes, gc, math
from gpureplace import cuda
libc = ctypes.CDLL("libc.so.6")

def rss():
    gc.collect()
    libc.malloc_trim(0)
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096

SRC = ("def scale_{n}(a, x, out):\n"
       "    i = cuda.grid(1)\n"
       "    if i < out.size:\n"
       "        out[i] = math.sin(a * x[i]) + {n}.0\n")

def one(n, ns={"cuda": cuda, "math": math}):
    exec(SRC.format(n=n), ns)
    cuda.jit(ns.pop(f"scale_{n}")).compile("void(float32, float32[:], float32[:])")

for n in range(40):
    one(n)
before = rss()
for n in range(40, 340):
    one(n)
print((rss() - before) / 300 / 1024)
"""


def test_compiling_many_kernels_keeps_little_native_memory():
    # 300 new small kernels (each made, compiled for one signature and dropped): before the
    # pass managers were freed each kept ~150 KiB of native memory (45 MB here); now ~10 KiB
    out = python_process(MANY_KERNELS, GPUREPLACE_CACHE="0")
    per_kernel_kib = float(out.split()[-1])
    assert per_kernel_kib < 50, f"{per_kernel_kib:.0f} KiB of memory kept per compiled kernel"
