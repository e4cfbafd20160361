"""How the notebook shows what the magics print: each code listing (PTX, SASS, LLVM IR, typed
IR) labelled with its specialisation (and its options, where the kernel holds several
specialisations of the same argument types), highlighted, and folded when long; the tables of
``%cuda_deps``; the short lines of the verbose messages.

A ``Listing`` is an object with two representations: in a notebook (``_repr_html_``) a
``<details>`` element whose summary gives the signature, the line count and, for PTX and SASS, the
registers and shared memory that ptxas reports (collapsed past ``FOLD_LINES`` lines); in a terminal
(``_repr_pretty_``) a one-line label above the full text.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
import textwrap

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import RegexLexer, bygroups
from pygments.lexers import LlvmLexer, PythonLexer
from pygments.styles.friendly import FriendlyStyle
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text

from ..compiler import toolchain
from ..errors import signature_text

#: A listing longer than this many lines starts folded.
FOLD_LINES = 40
#: The width the plain-text messages (verbose, tables) keep under.
WIDTH = 100


class PtxLexer(RegexLexer):
    """NVIDIA PTX: directives and types (``.entry``, ``.reg``, ``.f32``), instructions with their
    modifiers (``ld.global.b32``), registers (``%r1``, ``%tid.x``), predicates (``@%p1``), labels,
    comments and numbers (``0f3F800000`` is a float's bits)."""

    name = "PTX"
    aliases = ["ptx"]
    filenames = ["*.ptx"]

    tokens = {
        "root": [
            (r"\n", Text),
            # an instruction starts a statement: first on its line, or after its predicate
            (r"^([ \t]*)(@!?%\w+)([ \t]+)([a-z][a-z0-9_]*(?:\.[A-Za-z0-9_]+)*)",
             bygroups(Text, Name.Variable, Text, Name.Builtin)),
            (r"^([ \t]*)([a-z][a-z0-9_]*(?:\.[A-Za-z0-9_]+)*)(?=[ \t;])",
             bygroups(Text, Name.Builtin)),
            (r"[ \t]+", Text),
            (r"//.*?$", Comment.Single),
            (r"/\*(.|\n)*?\*/", Comment.Multiline),
            (r'"(\\.|[^"\\])*"', String),
            (r"^[$\w]+:", Name.Label),
            (r"\.[A-Za-z_]\w*", Keyword),
            (r"%[A-Za-z_][\w.]*", Name.Variable),
            (r"0[fFdD][0-9A-Fa-f]+", Number.Hex),
            (r"0[xX][0-9A-Fa-f]+U?", Number.Hex),
            (r"-?\d+\.\d*(?:[eE][-+]?\d+)?", Number.Float),
            (r"-?\d+U?", Number.Integer),
            (r"\$[\w$]+", Name.Label),
            (r"[A-Za-z_][\w$]*", Name),
            (r"[-+*/=!<>|&^~]", Operator),
            (r"[{}()\[\],;:@]", Punctuation),
            (r".", Text),
        ],
    }


class SassLexer(RegexLexer):
    """nvdisasm's SASS listing: opcodes, registers (``R1``, ``UR4``, ``P0``, ``SR_TID.X``),
    constant-bank operands, the ``/*0010*/`` offsets and encodings as comments, labels."""

    name = "SASS"
    aliases = ["sass"]

    tokens = {
        "root": [
            (r"\s+", Text),
            (r"/\*.*?\*/", Comment.Multiline),
            (r"//.*?$", Comment.Single),
            (r"^\s*\.[\w.$]+:", Name.Label),
            (r"\.[A-Za-z_][\w.]*", Keyword),
            (r"@!?U?P[T0-9]+", Name.Variable),
            (r"\b(?:U?R\d+|URZ|RZ|U?P\d|UPT|PT|SR_[\w.]+)\b", Name.Variable),
            (r"\b[cC]\[0x[0-9a-fA-F]+\]", Name.Constant),
            (r"\b[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*\b", Name.Builtin),
            (r"-?0x[0-9a-fA-F]+", Number.Hex),
            (r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", Number),
            (r"`\([^)]*\)", Name.Label),
            (r"[\w$.]+", Name),
            (r"[-+|!~]", Operator),
            (r"[{}()\[\],;:]", Punctuation),
            (r".", Text),
        ],
    }


class ListingStyle(FriendlyStyle):
    """Pygments' "friendly" colours, labels in a blue that reads on light and dark themes."""

    styles = {**FriendlyStyle.styles, Name.Label: "bold #0e84b5"}


#: what -> (the label's word for it, the lexer)
KINDS = {"ptx": ("PTX", PtxLexer), "sass": ("SASS", SassLexer), "llvm": ("LLVM IR", LlvmLexer),
         "types": ("typed IR", PythonLexer)}


# -- ptxas's resource report ---------------------------------------------------------------------

_reports = {}        # sha1 of a PTX text -> (registers, shared bytes), or None when not known


def ptxas_resources(ptx):
    """``(registers, shared memory bytes)`` of the first kernel of ``ptx`` as ptxas reports them
    (``ptxas -v``), or None when ptxas cannot be found or does not say.  One run per PTX text."""
    key = hashlib.sha1(ptx.encode()).hexdigest()
    if key not in _reports:
        _reports[key] = _run_ptxas(ptx)
    return _reports[key]


def _run_ptxas(ptx):
    found = toolchain.resources(ptx)
    return None if found is None else (found["num_regs"], found["shared_size_bytes"])


# -- listings ------------------------------------------------------------------------------------

class Listing:
    """One specialisation's code as the notebook shows it (see the module's docstring)."""

    def __init__(self, title, what, text, ptx=None):
        self.title = title             # "saxpy(float32, float32[::1])"
        self.what = what               # "ptx", "sass", "llvm" or "types"
        self.text = text
        self.ptx = ptx                 # the PTX behind a PTX or SASS listing (ptxas's report)

    @property
    def lines(self):
        return len(self.text.splitlines())

    def label(self, resources=False):
        """``saxpy(float32, float32[::1]) — PTX, 212 lines`` (with ``resources``: and ptxas's
        registers and shared memory, when it can be asked)."""
        word = KINDS[self.what][0]
        text = f"{self.title} — {word}, {self.lines} line{'s' * (self.lines != 1)}"
        if resources and self.ptx:
            found = ptxas_resources(self.ptx)
            if found is not None:
                regs, shared = found
                text += f", {regs} registers, {shared} B shared memory"
        return text

    def _repr_pretty_(self, p, cycle):
        p.text(f"{self.label()}\n{self.text}")

    def __repr__(self):
        return f"<Listing {self.label()}>"

    def _repr_html_(self):
        lexer = KINDS[self.what][1]
        body = highlight(self.text, lexer(stripnl=False, ensurenl=False),
                         HtmlFormatter(noclasses=True, nobackground=True, style=ListingStyle))
        opened = "" if self.lines > FOLD_LINES else " open"
        label = html.escape(self.label(resources=True))
        return (f'<details class="gpureplace-listing"{opened}>'
                f'<summary style="cursor: pointer"><code>{label}</code></summary>'
                f'<div style="max-height: 60em; overflow: auto">{body}</div></details>')


def option_words(options, others=()):
    """``options`` (a specialisation's ``Options``) in a few words: ``fastmath`` or ``no
    fastmath``, the architecture, and each other option in which one of ``others`` differs
    (``opt=0``, ``lineinfo``, ...)."""
    words = ["fastmath" if options.fastmath else "no fastmath", options.arch]
    for field in dataclasses.fields(options):
        name, value = field.name, getattr(options, field.name)
        if name in ("fastmath", "arch") or all(getattr(o, name) == value for o in others):
            continue
        words.append((name if value else f"no {name}") if isinstance(value, bool) else
                     f"{name}={value!r}")
    return ", ".join(words)


def variant_titles(name, variants):
    """The title of each of ``variants`` (``Variant(argtypes, options, current, ...)``, as
    ``kernel.inspect_all`` lists them): ``name(argtypes)``, followed by its options in brackets
    where the kernel holds several specialisations of these argument types, or one compiled
    under other options than a launch uses now: ``saxpy(float32[::1]) [fastmath, sm_90]``,
    ``[no fastmath, sm_90; current options]`` for the one a launch runs, ``...; not the
    current options]`` where none of them is."""
    groups = {}
    for v in variants:
        groups.setdefault(v.argtypes, []).append(v)
    titles = []
    for v in variants:
        group, title = groups[v.argtypes], signature_text(name, v.argtypes)
        if len(group) > 1 or not v.current:
            words = option_words(v.options, [o.options for o in group if o is not v])
            if v.current:
                words += "; current options"
            elif not any(o.current for o in group):
                words += "; not the current options"
            title += f" [{words}]"
        titles.append(title)
    return titles


def variant_listings(name, what, variants, ptx=None):
    """A ``Listing`` of each of ``variants`` (``kernel.inspect_all(what)``), titled by
    ``variant_titles``; ``ptx``: the PTX behind each (``inspect_all("ptx")``, for SASS)."""
    ptx = {(v.argtypes, v.options): v.value for v in ptx or ()}
    return [Listing(title, what, v.value,
                    v.value if what == "ptx" else ptx.get((v.argtypes, v.options)))
            for title, v in zip(variant_titles(name, variants), variants)]


def show(items):
    """Display each listing in the cell's output, one output each."""
    from IPython.display import display
    for item in items:
        display(item)


# -- tables and messages -------------------------------------------------------------------------

def deps_lines(table):
    """The lines of one ``%cuda_deps`` table (``tracking.deps.describe``), without its title:
    the functions, then the globals that a cell could change (not builtins, modules, nor
    attributes of library modules), then the overrides of the user's contexts used."""
    out = ["  functions: " + ", ".join(f.rsplit(".", 1)[-1] for f in table["functions"])]
    shown = [g for g in table["globals"] if not g.get("library")]
    for g in shown:
        state = " (deleted)" if g["deleted"] else " (changed)" if g["changed"] else ""
        out.append(f"  {g['function'].rsplit('.', 1)[-1]}, line {g['line']}: {g['name']}{state}")
    if not shown:
        out.append("  reads no global that a cell could change")
    for o in table["overrides"]:
        if o["context"] != "builtin":       # (libdevice for math.sin: not the user's to change)
            out.append(f"  override: {o['host']} -> {o['impl']} in context {o['context']!r}")
    return out


def deps_report(name, tables):
    """``%cuda_deps``: one titled table per specialisation (``{argtypes: table}``), identical
    tables once, with the specialisations they are also the table of."""
    groups = {}           # the table's lines -> the titles it belongs to
    for argtypes, table in tables.items():
        groups.setdefault(tuple(deps_lines(table)), []).append(signature_text(name, argtypes))
    out = []
    for lines, titles in groups.items():
        out.append(titles[0])
        out += lines
        if len(titles) > 1:
            same = "  the same for: " + ", ".join(titles[1:])
            out += [same] if len(same) < WIDTH else \
                ["  the same for:"] + [f"    {title}" for title in titles[1:]]
    return "\n".join(out)


def wrapped(text, indent="  "):
    """``text`` as lines under ``WIDTH`` characters, the continuation lines indented."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) or [""]


def redefinition_message(changed, kernels, failed=()):
    """The verbose message after a cell: what it changed (``[(name, how)]``) and which kernels
    recompile at their next launch (``failed``: kernels whose last compile failed, which compile
    again at theirs), in lines under ``WIDTH`` characters."""
    what = ", ".join(f"{name} {how}" for name, how in changed)
    tail = (f"{', '.join(kernels)} will recompile on next launch" if kernels
            else "no compiled kernel uses it")
    if failed:
        tail += (f"; {', '.join(failed)}, whose last compile failed, "
                 f"compile{'s' if len(failed) == 1 else ''} again at the next launch")
    one = f"gpureplace: {what} — {tail}"
    if len(one) < WIDTH:
        return one
    return "\n".join(wrapped(f"gpureplace: {what}") + wrapped(f"  {tail}"))
