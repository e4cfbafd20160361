"""``cuda.jit(debug=True)``: an exception raised in device code (a raise statement, a division
by zero under Python's error model, Numba's tuple index check) stops its thread and is raised on
the host after the launch, with numba-cuda's prefix (function, file, line, thread and block).
Without debug the thread stops and nothing is reported, as in numba-cuda.

CPU: the generated code (the record of the first failing thread, the code map), ptxas, the
simulator's behaviour, the disk cache; GPU: the same launches on the device."""

import os
import warnings

import numpy as np
import pytest

from conftest import assemble, line_of
from gpureplace import cuda
from gpureplace.compiler.exceptions import EXCEPTION_GLOBAL


class MyError(Exception):
    pass


def _raises_user(x):
    if x == 1:
        raise MyError
    elif x == 2:
        raise MyError("foo")


def _divides(r, x, y):
    r[0] = y[0] / x[0]
    r[1] = y[0]


def _tuple_index(ary):
    i = cuda.threadIdx.x
    if cuda.blockIdx.x == 1 and i == 2:
        ary[0] = ary.shape[-i]


def test_debug_kernel_records_the_first_failing_thread_and_maps_its_codes():
    spec = cuda.jit(debug=True, opt=False)(_raises_user).compile("void(int32)")
    assert f".global .align 4 .b8 {EXCEPTION_GLOBAL}[28]" in spec.ptx
    assert "atom" in spec.ptx and "cas.b32" in spec.ptx
    assemble(spec.ptx)
    infos = sorted(spec.exceptions.values(), key=lambda i: i[2][2])
    assert [(exc, args) for exc, args, _ in infos] == [(MyError, None), (MyError, ("foo",))] \
        or [(exc, args) for exc, args, _ in infos] == [(MyError, ()), (MyError, ("foo",))]
    assert [loc[2] for _, _, loc in infos] == [line_of(_raises_user, "raise MyError\n"),
                                               line_of(_raises_user, 'MyError("foo")')]
    # Numba's own raises get the user's statement as their location
    div = cuda.jit(debug=True)(_divides).compile("void(float64[::1], float64[::1], "
                                                 "float64[::1])")
    (exc, args, loc), = div.exceptions.values()
    assert exc is ZeroDivisionError and loc[2] == line_of(_divides, "y[0] / x[0]")
    assemble(div.ptx)


def test_without_debug_there_is_no_record_and_no_zero_division_check():
    sig = "void(float64[::1], float64[::1], float64[::1])"
    spec = cuda.jit(_divides).compile(sig)
    assert EXCEPTION_GLOBAL not in spec.ptx and spec.exceptions == {}
    assert "div.rn.f64" in spec.ptx and "setp.eq.f64" not in spec.ptx
    # with fast math a debug kernel's divisions stay unchecked too (numba-cuda's meaning)
    fast = cuda.jit(debug=True, fastmath=True)(_divides).compile(sig)
    assert not any(exc is ZeroDivisionError for exc, _, _ in fast.exceptions.values())


def test_debug_kernels_are_not_put_in_the_disk_cache(tmp_path, monkeypatch):
    from gpureplace.compiler import diskcache
    monkeypatch.setattr(diskcache, "enabled", True)
    diskcache.set_directory(str(tmp_path))
    try:
        cuda.jit(debug=True)(_divides).compile("void(float64[::1], float64[::1], float64[::1])")
        cuda.jit(_divides).compile("void(float64[::1], float64[::1], float64[::1])")
        kept = [f for _, _, files in os.walk(tmp_path) for f in files if f.endswith(".ptx")]
        assert len(kept) == 1
    finally:
        diskcache.set_directory(None)


@pytest.fixture
def simulator(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")


def test_debug_raise_in_the_simulator(simulator):
    k = cuda.jit("void(int32)", debug=True, opt=False)(_raises_user)
    k[1, 1](0)
    with pytest.raises(MyError, match=r"In function '_raises_user', file .*test_debug_"
                                      r"exceptions.py, line \d+, tid=\[0, 0, 0\] ctaid=\[0, 0, "
                                      r"0\]: foo$"):
        k[1, 1](2)
    r = np.zeros(2)
    with pytest.raises(ZeroDivisionError):
        cuda.jit(debug=True, opt=False)(_divides)[1, 1](r, np.zeros(1), np.ones(1))
    assert r.tolist() == [0.0, 0.0]                       # the thread stopped there
    with np.errstate(divide="ignore"):
        cuda.jit(debug=True, fastmath=True)(_divides)[1, 1](r, np.zeros(1), np.ones(1))
    assert r.tolist() == [np.inf, 1.0]
    # without debug: the thread stops, a warning says so, nothing is raised
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cuda.jit("void(int32)")(_raises_user)[1, 1](2)
    assert any("raised MyError('foo')" in str(w.message) for w in caught)


@pytest.mark.gpu
@pytest.mark.gpu_only
def test_debug_exceptions_on_the_gpu():
    import cupy as cp
    k = cuda.jit("void(int32)", debug=True, opt=False)(_raises_user)
    k[1, 1](0)
    with pytest.raises(MyError) as info:
        k[1, 1](1)
    assert f"line {line_of(_raises_user, 'raise MyError' + chr(10))}, tid=[0, 0, 0] " \
           f"ctaid=[0, 0, 0]" in str(info.value)
    with pytest.raises(MyError, match=r"tid=\[0, 0, 0\] ctaid=\[0, 0, 0\]: foo$"):
        k[1, 1](2)
    k[1, 1](0)                                   # the record was cleared: nothing raised
    # a division by zero stops the thread before its stores (Python's error model)
    r = cp.zeros(2)
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        cuda.jit(debug=True, opt=False)(_divides)[1, 1](r, cp.zeros(1), cp.ones(1))
    assert r.get().tolist() == [0.0, 0.0]
    # Numba's tuple index check, the thread and block named (threadIdx 2 of block 1)
    with pytest.raises(IndexError, match=r"tid=\[2, 0, 0\] ctaid=\[1, 0, 0\]: tuple index out "
                                         r"of range"):
        cuda.jit(debug=True)(_tuple_index)[2, 3](cp.zeros(2))
    # a prepared launch checks too
    launch = k[1, 1].prepare(2)
    with pytest.raises(MyError):
        launch()
    # without debug nothing is raised and the thread simply stops
    cuda.jit("void(int32)")(_raises_user)[1, 1](2)
    cp.cuda.runtime.deviceSynchronize()
