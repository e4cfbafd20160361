"""No input reaches an LLVM fatal error, and nothing the device cannot hold reaches LLVM.

LLVM's NVPTX back end aborts the whole process (a notebook's kernel dies) on an intrinsic the
target lacks (``LLVM ERROR: Cannot select: intrinsic %llvm.nvvm.match.any.sync.i32`` below sm_70)
or a PTX ISA too old for the target (sm_100f before 8.8); and it spends minutes and gigabytes on
local arrays of 10**5 elements and more.  Each is a CompileError at the user's line now.  Anything
that could still abort runs in a subprocess, so that a regression fails the test instead of
killing pytest.

The survey these tests keep the gist of compiled a kernel per intrinsic and operation family
(atomics of every type, warp shuffles/votes/matches, masks, fp16 arithmetic and math, vector
types, cg grid sync, shared/local/const arrays, printf, libdevice, math, bit operations) for each
architecture gpureplace accepts, sm_50 to sm_121, with and without the oldest PTX ISA a driver can
give, and assembled every PTX with ptxas: only match_any_sync / match_all_sync (LLVM abort),
nanosleep (ptxas: sm_70+), activemask (ptxas: PTX ISA 6.2+) and fast-math tanh.approx (PTX ISA
7.0+) failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import SIMULATE, assemble
from gpureplace import cuda
from gpureplace.errors import CompileError
from gpureplace import probe

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # tests/

#: intrinsic -> (kernel body over an int32 array ``a``, the oldest architecture that has it)
ARCH_GATED = {
    "match_any_sync": ("a[0] = cuda.match_any_sync(0xffffffff, a[1])", 70),
    "match_all_sync": ("m, p = cuda.match_all_sync(0xffffffff, a[1])\na[0] = m + p", 70),
    "match_any_sync_f64": ("a[0] = cuda.match_any_sync(0xffffffff, float(a[1]))", 70),
    "nanosleep": ("cuda.nanosleep(a[0])", 70),
}

#: Constructs every accepted architecture compiles (the survey's controls), down to sm_50.
EVERYWHERE = {
    "shfl_vote": "a[0] = cuda.shfl_sync(0xffffffff, a[1], 1) + cuda.ballot_sync(0xffffffff, "
                 "a[2] > 0) + cuda.shfl_down_sync(0xffffffff, float(a[3]), 1)",
    "masks": "a[0] = cuda.activemask() + cuda.lanemask_lt()\ncuda.syncwarp()",
    "atomics": "f = cuda.local.array(1, np.float64)\ncuda.atomic.add(a, 0, 1)\n"
               "cuda.atomic.max(a, 1, a[2])\ncuda.atomic.cas(a, 3, 0, 1)",
    "fp16": "h = np.float16(a[0]) * np.float16(a[1]) + np.float16(2.5)\n"
            "a[2] = int(cuda.fp16.hsin(h) + cuda.fp16.hfma(h, h, h))",
    "syncthreads": "a[0] = cuda.syncthreads_count(a[1] > 0)\ncuda.threadfence_system()",
    "grid_sync": "g = cuda.cg.this_grid()\na[0] = 1\ng.sync()",
}


def _kernel_source(name, body):
    return (f"def {name}(a):\n" + textwrap.indent(body, "    ") + "\n")


def _run_isolated(tmp_path, cases, timeout=240, setup=""):
    """Compile each ``(name, body, arch)`` in a fresh interpreter, one after another (``arch``:
    an architecture, or a Python expression that compiles or launches the function ``fn``);
    returns {name: "OK" | "CompileError: ..."} (the test fails on an abort or a timeout), and
    {name: where the body's first line is}.  The PTX of each that compiles is left in
    ``tmp_path / f"{name}.ptx"``."""
    module = tmp_path / "isolated_kernels.py"
    text, lines = "import numpy as np\nfrom gpureplace import cuda\nBIG = np.zeros(10**6)\n", {}
    for name, body, _ in cases:
        lines[name] = f"isolated_kernels.py, line {text.count(chr(10)) + 2}"
        text += _kernel_source(name, body)
    module.write_text(text)
    calls = [(n, a if "(" in a else f"cuda.jit(fn).compile('void(int32[::1])', arch={a!r})")
             for n, _, a in cases]
    driver = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(tmp_path)!r})
        import numpy as np
        import isolated_kernels as m
        from gpureplace import cuda
        from gpureplace.errors import CompileError
        {setup}
        for name, call in {calls!r}:
            fn = getattr(m, name)
            try:
                got = eval(call)
                ptx = getattr(got, "ptx", None) or (got[0] if isinstance(got, tuple) else None)
                if ptx:
                    open({str(tmp_path)!r} + "/" + name + ".ptx", "w").write(ptx)
                out = "OK"
            except CompileError as exc:
                out = "CompileError: " + str(exc)
            print(json.dumps([name, out]), flush=True)
        """)
    env = dict(os.environ, GPUREPLACE_CACHE="0")
    proc = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=HERE)
    results = dict(json.loads(line) for line in proc.stdout.splitlines() if line.startswith("["))
    assert "LLVM ERROR" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:], results)
    return results, lines


