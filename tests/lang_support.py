"""Helpers shared by the kernel-language tests (tests/lang/test_lang_*.py): compile and assemble,
read the PTX and the LLVM IR, launch sizes, source lines."""

import inspect
import re

from conftest import assemble

THREADS = 128

#: (start, stop, step) of ranges of every sign and edge, each running at most 21 values: int64
#: overflow of stop - start and of -step included (range loops' counts, rangeloops.py).
RANGE_EDGES = [(s, e, st) for s in (-7, -1, 0, 1, 5, 12) for e in (-9, -1, 0, 1, 6, 12, 13)
               for st in (-8, -3, -1, 1, 2, 3, 8, 100)] + [
    (0, 2**62, 2**61), (-2**62, 2**62, 2**61), (2**62, -2**62, -2**61), (0, -10, -2**63),
    (5, 5, 1), (5, 5, -1), (2**63 - 10, 2**63 - 1, 4), (-2**63, -2**63 + 9, 2),
    (-2**63, 2**63 - 1, 2**62), (2**63 - 1, -2**63, -2**62), (-2**63, 2**63 - 1, 2**63 - 1),
    (2**63 - 1, -2**63, -2**63)]


def _compile(kernel, sig):
    """Compile ``kernel`` for ``sig``, assemble its PTX, return the specialisation."""
    spec = kernel.compile(sig)
    assemble(spec.ptx)
    return spec


def _body(ptx):
    """The PTX of the entry functions (without the header and parameter lists' comments)."""
    return ptx[ptx.index(".entry"):]


def _ir(spec):
    """LLVM IR of every function in the kernel's call graph, before linking and optimisation."""
    return "\n".join(t for cf in spec.compiled.closure() for t in cf.ir_texts())


def _calls(ir, name):
    """Whether LLVM IR text calls (or declares) function ``name``."""
    return f'@"{name}"(' in ir or f"@{name}(" in ir


def _widened_to_double(ir):
    """Lines of our own IR (libdevice not linked yet) that compute in double.

    Constants that the front end writes as ``fptrunc double <constant>`` are folded away and do
    not count.  (The PTX itself may still show f64 instructions inside libdevice's float32
    functions: sinf's argument reduction for huge inputs uses them, as in CUDA C.)
    """
    return [line for line in ir.splitlines()
            if re.search(r"\bdouble\b", line) and not re.search(r"fptrunc double [-0-9]", line)
            and not line.lstrip().startswith("declare")]


def _cp():
    import cupy
    return cupy


def _grid(n):
    return (n + THREADS - 1) // THREADS


def _line_of(func, marker):
    """Line number (in its file) of the first source line of ``func`` containing ``marker``."""
    lines, first = inspect.getsourcelines(func)
    for k, line in enumerate(lines):
        if marker in line:
            return first + k
    raise AssertionError(f"{marker!r} not in {func.__name__}")
