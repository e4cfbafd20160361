"""An override removed in the sending process is removed where its kernels went.  The default
context is pickled in part (the receiving process keeps overrides of its own, that a module it
imported registered), so an override that an earlier pickle brought stayed there after the
notebook removed it: a worker ran the overridden function for ever after."""

from conftest import python_process

PROGRAM = r'''
import io, math, pickle, subprocess, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
import gpureplace
from gpureplace import cuda
from gpureplace.dispatch.context import default_context

@cuda.jit
def k(a):
    a[0] = math.sin(a[0]) + math.cos(a[0])

def fake_sin(x):
    return 1000.0

def fake_cos(x):
    return 20.0

sent = io.BytesIO()
gpureplace.override(math.sin, fake_sin)
gpureplace.override(math.cos, fake_cos)
pickle.dump(k, sent)                                   # task 1: both overrides
assert default_context.remove_override(math.sin)
pickle.dump(k, sent)                                   # task 2: sin's removed
gpureplace.override(math.sin, fake_sin)
pickle.dump(k, sent)                                   # task 3: back again

WORKER = """
import math, pickle, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
import gpureplace
from gpureplace.dispatch.context import default_context

def mine(x):                          # the worker's own override (as a module of its own makes)
    return 3.0

gpureplace.override(math.tan, mine)
stream = sys.stdin.buffer
for _ in range(3):
    k = pickle.load(stream)
    a = np.zeros(1)
    k[1, 1](a)
    print(a[0], sorted(o.host.__name__ for o in default_context.overrides()))
"""
done = subprocess.run([sys.executable, "-c", WORKER], input=sent.getvalue(), capture_output=True)
assert done.returncode == 0, done.stderr.decode()
print(done.stdout.decode())
'''


def test_an_override_removed_in_the_sender_is_removed_where_its_kernels_went():
    lines = python_process(PROGRAM, GPUREPLACE_BACKEND="simulator").strip().splitlines()
    assert lines == [
        "1020.0 ['cos', 'sin', 'tan']",     # both overrides arrived; the worker's own stays
        "20.0 ['cos', 'tan']",              # sin(0) = 0 again: the removal arrived too
        "1020.0 ['cos', 'sin', 'tan']",
    ]


DISPLACED = r'''
import io, math, pickle, subprocess, sys, warnings
warnings.simplefilter("ignore")
import gpureplace
from gpureplace import cuda
from gpureplace.dispatch.context import default_context

@cuda.jit
def k(a):
    a[0] = math.tan(a[0])

def notebook_tan(x):
    return 1000.0

sent = io.BytesIO()
gpureplace.override(math.tan, notebook_tan)
pickle.dump(k, sent)                                   # task 1: the notebook's tan
assert default_context.remove_override(math.tan)
pickle.dump(k, sent)                                   # task 2: removed there

WORKER = """
import math, pickle, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
import gpureplace

def workers_tan(x):                   # the worker's own override (as a module of its own makes)
    return 3.0

gpureplace.override(math.tan, workers_tan)
stream = sys.stdin.buffer
for _ in range(2):
    k = pickle.load(stream)
    a = np.zeros(1)
    k[1, 1](a)
    print(a[0])
"""
done = subprocess.run([sys.executable, "-c", WORKER], input=sent.getvalue(), capture_output=True)
assert done.returncode == 0, done.stderr.decode()
print(done.stdout.decode())
'''


def test_a_workers_own_override_that_a_pickle_replaced_comes_back_when_it_is_removed():
    out = python_process(DISPLACED, GPUREPLACE_BACKEND="simulator").split()
    assert out == ["1000.0", "3.0"]          # the notebook's, then the worker's own again
