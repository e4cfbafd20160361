"""The launch hot path's binder, checked on the CPU with stand-ins shaped like CuPy arrays."""

import sys

import numpy as np
import pytest

from gpureplace.runtime import arguments
from gpureplace.runtime.binder import make_binder

from fake_cupy import ndarray, ndarray_without_flags


@pytest.fixture(params=[ndarray, ndarray_without_flags], ids=["flags", "strides"])
def array_class(request):
    return request.param


def _bind(*args):
    keys, vals = zip(*(arguments.value_key(a) for a in args))
    flat = tuple(v for vs in vals for v in vs)
    return make_binder(args, keys), flat


def test_binder_returns_the_same_values_as_the_general_path():
    x = ndarray((8, 3), np.float32)
    bind, flat = _bind(x, 2.5, 7, True, np.float32(1.5), (1, 2.0), np.int64)
    assert bind(x, 2.5, 7, True, np.float32(1.5), (1, 2.0), np.int64) == flat
    # a contiguous array passes its pointer and shape; the kernel derives the strides
    assert flat == (0x7000, 8, 3, 2.5, 7, True, np.float32(1.5), 1, 2.0)


def test_binder_refuses_other_types_dtypes_ranks_and_layouts(array_class):
    nd = array_class
    x = nd((8,), np.float32)
    bind, _ = _bind(x, 1.0)
    assert bind(nd((4,), np.float32, ptr=0x9000), 3.0) == (0x9000, 4, 3.0)
    assert bind(nd((4,), np.float64), 3.0) is None          # dtype
    assert bind(nd((2, 2), np.float32), 3.0) is None        # rank
    assert bind(nd((4,), np.float32, strides=(8,)), 3.0) is None   # not contiguous
    assert bind(nd((1,), np.float32, strides=(8,)), 3.0) == (0x7000, 1, 3.0)  # length 1: any stride
    assert bind(x, 3) is None                                     # int where a float was
    assert bind(x, np.float32(3)) is None

    class Other:                                                  # no .dtype at all
        __cuda_array_interface__ = {"data": (1, False), "shape": (4,), "typestr": "<f4",
                                    "version": 3}
    assert bind(Other(), 3.0) is None


def test_strided_specialisation_accepts_any_strides():
    x = ndarray((4, 4), np.float64, strides=(64, 16))
    key, _ = arguments.value_key(x)
    assert key[3] == "A"
    bind, flat = _bind(x)
    assert flat == (0x7000, 4, 4, 64, 16)
    assert bind(ndarray((5, 2), np.float64, strides=(8, 80))) == (0x7000, 5, 2, 8, 80)


def test_multidimensional_layouts_pass_shape_and_are_told_apart(array_class):
    nd = array_class
    c = nd((3, 5, 2), np.int32, ptr=0x100)
    f = nd((3, 5, 2), np.int32, strides=(4, 12, 60), ptr=0x200)
    assert arguments.value_key(c)[0][3] == "C" and arguments.value_key(f)[0][3] == "F"
    bind_c, flat_c = _bind(c)
    bind_f, flat_f = _bind(f)
    assert flat_c == (0x100, 3, 5, 2) and flat_f == (0x200, 3, 5, 2)
    assert bind_c(nd((4, 1, 7), np.int32)) == (0x7000, 4, 1, 7)
    assert bind_c(f) is None and bind_f(c) is None
    assert bind_f(nd((2, 2, 2), np.int32, strides=(4, 8, 16))) == (0x7000, 2, 2, 2)
    assert bind_c(nd((3, 5), np.int32)) is None                    # rank


class _FakeLoaded:
    """What make_fast_launch reads from a LoadedKernel, with a recording launch function."""

    def __init__(self, fmt):
        import ctypes
        import struct
        import threading
        self.packer = struct.Struct(fmt)
        self.buffer = ctypes.create_string_buffer(self.packer.size)
        self.lock = threading.Lock()
        self.packed_by = None
        self.fn_ptr, self.extra_ptr = 1234, 5678
        self.calls = []
        self.launch_kernel = lambda *a: self.calls.append(a)


class _Cfg:
    def __init__(self, grid=(4, 1, 1), block=(32, 1, 1), shared=0, stream=99):
        self.grid, self.block, self.shared, self._stream_ptr = grid, block, shared, stream
        self.dims = grid + block + (shared,)


