"""``kernel.dispatch_report(sig)``: where each callable of the call graph resolved, and to what."""

from __future__ import annotations

import types

from ..errors import signature_text
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


_HEADER = ("function", "line", "callable", "context layer", "implementation")


class DispatchReport(list):
    """A list of dicts (function, line, callable, layer, implementation), shown as a table:
    printed, as a value in IPython (``_repr_pretty_``) and in a notebook (``_repr_html_``).
    ``title``: the specialisation it reports on, ``k(float32[::1])`` (a line above the table
    where it is shown, not printed)."""

    title = None

    def _rows(self):
        return [(r["function"], str(r["line"]), r["callable"], r["layer"], r["implementation"])
                for r in self]

    def __str__(self):
        rows = [_HEADER] + self._rows()
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                         for row in rows)

    def shown(self):
        """The table under its title."""
        return str(self) if self.title is None else f"{self.title}\n{self}"

    def __repr__(self):
        return self.shown()

    def _repr_pretty_(self, p, cycle):
        p.text("DispatchReport(...)" if cycle else self.shown())

    def _repr_html_(self):
        import html
        cells = "".join(f"<th style='text-align: left'>{html.escape(h)}</th>" for h in _HEADER)
        body = "".join("<tr>" + "".join(f"<td style='text-align: left'><code>{html.escape(c)}"
                                        f"</code></td>" for c in row) + "</tr>"
                       for row in self._rows())
        title = "" if self.title is None else \
            f"<p><code>{html.escape(self.title)}</code></p>"
        return (f"<div class='gpureplace-dispatch-report'>{title}<table><thead><tr>{cells}"
                f"</tr></thead><tbody>{body}</tbody></table></div>")


class DispatchReports(dict):
    """``kernel.dispatch_report()`` without a signature: ``{argument types: DispatchReport}``,
    shown as one titled table per specialisation."""

    def _reports(self):
        return [report if isinstance(report, DispatchReport) else DispatchReport(report)
                for report in self.values()]

    def __str__(self):
        return "\n\n".join(report.shown() for report in self._reports())

    def __repr__(self):
        return str(self) if self else "DispatchReports({})"

    def _repr_pretty_(self, p, cycle):
        p.text("DispatchReports(...)" if cycle else repr(self))

    def _repr_html_(self):
        return "".join(report._repr_html_() for report in self._reports()) or None


def _key(value):
    """What identifies a callable across a relink (which keeps the typed IR of the old
    definition of a callee, and records the new one): a function by its module and name."""
    fn = getattr(value, "py_func", value)
    if isinstance(fn, types.FunctionType):
        return ("function", fn.__module__, fn.__qualname__)
    return ("id", id(value))


def _call_sites(cf):
    """``(calls, reads)``: ``_key`` of a value the function ``cf`` reads -> the lines of its
    typed IR that call it, and the lines that read it.

    The lines come from the IR, where each call has its own.  A resolution records one line per
    callable, from Numba's error context of the moment, which Numba does not set while it types
    globals: a stale location, left by the compile before (often the previous specialisation of
    the same function, hence two lines for one call) -- a fallback only."""
    import operator

    from numba.core import ir
    calls, reads, values = {}, {}, {}
    annotation = getattr(cf, "type_annotation", None)
    for block in getattr(annotation, "blocks", {}).values():
        for inst in block.body:
            line = inst.loc.line if inst.loc is not None else 0
            if isinstance(inst, (ir.SetItem, ir.StaticSetItem)):
                calls.setdefault(_key(operator.setitem), []).append(line)
            if not isinstance(inst, ir.Assign):
                continue
            value = inst.value
            if isinstance(value, (ir.Global, ir.FreeVar)):
                values[inst.target.name] = value.value
                reads.setdefault(_key(value.value), []).append(line)
            elif isinstance(value, ir.Expr):
                if value.op == "getattr" and value.value.name in values:
                    got = getattr(values[value.value.name], value.attr, None)
                    values[inst.target.name] = got
                    reads.setdefault(_key(got), []).append(line)
                elif value.op == "call" and value.func.name in values:
                    calls.setdefault(_key(values[value.func.name]), []).append(line)
                elif value.op in ("binop", "inplace_binop", "unary"):
                    calls.setdefault(_key(value.fn), []).append(line)
                elif value.op in ("getitem", "static_getitem"):
                    calls.setdefault(_key(operator.getitem), []).append(line)
    return calls, reads


def _row(each, res, line, fastmath):
    row = {"function": each.pyfunc.__qualname__, "line": line,
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
    return row


def dispatch_report(cf):
    """One row per call site of each callable the call graph resolved (a callable read but not
    called: the line that reads it), in the order of the functions, then of their lines."""
    out = DispatchReport()
    out.title = signature_text(cf.pyfunc.__qualname__, cf.argtypes)
    for each in cf.closure():
        fastmath = each.options.fastmath if hasattr(each, "options") else False
        calls, reads = _call_sites(each)
        rows = {}
        for res in getattr(each, "resolutions", ()):
            if not res.candidates and _is_language_builtin(res.host):
                continue          # operators and builtins with no override: Numba's own meaning
            key = _key(res.host)
            lines = calls.get(key) or reads.get(key) or [res.line]
            for line in lines:
                rows.setdefault((line, qualified_name(res.host)),
                                _row(each, res, line, fastmath))
        out.extend(row for _, row in sorted(rows.items(), key=lambda kv: kv[0]))
    return out
