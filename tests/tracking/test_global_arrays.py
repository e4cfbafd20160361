"""Global NumPy arrays read by kernels: never stale, and their size never reaches the compiler.

A kernel reads a global array from a copy its dependency record keeps: small arrays are compiled
into the code, larger ones live in device memory, filled from the copy when the module loads.
Changing the array in place (``G[1] = 7``) is seen by the cell hook (``bindings.check``) and by
``gpureplace.refresh()``: the next launch runs on the new contents.
"""

import textwrap
import types

import numpy as np
import pytest

import gpureplace
from gpureplace import CompileError
from gpureplace.tracking import bindings, contents

SIG = "void(float64[:])"


def module(name, src):
    mod = types.ModuleType(name)
    import sys
    sys.modules[name] = mod
    exec(compile(textwrap.dedent(src), f"<{name}>", "exec"), mod.__dict__)
    return mod


def has(ptx, value):
    """Whether the PTX holds the float64 ``value`` (as an operand, or as the bits it stores)."""
    import struct
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    return "0d%016X" % bits in ptx or f", {bits};" in ptx


def test_small_global_array_changed_in_place_recompiles():
    m = module("garr_small", """
        import numpy as np
        from gpureplace import cuda
        G = np.array([1.5, 2.5, 3.5])
        @cuda.jit
        def k(out):
            out[0] = G[1]
    """)
    assert has(m.k.inspect_ptx(SIG), 2.5)
    m.G[1] = 7.25
    # before any check the dependency report already says so
    deps = m.k.dependencies(SIG)
    assert [g["changed"] for g in deps["globals"] if g["name"] == "G"] == [True]
    gpureplace.refresh()
    ptx = m.k.inspect_ptx(SIG)
    assert has(ptx, 7.25) and not has(ptx, 2.5)


def test_cell_hook_reports_in_place_changes_of_globals_and_closure_arrays():
    m = module("garr_hook", """
        import numpy as np
        from gpureplace import cuda
        G = np.zeros(4)
        def make():
            C = np.ones(3)
            def helper(i):
                return C[i]
            return helper, C
        helper, C = make()
        @cuda.jit
        def k(out):
            out[0] = G[0] + helper(0)
    """)
    bindings.check()            # (changes earlier tests' compiles found, reported once)
    m.k.compile(SIG)
    assert not [c for c in bindings.check() if c[1] in ("G", "C")]
    m.G[2] = 1.0
    m.C[0] = 5.0
    changed = {(c[1], c[2]) for c in bindings.check()}
    assert ("G", "changed in place") in changed and ("C", "changed in place") in changed
    assert not [c for c in bindings.check() if c[1] in ("G", "C")]     # reported once
    spec = m.k.compile(SIG)
    assert has(spec.ptx, 5.0)


def test_rebinding_to_equal_contents_changes_nothing_and_to_other_contents_recompiles():
    m = module("garr_rebind", """
        import numpy as np
        from gpureplace import cuda
        G = np.array([4.0, 5.0])
        @cuda.jit
        def k(out):
            out[0] = G[0] * G[1]
    """)
    spec = m.k.compile(SIG)
    m.G = m.G.copy()
    assert not [c for c in bindings.check() if c[1] == "G"]
    assert m.k.compile(SIG) is spec
    m.G = np.array([4.0, 6.0])
    assert [c[2] for c in bindings.check() if c[1] == "G"] == ["redefined"]
    assert has(m.k.compile(SIG).ptx, 24.0)


def test_large_global_array_lives_in_device_memory_not_in_the_code(ptxas_check):
    m = module("garr_large", """
        import numpy as np
        from gpureplace import cuda
        BIG = np.arange(2_000_000, dtype=np.float64)      # 16 MB
        def helper(i):
            return BIG[i + 1]
        @cuda.jit
        def k(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = BIG[i] + helper(i)
    """)
    spec = m.k.compile(SIG)
    assert len(spec.ptx) < 20_000                        # no data in the code
    assert ".global .align 16 .b8 __gpureplace_array_" in spec.ptx
    assert "[16000000]" in spec.ptx
    ptxas_check(spec.ptx)
    # the kernel and its helper read one copy
    (symbol, data), = spec.device_arrays
    assert symbol in spec.ptx and np.array_equal(data, m.BIG) and data is not m.BIG
    assert not data.flags.writeable
    # an in-place change: the next specialisation carries the new contents, no new code needed
    compiles = gpureplace.stats()["kernel_compiles"]
    m.BIG[7] = -1.0
    gpureplace.refresh()
    spec2 = m.k.compile(SIG)
    assert spec2 is not spec and spec2.device_arrays[0][1][7] == -1.0
    assert spec.device_arrays[0][1][7] == 7.0             # the old one kept what it ran with
    if gpureplace.cache.enabled:
        assert gpureplace.stats()["kernel_compiles"] == compiles   # the code came from disk


