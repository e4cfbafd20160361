"""Arrays of dtypes NumPy describes in its own way:

* a device array of a record whose fields overlap (a C union) or are out of order has a
  ``__cuda_array_interface__`` (``dtype.descr`` raises for such a dtype: the launch of the device
  array failed on it while the host array launched), its ``descr`` the bytes, as NumPy's own;
* ``cuda.vectorize`` chooses its loop for data in the other byte order as for the same values in
  the native one (it took the float64 loop for ``'>f4'`` data and a Python scalar).
"""

import numpy as np

from gpureplace import cuda

UNION = np.dtype({"names": ["i", "f"], "formats": ["i4", "f4"], "offsets": [0, 0]})
SHUFFLED = np.dtype({"names": ["b", "a"], "formats": ["f4", "i4"], "offsets": [4, 0]})


@cuda.jit
def bump_f(r):
    i = cuda.grid(1)
    if i < r.size:
        r[i].f = r[i].f + 1.0


def test_a_device_array_of_a_union_record_launches_as_the_host_array_does():
    h = np.zeros(3, UNION)
    bump_f[1, 32](h)
    d = cuda.to_device(np.zeros(3, UNION))
    cai = d.__cuda_array_interface__
    assert cai["typestr"] == "|V4" and cai["descr"] == np.zeros(1, UNION).__array_interface__[
        "descr"]
    bump_f[1, 32](d)
    assert d.copy_to_host().tolist() == h.tolist() and h["f"].tolist() == [1.0] * 3


def test_a_device_array_of_out_of_order_fields_has_an_interface():
    d = cuda.to_device(np.zeros(2, SHUFFLED))
    cai = d.__cuda_array_interface__
    assert cai["shape"] == (2,) and cai["typestr"] == SHUFFLED.str


@cuda.vectorize(["float32(float32, float32)", "float64(float64, float64)"])
def add(a, b):
    return a + b


def test_vectorize_chooses_the_loop_of_the_native_dtype_for_other_byte_order_data():
    be = np.arange(3, dtype=">f4")
    out = add(be, 1)
    assert out.dtype == np.float32 == np.add(be, 1).dtype
    assert out.tolist() == [1.0, 2.0, 3.0]
    assert add(be, be).dtype == np.float32
    assert add(np.arange(3, dtype=">f8"), 1).dtype == np.float64
