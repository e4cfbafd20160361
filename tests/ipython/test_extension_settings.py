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
ip.run_line_magic("config", "GPUReplace.cuda_array_interface_sync = True")
print(settings.cuda_array_interface_sync)     # (GPUREPLACE_CAI_SYNC=0 made the default False)
'''


def test_environment_and_earlier_settings_survive_loading_the_extension():
    env = dict(os.environ, GPUREPLACE_CACHE="0", GPUREPLACE_BACKEND="simulator",
               GPUREPLACE_CAI_SYNC="0")
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:4] == ["False simulator True", "False simulator True",
                                          "True", "True"], out.stdout


LOW_OCCUPANCY = r'''
import warnings
from gpureplace import cuda
from gpureplace.config import settings
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "gpureplace")
print(settings.low_occupancy_warnings)            # the environment's, kept
ip.run_line_magic("config", "GPUReplace.low_occupancy_warnings = False")
print(settings.low_occupancy_warnings)

@cuda.jit
def k(x):
    x[0] = 1

with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    k[1, 32]
    ip.run_line_magic("config", "GPUReplace.low_occupancy_warnings = True")
    k[2, 32]
print([str(w.message).split(" of ")[0] for w in seen])
print(str(seen[-1].message).split("(")[-1])       # how to silence it, said as a notebook sets it
'''


def test_the_low_occupancy_warning_follows_the_environment_and_config():
    env = dict(os.environ, GPUREPLACE_BACKEND="simulator",
               NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS="1")
    env.pop("GPUREPLACE_LOW_OCCUPANCY_WARNINGS", None)
    out = subprocess.run([sys.executable, "-c", LOW_OCCUPANCY], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:4] == [
        "True", "False", "['Grid size 2']",
        "%config GPUReplace.low_occupancy_warnings = False silences this)"], out.stdout
