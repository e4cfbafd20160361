"""IPython's ``%autoreload 2`` and compiled kernels, through a real InteractiveShell.

autoreload reloads a module whose file changed before the next cell runs and then updates the
old function objects in place (their ``__code__``, ``__defaults__``...), so a function imported
into the notebook by name is the same object with new code.  The kernels that call it must run
the new code after the next cell, as when the name is redefined (tests/tracking/
test_inplace_and_classes.py has the same without IPython, and from the disk cache).
"""

import os
import struct
import subprocess
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
    # (IPython records the built-in extension under its full name)
    shell.extension_manager.loaded.discard("autoreload")
    shell.extension_manager.loaded.discard("IPython.extensions.autoreload")
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


# -- the cell that follows an edit launches the new code -------------------------------------------
# autoreload reloads in its pre_run_cell hook, just before the cell runs; the extension's
# pre_run_cell (kept after autoreload's) then checks the bindings, so that the cell's own launches
# run the new code, not only the next cell's.  Cold, warm from the disk cache (a second process
# on the cache a first one filled) and after %reload_ext gpureplace (whose hooks then come after
# autoreload's; in the other modes autoreload was loaded after gpureplace).

SAME_CELL_MODULE = "gr_autoreload_same_cell_mod"


def write_same_cell_module(path, offset, factor):
    path.write_text(f"FACTOR = {factor}\n\n"
                    f"def shift(v):\n    return v + {offset}\n\n"
                    f"def scale(v):\n    return v * FACTOR\n")


SAME_CELL_SETUP = f"""
import numpy as np
import gpureplace
import {SAME_CELL_MODULE} as smod
from {SAME_CELL_MODULE} import shift
from gpureplace import cuda
SIG1 = "void(float64[::1])"
@cuda.jit
def k_code(out):
    out[0] = shift(out[0])          # a function autoreload changes in place (its __code__)
@cuda.jit
def k_const(out):
    out[0] = smod.scale(out[0])     # a function whose module's constant autoreload rebinds
def launched(kernel):
    out = np.ones(1)
    kernel[1, 1](out)
    return float(out[0]), kernel.inspect_ptx(SIG1)
"""

# launched, and the PTX of what was launched, all in the one cell that follows the edit
SAME_CELL_LAUNCH = "r_code, p_code = launched(k_code); r_const, p_const = launched(k_const)"


def same_cell_scenario(ip, path, mode):
    """The scenario in ``ip`` (gpureplace and ``%autoreload 2`` loaded): kernels calling the
    functions of the module at ``path`` launch; the module is edited; the next cell launches them
    again and must run the new code.  ``mode``: cold, fill, warm (the set-up's kernels must come
    from the disk cache), reload (``%reload_ext gpureplace`` after the set-up)."""
    write_same_cell_module(path, "0.25", "0.5")
    st = os.stat(path)
    os.utime(path, (st.st_atime - 100, st.st_mtime - 100))
    before = gpureplace.stats()
    run(ip, SAME_CELL_SETUP)
    run(ip, SAME_CELL_LAUNCH)
    ns = ip.user_ns
    assert (ns["r_code"], ns["r_const"]) == (1.25, 0.5)
    assert holds(ns["p_code"], 0.25) and holds(ns["p_const"], 0.5)
    if mode == "warm":
        after = gpureplace.stats()
        assert after["kernel_compiles"] == before["kernel_compiles"], "compiled, not loaded"
        assert after["disk_hits"] >= before["disk_hits"] + 2
    if mode == "reload":
        ip.run_line_magic("reload_ext", "gpureplace")
    run(ip, "pass")
    shift_before = ns["shift"]
    write_same_cell_module(path, "0.75", "6.25")          # (its mtime: now, 100 s later)
    run(ip, SAME_CELL_LAUNCH)
    assert ns["shift"] is shift_before and 0.75 in shift_before.__code__.co_consts   # in place
    assert holds(ns["p_code"], 0.75) and not holds(ns["p_code"], 0.25), "k_code ran old PTX"
    assert holds(ns["p_const"], 6.25) and not holds(ns["p_const"], 0.5), "k_const ran old PTX"
    # (on the simulator, a function changed in place runs its new code at any rate)
    assert (ns["r_code"], ns["r_const"]) == (1.75, 6.25)


@pytest.fixture
def same_cell_module(autoreload):
    ip, path = autoreload
    yield ip, path.with_name(f"{SAME_CELL_MODULE}.py")
    sys.modules.pop(SAME_CELL_MODULE, None)


@pytest.mark.parametrize("mode", ["cold", "cold-full", "reload"])
def test_the_cell_after_an_edit_launches_the_new_code(same_cell_module, mode):
    ip, path = same_cell_module
    if mode == "cold-full":
        run(ip, "%autoreload 2 --full")      # (the older reload: superreload, not the diffing one)
    same_cell_scenario(ip, path, mode)


def _same_cell_in_a_process(mode, folder, cache):
    env = dict(os.environ, GPUREPLACE_CACHE_DIR=str(cache), GPUREPLACE_CACHE="1",
               GPUREPLACE_PREWARM="0")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), mode, str(folder)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{mode}:\n{proc.stdout}\n{proc.stderr}"


