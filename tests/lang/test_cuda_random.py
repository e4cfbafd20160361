"""``gpureplace.cuda.random``: numba-cuda's xoroshiro128+ generator, number for number.

CPU tests compile kernels that call every device function (ptxas, sm_90), check the states the
host makes against a plain-Python reference of the algorithm and against values that Numba's own
``numba.cuda.random`` gives, and run the kernels in the simulator against that reference.  The GPU
tests launch the same kernels (a Monte-Carlo estimate of pi among them) on CuPy arrays and
compare the device's numbers with the reference's.
"""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import types

from conftest import SIMULATE, assemble
from gpureplace import cuda, simulator
from gpureplace.config import settings
from gpureplace.cuda.random import (create_xoroshiro128p_states, init_xoroshiro128p_states,
                                    init_xoroshiro128p_states_cpu, xoroshiro128p_dtype,
                                    xoroshiro128p_jump, xoroshiro128p_next,
                                    xoroshiro128p_normal_float32, xoroshiro128p_normal_float64,
                                    xoroshiro128p_type, xoroshiro128p_uniform_float32,
                                    xoroshiro128p_uniform_float64)

# =============================================================================================
# A reference of the algorithm in plain Python integers (independent of the module under test);
# the normals take their float32 / float64 math from NumPy, as the simulator does.

M64 = (1 << 64) - 1