# ---------------------------------------------------------------------------------------------
# Minimum architectures


def test_arch_gated_intrinsics_are_compile_errors_below_their_architecture(tmp_path):
    cases = []
    for name, (body, need) in ARCH_GATED.items():
        for arch in ("sm_50", "sm_60", "sm_62", f"sm_{need}", "sm_90"):
            cases.append((f"{name}_{arch}", body, arch))
    for name, body in EVERYWHERE.items():
        cases.append((f"{name}_sm_50", body, "sm_50"))
    results, lines = _run_isolated(tmp_path, cases)
    for name, (body, need) in ARCH_GATED.items():
        call = "cuda." + name.removesuffix("_f64") + "()"
        for arch in ("sm_50", "sm_60", "sm_62"):
            got = results[f"{name}_{arch}"]
            assert got.startswith("CompileError"), (name, arch, got)
            assert call in got and f"compiled for {arch}" in got and f"sm_{need}" in got, got
            assert lines[f"{name}_{arch}"] in got, got        # the user's line
        assert results[f"{name}_sm_{need}"] == "OK"
        assert results[f"{name}_sm_90"] == "OK"
    for name in EVERYWHERE:
        assert results[f"{name}_sm_50"] == "OK", (name, results[f"{name}_sm_50"])


@pytest.mark.parametrize("name", sorted(ARCH_GATED))
def test_arch_gated_intrinsics_assemble_where_they_compile(name):
    body, _ = ARCH_GATED[name]
    ns = {"cuda": cuda, "np": np}
    exec(compile(_kernel_source("k", body), f"<{name}>", "exec"), ns)
    for arch in ("sm_75", "sm_90"):
        assemble(cuda.jit(ns["k"]).compile("void(int32[::1])", arch=arch).ptx, arch)


def test_the_default_arch_of_an_old_gpu_is_checked_too(tmp_path):
    body = ARCH_GATED["match_any_sync"][0]
    results, _ = _run_isolated(
        tmp_path, [("on_gpu", body, "cuda.jit(fn).compile('void(int32[::1])')"),
                   ("for_gpu", body, "cuda.compile_ptx_for_current_device(fn, "
                                     "'void(int32[::1])')")],
        setup="from gpureplace import probe; probe.default_arch = lambda: 'sm_61'")
    assert "compiled for sm_61" in results["on_gpu"]
    assert "compiled for sm_61" in results["for_gpu"]


def _with_driver(monkeypatch, version, isa=None):
    """Pretend the installed driver is CUDA ``version`` (that gives PTX ISA ``isa``)."""
    from gpureplace.compiler import backend
    monkeypatch.setattr(probe, "driver_version", lambda: version)
    if isa is not None:
        monkeypatch.setattr(backend, "ptx_isa_for_driver", lambda v: isa)


