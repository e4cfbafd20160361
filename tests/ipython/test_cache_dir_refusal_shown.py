"""A ``GPUREPLACE_CACHE_DIR`` gpureplace refuses (it holds a file of the user's) costs exactly one
warning that the user sees -- also when the background warm-up is the first to find it, where a
warning reaches no cell -- and ``%cuda_cache stats`` says why the disk cache is not used."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("IPython")

MESSAGE = "gpureplace is not using the disk cache directory"

NOTEBOOK = r'''
import json, sys
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from gpureplace.compiler import diskcache
from gpureplace.runtime import prewarm

ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "gpureplace")          # starts the warm-up (GPUREPLACE_PREWARM=1)
assert prewarm.is_started() and prewarm.wait(240)
assert "error" not in prewarm.report(), prewarm.report()
sys.stderr.write("--- warm-up done\n")
cells = ["import numpy as np\nfrom gpureplace import cuda",
         "%cuda_cache stats",
         "@cuda.jit\ndef k(out):\n    out[0] = 1.0\nout = np.zeros(1); k[1, 1](out)",
         "@cuda.jit\ndef k2(out):\n    out[0] = 2.0\nk2[1, 1](out)",
         "%cuda_cache stats"]
shown = []
for src in cells:
    with capture_output() as cap:
        res = ip.run_cell(src, store_history=True)
    assert res.success, res
    shown.append(cap.stdout + cap.stderr)
print(json.dumps({"held": diskcache.directory() in diskcache._held, "cells": shown}))
'''


def user_folder(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir(mode=0o700)
    (folder / "notes.txt").write_text("mine")
    return folder


def run(code, folder, **env):
    """``code`` run as a script file (so that a warning shows the user's line)."""
    script = folder.parent / "script.py"
    script.write_text(code)
    env = dict(os.environ, GPUREPLACE_CACHE_DIR=str(folder), GPUREPLACE_BACKEND="simulator",
               **env)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         timeout=400)
    assert out.returncode == 0, out.stderr
    return out


def test_the_warm_ups_refusal_is_shown_once_in_the_cell_that_compiles(tmp_path):
    folder = user_folder(tmp_path)
    out = run(NOTEBOOK, folder, GPUREPLACE_PREWARM="1")
    before, _, after = out.stderr.partition("--- warm-up done\n")
    assert MESSAGE not in before          # not printed by the warm-up's thread, outside any cell
    assert MESSAGE not in after
    result = json.loads(out.stdout.strip().splitlines()[-1])
    _, stats, first, second, stats_after = result["cells"]
    # the warm-up met the directory first: its warning was held for the user's code
    assert not result["held"]             # ... and has been raised since
    for shown in (stats, stats_after):    # stats say why, before and after the warning
        assert f"disk cache: not used: {folder}: it already holds files" in shown, shown
        assert "notes.txt" in shown and "(on)" not in shown
    # the first kernel's cell shows it, naming the folder and why, pointing at the user's line
    assert first.count(MESSAGE) == 1, first
    assert f"{MESSAGE} {folder}: it already holds files" in first
    assert "gpureplace-cache" in first and "k[1, 1](out)" in first
    assert MESSAGE not in second and MESSAGE not in stats
    assert sorted(os.listdir(folder)) == ["notes.txt"]


SCRIPT = r'''
import sys
import numpy as np
from gpureplace import cuda, prewarm
if WARM:
    assert prewarm.start() is not None and prewarm.wait(240)
    sys.stderr.write("--- warm-up done\n")

@cuda.jit
def k(out):
    out[0] = 1.0

@cuda.jit
def k2(out):
    out[0] = 2.0

out = np.zeros(1)
k[1, 1](out)
k2[1, 1](out)
print(out[0])
'''


@pytest.mark.parametrize("warm", ["0", "1"])
def test_a_script_is_warned_once_with_or_without_the_warm_up(tmp_path, warm):
    folder = user_folder(tmp_path)
    code = f"WARM = {warm}\n" + SCRIPT
    line = code.splitlines().index("k[1, 1](out)") + 1
    out = run(code, folder, GPUREPLACE_PREWARM="1")
    assert out.stdout.split() == ["2.0"]
    assert out.stderr.count(MESSAGE) == 1, out.stderr
    assert f"script.py:{line}: UserWarning" in out.stderr  # at the user's first compile
    assert "k[1, 1](out)" in out.stderr
    if warm == "1":
        assert out.stderr.index("--- warm-up done") < out.stderr.index(MESSAGE)
    assert sorted(os.listdir(folder)) == ["notes.txt"]


def test_stats_say_why_before_anything_used_the_directory(shell, tmp_path, monkeypatch):
    from IPython.utils.capture import capture_output

    from gpureplace.compiler import diskcache
    folder = user_folder(tmp_path)
    monkeypatch.setattr(diskcache, "_explicit_dir", str(folder))
    with capture_output() as cap:
        shell.run_line_magic("cuda_cache", "stats")
    assert f"disk cache: not used: {folder}: it already holds files that are not " \
           f"gpureplace's (notes.txt)" in cap.stdout, cap.stdout
    assert "(on)" not in cap.stdout
    assert diskcache.info()["problem"].startswith("it already holds files")
    # another program's cache directory
    (folder / "notes.txt").unlink()
    (folder / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    assert "another program's CACHEDIR.TAG" in diskcache.info()["problem"]
    # looking changes nothing: an empty folder (made and marked at its first use) is fine
    (folder / "CACHEDIR.TAG").unlink()
    assert diskcache.info()["problem"] is None and os.listdir(folder) == []
    monkeypatch.setattr(diskcache, "_explicit_dir", str(tmp_path / "not-yet"))
    assert diskcache.info()["problem"] is None and not (tmp_path / "not-yet").exists()
    # turned off: stats say so, not a reason of the directory's
    monkeypatch.setattr(diskcache, "_explicit_dir", str(folder))
    (folder / "notes.txt").write_text("mine")
    monkeypatch.setattr(diskcache, "enabled", False)
    with capture_output() as cap:
        shell.run_line_magic("cuda_cache", "stats")
    assert f"bytes in {folder} (off)" in cap.stdout, cap.stdout


def test_cuda_cache_clear_says_why_it_deleted_nothing(shell, tmp_path, monkeypatch):
    """(a warning pointing at a line of IPython's before, not at the magic)"""
    import warnings

    from IPython.utils.capture import capture_output

    from gpureplace.compiler import diskcache
    folder = user_folder(tmp_path)
    monkeypatch.setattr(diskcache, "_explicit_dir", str(folder))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with capture_output() as cap:
            shell.run_line_magic("cuda_cache", "clear")
    assert f"%cuda_cache clear deleted nothing in {folder}" in cap.stderr, cap.stderr
    assert "removed" not in cap.stdout
    assert sorted(os.listdir(folder)) == ["notes.txt"]
