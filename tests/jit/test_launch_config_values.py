"""The values a launch configuration takes: ints and integer-like values (NumPy's) in every
position, lists as tuples (as numba-cuda takes them), and floats and bools refused whether or
not an equal configuration of ints was launched before (the kernel keeps a Launcher per
configuration, and 4.0 == 4, True == 1 as keys).  On the GPU launch path with a recording
stand-in driver (test_launch_path.py's ``fake_gpu``) and on the simulator."""

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.errors import LaunchError

from test_binder import ndarray
from test_launch_path import fake_gpu  # noqa: F401  (the fixture)


def _kernel():
    ns = {"cuda": cuda}
    exec("@cuda.jit\ndef k(x):\n    i = cuda.grid(1)\n    if i < x.size:\n        x[i] = 1\n", ns)
    return ns["k"]


def _all_ints(call):
    grid, block, shared, stream, _ = call
    return all(type(v) is int for v in (*grid, *block, shared, stream))


@pytest.mark.parametrize("config, grid, block", [
    (((np.int64(4),), (np.int32(32),)), (4, 1, 1), (32, 1, 1)),
    ((np.int64(4), 32), (4, 1, 1), (32, 1, 1)),
    ((4, np.uint16(32)), (4, 1, 1), (32, 1, 1)),
    (((np.int64(2), 3), (np.int8(8), np.uint8(4))), (2, 3, 1), (8, 4, 1)),
    (((2, 3, np.int32(2)), (8, 4, 1)), (2, 3, 2), (8, 4, 1)),
])
def test_numpy_integers_are_taken_for_the_grid_and_block(fake_gpu, config, grid, block):  # noqa: F811
    k = _kernel()
    x = ndarray((10,), np.int32, ptr=0x5000)
    k[config](x)
    k[config](x)                                   # the kept Launcher (and the fast path)
    calls = fake_gpu[0].calls
    assert [c[:2] for c in calls] == [(grid, block)] * 2
    assert all(_all_ints(c) for c in calls)       # the driver gets Python ints


def test_numpy_integers_are_taken_for_the_stream_and_shared_memory(fake_gpu):  # noqa: F811
    k = _kernel()
    x = ndarray((10,), np.int32, ptr=0x5000)
    configured = k[np.int64(2), np.int32(32), np.int64(9), np.uint32(16)]
    assert (configured.stream, configured.shared) == (9, 16)
    assert type(configured.stream) is int and type(configured.shared) is int
    configured(x)
    k[2, 32, 9, 16](x)
    assert [c[:4] for c in fake_gpu[0].calls] == [((2, 1, 1), (32, 1, 1), 16, 9)] * 2
    assert all(_all_ints(c) for c in fake_gpu[0].calls)


def test_an_integer_like_configuration_shares_the_launcher_of_its_ints():
    k = _kernel()
    assert k[np.int64(4), 32] is k[4, 32]
    assert k[(np.int64(4), 1), (16, np.int32(16))] is k[(4, 1), (16, 16)]
    assert k[4, 32, np.int64(0), np.int64(8)] is k[4, 32, 0, 8]


def test_lists_are_taken_as_tuples_as_numba_cuda_takes_them(fake_gpu):  # noqa: F811
    k = _kernel()
    x = ndarray((10,), np.int32, ptr=0x5000)
    k[[4, 1], [32, 1]](x)
    k[[4, 1], [32, 1]](x)
    k[[np.int64(4)], (32,)](x)
    assert [c[:2] for c in fake_gpu[0].calls] == [((4, 1, 1), (32, 1, 1))] * 3
    assert k[[4, 1], [32, 1]] is k[(4, 1), (32, 1)]          # kept under its tuple
    # the whole configuration as one list, as numba-cuda's __getitem__ takes it
    k[[4, 32]](x)
    assert k[[4, 32]] is k[4, 32] and fake_gpu[0].calls[-1][:2] == ((4, 1, 1), (32, 1, 1))
    with pytest.raises(LaunchError, match=r"k\[\[4, 1\.5\], 32\]: grid must be an int or a "
                                          r"tuple of 1 to 3 ints, got \[4, 1\.5\]: its y "
                                          r"dimension is 1\.5 \(a float\)"):
        k[[4, 1.5], 32]


# (a configuration refused, the equal one of ints, what the message says)
REFUSED = [
    ((4.0, 32), (4, 32), r"k\[4\.0, 32\]: grid must be an int or a tuple of 1 to 3 ints, got "
                         r"4\.0 \(a float\)"),
    ((np.float64(4), 32), (4, 32), r"grid must be .* \(a float64\)"),
    ((True, 32), (1, 32), r"k\[True, 32\]: grid must be .* got True \(a bool\)"),
    ((np.True_, 32), (1, 32), r"grid must be .* \(a bool\)"),
    ((4, 32.0), (4, 32), r"block must be .* got 32\.0 \(a float\)"),
    (((4.0, 1), 32), ((4, 1), 32), r"grid must be .* its x dimension is 4\.0 \(a float\)"),
    ((4, (32, True)), (4, (32, 1)), r"block must be .* its y dimension is True \(a bool\)"),
    ((4, (16, 2.0)), (4, (16, 2)), r"block must be .* its y dimension is 2\.0"),
    ((4, 32, 0.0), (4, 32, 0), r"k\[4, 32, 0\.0\]: stream must be .* got 0\.0 \(a float\)"),
    ((4, 32, False), (4, 32, 0), r"stream must be .* got False \(a bool\)"),
    ((4, 32, 0, 16.0), (4, 32, 0, 16), r"k\[4, 32, 0, 16\.0\]: dynamic shared memory must be "
                                       r"a non-negative int of bytes, got 16\.0 \(a float\)"),
    ((4, 32, None, True), (4, 32, None, 1), r"dynamic shared memory .* got True \(a bool\)"),
]


@pytest.mark.parametrize("bad, good, message", REFUSED)
def test_floats_and_bools_are_refused_before_and_after_an_equal_int_launch(bad, good, message):
    k = _kernel()
    x = np.zeros(10, np.int32)
    with pytest.raises(LaunchError, match=message):
        k[bad](x)
    k[good](x)                                    # kept: bad equals (and hashes as) good
    assert bad == good and hash(bad) == hash(good)
    with pytest.raises(LaunchError, match=message):
        k[bad](x)
    with pytest.raises(LaunchError, match=message):
        k[bad]


def test_same_kinds_tells_ints_and_integer_likes_from_floats_and_bools():
    from gpureplace.jit.launcher import same_kinds
    assert same_kinds((4, 32)) and same_kinds(((4, 1), (8, 8, 1), None, 0))
    assert same_kinds((np.int64(4), (np.int32(8), 2), np.int64(0), np.uint8(1)))
    for bad in [(4.0, 32), (4, True), ((4, 1.0), 32), ((4, 1, 1), (8, 8, 1.0)),
                (4, 32, 0.0), (4, 32, False), (4, 32, 0, 1.0), (4, 32, None, True)]:
        assert not same_kinds(bad), bad


def test_a_device_function_is_still_refused_a_launch_configuration():
    @cuda.jit(device=True)
    def dev(x):
        return x

    with pytest.raises(TypeError, match="device function"):
        dev[[1], [1]]


def test_the_simulator_runs_integer_like_and_list_configurations():
    k = _kernel()
    x = np.zeros(40, np.int32)
    k[[np.int64(2)], [np.int32(8), 1]](x)
    assert x.tolist() == [1] * 16 + [0] * 24
    k[np.int64(5), np.int64(8), np.int64(0), np.int64(0)](x)
    assert x.tolist() == [1] * 40
