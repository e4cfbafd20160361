"""What a ``%%cuda`` cell cannot make a kernel, refused at its ``def`` through a real
InteractiveShell: a generator and an ``async def`` fail the cell as gpureplace shows compile
errors (one block naming the cell and line), what the cell defined above them is converted, and
the name keeps its old value.  A generator the cell decorates ``@cuda.jit(device=True)`` stays
a helper that kernels iterate."""

import re
import warnings

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")

from IPython.utils.capture import capture_output  # noqa: E402

import gpureplace  # noqa: E402
from gpureplace.config import settings  # noqa: E402
from gpureplace.jit import GPUFunction  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def ip(shell, monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")
    return shell


def shown_run(ip, src):
    """Run ``src`` as a cell: (result, what it showed without colours, warnings raised)."""
    with capture_output() as cap, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = ip.run_cell(src, store_history=True)
    return res, ANSI.sub("", cap.stdout + cap.stderr), [str(w.message) for w in caught]


GEN = "def gen(n):\n    for i in range(n):\n        yield i\n"


@pytest.mark.parametrize("body, line, words", [
    (GEN, 4, "gen is a generator (its body has yield), which a kernel cannot be: kernels "
             "cannot yield"),
    ("async def co():\n    return 1\n", 4, "co is an async def function, which cannot be a "
                                           "kernel"),
    ("async def agen():\n    yield 1\n", 4, "agen is an async generator"),
    # a def inside a top-level block is one of the cell's functions too
    ("if True:\n    " + GEN.replace("\n    ", "\n        ").rstrip() + "\n", 5,
     "gen is a generator"),
])
def test_a_generator_or_async_def_fails_the_cell_where_it_is_defined(ip, body, line, words):
    ip.run_cell("gen = co = agen = 'before'", store_history=True)
    src = "%%cuda\ndef early(out):\n    out[0] = 1.0\n" + body + \
        "def late(out):\n    out[0] = 2.0\n"
    n = ip.execution_count
    res, shown, caught = shown_run(ip, src)
    err = res.error_in_exec
    assert isinstance(err, gpureplace.CompileError), shown
    assert words in str(err)
    assert err.lineno is not None
    # one block naming the cell and the def's line as typed (line 1 is %%cuda), no traceback
    assert f"(Cell In[{n}], line {line})" in shown and words in shown, shown
    assert "Traceback" not in shown and "cells.py" not in shown, shown
    assert not [w for w in caught if "gpureplace" in w], caught     # no hook failure
    # what the cell defined above converted; the refused name kept; the cell stopped there
    assert isinstance(ip.user_ns["early"], GPUFunction)
    assert ip.user_ns["gen"] == ip.user_ns["co"] == ip.user_ns["agen"] == "before"
    assert "late" not in ip.user_ns


def test_a_generator_decorated_as_a_device_function_stays_a_helper(ip):
    res, shown, caught = shown_run(
        ip, "%%cuda\n@cuda.jit(device=True)\n" + GEN.replace("yield i", "yield 2.0 * i") +
        "def k(out):\n    s = 0.0\n    for v in gen(4):\n        s += v\n    out[0] = s\n")
    assert res.success, shown
    ip.user_ns["out"] = out = np.zeros(1)
    res, shown, _ = shown_run(ip, "k[1, 1](out)")
    assert res.success, shown
    assert out[0] == 12.0


def test_an_async_def_in_a_plain_cell_is_left_alone(ip):
    res, shown, caught = shown_run(ip, "async def co():\n    return 1\n")
    assert res.success and not caught, shown