def test_large_fortran_view_and_tuple_arrays_are_copied_in_their_layout():
    m = module("garr_layouts", """
        import numpy as np
        from gpureplace import cuda
        F = np.asfortranarray(np.arange(200 * 100, dtype=np.float32).reshape(200, 100))
        V = np.arange(40_000, dtype=np.float64).reshape(200, 200)[::2, 1:]
        T = (np.ones(20_000), 3.0)
        @cuda.jit
        def k(out):
            out[0] = F[3, 4] + V[2, 5] + T[0][6] + T[1]
    """)
    arrays = dict(m.k.compile(SIG).device_arrays)
    by_shape = {a.shape: a for a in arrays.values()}
    f, v, t = by_shape[(200, 100)], by_shape[(100, 199)], by_shape[(20_000,)]
    assert f.flags.f_contiguous and np.array_equal(f, m.F)
    assert v.flags.c_contiguous and np.array_equal(v, m.V)
    assert np.array_equal(t, m.T[0])
    m.T[0][6] = 2.0
    gpureplace.refresh()
    assert dict(m.k.compile(SIG).device_arrays)[next(
        s for s, a in arrays.items() if a.shape == (20_000,))][6] == 2.0


def test_global_array_over_the_limit_is_refused_at_its_line():
    m = module("garr_huge", """
        import numpy as np
        from gpureplace import cuda
        HUGE = np.zeros(300 << 20, dtype=np.uint8)       # not touched: calloc'd, never copied
        @cuda.jit
        def k(out):
            out[0] = HUGE[5]
    """)
    with pytest.raises(CompileError) as info:
        m.k.compile(SIG)
    msg = str(info.value)
    assert "'HUGE'" in msg and "300.0 MiB" in msg and "argument" in msg and "line 7" in msg


def test_hook_cost_stays_flat_with_many_tracked_small_arrays():
    """What the cell hook does per tracked array: one comparison of its bytes (no hashing, no
    copy while nothing changed)."""
    a = np.zeros(8192)                                   # 64 KiB
    snap = contents.snapshot(a)
    assert snap.same_as(a)
    assert contents.snapshot(a).parts[0][1] is snap.parts[0][1]   # the copy is shared
    a[100] = 1.0
    assert not snap.same_as(a)
    assert contents.snapshot(a).parts[0][1] is not snap.parts[0][1]


def test_nan_contents_compare_equal_to_themselves():
    a = np.array([np.nan, 1.0])
    assert contents.snapshot(a).same_as(a)


@pytest.mark.gpu
def test_global_arrays_on_the_gpu_follow_in_place_changes():
    import cupy as cp
    m = module("garr_gpu", """
        import numpy as np
        from gpureplace import cuda
        SMALL = np.array([1.0, 2.0, 3.0])
        BIG = np.arange(1_000_000, dtype=np.float64)
        F = np.asfortranarray(np.arange(300 * 200, dtype=np.float32).reshape(300, 200))
        V = np.arange(90_000, dtype=np.float64).reshape(300, 300)[::3, 2:]
        @cuda.jit
        def k(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = SMALL[i % 3] + BIG[i] + F[i % 300, i % 200] + V[i % 100, i % 298]
    """)

    def expected():
        i = np.arange(1000)
        return (m.SMALL[i % 3] + m.BIG[i] + m.F[i % 300, i % 200].astype(np.float64)
                + m.V[i % 100, i % 298])

    def run():
        out = cp.zeros(1000)
        m.k[4, 256](out)
        return cp.asnumpy(out)

    np.testing.assert_array_equal(run(), expected())
    m.SMALL[1] = 20.0
    m.BIG[:10] = -5.0
    m.F[7, 7] = 1e6
    m.V[7, 7] = -1e6
    gpureplace.refresh()
    np.testing.assert_array_equal(run(), expected())
    m.BIG = np.ones(1_000_000)                            # rebound, same shape
    gpureplace.refresh()
    np.testing.assert_array_equal(run(), expected())


def _within_a_cell(m, out_of, run):
    """A change in place is seen at the next check (end of cell, refresh()), on either backend:
    a launch in between still reads the copy the kernel was compiled against."""
    assert out_of(run()) == [2.5, 40.0]
    m.SMALL[1] = 7.25
    m.BIG[3] = -1.0
    assert out_of(run()) == [2.5, 40.0]          # same cell: the compiled copy, as on the GPU
    gpureplace.refresh()
    assert out_of(run()) == [7.25, -1.0]


GLOBALS_SRC = """
    import numpy as np
    from gpureplace import cuda
    SMALL = np.array([1.5, 2.5, 3.5])
    BIG = np.arange(20_000, dtype=np.float64) * 10.0      # over INLINE_ARRAY_BYTES: device memory
    @cuda.jit
    def k(out):
        out[0] = SMALL[1]
        out[1] = BIG[4] if BIG[3] > 0 else BIG[3]
"""


def test_the_simulator_reads_global_arrays_as_the_gpu_does(monkeypatch):
    from gpureplace.config import settings
    monkeypatch.setattr(settings, "backend", "simulator")
    m = module("garr_sim", GLOBALS_SRC)
    assert contents.is_resident(m.BIG)

    def run():
        out = np.zeros(2)
        m.k[1, 1](out)
        return out

    _within_a_cell(m, lambda out: out.tolist(), run)


@pytest.mark.gpu
def test_global_arrays_within_a_cell_on_the_gpu():
    import cupy as cp
    m = module("garr_gpu_cell", GLOBALS_SRC)

    def run():
        out = cp.zeros(2)
        m.k[1, 1](out)
        return out

    _within_a_cell(m, lambda out: cp.asnumpy(out).tolist(), run)
