"""A process forked after its parent initialised CUDA cannot use CUDA: the host API says so with
numba-cuda's error (``cuda.cudadrv.error.CudaDriverError``, "CUDA initialized before forking")
instead of CuPy's initialisation errors."""

import functools

import pytest

from gpureplace import cuda, probe
from gpureplace.hostapi import arrays


def test_a_child_forked_after_cuda_was_initialised_is_told(monkeypatch):
    @functools.lru_cache(maxsize=None)
    def device_count():
        return 1
    device_count()                                  # the parent asked CUDA for its devices
    monkeypatch.setattr(probe, "device_count", device_count)
    monkeypatch.setattr(probe, "forked_after_cuda", False)
    monkeypatch.setattr(probe, "cuda_used", False)
    monkeypatch.setattr(arrays, "simulated", lambda: False)
    probe._after_fork_in_child()
    assert probe.forked_after_cuda
    with pytest.raises(cuda.cudadrv.error.CudaDriverError,
                       match="CUDA initialized before forking.*'spawn'"):
        cuda.device_array(3)


def test_a_child_of_a_parent_that_never_used_cuda_is_not(monkeypatch):
    @functools.lru_cache(maxsize=None)
    def device_count():
        return 1
    monkeypatch.setattr(probe, "device_count", device_count)   # never called: not initialised
    monkeypatch.setattr(probe, "forked_after_cuda", False)
    monkeypatch.setattr(probe, "cuda_used", False)
    probe._after_fork_in_child()
    assert not probe.forked_after_cuda
    probe.cuda_used = True                     # ... but a kernel was loaded, or CuPy used
    probe._after_fork_in_child()
    assert probe.forked_after_cuda


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_fork_after_cuda_on_the_gpu():
    import concurrent.futures
    import multiprocessing as mp
    import numpy as np
    cuda.current_context()
    with concurrent.futures.ProcessPoolExecutor(mp_context=mp.get_context("fork")) as exe:
        future = exe.submit(cuda.to_device, np.arange(1))
    with pytest.raises(cuda.cudadrv.error.CudaDriverError, match="before forking"):
        future.result()


# --- a fork while gpureplace compiles in another thread -------------------------------------

_FORK_WHILE_COMPILING = r"""
import faulthandler, os, sys, threading, time
import numpy as np
from gpureplace import cuda
from gpureplace.compiler import frontend

def h(v):
    return v + 1

@cuda.jit
def k(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = h(x[i])

@cuda.jit
def other(out):
    out[0] = 7

started = threading.Event()
real = frontend.compile_device
def slow_compile(*a, **kw):               # the other thread's compile, holding the locks
    with frontend._lock:
        started.set()
        time.sleep(0.5)
        return real(*a, **kw)

if MODE == "thread":
    frontend.compile_device = slow_compile
    t = threading.Thread(target=lambda: other.compile("void(float64[:])"), daemon=True)
    t.start()
    started.wait(30)
    frontend.compile_device = real
else:
    import gpureplace.prewarm
    gpureplace.prewarm.start(cuda=False)
    time.sleep(0.05)
pid = os.fork()
if pid == 0:
    faulthandler.dump_traceback_later(60, exit=True)      # a hang: exit 1 with the stacks
    x, o = np.arange(4.0), np.zeros(4)
    k[1, 4](x, o)
    os._exit(0 if o.tolist() == [1.0, 2.0, 3.0, 4.0] else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("mode", ["thread", "prewarm"])
def test_a_child_forked_while_another_thread_compiles_compiles_too(mode, tmp_path):
    """The child has only the forking thread: a compile lock held by another thread at the fork
    stayed held in the child, whose first compile waited for ever (a ProcessPoolExecutor in a
    notebook, whose extension had started the warm-up).  The fork now waits for that compile."""
    from conftest import python_process
    out = python_process(f"MODE = {mode!r}\n" + _FORK_WHILE_COMPILING, timeout=200,
                         GPUREPLACE_CACHE_DIR=str(tmp_path), GPUREPLACE_BACKEND="simulator")
    assert out.strip().splitlines()[-1] == "child 0"
