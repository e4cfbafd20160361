"""Two ways a record's write was silently lost, now refused by name.

- A global record (``G_REC = RECS[0]``, an ``np.void``), a record of a global structured array
  (``G_RECS[i]``) and their array fields are constants in device code, as a global array is: a
  write into one compiled (the PTX stored nothing, or into the module's copy) and is now a
  compile error at its line, in the words of the refusal of a write into a global array
  ("Cannot modify ..."), on both backends (the simulator compiles a kernel before it runs it).
- A host record and its own array (or the same record twice) in one launch: each gets a copy of
  its own, and the record's copy-back overwrote what the kernel wrote through the array.  Refused
  as two overlapping host array views are (``transfers.refuse_overlaps``)."""


import numpy as np
import pytest
from numba import typeof, types
from numba.core.errors import TypingError

import gpureplace
from conftest import line_of
from gpureplace import LaunchError, cuda
from gpureplace.config import settings
from gpureplace.errors import CompileError
from gpureplace.runtime import transfers

REC = np.dtype([("x", np.float64), ("y", np.int64), ("v", np.float32, (2,))], align=True)
G_RECS = np.zeros(3, REC)
G_RECS["x"] = [1.5, 2.5, 3.5]
G_RECS["y"] = [10, 20, 30]
G_RECS["v"] = [[1, 2], [3, 4], [5, 6]]
G_REC = G_RECS.copy()[1]                   # an np.void global (its array is a copy)
G_BIG = np.zeros(5000, REC)                # 160 KB: over 64 KiB of constant memory
G_TUPLE = (G_REC, 2.0)
SIG = "void(int64, float64[:])"


def _refused(kernel, text, sig=SIG):
    with pytest.raises(CompileError) as info:
        kernel.compile(sig)
    exc = info.value
    assert isinstance(exc, TypingError)        # as the refusal of a global array's write is
    assert exc.lineno == line_of(kernel.py_func if hasattr(kernel, "py_func") else kernel, text)
    assert exc.filename == __file__
    return exc


# -- Bug 1: writes into global records -----------------------------------------------------------

def k_scalar_attr(i, out):
    G_REC.x = 5.0
    out[0] = G_REC.x


def k_scalar_item(i, out):
    G_REC["y"] = 5
    out[0] = G_REC.x


def k_element_attr(i, out):
    G_RECS[0].x = 5.0
    out[0] = G_RECS[0].x


def k_element_item(i, out):
    G_RECS[i]["x"] = out[0]


def k_alias(i, out):
    r = G_RECS[0]
    out[0] = r.x
    r.x = 1.0


def k_nested_array(i, out):
    G_RECS[i].v[1] = 5.0


def k_inplace(i, out):
    G_REC.x += 1.0


def k_loop(i, out):
    for r in G_RECS:
        r.y = i


def k_big(i, out):
    G_BIG[i].x = 5.0


def k_in_tuple(i, out):
    G_TUPLE[0].x = out[0]


def k_branch(i, out):
    r = G_RECS[0]
    if i > 0:
        r = G_REC
    r["x"] = 1.0


def k_swapped_in_a_loop(i, out):
    r = G_RECS[0]
    s = G_REC
    for j in range(i):
        r, s = s, r
    r.y = 1


CASES = [  # kernel, the line, what it names, what to pass
    (k_scalar_attr, "G_REC.x = 5.0", "global record G_REC (its field 'x')", "record"),
    (k_scalar_item, 'G_REC["y"] = 5', "global record G_REC (its field 'y')", "record"),
    (k_element_attr, "G_RECS[0].x = 5.0", "a record of global array G_RECS (its field 'x')",
     "array"),
    (k_element_item, 'G_RECS[i]["x"]', "a record of global array G_RECS (its field 'x')",
     "array"),
    (k_alias, "r.x = 1.0", "a record of global array G_RECS (its field 'x')", "array"),
    (k_nested_array, "G_RECS[i].v[1]", "a record of global array G_RECS (its field 'v')",
     "array"),
    (k_inplace, "G_REC.x += 1.0", "global record G_REC (its field 'x')", "record"),
    (k_loop, "r.y = i", "a record of global array G_RECS (its field 'y')", "array"),
    (k_big, "G_BIG[i].x", "a record of global array G_BIG (its field 'x')", "array"),
    (k_in_tuple, "G_TUPLE[0].x", "global record G_TUPLE[0] (its field 'x')", "record"),
    (k_branch, 'r["x"] = 1.0', "(its field 'x')", None),
    (k_swapped_in_a_loop, "r.y = 1", "(its field 'y')", None),
]


@pytest.mark.parametrize("body, text, named, root", CASES, ids=[c[0].__name__ for c in CASES])
def test_write_into_a_global_record_is_refused_at_its_line(body, text, named, root):
    kernel = cuda.jit(body)
    exc = _refused(kernel, text)
    assert exc.reason.startswith(f"Cannot modify {named}" if root else "Cannot modify ")
    assert named in exc.reason
    assert "a global is a constant in device code" in exc.reason
    if root:
        assert f"pass the {root} as a kernel argument to write it" in exc.reason


