"""A read-only array reaching code that writes it through a declared signature is refused at
compile (or launch) time, never run with its writes lost.

A read-only NumPy array given to a kernel is copied to the device typed read-only and not copied
back.  A signature given to cuda.jit that declares a writable array takes a read-only one (a
function that only reads it runs, as numba-cuda users expect), so whether the function writes it
is found out by typing it with that parameter read-only: for a device function at each call
(compiler/resolve.py), for a kernel at the launch (jit/launching.py); namedtuples and tuples
included.  Typing-level checks use ``kernel.compile`` and ``cuda.compile_ptx``; launches run in the
simulator and on the GPU path with a recorder standing in for the driver and CuPy's copies
(test_launch_path.py, test_host_array_refusals.py)."""

import collections
import inspect

import numpy as np
import pytest
from numba import types
from numba.core.errors import TypingError
from numba.core.typing import signature

from gpureplace import LaunchError, cuda
from gpureplace.compiler import frontend
from gpureplace.compiler import ranking
from gpureplace.errors import CompileError

from test_host_array_refusals import fake_copies, sim  # noqa: F401 - the fixtures
from test_launch_path import FakeLoaded, fake_gpu  # noqa: F401 - the fixture

RO = types.Array(types.float32, 1, "A", readonly=True)
RO_C = types.Array(types.float32, 1, "C", readonly=True)
RW = types.float32[:]


def _read_only(values=(0.0, 0.0, 0.0, 0.0)):
    a = np.array(values, np.float32)
    a.flags.writeable = False
    return a


def _line(fn, text):
    """The line of ``fn``'s source that contains ``text``."""
    fn = getattr(fn, "py_func", fn)
    lines, first = inspect.getsourcelines(fn)
    (hit,) = [first + i for i, line in enumerate(lines) if text in line]
    return hit


# -- device functions given signatures -------------------------------------------------------

@cuda.jit("void(float32[:])", device=True)
def writes(a):
    a[0] = 5


@cuda.jit
def calls_writes(a):
    writes(a)


@cuda.jit("float32(float32[:])", device=True)
def reads(a):
    return a[0] + a[1]


@cuda.jit("float32(float32[::1])", device=True)
def reads_contiguous(a):
    return a[2]


@cuda.jit
def calls_reads(a, out):
    out[0] = reads(a)


@cuda.jit
def calls_reads_contiguous(a, out):
    out[0] = reads_contiguous(a)


def test_a_declared_device_function_that_writes_a_read_only_array_is_refused():
    with pytest.raises(CompileError) as info:
        calls_writes.compile((RO,))
    exc = info.value
    assert isinstance(exc, TypingError)             # as numba-cuda code catches it
    assert exc.function == "writes" and exc.chain == ("calls_writes", "writes")
    assert exc.lineno == _line(writes, "a[0] = 5")
    text = str(exc)
    assert text.startswith(f"in writes ({writes.py_func.__code__.co_filename}, line "
                           f"{exc.lineno}): writes writes its parameter 'a', declared "
                           f"float32[:] by its signature, to which calls_writes passes a "
                           f"read-only array (readonly float32[:]): the writes would be lost")
    assert "Cannot modify readonly array" in text
    assert text.endswith("\n  call chain: calls_writes -> writes")
    with pytest.raises(CompileError, match=r"writes writes its parameter 'a'"):
        cuda.compile_ptx(calls_writes.py_func, (RO_C,))
    calls_writes.compile((RW,))                      # a writable array: compiles


def test_a_declared_device_function_that_only_reads_takes_a_read_only_array():
    calls_reads.compile((RO, types.float32[:]))
    calls_reads.compile((RO_C, types.float32[:]))
    # a declared contiguous array takes a read-only contiguous one as well
    calls_reads_contiguous.compile((RO_C, types.float32[:]))
    ptx, _ = cuda.compile_ptx(calls_reads_contiguous.py_func, (RO_C, types.float32[:]))
    assert ".entry" in ptx


