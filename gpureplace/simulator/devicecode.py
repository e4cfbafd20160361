"""The functions the simulator re-creates, and the code it re-creates them with.

A Python function reached from a kernel is re-created over its own code (see ``resolve``) unless it
is a library's (NumPy, Numba, the standard library, debuggers, gpureplace itself): those run as
they are.  The re-created code gives Python's number literals the types Numba gives them: ``2`` is
an int64 and ``1.5`` a float64 (so ``x32 * 1.5`` is float64, as on the device, not float32 as
NumPy 2's weak Python floats would make it).
"""

from __future__ import annotations

import weakref
import types as pytypes

import numpy as np
from numba.core import types as nbtypes

from ..compiler.diagnostics import in_standard_library
from .arrays import wrap_int

#: Modules whose functions run as they are (not re-created): libraries, debuggers, the stdlib.
_LIBRARY_PACKAGES = frozenset(["numpy", "numba", "llvmlite", "cupy", "torch", "IPython", "ipdb",
                               "pdb", "bdb", "pytest", "_pytest", "scipy", "gpureplace",
                               "pydevd", "debugpy", "logging", "traceback", "warnings"])

#: code object -> its device version; weak, so that the code of a function defined again goes
#: with its function (the device version holds other constants, never its key)
_code_cache = weakref.WeakKeyDictionary()


def is_library(fn):
    """Whether ``fn`` runs as it is (a library's, or the standard library's, function)."""
    mod = (getattr(fn, "__module__", None) or "").split(".", 1)[0]
    if mod in _LIBRARY_PACKAGES:
        return True
    return in_standard_library(fn.__code__.co_filename)


def device_const(c):
    """The constant ``c`` as Numba types it: an int64, float64 or complex128 (a tuple's items
    and a code object's constants in turn)."""
    if type(c) is int:
        if -(1 << 63) <= c < (1 << 63):
            return wrap_int(c, np.dtype(np.int64))
        return c
    if type(c) is float:
        return np.float64(c)
    if type(c) is complex:
        return np.complex128(c)
    if type(c) is tuple:
        return tuple(device_const(x) for x in c)
    if isinstance(c, pytypes.CodeType):
        return device_code(c)
    return c


def device_code(code):
    """``code`` with number constants typed as Numba types them (cached)."""
    hit = _code_cache.get(code)
    if hit is None:
        hit = _code_cache[code] = code.replace(
            co_consts=tuple(device_const(c) for c in code.co_consts))
    return hit



# ---------------------------------------------------------------------------------------------
# What Numba's typing of a function says its variables are

_SCALARS = (nbtypes.Boolean, nbtypes.Integer, nbtypes.Float, nbtypes.Complex)


def _reads_of(annotation, restype, local_names):
    """``(reads, multi, returns)`` of one typed function (its Numba type annotation): the
    Numba type of the reads of each local ``(name, line)`` where they agree (None where
    not), the locals whose versions (Numba's SSA names ``t``, ``t.1``...) have different types,
    and whether some return converts its value to the return type."""
    from numba.core import ir
    typemap = annotation.typemap
    versions = {}
    for var, ty in typemap.items():
        base = var.split(".", 1)[0]
        if base in local_names:
            versions.setdefault(base, set()).add(nbtypes.unliteral(ty))
    multi = {n for n, tys in versions.items() if len(tys) > 1}
    reads, returns = {}, False
    for block in annotation.blocks.values():
        for stmt in block.body:
            target = None
            if isinstance(stmt, ir.Assign):
                target = stmt.target.name
                value = stmt.value
                if isinstance(value, ir.Var) and \
                        value.name.split(".", 1)[0] == target.split(".", 1)[0]:
                    continue                 # SSA's copy where paths meet: no read of the code
                if isinstance(value, ir.Expr) and value.op == "cast" and \
                        nbtypes.unliteral(typemap[value.value.name]) != restype:
                    returns = True
            line = stmt.loc.line
            for var in stmt.list_vars():
                base = var.name.split(".", 1)[0]
                if var.name == target or base not in local_names or var.name not in typemap:
                    continue
                ty = nbtypes.unliteral(typemap[var.name])
                key = (base, line)
                if reads.setdefault(key, ty) != ty:
                    reads[key] = None
    return reads, multi, returns


def typing_plan(pyfunc, typed):
    """What the simulated code of ``pyfunc`` converts, so that its values have the types the
    compiled code gives them, from its compiled specialisations ``typed`` (``[(type annotation,
    return type)]``): ``{(name, line): type}`` for the reads of a local variable that Numba types
    otherwise than some value stored in it (``t = x32`` and, on one path, ``t = 0.5``: the
    float64 that t is where the paths meet), and ``{("<return>", 0): type}`` where a return
    converts its value.  Only what every specialisation agrees on (a helper called with other
    argument types may type it otherwise)."""
    code = pyfunc.__code__
    local_names = set(code.co_varnames) | set(code.co_cellvars)
    each = []
    for annotation, restype in typed:
        if annotation is None:
            return {}
        each.append(_reads_of(annotation, nbtypes.unliteral(restype), local_names))
    plan = {}
    needed = {key for reads, multi, _ in each for key in reads if key[0] in multi}
    for key in needed:
        tys = {reads.get(key) for reads, _, _ in each}
        ty = tys.pop() if len(tys) == 1 else None
        if isinstance(ty, _SCALARS):
            plan[key] = ty
    restypes = {nbtypes.unliteral(r) for _, r in typed}
    if any(returns for _, _, returns in each) and len(restypes) == 1:
        ty = restypes.pop()
        if isinstance(ty, _SCALARS):
            plan[("<return>", 0)] = ty
    return plan


# ---------------------------------------------------------------------------------------------
# The calls whose arguments Numba's typing of a function saw as literals

#: the literal types an argument is asked about with (Numba's literal int, bool and str)
_LITERAL_VALUES = (int, bool, str)


def _callee_key(fnty):
    """What ``lang.overloads.literal_types`` compares a call's callee with: the host function a
    ``Function`` type types, a method's name for a bound method; None for any other."""
    if isinstance(fnty, nbtypes.Function):
        return fnty.typing_key
    if isinstance(fnty, nbtypes.BoundFunction):
        key = fnty.typing_key
        if isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], str):
            return key[1]
    return None


def literal_calls(annotation, out):
    """Add to ``out`` the calls of one typed function (its Numba type annotation) that pass an
    argument Numba typed as a literal (``f(3)``, ``f(n)`` where ``n = 3`` is n's only binding,
    ``f(N)`` of a global int): ``{(file, line): [(callee, argument types, keyword types)]}``,
    the types as Numba gave them (literal where they are), for the simulated call to ask an
    overload's generator as the compiler did."""
    from numba.core import ir
    typemap = annotation.typemap
    for block in annotation.blocks.values():
        for stmt in block.body:
            if not (isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Expr) and
                    stmt.value.op == "call"):
                continue
            expr = stmt.value
            if expr.vararg is not None or getattr(expr, "varkwarg", None) is not None:
                continue
            try:
                fnty = typemap[expr.func.name]
                args = tuple(typemap[a.name] for a in expr.args)
                kws = tuple((k, typemap[v.name]) for k, v in expr.kws)
            except (KeyError, AttributeError):
                continue
            if not any(isinstance(t, nbtypes.Literal) and
                       type(t.literal_value) in _LITERAL_VALUES
                       for t in args + tuple(t for _, t in kws)):
                continue
            entry = (_callee_key(fnty), args, kws)
            site = out.setdefault((stmt.loc.filename, stmt.loc.line), [])
            if entry not in site:
                site.append(entry)
    return out
