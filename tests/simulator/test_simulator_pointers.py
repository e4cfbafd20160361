"""Pointers in the simulator: a ``CPointer`` argument and ``numba.carray`` / ``numba.farray``
views of one.

The simulator's memory is the process's own, so an access through a pointer must never reach
memory the process does not have: where the allocation the pointer points into is known (a
simulated device array, an array argument of the same launch) an index outside it raises an
IndexError naming the thread and line; elsewhere (a host address, ``h.ctypes.data``; a made-up
number) the bytes touched must be mapped, readable (writable for a store) memory of this process
(``/proc/self/maps``), else the same kind of error names the address -- on the GPU an illegal
address.  The cases that crashed the process (SIGSEGV) before run in a subprocess, so that a
crash fails them instead of pytest.  A null pointer is passed (as numba-cuda passes it) and an
access through it refused; a negative address is refused at the launch, naming the argument.  An exception raised inside a library's code that the kernel called
(Numba's host ``carray`` before the simulator had its own) is an error of the launch, never
reported as the kernel's own ``raise``.
"""

import json
import os
import re
import subprocess
import sys
import warnings

import numba
import numpy as np
import pytest
from numba import types as nbt

from conftest import line_of
from gpureplace import cuda, simulator
from gpureplace.runtime import arguments, binder, conversion
from gpureplace.simulator.raises import KernelRaisedWarning


@pytest.fixture(autouse=True)
def simulator_backend(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")


def _address(device_array):
    return device_array.__cuda_array_interface__["data"][0]


# ---------------------------------------------------------------------------------------------
# Unknown memory: each case once crashed the process; all run in one fresh interpreter


SCRIPT = '''
import ctypes
import json

import numba
import numpy as np

from gpureplace import cuda
from gpureplace.simulator import pointers


def case(name, run):
    try:
        value = run()
    except Exception as exc:
        got = {"error": type(exc).__name__, "message": str(exc)}
    else:
        got = {"error": None, "value": value}
    print(json.dumps({name: got}), flush=True)      # (what came before a crash is kept)


@cuda.jit("void(CPointer(float64), int64)")
def put(p, i):
    p[i] = 1.0                                       # PUT


@cuda.jit("void(CPointer(float64), int64, float64[:])")
def get(p, i, out):
    out[0] = p[i]                                    # GET


@cuda.jit("void(CPointer(float64), int64, int64)")
def view(p, n, i):
    a = numba.carray(p, (n,))                        # VIEW
    a[i] = 7.0                                       # VIEW STORE


@cuda.jit("void(CPointer(float64), int64, float64[:])")
def synced(p, i, out):
    cuda.syncthreads()
    out[cuda.threadIdx.x] = p[i + cuda.threadIdx.x]  # SYNCED


h = np.zeros(4)
out = np.zeros(4)
code = ctypes.cast(ctypes.pythonapi.Py_Initialize, ctypes.c_void_p).value     # read-only
# memory of no NumPy array the launching code holds: only the process's maps bound it
raw = ctypes.create_string_buffer(32)
unknown = ctypes.addressof(raw)


def in_range():
    put[1, 1](h.ctypes.data, 3)
    return h.tolist()


def load(address, index=0):
    get[1, 1](address, index, out)
    return float(out[0])


def freed():
    big = np.ones(8 << 20)                           # 64 MiB: its own mapping, unmapped by del
    address = big.ctypes.data
    first = load(address)                            # (the maps are read, and cached)
    del big
    return first, load(address)                      # the cached maps must not let it through


def no_maps():
    kept = pointers.process_memory
    pointers.process_memory = pointers.ProcessMemory("/nonexistent/maps")
    try:
        d = cuda.to_device(np.zeros(2))
        put[1, 1](d.__cuda_array_interface__["data"][0], 1)     # a known allocation: fine
        assert d.copy_to_host().tolist() == [0.0, 1.0]
        put[1, 1](unknown, 0)
    finally:
        pointers.process_memory = kept


vvar = [line for line in open("/proc/self/maps") if line.rstrip().endswith("[vvar]")]
case("in_range", in_range)
case("far_store", lambda: put[1, 1](unknown, 10**9))
case("past_host_array", lambda: put[1, 1](h.ctypes.data, 4))
case("past_local_array", lambda: (lambda a: put[1, 1](a[1:].ctypes.data, -2))(np.zeros(3)))
case("made_up_store", lambda: put[1, 1](12345, 5))
case("made_up_load", lambda: load(12345))
case("code_load", lambda: load(code))
case("code_store", lambda: put[1, 1](code, 0))
case("vvar_load", lambda: load(int(vvar[0].split("-")[0], 16)) if vvar else "no [vvar]")
case("freed", freed)
case("no_maps", no_maps)
case("view_in_range", lambda: (view[1, 1](h.ctypes.data, 4, 1), h.tolist())[1])
case("view_unmapped", lambda: view[1, 1](4096, 4, 0))
case("view_huge", lambda: view[1, 1](unknown, 10**12, 0))
case("view_past_host_array", lambda: view[1, 1](h.ctypes.data, 5, 0))
case("view_read_only", lambda: view[1, 1](code, 2, 0))
case("threaded", lambda: synced[1, 4](unknown, 10**9, out))
print(json.dumps({"done": True}), flush=True)
'''


@pytest.fixture(scope="module")
def unknown_memory(tmp_path_factory):
    """``(returncode, stderr, {case: result}, script path, lines of marked statements)`` of
    SCRIPT run in a fresh interpreter on the simulator."""
    path = tmp_path_factory.mktemp("pointers") / "pointers_script.py"
    path.write_text(SCRIPT)
    env = dict(os.environ, GPUREPLACE_BACKEND="simulator", GPUREPLACE_PREWARM="0")
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env,
                          timeout=600)
    results = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            results.update(json.loads(line))
    marks = {}
    for number, line in enumerate(SCRIPT.splitlines(), 1):
        if "# " in line and line.split("# ")[-1].isupper():
            marks[line.split("# ")[-1]] = number
    return done.returncode, done.stderr, results, str(path), marks


