"""Redefinitions whose new value looked like the old one to the after-cell check: a device
function declaring another signature (its body the same), a helper made positional-only, a float
global turned from nan to -nan.  Each ran the old code."""

import numpy as np


def _cells(shell, *cells):
    for cell in cells:
        result = shell.run_cell(cell)
        assert result.error_in_exec is None, result.error_in_exec
    return shell.user_ns


def test_a_device_functions_declared_signature_changed(shell):
    ns = _cells(shell, "import numpy as np\nfrom gpureplace import cuda\n"
                "@cuda.jit('float32(float32)', device=True)\ndef helper(v):\n    return v * 3.0\n"
                "@cuda.jit\ndef k(out):\n    out[0] = helper(out[0])\n",
                "a = np.array([0.1]); k[1, 1](a)")
    assert ns["a"][0] == np.float64(np.float32(0.1) * np.float32(3.0))
    ns = _cells(shell, "@cuda.jit('float64(float64)', device=True)\ndef helper(v):\n"
                "    return v * 3.0\n", "a = np.array([0.1]); k[1, 1](a)")
    assert ns["a"][0] == 0.1 * 3.0
    assert "cvt.rn.f32.f64" not in ns["k"].inspect_ptx("void(float64[::1])")


def test_a_helper_made_positional_only_is_a_change(shell):
    ns = _cells(shell, "import numpy as np\nfrom gpureplace import cuda\n"
                "def helper(v, c):\n    return v - c\n"
                "@cuda.jit\ndef k(out):\n    out[0] = helper(v=out[0], c=5.0)\n",
                "a = np.ones(1); k[1, 1](a)")
    assert ns["a"][0] == -4.0
    _cells(shell, "def helper(v, /, c):\n    return v - c\n")
    result = shell.run_cell("a = np.ones(1); k[1, 1](a)")
    assert "its signature is helper(v, /, c)" in str(result.error_in_exec)


def test_a_nan_global_whose_sign_changed(shell):
    ns = _cells(shell, "import math, numpy as np\nfrom gpureplace import cuda\n"
                "K = float('nan')\nk32 = np.float32('nan')\n"
                "@cuda.jit\ndef k(out):\n    out[0] = math.copysign(1.0, K)\n"
                "    out[1] = math.copysign(1.0, k32)\n",
                "a = np.zeros(2); k[1, 1](a)")
    assert list(ns["a"]) == [1.0, 1.0]
    ns = _cells(shell, "K = -float('nan')\nk32 = -np.float32('nan')",
                "a = np.zeros(2); k[1, 1](a)")
    assert list(ns["a"]) == [-1.0, -1.0]
    assert "-4616189618054758400" in ns["k"].inspect_ptx("void(float64[::1])")
