"""Which declared signature a call takes, as Numba chooses it: conversions ranked by Numba's
table (int64 -> float64 safe, int64 -> float32 unsafe), IntEnum members as their integers, ties
refused at a launch and the first taken in a device function's call; a ``specialize()``d kernel
taking any array its one specialisation takes; a kernel given its signatures compiling no
others."""

import enum

import numpy as np
import pytest
from numba.core import types as t
from numba.core.typeconv.rules import default_type_manager

from gpureplace import LaunchError, cuda
from gpureplace.compiler.ranking import _RANKS, PROMOTE, SAFE, UNSAFE, conversion_rank
from gpureplace.config import settings
from gpureplace.errors import SignatureError
from gpureplace.runtime import arguments, conversion

from fake_cupy import ndarray
from test_launch_path import fake_gpu  # noqa: F401  (the fixture: a stand-in device)

NUMBERS = [t.boolean, t.int8, t.uint8, t.int16, t.uint16, t.int32, t.uint32, t.int64, t.uint64,
           t.float16, t.float32, t.float64, t.complex64, t.complex128]


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


class Mode(enum.IntEnum):
    FAST = 1
    SLOW = 2


# -- ranking ---------------------------------------------------------------------------------

def test_number_conversions_rank_as_numbas_table():
    # every pair of Numba's number types, bool included, as Numba's own type manager ranks it
    for src in NUMBERS:
        for dst in NUMBERS:
            numba = default_type_manager.check_compatible(src, dst)
            want = None if numba is None else _RANKS[numba]
            assert conversion_rank(src, dst, float_to_int=True) == want, (src, dst)
    assert conversion_rank(t.int64, t.float64) == SAFE          # not by the mantissa's width
    assert conversion_rank(t.uint64, t.float64) == SAFE
    assert conversion_rank(t.int32, t.float64) == SAFE
    assert conversion_rank(t.int64, t.float32) == UNSAFE
    assert conversion_rank(t.int16, t.float32) == SAFE
    assert conversion_rank(t.uint8, t.float32) == SAFE
    assert conversion_rank(t.uint16, t.float32) == UNSAFE
    assert conversion_rank(t.int8, t.float16) == SAFE
    assert conversion_rank(t.uint8, t.float16) == UNSAFE
    assert conversion_rank(t.int16, t.complex64) == SAFE
    assert conversion_rank(t.int32, t.complex64) == UNSAFE
    # a launch converts no float to an integer or a bool (numba-cuda's launches neither)
    for src in (t.float16, t.float32, t.float64):
        assert conversion_rank(src, t.int64) is None
        assert conversion_rank(src, t.boolean) is None
    assert conversion_rank(t.int64, t.boolean) == UNSAFE
    assert conversion_rank(t.complex128, t.boolean, float_to_int=True) is None
    # constants: as their type, at best a promotion (Numba's Literal.can_convert_to)
    assert conversion_rank(t.literal(5), t.int64) == PROMOTE
    assert conversion_rank(t.literal(5), t.float64) == SAFE
    # a C-contiguous array where any layout is declared: safe, as Numba's arrays convert
    assert conversion_rank(t.float64[::1], t.float64[:]) == SAFE


def test_int_enum_members_convert_as_their_integers():
    member = arguments.numba_type_of_key(arguments.value_key(Mode.SLOW)[0])
    assert isinstance(member, t.IntEnumMember)
    assert conversion_rank(member, t.int64) == SAFE             # Numba: at best safe
    assert conversion_rank(member, t.int32) == UNSAFE
    assert conversion_rank(member, t.float64) == SAFE
    assert conversion_rank(member, t.float32) == UNSAFE
    assert conversion_rank(member, t.float64[:]) is None
    assert conversion_rank(member, t.CPointer(t.float32)) is None
    # the GPU's conversion of the launch's parameters
    keys, values = conversion.match_signature([(t.int32,), (t.int64,)],
                                              [("enum", Mode, ("int64",))], [(2,)])
    assert keys == [("scalar", np.dtype("int64"))] and values == [2]
    assert conversion.as_scalar_of(Mode.SLOW, t.int32) == np.int32(2)


# -- kernels and device functions given signatures -------------------------------------------

def store(out, x):
    out[0] = x


