"""The functions the simulator re-creates, and the code it re-creates them with.

A Python function reached from a kernel is re-created over its own code (see ``resolve``) unless it
is a library's (NumPy, Numba, the standard library, debuggers, gpureplace itself): those run as
they are.  The re-created code gives Python's number literals the types Numba gives them: ``2`` is
an int64 and ``1.5`` a float64 (so ``x32 * 1.5`` is float64, as on the device, not float32 as
NumPy 2's weak Python floats would make it).
"""

from __future__ import annotations

import re
import weakref
import types as pytypes

import numpy as np
from numba.core import types as nbtypes

from ..compiler.diagnostics import in_standard_library
from .arrays import SimArray, wrap_int

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


def convertible(ty):
    """Whether the simulator converts a value to Numba type ``ty`` (``operators.cast_name``):
    a scalar number, a tuple (its numbers converted, anything else in it kept), or an optional
    one of these (None kept)."""
    if isinstance(ty, nbtypes.Optional):
        ty = ty.type
    return isinstance(ty, (*_SCALARS, nbtypes.BaseAnonymousTuple))


#: a temporary of Numba's for a value on Python's stack where paths meet, SSA versions too:
#: ``$phi<offset of the block>.<stack slot>[.<version>]``
_PHI = re.compile(r"\$phi(\d+)\.(\d+)(?:\.\d+)*$")


def _numba_offset():
    """What Numba adds to CPython's bytecode offsets (the NOP it puts first: 2)."""
    try:
        from numba.core.bytecode import _FIXED_OFFSET
    except ImportError:                        # (a Numba without it counts as CPython does)
        return 0
    return _FIXED_OFFSET


def _joins_of(annotation):
    """``{offset: type}``: where the paths of a conditional expression or an ``and`` / ``or``
    meet (the bytecode offset of the instruction that takes the value), the Numba type
    of the value there, where it converts what a path gives (``a if c else 0.5`` for an int64
    ``a``: float64).  Numba keeps the value on Python's stack in a ``$phi`` temporary of the
    block that starts there (the top of the stack: its highest slot); what the block reads of
    it is the joined type."""
    from numba.core import ir
    typemap = annotation.typemap
    versions, reads = {}, {}
    for var, ty in typemap.items():
        m = _PHI.match(var)
        if m:
            versions.setdefault((int(m.group(1)), int(m.group(2))), set()).add(
                nbtypes.unliteral(ty))
    if not versions:
        return {}
    for block in annotation.blocks.values():
        for stmt in block.body:
            target = None
            if isinstance(stmt, ir.Assign):
                target = stmt.target.name
                if isinstance(stmt.value, ir.Var) and _PHI.match(target) and \
                        _PHI.match(stmt.value.name):
                    continue                 # (SSA's copies between the versions)
            for var in stmt.list_vars():
                m = _PHI.match(var.name)
                if m and var.name != target and var.name in typemap:
                    key = (int(m.group(1)), int(m.group(2)))
                    reads.setdefault(key, set()).add(nbtypes.unliteral(typemap[var.name]))
    top = {}
    for offset, slot in versions:
        top[offset] = max(top.get(offset, -1), slot)
    shift = _numba_offset()
    joins = {}
    for (offset, slot), tys in versions.items():
        read = reads.get((offset, slot), ())
        if slot != top[offset] or len(read) != 1:
            continue
        ty = next(iter(read))
        if tys - {ty} and convertible(ty):
            joins[offset - shift] = ty
    return joins


def joins_values(code):
    """Whether the function of ``code`` has a conditional expression, or an ``and`` / ``or``,
    whose value is used (not a condition alone), from its source (False without one): where
    Numba may convert the value of a path (``_joins_of``)."""
    import ast
    from ..compiler.constructs import tree_of
    tree = tree_of(code)
    if tree is None:
        return False
    tests = set()                              # the nodes compiled as conditions (jumps)
    for node in ast.walk(tree[0]):             # (parents before their children)
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            tests.add(id(node.test))
        elif isinstance(node, ast.comprehension):
            tests.update(map(id, node.ifs))
        if id(node) in tests:
            if isinstance(node, ast.BoolOp):
                tests.update(map(id, node.values))
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                tests.add(id(node.operand))
            elif isinstance(node, ast.IfExp):
                tests.update((id(node.body), id(node.orelse)))
        elif isinstance(node, (ast.IfExp, ast.BoolOp)):
            return True
    return False


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


