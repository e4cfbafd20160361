"""A compile another thread finishes while the cell hook's collection walks -- after it listed
the live code, before ``bindings.retain`` -- left the globals that code read to be forgotten
(tracked since, read by none of the code listed): a later change of them was never seen, and
the thread's kernel ran its old value.  Such bindings wait one walk while the compiled function
that tracked them lives.  The window is opened here by running the thread inside it."""

from conftest import python_process

PROGRAM = r'''
import threading
import numpy as np
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_cell("%load_ext gpureplace")
shell.run_cell("""
import numpy as np
from gpureplace import cuda
X = 1.0
Y = 1.0
def body(out):
    out[0] = X
@cuda.jit
def ky(out):
    out[0] = Y
ky[1, 1](np.zeros(1))
holder = {}
def worker():
    k = cuda.jit(body)
    k[1, 1](np.zeros(1))
    holder["k"] = k
""")
from gpureplace.jit import collect
listed = collect._in_use

def listed_then_a_thread_compiles():
    found = listed()
    if "k" not in shell.user_ns["holder"]:
        t = threading.Thread(target=shell.user_ns["worker"])
        t.start()
        t.join()
    return found

collect._in_use = listed_then_a_thread_compiles
shell.run_cell("Y = 2.0")
shell.run_cell("ky[1, 1](np.zeros(1))\nY = 3.0")      # the hook walks: the thread compiles then
collect._in_use = listed
shell.run_cell("X = 5.0")
shell.run_cell("pass")
out = np.zeros(1)
shell.user_ns["holder"]["k"][1, 1](out)
print(out[0])
'''


def test_a_global_read_by_code_compiled_during_the_walk_stays_tracked(tmp_path):
    out = python_process(PROGRAM, GPUREPLACE_BACKEND="simulator",
                         GPUREPLACE_CACHE_DIR=str(tmp_path / "cache"))
    assert out.split()[-1] == "5.0"