def _result(unknown_memory, name):
    rc, stderr, results, _, _ = unknown_memory
    assert rc == 0 and results.get("done"), (
        f"the script ended with return code {rc} (-11: a segmentation fault) before it "
        f"finished; cases it finished: {sorted(results)}\n{stderr[-3000:]}")
    return results[name]


def _error(unknown_memory, name, mark):
    got = _result(unknown_memory, name)
    assert got["error"] == "IndexError", got
    _, _, _, path, marks = unknown_memory
    text = got["message"]
    assert f"{path}:{marks[mark]}" in text, text          # the user's line
    assert "threadIdx=(" in text and "blockIdx=(0, 0, 0)" in text, text
    return text


def test_a_host_pointer_indexed_in_its_array_works(unknown_memory):
    assert _result(unknown_memory, "in_range")["value"] == [0.0, 0.0, 0.0, 1.0]


def test_a_store_far_past_a_host_array_raises_instead_of_crashing(unknown_memory):
    text = _error(unknown_memory, "far_store", "PUT")
    assert text.startswith("index 1000000000 of a pointer to float64 at 0x"), text
    assert "which are not writable memory of this process (on the GPU: an illegal address)" \
        in text, text
    assert "kernel put, simulator" in text, text


@pytest.mark.parametrize("name, first, last", [("past_host_array", 0, 3),
                                               ("past_local_array", -1, 1)])
def test_a_pointer_into_a_host_array_the_caller_holds_is_bounded_by_it(unknown_memory, name,
                                                                         first, last):
    """``a.ctypes.data`` of a host array the launching code holds (a global, a local of a
    caller): an index past its end is an IndexError, where the process's maps let a store land
    in the heap (a write of 400 KB past a 16-byte array crashed the process later)."""
    text = _error(unknown_memory, name, "PUT")
    assert text.startswith(f"index {4 if first == 0 else -2} of a pointer to float64 is outside "
                           f"the allocation it points into"), text
    assert f"indices {first} to {last} from this pointer are in it" in text, text


