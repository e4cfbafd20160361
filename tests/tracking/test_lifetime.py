"""What gpureplace keeps must not keep the user's objects alive longer than they would live:

- without a cell hook to report them (a script), the changes a compile finds while tracking
  (a binding redefined and compiled again before any check) are not queued: each would hold its
  namespace, and nothing would ever take them;
- the reason no GPU was found is kept without its traceback, whose frames reached the first
  launch's caller (its locals lived on for the whole process);
- simulated streams take weak references, as numba-cuda's code needs (``weakref.finalize``).
"""

import gc
import weakref

from conftest import python_process
from gpureplace import cuda
from gpureplace.tracking import bindings


def test_a_script_queues_no_changes_for_a_report_nobody_reads():
    ns = {"cuda": cuda}
    src = ("def h(v):\n    return v * {0}.0\n"
           "@cuda.jit\ndef k{0}(out):\n    out[0] = h(out[0])\n")
    assert not bindings.reporting                    # (no IPython extension loaded here)
    for i in range(2, 6):
        exec(src.format(i), ns)                      # h redefined, a kernel reading it compiled
        ns[f"k{i}"].compile("void(float64[:])")
    assert bindings._pending == []
    bindings.check()


def test_the_first_launchs_locals_are_not_kept_by_the_no_gpu_reason():
    out = python_process("""
import gc, weakref
import numpy as np
from gpureplace import cuda

@cuda.jit
def k(x):
    x[0] = 1.0

def first_launch():
    big = np.zeros(1 << 20)
    k[1, 1](big)
    return weakref.ref(big)

ref = first_launch()
gc.collect()
print("alive" if ref() is not None else "freed")
""", GPUREPLACE_BACKEND="simulator")
    assert out.strip().splitlines()[-1] == "freed"


def test_simulated_streams_take_weak_references():
    s = cuda.stream()
    ref = weakref.ref(s)
    finalized = []
    weakref.finalize(s, finalized.append, True)
    del s
    gc.collect()
    assert ref() is None and finalized == [True]
