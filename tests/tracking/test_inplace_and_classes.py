"""Changes that rebind no name, and classes whose name stays while their meaning changes.

- A function changed in place: its ``__code__``, ``__defaults__`` or ``__kwdefaults__`` assigned,
  as IPython's ``%autoreload 2`` does (tests/ipython/test_autoreload_inplace.py runs the real
  extension): the kernels that compiled it recompile, and only they.
- An ``Enum`` class defined again with other values, a namedtuple class with other fields: the
  same qualified name, other code.

Each is checked in one process (``gpureplace.refresh()``, and the cell hook's
``bindings.check()``) and in a second process on the disk cache the first one filled (a
definition that differs there must not be served the old PTX).
"""

import json
import os
import struct
import subprocess
import sys
import textwrap
import types
from collections import namedtuple
from enum import Enum, IntEnum, IntFlag

import numpy as np
import pytest
from test_disk_cache import ROOT

import gpureplace
from gpureplace.tracking import bindings, deps, world
from gpureplace.tracking.fingerprint import fingerprint

SIG = "void(float64[:])"

# (they count compiles: a cache left by an earlier run would make some disk hits)
pytestmark = pytest.mark.usefixtures("own_disk_cache")


def holds(ptx, value):
    """Whether ``ptx`` holds the float64 constant ``value`` (as an operand, ``0d...``, or as the
    integer a store of a constant writes)."""
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    return f"0D{bits:016X}" in ptx.upper() or str(bits) in ptx


class Session:
    """Cells run in one module namespace, as test_redefinition.py's."""

    def __init__(self, name):
        self.mod = types.ModuleType(name)
        self.ns = self.mod.__dict__
        sys.modules[name] = self.mod

    def run(self, src, refresh=True):
        exec(compile(textwrap.dedent(src), f"<cell-{id(src)}>", "exec"), self.ns)
        if refresh:
            gpureplace.refresh()

    def compile(self, name="kern"):
        return self.ns[name].compile(SIG)


def compiles():
    return gpureplace.stats()["kernel_compiles"]


def new_function(src, name="f"):
    """A function defined from ``src`` elsewhere: what ``%autoreload`` takes the new code from."""
    ns = {}
    exec(textwrap.dedent(src), ns)
    return ns[name]


# ---------------------------------------------------------------------------------------------
# 1. Functions changed in place


HELPER_CELL = """
    from gpureplace import cuda
    def g(v):
        return v + 0.25
    def other(v):
        return v * 11.0
    @cuda.jit
    def kern(out):
        out[0] = g(out[0])
    @cuda.jit
    def k_other(out):
        out[0] = other(out[0])
"""


def test_a_helper_given_new_code_recompiles_its_kernel_and_only_it():
    s = Session("inplace_code")
    s.run(HELPER_CELL)
    assert holds(s.compile().ptx, 0.25)
    spec_other = s.compile("k_other")
    c = compiles()
    s.ns["g"].__code__ = new_function("def f(v):\n    return v + 0.75").__code__
    s.run("", refresh=True)
    spec = s.compile()
    assert holds(spec.ptx, 0.75) and not holds(spec.ptx, 0.25)
    assert compiles() == c + 1
    assert s.compile("k_other") is spec_other and compiles() == c + 1


def test_the_cell_hook_reports_a_function_changed_in_place_once():
    s = Session("inplace_hook")
    s.run(HELPER_CELL)
    s.compile()
    s.compile("k_other")
    bindings.check()
    assert not [c for c in bindings.check() if c.namespace is s.ns]
    age = world.age
    g = s.ns["g"]
    g.__code__ = new_function("def f(v):\n    return v + 0.75").__code__
    changes = [c for c in bindings.check() if c.function is g]
    assert [tuple(c) for c in changes] == [("inplace_hook", "g", "changed in place")]
    assert world.age != age                                  # the world moved: no refresh()
    assert not [c for c in bindings.check() if c.function is g]    # reported once
    assert deps.dependents([s.ns["kern"], s.ns["k_other"]], changes) == ["kern"]
    assert holds(s.compile().ptx, 0.75)