def test_activemask_and_nanosleep_need_a_new_enough_ptx_isa(monkeypatch):
    _with_driver(monkeypatch, 10000)                # a CUDA 10.0 driver: PTX ISA 6.0
    for body, what, isa in ((EVERYWHERE["masks"], r"cuda\.activemask\(\)", "6.2"),
                            ("cuda.nanosleep(a[0])", r"cuda\.nanosleep\(\)", "6.3")):
        ns = {"cuda": cuda}
        exec(compile(_kernel_source("k", body), "<isa>", "exec"), ns)
        with pytest.raises(CompileError, match=rf"{what} needs PTX ISA {isa} or newer, but "
                                               rf"the installed CUDA driver accepts PTX up to "
                                               rf"6\.0.*update the NVIDIA driver"):
            cuda.jit(ns["k"]).compile("void(int32[::1])", arch="sm_70")
    _with_driver(monkeypatch, 11000)                # CUDA 11.0: PTX ISA 7.0
    ns = {"cuda": cuda}
    exec(compile(_kernel_source("k", EVERYWHERE["masks"]), "<isa>", "exec"), ns)
    assert "activemask.b32" in cuda.jit(ns["k"]).compile("void(int32[::1])", arch="sm_75").ptx


def _tanh_kernel():
    # a new function each time: lowered code is cached per function and options, and the PTX
    # ISA (the driver's) is fixed for a process, so it is not among the options
    def tanh(x, out):
        out[0] = np.tanh(x[0])
    return cuda.jit(tanh, fastmath=True)


def test_fast_tanh_uses_the_instruction_only_where_the_ptx_isa_has_it(monkeypatch):
    sig = "void(float32[::1], float32[::1])"
    _with_driver(monkeypatch, 10020, isa=65)        # a (hypothetical) PTX ISA 6.5: no tanh.approx
    ptx = _tanh_kernel().compile(sig, arch="sm_75").ptx
    assert "tanh.approx" not in ptx and ".version 6.5" in ptx
    assemble(ptx, "sm_75")
    _with_driver(monkeypatch, 11000, isa=70)
    ptx = _tanh_kernel().compile(sig, arch="sm_75").ptx
    assert "tanh.approx.f32" in ptx
    assemble(ptx, "sm_75")


def test_architecture_variants_get_their_own_ptx_isa_and_unknown_ones_an_error(tmp_path):
    # sm_100f needs PTX 8.8 where sm_100 needs 8.6: LLVM aborted the process
    match = ARCH_GATED["match_any_sync"][0]
    results, _ = _run_isolated(tmp_path, [("plain_100f", match, "sm_100f"),
                                          ("plain_90a", match, "sm_90a"),
                                          ("plain_100a", match, "sm_100a"),
                                          ("plain_120f", match, "sm_120f"),
                                          ("plain_89a", "a[0] = 1", "sm_89a")])
    assert "unknown GPU architecture 'sm_89a'" in results["plain_89a"]
    assert "sm_90a" in results["plain_89a"] and "sm_89" in results["plain_89a"]
    for name, arch, version in (("plain_100f", "sm_100f", "8.8"), ("plain_90a", "sm_90a", "8.0"),
                                ("plain_100a", "sm_100a", "8.6"),
                                ("plain_120f", "sm_120f", "8.8")):
        assert results[name] == "OK"
        ptx = (tmp_path / f"{name}.ptx").read_text()
        if probe.driver_version() is None:         # else the driver's (newer) ISA
            assert f".version {version}" in ptx
        assert f".target {arch}" in ptx
        assemble(ptx, arch)


# ---------------------------------------------------------------------------------------------
# What a thread, a block and a module can hold


