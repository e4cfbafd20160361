"""Writes notebooks/quickstart.ipynb, redefinition.ipynb and dask.ipynb (run it after editing).

The notebooks run on the "Python 3 (gpureplace)" kernel.  Every cell that needs a GPU checks for
one; the rest (compiling, reflection, invalidation) runs and asserts on a machine without a GPU,
which is how CI executes them (tests/ipython/test_notebooks.py).
"""

import os

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELSPEC = {"name": "gpureplace", "display_name": "Python 3 (gpureplace)", "language": "python"}


def notebook(cells):
    nb = new_notebook(cells=[new_markdown_cell(c[3:]) if c.startswith("md:") else
                             new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata["language_info"] = {"name": "python"}
    return nb


QUICKSTART = [
    "md:# gpureplace quickstart\n\nKernels in Python, compiled to PTX through LLVM, launched with "
    "CuPy -- and kept true to the notebook: redefine a helper and exactly the kernels that use it "
    "recompile.",
    "import math\nimport numpy as np\nimport gpureplace\nfrom gpureplace import cuda\n"
    "HAVE_GPU = cuda.is_available()\nprint('gpureplace', gpureplace.__version__, '| GPU:', HAVE_GPU)",
    "md:## Kernels\n\nIn a `%%cuda` cell every top-level function becomes a gpureplace function: "
    "launchable as a kernel, callable from other kernels. Plain helpers need no decorator.",
    "%%cuda\ndef scale(v):\n    return 2.0 * v\n\ndef saxpy(a, x, y, out):\n    i = cuda.grid(1)\n"
    "    if i < out.size:\n        out[i] = scale(a) * x[i] + math.sin(y[i])",
    "SIG = 'void(float32, float32[:], float32[:], float32[:])'\nspec = saxpy.compile(SIG)   # no GPU "
    "needed\nassert '.entry saxpy' in spec.ptx\nprint(spec.ptx.splitlines()[4:7])",
    "if HAVE_GPU:\n    import cupy as cp\n    x = cp.arange(1 << 20, dtype=cp.float32)\n"
    "    y = cp.ones_like(x)\n    out = cp.empty_like(x)\n    saxpy[4096, 256](1.5, x, y, out)\n"
    "    ref = 3.0 * cp.asnumpy(x) + np.sin(np.float32(1.0))\n"
    "    np.testing.assert_allclose(cp.asnumpy(out), ref, rtol=1e-6)\n    print('saxpy matches NumPy')\n"
    "else:   # no GPU: the same launch runs in the CPU simulator, on NumPy arrays\n"
    "    x = np.arange(1 << 12, dtype=np.float32)\n    y = np.ones_like(x)\n    out = np.empty_like(x)\n"
    "    saxpy[16, 256](1.5, x, y, out)\n"
    "    np.testing.assert_allclose(out, 3.0 * x + np.sin(np.float32(1.0)), rtol=1e-6)\n"
    "    print('saxpy matches NumPy (simulator)')",
    "md:Device `print` output appears in the cell that launched the kernel.",
    "%%cuda\ndef hello(flags):\n    i = cuda.grid(1)\n    if i < flags.size:\n"
    "        print('hello from thread', i)\n        flags[i] = 1",
    "flags = cp.zeros(2, dtype=cp.int32) if HAVE_GPU else np.zeros(2, dtype=np.int32)\n"
    "hello[1, 2](flags)",
    "md:## Reflection",
    "%cuda_ptx saxpy",
    "print(saxpy.dispatch_report(SIG))",
    "%cuda_deps saxpy",
    "md:## Redefinition\n\nWith `verbose` on, each cell says what it invalidated.",
    "%config GPUReplace.verbose = True",
    "%%cuda\ndef scale(v):\n    return 3.0 * v",
    "spec2 = saxpy.compile(SIG)\nassert spec2 is not spec\nassert '0d4008000000000000' in spec2.ptx   "
    "# 3.0 is in the new code\nprint('recompiled with the new scale')",
    "md:## Launching many times\n\nA prepared launch checks and packs its arguments once; a "
    "graph captures a sequence of launches and replays it in one call. Both follow "
    "redefinitions: the graph captures again at its next replay.",
    "xp = cp if HAVE_GPU else np\nx = xp.arange(1024, dtype=xp.float32)\ny = xp.zeros_like(x)\n"
    "out = xp.empty_like(x)\n\nrun = saxpy[4, 256].prepare(1.0, x, y, out)\nrun()\n\n"
    "def two_steps():\n    saxpy[4, 256](1.0, x, y, out)\n    saxpy[4, 256](1.0, out, y, out)\n\n"
    "g = gpureplace.graph(two_steps)      # captured; nothing ran yet\ng()\n"
    "got = cp.asnumpy(out) if HAVE_GPU else out\n"
    "np.testing.assert_allclose(got, 9.0 * np.arange(1024, dtype=np.float32))   # scale is 3x\n"
    "print('graph replayed:', len(g), 'launches')",
    "%%cuda\ndef scale(v):\n    return 4.0 * v",
    "g()\ngot = cp.asnumpy(out) if HAVE_GPU else out\n"
    "np.testing.assert_allclose(got, 16.0 * np.arange(1024, dtype=np.float32))\n"
    "print('the graph runs the new scale')",
    "md:## Wide memory accesses\n\nA memory-bound kernel reaches the memory's bandwidth when "
    "each thread moves 16 bytes at a time, as CUDA C's `float4` does: CUDA's vector types "
    "(`cuda.float32x4`, `cuda.int2`, ...) and `cuda.as_vectors(a, 4)`, which hands a kernel an "
    "array as an array of vectors (one `ld.global.v4` per element).",
    "%%cuda\ndef saxpy4(a, x, y, out):\n    i = cuda.grid(1)\n    if i < out.size:\n"
    "        u = x[i]\n        v = y[i]\n"
    "        out[i] = cuda.float32x4(a * u.x + v.x, a * u.y + v.y, a * u.z + v.z, a * u.w + v.w)",
    "x4 = cuda.to_device(np.arange(1024, dtype=np.float32))   # vectors view device memory\n"
    "y4 = cuda.to_device(np.ones(1024, dtype=np.float32))\nout4 = cuda.device_array_like(x4)\n"
    "saxpy4[1, 256](np.float32(2), cuda.as_vectors(x4), cuda.as_vectors(y4), cuda.as_vectors(out4))\n"
    "got = out4.copy_to_host()\n"
    "np.testing.assert_allclose(got, 2.0 * np.arange(1024, dtype=np.float32) + 1.0)\n"
    "ptx = next(iter(saxpy4.inspect_ptx().values()))\n"
    "assert ptx.count('ld.global.v4') == 2 and ptx.count('st.global.v4') == 1\n"
    "print('16-byte loads and stores:', ptx.count('ld.global.v4') + ptx.count('st.global.v4'))",
    "md:## Contexts and overrides\n\nThe built-in `fastmath` context maps float32 `math.*` to "
    "libdevice's fast variants; your own contexts override anything, user functions included.",
    "fast = saxpy.with_context(gpureplace.fastmath_context).compile(SIG)\n"
    "assert 'sin.approx' in fast.ptx and 'sin.approx' not in spec2.ptx\nprint('fast context uses "
    "sin.approx')",
    "mine = gpureplace.Context('mine')\n\n@mine.override(math.sin)\ndef my_sin(x):\n"
    "    return x - x * x * x / 6.0          # a cheap series, only on the device\n\n"
    "report = saxpy.with_context(mine).dispatch_report(SIG)\n"
    "row = [r for r in report if r['callable'] == 'math.sin'][0]\n"
    "assert row['layer'] == 'mine'\nprint(report)",
]

REDEFINITION = [
    "md:# Redefinition walkthrough\n\nWhat recompiles, what stays cached, and what is refused.",
    "import gpureplace\nfrom gpureplace import cuda\nSIG = 'void(float64[:])'\n"
    "def compiles():\n    return gpureplace.stats()['kernel_compiles']",
    "%%cuda\nFACTOR = 2.0\ndef leaf(v):\n    return v + 1.0\ndef helper(v):\n    return leaf(v) * FACTOR\n"
    "def uses_helper(out):\n    out[0] = helper(out[0])\ndef independent(out):\n    out[0] = out[0] - 1.0",
    "a = uses_helper.compile(SIG); b = independent.compile(SIG)\nstart = compiles()\n"
    "relinks = gpureplace.stats()['relinks']",
    "md:Redefine a function two levels down: only `uses_helper` recompiles, and only `leaf` goes "
    "through the front end again; `helper` and `uses_helper` keep their code, their calls now "
    "reach the new `leaf` (relinked).",
    "%%cuda\ndef leaf(v):\n    return v + 100.0",
    "a2 = uses_helper.compile(SIG); b2 = independent.compile(SIG)\n"
    "assert compiles() == start + 1 and b2 is b and a2 is not a\n"
    "assert gpureplace.stats()['relinks'] == relinks + 2\n"
    "print('recompiled: uses_helper only (helper and uses_helper relinked)')",
    "md:Change a frozen global; then re-run an identical cell: the second costs nothing.",
    "FACTOR = 5.0",
    "a3 = uses_helper.compile(SIG)\nassert compiles() == start + 2",
    "FACTOR = 5.0",
    "assert uses_helper.compile(SIG) is a3 and compiles() == start + 2\nprint('identical cell: still cached')",
    "md:Delete a dependency: the next use says which name and where, and never runs old code.",
    "del leaf          # bindings are compared when a cell ends",
    "try:\n    uses_helper.compile(SIG)\nexcept gpureplace.CompileError as e:\n"
    "    print('refused:', e)\n    assert 'leaf' in str(e)\nelse:\n    raise AssertionError('expected an error')",
    "%%cuda\ndef leaf(v):\n    return v * 7.0",
    "assert '0d401C000000000000' in uses_helper.compile(SIG).ptx\nprint('fixed: recompiled')",
    "%cuda_cache stats",
]

DASK = [
    "md:# Kernels on Dask workers\n\nA kernel defined in the notebook runs on every worker; "
    "redefine a helper and the next computation runs the new code there, each worker compiling "
    "again only the kernel that calls it. With GPUs, `LocalCUDACluster()` (dask-cuda) starts one "
    "worker per GPU; without one, the workers run the CPU simulator.",
    "import os\nimport numpy as np\nimport dask.array as da\nfrom dask.distributed import "
    "Client, LocalCluster\nimport gpureplace\nfrom gpureplace import cuda\n"
    "HAVE_GPU = cuda.is_available()\nif HAVE_GPU:\n    try:\n"
    "        from dask_cuda import LocalCUDACluster as Cluster   # one worker per GPU\n"
    "    except ImportError:\n        Cluster = LocalCluster\nelse:\n"
    "    os.environ['GPUREPLACE_BACKEND'] = 'simulator'   # the workers inherit it\n"
    "    Cluster = LocalCluster\n"
    "cluster = Cluster(n_workers=1, threads_per_worker=1, dashboard_address=None)\n"
    "client = Client(cluster)\nprint(type(cluster).__name__, len(client.scheduler_info()['workers']), "
    "'worker(s)')",
    "%%cuda\ndef offset(v):\n    return v + 1.0\n\ndef shifted(a, x, out):\n"
    "    i = cuda.grid(1)\n    if i < out.size:\n        out[i] = a * offset(x[i])",
    "md:`gpureplace.dask.map_blocks` launches the kernel once per block, with a new output block "
    "(allocated on the worker's GPU) as its last argument and as many threads as elements.",
    "x_np = np.arange(1_000_000, dtype=np.float32)\nx = da.from_array(x_np, chunks=250_000)\n"
    "if HAVE_GPU:\n    import cupy as cp\n    x = x.map_blocks(cp.asarray)      # CuPy-backed blocks\n"
    "y = gpureplace.dask.map_blocks(shifted, np.float32(2.0), x)\n"
    "got = y.compute()\ngot = got.get() if HAVE_GPU else got\n"
    "np.testing.assert_allclose(got, 2.0 * (x_np + 1.0))\nprint('matches NumPy')",
    "def compiles():\n    return sum(s['kernel_compiles'] for s in client.run(gpureplace.stats).values())\n"
    "before = compiles()",
    "md:Redefine the helper: the next task carries the new definition. (Build the graph again, "
    "as re-running its cell does: a graph built before keeps its keys, and Dask may hand back "
    "results it still holds for them.)",
    "%%cuda\ndef offset(v):\n    return v - 1.0",
    "y = gpureplace.dask.map_blocks(shifted, np.float32(2.0), x)   # the same code, run again\n"
    "got = y.compute()\n"
    "got = got.get() if HAVE_GPU else got\n"
    "np.testing.assert_allclose(got, 2.0 * (x_np - 1.0))\n"
    "assert compiles() == before + 1      # shifted, once, on the one worker\n"
    "print('the workers ran the new offset; recompiled: shifted')",
    "client.close()\ncluster.close()",
]


def main():
    for name, cells in (("quickstart", QUICKSTART), ("redefinition", REDEFINITION),
                        ("dask", DASK)):
        nbformat.write(notebook(cells), os.path.join(HERE, f"{name}.ipynb"))


if __name__ == "__main__":
    main()
