"""``cuda.select_device`` takes what numba-cuda takes: it calls ``int()`` on the device number
(``select_device("0")``), on both backends.  The simulator refused ``"0"`` with a message that
printed it as 0 ("select_device(0): the simulator has one device, 0"), the GPU path with a bare
TypeError from ``0 <= "0"``; what ``int()`` refuses is a TypeError naming the argument."""

import re
import types

import pytest

from gpureplace import cuda, probe
from gpureplace.hostapi import devices


@pytest.fixture
def two_gpus(monkeypatch):
    """The GPU path, with two GPUs, selected through a stand-in for CuPy."""
    used = []
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Device=lambda n: types.SimpleNamespace(use=lambda: used.append(n))))
    monkeypatch.setattr(devices, "simulated", lambda: False)
    monkeypatch.setattr(devices, "cupy", lambda: fake)
    monkeypatch.setattr(probe, "device_count", lambda: 2)
    return used


def test_the_simulator_takes_what_int_takes():
    assert cuda.select_device("0") == cuda.select_device(0.0) == cuda.get_current_device()
    with pytest.raises(ValueError, match=r"^select_device\('1'\): the simulator has one "
                                         r"device, 0$"):
        cuda.select_device("1")


def test_the_gpu_path_takes_what_int_takes(two_gpus):
    assert cuda.select_device("1").id == 1 and cuda.select_device(0.0).id == 0
    assert two_gpus == [1, 0]
    with pytest.raises(ValueError, match=r"^select_device\('2'\): there are 2 GPU\(s\)$"):
        cuda.select_device("2")


@pytest.mark.parametrize("backend", ["simulator", "gpu"])
@pytest.mark.parametrize("device_id", ["zero", None, [0]])
def test_what_int_refuses_is_a_type_error_naming_the_argument(backend, device_id, request):
    if backend == "gpu":
        request.getfixturevalue("two_gpus")
    shown = re.escape(repr(device_id))
    with pytest.raises(TypeError, match=rf"^select_device\({shown}\): a device is chosen by "
                                        rf"its number, an int or what int\(\) takes"):
        cuda.select_device(device_id)
