"""Arguments that the GPU launch path and the simulator must take, or refuse, alike:

1. a ``__cuda_array_interface__`` marked read-only (``data: (ptr, True)``) is a read-only array
   on both (numba-cuda's ``_typeof_cuda_array_interface``): a kernel that writes it does not
   compile;
2. a record of a read-only structured array: a kernel that only reads it runs (nothing is
   copied back into the array), one that writes it is refused by name, never a raw
   "assignment destination is read-only";
3. a malformed ``__cuda_array_interface__`` is refused before it is read, naming the kernel's
   argument and what is wrong;
4. a bad item of a tuple argument is named as the item (``t[1]``), not as the whole argument.

The GPU path runs on the CPU with test_launch_path.py's stand-in driver (``fake_gpu``) and
test_host_array_refusals.py's stand-in copies; the simulator runs as it does everywhere.
"""

import collections
import ctypes

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.config import settings
from gpureplace.errors import CompileError, LaunchError
from gpureplace.runtime import arguments

from test_host_array_refusals import _run_on_device, fake_copies  # noqa: F401 - fixtures
from test_launch_path import FakeLoaded, fake_gpu  # noqa: F401 - the fixture


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


class Interface:
    """A device array of another library: only its ``__cuda_array_interface__``."""

    def __init__(self, **desc):
        self.__cuda_array_interface__ = desc

    @property
    def dtype(self):                    # (as CuPy's: what cuda.as_vectors asks first)
        return np.dtype(self.__cuda_array_interface__["typestr"])


def _interface(ptr=0x7F0000, readonly=False, **changes):
    desc = {"shape": (4,), "typestr": "<f8", "data": (ptr, readonly), "strides": None,
            "version": 3}
    desc.update(changes)
    return Interface(**{k: v for k, v in desc.items() if v is not _DROP})


_DROP = object()


@cuda.jit
def write_first(a):
    a[0] = 1.0


@cuda.jit
def read_first(a, out):
    out[0] = a[0]


# -- 1. a read-only __cuda_array_interface__ ------------------------------------------------


def test_the_gpu_path_keys_a_read_only_interface_read_only():
    key, values = arguments.value_key(_interface(readonly=True))
    assert key[0] == "roarray" and values == (0x7F0000, 4)
    ty = arguments.numba_type_of_key(key)
    assert not ty.mutable and str(ty) == "readonly array(float64, 1d, C)"
    key, _ = arguments.value_key(_interface(readonly=False))       # writable: as before
    assert key[0] == "array" and arguments.numba_type_of_key(key).mutable


def test_a_read_only_interface_is_read_only_on_the_gpu_path(fake_gpu):  # noqa: F811
    with pytest.raises(CompileError, match="Cannot modify readonly array"):
        write_first[1, 1](_interface(readonly=True))
    assert not fake_gpu                                  # nothing loaded, nothing launched
    out = Interface(shape=(1,), typestr="<f8", data=(0x8000, False), version=3)
    read_first[1, 1](_interface(readonly=True), out)     # read only: launched
    assert [str(t) for t in fake_gpu[0].spec.argtypes] == [
        "readonly array(float64, 1d, C)", "array(float64, 1d, C)"]
    write_first[1, 1](_interface(readonly=False))        # writable: compiles
    assert fake_gpu[1].calls[0][4] == (0x7F0000, 4)


def test_a_read_only_interface_is_read_only_in_the_simulator(sim):
    d = cuda.to_device(np.zeros(4))
    ptr = d.__cuda_array_interface__["data"][0]
    with pytest.raises(CompileError, match="Cannot modify readonly array"):
        write_first[1, 1](_interface(ptr, readonly=True))
    assert (d.copy_to_host() == 0).all()
    out = np.zeros(1)
    d[0] = 5.0
    read_first[1, 1](_interface(ptr, readonly=True), out)
    assert out[0] == 5.0


@cuda.jit
def write_vector(v):
    v[0] = cuda.float32x2(1.0, 2.0)


