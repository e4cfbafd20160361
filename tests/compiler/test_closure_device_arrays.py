"""Closure variables holding arrays kept in device memory (over 64 KiB): the global's name is
built from what is read, so that a disk-cache entry finds it again.

* Two closures of one factory, each reading its own array through the same variable, called by
  one kernel: both names were the same, so on the GPU one read the other's array.  That is now
  refused at compile time, by name (identical contents are fine: either copy is right).
* A kernel loaded from the disk cache named its closure's array after the module instead of
  "<closure>": the name did not match the PTX's global, and the load could not fill it."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gpureplace import CompileError, cuda


def _factory():
    def make(arr):
        def h(i):
            return arr[i]
        return h
    return make


def test_two_closures_of_one_factory_reading_different_arrays_are_refused():
    make = _factory()
    h1 = make(np.arange(100_000, dtype=np.float32))
    h2 = make(np.arange(100_000, dtype=np.float32) * 2)

    @cuda.jit
    def k(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = h1(i) + h2(i)

    with pytest.raises(CompileError, match=r"k calls two functions .*make\.<locals>\.h "
                                           r"\(closures made by one factory\) that read "
                                           r"different arrays through their closure variable "
                                           r"'arr'"):
        k.compile("void(float32[::1])")


def test_two_closures_reading_equal_arrays_share_one_global():
    make = _factory()
    h1 = make(np.arange(100_000, dtype=np.float32))
    h2 = make(np.arange(100_000, dtype=np.float32))

    @cuda.jit
    def k(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = h1(i) + h2(i)

    spec = k.compile("void(float32[::1])")
    symbols = set(re.findall(r"__gpureplace_array_\w+", spec.ptx))
    assert len(symbols) == 1 and [s for s, _ in spec.device_arrays] == list(symbols)


SCRIPT = textwrap.dedent('''
    import json, re, sys
    import numpy as np
    from gpureplace import cuda

    def make_kernel(table):
        @cuda.jit
        def k(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = table[i] * 2.0
        return k

    k = make_kernel(np.arange(100_000, dtype=np.float32))
    spec = k.compile("void(float32[::1])")
    print(json.dumps({"from_disk": spec.from_disk,
                      "in_ptx": sorted(set(re.findall(r"__gpureplace_array_\\w+", spec.ptx))),
                      "filled": sorted(s for s, _ in spec.device_arrays)}))
''')


def test_a_closures_array_keeps_its_global_name_when_loaded_from_disk(own_disk_cache, tmp_path):
    import json
    script = tmp_path / "closure_kernel.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, GPUREPLACE_CACHE="1", GPUREPLACE_BACKEND="simulator")
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert [r["from_disk"] for r in runs] == [False, True]
    for r in runs:
        assert len(r["in_ptx"]) == 1 and r["filled"] == r["in_ptx"], r
