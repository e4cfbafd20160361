"""``gpureplace.cuda.types``: numba-cuda's ``numba.cuda.types`` under gpureplace's name, so that
code importing it ports by changing the import."""

import numpy as np
from numba.core import types as nb_types

from gpureplace import cuda


def test_types_is_a_module_of_numbas_types_with_the_gpus_own():
    from gpureplace.cuda import types
    import gpureplace.cuda.types as by_path
    from gpureplace.cuda.types import bfloat16, float32, grid_group, void
    assert types is by_path is cuda.types
    assert float32 is nb_types.float32 and void is nb_types.void
    assert types.float32[:] == nb_types.Array(nb_types.float32, 1, "A")
    assert types.UniTuple(types.int64, 2) == nb_types.UniTuple(nb_types.int64, 2)
    assert types.bool is nb_types.boolean
    assert bfloat16 is cuda.bfloat16 and str(grid_group) == "GridGroup"
    # the names Numba's module has beyond its __all__ too (numba-cuda's tests read them)
    assert types.signed_domain is nb_types.signed_domain
    assert types.number_domain is nb_types.number_domain


def test_a_kernel_declared_with_types_objects_runs():
    from gpureplace.cuda import types

    @cuda.jit(types.void(types.float32[::1], types.int32))
    def fill(x, n):
        i = cuda.grid(1)
        if i < n:
            x[i] = 2 * i

    x = cuda.to_device(np.zeros(16, np.float32))
    fill[1, 16](x, 12)
    assert fill.signatures == [(nb_types.Array(nb_types.float32, 1, "C"), nb_types.int32)]
    np.testing.assert_array_equal(x.copy_to_host(),
                                  np.where(np.arange(16) < 12, 2 * np.arange(16), 0))


def test_the_bfloat16_type_declares_a_signature():
    from gpureplace.cuda.types import bfloat16, void

    @cuda.jit(void(bfloat16[::1]))
    def double(x):
        x[0] = x[0] + x[0]

    assert "add.rn.bf16" in double.compile(double.signatures[0]).ptx
