"""numba-cuda's device properties: ``DeviceNDArray.alloc_size`` is the bytes the elements span (its
``memory_size_from_info``), not ``nbytes``: a strided view spans more than its elements."""

import numpy as np

from gpureplace import cuda


def test_alloc_size_is_the_span_of_the_elements():
    a = cuda.to_device(np.zeros((4, 6), np.float32))
    assert a.alloc_size == a.nbytes == 96
    assert a[:, :2].alloc_size == 3 * 24 + 1 * 4 + 4           # 80, for 32 bytes of elements
    assert a[::2, ::3].alloc_size == 2 * 24 + 1 * 12 + 4
    assert a[::-1].alloc_size == 96                             # (negative strides: the span)
    assert a[:0].alloc_size == 0


def test_the_device_says_which_number_formats_it_supports():
    d = cuda.get_current_device()
    cc = tuple(d.compute_capability)
    assert d.supports_float16 is (cc >= (5, 3))
    assert d.supports_bfloat16 is (cc >= (8, 0))
    assert d.supports_fp8 is (cc >= (8, 9))
