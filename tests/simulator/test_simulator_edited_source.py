"""The simulator runs the code Python loaded, not the file's current text.

It compiles each function again from its source (``simulator/operators.py``, ``rewrite``) to give
its operators Numba's meaning, and checks that the source still compiles to the loaded code; a
file edited since its module was loaded (and not reloaded) fails the check, and the function then
runs as Python loaded it.  The check compared bytecode and names but not constants, so an edited
constant (``x * 2.0`` -> ``x * 3.0``) passed and the simulator ran the edited file."""

import importlib
import os
import sys
import textwrap
import time

import numpy as np
import pytest

from gpureplace import cuda
from gpureplace.config import settings
from gpureplace.simulator import operators


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


def _module(tmp_path, monkeypatch, name, source):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    monkeypatch.setitem(sys.modules, name, module)
    return module, path


def _edit(path, old, new):
    """The file edited in place (as an editor saves it), its time moved on so that linecache
    sees the change even where the size stays the same."""
    path.write_text(path.read_text().replace(old, new))
    later = time.time() + 10
    os.utime(path, (later, later))


def test_an_edited_constant_of_a_module_not_reloaded_is_not_simulated(simulated, tmp_path,
                                                                      monkeypatch):
    mylib, path = _module(tmp_path, monkeypatch, "edited_consts_lib", """
        def helper(x):
            return x * 2.0

        def ihelper(n):
            return n // 2
        """)
    _edit(path, "x * 2.0", "x * 3.0")
    _edit(path, "n // 2", "n // 4")

    @cuda.jit
    def k(out, iout):
        out[0] = mylib.helper(1.5)
        iout[0] = mylib.ihelper(20)

    out, iout = np.zeros(1), np.zeros(1, np.int64)
    k[1, 1](out, iout)
    assert (out[0], iout[0]) == (mylib.helper(1.5), mylib.ihelper(20)) == (3.0, 10)


def test_the_unedited_source_is_still_rewritten(tmp_path, monkeypatch):
    """Where the file still holds the loaded code, the function is compiled again with Numba's
    operators -- indented definitions' multi-line strings kept as they are (dedenting the source
    changed them: another constant), and under the file's own ``from __future__`` imports."""
    mod, _ = _module(tmp_path, monkeypatch, "unedited_consts_lib", '''
        from __future__ import annotations

        def make():
            def helper(x):
                """First line.
                second line, indented in the file."""
                s = """a
                b"""
                return x * 2.0 + len(s)
            return helper

        def plain(x: float) -> float:
            return -x
        ''')
    for fn in (mod.make(), mod.plain):
        code = operators.rewrite(fn)
        assert operators.NAME in code.co_names, fn.__name__      # rewritten, not as it is
        strings = [c for c in fn.__code__.co_consts if isinstance(c, str)]
        assert [c for c in code.co_consts if isinstance(c, str)][:len(strings)] == strings


def _compiled(source, name="f"):
    namespace = {}
    exec(compile(textwrap.dedent(source), "<test>", "exec"), namespace)
    return namespace[name].__code__


@pytest.mark.parametrize("edited", [
    "def f(x):\n    return x * 3.0\n",                         # a float
    "def f(x):\n    return x * 2\n",                           # 2 == 2.0 in Python
    "def f(x):\n    return x * -0.0\n",                        # -0.0 == 0.0 in Python
    "def f(x):\n    return x * 2.0 if x in (1, 3) else x\n",   # a tuple's element
    "def f(x):\n    g = lambda v: v * 3.0\n    return g(x)\n",   # a nested function's constant
    "def f(x):\n    return sum(v * 3.0 for v in x)\n",         # a generator expression's
    "def f(x):\n    '''other'''\n    return x * 2.0\n",         # a docstring
])
def test_same_code_tells_constants_apart(edited):
    loaded = {
        "def f(x):\n    return x * 3.0\n": "def f(x):\n    return x * 2.0\n",
        "def f(x):\n    return x * 2\n": "def f(x):\n    return x * 2.0\n",
        "def f(x):\n    return x * -0.0\n": "def f(x):\n    return x * 0.0\n",
        "def f(x):\n    return x * 2.0 if x in (1, 3) else x\n":
            "def f(x):\n    return x * 2.0 if x in (1, 2) else x\n",
        "def f(x):\n    g = lambda v: v * 3.0\n    return g(x)\n":
            "def f(x):\n    g = lambda v: v * 2.0\n    return g(x)\n",
        "def f(x):\n    return sum(v * 3.0 for v in x)\n":
            "def f(x):\n    return sum(v * 2.0 for v in x)\n",
        "def f(x):\n    '''other'''\n    return x * 2.0\n":
            "def f(x):\n    '''doc'''\n    return x * 2.0\n",
    }[edited]
    assert operators._same_code(_compiled(loaded), _compiled(loaded))
    assert not operators._same_code(_compiled(edited), _compiled(loaded))
