"""Every redefinition scenario (tests/redefinition_scenarios.py), run cold, warm from the disk
cache in a new process, and after ``%reload_ext gpureplace``.

A kernel that came from the disk cache, or that was compiled before the extension reloaded, must
notice a redefined helper, constant, device function, kernel, override or module attribute
exactly as a freshly compiled one does.  Each mode runs every scenario in a real IPython shell
in a process of its own (the warm mode in a second process on the cache the first one filled).
"""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("IPython")

from redefinition_scenarios import SCENARIOS  # noqa: E402

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # tests/
_results = {}


def _run(mode, cache_dir, tmp):
    out = os.path.join(tmp, f"{mode}.json")
    env = dict(os.environ, GPUREPLACE_CACHE_DIR=cache_dir, GPUREPLACE_CACHE="1")
    proc = subprocess.run([sys.executable, os.path.join(HERE, "redefinition_scenarios.py"),
                           mode, out], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{mode} run failed:\n{proc.stdout}\n{proc.stderr}"
    with open(out) as fh:
        return json.load(fh)


def results(mode, tmp_path_factory):
    if mode not in _results:
        tmp = str(tmp_path_factory.mktemp(f"modes-{mode}"))
        cache_dir = os.path.join(tmp, "cache")
        if mode == "warm":
            filled = _run("fill", cache_dir, tmp)
            assert all(v is None for v in filled.values()), filled
        _results[mode] = _run(mode, cache_dir, tmp)
    return _results[mode]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("mode", ["cold", "warm", "reload"])
def test_redefinition_scenario(mode, scenario, tmp_path_factory):
    error = results(mode, tmp_path_factory)[scenario]
    assert error is None, f"{scenario} ({mode}):\n{error}"


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["cold", "warm", "reload"])
def test_redefinition_scenarios_launch_the_current_code(mode, tmp_path_factory):
    """On a GPU the scenarios also launch each kernel and check its result (``expect``)."""
    failed = {k: v for k, v in results(mode, tmp_path_factory).items() if v is not None}
    assert not failed, "\n".join(f"{k} ({mode}):\n{v}" for k, v in failed.items())