def ref_splitmix(seed):
    z = (seed + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


class Ref:
    """One xoroshiro128+ generator (55, 14, 36), as numba-cuda's."""

    def __init__(self, s0, s1):
        self.s0, self.s1 = s0, s1

    def next(self):
        s0, s1 = self.s0, self.s1
        out = (s0 + s1) & M64
        s1 ^= s0
        self.s0 = rotl(s0, 55) ^ s1 ^ ((s1 << 14) & M64)
        self.s1 = rotl(s1, 36)
        return out

    def jump(self):
        a0 = a1 = 0
        for word in (0xBEAC0467EBA5FACB, 0xD86B048B86AA9922):
            for b in range(64):
                if (word >> b) & 1:
                    a0 ^= self.s0
                    a1 ^= self.s1
                self.next()
        self.s0, self.s1 = a0, a1

    def uniform64(self):
        return np.float64(self.next() >> 11) * np.float64(2.0 ** -53)

    def uniform32(self):
        return np.float32(self.uniform64())

    def normal32(self):
        u1, u2 = self.uniform32(), self.uniform32()
        return (np.sqrt(np.float32(-2.0) * np.log(u1))
                * np.cos(np.float32(2 * math.pi) * u2))

    def normal64(self):
        u1, u2 = self.uniform32(), self.uniform32()    # float32 uniforms and log, as numba-cuda
        return np.sqrt(np.float64(-2.0) * np.log(u1)) * np.cos(np.float64(2 * math.pi) * u2)


def ref_states(n, seed, subsequence_start=0):
    z = ref_splitmix(seed & M64)
    g = Ref(z, z)
    for _ in range(subsequence_start):
        g.jump()
    out = []
    for _ in range(n):
        out.append(Ref(g.s0, g.s1))
        g.jump()
    return out


def as_array(gens):
    a = np.empty(len(gens), dtype=xoroshiro128p_dtype)
    a["s0"] = [g.s0 for g in gens]
    a["s1"] = [g.s1 for g in gens]
    return a


def host_states(n, seed, subsequence_start=0):
    a = np.empty(n, dtype=xoroshiro128p_dtype)
    init_xoroshiro128p_states_cpu(a, seed, subsequence_start)
    return a


# =============================================================================================
# Host: seeding and jumps

#: Numba's own ``numba.cuda.random.init_xoroshiro128p_states_cpu`` for seed 1, four states;
#: then three ``xoroshiro128p_uniform_float32(states, 1)``, and ``xoroshiro128p_next(states, 0)``.
NUMBA_SEED1_STATES = [(10451216379200822465, 10451216379200822465),
                      (8341117667364343960, 7824662623250379246),
                      (809817624983272012, 15258973161149853818),
                      (4287641842676342503, 12987378992932203451)]
NUMBA_SEED1_UNIFORM32_STATE1 = [0.8763487339019775, 0.21028068661689758, 0.41908127069473267]
NUMBA_SEED1_NEXT_STATE0 = 2455688684692093314


def test_known_values_from_numba():
    s = host_states(4, 1)
    assert [(int(a), int(b)) for a, b in s] == NUMBA_SEED1_STATES
    g = Ref(int(s[1]["s0"]), int(s[1]["s1"]))
    assert [float(g.uniform32()) for _ in range(3)] == NUMBA_SEED1_UNIFORM32_STATE1
    assert Ref(*NUMBA_SEED1_STATES[0]).next() == NUMBA_SEED1_NEXT_STATE0


@pytest.mark.parametrize("n,seed,start", [(1, 0, 0), (9, 1, 0), (33, 12345, 0), (5, 2**64 - 1, 2),
                                          (17, -7, 5), (6, 2**63 + 11, 0)])
def test_states_equal_reference(n, seed, start):
    np.testing.assert_array_equal(host_states(n, seed, start), as_array(ref_states(n, seed, start)))


def test_subsequence_start_shifts_the_states():
    np.testing.assert_array_equal(host_states(10, 1)[3:], host_states(10, 1, 3)[:-3])
    big = 2**40 + 2**17 + 3              # far beyond jumping one at a time
    np.testing.assert_array_equal(host_states(6, 99, big)[1:], host_states(5, 99, big + 1))
    assert len(np.unique(host_states(1000, 5))) == 1000


def test_many_states_match_jumping_one_by_one():
    """States [m, 2m) come from a table-driven J**m: check a size that is no power of two
    against jumping each state from the one before (the module's own device function, on the
    host)."""
    s = host_states(300, 2024, 1)
    prev = s[:-1].copy()
    with np.errstate(over="ignore"):         # uint64 wrap-around in NumPy scalars
        for i in range(prev.shape[0]):
            xoroshiro128p_jump(prev, i)
    np.testing.assert_array_equal(prev, s[1:])


def test_same_states_as_numba_cuda_random():
    """Numba's own ``numba.cuda.random`` (same algorithm as numba-cuda's) in a child process, on
    the CPU, where the installed Numba has it."""
    code = ("import json, numpy as np\n"
            "from numba.cuda import random as r\n"
            "out = {}\n"
            "for n, seed, start in [(7, 3, 0), (4, 77, 6), (3, 2**64 - 5, 1)]:\n"
            "    s = np.empty(n, r.xoroshiro128p_dtype)\n"
            "    r.init_xoroshiro128p_states_cpu(s, np.uint64(seed), start)\n"
            "    st = [[int(a), int(b)] for a, b in s]\n"
            "    u = [float(r.xoroshiro128p_uniform_float64(s, 2)) for _ in range(3)]\n"
            "    x = [int(r.xoroshiro128p_next(s, 0)) for _ in range(3)]\n"
            "    out[f'{n},{seed},{start}'] = [st, u, x]\n"
            "print(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "NUMBA_DISABLE_CUDA": "1"})
    if proc.returncode != 0:
        pytest.skip(f"numba.cuda.random is not usable here: {proc.stderr.strip()[-200:]}")
    for key, (st, u, x) in json.loads(proc.stdout.strip().splitlines()[-1]).items():
        n, seed, start = map(int, key.split(","))
        s = host_states(n, seed, start)
        assert [[int(a), int(b)] for a, b in s] == st
        g = Ref(int(s[2]["s0"]), int(s[2]["s1"]))
        assert [float(g.uniform64()) for _ in range(3)] == u
        g = Ref(int(s[0]["s0"]), int(s[0]["s1"]))
        assert [g.next() for _ in range(3)] == x


def test_create_under_the_simulator_returns_numpy(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    s = create_xoroshiro128p_states(12, seed=8, subsequence_start=2)
    assert isinstance(s, np.ndarray) and s.dtype == xoroshiro128p_dtype and s.shape == (12,)
    np.testing.assert_array_equal(s, as_array(ref_states(12, 8, 2)))
    t = np.zeros(12, dtype=xoroshiro128p_dtype)
    init_xoroshiro128p_states(t, seed=8, subsequence_start=2)
    np.testing.assert_array_equal(t, s)
    assert create_xoroshiro128p_states(0, seed=1).shape == (0,)


def test_import_forms():
    import gpureplace.cuda.random as mod
    from gpureplace import cuda_random
    assert mod is cuda_random is cuda.random
    assert cuda.random.xoroshiro128p_uniform_float32 is xoroshiro128p_uniform_float32
    assert xoroshiro128p_type.dtype == xoroshiro128p_dtype
    assert xoroshiro128p_dtype.itemsize == 16 and xoroshiro128p_dtype.names == ("s0", "s1")


# =============================================================================================
# Device: compile, simulate, compare


@cuda.jit
def draw_all(states, u32, u64, n32, n64, nx):
    t = cuda.grid(1)
    if t < states.shape[0]:
        for i in range(u32.shape[1]):
            u32[t, i] = xoroshiro128p_uniform_float32(states, t)
            u64[t, i] = xoroshiro128p_uniform_float64(states, t)
            n32[t, i] = xoroshiro128p_normal_float32(states, t)
            n64[t, i] = xoroshiro128p_normal_float64(states, t)
            nx[t, i] = xoroshiro128p_next(states, t)
        xoroshiro128p_jump(states, t)


DRAW_SIG = (xoroshiro128p_type[::1], types.float32[:, ::1], types.float64[:, ::1],
            types.float32[:, ::1], types.float64[:, ::1], types.uint64[:, ::1])
OUT_DTYPES = (np.float32, np.float64, np.float32, np.float64, np.uint64)


def draw_reference(states, count):
    """What ``draw_all`` computes, and the states it leaves."""
    gens = [Ref(int(a), int(b)) for a, b in states]
    outs = [np.zeros((len(gens), count), dtype=d) for d in OUT_DTYPES]
    for t, g in enumerate(gens):
        for i in range(count):
            outs[0][t, i] = g.uniform32()
            outs[1][t, i] = g.uniform64()
            outs[2][t, i] = g.normal32()
            outs[3][t, i] = g.normal64()
            outs[4][t, i] = g.next()
        g.jump()
    return outs, as_array(gens)


@cuda.jit
def uniform64_only(states, out):
    t = cuda.grid(1)
    if t < out.size:
        out[t] = xoroshiro128p_uniform_float64(states, t)


@cuda.jit
def next_only(states, out):
    t = cuda.grid(1)
    if t < out.size:
        out[t] = xoroshiro128p_next(states, t)


def _body(ptx):
    return ptx[ptx.index(".entry"):]


def test_every_function_compiles_and_assembles():
    spec = draw_all.compile(DRAW_SIG)
    assert assemble(spec.ptx, "sm_90")
    ir = "\n".join(t for cf in spec.compiled.closure() for t in cf.ir_texts())
    # float32 normal: logf/cosf; the float64 normal takes a float32 log too (as numba-cuda)
    assert "__nv_logf" in ir and "__nv_cosf" in ir and "__nv_cos(" in ir.replace('"', "")
    assert "__nv_log(" not in ir.replace('"', "")


def test_uint64_arithmetic_is_unsigned():
    nxt = _body(next_only.compile((xoroshiro128p_type[::1], types.uint64[::1])).ptx)
    assert assemble(next_only.compile((xoroshiro128p_type[::1], types.uint64[::1])).ptx)
    assert "shr.s64" not in nxt and ".f32" not in nxt and ".f64" not in nxt
    assert "shf." in nxt or "shr.u64" in nxt or "shr.b64" in nxt      # the rotations
    u64 = _body(uniform64_only.compile((xoroshiro128p_type[::1], types.float64[::1])).ptx)
    assert "cvt.rn.f64.u64" in u64 and "cvt.rn.f64.s64" not in u64


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**63 + 7])
def test_simulator_equals_reference(seed):
    states = host_states(10, seed, 1)
    outs, after = draw_reference(states, 4)
    got = [np.zeros((10, 4), dtype=d) for d in OUT_DTYPES]
    simulator.run(draw_all, 2, 8, states, *got)
    for g, r in zip(got, outs):
        np.testing.assert_array_equal(g, r)
    np.testing.assert_array_equal(states, after)
    assert got[0].min() >= 0 and got[0].max() < 1 and got[1].min() >= 0 and got[1].max() < 1


@cuda.jit
def pi_hits(states, samples, hits):
    t = cuda.grid(1)
    if t < hits.size:
        inside = 0
        for _ in range(samples):
            x = xoroshiro128p_uniform_float32(states, t)
            y = xoroshiro128p_uniform_float32(states, t)
            if x * x + y * y <= 1.0:
                inside += 1
        hits[t] = inside


def pi_reference(states, samples):
    """Hits per thread, and how many of them lie so near the circle that a fused multiply-add
    (which the GPU may use for ``x * x + y * y``) could move them across."""
    hits, near = [], []
    for a, b in states:
        g = Ref(int(a), int(b))
        inside = edge = 0
        for _ in range(samples):
            x, y = g.uniform32(), g.uniform32()
            r2 = x * x + y * y                           # float32, as in the kernel
            inside += float(r2) <= 1.0
            edge += abs(float(x) ** 2 + float(y) ** 2 - 1.0) < 1e-6
        hits.append(inside)
        near.append(edge)
    return np.array(hits, dtype=np.int64), np.array(near, dtype=np.int64)


def test_pi_simulator_equals_reference():
    states = host_states(16, 2025)
    ref, _ = pi_reference(states, 50)
    hits = np.zeros(16, dtype=np.int64)
    simulator.run(pi_hits, 1, 16, states, 50, hits)
    np.testing.assert_array_equal(hits, ref)
    assert abs(4 * hits.sum() / (16 * 50) - math.pi) < 0.3


# =============================================================================================
# GPU (or, with GPUREPLACE_TEST_SIMULATOR=1, the simulator with NumPy standing in for CuPy)


def _cp():
    import cupy
    return cupy


@pytest.mark.gpu
def test_monte_carlo_pi_gpu():
    cp = _cp()
    threads, samples, seed = (256, 64, 1234) if SIMULATE else (4096, 256, 1234)
    states = create_xoroshiro128p_states(threads, seed=seed)
    host = host_states(threads, seed)
    np.testing.assert_array_equal(cp.asnumpy(states), host)
    hits = cp.zeros(threads, dtype=cp.int64)
    pi_hits[threads // 128, 128](states, samples, hits)
    got = cp.asnumpy(hits)
    # every thread's count equals the reference's (first 64 threads: the reference is Python)
    ref, near = pi_reference(host[:64], samples)
    assert (np.abs(got[:64] - ref) <= near).all(), (got[:64], ref, near)
    # and the states moved on by exactly 2 * samples steps
    after = cp.asnumpy(states)
    for t in (0, 1, threads - 1):
        g = Ref(int(host[t]["s0"]), int(host[t]["s1"]))
        for _ in range(2 * samples):
            g.next()
        assert (int(after[t]["s0"]), int(after[t]["s1"])) == (g.s0, g.s1)
    sigma = 4 * math.sqrt(math.pi / 4 * (1 - math.pi / 4) / (threads * samples))
    assert abs(4 * got.sum() / (threads * samples) - math.pi) < 6 * sigma


@pytest.mark.gpu
def test_all_distributions_gpu():
    cp = _cp()
    n, count = 256, 8
    states = create_xoroshiro128p_states(n, seed=77, subsequence_start=3)
    host = host_states(n, 77, 3)
    outs, after = draw_reference(host, count)
    got = [cp.zeros((n, count), dtype=d) for d in OUT_DTYPES]
    draw_all[n // 64, 64](states, *got)
    got = [cp.asnumpy(g) for g in got]
    for k in (0, 1, 4):                 # uniforms and raw uint64: bit for bit
        np.testing.assert_array_equal(got[k], outs[k])
    # normals: libdevice's logf/cosf/cos against NumPy's, a few ulp apart at most
    np.testing.assert_allclose(got[2], outs[2], rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(got[3], outs[3], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(cp.asnumpy(states), after)
    # init_xoroshiro128p_states refills an existing device array
    init_xoroshiro128p_states(states, seed=77, subsequence_start=3)
    np.testing.assert_array_equal(cp.asnumpy(states), host)
