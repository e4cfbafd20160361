"""The disk cache keeps kernels whose helpers are lambdas, closures made by a factory or
``@overload`` implementations, and serves them only where what defines the helper is the same:
each case runs in fresh processes sharing one cache directory (the identical definitions hit
with the same PTX; another constant in a lambda, another value in a closure's cell, another
overload body, another implementation chosen by an overload's generator miss and compile the
new code)."""

import json
import os
import subprocess
import sys
import textwrap

from gpureplace.compiler import overloads

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TWO_AND_A_HALF = "0D4004000000000000"        # 2.5 in PTX
THREE_AND_A_HALF = "0D400C000000000000"      # 3.5
FOUR_AND_A_HALF = "0D4012000000000000"       # 4.5

NUMBA_LEVEL = """
from gpureplace import cuda
from numba.extending import overload

lambda_helper = lambda v: v * {c}             # noqa: E731
@cuda.jit
def k_lambda(out):
    out[0] = lambda_helper(out[0])

def make(c):
    def scaled(v):
        return v * c
    return scaled
closure_helper = make({c})
@cuda.jit
def k_closure(out):
    out[0] = closure_helper(out[0])

# two lambdas of one module (both named <lambda>), two closures of one factory
first = lambda v: v * 1.25                    # noqa: E731
second = lambda v: v + {c}                    # noqa: E731
@cuda.jit
def k_two_lambdas(out):
    out[0] = second(first(out[0]))

fixed = make(1.25)
@cuda.jit
def k_two_closures(out):
    out[0] = closure_helper(fixed(out[0]))

def host(v):
    return v
@overload(host, target="cuda")
def _host(v):
    return lambda v: v * {c}
@cuda.jit
def k_overload(out):
    out[0] = host(out[0])

SCALE = {c}
def host_closure(v):
    return v
@overload(host_closure, target="cuda")
def _host_closure(v):
    s = SCALE
    def impl(v):
        return v * s
    return impl
@cuda.jit
def k_overload_closure(out):
    out[0] = host_closure(out[0])

def times_a(v):
    return v * 2.5
def times_b(v):
    return v * 3.5
CHOICE = {choice!r}
def host_choice(v):
    return v
@overload(host_choice, target="cuda")
def _host_choice(v):
    return times_a if CHOICE == "a" else times_b
@cuda.jit
def k_overload_choice(out):
    out[0] = host_choice(out[0])
"""

KERNELS = ["k_lambda", "k_closure", "k_two_lambdas", "k_two_closures", "k_overload",
           "k_overload_closure", "k_overload_choice"]

GPUREPLACE_OVERLOAD = """
from gpureplace import cuda
from gpureplace.cuda.extending import overload

def host(v):
    return v
@overload(host)
def _host(v):
    return lambda v: v * {c}
@cuda.jit
def k_gp_overload(out):
    out[0] = host(out[0])

@cuda.jit
def k_other(out):
    out[0] = 1.5
"""

INLINED = """
from gpureplace import cuda
from numba.extending import overload

def host(v):
    return v
@overload(host, target="cuda", inline="always")
def _host(v):
    return lambda v: v * {c}
@cuda.jit
def k_inlined(out):
    out[0] = host(out[0])
"""

PROGRAM = textwrap.dedent("""
    import sys, json
    sys.path.insert(0, {moddir!r})
    import gpureplace
    import helpers_under_test as m
    out = {{}}
    for name in {kernels!r}:
        spec = getattr(m, name).compile("void(float64[:])")
        out[name] = {{"ptx": spec.ptx.upper(), "from_disk": spec.from_disk}}
    after = {{}}
    if {rebind!r}:
        # helpers bound again after a warm start: the loaded kernels follow them
        m.lambda_helper = eval("lambda v: v * 4.5", vars(m))
        m.closure_helper = m.make(4.5)
        gpureplace.refresh()
        for name in ("k_lambda", "k_closure", "k_two_closures"):
            after[name] = getattr(m, name).compile("void(float64[:])").ptx.upper()
    print(json.dumps({{"kernels": out, "stats": gpureplace.stats(), "after": after}}))
""")


