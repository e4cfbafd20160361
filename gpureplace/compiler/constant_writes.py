"""Writes into host constants: a global (or closure variable) record, a record of a global
array, and the arrays that are fields of those.

Device code reads a host global as a constant: Numba types a global NumPy array read-only (a
write into it is refused in typing: "Cannot modify readonly array"), but a record has no
read-only type, so ``G_REC.x = 5.0``, ``G_RECS[i]['x'] = 1.0`` or ``G_RECS[0].v[1] = 2.0``
typed and compiled, and the write was lost (the record's bytes are folded into the code, or
live in the module's copy of the array: never the host's).  ``RefuseConstantWrites`` runs on
the typed IR of every function and refuses such a write at its line, in the same words, with
the way out: pass the record (or array) as an argument.

A helper that writes its parameter (``def set_x(r): r.x = 1.0``) is refused where a function
passes it a constant: each function notes which of its parameters it writes
(``CompiledFunction.written_params``), directly or through the functions it calls.
"""

from __future__ import annotations

from numba.core import ir as nir
from numba.core import types
from numba.core.compiler_machinery import FunctionPass, register_pass

from ..errors import CompileError

#: Expressions whose value is (part of) the memory of their operand: a constant's are constant.
_PARTS = frozenset({"getitem", "static_getitem", "typed_getitem", "getattr", "cast", "getiter",
                    "iternext", "pair_first", "exhaust_iter"})

_CONSTANT, _CONTAINER, _PARAM = "constant", "container", "param"


class _Origin:
    """Where a value's memory is: in a host constant (``_CONSTANT``: ``name`` is the global as
    the code spells it, ``root`` "record" or "array", ``closure``: a closure variable's), in a
    global that holds constants (``_CONTAINER``: a tuple, a module), or in parameter ``index``
    (``_PARAM``).  ``field``: the record field last taken on the way (for messages)."""

    __slots__ = ("kind", "name", "root", "closure", "index", "field")

    def __init__(self, kind, name, root=None, closure=False, index=None, field=None):
        self.kind, self.name, self.root, self.closure = kind, name, root, closure
        self.index, self.field = index, field

    def part(self, field):
        return _Origin(self.kind, self.name, self.root, self.closure, self.index,
                       self.field if field is None else field)


def _of_global(ty, name, closure):
    """The origin of a global (or a part of a container global) of Numba type ``ty``."""
    if isinstance(ty, types.Record):
        return _Origin(_CONSTANT, name, "record", closure)
    if isinstance(ty, types.Array):
        # (a device array captured as a global is writable: its memory is the device's)
        return None if ty.mutable else _Origin(_CONSTANT, name, "array", closure)
    if isinstance(ty, (types.Number, types.Boolean, types.Callable)):
        return None
    return _Origin(_CONTAINER, name, closure=closure)


class _Analysis:
    def __init__(self, func_ir, typemap, calltypes):
        self.typemap, self.calltypes = typemap, calltypes
        self.defs = {}
        self.writes = []               # (statement, target variable, field or None)
        self.calls = []                # call expressions of device functions
        for block in func_ir.blocks.values():
            for inst in block.body:
                if isinstance(inst, nir.Assign):
                    self.defs.setdefault(inst.target.name, []).append(inst.value)
                    value = inst.value
                    if isinstance(value, nir.Expr) and value.op == "call" and \
                            _device_function(typemap.get(value.func.name)) is not None:
                        self.calls.append(value)
                elif isinstance(inst, nir.SetAttr):
                    self.writes.append((inst, inst.target, inst.attr))
                elif isinstance(inst, nir.StaticSetItem):
                    self.writes.append((inst, inst.target,
                                        inst.index if isinstance(inst.index, str) else None))
                elif isinstance(inst, nir.SetItem):
                    self.writes.append((inst, inst.target, None))
        self._known = {}
        self._active = {}              # name -> its depth, while its origin is worked out
        self._low = 0                  # the shallowest active name met again (a loop)

    def origin(self, name):
        """The origin of variable ``name``: any of its definitions' (a constant's first), or
        None.  A variable met again while its own origin is worked out (a loop: its
        definitions reach it back) adds nothing there; what was worked out below such a
        meeting is kept only once the loop's first variable is done."""
        if name in self._known:
            return self._known[name]
        depth = self._active.get(name)
        if depth is not None:
            self._low = min(self._low, depth)
            return None
        depth = self._active[name] = len(self._active)
        outer_low, self._low = self._low, depth
        found = None
        try:
            for value in self.defs.get(name, ()):
                o = self._value_origin(value, name)
                if o is not None and (found is None or o.kind == _CONSTANT):
                    found = o
                    if o.kind == _CONSTANT:
                        break
        finally:
            del self._active[name]
        if self._low >= depth:
            self._known[name] = found
        self._low = min(outer_low, self._low)
        return found

    def _value_origin(self, value, target):
        if isinstance(value, nir.Var):
            return self.origin(value.name)
        if isinstance(value, nir.Arg):
            ty = self.typemap.get(target)
            if isinstance(ty, (types.Record, types.Array)):
                return _Origin(_PARAM, value.name, index=value.index)
            return None
        if isinstance(value, (nir.Global, nir.FreeVar)):
            return _of_global(self.typemap.get(target), value.name,
                              isinstance(value, nir.FreeVar))
        if not isinstance(value, nir.Expr):
            return None
        if value.op == "phi":
            found = None
            for v in value.incoming_values:
                o = self.origin(v.name) if isinstance(v, nir.Var) else None
                if o is not None and (found is None or o.kind == _CONSTANT):
                    found = o
            return found
        if value.op not in _PARTS:
            return None
        parent = self.origin(value.value.name)
        if parent is None:
            return None
        parent_ty = self.typemap.get(value.value.name)
        field = None
        if isinstance(parent_ty, types.Record):
            if value.op == "getattr":
                field = value.attr
            elif value.op == "static_getitem" and isinstance(value.index, str):
                field = value.index
        if parent.kind != _CONTAINER:
            return parent.part(field)
        # a part of a tuple or module global: a constant as the global itself would be
        if value.op == "getattr":
            name = f"{parent.name}.{value.attr}"
        elif value.op == "static_getitem":
            name = f"{parent.name}[{value.index!r}]"
        else:
            name = f"an item of {parent.name}"
        return _of_global(self.typemap.get(target), name, parent.closure)