def test_an_int_takes_the_float64_signature(simulated):
    k = cuda.jit(["void(float64[:], float32)", "void(float64[:], float64)"])(store)
    out = np.zeros(1)
    k[1, 1](out, 16777217)                  # float32 would round it to 16777216
    assert out[0] == 16777217.0
    keys, values = conversion.match_signature([(t.float64[:], t.float32),
                                               (t.float64[:], t.float64)],
                                              [("array", np.dtype("float64"), 1, "C"),
                                               ("int64",)], [(100, 1), (16777217,)])
    assert keys[1] == ("scalar", np.dtype("float64"))


def test_ties_are_refused_at_a_launch(simulated):
    # int64 -> int32 and int64 -> float32 are both unsafe: numba-cuda's "ambiguous" too
    k = cuda.jit(["void(float64[:], int32)", "void(float64[:], float32)"])(store)
    with pytest.raises(SignatureError, match=r"ambiguous call of store with .*signatures "
                                             r"\(array\(float64, 1d, A\), int32\) and "
                                             r"\(array\(float64, 1d, A\), float32\)"):
        k[1, 1](np.zeros(1), 5)


@cuda.jit(["float32(float32)", "float64(float64)"], device=True)
def ident(x):
    return x


@cuda.jit(["int32(int32)", "float32(float32)"], device=True)
def tied(x):
    return x


@cuda.jit
def call_ident(out, n):
    out[0] = ident(n)                       # an int64: the float64 signature
    out[1] = ident(16777217)                # a constant too
    out[2] = tied(n)                        # a tie: the first declared, as Numba's typing


def test_a_device_function_takes_numbas_choice(simulated):
    spec = call_ident.compile("void(float64[::1], int64)")
    assert "cvt.rn.f64.s64" in spec.ptx and "cvt.rn.f32.s64" not in spec.ptx
    out = np.zeros(3)
    call_ident[1, 1](out, 16777217)
    assert out[0] == 16777217.0 and out[1] == 16777217.0
    assert out[2] == 16777217.0             # through int32, exact

    import numba                            # Numba's own choice, on the CPU
    nident = numba.njit(["float32(float32)", "float64(float64)"])(ident.py_func)
    ntied = numba.njit(["int32(int32)", "float32(float32)"])(tied.py_func)

    @numba.njit
    def ncall(out, n):
        out[0] = nident(n)
        out[2] = ntied(n)
    ref = np.zeros(3)
    ncall(ref, 16777217)
    assert ref[0] == out[0] and ref[2] == out[2]


def scaled(out, m):
    out[0] = m * 10


def test_an_int_enum_member_for_an_integer_parameter(simulated):
    k = cuda.jit("void(int64[:], int64)")(scaled)
    out = np.zeros(1, np.int64)
    k[1, 1](out, Mode.SLOW)
    assert out[0] == 20
    both = cuda.jit(["void(int64[:], int32)", "void(int64[:], int64)"])(scaled)
    both[1, 1](out, Mode.FAST)              # int64: safe; int32: unsafe
    assert out[0] == 10
    assert len(both.overloads) == 2


# -- specialize() ----------------------------------------------------------------------------

def copy_body(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i]


def test_a_kernel_specialized_for_any_layout_takes_contiguous_arrays(simulated):
    k = cuda.jit(copy_body)
    out = np.zeros(5)
    ks = k.specialize(np.arange(10.)[::2], out)
    assert [str(x) for x in next(iter(ks.overloads))] == ["array(float64, 1d, A)",
                                                          "array(float64, 1d, C)"]
    ks[1, 8](np.arange(5.) + 1, out)        # C where 'A' was specialized
    assert (out == np.arange(5.) + 1).all()
    assert len(ks.overloads) == 1           # its one specialisation ran
    # compile() of the types its launches take gives that one; others are refused
    assert ks.compile((t.float64[::1], t.float64[::1])) is next(iter(ks.overloads.values()))
    with pytest.raises(RuntimeError, match=r"Compilation disabled: copy_body was specialized"):
        ks.compile((t.int64[::1], t.float64[::1]))
    assert len(ks.overloads) == 1
    # anything else is refused, naming the argument
    with pytest.raises(LaunchError, match=r"argument 0 \('a'\) is array\(int64, 1d, C\), where "
                                          r"it takes array\(float64, 1d, A\)"):
        ks[1, 8](np.arange(5), out)
    with pytest.raises(LaunchError, match=r"argument 1 \('out'\) is array\(float64, 1d, A\)"):
        ks[1, 8](np.arange(5.), np.zeros(10)[::2])      # 'C' was specialized for out