def test_a_view_past_a_host_array_is_refused_at_the_carray(unknown_memory):
    text = _error(unknown_memory, "view_past_host_array", "VIEW")
    assert text.startswith("numba.carray(pointer, "), text


@pytest.mark.parametrize("name, mark, what", [("made_up_store", "PUT", "stores to bytes 0x3061"),
                                              ("made_up_load", "GET", "reads bytes 0x3039")])
def test_a_made_up_address_raises_naming_it(unknown_memory, name, mark, what):
    text = _error(unknown_memory, name, mark)
    assert f"of a pointer to float64 at 0x3039 {what}" in text, text     # 12345 = 0x3039
    assert "not writable" in text if name == "made_up_store" else "not readable" in text


def test_read_only_memory_is_read_but_never_stored_to(unknown_memory):
    assert _result(unknown_memory, "code_load")["error"] is None
    text = _error(unknown_memory, "code_store", "PUT")
    assert "not writable memory of this process" in text, text


def test_special_mappings_are_not_memory_a_pointer_may_read(unknown_memory):
    got = _result(unknown_memory, "vvar_load")
    if got.get("value") == "no [vvar]":
        pytest.skip("no [vvar] mapping here")
    assert "not readable memory of this process" in _error(unknown_memory, "vvar_load", "GET")


def test_memory_unmapped_since_an_earlier_launch_is_refused(unknown_memory):
    got = _result(unknown_memory, "freed")
    assert got["error"] == "IndexError", got
    assert "not readable memory of this process" in got["message"], got


def test_without_proc_maps_unknown_addresses_are_refused(unknown_memory):
    text = _error(unknown_memory, "no_maps", "PUT")
    assert "cannot check are memory of this process (there is no /nonexistent/maps here)" \
        in text, text


def test_a_view_of_a_host_pointer_reaches_its_memory(unknown_memory):
    assert _result(unknown_memory, "view_in_range")["value"] == [0.0, 7.0, 0.0, 1.0]


@pytest.mark.parametrize("name", ["view_unmapped", "view_huge"])
def test_a_view_of_unmapped_memory_is_refused_at_the_carray(unknown_memory, name):
    text = _error(unknown_memory, name, "VIEW")
    assert text.startswith("numba.carray(pointer, "), text
    assert "which are not readable memory of this process" in text, text


def test_a_view_of_read_only_memory_refuses_stores(unknown_memory):
    text = _error(unknown_memory, "view_read_only", "VIEW STORE")
    assert "a store at index 0 of a numba.carray view of memory that is not writable" in text


def test_threaded_kernels_check_pointers_too(unknown_memory):
    text = _error(unknown_memory, "threaded", "SYNCED")
    assert re.match(r"index 100000000[0-3] of a pointer to float64 at 0x", text), text


# ---------------------------------------------------------------------------------------------
# Null pointers: passed, as numba-cuda passes them; an access through one is an error


@cuda.jit("void(CPointer(float64), int64)")
def _put(p, i):
    p[i] = 1.0


@cuda.jit("void(CPointer(float64), int64, float64[::1])")
def _maybe_put(p, use, out):
    out[0] = 2.0
    if use:
        p[0] = 1.0


@pytest.mark.parametrize("value", [0, np.int64(0)])
def test_a_null_pointer_is_passed_and_an_access_through_it_refused(value):
    out = np.zeros(1)
    _maybe_put[1, 1](value, 0, out)                  # never read: fine, as on the GPU
    assert out[0] == 2.0
    with pytest.raises(IndexError, match=r"index 0 of a null pointer to float64 stores to "
                                         r"address 0x0 \(the GPU's illegal address\)"):
        _maybe_put[1, 1](value, 1, out)


def test_none_and_negative_addresses_are_refused_naming_the_argument():
    with pytest.raises(arguments.ArgumentError,
                       match=r"^_put: argument 0 \('p'\) is None, which kernels cannot take"):
        _put[1, 1](None, 5)
    with pytest.raises(arguments.ArgumentError,
                       match=r"^_put: argument 0 \('p'\) is -8, a negative address"):
        _put[1, 1](-8, 5)