def _plan_of(code, annotation, restype):
    """The typing plan (``typing_plan``) of one specialisation."""
    local_names = set(code.co_varnames) | set(code.co_cellvars)
    restype = nbtypes.unliteral(restype)
    reads, multi, returns = _reads_of(annotation, restype, local_names)
    plan = {key: ty for key, ty in reads.items() if key[0] in multi and convertible(ty)}
    if returns and convertible(restype):
        plan[("<return>", 0)] = restype
    for offset, ty in _joins_of(annotation).items():
        plan[("<join>", offset)] = ty
    return plan


def typing_plan(pyfunc, typed):
    """What the simulated code of ``pyfunc`` converts, so that its values have the types the
    compiled code gives them, from its compiled specialisations ``typed`` (``[(type annotation,
    return type, argument types)]``): ``{(name, line): type}`` for the reads of a local variable
    that Numba types otherwise than some value stored in it (``t = x32`` and, on one path,
    ``t = 0.5``: the float64 that t is where the paths meet), ``{("<return>", 0): type}`` where
    a return converts its value, and ``{("<join>", offset): type}`` where a conditional
    expression's or an ``and`` / ``or``'s paths meet (``_joins_of``).

    A helper called with other argument types is typed again for them (``nz(u)`` of a uint64
    returns float64 where ``nz(a)`` of an int64 returns int64): where its specialisations' plans
    differ, a ``PlansByArguments``, which gives each call the plan of the specialisation its
    arguments' types select."""
    code = pyfunc.__code__
    each, every = {}, []
    for annotation, restype, argtypes in typed:
        if annotation is None:
            return {}
        argtypes = tuple(nbtypes.unliteral(t) for t in argtypes)
        plan = _plan_of(code, annotation, restype)
        every.append(plan)
        if each.setdefault(argtypes, plan) != plan:
            each[argtypes] = None            # (the same types typed otherwise: not told apart)
    if not every:
        return {}
    if all(p == every[0] for p in every):
        return every[0]
    common = {key: ty for key, ty in every[0].items() if all(p.get(key) == ty for p in every)}
    chosen = [(t, p) for t, p in each.items() if p is not None]
    if all(p == common for _, p in chosen):
        return common
    return PlansByArguments(code, chosen, common)


class PlansByArguments:
    """The typing plans of a function whose specialisations type it differently, each chosen
    by the Numba types of a call's arguments (``choose``); a call whose arguments fit no
    specialisation, or several with different plans, gets what they all agree on
    (``common``)."""

    def __init__(self, code, specialisations, common):
        self.specialisations = specialisations    # [(argument types, plan)]
        self.common = common
        self.names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]

    def plans(self):
        """Every plan a call may be given."""
        return [self.common] + [p for _, p in self.specialisations]

    def choose(self, args, kwargs):
        """The plan of the specialisation that a call with ``args`` and ``kwargs`` runs."""
        values = list(args[:len(self.names)])
        values += [kwargs.get(name, _UNSET) for name in self.names[len(values):]]
        found = None
        for argtypes, plan in self.specialisations:
            if len(argtypes) >= len(values) and all(map(_fits, values, argtypes)):
                if found is not None and found != plan:
                    return self.common
                found = plan
        return self.common if found is None else found

    @staticmethod
    def key(args):
        """What the positional arguments ``args`` of a call say of their Numba types (what
        ``choose`` goes by): their classes, a tuple's items' too, an array's dtype and
        dimensions; a call with the same key is given the same plan."""
        classes = tuple(map(type, args))
        if tuple in classes or SimArray in classes:
            return tuple(map(_argument_key, args))
        return classes


_UNSET = object()


def _argument_key(value):
    cls = type(value)
    if cls is tuple:
        return cls, tuple(map(_argument_key, value))
    if cls is SimArray:
        return cls, value.dtype, value.ndim
    return cls


def _fits(value, ty):
    """Whether a simulated ``value`` can be an argument Numba typed ``ty``: a number of that
    type, a tuple of fitting items, an array of its dtype and dimensions; any other value (a
    record, a vector) is not told apart."""
    if value is _UNSET:
        return True
    if isinstance(ty, _SCALARS):
        from .valuetypes import class_numba_type
        own = class_numba_type(type(value))
        return own is None or own == ty
    if isinstance(ty, nbtypes.BaseTuple):
        return type(value) is tuple and len(value) == len(ty.types) and \
            all(map(_fits, value, ty.types))
    if isinstance(ty, nbtypes.Array) and type(value) is SimArray:
        from numba.np import numpy_support
        try:
            return value.ndim == ty.ndim and numpy_support.from_dtype(value.dtype) == ty.dtype
        except Exception:                      # noqa: BLE001 (a dtype Numba has no type for)
            return True
    return True


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