def test_huge_arrays_are_refused_before_any_ir(tmp_path):
    # These took 25 s and 4.4 GB (10**7), never finished (10**9 and 2**62 is an overflow
    # LLVM's parser refuses), or compiled to PTX that ptxas and the driver refuse.
    cases = [
        ("local_1e7", "l = cuda.local.array(10**7, np.float32)\nl[a[0]] = 1\na[1] = l[a[2]]",
         "sm_90"),
        ("local_1e9", "l = cuda.local.array(10**9, np.float32)\nl[a[0]] = 1\na[1] = l[a[2]]",
         "sm_90"),
        ("local_2e62", "l = cuda.local.array(2**62, np.int32)\nl[a[0]] = 1", "sm_90"),
        ("local_2d", "l = cuda.local.array((2**40, 2**40), np.int32)\nl[0, a[0]] = 1", "sm_90"),
        ("shared_1e8", "s = cuda.shared.array(10**8, np.int32)\ns[a[0]] = 1", "sm_90"),
        ("const_1e6", "c = cuda.const.array_like(BIG)\na[0] = int(c[a[1]])", "sm_90"),
        ("local_limit", "l = cuda.local.array(131072, np.float32)\nl[a[0]] = 1\n"
                        "a[1] = int(l[a[2]])", "sm_90"),
    ]
    results, lines = _run_isolated(tmp_path, cases, timeout=180)
    got = results["local_1e7"]
    assert "cuda.local.array of 10,000,000 float32, 38.1 MiB, is more than a thread's 512 KiB " \
           "of local memory; use a global array (pass one as an argument)" in got
    assert lines["local_1e7"] in got
    assert "1,000,000,000 float32" in results["local_1e9"]
    assert "4,611,686,018,427,387,904 int32" in results["local_2e62"]
    assert "shape (1099511627776, 1099511627776)" in results["local_2d"]
    assert "cuda.shared.array of 100,000,000 int32, 381.5 MiB, is more than the 48 KiB of " \
           "static shared memory a block can have; not even the 227 KiB" in results["shared_1e8"]
    assert "cuda.const.array_like(arr) of 1,000,000 float64, 7.6 MiB, is more than the 64 KiB " \
           "of constant memory" in results["const_1e6"]
    assert results["local_limit"] == "OK"            # 512 KiB exactly: in seconds, not minutes


def test_a_local_array_at_the_limit_compiles_to_one_zeroing_loop_and_assembles(tmp_path):
    # 512 KiB: minutes of compile time before (a store per element), seconds now
    body = "l = cuda.local.array(131072, np.float32)\nfor j in range(a.size):\n    l[j] = a[j]\n" \
           "a[0] = l[a.size // 2]"
    results, _ = _run_isolated(tmp_path, [("at_limit", body, "cuda.jit(fn).compile("
                                                             "'void(float32[::1])')")],
                               timeout=120)
    assert results["at_limit"] == "OK"
    ptx = (tmp_path / "at_limit.ptx").read_text()
    assert "__local_depot0[524288]" in ptx
    # zeroed by a loop of 4-byte stores, not 131072 stores (nor a loop of byte stores)
    assert ptx.count("st.local.b32") < 32 and "st.local.b8" not in ptx
    assemble(ptx, "sm_90")


def _small_local(a):
    l = cuda.local.array(4, np.float32)
    l[0] = a[0]
    a[1] = l[0] + l[3]          # l[3] was never written: zero, as numba-cuda's local arrays


def test_small_local_arrays_still_start_at_zero_and_stay_in_registers():
    ptx = cuda.jit(_small_local).compile("void(float32[::1])").ptx
    assert ".local" not in ptx and "__local_depot" not in ptx


@pytest.mark.parametrize("arch, advice", [
    ("sm_90", r"a block on sm_90 can have up to 227 KiB as dynamic shared memory: declare "
              r"cuda\.shared\.array\(0, float32\) instead"),
    ("sm_80", r"a block on sm_80 can have up to 163 KiB"),
    ("sm_75", r"not even the 64 KiB of shared memory a block on sm_75 can have holds it"),
    ("sm_60", r"not even the 48 KiB of shared memory a block on sm_60"),
])
def test_static_shared_memory_over_48_kib_says_what_the_arch_allows(arch, advice):
    def k(a):
        s = cuda.shared.array(20000, np.float32)
        s[a.size] = 1
        a[0] = s[a.size + 1]
    with pytest.raises(CompileError, match=r"cuda\.shared\.array of 20,000 float32, 78\.1 KiB, "
                                           r"is more than the 48 KiB of static shared memory a "
                                           r"block can have; " + advice):
        cuda.jit(k).compile("void(float32[::1])", arch=arch)