def test_fused_launch_packs_parameters_and_launches_once():
    from gpureplace.runtime import binder
    from gpureplace.tracking import world
    x = ndarray((8,), np.float32, ptr=0xAB00)
    keys = [arguments.value_key(x)[0], arguments.value_key(2.5)[0]]
    loaded = _FakeLoaded("@Qqd")
    handed_over = []

    def general(cfg, args):
        handed_over.append(args)
        return "general"

    class Refused(Exception):
        pass

    fast = binder.make_fast_launch((x, 2.5), keys, loaded, world.age, general, (Refused,))
    assert fast(_Cfg(), x, 3.5) is None
    assert loaded.calls == [(1234, 4, 1, 1, 32, 1, 1, 0, 99, 0, 5678)]
    assert loaded.packer.unpack(loaded.buffer.raw) == (0xAB00, 8, 3.5)
    # anything different launches nothing and hands over to the general path
    assert fast(_Cfg(), ndarray((8,), np.float64), 3.5) == "general"
    assert fast(_Cfg(shared=64 * 1024), x, 3.5) == "general"
    assert fast(_Cfg(), x) == "general"                         # wrong argument count
    assert fast(_Cfg(), x, 3) == "general"                      # an int where a float was
    assert len(loaded.calls) == 1

    def refuse(*a):
        raise Refused()
    loaded.launch_kernel = refuse                               # e.g. a thread's first launch
    fast = binder.make_fast_launch((x, 2.5), keys, loaded, world.age, general, (Refused,))
    assert fast(_Cfg(), x, 3.5) == "general"
    assert loaded.lock.acquire(blocking=False)                  # the lock was released
    loaded.lock.release()
    world.bump()
    assert fast(_Cfg(), x, 3.5) == "general"
    assert len(handed_over) == 6


class _Counting(ndarray):
    """Counts reads of the data pointer (what a remembered array skips)."""
    __module__ = "cupy._core.core"
    reads = 0

    @property
    def data(self):
        type(self).reads += 1
        return self._mem

    @data.setter
    def data(self, mem):
        self._mem = mem


_Counting.__name__ = "ndarray"


def _fast(args):
    from gpureplace.runtime import binder
    from gpureplace.tracking import world
    keys = [arguments.value_key(a)[0] for a in args]
    fmt = "@" + "".join("Q" + "q" * a.ndim if hasattr(a, "ndim") else "d" for a in args)
    loaded = _FakeLoaded(fmt)
    handed = []
    fast = binder.make_fast_launch(tuple(args), keys, loaded, world.age,
                                   lambda cfg, a: handed.append(a) or "general")
    return fast, loaded, handed


def test_the_array_of_the_last_launch_is_remembered_not_reread():
    import gc
    import weakref
    x = _Counting((8,), np.float32, ptr=0x100)
    fast, loaded, handed = _fast([x, 1.0])
    _Counting.reads = 0
    for _ in range(3):
        fast(_Cfg(), x, 2.0)
    assert _Counting.reads == 1                      # read once, then remembered
    assert loaded.packer.unpack(loaded.buffer.raw) == (0x100, 8, 2.0)
    y = _Counting((5,), np.float32, ptr=0x200)       # another array: checked and packed
    fast(_Cfg(), y, 3.0)
    assert loaded.packer.unpack(loaded.buffer.raw) == (0x200, 5, 3.0)
    fast(_Cfg(), x, 4.0)
    assert loaded.packer.unpack(loaded.buffer.raw) == (0x100, 8, 4.0)
    assert not handed
    # an in-place reshape (CuPy's shape setter) is noticed: another rank takes the general path
    x.shape, x.ndim = (2, 4), 2
    assert fast(_Cfg(), x, 1.0) == "general"
    # remembering keeps nothing alive
    probe = weakref.ref(y)
    fast(_Cfg(), y, 1.0)
    del y
    gc.collect()
    assert probe() is None


def test_a_remembered_matrix_notices_a_new_shape():
    m = _Counting((4, 6), np.float64, ptr=0x300)
    fast, loaded, handed = _fast([m])
    fast(_Cfg(), m)
    assert loaded.packer.unpack(loaded.buffer.raw) == (0x300, 4, 6)
    m.shape = (6, 4)                                  # same object, same size, new shape
    m.strides = (32, 8)
    fast(_Cfg(), m)
    assert loaded.packer.unpack(loaded.buffer.raw) == (0x300, 6, 4)
    f = _Counting((4, 6), np.float64, strides=(8, 32))     # 'F': not this specialisation
    assert fast(_Cfg(), f) == "general" and len(handed) == 1