def test_vectors_of_a_read_only_interface_are_read_only_on_both(sim):
    """``cuda.as_vectors`` of a read-only interface: read-only vectors (the GPU path took the
    read-only key for no device array at all)."""
    key, _ = arguments.value_key(cuda.as_vectors(
        _interface(typestr="<f4", readonly=True), 2))
    assert not arguments.numba_type_of_key(key).mutable
    key, _ = arguments.value_key(cuda.as_vectors(_interface(typestr="<f4"), 2))
    assert arguments.numba_type_of_key(key).mutable
    d = cuda.to_device(np.zeros(4, np.float32))
    ptr = d.__cuda_array_interface__["data"][0]
    with pytest.raises(CompileError, match="readonly"):
        write_vector[1, 1](cuda.as_vectors(_interface(ptr, typestr="<f4", readonly=True), 2))
    write_vector[1, 1](cuda.as_vectors(_interface(ptr, typestr="<f4"), 2))
    assert list(d.copy_to_host()) == [1.0, 2.0, 0.0, 0.0]


# -- 2. a record of a read-only structured array ---------------------------------------------

_REC = np.dtype([("a", np.int32), ("b", np.float64)], align=True)


def _records(writable):
    recs = np.ones(3, _REC)
    recs.flags.writeable = writable
    return recs


@cuda.jit
def read_b(r, out):
    out[0] = r.b


@cuda.jit
def write_b(r, out):
    out[0] = r.b
    r.b = 2.5


@cuda.jit
def write_in_tuple(t, out):
    out[0] = t[1]
    t[0].a = 7


@cuda.jit
def write_both(w, r):
    w.b = 3.0
    r.b = 4.0


def test_a_read_only_record_that_the_kernel_reads_runs_in_the_simulator(sim):
    recs, out = _records(False), np.zeros(1)
    read_b[1, 1](recs[0], out)
    assert out[0] == 1.0 and recs[0]["b"] == 1.0


def test_a_read_only_record_that_the_kernel_writes_is_refused_in_the_simulator(sim):
    recs, out = _records(False), np.zeros(1)
    with pytest.raises(arguments.ArgumentError,
                       match=r"^write_b: argument 0 \('r'\) is a record of a read-only NumPy "
                             r"array, which the kernel wrote \(field 'b'\): nothing can be "
                             r"copied back"):
        write_b[1, 1](recs[0], out)
    # a failed launch: host memory as it was (the record, the host array the kernel wrote)
    assert recs[0]["b"] == 1.0 and out[0] == 0.0
    with pytest.raises(arguments.ArgumentError,
                       match=r"^write_in_tuple: argument 0 \('t'\), item t\[0\], is a record "
                             r"of a read-only NumPy array, which the kernel wrote \(field 'a'\)"):
        write_in_tuple[1, 1]((recs[1], 3.0), out)
    assert recs[1]["a"] == 1
    writable = _records(True)
    with pytest.raises(arguments.ArgumentError, match=r"argument 1 \('r'\) is a record of a "
                                                      r"read-only NumPy array"):
        write_both[1, 1](writable[0], recs[2])
    assert writable[0]["b"] == 1.0 and recs[2]["b"] == 1.0      # nothing copied back
    write_b[1, 1](writable[0], out)                      # writable: written back, as before
    assert writable[0]["b"] == 2.5 and out[0] == 1.0


def _write_record_field(field_offset, value, params=(0,)):
    """A stand-in kernel body: writes float64 ``value`` at ``field_offset`` of the records its
    parameters ``params`` point to (the launch's device copies)."""
    def body(values):
        for p in params:
            ctypes.c_double.from_address(values[p] + field_offset).value = value
    return body


def test_records_of_read_only_arrays_on_the_gpu_path(fake_copies, monkeypatch):  # noqa: F811
    recs, out = _records(False), _interface(shape=(1,), data=(0x8000, False))
    read_b[1, 1](recs[0], out)                           # read only: no raw ValueError
    assert recs[0]["b"] == 1.0
    offset = _REC.fields["b"][1]
    with monkeypatch.context() as m:
        _run_on_device(m, _write_record_field(offset, 2.5))
        with pytest.raises(arguments.ArgumentError,
                           match=r"^write_b: argument 0 \('r'\) is a record of a read-only "
                                 r"NumPy array, which the kernel wrote \(field 'b'\)"):
            write_b[1, 1](recs[0], out)
        assert recs[0]["b"] == 1.0
        writable = _records(True)
        write_b[1, 1](writable[0], out)                  # writable: copied back
        assert writable[0]["b"] == 2.5
    with monkeypatch.context() as m:
        _run_on_device(m, _write_record_field(offset, 4.0, params=(0, 1)))
        with pytest.raises(arguments.ArgumentError, match=r"argument 1 \('r'\) is a record of "
                                                          r"a read-only NumPy array"):
            write_both[1, 1](writable[0], recs[2])
        assert writable[0]["b"] == 2.5 and recs[2]["b"] == 1.0     # nothing copied back


