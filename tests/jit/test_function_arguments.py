"""A function passed to a kernel (``kapply[1, 1](devfn, out)``) is refused as numba-cuda refuses
it, but said for what it is, with what works instead: calling the function by its name, a number
choosing among functions, or a device function taking a function from the kernel (which works:
tests/lang/test_lang_atomics_warp.py)."""

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.runtime.arguments import ArgumentError


@cuda.jit(device=True)
def op(v):
    return v * 2.0


@cuda.jit
def twice(x):
    x[0] = 2.0 * x[0]


def plain(v):
    return v + 1.0


@cuda.jit
def kapply(f, out):
    out[0] = f(out[0])


@cuda.jit(device=True)
def apply(f, v):
    return f(v)


@cuda.jit
def kapply_named(out):
    out[0] = apply(op, out[0])


@pytest.mark.parametrize("value, what", [(op, "the device function op"),
                                         (twice, "the cuda.jit function twice"),
                                         (plain, "the Python function plain")])
def test_a_function_passed_to_a_kernel_is_said_for_what_it_is(value, what):
    with pytest.raises(ArgumentError) as info:
        kapply[1, 1](value, np.ones(1))
    text = str(info.value)
    assert text.startswith(f"kapply: argument 0 ('f') is {what}: kernels cannot take "
                           f"functions as arguments (numba-cuda neither)"), text
    name = what.rsplit(" ", 1)[1]
    assert f"call {name}(...) in the kernel by its name" in text
    assert f"pass {name} from the kernel to a device function that takes a function" in text
    assert "GPUFunction" not in text and "which kernels cannot take (arrays" not in text


def test_other_values_keep_the_general_message():
    with pytest.raises(ArgumentError, match="has type builtins.object, which kernels cannot "
                                            "take \\(arrays"):
        kapply[1, 1](object(), np.ones(1))


def test_a_device_function_taking_a_function_from_the_kernel_works():
    out = np.ones(1)
    kapply_named[1, 1](out)
    assert out[0] == 2.0
