"""Host arrays that a launch could not honour are refused, naming the argument, and nothing is
lost: cuda.Out / InOut of a read-only array, a read-only array that the kernel writes (typed
read-only on the GPU as in the simulator), overlapping views both written back; the same array
given twice is one device copy, written back once.  The GPU path runs on the CPU with a recorder
standing in for the driver and for CuPy's copies (test_launch_path.py's ``fake_gpu``)."""

import ctypes
import types

import numpy as np
import pytest

from gpureplace import LaunchError, cuda, probe
from gpureplace.config import settings
from gpureplace.errors import CompileError
from gpureplace.runtime import arguments, transfers

from test_launch_path import FakeLoaded, fake_gpu  # noqa: F401 - the fixture


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    monkeypatch.setattr(settings, "_host_arrays", "copy")


class FakeCopies:
    """CuPy's allocations and copies on host memory: ``alloc`` gives a buffer, ``memcpyAsync``
    moves bytes; each call is recorded."""

    memcpyHostToDevice, memcpyDeviceToHost = 1, 2

    def __init__(self):
        self.buffers, self.log = [], []
        self.cuda = types.SimpleNamespace(alloc=self.alloc, runtime=self)

    def alloc(self, nbytes):
        buf = ctypes.create_string_buffer(nbytes)
        self.buffers.append(buf)
        return types.SimpleNamespace(ptr=ctypes.addressof(buf), buf=buf)

    def memcpyAsync(self, dst, src, nbytes, kind, stream):
        self.log.append(("in" if kind == self.memcpyHostToDevice else "out", nbytes))
        ctypes.memmove(dst, src, nbytes)

    def streamSynchronize(self, stream):
        pass


@pytest.fixture
def fake_copies(fake_gpu, monkeypatch):  # noqa: F811
    fake = FakeCopies()
    monkeypatch.setattr(probe, "cupy_module", lambda: fake)
    monkeypatch.setattr(settings, "_host_arrays", "copy")
    return fake


def _run_on_device(monkeypatch, body):
    """Make each fake launch call ``body(values)`` (the packed parameters: device pointers
    into FakeCopies' buffers), standing in for the kernel."""
    original = FakeLoaded.launch

    def launch(self, grid, block, stream, shared, values):
        original(self, grid, block, stream, shared, values)
        body(values)
    monkeypatch.setattr(FakeLoaded, "launch", launch)