def test_the_gpu_path_names_a_record_inside_a_tuple():
    from numba.core import types
    from numba.np import numpy_support
    rec = numpy_support.from_dtype(_REC)
    Pair = collections.namedtuple("Pair", "x y")
    argtypes = (types.float64, types.Tuple((types.float64, rec)), rec,
                types.BaseTuple.from_types([rec, types.int64], Pair))
    assert arguments.record_places("k", ["s", "t", "r", "p"], argtypes) == [
        "k: argument 1 ('t'), item t[1],", "k: argument 2 ('r')", "k: argument 3 ('p'), item p.x,"]


# -- 3. a malformed __cuda_array_interface__ -------------------------------------------------

_MALFORMED = [
    (dict(typestr=_DROP), r"has a __cuda_array_interface__ without 'typestr'"),
    (dict(shape=_DROP), r"has a __cuda_array_interface__ without 'shape'"),
    (dict(data=_DROP), r"has a __cuda_array_interface__ without 'data'"),
    (dict(typestr="<x8"), r"whose 'typestr' '<x8' is not a NumPy type string"),
    (dict(typestr="|O"), r"whose 'typestr' '\|O' describes Python objects"),
    (dict(typestr=7), r"whose 'typestr' is 7, not a NumPy type string"),
    (dict(typestr=["<f8"]), r"whose 'typestr' is \['<f8'\], not a NumPy type string"),
    (dict(typestr="|V8"), r"whose 'typestr' '\|V8' is dtype \|V8, which kernels cannot take"),
    (dict(strides=(8, 8)), r"whose 'strides' \(8, 8\) has 2 entries for the 1 dimensions"),
    (dict(strides="x"), r"whose 'strides' is 'x', not None or a tuple of ints"),
    (dict(shape=(4, -1)), r"whose 'shape' is \(4, -1\), not a tuple of non-negative ints"),
    (dict(shape=4), r"whose 'shape' is 4, not a tuple"),
    (dict(data=0x7F0000), r"whose 'data' is 8323072, not \(address, read-only flag\)"),
    (dict(data=("x", False)), r"whose 'data' is \('x', False\), not \(address"),
]


def test_a_well_formed_interface_in_other_spellings_is_taken():
    """Lists, NumPy integers, strides given, a None address (an empty array): as before."""
    key, values = arguments.value_key(_interface(shape=[np.int64(2), 3], strides=(48, 16),
                                                 data=[0x9000, np.False_]))
    assert key == ("array", np.dtype("<f8"), 2, "A") and values == (0x9000, 2, 3, 48, 16)
    key, values = arguments.value_key(_interface(shape=(0,), data=(None, False)))
    assert key == ("array", np.dtype("<f8"), 1, "C") and values == (0, 0)
    dt = [("a", "<i4"), ("b", "<f4")]
    key, _ = arguments.value_key(_interface(typestr="|V8", descr=dt))
    assert key[1] == np.dtype(dt)


class NotADict:
    __cuda_array_interface__ = [("shape", (4,))]


def _malformed(changes):
    return _interface(**changes)


@pytest.mark.parametrize("changes,said", _MALFORMED)
def test_the_gpu_path_checks_the_interface(changes, said):
    with pytest.raises(arguments.ArgumentError, match=said):
        arguments.value_key(_malformed(changes))


@pytest.mark.parametrize("changes,said", _MALFORMED)
def test_a_malformed_interface_is_refused_by_name_on_the_gpu_path(fake_gpu, changes,  # noqa: F811
                                                                   said):
    with pytest.raises(arguments.ArgumentError, match=r"^write_first: argument 0 \('a'\) .*"
                                                      + said):
        write_first[1, 4](_malformed(changes))
    assert not fake_gpu