def test_a_declared_device_function_writing_a_read_only_array_is_refused_in_the_simulator(
        sim):  # noqa: F811
    a = _read_only()
    with pytest.raises(CompileError, match=r"writes writes its parameter 'a'.*\(calls_writes: "
                                           r"argument 0 \('a'\) is a read-only NumPy array, "
                                           r"typed read-only\)"):
        calls_writes[1, 1](a)
    assert not a.any()
    out = np.zeros(1, np.float32)
    calls_reads[1, 1](_read_only((1, 2, 3, 4)), out)
    assert out[0] == 3
    calls_reads_contiguous[1, 1](_read_only((1, 2, 3, 4)), out)
    assert out[0] == 3
    w = np.zeros(4, np.float32)
    calls_writes[1, 1](w)
    assert w[0] == 5


def test_a_declared_device_function_writing_a_read_only_array_is_refused_on_the_gpu(
        fake_copies):  # noqa: F811
    a = _read_only()
    with pytest.raises(CompileError, match=r"writes writes its parameter 'a'"):
        calls_writes[1, 1](a)
    # refused when the kernel compiled (the read-only array already copied in): nothing was
    # launched, so nothing was lost
    assert fake_copies.log == [("in", 16)]
    assert not any(inst.calls for inst in FakeLoaded.instances)
    del fake_copies.log[:]
    out = np.zeros(1, np.float32)
    calls_reads[1, 1](_read_only((1, 2, 3, 4)), out)
    assert fake_copies.log == [("in", 16), ("in", 4), ("out", 4)]   # the read-only one: in only


# -- the array passed on to another device function --------------------------------------------

@cuda.jit(device=True)
def plain_writes(a):
    a[1] = 2


@cuda.jit("void(float32[:])", device=True)
def declared_passes_to_plain(a):
    plain_writes(a)


@cuda.jit("void(float32[:])", device=True)
def declared_passes_to_declared(a):
    writes(a)


@cuda.jit(device=True)
def plain_passes_to_declared(a):
    writes(a)


@cuda.jit("float32(float32[:])", device=True)
def declared_passes_to_reader(a):
    return reads(a)


@cuda.jit("float32(float32[::1])", device=True)
def contiguous_passes_to_reader(a):
    return reads_contiguous(a) + reads(a)


@cuda.jit
def k_declared_plain(a):
    declared_passes_to_plain(a)


@cuda.jit
def k_declared_declared(a):
    declared_passes_to_declared(a)


@cuda.jit
def k_plain_declared(a):
    plain_passes_to_declared(a)


@cuda.jit
def k_declared_reader(a, out):
    out[0] = declared_passes_to_reader(a)


@cuda.jit
def k_contiguous_reader(a, out):
    out[0] = contiguous_passes_to_reader(a)


@pytest.mark.parametrize("kernel, chain, writer, outer", [
    (k_declared_plain, ("k_declared_plain", "declared_passes_to_plain", "plain_writes"),
     plain_writes, "declared_passes_to_plain writes its parameter 'a' (through plain_writes)"),
    (k_declared_declared, ("k_declared_declared", "declared_passes_to_declared", "writes"),
     writes, "declared_passes_to_declared writes its parameter 'a' (through writes)"),
    (k_plain_declared, ("k_plain_declared", "plain_passes_to_declared", "writes"),
     writes, "writes writes its parameter 'a', declared float32[:] by its signature, to which "
             "plain_passes_to_declared passes"),
], ids=["declared->plain", "declared->declared", "plain->declared"])
def test_a_write_further_down_the_calls_is_found(kernel, chain, writer, outer):
    with pytest.raises(CompileError) as info:
        kernel.compile((RO,))
    exc = info.value
    assert exc.chain == chain
    assert exc.function == writer.py_func.__qualname__
    assert exc.lineno == _line(writer, "] = ")
    assert outer in str(exc)
    assert str(exc).count("Typed read-only") == 1       # said once, where it writes
    assert "Cannot modify readonly array" in str(exc)


