"""Dependency records: every global read and every override used, across the whole call graph."""

import math

import numpy as np

from gpureplace import cuda
import helpers_records as hr

SCALE = 3.0


def helper(v):
    return hr.far(v) * SCALE


@cuda.jit
def kern(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = helper(x[i]) + math.sin(x[i]) + np.exp(x[i])


def test_global_reads_and_callees_are_recorded():
    spec = kern.compile("void(float32[:], float32[:])")
    deps = spec.dependencies()
    assert deps["functions"][0].endswith("kern")
    names = {(g["function"].rsplit(".", 1)[-1], g["name"]) for g in deps["globals"]}
    assert ("kern", "helper") in names
    assert ("kern", "math") in names and ("kern", "math.sin") in names
    assert ("kern", "np") in names and ("kern", "numpy.exp") in names
    assert ("helper", "SCALE") in names
    assert ("helper", "hr") in names and ("helper", "helpers_records.far") in names
    assert ("far", "OFFSET") in names
    # callees, transitively, each once
    assert [f.rsplit(".", 1)[-1] for f in deps["functions"]] == ["kern", "helper", "far"]


def test_frozen_values_are_kept_with_the_record():
    spec = kern.compile("void(float32[:], float32[:])")
    reads = {r.name: r for cf in spec.compiled.closure() for r in cf.global_reads}
    assert reads["SCALE"].value == 3.0
    assert reads["OFFSET"].value == hr.OFFSET
    assert reads["SCALE"].lineno == helper.__code__.co_firstlineno + 1


def test_overrides_used_name_the_context_layer():
    deps = kern.dependencies("void(float32[:], float32[:])")
    used = {(o["host"], o["context"]) for o in deps["overrides"]}
    assert ("math.sin", "builtin") in used
    assert ("numpy.exp", "builtin") in used