def test_the_simulator_refuses_it_as_a_compile_error_and_the_host_keeps_its_record(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    kernel = cuda.jit(k_element_attr)
    before = G_RECS.copy()
    with pytest.raises(CompileError, match=r"Cannot modify a record of global array G_RECS"):
        kernel[1, 1](0, np.zeros(1))
    assert G_RECS.tobytes() == before.tobytes()


def _helper_writes_the_global(v):
    G_REC.x = v
    return v


def test_a_write_inside_a_helper_is_refused_there_with_the_call_chain():
    @cuda.jit
    def k(i, out):
        out[0] = _helper_writes_the_global(out[0])

    with pytest.raises(CompileError) as info:
        k.compile(SIG)
    exc = info.value
    assert exc.function.endswith("_helper_writes_the_global")
    assert exc.lineno == line_of(_helper_writes_the_global, "G_REC.x = v")
    assert "Cannot modify global record G_REC (its field 'x')" in exc.reason
    assert exc.chain[-1].endswith("_helper_writes_the_global") and len(exc.chain) == 2

    dev = cuda.jit(device=True)(_helper_writes_the_global)

    @cuda.jit
    def k2(i, out):
        out[0] = dev(out[0])

    with pytest.raises(CompileError, match=r"Cannot modify global record G_REC"):
        k2.compile(SIG)


def _set_x(r, v):
    r.x = v


def _set_x_through(r, v):
    _set_x(r, v)


def test_a_global_record_given_to_a_helper_that_writes_it_is_refused_at_the_call():
    @cuda.jit
    def k(i, out):
        _set_x(G_RECS[i], out[0])

    exc = _refused(k, "_set_x(G_RECS[i]")
    assert "Cannot modify a record of global array G_RECS (its field 'x'), passed to _set_x, " \
           "which writes it through its parameter 'r'" in exc.reason
    assert f"line {line_of(_set_x, 'r.x = v')}" in exc.reason

    @cuda.jit
    def k2(i, out):
        _set_x_through(G_REC, out[0])         # two calls down

    exc = _refused(k2, "_set_x_through(G_REC")
    assert "global record G_REC (its field 'x'), passed to _set_x_through" in exc.reason
    assert "in _set_x, line" in exc.reason


def test_a_helper_redefined_to_write_its_parameter_is_checked_again():
    """The relink (compiler/relink.py) reuses a caller's typed code when only a callee changed;
    not when the callee now writes a parameter the caller may give a global record."""
    ns = {"cuda": cuda, "G_REC": G_REC}
    exec("def get(r, v):\n    return r.x + v\n"
         "@cuda.jit\ndef k(i, out):\n    out[0] = get(G_REC, 2.0)\n", ns)
    ns["k"].compile(SIG)
    exec("def get(r, v):\n    r.x = v\n    return v\n", ns)
    gpureplace.refresh()
    with pytest.raises(CompileError, match=r"Cannot modify global record G_REC \(its field "
                                           r"'x'\), passed to get, which writes it through its "
                                           r"parameter 'r' \(line 2\)"):
        ns["k"].compile(SIG)


def test_a_closure_record_write_is_refused():
    rec = G_RECS.copy()[2]

    @cuda.jit
    def k(i, out):
        rec.y = 1
        out[0] = rec.x

    exc = _refused(k, "rec.y = 1")
    assert exc.reason.startswith("Cannot modify closure variable record rec (its field 'y'): a "
                                 "closure variable is a constant in device code, as a global is")


def _read_x(r):
    return r.x


def test_reads_of_global_records_and_writes_of_arguments_still_work(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    rec = G_RECS.copy()[0]

    @cuda.jit
    def k(i, out, mine):
        r = G_RECS[i]
        out[0] = G_REC.x + G_REC["y"]
        out[1] = r.x + r.v[1]
        out[2] = _read_x(G_RECS[2]) + G_TUPLE[0]["y"] + rec.x
        total = 0.0
        for q in G_RECS:
            total += q.y
        out[3] = total + G_BIG[i].x
        _set_x(mine[0], 9.0)           # a helper writing an argument's record: fine
        mine[1].v[0] = 4.0

    k.compile((types.int64, types.float64[::1], typeof(np.zeros(2, REC))))   # the GPU's too
    out, mine = np.zeros(4), np.zeros(2, REC)
    k[1, 1](1, out, mine)
    assert out.tolist() == [2.5 + 20, 2.5 + 4, 3.5 + 20 + 1.5, 60.0]
    assert mine["x"].tolist() == [9.0, 0.0] and mine["v"][1].tolist() == [4.0, 0.0]


def test_a_record_given_as_an_argument_is_written_through_a_helper(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")

    @cuda.jit
    def k(r, v):
        _set_x_through(r, v)

    recs = np.zeros(2, REC)
    k[1, 1](recs[1], 3.0)
    assert recs["x"].tolist() == [0.0, 3.0]


# -- Bug 2: a host record and its array in one launch ------------------------------------------

@pytest.fixture(params=["sim", "gpu"], ids=["sim", "gpu-path"])
def backend(request, monkeypatch):
    """The simulator, or the GPU's launch path (refused before anything is copied: no GPU is
    needed to get there)."""
    monkeypatch.setattr(settings, "backend", "simulator" if request.param == "sim" else "gpu")
    monkeypatch.setattr(settings, "_host_arrays", "copy")
    return request.param


def _write_through_array(arr, r, out):
    arr[0].x = 4.0
    out[0] = r.x


def _write_through_record(r, arr):
    r.y = 7


def test_a_record_and_its_array_in_one_launch_are_refused(backend):
    k = cuda.jit(_write_through_array)
    a, out = np.zeros(2, REC), np.zeros(1)
    with pytest.raises(LaunchError, match=r"_write_through_array: argument 0 \('arr'\) and "
                                          r"argument 1 \('r'\) are a host array and a record "
                                          r"of it \(a\[i\]\), each copied to the device and "
                                          r"back on its own: one copy-back would overwrite"):
        k[1, 1](a, a[0], out)
    k2 = cuda.jit(_write_through_record)
    with pytest.raises(LaunchError, match=r"argument 0 \('r'\) and argument 1 \('arr'\) are a "
                                          r"host record and the array it is part of"):
        k2[1, 1](a[1], a)
    with pytest.raises(LaunchError, match=r"argument 1 \('r'\) and argument 0 \('arr'\)"
                                          r"|argument 0 \('arr'\) and argument 1 \('r'\)"):
        k[1, 1](a[:1], a.view(np.recarray)[0], out)        # a view, and an np.record
    with pytest.raises(LaunchError, match=r"argument 1 \('r'\) holds|argument 0 \('arr'\) and "
                                          r"argument 1 \('r'\) are a host array"):
        k[1, 1](a, (a[1], 1.0), out)                       # inside a tuple
    assert not a.tobytes().strip(b"\0")                    # nothing ran


def test_records_that_are_not_copied_back_are_accepted_with_their_array(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    monkeypatch.setattr(settings, "_host_arrays", "copy")

    @cuda.jit
    def k(arr, r, out):
        out[0] = r.x + arr[1].x

    a, out = np.zeros(3, REC), np.zeros(1)
    a["x"] = [2.0, 3.0, 4.0]
    ro = a.copy()
    ro.flags.writeable = False
    k[1, 1](ro, ro[0], out)                    # neither is copied back
    assert out[0] == 5.0
    k[1, 1](cuda.In(a), a[0], out)             # the array is not copied back
    assert out[0] == 5.0
    view = a.view()
    view.flags.writeable = False
    k[1, 1](a, view[0], out)                   # the record is not copied back
    assert out[0] == 5.0
    k[1, 1](a, np.zeros(2, REC)[0], out)       # another array's record
    assert out[0] == 3.0
    k[1, 1](a[1::-1], a[2], out)               # a record outside the view given
    assert out[0] == 4.0 + 2.0


def test_refuse_overlaps_takes_records_part():
    c = np.zeros(3, REC)
    names = ["r", "s"]
    with pytest.raises(LaunchError, match=r"k: argument 0 \('r'\) and argument 1 \('s'\) are "
                                          r"the same host record given twice"):
        transfers.refuse_overlaps("k", (c[0], c[0]), names)
    with pytest.raises(LaunchError, match=r"argument 0 \('r'\) holds the same host record"):
        transfers.refuse_overlaps("k", ((c[1], c[1]),), names)
    transfers.refuse_overlaps("k", (c[0], c[1]), names)        # different records
    ro = c.copy()
    ro.flags.writeable = False
    transfers.refuse_overlaps("k", (ro[0], ro[0]), names)      # neither is copied back
    transfers.refuse_overlaps("k", (ro[0], ro), names)
    assert transfers.holds_host_record((1, (c[0],))) and not transfers.holds_host_record(c)


def test_the_same_record_twice_without_host_arrays_is_refused_at_the_launch():
    c = np.zeros(2, dtype=[("x", "f8"), ("y", "f8")])
    d = np.zeros(2, dtype=[("x", "f8"), ("y", "f8")])

    @cuda.jit
    def set_both(r, s):
        r.x = 1.0
        s.y = 2.0
    with pytest.raises(LaunchError, match="the same host record given twice"):
        set_both[1, 1](c[0], c[0])
    assert c[0]["x"] == 0.0                          # nothing ran
    set_both[1, 1](c[0], d[1])                       # two records: both written back
    assert (c[0]["x"], d[1]["y"]) == (1.0, 2.0)
