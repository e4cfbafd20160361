"""IPython's ``%autoreload 2`` and compiled kernels, through a real InteractiveShell.

autoreload reloads a module whose file changed before the next cell runs and then updates the
old function objects in place (their ``__code__``, ``__defaults__``...), so a function imported
into the notebook by name is the same object with new code.  The kernels that call it must run
the new code after the next cell, as when the name is redefined (tests/tracking/
test_inplace_and_classes.py has the same without IPython, and from the disk cache).
"""

import os
import struct
import sys
import textwrap

import pytest

pytest.importorskip("IPython")

import gpureplace  # noqa: E402

SIG = "void(float64[:])"
MODULE = "gr_autoreload_user_mod"

# (they count compiles: a cache left by an earlier run would make some disk hits)
pytestmark = pytest.mark.usefixtures("own_disk_cache")


def holds(ptx, value):
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    return f"0D{bits:016X}" in ptx.upper() or str(bits) in ptx


def run(ip, src):
    res = ip.run_cell(src, store_history=True)
    err = res.error_before_exec or res.error_in_exec
    if err is not None:
        raise err
    return res


def write_module(path, offset, default):
    path.write_text(textwrap.dedent(f"""
        def f(v):
            return v + {offset}

        def h(v, c={default}):
            return v * c

        def unchanged(v):
            return v * 13.0
    """))


@pytest.fixture
def autoreload(shell, tmp_path, monkeypatch):
    """``shell`` with ``%autoreload 2`` on and a user module ``MODULE`` in ``tmp_path``; the
    autoreload extension (which has no unload) is switched off and its hooks removed after."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    path = tmp_path / f"{MODULE}.py"
    write_module(path, "0.25", "0.5")
    run(shell, "%load_ext autoreload")
    run(shell, "%autoreload 2")
    yield shell, path
    shell.run_line_magic("autoreload", "0")
    for event in ("pre_run_cell", "post_execute"):
        for cb in list(shell.events.callbacks[event]):
            if type(getattr(cb, "__self__", None)).__name__ == "AutoreloadMagics":
                shell.events.unregister(event, cb)
    shell.extension_manager.loaded.discard("autoreload")
    sys.modules.pop(MODULE, None)


def edit(path, offset, default):
    write_module(path, offset, default)
    st = os.stat(path)
    os.utime(path, (st.st_atime + 10, st.st_mtime + 10))     # (autoreload compares mtimes)


def test_autoreload_2_runs_the_new_code_of_an_imported_function(autoreload):
    ip, path = autoreload
    run(ip, f"""
import {MODULE} as mod
from {MODULE} import f, h, unchanged
from gpureplace import cuda
@cuda.jit
def k_imported(out):
    out[0] = f(out[0])
@cuda.jit
def k_module(out):
    out[0] = mod.f(out[0])
@cuda.jit
def k_defaults(out):
    out[0] = h(out[0])
@cuda.jit
def k_unchanged(out):
    out[0] = unchanged(out[0])
""")
    run(ip, f"""
s_imported = k_imported.compile('{SIG}'); s_module = k_module.compile('{SIG}')
s_defaults = k_defaults.compile('{SIG}'); s_unchanged = k_unchanged.compile('{SIG}')
""")
    ns = ip.user_ns
    assert holds(ns["s_imported"].ptx, 0.25) and holds(ns["s_module"].ptx, 0.25)
    assert holds(ns["s_defaults"].ptx, 0.5)
    f_before = ns["f"]
    run(ip, "pass")
    edit(path, "0.75", "6.25")
    run(ip, "pass")                       # autoreload reloads before it, the hook checks after
    assert ns["f"] is f_before and 0.75 in f_before.__code__.co_consts    # changed in place
    before = gpureplace.stats()["kernel_compiles"]
    run(ip, f"""
t_imported = k_imported.compile('{SIG}'); t_module = k_module.compile('{SIG}')
t_defaults = k_defaults.compile('{SIG}'); t_unchanged = k_unchanged.compile('{SIG}')
""")
    assert holds(ns["t_imported"].ptx, 0.75) and not holds(ns["t_imported"].ptx, 0.25)
    assert holds(ns["t_module"].ptx, 0.75) and not holds(ns["t_module"].ptx, 0.25)
    assert holds(ns["t_defaults"].ptx, 6.25) and not holds(ns["t_defaults"].ptx, 0.5)
    # ``unchanged`` got a new code object of the same content: its kernel keeps its code
    assert ns["t_unchanged"] is ns["s_unchanged"]
    assert gpureplace.stats()["kernel_compiles"] == before + 3
    # launched, the new code runs (on the simulator or the GPU)
    run(ip, """
import numpy as np
out = np.ones(1)
k_imported[1, 1](out)
""")
    assert float(ns["out"][0]) == 1.75