def test_the_cell_after_an_edit_launches_the_new_code_warm_from_disk(tmp_path):
    folder, cache = tmp_path / "mod", tmp_path / "cache"
    folder.mkdir()
    _same_cell_in_a_process("fill", folder, cache)     # (the whole scenario: both versions)
    _same_cell_in_a_process("warm", folder, cache)


def test_the_check_before_a_cell_runs_only_after_a_reload(same_cell_module, monkeypatch):
    """The check before a cell costs nothing more unless autoreload reloaded something."""
    from gpureplace.ipython import cells, magics
    ip, path = same_cell_module
    write_same_cell_module(path, "0.25", "0.5")
    calls = []

    def counted(verbose):
        calls.append(verbose)
        return cells.check_bindings(verbose)
    monkeypatch.setattr(magics, "check_bindings", counted)
    run(ip, f"import {SAME_CELL_MODULE}")
    for _ in range(3):
        calls.clear()
        run(ip, "pass")
        assert len(calls) == 1                   # after the cell only
    write_same_cell_module(path, "0.75", "0.5")
    st = os.stat(path)
    os.utime(path, (st.st_atime + 10, st.st_mtime + 10))
    calls.clear()
    run(ip, "pass")
    assert len(calls) == 2                       # before the cell too: autoreload reloaded
    calls.clear()
    run(ip, "pass")
    assert len(calls) == 1


if __name__ == "__main__":
    # A mode of the scenario in a process of its own (the warm test's two processes), in a real
    # shell: gpureplace loaded, then autoreload; the module in the folder given.
    from IPython.core.interactiveshell import InteractiveShell
    mode, folder = sys.argv[1], sys.argv[2]
    sys.path.insert(0, folder)
    sys.dont_write_bytecode = True
    shell = InteractiveShell.instance()
    run(shell, "%load_ext gpureplace")
    run(shell, "%load_ext autoreload\n%autoreload 2")
    from pathlib import Path
    same_cell_scenario(shell, Path(folder) / f"{SAME_CELL_MODULE}.py", mode)


DEVMOD = "gr_autoreload_dev_mod"


def test_autoreload_updates_a_device_function_imported_by_name(autoreload):
    """``from mod import dev`` of a ``cuda.jit(device=True)`` function: autoreload knows nothing
    of gpureplace's objects and left the notebook's ``dev`` the old one (its kernels ran the old
    code in every later cell); gpureplace teaches it to update one in place, and the kernels
    calling it run the new code in the very next cell."""
    shell, module_path = autoreload
    path = module_path.parent / f"{DEVMOD}.py"

    def write(factor):
        path.write_text("from gpureplace import cuda\n@cuda.jit(device=True)\n"
                        f"def dev(v):\n    return v * {factor}\n")
    write("2.0")
    try:
        run(shell, f"""
import numpy as np
from {DEVMOD} import dev
from gpureplace import cuda
@cuda.jit
def k_dev(out):
    out[0] = dev(out[0])
a = np.array([1.0]); k_dev[1, 1](a)
""")
        assert shell.user_ns["a"][0] == 2.0
        write("3.0")
        st = os.stat(path)
        os.utime(path, (st.st_atime + 10, st.st_mtime + 10))
        run(shell, "a = np.array([1.0]); k_dev[1, 1](a)")
        assert shell.user_ns["a"][0] == 3.0
        assert holds(shell.user_ns["k_dev"].compile(SIG).ptx, 3.0)
    finally:
        sys.modules.pop(DEVMOD, None)


def test_a_body_edit_after_a_full_reload_of_the_module_is_seen(autoreload):
    """An edit elsewhere in the module (a constant) makes autoreload run the whole module again:
    ``helper`` is then a new function object of the same code, which the kernel's code calls
    from then on.  A later edit of its body alone is patched into that new object in place
    (IPython 9): the kernel must run the new body from the next cell (it kept the old one)."""
    ip, path = autoreload
    module = path.with_name("gr_autoreload_full_then_body.py")
    stamp = [os.stat(path).st_mtime - 100]

    def write(unused, offset):
        module.write_text(f"UNUSED = {unused}\n\ndef helper(v):\n    return v + {offset}\n")
        stamp[0] += 10
        os.utime(module, (stamp[0], stamp[0]))            # (autoreload compares mtimes)

    write(1, "1.25")
    try:
        run(ip, """
import numpy as np
import gr_autoreload_full_then_body as mylib
from gpureplace import cuda
@cuda.jit
def k_body(out):
    out[0] = mylib.helper(out[0])
def launched():
    out = np.ones(1)
    k_body[1, 1](out)
    return float(out[0]), k_body.inspect_ptx("void(float64[::1])")
r, p = launched()
""")
        ns = ip.user_ns
        assert ns["r"] == 2.25 and holds(ns["p"], 1.25)
        write(2, "1.25")                                  # a full reload: an equal copy
        run(ip, "r, p = launched()")
        assert ns["r"] == 2.25
        write(2, "100.5")                                 # the body alone
        run(ip, "pass")
        run(ip, "r, p = launched()")
        assert holds(ns["p"], 100.5) and not holds(ns["p"], 1.25), "the old body's PTX"
        assert ns["r"] == 101.5
    finally:
        sys.modules.pop("gr_autoreload_full_then_body", None)
