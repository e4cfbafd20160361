"""``settings.fastmath`` and ``settings.default_context`` (``%config GPUReplace.fastmath`` /
``.default_context``) reach the next launch of a kernel already launched: before, a cached
launch entry (keyed by argument types and device) kept running the code compiled before the
change on the GPU, while reflection said the new options.  Now the change moves the world, and
the launch compiles (or finds) the code for the setting; setting it back finds the first code."""

import math

import numpy as np

from gpureplace import Context, cuda
from gpureplace.config import settings
from test_binder import ndarray
from test_launch_path import FakeLoaded, fake_gpu  # noqa: F401 - the fixture


def _kernel():
    @cuda.jit
    def root(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = math.sqrt(x[i])
    return root


def test_settings_fastmath_reaches_a_kernel_already_launched(fake_gpu, monkeypatch):  # noqa: F811
    monkeypatch.setattr(settings, "fastmath", False)
    k, x = _kernel(), ndarray((64,), np.float32, ptr=0x5000)
    k[2, 32](x)
    k[2, 32](x)                                    # (the fast path installed)
    assert len(fake_gpu) == 1 and "sqrt.rn.f32" in fake_gpu[0].spec.ptx
    settings.fastmath = True
    k[2, 32](x)
    assert len(fake_gpu) == 2
    assert fake_gpu[1].spec.options.fastmath and "sqrt.approx" in fake_gpu[1].spec.ptx
    assert fake_gpu[1].calls                       # the new code is what launched
    settings.fastmath = False
    k[2, 32](x)
    assert fake_gpu[-1].spec is fake_gpu[0].spec and fake_gpu[-1].calls   # the first code


def test_settings_default_context_reaches_a_kernel_already_launched(fake_gpu,  # noqa: F811
                                                                    monkeypatch):
    monkeypatch.setattr(settings, "default_context", None)
    other = Context("settings_reach_launches")

    @other.override(math.cos)
    def five(v):
        return 5.0

    @cuda.jit
    def cosine(x):
        x[0] = math.cos(0.0)

    x = ndarray((1,), np.float64, ptr=0x5000)
    cosine[1, 1](x)
    cosine[1, 1](x)
    assert len(fake_gpu) == 1 and fake_gpu[0].spec.context is not other
    settings.default_context = other
    cosine[1, 1](x)
    assert fake_gpu[-1].spec.context is other
    assert "4617315517961601024" in fake_gpu[-1].spec.ptx          # 5.0 stored
    settings.default_context = None
    cosine[1, 1](x)
    assert fake_gpu[-1].spec.context is not other
    assert "4607182418800017408" in fake_gpu[-1].spec.ptx          # cos(0) = 1.0 again


def test_a_misspelt_or_mistyped_setting_is_refused():
    """``settings.fastmat = True`` did nothing, silently; a flag given "yes" was kept as a
    string (true, whatever it said)."""
    import pytest
    with pytest.raises(AttributeError, match=r"settings has no option 'fastmat'; its options "
                                             r"are .*fastmath"):
        settings.fastmat = True
    assert not hasattr(settings, "fastmat")
    with pytest.raises(TypeError, match=r"settings.low_occupancy_warnings must be True or "
                                        r"False, got 'no'"):
        settings.low_occupancy_warnings = "no"
    before = settings.verbose
    try:
        settings.verbose = np.bool_(True)
        assert settings.verbose is True
    finally:
        settings.verbose = before


def test_low_occupancy_warnings_turned_on_reach_configurations_used_before(monkeypatch):
    """The warning is given where a configuration is checked, once per kernel and
    configuration: one used before the setting was turned on never warned."""
    import warnings
    from gpureplace.jit.launcher import LowOccupancyWarning
    monkeypatch.setattr(settings, "backend", "simulator")
    monkeypatch.setattr(settings, "low_occupancy_warnings", False)
    k, x = _kernel(), np.ones(32, np.float32)
    k[1, 32](x)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        settings.low_occupancy_warnings = True
        k[1, 32](x)
        k[1, 32](x)                                  # (once per configuration)
    assert [type(w.message) for w in seen] == [LowOccupancyWarning]
    assert "Grid size 1 of _kernel.<locals>.root[1, 32]" in str(seen[0].message)