@cuda.jit
def fill(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = 7


@cuda.jit
def fill_first(t):
    i = cuda.grid(1)
    if i < t[0].size:
        t[0][i] = 7


@cuda.jit
def total(a, out):
    out[0] = a[0] + a[1]


@cuda.jit
def total_in_tuple(t, out):
    out[0] = t[0][0] + t[0][1]


@cuda.jit
def two(a, b):
    i = cuda.grid(1)
    if i < a.size:
        if i % 2 == 0:
            a[i] = 1
        else:
            b[i] = 2


def _read_only(n=4):
    r = np.zeros(n, np.float32)
    r.flags.writeable = False
    return r


# -- 1. cuda.Out / InOut of a read-only array ------------------------------------------------

@pytest.mark.parametrize("hint", [cuda.Out, cuda.InOut])
def test_an_output_hint_on_a_read_only_array_is_refused_in_the_simulator(sim, hint):
    r = _read_only()
    with pytest.raises(LaunchError, match=rf"fill: argument 0 \('a'\) is cuda.{hint.__name__}"
                                          rf"\(\) of a read-only NumPy array"):
        fill[1, 4](hint(r))
    fill[1, 4](cuda.In(r))                              # a copy the kernel may write
    assert not r.any()


@pytest.mark.parametrize("hint", [cuda.Out, cuda.InOut])
def test_an_output_hint_on_a_read_only_array_is_refused_on_the_gpu(fake_copies, hint):
    r = _read_only()
    with pytest.raises(LaunchError, match=rf"fill: argument 0 \('a'\) is cuda.{hint.__name__}"
                                          rf"\(\) of a read-only NumPy array"):
        fill[1, 4](hint(r))
    assert not fake_copies.log and not FakeLoaded.instances     # refused before anything
    fill[1, 4](cuda.In(r))
    assert fake_copies.log == [("in", 16)]


# -- 2. a read-only array as it is: typed read-only on both backends -------------------------

def test_a_read_only_array_written_by_the_kernel_fails_to_compile_on_the_gpu(fake_copies):
    for kernel, arg in ((fill, _read_only()), (fill_first, (_read_only(),))):
        with pytest.raises(CompileError, match="Cannot modify readonly array"):
            kernel[1, 4](arg)
    assert not any(inst.calls for inst in FakeLoaded.instances)


def test_a_read_only_array_written_by_the_kernel_fails_to_compile_in_the_simulator(sim):
    for kernel, arg in ((fill, _read_only()), (fill_first, (_read_only(),))):
        with pytest.raises(CompileError, match="Cannot modify readonly array"):
            kernel[1, 4](arg)


def test_a_read_only_array_that_is_only_read_is_copied_in_and_not_back(fake_copies):
    r = np.array([1.0, 2.0])
    r.flags.writeable = False
    out = np.zeros(1)
    total[1, 1](r, out)
    total_in_tuple[1, 1]((r,), out)
    # each launch: r and out copied in, only out copied back
    assert fake_copies.log == [("in", 16), ("in", 8), ("out", 8)] * 2
    assert [str(inst.spec.argtypes[0]) for inst in FakeLoaded.instances] == [
        "readonly array(float64, 1d, C)", "UniTuple(readonly array(float64, 1d, C) x 1)"]


def test_read_only_and_writable_arrays_are_different_specialisations(fake_copies):
    w, r = np.zeros(4, np.float32), _read_only()
    keys = [transfers.host_array_argument(a)[0] for a in (w, r)]
    assert keys[0] == ("array", np.dtype(np.float32), 1, "C")
    assert keys[1] == ("roarray", np.dtype(np.float32), 1, "C")
    types_ = [arguments.numba_type_of_key(k) for k in keys]
    assert types_[0].mutable and not types_[1].mutable and types_[0] != types_[1]
    out = np.zeros(1, np.float32)
    total[1, 1](w, out)
    total[1, 1](r, out)
    assert len(FakeLoaded.instances) == 2                 # one compile each


def test_the_simulator_and_the_gpu_type_a_read_only_array_alike(fake_copies):
    r = _read_only()
    (key,) = fill._type_keys((r,), "launch")
    assert key[0] == "roarray"
    (key,) = fill._type_keys((cuda.In(r),), "launch")  # cuda.In: a copy the kernel owns
    assert key[0] == "array"


# -- 3. the same host array twice: one copy, written back once -------------------------------

def test_the_same_array_twice_is_one_device_copy_on_the_gpu(fake_copies, monkeypatch):
    def kernel_body(values):               # two(a, b): a[even] = 1, b[odd] = 2
        pa, n, pb, _ = values
        a = np.ctypeslib.as_array((ctypes.c_double * n).from_address(pa))
        b = np.ctypeslib.as_array((ctypes.c_double * n).from_address(pb))
        a[0::2] = 1
        b[1::2] = 2
    _run_on_device(monkeypatch, kernel_body)
    x = np.zeros(4)
    two[1, 4](x, x)
    assert x.tolist() == [1, 2, 1, 2]
    assert fake_copies.log == [("in", 32), ("out", 32)]
    (call,) = FakeLoaded.instances[0].calls
    assert call[4][0] == call[4][2]                       # both parameters: the same copy
    x[:] = 0
    two[1, 4](x, x[:])                                    # an identical view: the same
    assert x.tolist() == [1, 2, 1, 2]
    x[:] = 0
    two[1, 4](cuda.Out(x), cuda.In(x))                    # copied in (In asks), back (Out)
    assert x.tolist() == [1, 2, 1, 2]
    assert fake_copies.log[-2:] == [("in", 32), ("out", 32)]


def test_the_same_array_twice_in_the_simulator(sim):
    x = np.zeros(4)
    two[1, 4](x, x)
    assert x.tolist() == [1, 2, 1, 2]
    x[:] = 0
    two[1, 4](cuda.Out(x), cuda.InOut(x))        # was: the Out copy's back overwrote all
    assert x.tolist() == [1, 2, 1, 2]
    x[:] = 0
    two[1, 4](cuda.Out(x), cuda.Out(x))
    assert x.tolist() == [1, 2, 1, 2]


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
def test_overlapping_views_both_written_back_are_refused(backend, request):
    request.getfixturevalue("sim" if backend == "sim" else "fake_copies")
    x = np.zeros(5)
    with pytest.raises(LaunchError, match=r"two: argument 0 \('a'\) and argument 1 \('b'\) "
                                          r"are different views of overlapping host memory"):
        two[1, 4](x[:4], x[1:])
    with pytest.raises(LaunchError, match=r"overlapping host memory"):
        two[1, 4](cuda.InOut(x[:4]), x[1:])
    assert not x.any()
    two[1, 2](x[0::2][:2], x[1::2][:2])                   # views that share no element: fine
    x[:] = 0
    r = x[1:]
    two[1, 4](x[:4], cuda.In(r))                          # only one of them goes back: fine
    if backend == "gpu":
        assert not FakeLoaded.instances or all(
            len(inst.calls) <= 2 for inst in FakeLoaded.instances)
    else:
        assert x.tolist() == [1, 0, 1, 0, 0]


# -- on a real GPU -----------------------------------------------------------------------------

@pytest.mark.gpu
def test_host_array_refusals_and_aliasing_on_the_device(monkeypatch):
    monkeypatch.setattr(settings, "_host_arrays", "copy")
    r = _read_only()
    for hint in (cuda.Out, cuda.InOut):
        with pytest.raises(LaunchError, match="of a read-only NumPy array"):
            fill[1, 4](hint(r))
    with pytest.raises(CompileError, match="Cannot modify readonly array"):
        fill[1, 4](r)
    with pytest.raises(CompileError, match="Cannot modify readonly array"):
        fill_first[1, 4]((r,))
    x = np.zeros(4)
    two[1, 4](x, x)
    assert x.tolist() == [1, 2, 1, 2]
    ro = np.array([1.0, 2.0])
    ro.flags.writeable = False
    out = np.zeros(1)
    total[1, 1](ro, out)
    assert out[0] == 3.0
    with pytest.raises(LaunchError, match="is a read-only NumPy array, which the kernel writes"):
        declared_fill[1, 1](ro)
    out[0] = 0
    declared_total[1, 1](ro, out)
    assert out[0] == 3.0 and ro.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
def test_a_declared_signature_takes_a_read_only_array_as_its_array_type(backend, request):
    request.getfixturevalue("sim" if backend == "sim" else "fake_copies")

    @cuda.jit("void(float64[:], float64[:])")
    def declared(a, out):
        out[0] = a[0] + a[1]

    r = np.array([1.0, 2.0])
    r.flags.writeable = False
    out = np.zeros(1)
    declared[1, 1](r, out)
    if backend == "sim":
        assert out[0] == 3.0
    else:
        assert fake_copies_log(request) == [("in", 16), ("in", 8), ("out", 8)]


def fake_copies_log(request):
    return request.getfixturevalue("fake_copies").log


# -- 4. a declared signature's writable array given a read-only one ---------------------------
# (numba-cuda matches it, so a kernel that only reads it runs; one that writes it is refused:
# nothing could be copied back, its writes would be lost)

@cuda.jit("void(float64[:])")
def declared_fill(a):
    a[0] = 7


@cuda.jit("void(float64[:])")
def declared_atomic(a):
    cuda.atomic.add(a, 0, 1.0)


@cuda.jit("void(UniTuple(float64[:], 1))")
def declared_fill_first(t):
    t[0][0] = 7


@cuda.jit("void(float64[:], float64[:])")
def declared_total(a, out):
    out[0] = a[0] + a[1]


def _read_only_f64(n=2):
    r = np.zeros(n)
    r.flags.writeable = False
    return r


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
def test_a_declared_kernel_that_writes_a_read_only_array_is_refused(backend, request):
    request.getfixturevalue("sim" if backend == "sim" else "fake_copies")
    r = _read_only_f64()
    with pytest.raises(LaunchError, match=r"declared_fill: argument 0 \('a'\) is a read-only "
                                          r"NumPy array, which the kernel writes \(its "
                                          r"signature declares float64\[:\]\).*a\.copy\(\).*"
                                          r"cuda\.In\(a\).*Cannot modify readonly array"):
        declared_fill[1, 1](r)
    with pytest.raises(LaunchError, match=r"declared_atomic: argument 0 \('a'\) is a read-only"):
        declared_atomic[1, 1](r)
    with pytest.raises(LaunchError, match=r"declared_fill_first: argument 0 \('t'\) holds a "
                                          r"read-only NumPy array, which the kernel writes"):
        declared_fill_first[1, 1]((r,))
    assert not r.any()
    if backend == "gpu":                       # refused before anything is copied or launched
        assert not fake_copies_log(request)
        assert not any(inst.calls for inst in FakeLoaded.instances)
    declared_fill[1, 1](cuda.In(r))            # a copy the kernel may write: runs
    declared_fill[1, 1](r.copy())
    assert not r.any()


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
def test_whether_a_declared_kernel_writes_is_found_once(backend, request, monkeypatch):
    from gpureplace.compiler import frontend
    request.getfixturevalue("sim" if backend == "sim" else "fake_copies")
    checks = []
    original = frontend.compile_ahead
    monkeypatch.setattr(frontend, "compile_ahead",
                        lambda *a: checks.append(a[2]) or original(*a))

    @cuda.jit("void(float64[:], float64[:])")
    def reads(a, out):
        out[0] = a[0] + a[1]

    r = np.array([1.0, 2.0])
    r.flags.writeable = False
    out = np.zeros(1)
    for _ in range(3):
        reads[1, 1](r, out)
    reads[1, 1](r.copy(), out)                    # a writable array: nothing to find out
    assert len(checks) == 1 and not checks[0][0].mutable and checks[0][1].mutable
    if backend == "sim":
        assert out[0] == 3.0
    else:
        # the read-only array: copied in, never back
        assert fake_copies_log(request)[:9] == [("in", 16), ("in", 8), ("out", 8)] * 3


@cuda.jit
def copies_in(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


_NO_DEVICE_FORM = [
    (lambda: np.zeros(8, ">f4"),
     r"argument 1 \('out'\) has dtype >f4 \(big-endian, not this machine's byte order\); "
     r"pass out.astype\('<f4'\)"),
    (lambda: np.ma.zeros(8, np.float32),
     r"argument 1 \('out'\) is a NumPy masked array.*np.ma.getdata\(out\)"),
    pytest.param(lambda: np.zeros(8, np.longdouble),
                 r"argument 1 \('out'\) has dtype float128 \(long double\), which GPUs do not "
                 r"have; pass out.astype\(np.float64\)",
                 marks=pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8,
                                          reason="long double is double here")),
    (lambda: np.zeros(8, object),
     r"argument 1 \('out'\) has dtype object, whose Python objects have no device form"),
    (lambda: np.zeros(8, "V4"), r"argument 1 \('out'\) has dtype \|V4, which kernels cannot take"),
    (lambda: np.zeros(8, [("a", ">i4"), ("b", "<f4")]),
     r"argument 1 \('out'\) has a structured dtype with fields in another byte order than this "
     r"machine's \(a: >i4\); pass out.astype\(out.dtype.newbyteorder\('='\)\)"),
]


@pytest.mark.parametrize("backend", ["sim", "gpu"], ids=["sim", "fake-gpu"])
@pytest.mark.parametrize("make,said", _NO_DEVICE_FORM,
                         ids=["big-endian", "masked", "long-double", "object", "raw-bytes",
                              "swapped-field"])
def test_a_host_array_without_a_device_form_is_refused_by_name(backend, request, make, said):
    """Numba's typeof failed deep inside the launch (NumbaValueError: Unsupported array dtype),
    naming neither the argument nor its dtype; now the launch refuses it, saying what to pass,
    before anything is copied or run, on both backends."""
    fake = request.getfixturevalue("sim" if backend == "sim" else "fake_copies")
    x, out = np.arange(8, dtype=np.float32), make()
    before = out.copy()
    with pytest.raises(arguments.ArgumentError, match="copies_in: " + said):
        copies_in[1, 8](x, out)
    assert out.tobytes() == before.tobytes()
    if backend == "gpu":
        assert not fake.log and not any(inst.calls for inst in FakeLoaded.instances)


def test_an_array_without_a_device_form_inside_a_tuple_is_refused(sim):
    @cuda.jit
    def first(t, out):
        out[0] = t[0][0]

    with pytest.raises(arguments.ArgumentError,
                       match=r"first: argument 0 \('t'\) holds an array that has dtype >f8 "
                             r"\(big-endian.*pass a.astype\('<f8'\)"):
        first[1, 1]((np.zeros(3, ">f8"), 1.0), np.zeros(1))


@pytest.mark.parametrize("dtype, said", [
    (">f4", r"to_device: the array has dtype >f4 \(big-endian, not this machine's byte order\); "
            r"pass a.astype\('<f4'\)"),
    pytest.param(np.longdouble, r"to_device: the array has dtype float128 \(long double\)",
                 marks=pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8,
                                          reason="long double is double here")),
    ([("a", ">i4"), ("b", "<f4")], r"to_device: the array has a structured dtype with fields "
                                   r"in another byte order"),
])
def test_to_device_refuses_what_no_kernel_could_take(sim, dtype, said):
    """A device copy of a big-endian or long-double array, which every launch would refuse,
    is refused where it is made (a launch on one failed inside Numba's typeof, unnamed)."""
    with pytest.raises(TypeError, match=said):
        cuda.to_device(np.zeros(4, dtype))
    d = cuda.to_device(np.zeros(4, [("a", "<i4"), ("b", "<f4")]))      # native records: as before
    assert d.copy_to_host().dtype.names == ("a", "b")