def test_new_defaults_in_place():
    """(A device function has no keyword-only parameters: they are refused, so only
    ``__defaults__`` reaches device code.)"""
    s = Session("inplace_defaults")
    s.run("""
        from gpureplace import cuda
        def h(v, c=0.25):
            return v + c
        @cuda.jit
        def kern(out):
            out[0] = h(out[0])
    """)
    assert holds(s.compile().ptx, 0.25)
    s.ns["h"].__defaults__ = (6.25,)
    assert [c[1:] for c in bindings.check() if c.namespace is s.ns] == \
        [("h", "changed in place")]                # the cell hook alone: it moves the world
    assert holds(s.compile().ptx, 6.25) and not holds(s.compile().ptx, 0.25)


def test_a_device_function_and_a_kernel_given_new_code():
    s = Session("inplace_device")
    s.run("""
        from gpureplace import cuda
        @cuda.jit(device=True)
        def dev(v):
            return v * 6.0
        @cuda.jit
        def kern(out):
            out[0] = dev(out[0])
        @cuda.jit
        def k_self(out):
            out[0] = out[0] + 31.0
    """)
    assert holds(s.compile().ptx, 6.0) and holds(s.compile("k_self").ptx, 31.0)
    s.ns["dev"].py_func.__code__ = new_function("def f(v):\n    return v * 26.0").__code__
    s.ns["k_self"].py_func.__code__ = new_function(
        "def f(out):\n    out[0] = out[0] + 41.0").__code__
    s.run("")
    assert holds(s.compile().ptx, 26.0) and not holds(s.compile().ptx, 6.0)
    assert holds(s.compile("k_self").ptx, 41.0)
    # a launch runs the new code (the simulator runs the Python function as it is now)
    out = np.ones(1)
    s.ns["k_self"][1, 1](out)
    assert out[0] == 42.0


def test_a_helper_given_code_with_another_parameter():
    """autoreload of ``def f(v)`` edited to ``def f(v, c=2.0)``: calls fold the new signature."""
    s = Session("inplace_signature")
    s.run(HELPER_CELL)
    assert holds(s.compile().ptx, 0.25)
    g = s.ns["g"]
    new = new_function("def f(v, c=7.5):\n    return v * c")
    g.__code__, g.__defaults__ = new.__code__, new.__defaults__
    s.run("")
    assert holds(s.compile().ptx, 7.5) and not holds(s.compile().ptx, 0.25)
    out = np.full(1, 2.0)
    s.ns["kern"][1, 1](out)
    assert out[0] == 15.0


def test_a_callee_of_a_callee_given_new_code():
    s = Session("inplace_deep")
    s.run("""
        from gpureplace import cuda
        def leaf(v):
            return v + 5.0
        def middle(v):
            return leaf(v) * 2.0
        @cuda.jit
        def kern(out):
            out[0] = middle(out[0])
    """)
    assert holds(s.compile().ptx, 5.0)
    s.ns["leaf"].__code__ = new_function("def f(v):\n    return v + 17.0").__code__
    s.run("")
    assert holds(s.compile().ptx, 17.0) and not holds(s.compile().ptx, 5.0)


def test_new_code_of_the_same_content_recompiles_nothing():
    """``%autoreload`` gives every function of a reloaded module a new code object: those whose
    text did not change (or only moved down) must cost nothing, and are not reported."""
    s = Session("inplace_same")
    s.run(HELPER_CELL)
    spec = s.compile()
    c = compiles()
    g = s.ns["g"]
    g.__code__ = new_function("\n\n\ndef g(v):\n    return v + 0.25", "g").__code__
    g.__defaults__ = None
    assert not [ch for ch in bindings.check() if ch.function is g]
    s.run("")
    assert s.compile() is spec and compiles() == c


def test_an_equal_copy_bound_in_place_of_a_helper_is_watched_for_new_code():
    """A full reload (``%autoreload 2`` after an edit elsewhere in the module) binds a new
    function object of the same code in place of the helper: nothing recompiles, and the copy
    is what the kernel's code now calls -- so when autoreload later gives the copy new code in
    place (IPython 9 patches the module's current function), the cell hook must see it."""
    s = Session("inplace_copy")
    s.run(HELPER_CELL, refresh=False)
    spec = s.compile()
    bindings.check()
    old = s.ns["g"]
    copy = types.FunctionType(old.__code__, s.ns, "g", old.__defaults__)
    s.ns["g"] = copy
    assert not [c for c in bindings.check() if c.namespace is s.ns]   # the same meaning
    assert s.compile() is spec
    age = world.age
    copy.__code__ = new_function("def f(v):\n    return v + 0.75").__code__
    changes = [c for c in bindings.check() if c.function is copy]
    assert [tuple(c) for c in changes] == [("inplace_copy", "g", "changed in place")]
    assert world.age != age                                  # no refresh(): the hook saw it
    spec = s.compile()
    assert holds(spec.ptx, 0.75) and not holds(spec.ptx, 0.25)


