"""Two things the GPU launch path did apart from the simulator:

1. a record (``recs[i]`` of a structured array) inside a tuple or namedtuple argument, at any
   depth, is copied to the device and back around the launch as a record given as it is (the
   kernel gets a pointer to the copy; a record of a read-only array is not written back, and a
   kernel that wrote one fails its launch naming the item).  The GPU path only looked for records
   at the top level: the record itself reached the parameter packing (``struct.error: required
   argument is not an integer``);
2. a read-only ``__cuda_array_interface__`` (``data=(ptr, True)``) given for a writable array
   parameter of a declared signature (``cuda.jit("void(float64[:])")``) was matched as a
   read-only host array's (writable) device copy is, so a kernel that writes it ran and wrote into
   the producer's read-only memory; the simulator refuses the write.  Now the GPU path refuses it
   before the launch, naming the argument (numba-cuda matches it to no writable parameter); a
   kernel that only reads it runs, as in the simulator, and a read-only host array still matches.

The GPU path runs on the CPU with test_launch_path.py's stand-in driver (``fake_gpu``) and
test_host_array_refusals.py's stand-in copies (``fake_copies``): a launch calls a Python body
standing in for the kernel, given the packed parameters (device pointers into the stand-in
copies), so that what the kernel receives and writes is checked.
"""

import collections
import contextlib
import ctypes

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.config import settings
from gpureplace.errors import LaunchError, SignatureError
from gpureplace.runtime import arguments

from test_argument_handling_parity import Interface, _interface
from test_host_array_refusals import _run_on_device, fake_copies  # noqa: F401 - fixture
from test_launch_path import FakeLoaded, fake_gpu  # noqa: F401 - the fixture


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    monkeypatch.setattr(settings, "_host_arrays", "copy")


@pytest.fixture(autouse=True)
def fresh_launches():
    """Each test launches this module's kernels afresh: no loaded kernel (the stand-in device's
    of an earlier test) and no fast path left from one."""
    kernels = [v for v in globals().values() if hasattr(v, "_launch_cache")]
    for k in kernels:
        k._launch_cache.clear()
        k._drop_fast_launch()
    yield


_REC = np.dtype([("a", np.int32), ("b", np.float64)], align=True)
_A, _B = _REC.fields["a"][1], _REC.fields["b"][1]

Pair = collections.namedtuple("Pair", "x y")


def _records(writable=True, n=3):
    recs = np.zeros(n, _REC)
    recs["a"] = np.arange(1, n + 1)
    recs["b"] = np.arange(1, n + 1) * 1.5
    recs.flags.writeable = writable
    return recs


# stand-ins for a kernel's body on the fake GPU: they read and write device memory through the
# packed parameter values (a record: the address of its device copy; an array: its address,
# then its length)

def _int(ptr):
    return ctypes.c_int32.from_address(ptr)


def _double(ptr):
    return ctypes.c_double.from_address(ptr)


def _on(backend, request):
    """The backend ``backend``: "sim", or "gpu" (the stand-in device and copies, returned)."""
    return request.getfixturevalue("sim" if backend == "sim" else "fake_copies")


@contextlib.contextmanager
def _kernel_body(fake, monkeypatch, body):
    """On the stand-in GPU (``fake``; None in the simulator), each launch meanwhile runs
    ``body(values)`` in place of the kernel."""
    if fake is None:
        yield
        return
    with monkeypatch.context() as m:
        _run_on_device(m, body)
        yield


# -- 1. records inside tuples ------------------------------------------------------------------


@cuda.jit
def write_in_tuple(t, out):
    out[0] = t[1] + t[0].b
    t[0].a = 7


def _write_in_tuple_body(seen):
    def body(values):                 # (t[0] -> rec, t[1] -> float, out -> ptr, len)
        rec, scalar, out, n = values
        seen.append((_int(rec + _A).value, _double(rec + _B).value, scalar, n))
        _double(out).value = scalar + _double(rec + _B).value
        _int(rec + _A).value = 7
    return body


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
def test_a_record_in_a_tuple_is_copied_there_and_back(backend, request, monkeypatch):
    seen = []
    fake = _on(backend, request)
    recs, out = _records(), np.zeros(1)
    with _kernel_body(fake, monkeypatch, _write_in_tuple_body(seen)):
        write_in_tuple[1, 1]((recs[1], 3.0), out)
    assert out[0] == 6.0                              # 3.0 + recs[1].b
    assert recs[1]["a"] == 7 and recs[1]["b"] == 3.0  # written back
    assert list(recs["a"]) == [1, 7, 3]               # into that record alone
    if fake is not None:
        # the kernel got the record's copy (its fields as they were), the scalar, the array
        assert seen == [(2, 3.0, 3.0, 1)]
        (values,) = [c[4] for c in FakeLoaded.instances[0].calls]
        rec, scalar, out_ptr, n = values
        assert scalar == 3.0 and n == 1 and rec != out_ptr
        assert {rec, out_ptr} <= {ctypes.addressof(b) for b in fake.buffers}   # device copies


