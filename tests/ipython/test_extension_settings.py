"""Loading the extension keeps the settings the process already has (environment variables and
earlier assignments); only what the user configures changes them."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("IPython")

SCRIPT = r'''
import gpureplace
from gpureplace.config import settings
from gpureplace.compiler import diskcache
from IPython.core.interactiveshell import InteractiveShell
settings.fastmath = True                     # set before the extension loads
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "gpureplace")
print(diskcache.enabled, settings.backend, settings.fastmath)
ip.run_line_magic("reload_ext", "gpureplace")
print(diskcache.enabled, settings.backend, settings.fastmath)
ip.run_line_magic("config", "GPUReplace.cache = True")
print(diskcache.enabled)
'''


def test_environment_and_earlier_settings_survive_loading_the_extension():
    env = dict(os.environ, GPUREPLACE_CACHE="0", GPUREPLACE_BACKEND="simulator")
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == ["False simulator True", "False simulator True",
                                          "True"], out.stdout