def test_a_declared_device_function_passing_a_read_only_array_to_a_reader_compiles(
        sim):  # noqa: F811
    k_declared_reader.compile((RO, RW))
    k_contiguous_reader.compile((RO_C, RW))
    out = np.zeros(1, np.float32)
    k_declared_reader[1, 1](_read_only((4, 5, 0, 0)), out)
    assert out[0] == 9
    k_contiguous_reader[1, 1](_read_only((4, 5, 6, 0)), out)
    assert out[0] == 15


# -- which parameter, which item ---------------------------------------------------------------

@cuda.jit("void(float32[:], float32[:])", device=True)
def copies_first(a, b):
    b[0] = a[0]


@cuda.jit
def k_copies_first(a, b):
    copies_first(a, b)


@cuda.jit("void(UniTuple(float32[:], 2))", device=True)
def writes_second_item(t):
    t[1][0] = 1


@cuda.jit
def k_writes_second_item(t):
    writes_second_item(t)


def test_the_parameter_written_is_named():
    k_copies_first.compile((RO, RW))                 # a: read-only, only read
    with pytest.raises(CompileError, match=r"copies_first writes its parameter 'b', declared "
                                           r"float32\[:\] by its signature"):
        k_copies_first.compile((RW, RO))


def test_a_read_only_array_in_a_tuple_is_refused_only_where_it_is_written(sim):  # noqa: F811
    k_writes_second_item.compile((types.Tuple([RO, RW]),))      # t[0] read-only: not written
    with pytest.raises(CompileError, match=r"writes_second_item writes its parameter 't', "
                                           r"declared UniTuple\(array\(float32, 1d, A\) x 2\) by "
                                           r"its signature, to which k_writes_second_item passes "
                                           r"a read-only array in t\[1\]"):
        k_writes_second_item.compile((types.Tuple([RW, RO]),))
    ro, w = _read_only(), np.zeros(4, np.float32)
    k_writes_second_item[1, 1]((ro, w))
    assert w[0] == 1
    with pytest.raises(CompileError, match=r"in t\[1\].*\(k_writes_second_item: argument 0 "
                                           r"\('t'\) holds a read-only NumPy array in t\[1\]"):
        k_writes_second_item[1, 1]((w, ro))
    assert not ro.any()


# -- found once ------------------------------------------------------------------------------

@cuda.jit("float32(float32[:])", device=True)
def reads_once(a):
    return a[3]


@cuda.jit
def k_reads_once_1(a, out):
    out[0] = reads_once(a)


@cuda.jit
def k_reads_once_2(a, out):
    out[1] = reads_once(a)


def test_whether_a_declared_device_function_writes_is_found_once(monkeypatch):
    compiled = []
    original = frontend._run_front_end

    def front_end(cf, mask, key):
        compiled.append((cf.pyfunc, tuple(cf.argtypes)))
        return original(cf, mask, key)
    monkeypatch.setattr(frontend, "_run_front_end", front_end)
    for kernel in (k_reads_once_1, k_reads_once_2):
        kernel.compile((RO, RW))
        kernel.compile((RO_C, RW))
    checks = [args for fn, args in compiled if fn is reads_once.py_func]
    assert checks.count((RW,)) <= 1           # the declared one (maybe compiled earlier)
    assert checks.count((RO,)) == 1           # typed read-only once, for all the callers


# -- kernels given signatures, namedtuples -----------------------------------------------------

Pair = collections.namedtuple("Pair", ["x", "y"])
PAIR = types.NamedUniTuple(RW, 2, Pair)


@cuda.jit(signature(types.void, PAIR))
def declared_writes_field(p):
    p.x[0] = 5


@cuda.jit(signature(types.void, PAIR))
def declared_copies_field(p):
    p.y[0] = p.x[1]


@cuda.jit
def plain_writes_field(p):
    p.x[0] = 5