def copy2d(a, out):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        out[i, j] = a[i, j]


def test_fortran_arrays_and_read_only_specialisations(simulated):
    k = cuda.jit(copy2d)
    out = np.zeros((3, 4))
    ks = k.specialize(np.ones((6, 4))[::2], out)
    src = np.asfortranarray(np.arange(12.).reshape(3, 4))
    ks[1, (4, 4)](src, out)                 # F where 'A' was specialized
    assert (out == src).all() and len(ks.overloads) == 1
    ro = np.arange(12.).reshape(3, 4)
    ro.flags.writeable = False
    kr = k.specialize(ro, out)              # read-only: a writable array runs it too
    kr[1, (4, 4)](np.arange(12.).reshape(3, 4) * 2, out)
    assert (out == np.arange(12.).reshape(3, 4) * 2).all() and len(kr.overloads) == 1
    kw = k.specialize(np.ones((3, 4)), out)     # writable: a read-only one is refused
    with pytest.raises(LaunchError, match=r"argument 0 \('a'\) is readonly array"):
        kw[1, (4, 4)](ro, out)


def test_the_gpu_launch_runs_the_one_specialisation_with_strides(fake_gpu):  # noqa: F811
    # the GPU's launch path, with a stand-in device that records what would be launched
    ks = cuda.jit(copy_body).specialize(ndarray((5,), np.float64, strides=(16,), ptr=0x1000),
                                        ndarray((5,), np.float64, strides=(16,), ptr=0x2000))
    ks[1, 8](ndarray((5,), np.float64, ptr=0x3000), ndarray((5,), np.float64, ptr=0x2000))
    assert len(fake_gpu) == 1 and len(ks.overloads) == 1       # nothing else compiled
    # the 'A' parameters get the contiguous arrays' strides
    assert fake_gpu[0].calls[-1][4] == (0x3000, 5, 8, 0x2000, 5, 8)
    ks[1, 8](ndarray((5,), np.float64, ptr=0x4000),            # the fast path
             ndarray((5,), np.float64, strides=(24,), ptr=0x2000))
    assert fake_gpu[0].calls[-1][4] == (0x4000, 5, 8, 0x2000, 5, 24)
    assert len(fake_gpu) == 1
    with pytest.raises(LaunchError, match=r"argument 1 \('out'\) is array\(float32, 1d, C\)"):
        ks[1, 8](ndarray((5,), np.float64), ndarray((5,), np.float32))


def test_an_any_layout_parameter_beside_a_remembered_array(fake_gpu):  # noqa: F811
    ks = cuda.jit(copy_body).specialize(ndarray((5,), np.float64, strides=(16,), ptr=0x1000),
                                        ndarray((5,), np.float64, ptr=0x2000))
    """A contiguous array given for an 'A' parameter passes its strides too (one value more than
    the array's own), beside an argument the fast launch remembers (the second array, the same
    each time): the packing of the values that change counts the parameter's values."""
    ks[1, 8](ndarray((5,), np.float64, ptr=0x3000), ndarray((5,), np.float64, ptr=0x2000))
    assert fake_gpu[0].calls[-1][4] == (0x3000, 5, 8, 0x2000, 5)
    ks[1, 8](ndarray((5,), np.float64, ptr=0x5000), ndarray((5,), np.float64, ptr=0x2000))
    assert fake_gpu[0].calls[-1][4] == (0x5000, 5, 8, 0x2000, 5)


# -- compile() of a kernel given its signatures ------------------------------------------------

def fill(a):
    a[0] = 1


def test_a_kernel_given_signatures_compiles_no_others(simulated):
    k = cuda.jit(["void(float32[:])"])(fill)
    with pytest.raises(RuntimeError, match=r"Compilation disabled: fill was given its "
                                           r"signature\(s\) \(array\(float32, 1d, A\)\)"):
        k.compile("void(float64[:])")
    assert [tuple(map(str, s)) for s in k.signatures] == [("array(float32, 1d, A)",)]
    assert k.compile("void(float32[:])") is next(iter(k.overloads.values()))
    a = np.zeros(1, np.float32)
    k[1, 1](a)
    assert a[0] == 1
    with pytest.raises(SignatureError, match="takes no others"):
        k[1, 1](np.zeros(1))