def run(tmp_path, source, kernels, rebind=False, **values):
    """Write the module with ``values`` and compile ``kernels`` in a new process sharing the
    cache directory of ``own_disk_cache``."""
    (tmp_path / "helpers_under_test.py").write_text(source.format(**values))
    # No .pyc: the module is rewritten within one second with the same size, which Python's
    # bytecode cache (mtime + size) would not notice.
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(moddir=str(tmp_path), kernels=kernels, rebind=rebind)],
        capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_lambda_closure_and_overload_helpers_hit_when_identical_and_miss_when_not(
        own_disk_cache, tmp_path):
    first = run(tmp_path, NUMBA_LEVEL, KERNELS, c=2.5, choice="a")
    assert first["stats"]["kernel_compiles"] == len(KERNELS)
    for name in KERNELS:
        assert not first["kernels"][name]["from_disk"], name
        assert TWO_AND_A_HALF in first["kernels"][name]["ptx"], name

    second = run(tmp_path, NUMBA_LEVEL, KERNELS, rebind=True, c=2.5, choice="a")
    assert second["stats"]["disk_hits"] == len(KERNELS)
    assert second["stats"]["kernel_compiles"] == 3         # (the three rebound below)
    for name in KERNELS:
        assert second["kernels"][name]["from_disk"], name
        assert second["kernels"][name]["ptx"] == first["kernels"][name]["ptx"], name
    for name, ptx in second["after"].items():
        assert FOUR_AND_A_HALF in ptx and TWO_AND_A_HALF not in ptx, name

    # another constant in the lambdas, another value in the closures' cells, another overload
    # body, another value in the overload implementation's closure, another implementation
    # chosen: the kernels' own code is the same, and each must compile the new code
    third = run(tmp_path, NUMBA_LEVEL, KERNELS, c=3.5, choice="b")
    assert third["stats"]["disk_hits"] == 0
    assert third["stats"]["kernel_compiles"] == len(KERNELS)
    for name in KERNELS:
        assert not third["kernels"][name]["from_disk"], name
        assert THREE_AND_A_HALF in third["kernels"][name]["ptx"], name
        assert TWO_AND_A_HALF not in third["kernels"][name]["ptx"], name

    # both definitions stay kept
    fourth = run(tmp_path, NUMBA_LEVEL, KERNELS, c=3.5, choice="b")
    assert fourth["stats"]["disk_hits"] == len(KERNELS)
    for name in KERNELS:
        assert fourth["kernels"][name]["ptx"] == third["kernels"][name]["ptx"], name


def test_a_generators_choice_alone_changing_is_a_miss(own_disk_cache, tmp_path):
    """Everything but a global the overload's generator reads is the same: the implementation
    it returns is another function (a module function found by its name before)."""
    kernels = ["k_overload_choice"]
    run(tmp_path, NUMBA_LEVEL, kernels, c=2.5, choice="a")
    assert run(tmp_path, NUMBA_LEVEL, kernels, c=2.5, choice="a")["stats"]["disk_hits"] == 1
    other = run(tmp_path, NUMBA_LEVEL, kernels, c=2.5, choice="b")
    assert not other["kernels"]["k_overload_choice"]["from_disk"]
    assert THREE_AND_A_HALF in other["kernels"]["k_overload_choice"]["ptx"]


def test_gpureplace_overloads_are_kept_and_another_body_misses(own_disk_cache, tmp_path):
    """``gpureplace.cuda.extending.overload`` lives in the default context, part of every
    kernel's key: with it there, no kernel of the process was kept before."""
    kernels = ["k_gp_overload", "k_other"]
    first = run(tmp_path, GPUREPLACE_OVERLOAD, kernels, c=2.5)
    assert TWO_AND_A_HALF in first["kernels"]["k_gp_overload"]["ptx"]
    second = run(tmp_path, GPUREPLACE_OVERLOAD, kernels, c=2.5)
    assert second["stats"]["disk_hits"] == 2 and second["stats"]["kernel_compiles"] == 0
    third = run(tmp_path, GPUREPLACE_OVERLOAD, kernels, c=3.5)
    assert not third["kernels"]["k_gp_overload"]["from_disk"]
    assert THREE_AND_A_HALF in third["kernels"]["k_gp_overload"]["ptx"]


def test_an_inlined_overload_is_not_kept(own_disk_cache, tmp_path):
    """An overload inlined into its caller leaves no read of its host to ask again: such a
    kernel compiles in each process (never the code of another body)."""
    kernels = ["k_inlined"]
    run(tmp_path, INLINED, kernels, c=2.5)
    again = run(tmp_path, INLINED, kernels, c=2.5)
    assert not again["kernels"]["k_inlined"]["from_disk"]
    other = run(tmp_path, INLINED, kernels, c=3.5)
    assert THREE_AND_A_HALF in other["kernels"]["k_inlined"]["ptx"]