def _shared_part(a):
    s = cuda.shared.array(6000, np.float32)              # 23.4 KiB
    s[a.size] = a[0]
    cuda.syncthreads()
    return s[a.size + 1]


def _shared_sum(a):
    t = cuda.shared.array(8000, np.float32)              # 31.2 KiB
    t[a.size] = a[1]
    cuda.syncthreads()
    a[2] = t[a.size + 3] + _shared_part(a)


def _shared_fits(a):
    t = cuda.shared.array(6000, np.float32)
    t[a.size] = a[1]
    cuda.syncthreads()
    a[2] = t[a.size + 3] + _shared_part(a)


def test_static_shared_arrays_of_a_kernel_and_its_device_functions_add_up():
    with pytest.raises(CompileError) as info:
        cuda.jit(_shared_sum).compile("void(float32[::1])")
    msg = str(info.value)
    assert "the static shared arrays of _shared_sum add up to 54.7 KiB" in msg
    assert f"line {_shared_sum.__code__.co_firstlineno + 1}: 31.2 KiB" in msg
    assert f"_shared_part, line {_shared_part.__code__.co_firstlineno + 1}: 23.4 KiB" in msg
    assert "more than the 48 KiB of static shared memory a block can have" in msg
    assert info.value.lineno == _shared_sum.__code__.co_firstlineno + 1
    # 46.9 KiB in all: it fits, and ptxas agrees
    assemble(cuda.jit(_shared_fits).compile("void(float32[::1])").ptx, "sm_90")


def _local_part(a):
    l = cuda.local.array(100000, np.float32)             # 390.6 KiB
    l[a.size] = 1
    return l[a.size + 1]


def _local_sum(a):
    l = cuda.local.array(40000, np.float32)              # 156.2 KiB
    l[a.size] = a[0]
    a[1] = l[a.size + 2] + _local_part(a)


def test_local_arrays_of_a_kernel_and_its_device_functions_add_up():
    with pytest.raises(CompileError) as info:
        cuda.jit(_local_sum).compile("void(float32[::1])")
    msg = str(info.value)
    assert "the local arrays of _local_sum add up to 546.9 KiB per thread" in msg
    assert "_local_part() and what it calls: 390.6 KiB" in msg
    assert info.value.lineno == _local_sum.__code__.co_firstlineno + 1


CONST_A = np.arange(10000, dtype=np.float32)
CONST_B = np.arange(10000, dtype=np.float32) * 2


def _const_sum(a):
    c = cuda.const.array_like(CONST_A)
    d = cuda.const.array_like(CONST_B)
    a[0] = c[a.size] + d[a.size]


_long_format = {}
exec("def _long_format(a):\n    print('" + "x" * 70000 + "', a[0])\n", _long_format)
_long_format = _long_format["_long_format"]


def test_constant_data_of_a_module_adds_up():
    with pytest.raises(CompileError, match=r"the constant data of _const_sum add up to 78\.1 KiB "
                                           r".*more than the 64 KiB of constant memory"):
        cuda.jit(_const_sum).compile("void(float32[::1])")
    with pytest.raises(CompileError, match=r"a print\(\) format string in _long_format"):
        cuda.jit(_long_format).compile("void(float32[::1])")


def _cas_on_local(a):
    l = cuda.local.array(4, np.int32)
    l[0] = a[0]
    cuda.atomic.cas(l, 0, 1, 2)
    a[1] = l[0]


def _max_on_local(a):
    l = cuda.local.array(4, np.float32)
    l[a.size] = a[0]
    cuda.atomic.max(l, a.size, a[2])
    a[1] = l[a.size]


def _add_on_local(a):
    l = cuda.local.array(64, np.uint64)
    l[a.size] = a[0]
    cuda.atomic.add(l, a.size, 1)
    cuda.atomic.inc(l, a.size + 1, 5)
    a[1] = l[a.size]


