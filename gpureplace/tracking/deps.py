"""Dependency records of a compiled function's whole call graph, as plain data."""

from __future__ import annotations


def describe(cf):
    """``{"functions": [...], "globals": [...], "overrides": [...]}`` for ``cf`` and its callees."""
    functions, globals_, overrides = [], [], []
    for each in cf.closure():
        functions.append(each.qualname)
        for rec in each.global_reads:
            globals_.append({"function": each.qualname, "kind": rec.kind,
                             "namespace": rec.namespace, "name": rec.name, "line": rec.lineno})
        for host, ovr in each.overrides_used:
            overrides.append({"function": each.qualname, "host": _name(host),
                              "context": ovr.context.name, "impl": _name(ovr.impl)})
    return {"functions": functions, "globals": globals_, "overrides": overrides}


def _name(obj):
    from ..dispatch.context import _name_of
    return _name_of(obj)