def test_a_module_imported_again_under_its_name_is_a_redefinition(tmp_path, monkeypatch):
    """``del sys.modules[name]; import name`` after the file changed: a new module object of
    the same name (a module fingerprints by its name), whose attributes the kernel never read.
    The cell hook reports it and the kernel reads the new module."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    path = tmp_path / "gr_reimported_mod.py"
    path.write_text("K = 2.5\ndef helper(v):\n    return v * K\n")
    s = Session("reimport_session")
    s.run("""
        import gr_reimported_mod as mylib
        from gpureplace import cuda
        @cuda.jit
        def kern(out):
            out[0] = mylib.helper(out[0])
    """, refresh=False)
    try:
        assert holds(s.compile().ptx, 2.5)
        bindings.check()
        path.write_text("K = 3.5\ndef helper(v):\n    return v * K + 100.0\n")
        del sys.modules["gr_reimported_mod"]
        s.run("import gr_reimported_mod as mylib", refresh=False)
        changes = [c for c in bindings.check() if c.namespace is s.ns]
        assert [tuple(c) for c in changes] == [("reimport_session", "mylib", "imported again")]
        spec = s.compile()
        assert holds(spec.ptx, 3.5) and holds(spec.ptx, 100.0) and not holds(spec.ptx, 2.5)
        out = np.ones(1)
        s.ns["kern"][1, 1](out)
        assert out[0] == 103.5
    finally:
        sys.modules.pop("gr_reimported_mod", None)


def test_closure_contents_changed():
    s = Session("inplace_closure")
    s.run("""
        from gpureplace import cuda
        def make():
            c = 0.25
            def g(v):
                return v + c
            def set_c(x):
                nonlocal c
                c = x
            return g, set_c
        g, set_c = make()
        @cuda.jit
        def kern(out):
            out[0] = g(out[0])
    """)
    assert holds(s.compile().ptx, 0.25)
    s.ns["set_c"](0.75)
    assert any(c[1] == "c" and c[2] == "redefined" for c in bindings.check())
    assert holds(s.compile().ptx, 0.75) and not holds(s.compile().ptx, 0.25)


# ---------------------------------------------------------------------------------------------
# 2, 3. Enum and namedtuple classes defined again


ENUM_CELL = """
    from gpureplace import cuda
    from enum import IntEnum
    class Mode(IntEnum):
        A = 3
    @cuda.jit
    def kern(out):
        if Mode.A == 30:
            out[0] = out[0] * 30.0
        else:
            out[0] = out[0] * 3.0
"""


def test_an_enum_class_defined_again_with_other_values():
    s = Session("class_enum")
    s.run(ENUM_CELL)
    spec = s.compile()
    assert holds(spec.ptx, 3.0) and not holds(spec.ptx, 30.0)
    s.run("class Mode(IntEnum):\n    A = 3")            # the same members: nothing recompiles
    assert s.compile() is spec
    s.run("class Mode(IntEnum):\n    A = 30")
    assert holds(s.compile().ptx, 30.0)
    out = np.ones(1)
    s.ns["kern"][1, 1](out)
    assert out[0] == 30.0


def test_an_enum_member_read_as_a_global_and_the_cell_hook():
    s = Session("class_enum_member")
    s.run("""
        from gpureplace import cuda
        from enum import Enum
        class Color(Enum):
            RED = 3
            BLUE = 4
        FAVOURITE = Color.RED
        @cuda.jit
        def kern(out):
            out[0] = out[0] * FAVOURITE.value
    """, refresh=False)
    bindings.check()
    assert holds(s.compile().ptx, 3.0)
    s.run("class Color(Enum):\n    RED = 5\n    BLUE = 4\nFAVOURITE = Color.RED", refresh=False)
    assert {c[1] for c in bindings.check() if c.namespace is s.ns} == {"FAVOURITE"}
    assert holds(s.compile().ptx, 5.0)


NAMEDTUPLE_CELL = """
    from gpureplace import cuda
    from collections import namedtuple
    P = namedtuple("P", "x y")
    PP = P(2.5, 5.0)
    @cuda.jit
    def kern(out):
        out[0] = out[0] * PP.y