def test_the_gpu_path_refuses_a_negative_address_in_the_same_words():
    sig = [(nbt.CPointer(nbt.float64), nbt.int64)]
    with pytest.raises(arguments.ArgumentError) as gpu:
        conversion.match_signature(sig, [("int64",), ("int64",)], [(-8,), (5,)], "_put")
    with pytest.raises(arguments.ArgumentError) as sim:
        _put[1, 1](-8, 5)
    said = conversion.pointer_refusal(-8, nbt.CPointer(nbt.float64))
    assert str(gpu.value) == f"_put: argument 0 {said}"
    assert str(sim.value) == f"_put: argument 0 ('p') {said}"
    # an address, and null, convert as before (numba-cuda passes 0)
    for address in (4096, 0):
        keys, values = conversion.match_signature(sig, [("int64",), ("int64",)],
                                                  [(address,), (5,)])
        assert keys[0] == ("pointer", np.dtype("float64")) and values == [address, 5]
    # the generated fast path of later launches hands negatives to the general path
    lines = binder._checks([4096, np.int64(4096)], [("pointer", np.dtype("float64"))] * 2)[0]
    assert "if a0 < 0: return None" in lines[0][0]
    assert "if a1 < 0: return None" in lines[1][0]


# ---------------------------------------------------------------------------------------------
# numba.carray / numba.farray of a pointer: views of its memory, bounds-checked


@pytest.mark.parametrize("make", ["carray", "farray"])
def test_carray_of_a_pointer_is_a_view_in_the_simulator(make):
    cfarray = getattr(numba, make)

    @cuda.jit(nbt.void(nbt.CPointer(nbt.float32)))
    def add(a_ptr):
        a = cfarray(a_ptr, (2, 3), dtype=np.float32)
        a[1, 0] += 1.5
        a[0, 1] = a[1, 0] * 2

    d = cuda.to_device(np.arange(6, dtype=np.float32))
    add[1, 1](_address(d))
    # (as the compiled code's offsets: [1, 0] is 3 elements in (C order) or 1 in (F order),
    # [0, 1] is 1 element in (C) or 2 in (F))
    expected = np.arange(6, dtype=np.float32)
    first, second = (3, 1) if make == "carray" else (1, 2)
    expected[first] += 1.5
    expected[second] = expected[first] * 2
    assert d.copy_to_host().tolist() == expected.tolist()


def test_carray_views_take_an_int_shape_and_a_dtype_and_store_as_the_device():
    @cuda.jit("void(CPointer(int32), int64)")
    def k(p, n):
        a = numba.carray(p, n, dtype=numba.int32)
        b = numba.carray(p, (n,), np.int32)
        a[0] = 2**31 + 5                       # a truncating store, as on the device
        b[n - 1] = a[0] + 1

    d = cuda.to_device(np.zeros(4, np.int32))
    k[1, 1](_address(d), 4)
    assert d.copy_to_host().tolist() == [-2**31 + 5, 0, 0, -2**31 + 6]


def _view_store(p, n, i):
    a = numba.carray(p, (n,))
    a[i] = 7.0


def test_an_index_out_of_a_view_raises_naming_thread_and_line():
    k = cuda.jit("void(CPointer(float64), int64, int64)")(_view_store)
    d = cuda.to_device(np.zeros(6))
    with pytest.raises(IndexError, match=r"index 6 is out of bounds for axis 0 with size 6: "
                                         r"index 6 of an array of shape \(6,\), in _view_store "
                                         rf"at .*:{line_of(_view_store, 'a[i] = 7.0')}, thread "
                                         r"threadIdx=\(0, 0, 0\)"):
        k[1, 1](_address(d), 6, 6)
    with pytest.raises(IndexError, match=r"index -7 is out of bounds"):
        k[1, 1](_address(d), 6, -7)
    assert not d.copy_to_host().any()