def test_compare_and_swap_on_a_local_array_is_an_error_not_ptx_that_ptxas_refuses():
    # (ptxas: "State space incorrect for instruction 'atom'")
    with pytest.raises(CompileError, match=r"cuda\.atomic\.cas\(\) in _cas_on_local, line \d+\): "
                                           r"local memory belongs to one thread"):
        cuda.jit(_cas_on_local).compile("void(int32[::1])")
    with pytest.raises(CompileError, match=r"cuda\.atomic\.max\(\)"):
        cuda.jit(_max_on_local).compile("void(float32[::1])")
    # read-modify-write atomics there LLVM turns into plain loads and stores
    assemble(cuda.jit(_add_on_local).compile("void(uint64[::1])").ptx, "sm_90")


@pytest.mark.parametrize("call", ["cuda.shared.array(4, np.int32, alignment=2**40)",
                                  "cuda.shared.array(0, np.int32, alignment=2**33)",
                                  "cuda.local.array(4, np.int32, alignment=2**40)"])
def test_alignment_over_llvms_maximum_is_refused(call):
    ns = {"cuda": cuda, "np": np}
    exec(compile(_kernel_source("k", f"s = {call}\ns[0] = 1\na[0] = s[a[1]]"), "<align>",
                 "exec"), ns)
    with pytest.raises(CompileError, match=r"alignment=\d+\): the alignment can be at most "
                                           r"4294967296"):
        cuda.jit(ns["k"]).compile("void(int32[::1])")


def _one(a):
    a[0] = 1


def test_opt_levels():
    with pytest.raises(CompileError, match=r"cuda\.jit\(opt=5\): opt must be an optimisation "
                                           r"level from 0 to 3"):
        cuda.jit(_one, opt=5).compile("void(int32[::1])")
    with pytest.raises(CompileError, match=r"opt='fast'"):
        cuda.jit(_one, opt="fast").compile("void(int32[::1])")
    # numba-cuda's opt=True is its full optimisation (it was LLVM's O1 here)
    assert cuda.jit(_one, opt=True).compile("void(int32[::1])").ptx == \
        cuda.jit(_one, opt=3).compile("void(int32[::1])").ptx


def _mul_add(x, y, z):
    return x * y + z


def _mul_add_kernel(a):
    a[0] = a[1] * a[2] + a[3]


def test_opt_false_contracts_no_multiply_and_add_into_an_fma():
    # numba-cuda's opt=False (NVVM's -opt=0): each operation rounds on its own; optimised code
    # contracts as CUDA C's default -fmad=true does
    from numba.core import types as nbt
    sig = (nbt.float64, nbt.float64, nbt.float64)
    for opt, fused in ((True, True), (3, True), (1, True), (False, False), (0, False)):
        device_ptx = cuda.jit(sig, device=True, opt=opt)(_mul_add).inspect_asm(sig)
        kernel_ptx = cuda.jit(_mul_add_kernel, opt=opt).compile("void(float64[::1])").ptx
        for ptx in (device_ptx, kernel_ptx):
            assert ("fma.rn.f64" in ptx) == fused, (opt, ptx)
            assert ("mul.rn.f64" in ptx and "add.rn.f64" in ptx) == (not fused), (opt, ptx)
            assemble(ptx)
    # fast math contracts whatever the level
    assert "fma.rn.f64" in cuda.jit(_mul_add_kernel, opt=False, fastmath=True).compile(
        "void(float64[::1])").ptx


@pytest.mark.skipif(SIMULATE, reason="sets the backend itself")
def test_the_simulator_refuses_the_same(tmp_path):
    launch = "cuda.jit(fn)[1, 32](np.zeros(4, np.int32))"
    results, lines = _run_isolated(
        tmp_path, [("big_local", "l = cuda.local.array(10**7, np.float32)\nl[0] = 1\n"
                                 "a[0] = int(l[0])", launch),
                   ("match_old", ARCH_GATED["match_any_sync"][0], launch)],
        setup="from gpureplace.config import settings; settings.backend = 'simulator'; "
              "settings.arch = 'sm_60'")
    assert "more than a thread's 512 KiB" in results["big_local"]
    assert "compiled for sm_60" in results["match_old"]
