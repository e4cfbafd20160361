"""An override of one of your functions is an override of its name, also for a copy of the
function that arrived by value: a kernel pickled to a "spawn" worker carries its own copy of the
helper it calls, while the worker's main module (the parent's script, imported again) defines
and overrides the helper too.  The copy found no override there (the worker ran the helper
itself: 1.0 where the parent got 100.0), in the default context and in a Context of the user's.
"""

import subprocess
import sys
import textwrap

from conftest import python_env

SCRIPT = textwrap.dedent('''
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    import numpy as np
    from gpureplace import Context, cuda, override

    def act(v):
        return v + 1

    @cuda.jit
    def k(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = act(x[i])

    def add100(v):
        return v + 100

    override(act, add100)

    def run(kern):
        x, o = np.zeros(4), np.zeros(4)
        kern[1, 4](x, o)
        return float(o[0])

    if __name__ == "__main__":
        mine = Context("mine")
        mine.override(act, lambda v: v + 1000)
        with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
            print(run(k), ex.submit(run, k).result(120))
            print(run(k.with_context(mine)), ex.submit(run, k.with_context(mine)).result(120))
''')


def test_a_kernel_sent_to_a_spawn_worker_keeps_the_override_of_its_helper(tmp_path):
    script = tmp_path / "main.py"
    script.write_text(SCRIPT)
    env = python_env(GPUREPLACE_BACKEND="simulator", GPUREPLACE_CACHE_DIR=str(tmp_path / "cache"),
                     GPUREPLACE_PREWARM="0")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["100.0", "100.0", "1000.0", "1000.0"]