def test_a_view_longer_than_the_allocation_is_refused_at_the_carray():
    k = cuda.jit("void(CPointer(float64), int64, int64)")(_view_store)
    d = cuda.to_device(np.zeros(6))
    line = line_of(_view_store, "numba.carray")
    with pytest.raises(IndexError, match=r"numba.carray\(pointer, 7, float64\) needs 56 bytes from "
                                         r"address 0x[0-9a-f]+, but the allocation it points "
                                         r"into ends 48 bytes after it \(6 elements of float64\)"
                                         rf", in _view_store at .*:{line}, thread"):
        k[1, 1](_address(d), 7, 0)
    # from the middle of the allocation: what is left of it
    with pytest.raises(IndexError, match=r"ends 16 bytes after it \(2 elements"):
        k[1, 1](_address(d[4:]), 3, 0)
    k[1, 1](_address(d[4:]), 2, 1)
    assert d.copy_to_host().tolist() == [0, 0, 0, 0, 0, 7.0]
    with pytest.raises(ValueError, match=r"numba.carray\(pointer, -1, float64\): a negative "
                                         r"dimension"):
        k[1, 1](_address(d), -1, 0)


def test_a_view_of_a_pointer_into_an_array_argument_is_bounded_by_it():
    @cuda.jit("void(float64[:], CPointer(float64), int64)")
    def k(arr, p, n):
        a = numba.farray(p, (2, n))
        a[1, n - 1] = arr[0] + 1.0

    h = np.zeros(6)
    h[0] = 1.0
    k[1, 1](h, h.ctypes.data, 3)
    assert h.tolist() == [1.0, 0, 0, 0, 0, 2.0]
    with pytest.raises(IndexError, match=r"numba.farray\(pointer, \(2, 4\), float64\) needs 64 "
                                         r"bytes"):
        k[1, 1](h, h.ctypes.data, 4)


def test_a_view_of_a_cffi_buffer_is_bounded_by_it():
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()

    @cuda.jit("void(float64[::1], int64, int64)")
    def k(arr, n, i):
        a = numba.carray(ffi.from_buffer(arr), (n,))
        a[i] = 3.0

    h = np.zeros(4)
    k[1, 1](h, 4, 1)
    assert h.tolist() == [0, 3.0, 0, 0]
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        k[1, 1](h, 4, 4)
    with pytest.raises(IndexError, match=r"needs 40 bytes .* ends 32 bytes after it"):
        k[1, 1](h, 5, 0)


# ---------------------------------------------------------------------------------------------
# An exception inside a library's code is an error, not the kernel's raise


def _library_fails(p, out):
    a = numba.carray(p, (4,))      # an int, not a pointer: Numba's host carray raises TypeError
    out[0] = a[0]


def test_an_exception_inside_library_code_is_an_error_not_the_kernels_raise():
    # (compile=False: the compiled code would refuse the int; Numba's host carray gets it)
    out = np.full(1, -1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", KernelRaisedWarning)
        with pytest.raises(TypeError, match="expected a ctypes pointer") as info:
            simulator.run(cuda.jit(_library_fails), 1, 1, 12345, out, compile=False)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    line = line_of(_library_fails, "numba.carray")
    assert "raised inside carray (" in notes and "numpy_support.py:" in notes, notes
    assert f"the kernel's line _library_fails ({__file__}:{line}) called" in notes, notes
    assert "threadIdx=(0, 0, 0)" in notes, notes
    assert out.tolist() == [-1.0]


def test_a_raise_of_the_kernels_own_code_still_stops_its_thread():
    def check(x):
        if x < 0:
            raise ValueError("negative")
        return x

    @cuda.jit
    def k(a, out):
        i = cuda.grid(1)
        out[i] = check(a[i])

    out = np.zeros(3)
    with pytest.warns(KernelRaisedWarning, match=r"1 thread raised ValueError\('negative'\)"):
        k[1, 3](np.array([1.0, -1.0, 2.0]), out)
    assert out.tolist() == [1.0, 0.0, 2.0]