@cuda.jit
def nested(p, out):
    out[0] = p.x.b + p.y[0] + p.y[1][0].b
    p.x.a = 5
    p.y[1][0].a = 6


def _nested_body(seen):
    def body(values):           # p.x -> rec, p.y[0] -> float, p.y[1][0] -> rec, out -> ptr, len
        r0, scalar, r1, out, _ = values
        seen.append((_double(r0 + _B).value, _double(r1 + _B).value))
        _double(out).value = _double(r0 + _B).value + scalar + _double(r1 + _B).value
        _int(r0 + _A).value = 5
        _int(r1 + _A).value = 6
    return body


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
def test_records_in_a_namedtuple_and_nested_tuples(backend, request, monkeypatch):
    seen = []
    fake = _on(backend, request)
    recs, out = _records(), np.zeros(1)
    with _kernel_body(fake, monkeypatch, _nested_body(seen)):
        nested[1, 1](Pair(recs[0], (0.25, (recs[2],))), out)
    assert out[0] == 1.5 + 0.25 + 4.5
    assert list(recs["a"]) == [5, 2, 6] and list(recs["b"]) == [1.5, 3.0, 4.5]
    if fake is not None:
        assert seen == [(1.5, 4.5)]
        # each record has its own copy, in and out; the host array too
        assert sorted(fake.log) == sorted([("in", 16), ("in", 16), ("in", 8),
                                           ("out", 16), ("out", 16), ("out", 8)])


def test_a_record_in_a_tuple_with_device_arrays_only(fake_copies, monkeypatch):  # noqa: F811
    """No host array: the plain launch path (``_launch_args``), not the transfers one."""
    seen = []
    out_mem = (ctypes.c_double * 1)()
    out = Interface(shape=(1,), typestr="<f8", data=(ctypes.addressof(out_mem), False),
                    version=3)
    _run_on_device(monkeypatch, _write_in_tuple_body(seen))
    recs = _records()
    write_in_tuple[1, 1]((recs[0], 2.0), out)
    assert seen == [(1, 1.5, 2.0, 1)]
    assert out_mem[0] == 3.5 and recs[0]["a"] == 7
    assert fake_copies.log == [("in", 16), ("out", 16)]
    write_in_tuple[1, 1]((recs[2], 1.0), out)     # again (never the fast path): copied again
    assert seen[1] == (3, 4.5, 1.0, 1) and recs[2]["a"] == 7 and out_mem[0] == 5.5
    assert len(FakeLoaded.instances) == 1         # one specialisation


@cuda.jit
def read_in_tuple(t, out):
    out[0] = t[1] + t[0].b


def _read_body(values):
    rec, scalar, out, _ = values
    _double(out).value = scalar + _double(rec + _B).value


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
def test_a_read_only_record_in_a_tuple(backend, request, monkeypatch):
    """Read: runs, nothing written back; written: the launch fails naming the item, and copies
    nothing back (the record, the host array the kernel wrote)."""
    fake = _on(backend, request)
    recs, out = _records(False), np.zeros(1)
    with _kernel_body(fake, monkeypatch, _read_body):
        read_in_tuple[1, 1]((recs[1], 1.0), out)
    assert out[0] == 4.0 and recs[1]["a"] == 2 and not recs.flags.writeable
    out[0] = 0.0
    with _kernel_body(fake, monkeypatch, _write_in_tuple_body([])):
        with pytest.raises(arguments.ArgumentError,
                           match=r"^write_in_tuple: argument 0 \('t'\), item t\[0\], is a record "
                                 r"of a read-only NumPy array, which the kernel wrote \(field "
                                 r"'a'\): nothing can be copied back"):
            write_in_tuple[1, 1]((recs[1], 3.0), out)
        assert list(recs["a"]) == [1, 2, 3] and out[0] == 0.0
        writable = _records()
        write_in_tuple[1, 1]((writable[1], 3.0), out)   # a writable one: as before
    assert writable[1]["a"] == 7 and out[0] == 6.0
    if fake is not None:
        assert len(FakeLoaded.instances) == 2 and \
            [len(inst.calls) for inst in FakeLoaded.instances] == [1, 2]


@cuda.jit
def two_places(w, p):
    w.b = 3.0
    p.y.b = 4.0