def test_a_refused_dtype_comes_without_the_copy_warning(fake_copies, monkeypatch):
    """With host arrays on "warn" (the default on a GPU), the refusal of an array no kernel
    can take comes alone, not after a warning that it would be copied."""
    import warnings
    monkeypatch.setattr(settings, "_host_arrays", "warn")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(arguments.ArgumentError, match=r"has dtype >f4 \(big-endian"):
            copies_in[1, 8](np.arange(8, dtype=np.float32), np.zeros(8, ">f4"))


class _Plain:
    pass


@pytest.mark.parametrize("value, said", [
    (_Plain, r"is the class .*_Plain, which kernels cannot take"),
    (np.void(b"ab"), r"is a NumPy scalar of dtype \|V2 \(raw bytes\), which kernels cannot take"),
    (np.str_("a"), r"is a NumPy scalar of dtype <U1 \(a string\), which kernels cannot take"),
    (np.bytes_(b"a"), r"is a NumPy scalar of dtype \|S1 \(bytes\), which kernels cannot take"),
    pytest.param(np.longdouble(1), r"has dtype float128 \(long double\), which GPUs do not have",
                 marks=pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8,
                                          reason="long double is double here")),
])
def test_a_scalar_or_class_kernels_cannot_take_is_refused_by_name(sim, value, said):
    """(Numba's own ValueError / NumbaNotImplementedError, or the ABI's TypeError, naming
    neither the kernel nor the argument)"""
    @cuda.jit
    def k(t, x):
        x[0] = 1

    x = np.zeros(2)
    with pytest.raises(arguments.ArgumentError, match=r"k: argument 0 \('t'\) " + said):
        k[1, 1](value, x)
    assert not x.any()


def test_raw_bytes_after_a_record_are_still_refused(sim):
    """A record and raw bytes are both np.void: the handler of the first one seen was kept for
    the class, and raw bytes then went the record's way (Numba's NumbaNotImplementedError)."""
    @cuda.jit
    def k(t, x):
        x[0] = 1

    x = np.zeros(2)
    k[1, 1](np.zeros(1, dtype=[("a", "f8")])[0], x)      # a record: passed
    assert x[0] == 1
    with pytest.raises(arguments.ArgumentError, match=r"\|V2 \(raw bytes\)"):
        k[1, 1](np.void(b"ab"), x)
