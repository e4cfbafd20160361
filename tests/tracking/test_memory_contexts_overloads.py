"""An ``@overload`` cell run again many times keeps only the version in effect: the target
contexts' lookups remembered each version's Numba function type by argument types (a constant of
it: the overloaded function read as a value), so every version's template, generator and
implementation stayed (compiler/frontend.py ``_replaced_overloads``).  Each run still computes
with the version just defined.

Each test runs an IPython shell in a process of its own: it counts the objects of its own making.
"""

import json

import pytest

from conftest import python_process

_PROGRAM = """
import contextlib, gc, io, json
from IPython.core.interactiveshell import InteractiveShell
from numba.core import types as nt
from gpureplace.compiler import target

ip = InteractiveShell.instance()
ip.history_manager.enabled = False

def run(src):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        r = ip.run_cell(src, store_history=False)
    assert r.success, (src[:200], r.error_in_exec)

run("%load_ext gpureplace")
run("import numpy as np\\nfrom gpureplace import cuda\\nfrom gpureplace.cuda import extending\\n"
    "import numba.extending\\n"
    "x = np.arange(32, dtype=np.float32); out = np.zeros(32, np.float32)\\n"
    "def clamp(v):\\n    return v\\n"
    "@cuda.jit\\ndef kern(x, out):\\n    i = cuda.grid(1)\\n    if i < out.size:\\n"
    "        out[i] = clamp(x[i])")
DEFINE = {
    "gpureplace": "@extending.overload(clamp)\\ndef ov_clamp(v):\\n",
    "numba": "@numba.extending.overload(clamp, target='cuda')\\ndef ov_clamp(v):\\n",
}[KIND]
for i in range(RUNS):
    run(DEFINE + f"    def impl(v):\\n        return v + {i}.5\\n    return impl")
    run(f"kern[1, 32](x, out)\\nassert out[3] == 3 + {i}.5, out[3]")
gc.collect()
templates = sum(1 for o in gc.get_objects()
                if isinstance(o, type) and o.__name__.startswith("OverloadTemplate_clamp"))
memo = sum(1 for _, tg in target.all_compilers() for sig in tg._get_constants._cache
           if any(isinstance(t, nt.Function) and "clamp" in str(t) for t in sig))
print(json.dumps({"templates": templates, "memo": memo}))
"""


def _run(tmp_path, kind, runs):
    program = _PROGRAM.replace("KIND", repr(kind)).replace("RUNS", str(runs))
    out = python_process(program, GPUREPLACE_BACKEND="simulator",
                         GPUREPLACE_CACHE_DIR=str(tmp_path / "cache"))
    return json.loads(out.strip().splitlines()[-1])


def test_an_overload_run_again_keeps_only_the_latest_versions(tmp_path):
    got = _run(tmp_path, "gpureplace", 12)
    # the one in effect, and at most the one before it until the next collection
    assert got["memo"] <= 1
    assert got["templates"] <= 2


@pytest.mark.parametrize("runs", [4, 10])
def test_a_numba_cuda_overload_run_again_leaves_no_lookups_behind(tmp_path, runs):
    # ``numba.extending.overload(..., target="cuda")`` registers every version in Numba's own
    # registry (which keeps them all, for every target): what gpureplace kept of them -- its
    # lookups' answers -- does not grow with the versions
    got = _run(tmp_path, "numba", runs)
    assert got["memo"] <= 1