def test_a_read_only_record_in_a_namedtuple_is_named_as_its_field(fake_copies,  # noqa: F811
                                                                   monkeypatch):
    def body(values):
        _double(values[0] + _B).value = 3.0
        _double(values[2] + _B).value = 4.0
    _run_on_device(monkeypatch, body)
    writable, ro = _records(), _records(False)
    with pytest.raises(arguments.ArgumentError,
                       match=r"^two_places: argument 1 \('p'\), item p.y, is a record of a "
                             r"read-only NumPy array, which the kernel wrote \(field 'b'\)"):
        two_places[1, 1](writable[0], Pair(1.0, ro[0]))
    assert writable[0]["b"] == 1.5 and ro[0]["b"] == 1.5      # nothing copied back
    two_places[1, 1](writable[0], Pair(1.0, writable[1]))
    assert writable[0]["b"] == 3.0 and writable[1]["b"] == 4.0


def test_a_graph_refuses_a_record_in_a_tuple(fake_copies, monkeypatch):  # noqa: F811
    from gpureplace.jit import graphs
    monkeypatch.setattr(graphs, "recorder", lambda: object())        # capturing a graph
    out = _interface(shape=(1,), data=(0x8000, False))
    with pytest.raises(LaunchError, match=r"write_in_tuple: a record argument is copied to the "
                                          r"device and back around each launch, which a CUDA "
                                          r"graph cannot hold"):
        write_in_tuple[1, 1]((_records()[0], 1.0), out)
    assert not fake_copies.log and not any(inst.calls for inst in FakeLoaded.instances)


# -- 2. a read-only __cuda_array_interface__ where a declared signature has a writable array ---


@cuda.jit("void(float64[:])")
def declared_fill(a):
    a[0] = 7


@cuda.jit("void(float64[:], float64[:])")
def declared_read(a, out):
    out[0] = a[0] + a[1]


@cuda.jit("void(UniTuple(float64[:], 2))")
def declared_fill_second(t):
    t[1][0] = 7


def _read_only_interface(ptr=0x7F0000):
    return _interface(ptr, readonly=True)


def test_a_declared_kernel_that_writes_a_read_only_interface_is_refused_on_the_gpu(
        fake_gpu):  # noqa: F811
    with pytest.raises(SignatureError,
                       match=r"^declared_fill: argument 0 \('a'\) is a read-only device array "
                             r"\(its __cuda_array_interface__ has data=\(ptr, True\)\), which "
                             r"the kernel writes \(its signature declares float64\[:\]\): no "
                             r"matching definition .*Cannot modify readonly array") as exc:
        declared_fill[1, 1](_read_only_interface())
    assert isinstance(exc.value, TypeError)           # as the simulator's refusal
    assert not any(inst.calls for inst in fake_gpu)   # nothing launched
    declared_fill[1, 1](_interface(readonly=False))   # writable: runs
    assert fake_gpu[0].calls[0][4] == (0x7F0000, 4, 8)


def test_the_fast_path_hands_a_read_only_interface_to_the_refusal(fake_gpu):  # noqa: F811
    declared_fill[1, 1](_interface(0x7E0000))          # general path, then the fast one
    declared_fill[1, 1](_interface(0x7E0000))
    with pytest.raises(SignatureError, match=r"argument 0 \('a'\) is a read-only device array"):
        declared_fill[1, 1](_read_only_interface())
    assert [c[4][0] for c in fake_gpu[0].calls] == [0x7E0000, 0x7E0000]


def test_prepared_launches_and_forall_refuse_it_too(fake_gpu):  # noqa: F811
    with pytest.raises(SignatureError, match=r"argument 0 \('a'\) is a read-only device array"):
        declared_fill[1, 1].prepare(_read_only_interface())
    with pytest.raises(SignatureError, match=r"argument 0 \('a'\) is a read-only device array"):
        declared_fill.forall(4, tpb=4)(_read_only_interface())
    assert not any(inst.calls for inst in fake_gpu)


def test_a_read_only_interface_in_a_tuple_is_named_as_the_item(fake_gpu):  # noqa: F811
    w = _interface(0x7D0000)
    with pytest.raises(SignatureError,
                       match=r"^declared_fill_second: argument 0 \('t'\) holds a read-only "
                             r"device array .*, which the kernel writes \(t\[1\]; its signature "
                             r"declares UniTuple\(array\(float64, 1d, A\) x 2\)\)"):
        declared_fill_second[1, 1]((w, _read_only_interface()))
    assert not any(inst.calls for inst in fake_gpu)
    declared_fill_second[1, 1]((_read_only_interface(), w))     # t[0] only read: runs
    assert fake_gpu[0].calls[0][4] == (0x7F0000, 4, 8, 0x7D0000, 4, 8)


def test_a_declared_kernel_that_reads_a_read_only_interface_runs_on_the_gpu(
        fake_gpu):  # noqa: F811
    out = Interface(shape=(1,), typestr="<f8", data=(0x8000, False), version=3)
    declared_read[1, 1](_read_only_interface(), out)
    assert fake_gpu[0].calls[0][4] == (0x7F0000, 4, 8, 0x8000, 1, 8)
    assert [str(t) for t in fake_gpu[0].spec.argtypes] == ["array(float64, 1d, A)"] * 2