class _Recording(_FakeLoaded):
    """Records the parameter values each launch hands the driver (the buffer at that moment)."""

    def __init__(self, fmt):
        super().__init__(fmt)
        self.launch_kernel = lambda *a: self.calls.append(self.packer.unpack(self.buffer.raw))


def _mixed_fast(args, fmt):
    from gpureplace.runtime import binder
    from gpureplace.tracking import world
    keys = [arguments.value_key(a)[0] for a in args]
    loaded = _Recording(fmt)
    handed = []
    fast = binder.make_fast_launch(tuple(args), keys, loaded, world.age,
                                   lambda cfg, a: handed.append(a) or "general")
    return fast, loaded, handed


def test_unchanged_arrays_are_not_repacked_but_every_scalar_is():
    # int8, float64, int32 and a bool between arrays: each scalar sits at its aligned offset
    x = _Counting((8,), np.float32, ptr=0x100)
    m = _Counting((2, 3), np.float64, ptr=0x200)
    y = _Counting((5,), np.int32, ptr=0x300)
    args = [np.int8(-3), x, 2.5, m, 7, True, y]
    fmt = "@bQqdQqqi?Qq"
    fast, loaded, handed = _mixed_fast(args, fmt)
    fast(_Cfg(), *args)
    _Counting.reads = 0
    for k in range(4):
        fast(_Cfg(), np.int8(k), x, 0.5 * k, m, -k, k % 2 == 0, y)
        assert loaded.calls[-1] == (k, 0x100, 8, 0.5 * k, 0x200, 2, 3, -k, k % 2 == 0, 0x300, 5)
    assert _Counting.reads == 0 and not handed
    z = _Counting((9,), np.int32, ptr=0x400)          # one new array: everything packed again
    fast(_Cfg(), np.int8(1), x, 1.0, m, 2, False, z)
    assert loaded.calls[-1] == (1, 0x100, 8, 1.0, 0x200, 2, 3, 2, False, 0x400, 9)
    m.shape, m.strides = (3, 2), (16, 8)               # in-place reshape of a remembered matrix
    fast(_Cfg(), np.int8(1), x, 1.0, m, 2, False, z)
    assert loaded.calls[-1] == (1, 0x100, 8, 1.0, 0x200, 3, 2, 2, False, 0x400, 9)


def test_buffer_written_elsewhere_is_packed_again():
    x = _Counting((8,), np.float32, ptr=0x100)
    fast, loaded, _ = _mixed_fast([x, 1.0], "@Qqd")
    fast(_Cfg(), x, 1.0)
    # the general path (LoadedKernel.launch) packs other values into the same buffer
    loaded.packed_by = None
    loaded.packer.pack_into(loaded.buffer, 0, 0xDEAD, 99, 9.0)
    fast(_Cfg(), x, 2.0)
    assert loaded.calls[-1] == (0x100, 8, 2.0)
    # so does another fast launch of the same specialisation (another kernel object's)
    other, _, _ = _mixed_fast([x, 1.0], "@Qqd")
    from gpureplace.runtime import binder
    from gpureplace.tracking import world
    keys = [arguments.value_key(a)[0] for a in (x, 1.0)]
    other = binder.make_fast_launch((x, 1.0), keys, loaded, world.age, lambda c, a: "general")
    y = _Counting((3,), np.float32, ptr=0x900)
    other(_Cfg(), y, 5.0)
    assert loaded.calls[-1] == (0x900, 3, 5.0)
    fast(_Cfg(), x, 6.0)
    assert loaded.calls[-1] == (0x100, 8, 6.0)


def test_a_failed_launch_leaves_nothing_half_packed():
    x = _Counting((8,), np.float32, ptr=0x100)
    y = _Counting((4,), np.float32, ptr=0x200)
    fast, loaded, handed = _mixed_fast([x, y, 1], "@QqQqi")
    fast(_Cfg(), x, y, 1)
    # a value that does not fit its parameter: nothing launched, the general path decides
    assert fast(_Cfg(), x, y, 2**40) == "general"
    # a new first array is remembered before the second fails its check
    z = _Counting((6,), np.float32, ptr=0x300)
    assert fast(_Cfg(), z, _Counting((4,), np.float64), 1) == "general"
    assert len(loaded.calls) == 1
    fast(_Cfg(), z, y, 3)                              # z is remembered: still packed in full
    assert loaded.calls[-1] == (0x300, 6, 0x200, 4, 3)
    assert loaded.lock.acquire(blocking=False)
    loaded.lock.release()
    assert len(handed) == 2