def test_argument_types_as_text_read_back_exactly():
    from numba.core import types
    for ty in [types.float64, types.int32, types.boolean, types.complex64, types.none,
               types.Array(types.float32, 2, "A"), types.Array(types.float64, 1, "C",
                                                               readonly=True),
               types.UniTuple(types.UniTuple(types.int64, 2), 3),
               types.Tuple((types.int64, types.Array(types.float64, 1, "F"))),
               types.literal(7), types.literal(True), types.Tuple(())]:
        text = overloads.type_text(ty)
        assert text is not None and overloads.parse_type(text) == ty, ty
    for junk in ["__import__('os')", "array(float64, 1d, C) ", "Tuple(int64,", "Literal[int](x)",
                 "UniTuple(float64 x -1)", "nonexistent"]:
        try:
            overloads.parse_type(junk)
        except ValueError:
            continue
        raise AssertionError(f"{junk!r} was read as a type")


NUMPY_FUNCTIONS = """
import numpy as np
from gpureplace import cuda

@cuda.jit
def k_numpy(out):
    out[0] = np.sinc(out[0]) + np.sum(out) * {c}
"""


def test_kernels_calling_numpys_functions_are_kept(own_disk_cache, tmp_path):
    """``np.sum`` and ``np.sinc`` (NumPy's dispatcher objects, reaching Numba's own intrinsics
    and overloads) were read without a fingerprint: such a kernel compiled in every process."""
    first = run(tmp_path, NUMPY_FUNCTIONS, ["k_numpy"], c=2.5)
    assert not first["kernels"]["k_numpy"]["from_disk"]
    again = run(tmp_path, NUMPY_FUNCTIONS, ["k_numpy"], c=2.5)
    assert again["stats"]["disk_hits"] == 1 and again["stats"]["kernel_compiles"] == 0
    assert again["kernels"]["k_numpy"]["ptx"] == first["kernels"]["k_numpy"]["ptx"]
    other = run(tmp_path, NUMPY_FUNCTIONS, ["k_numpy"], c=3.5)
    assert not other["kernels"]["k_numpy"]["from_disk"]
    assert THREE_AND_A_HALF in other["kernels"]["k_numpy"]["ptx"]


CONTENT_BY_BITS = """
import math
import numpy as np
from gpureplace import cuda

REC = np.zeros(2, dtype={fields})
REC.view(np.float64)[:2] = [1.0, 2.0]          # the same bytes in both layouts
BIG = np.zeros(10000, dtype={fields})          # (over 64 KiB: a device global, no bytes in the PTX)
K = {k}

@cuda.jit({declared!r}, device=True)
def triple(v):
    return v * 3.0

@cuda.jit
def k_small_record(out):
    out[0] = REC[0]["a"]

@cuda.jit
def k_big_record(out):
    out[0] = BIG[0]["a"]

@cuda.jit
def k_nan_sign(out):
    out[0] = math.copysign(1.0, K)

@cuda.jit
def k_declared(out):
    out[0] = triple(out[0])
"""
BY_BITS = ["k_small_record", "k_big_record", "k_nan_sign", "k_declared"]


def test_what_a_fingerprint_missed_is_a_miss(own_disk_cache, tmp_path):
    """Four changes the disk cache served the old code for: a record array's fields reordered
    (its dtype was ``|V16`` either way), ``nan`` made ``-nan`` (``repr`` gives ``nan`` for
    both), a device function declaring another signature (its Python function the same)."""
    first = run(tmp_path, CONTENT_BY_BITS, BY_BITS, fields="[('a', 'f8'), ('b', 'f8')]",
                k="float('nan')", declared="float32(float32)")
    other = run(tmp_path, CONTENT_BY_BITS, BY_BITS, fields="[('b', 'f8'), ('a', 'f8')]",
                k="-float('nan')", declared="float64(float64)")
    assert other["stats"]["disk_hits"] == 0
    for name in BY_BITS:
        assert not other["kernels"][name]["from_disk"], name
        assert other["kernels"][name]["ptx"] != first["kernels"][name]["ptx"], name
    ptx = {name: other["kernels"][name]["ptx"] for name in BY_BITS}
    assert "4611686018427387904" in ptx["k_small_record"]            # 2.0: field a is second
    assert "+8]" in ptx["k_big_record"]
    assert "-4616189618054758400" in ptx["k_nan_sign"]               # -1.0
    assert "CVT.RN.F32.F64" not in ptx["k_declared"]
    again = run(tmp_path, CONTENT_BY_BITS, BY_BITS, fields="[('b', 'f8'), ('a', 'f8')]",
                k="-float('nan')", declared="float64(float64)")
    assert again["stats"]["disk_hits"] == len(BY_BITS)