def test_the_simulator_refuses_the_write_and_runs_the_read(sim):
    d = cuda.to_device(np.array([1.0, 2.0, 0.0, 0.0]))
    ptr = d.__cuda_array_interface__["data"][0]
    with pytest.raises(TypeError, match="read-only"):
        declared_fill[1, 1](_read_only_interface(ptr))
    assert list(d.copy_to_host()) == [1.0, 2.0, 0.0, 0.0]
    out = np.zeros(1)
    declared_read[1, 1](_read_only_interface(ptr), out)
    assert out[0] == 3.0


def _read_only_f64(values=(1.0, 2.0)):
    r = np.array(values)
    r.flags.writeable = False
    return r


def test_a_read_only_host_array_still_matches_on_the_gpu(fake_copies, monkeypatch):  # noqa: F811
    """Its device copy is writable: a kernel that reads it runs (copied in, never back); one
    that writes it is refused in the host array's words; cuda.In gives it a copy to write."""
    _run_on_device(monkeypatch, lambda values: None)
    r, out = _read_only_f64(), np.zeros(1)
    declared_read[1, 1](r, out)
    assert fake_copies.log == [("in", 16), ("in", 8), ("out", 8)]
    with pytest.raises(arguments.ArgumentError,
                       match=r"^declared_fill: argument 0 \('a'\) is a read-only NumPy array, "
                             r"which the kernel writes"):
        declared_fill[1, 1](r)
    declared_fill[1, 1](cuda.In(r))
    assert len(FakeLoaded.instances) == 2 and not r.flags.writeable and list(r) == [1.0, 2.0]


def test_a_read_only_interface_beside_host_arrays_is_refused_before_any_copy(
        fake_copies):  # noqa: F811
    """Host arrays among the arguments (the transfers path): the read-only device array is
    refused as such -- not as a NumPy array -- before anything is copied."""
    with pytest.raises(SignatureError,
                       match=r"^declared_fill_second: argument 0 \('t'\) holds a read-only "
                             r"device array"):
        declared_fill_second[1, 1]((np.zeros(2), _read_only_interface()))
    assert not fake_copies.log and not any(inst.calls for inst in FakeLoaded.instances)
    with pytest.raises(arguments.ArgumentError,
                       match=r"^declared_fill_second: argument 0 \('t'\) holds a read-only "
                             r"NumPy array, which the kernel writes \(t\[1\]"):
        declared_fill_second[1, 1]((_read_only_interface(), _read_only_f64()))
    assert not fake_copies.log


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
def test_which_item_is_read_only_is_part_of_what_is_checked(backend, request, monkeypatch):
    """Whether the kernel writes a parameter is found once per read-only form of it: a tuple
    whose read-only array is in t[0] (not written) and then in t[1] (written) are two checks,
    not one answer reused."""
    fake = _on(backend, request)
    ro = _read_only_f64()
    with _kernel_body(fake, monkeypatch, lambda values: None):
        declared_fill_second[1, 1]((ro, np.zeros(2)))
    with pytest.raises(arguments.ArgumentError,
                       match=r"^declared_fill_second: argument 0 \('t'\) holds a read-only "
                             r"NumPy array, which the kernel writes \(t\[1\]"):
        declared_fill_second[1, 1]((np.zeros(2), ro))
    assert list(ro) == [1.0, 2.0]
    if fake is not None:
        assert [len(inst.calls) for inst in FakeLoaded.instances] == [1]


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
def test_prepare_refuses_a_record_in_a_tuple_by_name(backend, request, monkeypatch):
    """A prepared launch binds its arguments once, which a record (copied to the device and back
    around each launch) cannot be, inside a tuple too: refused by name, as at the top level
    (on the GPU path it failed packing the parameters, naming nothing)."""
    fake = _on(backend, request)
    recs = _records()
    # (a device array for ``out``, as a prepared launch takes: the record is what is refused)
    out = (cuda.device_array(1, np.float64) if fake is None
           else _interface(shape=(1,), data=(0x8000, False)))
    with _kernel_body(fake, monkeypatch, lambda values: None):
        with pytest.raises(LaunchError, match=r"write_in_tuple: prepare\(\) cannot bind a "
                                              r"record argument"):
            write_in_tuple[1, 1].prepare((recs[1], 3.0), out)
        with pytest.raises(LaunchError, match=r"prepare\(\) cannot bind a record"):
            write_in_tuple[1, 1].prepare(Pair(recs[0], 1.0), out)
    assert list(recs["a"]) == [1, 2, 3]
    assert fake is None or not any(inst.calls for inst in FakeLoaded.instances)