def _device_function(ty):
    from .resolve import DeviceFunctionType
    return ty if isinstance(ty, DeviceFunctionType) else None


def _line(inst):
    return getattr(inst.loc, "line", 0) or 0


def _refusal(origin, how=""):
    """The reason for a write into ``origin`` (a constant); ``how``: through which call."""
    scope = "closure variable" if origin.closure else "global"
    if origin.root == "record":
        what = f"{scope} record {origin.name}"
    else:
        what = f"a record of {scope} array {origin.name}"
    if origin.field is not None:
        what += f" (its field {origin.field!r})"
    also = "" if not origin.closure else ", as a global is"
    return (f"Cannot modify {what}{how}: a {scope} is a constant in device code{also} (what "
            f"is written would be lost); pass the {origin.root} as a kernel argument to write it")


def check_constant_writes(func_ir, typemap, calltypes, pyfunc_name, filename):
    """Refuse (CompileError) a write into a host constant in ``func_ir``; returns the parameters
    the function writes: {index: (field or None, line, the functions the write is in)}."""
    a = _Analysis(func_ir, typemap, calltypes)
    written = {}
    for inst, target, field in a.writes:
        ty = typemap.get(target.name)
        if not isinstance(ty, (types.Record, types.Array)):
            continue
        o = a.origin(target.name)
        if o is None:
            continue
        if isinstance(ty, types.Record) and field is not None:
            o = o.part(field)
        if o.kind == _CONSTANT:
            _raise(_refusal(o), pyfunc_name, filename, inst.loc)
        if o.kind == _PARAM:
            written.setdefault(o.index, (o.field, _line(inst), (pyfunc_name,)))
    for call in a.calls:
        fnty = typemap.get(call.func.name)
        sig = calltypes.get(call)
        if sig is None:
            continue
        try:
            callee = fnty.get_impl_key(sig)
        except KeyError:
            continue
        theirs = getattr(callee, "written_params", None)
        if not theirs:
            continue
        params = list(fnty.pysig.parameters)
        given = list(enumerate(call.args)) + \
            [(params.index(k), v) for k, v in call.kws if k in params]
        for i, var in given:
            if i not in theirs or not isinstance(var, nir.Var):
                continue
            o = a.origin(var.name)
            if o is None:
                continue
            field, line, chain = theirs[i]
            if field is not None:
                o = o.part(field)
            if o.kind == _CONSTANT:
                inner = "" if len(chain) == 1 else f"in {chain[-1]}, "
                how = (f", passed to {chain[0]}, which writes it through its parameter "
                       f"{params[i]!r} ({inner}line {line})")
                _raise(_refusal(o, how), pyfunc_name, filename, call.loc)
            if o.kind == _PARAM:
                written.setdefault(o.index, (o.field, line, (pyfunc_name,) + chain))
    return written


def _raise(reason, function, filename, loc):
    err = CompileError(reason, function=function,
                       filename=getattr(loc, "filename", None) or filename,
                       lineno=getattr(loc, "line", 0) or 0, chain=(function,))
    err.typing, err.lowering = True, False
    err.at_caller = True            # (said where it is: the front end gives it its chain)
    raise err


@register_pass(mutates_CFG=False, analysis_only=True)
class RefuseConstantWrites(FunctionPass):
    """After typing: refuse a write into a host constant (``check_constant_writes``), and note
    which parameters the function being compiled writes, for its callers' check."""

    _name = "gpureplace_refuse_constant_writes"

    def __init__(self):
        FunctionPass.__init__(self)

    def run_pass(self, state):
        from .diagnostics import file_of, name_of
        from .frontend import current_compiled
        func = state.func_id.func
        written = check_constant_writes(state.func_ir, state.typemap, state.calltypes,
                                        name_of(func), file_of(func))
        cf = current_compiled()
        if cf is not None and cf.pyfunc is func:
            cf.written_params = written
        return False
