"""A name that is no field of a record, read, written or indexed in device code, is a compile
error naming the name and the record's fields, at the line that uses it.  Numba's record typing
let a bare KeyError out: the user saw only "'velocity'", placed at the function's first line."""

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.errors import CompileError

from conftest import line_of

RECS = np.zeros(4, dtype=[("x", "f4"), ("v", "f4")])


def read_attr(r, out):
    out[0] = r[0].velocity * 2


def write_attr(r, out):
    r[0].velocity = 1.0


def write_item(r, out):
    r[0]["velocity"] = 1.0


@pytest.mark.parametrize("body, text", [(read_attr, "r[0].velocity * 2"),
                                        (write_attr, "r[0].velocity = 1.0"),
                                        (write_item, 'r[0]["velocity"] = 1.0')])
def test_a_field_the_record_lacks_is_named_at_its_line(body, text):
    k = cuda.jit(body)
    with pytest.raises(CompileError) as info:
        k[1, 1](RECS.copy(), np.zeros(1))
    msg = str(info.value)
    assert "has no field 'velocity' (its fields: x, v)" in msg
    assert info.value.lineno == line_of(body, text)


def test_a_record_given_where_an_array_is_read_names_the_attribute():
    @cuda.jit
    def k(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1

    with pytest.raises(CompileError) as info:
        k[1, 32](RECS[0])
    assert "has no field 'size' (its fields: x, v)" in str(info.value)
    assert info.value.lineno == line_of(k.py_func, "if i < a.size:")


def test_fields_that_are_there_still_compile():
    @cuda.jit
    def k(r):
        r[0].x = r[0].v + r[0]["x"]

    recs = RECS.copy()
    recs[0] = (1.0, 2.0)
    k[1, 1](recs)
    assert recs[0]["x"] == 3.0


# --- other messages the README tester found in Numba's words ---------------------------------

TABLE = np.zeros(4)


def test_a_write_into_a_global_array_names_it_and_the_way_out():
    @cuda.jit
    def k(o):
        TABLE[0] = 1.0

    with pytest.raises(CompileError) as info:
        k[1, 1](np.zeros(1))
    msg = str(info.value)
    assert "Cannot modify readonly array" in msg        # (numba-cuda's words, kept first)
    assert "TABLE is a global array, which device code reads as a constant" in msg
    assert "pass the array as a kernel argument to write it" in msg
    assert info.value.lineno == line_of(k.py_func, "TABLE[0] = 1.0")


def test_a_reduction_along_an_axis_says_axis_is_what_is_not_supported():
    @cuda.jit
    def k(a, out):
        out[0] = np.sum(a, axis=0)[0]

    with pytest.raises(CompileError) as info:
        k[1, 1](np.ones((2, 2)), np.zeros(1))
    msg = str(info.value)
    assert "np.sum(..., axis=...) is not supported in device code" in msg, msg
    assert "strings" not in msg
    assert info.value.lineno == line_of(k.py_func, "np.sum(a, axis=0)")