def test_threads_launching_other_arrays_each_launch_their_own():
    import threading
    arrays = [_Counting((8 + t,), np.float32, ptr=0x1000 * (t + 1)) for t in range(4)]
    fast, loaded, handed = _mixed_fast([arrays[0], 0], "@Qqi")
    errors = []

    def work(t):
        try:
            for k in range(2000):
                fast(_Cfg(), arrays[t if k % 3 else (t + 1) % 4], t)
        except BaseException as exc:       # pragma: no cover - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                     # switch threads as often as possible
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors and not handed and len(loaded.calls) == 8000
    for ptr, size, t in loaded.calls:
        assert size == 8 + ptr // 0x1000 - 1
        assert ptr in (0x1000 * (t + 1), 0x1000 * ((t + 1) % 4 + 1))


def test_tuples_and_complex_between_remembered_arrays_are_packed_each_launch():
    x = _Counting((8,), np.float32, ptr=0x100)
    y = _Counting((2, 2), np.int64, ptr=0x200)
    args = [x, (1, 2.5), 1 + 2j, y, np.float32(0.5)]
    fast, loaded, handed = _mixed_fast(args, "@QqqdddQqqf")
    fast(_Cfg(), *args)
    assert loaded.calls[-1] == (0x100, 8, 1, 2.5, 1.0, 2.0, 0x200, 2, 2, 0.5)
    fast(_Cfg(), x, (-7, 0.25), 3 - 1j, y, np.float32(4))
    assert loaded.calls[-1] == (0x100, 8, -7, 0.25, 3.0, -1.0, 0x200, 2, 2, 4.0)
    assert fast(_Cfg(), x, (1, 2), 1j, y, np.float32(4)) == "general"     # (int, int) tuple
    assert not handed[:-1] and len(loaded.calls) == 2


def test_zero_dimensional_arrays_pass_only_their_pointer(array_class):
    """A 0-d array (``cupy.zeros(())``) passes its data pointer and nothing else; the binder
    accepts another 0-d array and refuses a 1-element vector."""
    nd = array_class
    acc = nd((), np.float64)
    bind, flat = _bind(acc, 2.0)
    assert flat == (0x7000, 2.0)
    assert bind(acc, 3.0) == (0x7000, 3.0)
    assert bind(nd((), np.float64, ptr=0x9000), 3.0) == (0x9000, 3.0)
    assert bind(nd((1,), np.float64), 3.0) is None
    assert bind(nd((), np.float32), 3.0) is None


def test_an_int_of_2_to_the_63_or_more_is_uint64_and_only_such_ints_take_its_path():
    """numba types such an int uint64; smaller ints stay int64 (their own specialisation)."""
    big = 2**63 + 5
    assert arguments.value_key(big) == (("scalar", np.dtype(np.uint64)), (big,))
    assert arguments.value_key(2**63 - 1)[0] == ("int64",)
    assert arguments.numba_type_of_key(arguments.value_key(big)[0]).name == "uint64"
    with pytest.raises(arguments.ArgumentError, match="does not fit in 64 bits"):
        arguments.value_key(2**64)
    with pytest.raises(arguments.ArgumentError, match="does not fit in 64 bits"):
        arguments.value_key(-2**63 - 1)
    bind, flat = _bind(big)
    assert bind(big) == flat == (big,)
    assert bind(2**64 - 1) == (2**64 - 1,)
    assert bind(7) is None                    # an int64 launch: the general path
    bind64, _ = _bind(7)
    assert bind64(big) == (big,)              # (packing it as int64 fails: the general path)


def test_a_launch_with_keyword_arguments_is_refused_by_the_kernels_name():
    from gpureplace import cuda

    @cuda.jit
    def takes_n(out, n):
        out[0] = n

    out = np.zeros(1, np.int64)
    for _ in range(2):                        # the first launch, and the fast path's
        with pytest.raises(TypeError, match=r"takes_n\[blocks, threads\]\(\) got an unexpected "
                                            r"keyword argument 'n'"):
            takes_n[1, 1](out, n=3)
        takes_n[1, 1](out, 3)
    assert out[0] == 3
    # the fast path (GPU launches after the first) says the same through Python's own message
    from gpureplace.runtime import binder
    from gpureplace.tracking import world
    fast = binder.make_fast_launch((out, 3), [arguments.value_key(3)[0]] * 2, _FakeLoaded("@qq"),
                                   world.age, lambda cfg, a: None, label="takes_n[blocks, threads]")
    with pytest.raises(TypeError, match=r"^takes_n\[blocks, threads\]\(\) got an unexpected"):
        fast(_Cfg(), out, n=3)