@pytest.mark.parametrize("changes,said", _MALFORMED)
def test_a_malformed_interface_is_refused_by_name_in_the_simulator(sim, changes, said):
    with pytest.raises(arguments.ArgumentError, match=r"^write_first: argument 0 \('a'\) .*"
                                                      + said):
        write_first[1, 4](_malformed(changes))


def test_an_interface_that_is_not_a_dict_is_refused_on_both(fake_gpu, monkeypatch):  # noqa: F811
    said = (r"^write_first: argument 0 \('a'\) has a __cuda_array_interface__ that is a list, "
            r"not a dict")
    with pytest.raises(arguments.ArgumentError, match=said):
        write_first[1, 4](NotADict())
    monkeypatch.setattr(settings, "backend", "simulator")
    with pytest.raises(arguments.ArgumentError, match=said):
        write_first[1, 4](NotADict())


def test_an_interface_in_a_tuple_is_named_as_the_item(sim):
    with pytest.raises(arguments.ArgumentError,
                       match=r"^first_of: argument 0 \('t'\), item t\[1\], has a "
                             r"__cuda_array_interface__ without 'typestr'"):
        first_of[1, 1]((1.0, _malformed(dict(typestr=_DROP))), np.zeros(1))


# -- 4. a bad item of a tuple ----------------------------------------------------------------


@cuda.jit
def first_of(t, out):
    out[0] = t[0]


Point = collections.namedtuple("Point", "x y")

_ITEMS = [
    ((1.0, None), r"argument 0 \('t'\), item t\[1\], is None, which kernels cannot take"),
    ((1.0, [2.0]), r"argument 0 \('t'\), item t\[1\], has type builtins.list, which"),
    (((1.0, "x"), 2.0), r"argument 0 \('t'\), item t\[0\]\[1\], has type builtins.str, which"),
    (((1.0, (2.0, (None,))),), r"argument 0 \('t'\), item t\[0\]\[1\]\[1\]\[0\], is None"),
    (Point(1.0, None), r"argument 0 \('t'\), item t.y, is None"),
    ((1.0, (Point(2.0, "s"),)), r"argument 0 \('t'\), item t\[1\]\[0\].y, has type builtins.str"),
    ((1.0, 1 << 70), r"argument 0 \('t'\), item t\[1\] = 1180591620717411303424 does not fit "
                     r"in 64 bits"),
    ((1.0, np.str_("x")), r"argument 0 \('t'\), item t\[1\], is a NumPy scalar of dtype <U1 "
                          r"\(a string\)"),
]


@pytest.mark.parametrize("t,said", _ITEMS)
def test_the_item_is_named_in_the_simulator(sim, t, said):
    with pytest.raises(LaunchError, match=r"^first_of: " + said):
        first_of[1, 1](t, np.zeros(1))


@pytest.mark.parametrize("t,said", _ITEMS)
def test_the_item_is_named_on_the_gpu_path(fake_gpu, t, said):  # noqa: F811
    with pytest.raises(LaunchError, match=r"^first_of: " + said):
        first_of[1, 1](t, _interface(shape=(1,), data=(0x8000, False)))
    assert not fake_gpu


def test_a_whole_argument_is_still_said_as_before(fake_gpu):  # noqa: F811
    out = _interface(shape=(1,), data=(0x8000, False))
    with pytest.raises(arguments.ArgumentError,
                       match=r"^first_of: argument 0 \('t'\) is None, which kernels"):
        first_of[1, 1](None, out)
    with pytest.raises(arguments.ArgumentError,
                       match=r"^first_of: argument 0 \('t'\) is a NumPy scalar of dtype <U1"):
        first_of[1, 1](np.str_("x"), out)


def test_item_messages_without_a_launch_read_as_items():
    with pytest.raises(arguments.ArgumentError, match=r"^item \[1\]\[0\], is None"):
        arguments.value_key((1.0, (None,)))
    assert arguments.item_place("k: argument 0 ('t')", "[1]") == "k: argument 0 ('t'), item t[1],"
    assert arguments.item_place("k: argument 0 ('t'), item t[1],", ".x") == \
        "k: argument 0 ('t'), item t[1].x,"
