"""Why a global that device code reads cannot be used there, in the user's terms: a dict, a
Python class or an object of one (and the method or attribute read of it), a tuple of functions,
an IntEnum member converted to a type Numba will not convert it to.  ``diagnostics`` asks these
when Numba cannot type a global."""

from __future__ import annotations

import functools

from .constructs import instructions_with_lines


def _read_on_line(pyfunc, lineno, check):
    """``(name, attribute read of it or None)`` of the first global read on ``lineno`` whose
    value passes ``check``, or None."""
    found = None
    for ins, line in instructions_with_lines(pyfunc):
        if found is not None:
            return found, ins.argval if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") else None
        if line == lineno and ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and \
                ins.argval in pyfunc.__globals__ and check(pyfunc.__globals__[ins.argval]):
            found = ins.argval
    return (found, None) if found else None


def _is_function(value):
    return callable(value) and not isinstance(value, type)


def _constant_index_on_line(pyfunc, name, lineno):
    """The int constant that indexes the global ``name`` read on ``lineno`` (``FUNCS[1]``; a
    named tuple's field, ``OPS.f``, as its index), or None."""
    after = False
    fields = getattr(pyfunc.__globals__.get(name), "_fields", ())
    for ins, line in instructions_with_lines(pyfunc):
        if after:
            if ins.opname == "LOAD_CONST" and type(ins.argval) is int:
                return ins.argval
            if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and ins.argval in fields:
                return fields.index(ins.argval)
            return None
        after = line == lineno and ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and \
            ins.argval == name
    return None


def functions_tuple_reason(name, value, index=None):
    """Why the global tuple (or list) ``name`` holding functions cannot be called through
    (``FUNCS[1](x)``, ``index`` the constant index if known), and what works instead; None when
    ``value`` holds no function."""
    if not isinstance(value, (tuple, list)) or not any(_is_function(v) for v in value):
        return None
    container = "tuple" if isinstance(value, tuple) else "list"
    names = [getattr(v, "__name__", None) if _is_function(v) else None for v in value]
    known = [n for n in names if n]
    shown = "functions" if not known else \
        f"functions ({', '.join(known[:4])}{', ...' if len(known) > 4 else ''})"
    which = f"a {container} of" if all(_is_function(v) for v in value) else \
        f"a {container} holding"
    first = next(i for i, v in enumerate(value) if _is_function(v))
    if index is not None and -len(value) <= index < len(value) and _is_function(value[index]):
        first = index
    fields = getattr(value, "_fields", ())
    # (as the user reaches it: a named tuple's field by its name)
    item = f"{name}.{fields[first]}" if first < len(fields) else f"{name}[{first}]"
    callee = names[first] if names[first] and names[first].isidentifier() else None
    by_name = f"call the function by its name ({callee}(...)), " if callee else ""
    alias = (callee or "op").upper()
    return (f"{name} is {which} {shown}: device code cannot take a function out of a "
            f"{container} ({item}(...)); {by_name}bind it to a global of its own ({alias} = "
            f"{item}) and call that, or choose by a number: if which == 0: ... elif "
            f"which == 1: ..., each branch calling one function by name")


def functions_container_reason(pyfunc, lineno):
    """``functions_tuple_reason`` for the first global read on ``lineno`` that is a tuple or
    list holding functions, or None."""
    found = _read_on_line(pyfunc, lineno, lambda v: functions_tuple_reason("", v) is not None)
    if found is None:
        return None
    name = found[0]
    return functions_tuple_reason(name, pyfunc.__globals__[name],
                                  _constant_index_on_line(pyfunc, name, lineno))


def host_value_reason(pyfunc, name, lineno):
    """Why the global ``name`` read on ``lineno`` cannot be used in device code where it is a
    dict, a tuple of functions, a class or an object of one; None for other values
    (functions)."""
    import inspect
    value = pyfunc.__globals__.get(name, host_value_reason)
    if isinstance(value, dict):
        return (f"{name} is a global dict, which device code cannot read (dicts are host "
                f"objects); use a tuple or a global NumPy array indexed by the key (keys 0 to "
                f"n-1), a module-level constant for each entry, or a device array passed as "
                f"an argument")
    why = functions_tuple_reason(name, value, _constant_index_on_line(pyfunc, name, lineno))
    if why is not None:
        return why
    if isinstance(value, functools.partial):
        inner = getattr(value.func, "__name__", "the function")
        return (f"{name} is functools.partial({inner}, ...), which device code cannot call (a "
                f"partial is a host object); call {inner} with the bound arguments written "
                f"out, or define a function that does (def {name.lower()}(x): return "
                f"{inner}(..., x)) and call that")
    if value is host_value_reason or callable(value) and not isinstance(value, type):
        return None
    what = "a Python class" if isinstance(value, type) else \
        f"an object of the Python class {type(value).__name__}"
    of = f"the class {name}" if isinstance(value, type) else f"{name}, {what}"
    attr = (_read_on_line(pyfunc, lineno, lambda v: v is value) or (name, None))[1]
    if attr is None:
        return (f"{name} is {what}: device code cannot make or use Python objects; pass the "
                f"numbers, tuples or arrays the kernel needs as arguments")
    raw = inspect.getattr_static(value, attr, None)
    if callable(raw) or isinstance(raw, (staticmethod, classmethod)):
        kind = {staticmethod: "staticmethod", classmethod: "classmethod"}.get(type(raw), "method")
        return (f"{name}.{attr}(...) calls a {kind} of {of}: calling the methods of Python "
                f"classes or reading their attributes is not supported in device code; make "
                f"{attr} a module-level function (kernels compile the plain functions they "
                f"call) or a cuda.jit(device=True) function, and call it as {attr}(...)")
    return (f"{name}.{attr} reads an attribute of {of}: reading the attributes of Python "
            f"classes or their objects is not supported in device code; bind the value to a "
            f"module global ({attr.upper()} = {name}.{attr}) and read that, or pass it to the "
            f"kernel as an argument")


def int_enum_reason(pyfunc, lineno, cls, ty):
    """Numba's "Cannot cast IntEnum<...>(cls) to ty": what to write instead."""
    import enum
    read = _read_on_line(pyfunc, lineno,
                         lambda v: isinstance(v, enum.EnumMeta) and v.__name__ == cls)
    member = f"{read[0]}.{read[1]}" if read and read[1] else f"{cls}.MEMBER"
    return (f"{member} (a member of the IntEnum {cls}) cannot be converted to {ty} in device "
            f"code: Numba converts IntEnum members to integer types only; use its integer "
            f"value, {member}.value")