"""


def test_a_namedtuple_class_defined_again_with_other_field_order():
    s = Session("class_namedtuple")
    s.run(NAMEDTUPLE_CELL)
    spec = s.compile()
    assert holds(spec.ptx, 5.0)
    s.run('P = namedtuple("P", "x y"); PP = P(2.5, 5.0)')   # the same: nothing recompiles
    assert s.compile() is spec
    s.run('P = namedtuple("P", "y x"); PP = P(2.5, 5.0)')   # now PP.y == 2.5
    spec = s.compile()
    assert holds(spec.ptx, 2.5) and not holds(spec.ptx, 5.0)
    out = np.full(1, 2.0)
    s.ns["kern"][1, 1](out)
    assert out[0] == 5.0


def test_a_namedtuple_class_called_in_the_kernel():
    s = Session("class_namedtuple_call")
    s.run("""
        from gpureplace import cuda
        from collections import namedtuple
        P = namedtuple("P", "x y")
        @cuda.jit
        def kern(out):
            p = P(out[0] * 3.0, out[0] * 9.0)
            out[0] = p.y
    """)
    assert holds(s.compile().ptx, 9.0)
    s.run('P = namedtuple("P", "y x")')
    assert holds(s.compile().ptx, 3.0) and not holds(s.compile().ptx, 9.0)


def test_class_fingerprints_follow_their_content():
    def same(make):
        return fingerprint(make()) == fingerprint(make())

    def enum_class(**members):
        return IntEnum("Mode", members)

    assert same(lambda: enum_class(A=3))
    assert fingerprint(enum_class(A=3)) != fingerprint(enum_class(A=30))
    assert fingerprint(enum_class(A=3)) != fingerprint(enum_class(B=3))
    assert fingerprint(enum_class(A=3, B=4)) != fingerprint(enum_class(A=3, B=3))   # an alias
    assert fingerprint(enum_class(A=3).A) != fingerprint(enum_class(A=30).A)
    assert fingerprint(enum_class(A=3, B=4).A) != fingerprint(enum_class(A=3, B=5).A)
    assert fingerprint(IntEnum("Mode", {"A": 3})) != fingerprint(IntFlag("Mode", {"A": 3}))
    assert fingerprint(IntEnum("Mode", {"A": 3})) != fingerprint(Enum("Mode", {"A": 3}))

    assert same(lambda: namedtuple("P", "x y"))
    assert same(lambda: namedtuple("P", "x y")(1.0, 2.0))
    assert fingerprint(namedtuple("P", "x y")) != fingerprint(namedtuple("P", "y x"))
    assert fingerprint(namedtuple("P", "x y")) != fingerprint(namedtuple("Q", "x y"))
    assert fingerprint(namedtuple("P", "x y", defaults=[1.0])) != \
        fingerprint(namedtuple("P", "x y", defaults=[2.0]))
    assert fingerprint(namedtuple("P", "x y")(1.0, 2.0)) != \
        fingerprint(namedtuple("P", "y x")(1.0, 2.0))
    assert fingerprint(namedtuple("P", "x y")(1.0, 2.0)) != fingerprint((1.0, 2.0))
    assert fingerprint(((namedtuple("P", "x y")(1.0, 2.0)),)) != \
        fingerprint(((namedtuple("P", "y x")(1.0, 2.0)),))
    aligned = np.dtype([("a", "f4"), ("b", "f8")], align=True)
    assert fingerprint(aligned) != fingerprint(np.dtype([("a", "f4"), ("b", "f8")]))
    assert fingerprint(aligned) != fingerprint(np.dtype([("b", "f4"), ("a", "f8")], align=True))


# ---------------------------------------------------------------------------------------------
# A second process on the same disk cache


PROGRAM = textwrap.dedent("""
    import sys, json
    sys.path.insert(0, {moddir!r})
    import gpureplace
    import numba
    from numba import types
    import {module} as m
    result = {{}}
    {before}
    spec = m.kern.compile({sig})
    result["first"] = {{"ptx": spec.ptx, "from_disk": spec.from_disk}}
    {then}
    result["stats"] = gpureplace.stats()
    print(json.dumps(result))
