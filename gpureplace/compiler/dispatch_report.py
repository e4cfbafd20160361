"""``kernel.dispatch_report(sig)``: where each callable of the call graph resolved, and to what."""

from __future__ import annotations

from ..tracking.names import qualified_name
from .intrinsics.devicemath import MathStub
from .intrinsics.libdevice_calls import LibdeviceStub
from .intrinsics.stubs import Stub


def _implementation(impl, fastmath):
    if isinstance(impl, MathStub):
        f32 = impl.symbol(__import__("numba").float32, fastmath)
        return f"libdevice {f32} (float32) / {impl.f64} (float64)"
    if isinstance(impl, LibdeviceStub):
        return f"libdevice {impl.symbol}"
    if isinstance(impl, Stub):
        return f"intrinsic {impl.__qualname__}"
    py_func = getattr(impl, "py_func", impl)
    if hasattr(py_func, "__code__"):
        return f"device function {qualified_name(py_func)}"
    return qualified_name(impl)


def _is_language_builtin(host):
    import builtins
    mod = getattr(host, "__module__", None) or ""
    return mod in ("_operator", "operator") or (
        isinstance(host, type) and getattr(builtins, host.__name__, None) is host)


class DispatchReport(list):
    """A list of dicts (function, line, callable, layer, implementation), printable as a table."""

    def __str__(self):
        rows = [("function", "line", "callable", "context layer", "implementation")]
        rows += [(r["function"], str(r["line"]), r["callable"], r["layer"], r["implementation"])
                 for r in self]
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                         for row in rows)


def dispatch_report(cf):
    out = DispatchReport()
    for each in cf.closure():
        fastmath = each.options.fastmath if hasattr(each, "options") else False
        for res in sorted(getattr(each, "resolutions", ()), key=lambda r: r.line):
            if not res.candidates and _is_language_builtin(res.host):
                continue          # operators and builtins with no override: Numba's own meaning
            row = {"function": each.pyfunc.__qualname__, "line": res.line,
                   "callable": qualified_name(res.host)}
            if not res.candidates:
                row["layer"] = "(none)"
                row["implementation"] = _implementation(res.host, fastmath)
            elif res.candidates[0].types is None:
                ovr = res.candidates[0]
                row["layer"] = ovr.context.name
                row["implementation"] = _implementation(ovr.impl, fastmath)
            else:
                row["layer"] = ", ".join(dict.fromkeys(o.context.name for o in res.candidates))
                row["implementation"] = "; ".join(
                    f"{_implementation(o.impl, fastmath)} for {o.types}" if o.types else
                    _implementation(o.impl, fastmath) for o in res.candidates)
            out.append(row)
    return out