@cuda.jit("void(float32[:])")
def declared_kernel_calls_writes(a):
    declared_passes_to_declared(a)


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
def test_a_declared_kernel_writing_a_read_only_namedtuple_field_is_refused(backend, request):
    fake = request.getfixturevalue("sim" if backend == "sim" else "fake_copies")
    x, y = _read_only(), np.zeros(4, np.float32)
    with pytest.raises(LaunchError, match=r"declared_writes_field: argument 0 \('p'\) holds a "
                                          r"read-only NumPy array, which the kernel writes "
                                          r"\(p\.x; its signature declares Pair\(array\(float32, "
                                          r"1d, A\) x 2\)\).*Cannot modify readonly array"):
        declared_writes_field[1, 1](Pair(x, y))
    assert not x.any()
    if backend == "gpu":                      # refused before anything was copied or launched
        assert not fake.log and not any(inst.calls for inst in FakeLoaded.instances)


def test_a_declared_kernel_reading_a_read_only_namedtuple_field_runs_on_the_gpu(
        fake_copies):  # noqa: F811
    x, y = _read_only((1, 2, 3, 4)), np.zeros(4, np.float32)
    declared_copies_field[1, 1](Pair(x, y))
    # x copied in only (read-only), y in and back
    assert fake_copies.log == [("in", 16), ("in", 16), ("out", 16)]
    (inst,) = FakeLoaded.instances
    assert inst.spec.argtypes == (PAIR,) and len(inst.calls) == 1


def test_a_declared_kernel_reading_a_read_only_namedtuple_field_runs_in_the_simulator(
        sim):  # noqa: F811
    """The simulator passes a declared namedtuple as one (the kernel reads its fields by name;
    it was made a plain tuple: 'tuple' object has no attribute 'x')."""
    x, y = _read_only((1, 2, 3, 4)), np.zeros(4, np.float32)
    declared_copies_field[1, 1](Pair(x, y))
    assert y.tolist() == [2, 0, 0, 0] and x.tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
def test_a_kernel_writing_a_read_only_namedtuple_field_is_refused(backend, request):
    request.getfixturevalue("sim" if backend == "sim" else "fake_copies")
    x, y = _read_only(), np.zeros(4, np.float32)
    with pytest.raises(CompileError) as info:
        plain_writes_field[1, 1](Pair(x, y))
    text = str(info.value)
    where = (plain_writes_field.py_func.__code__.co_filename,
             _line(plain_writes_field, "p.x[0] = 5"))
    assert text.startswith("in plain_writes_field (%s, line %d): Cannot modify readonly array"
                           % where)
    assert "(plain_writes_field: argument 0 ('p') holds a read-only NumPy array in p.x, typed " \
           "read-only: what the kernel writes could not be copied back into it; pass a " \
           "writable array (a.copy()), or cuda.In(a) for a copy the kernel may write)" in text
    assert not x.any()
    if backend == "gpu":
        assert not any(inst.calls for inst in FakeLoaded.instances)


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
def test_a_declared_kernel_whose_declared_callee_writes_a_read_only_array_is_refused(
        backend, request):
    request.getfixturevalue("sim" if backend == "sim" else "fake_copies")
    a = _read_only()
    with pytest.raises(LaunchError, match=r"declared_kernel_calls_writes: argument 0 \('a'\) is a "
                                          r"read-only NumPy array, which the kernel writes.*"
                                          r"declared_passes_to_declared writes its parameter "
                                          r"'a' \(through writes\)"):
        declared_kernel_calls_writes[1, 1](a)
    assert not a.any()


# -- the rules themselves ----------------------------------------------------------------------

def test_the_read_only_type_a_declared_parameter_is_checked_with():
    rank = ranking.conversion_rank          # read-only or not: one layout converts exactly
    assert rank(RO_C, types.float32[::1]) == rank(types.float32[::1], RO_C) == ranking.EXACT
    read_only_as, places = ranking.read_only_as, ranking.read_only_places
    assert read_only_as(RO_C, RW) == RO
    assert read_only_as(RW, RW) is None and read_only_as(RO, RO) is None
    given = types.NamedTuple([RO_C, types.float32[::1]], Pair)
    assert read_only_as(given, PAIR) == types.NamedTuple([RO, RW], Pair)
    assert places(given, PAIR, "p") == ["p.x"]
    assert places(types.UniTuple(RO, 2), types.UniTuple(RW, 2), "t") == ["t[0]", "t[1]"]