""")


def run_program(tmp_path, module, then="", before="", sig='"void(float64[:])"'):
    """Import ``module`` (written in ``tmp_path``) in a new process on this test's disk cache
    (``own_disk_cache``), run ``before``, compile its ``kern``, then run ``then``; what it
    found."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    program = PROGRAM.format(moddir=str(tmp_path), module=module, then=then, before=before,
                             sig=sig)
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def write(tmp_path, module, src):
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(src))


SWAP = textwrap.dedent("""
    def _new(v):
        return v + 0.75
    m.g.__code__ = _new.__code__
""")
AFTER = textwrap.dedent("""
    gpureplace.refresh()
    spec = m.kern.compile("void(float64[:])")
    result["after"] = {"ptx": spec.ptx, "from_disk": spec.from_disk}
""")


def test_a_kernel_from_the_disk_notices_its_helper_changed_in_place(tmp_path):
    write(tmp_path, "inplace_disk", """
        from gpureplace import cuda
        def g(v):
            return v + 0.25
        @cuda.jit
        def kern(out):
            out[0] = g(out[0])
    """)
    first = run_program(tmp_path, "inplace_disk")
    assert not first["first"]["from_disk"] and holds(first["first"]["ptx"], 0.25)
    warm = run_program(tmp_path, "inplace_disk", then=SWAP + AFTER)
    assert warm["first"]["from_disk"] and holds(warm["first"]["ptx"], 0.25)
    assert holds(warm["after"]["ptx"], 0.75) and not holds(warm["after"]["ptx"], 0.25)
    # changed before the first compile: the entry of the new code (the warm process stored
    # it), never the old one; and the old code again finds its own
    early = run_program(tmp_path, "inplace_disk", before=SWAP)["first"]
    assert early["from_disk"] and holds(early["ptx"], 0.75) and not holds(early["ptx"], 0.25)
    assert holds(run_program(tmp_path, "inplace_disk")["first"]["ptx"], 0.25)


def test_a_second_process_with_other_enum_values_misses(tmp_path):
    write(tmp_path, "enum_disk", textwrap.dedent(ENUM_CELL))
    assert holds(run_program(tmp_path, "enum_disk")["first"]["ptx"], 3.0)
    assert run_program(tmp_path, "enum_disk")["first"]["from_disk"]
    write(tmp_path, "enum_disk", textwrap.dedent(ENUM_CELL).replace("A = 3", "A = 30"))
    other = run_program(tmp_path, "enum_disk")["first"]
    assert not other["from_disk"] and holds(other["ptx"], 30.0)


def test_a_second_process_with_other_namedtuple_fields_misses(tmp_path):
    write(tmp_path, "namedtuple_disk", textwrap.dedent(NAMEDTUPLE_CELL))
    assert holds(run_program(tmp_path, "namedtuple_disk")["first"]["ptx"], 5.0)
    assert run_program(tmp_path, "namedtuple_disk")["first"]["from_disk"]
    write(tmp_path, "namedtuple_disk",
          textwrap.dedent(NAMEDTUPLE_CELL).replace('"x y"', '"y x"'))
    other = run_program(tmp_path, "namedtuple_disk")["first"]
    assert not other["from_disk"] and holds(other["ptx"], 2.5) and not holds(other["ptx"], 5.0)


def test_a_second_process_passing_a_namedtuple_of_other_fields_misses(tmp_path):
    """A namedtuple given as an argument: its type prints the same for either field order, and
    the kernel reads ``p.y`` at the index its class gives."""
    src = """
        from collections import namedtuple
        from gpureplace import cuda
        P = namedtuple("P", "x y")
        @cuda.jit
        def kern(out, p):
            out[0] = out[0] * p.y
    """
    sig = "(types.float64[:], numba.typeof(m.P(2.5, 5.0)))"
    write(tmp_path, "namedtuple_arg_disk", src)
    first = run_program(tmp_path, "namedtuple_arg_disk", sig=sig)["first"]
    assert not first["from_disk"] and "kern_param_4" in first["ptx"]   # y: the second field
    assert run_program(tmp_path, "namedtuple_arg_disk", sig=sig)["first"]["from_disk"]
    write(tmp_path, "namedtuple_arg_disk", src.replace('"x y"', '"y x"'))
    other = run_program(tmp_path, "namedtuple_arg_disk", sig=sig)["first"]
    assert not other["from_disk"]
    assert "[kern_param_3]" in other["ptx"] and "[kern_param_4]" not in other["ptx"]


# ---------------------------------------------------------------------------------------------
# Code that only moved in its file: nothing to recompile, unless the code names its lines


