"""A kernel with line information (``lineinfo=True``) defined in a notebook cell, in a new
process on the same disk cache (a kernel restart, then Run All): the cell's file name holds the
process (ipykernel's ``/tmp/ipykernel_<pid>/<hash>.py``) or the execution count (IPython's
``<ipython-input-<n>-<hash>>``), but the cell and its lines are the same, so the kernel is
loaded, not compiled again; the PTX's ``.file`` names this process's file of the cell."""

import json
import os
import re
import pytest
from conftest import python_process

pytest.importorskip("IPython")

PROGRAM = r'''
import json, re
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
for _ in range({extra}):
    ip.run_cell("pass", store_history=True)          # (other execution counts)
ip.run_cell("""
import gpureplace
from gpureplace import cuda
@cuda.jit(lineinfo=True)
def k(a):
    a[0] = 1.5
spec = k.compile("void(float64[::1])")
""", store_history=True)
ns = ip.user_ns
files = re.findall(r'\.file\s+\d+\s+"([^"]*)"', ns["spec"].ptx)
print(json.dumps({{"from_disk": ns["spec"].from_disk, "files": files,
                  "cell": ns["k"].py_func.__code__.co_filename}}))
'''


def run(extra, cache):
    out = python_process(PROGRAM.format(extra=extra), GPUREPLACE_CACHE_DIR=str(cache),
                         GPUREPLACE_BACKEND="simulator")
    return json.loads(out.strip().splitlines()[-1])


def test_a_lineinfo_kernel_of_a_cell_is_loaded_after_a_restart(tmp_path):
    first = run(0, tmp_path)
    again = run(2, tmp_path)
    assert not first["from_disk"] and again["from_disk"]
    assert first["cell"] != again["cell"]                  # another execution count
    assert re.search(r"<ipython-input-\d+-[0-9a-f]+>", again["cell"])
    assert [os.path.basename(f) for f in again["files"]] == [again["cell"]]