def test_a_kernel_given_an_int_of_2_to_the_63_computes_in_uint64():
    from gpureplace import cuda

    @cuda.jit
    def minus_one(out, v):
        out[0] = v - 1

    out = np.zeros(1, np.uint64)
    minus_one[1, 1](out, 2**64 - 1)
    assert out[0] == 2**64 - 2
    minus_one[1, 1](out, 5)                   # int64 again: its own specialisation
    assert out[0] == 4


# --- misaligned arrays: the general path refuses them (the GPU faults, ending the context) -----

def test_misaligned_device_arrays_go_to_the_general_path_which_names_the_problem(array_class):
    nd = array_class
    x = nd((8,), np.float32, ptr=0x1000)
    bind, _ = _bind(x, 1.0)
    assert bind(nd((4,), np.float32, ptr=0x2000), 1.0) == (0x2000, 4, 1.0)
    assert bind(nd((4,), np.float32, ptr=0x2002), 1.0) is None      # not a multiple of 4
    m = nd((4, 4), np.float64, strides=(64, 16), ptr=0x1000)          # 'A': strides too
    bind, _ = _bind(m)
    assert bind(nd((4, 4), np.float64, strides=(64, 16), ptr=0x3000)) is not None
    assert bind(nd((4, 4), np.float64, strides=(64, 12), ptr=0x3000)) is None
    assert bind(nd((4, 4), np.float64, strides=(64, 16), ptr=0x3004)) is None
    with pytest.raises(arguments.ArgumentError, match=r"address 0x2002, which is not a multiple "
                                                      r"of 4 bytes.*float32"):
        arguments.value_key(nd((4,), np.float32, ptr=0x2002))
    with pytest.raises(arguments.ArgumentError, match=r"stride of 12 bytes along axis 1"):
        arguments.value_key(nd((4, 4), np.float64, strides=(64, 12), ptr=0x3000))


def test_a_remembered_array_is_checked_when_it_is_taken():
    x = _Counting((8,), np.float32, ptr=0x100)
    fast, loaded, handed = _fast([x, 1.0])
    fast(_Cfg(), x, 2.0)
    assert not handed
    y = _Counting((8,), np.float32, ptr=0x102)
    assert fast(_Cfg(), y, 2.0) == "general" and handed[-1][0] is y
    m = _Counting((2, 4), np.float64, ptr=0x200)
    fast, loaded, handed = _fast([m])
    fast(_Cfg(), m)
    assert not handed
    assert fast(_Cfg(), _Counting((2, 4), np.float64, ptr=0x204)) == "general"


def test_alignment_of_records_and_complex_numbers():
    from gpureplace.compiler.abi import element_alignment, misalignment
    packed = np.dtype([("a", "f8"), ("b", "i4")])              # 12 bytes: every other 'a' odd
    assert element_alignment(packed) == 8 and element_alignment(np.dtype("c8")) == 4
    assert "align=True" in misalignment(packed, 0x1000, (4,), (12,))
    assert misalignment(np.dtype([("a", "f8"), ("b", "i4")], align=True), 0x1000, (4,),
                        (16,)) is None
    assert misalignment(packed, 0x1000, (1,), (12,)) is None       # one element: aligned
    assert misalignment(np.dtype("f4"), 0x1001, (0,), (4,)) is None   # nothing to load


def test_an_interface_with_a_null_address_for_elements_is_refused_on_the_gpu_path():
    class Foreign:
        def __init__(self, shape, ptr):
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4",
                                             "data": (ptr, False), "version": 3}
    with pytest.raises(arguments.ArgumentError, match=r"'data' is \(0, False\), a NULL address, "
                                                      r"for the 8 elements of its 'shape' \(8,\)"):
        arguments.value_key(Foreign((8,), 0))
    assert arguments.value_key(Foreign((0,), 0))[0][0] == "array"      # empty: no memory
    assert arguments.value_key(Foreign((8,), 0x1000))[1][0] == 0x1000