def _loc_lines(ptx, filename):
    """The lines of ``filename`` that ``ptx``'s ``.loc`` directives name."""
    import re
    files = {n: path for n, path in re.findall(r'\.file\s+(\d+)\s+"([^"]+)"', ptx)}
    return sorted({int(line) for n, line in re.findall(r"\.loc\s+(\d+)\s+(\d+)", ptx)
                   if files.get(n, "").endswith(filename)})


HELPER_LINES = """
    def g(v):
        w = v * 3.0
        return w + 0.25
"""
LINES_MODULE = """
    from gpureplace import cuda
    from lines_helper import g
    @cuda.jit(lineinfo=True)
    def kern(out):
        out[0] = g(out[1])
    @cuda.jit
    def plain(out):
        out[0] = g(out[1])
"""


def test_a_helper_moved_in_its_file_recompiles_only_kernels_with_line_information(tmp_path):
    """A helper moved down its file (autoreload gives it the new code object in place): a
    kernel compiled with ``lineinfo`` names the helper's lines in its ``.loc`` directives, so
    it recompiles, in this process and from the disk cache in the next; a kernel without line
    information keeps its code (the same instructions)."""
    write(tmp_path, "lines_helper", HELPER_LINES)
    write(tmp_path, "lines_moved", LINES_MODULE)
    path = str(tmp_path / "lines_helper.py")
    first = run_program(tmp_path, "lines_moved")["first"]
    lines = _loc_lines(first["ptx"], "lines_helper.py")
    assert not first["from_disk"] and lines
    assert run_program(tmp_path, "lines_moved")["first"]["from_disk"]
    moved = "\n\n\n" + textwrap.dedent(HELPER_LINES)
    # in one process: the helper given the moved code in place
    swap = textwrap.dedent(f"""
        plain = m.plain.compile("void(float64[:])")
        ns = {{}}
        exec(compile({moved!r}, {path!r}, "exec"), ns)
        m.g.__code__ = ns["g"].__code__
        from gpureplace.tracking import bindings
        result["changed"] = [tuple(c) for c in bindings.check()]
        result["plain_kept"] = m.plain.compile("void(float64[:])") is plain
    """)
    warm = run_program(tmp_path, "lines_moved", then=swap + AFTER)
    assert warm["changed"] == [["lines_helper", "g", "changed in place"]]
    assert warm["plain_kept"]
    assert not warm["after"]["from_disk"]
    assert _loc_lines(warm["after"]["ptx"], "lines_helper.py") == [n + 3 for n in lines]
    # in the next process, the file itself moved: the lineinfo kernel's entry is a miss
    (tmp_path / "lines_helper.py").write_text(moved)
    again = run_program(tmp_path, "lines_moved", then=textwrap.dedent("""
        spec = m.plain.compile("void(float64[:])")
        result["plain_from_disk"] = spec.from_disk
    """))
    assert _loc_lines(again["first"]["ptx"], "lines_helper.py") == [n + 3 for n in lines]
    assert again["plain_from_disk"]


def test_an_equal_copy_of_a_helper_from_another_place_recompiles_kernels_with_lines():
    """A full reload binds a copy of the helper compiled from the file as it is now: the same
    meaning, at another place when lines were added above it.  A kernel with line information
    recompiles (the cell hook says the helper moved); one without keeps its code."""
    s = Session("lines_copy")
    s.run("""
        from gpureplace import cuda
        def g(v):
            return v + 0.25
        @cuda.jit(lineinfo=True)
        def kern(out):
            out[0] = g(out[0])
        @cuda.jit
        def plain(out):
            out[0] = g(out[0])
    """, refresh=False)
    spec, plain = s.compile(), s.compile("plain")
    bindings.check()
    code = s.ns["g"].__code__
    s.ns["g"] = types.FunctionType(code.replace(), s.ns, "g")     # an equal copy, same place
    assert not [c for c in bindings.check() if c.namespace is s.ns]
    assert s.compile() is spec
    s.ns["g"] = types.FunctionType(code.replace(co_firstlineno=code.co_firstlineno + 3),
                                   s.ns, "g")                     # three lines further down
    assert [tuple(c) for c in bindings.check() if c.namespace is s.ns] == \
        [("lines_copy", "g", "moved")]
    again = s.compile()
    assert again is not spec and again.ptx != spec.ptx
    assert s.compile("plain") is plain
