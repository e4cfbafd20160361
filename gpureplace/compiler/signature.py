"""Signature strings (``"void(float32[:], int32)"``), read by a parser of Numba's type grammar.

Numba turns a signature string into types with ``eval`` over ``numba.core.types``: the string is
Python code, and ``k.compile("__import__('os').system('...')")`` runs the command.  Here the
string is tokenised and parsed; a name is looked up in a fixed table of type names, and nothing in
the string is ever executed, imported or used as an attribute.  It accepts what numba-cuda users
write, and gives the types ``numba.core.sigutils.normalize_signature`` gives for the same text:

    void(float32[:], int32)      float32(float32, float32)      a return type and argument types
    (float32[::1], intp)         float32[:], int32              argument types only
    float32[:, ::1]   float64[::1, :]   int8[:, :, :]           arrays, with Numba's layout rule
    Tuple((int32, float32))   UniTuple(float32, 3)   CPointer(int32)   voidptr
    Array(float32, 2, 'C', readonly=True)

``Tuple(int32, float32)`` (the members without the inner parentheses) and the names ``half`` and
``single`` are accepted too, although Numba's eval refuses them.  Anything else is refused with a
``SignatureParseError`` (a ``TypeError``) that quotes the string and marks the bad token.
"""

from __future__ import annotations

import difflib
import functools
import re

from numba.core import types, typing

from ..errors import GPUReplaceError
from .bfloat16 import bfloat16

__all__ = ["SignatureParseError", "SignatureTypeError", "normalize_signature", "parse_signature",
           "SCALARS"]


class SignatureTypeError(GPUReplaceError, TypeError):
    """A signature of the wrong kind (not a string, a tuple of Numba types or a Signature), or
    holding something that is not a Numba type: a ``TypeError``, shown in IPython as one block
    at the user's line, as a signature string that does not parse is."""


class SignatureParseError(GPUReplaceError, TypeError):
    """A signature string that does not parse: where (``position``, an offset into
    ``signature``) and why (``reason``).  A ``TypeError``, as Numba's own refusals are."""

    def __init__(self, signature, position, end, reason, what=None):
        self.signature = signature
        self.position = position
        self.end = end
        self.reason = reason
        # the signature on one line, each whitespace character one column, so the caret lines up
        shown = re.sub(r"\s", " ", signature)
        marks = "^" * max(1, min(end, len(shown) + 1) - position)
        head = f"{what}: " if what else ""
        super().__init__(f"{head}invalid signature {signature!r}: {reason} (column {position + 1})"
                         f"\n    {shown}\n    {' ' * position}{marks}")


# -- the names a signature can use ----------------------------------------------------------------

_SCALAR_KINDS = (types.Integer, types.Float, types.Complex, types.Boolean, types.NoneType,
                 types.RawPointer)

#: name -> Numba type, for every scalar name numba.core.types defines (int32, i4, intp, double,
#: b1, bool_, c8, void, none, voidptr, ...): read from the module once, so each alias means
#: exactly what Numba's eval made of it, and only these objects are ever returned for a name
SCALARS = {name: ty for name, ty in vars(types).items()
           if not name.startswith("_") and isinstance(ty, _SCALAR_KINDS)}
# NumPy's and C's names for two float types, which numba.core.types lacks
SCALARS.setdefault("half", types.float16)
SCALARS.setdefault("single", types.float32)
SCALARS.update(bfloat16=bfloat16, bf16=bfloat16)      # (compiler/bfloat16.py)

#: names that users coming from Python, C or CUDA C write, and what to write instead
_HINTS = {
    "float": "Python's float is 'float64' (C's float is 'float32')",
    "int": "Python's int is 'int64' (C's int is 'int32')",
    "complex": "Python's complex is 'complex128'",
    "str": "strings cannot be passed to a kernel",
    "None": "write 'void' for a function that returns nothing ('none' is the type of None)",
}

_MAX_NESTING = 32


# -- tokens ---------------------------------------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<int>[0-9]+)
  | (?P<str>'[A-Za-z_]*'|"[A-Za-z_]*")
  | (?P<punct>[()\[\],:=.])
""", re.VERBOSE)


class _Token:
    __slots__ = ("kind", "text", "start", "end")

    def __init__(self, kind, text, start, end):
        self.kind, self.text, self.start, self.end = kind, text, start, end

    def is_(self, punct):
        return self.kind == "punct" and self.text == punct

    def describe(self):
        return "the end of the signature" if self.kind == "end" else repr(self.text)


# -- what the pieces of a signature evaluate to ---------------------------------------------------

_TYPE, _SIGNATURE, _TUPLE, _LIST, _INT, _STR, _BOOL = (
    "a type", "a signature", "a tuple", "a list", "a number", "a string", "a boolean")


class _Piece:
    """A parsed piece of the signature (a type, a tuple, a number...) and where it is."""
    __slots__ = ("kind", "value", "start", "end")

    def __init__(self, kind, value, start, end):
        self.kind, self.value, self.start, self.end = kind, value, start, end


class _Parser:
    """Recursive descent over the tokens; every error names the token at fault."""

    def __init__(self, text, what):
        self.text = text
        self.what = what
        self.tokens = self._tokenize()
        self.i = 0
        self.depth = 0

    def fail(self, reason, start, end=None):
        raise SignatureParseError(self.text, start, start + 1 if end is None else end, reason,
                                  self.what)

    def _tokenize(self):
        """The tokens; a character no token starts with ends the list as a "bad" token, so the
        parser reports the first problem from the left (an unknown name before it, say)."""
        tokens, pos, text = [], 0, self.text
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                tokens.append(_Token("bad", text[pos], pos, pos + 1))
                break
            if m.lastgroup != "space":
                tokens.append(_Token(m.lastgroup, m.group(), m.start(), m.end()))
            pos = m.end()
        tokens.append(_Token("end", "", len(text), len(text) + 1))
        return tokens

    def peek(self, ahead=0):
        tok = self.tokens[min(self.i + ahead, len(self.tokens) - 1)]
        if tok.kind == "bad":
            if tok.text in "'\"":
                self.fail("a string here is a layout, 'C', 'F' or 'A', closed by the same "
                          "quote", tok.start)
            if tok.text == "*":
                self.fail("a pointer is written CPointer(int32) (voidptr for void *)", tok.start)
            self.fail(f"unexpected character {tok.text!r}; a signature holds type names, "
                      f"'(', ')', '[', ']', ',' and ':'", tok.start)
        return tok

    def take(self):
        tok = self.peek()
        if tok.kind != "end":
            self.i += 1
        return tok

    def expect_close(self, punct, opener):
        tok = self.peek()
        if not tok.is_(punct):
            self.fail(f"expected ',' or {punct!r} (to close the {opener.text!r} at column "
                      f"{opener.start + 1}), got {tok.describe()}", tok.start, tok.end)
        return self.take()

    # -- the signature as a whole -----------------------------------------------------------------
    def signature(self):
        if self.peek().kind == "end":
            self.fail("it is empty; write 'void()' for a kernel without arguments, or "
                      "'void(float32[:], int32)'", 0)
        items, comma = self.sequence(None, None)
        if comma:                                  # float32[:], int32: the argument types
            return tuple(self.need_type(p, "an argument type") for p in items), None
        (piece,) = items
        if piece.kind is _SIGNATURE:
            return piece.value
        if piece.kind is _TUPLE:
            return tuple(self.need_type(p, "an argument type") for p in piece.value), None
        if piece.kind is _TYPE:
            self.fail(f"a single type is not a signature; write 'void({self.span(piece)})' for "
                      f"a kernel taking it, or '({self.span(piece)},)' for the argument types "
                      f"alone", piece.start, piece.end)
        self.fail(f"a signature is a return type and argument types, as in "
                  f"'void(float32[:], int32)', or argument types alone; this is {piece.kind}",
                  piece.start, piece.end)

    def span(self, piece):
        return self.text[piece.start:piece.end]

    def sequence(self, closer, opener):
        """Comma-separated pieces up to ``closer`` (None: the end): (pieces, whether a comma
        was seen, which makes a one-element tuple)."""
        items, comma = [], False
        at_close = (lambda t: t.kind == "end") if closer is None else (lambda t: t.is_(closer))
        while not at_close(self.peek()):
            items.append(self.expr())
            tok = self.peek()
            if tok.is_(","):
                self.take()
                comma = True
            elif not at_close(tok):
                if closer is None:
                    self.fail(f"expected ',' or the end of the signature, got {tok.describe()}",
                              tok.start, tok.end)
                self.expect_close(closer, opener)
        return items, comma

    # -- expressions: a name or parenthesised group, then [...] and (...) -------------------------
    def expr(self):
        self.depth += 1
        if self.depth > _MAX_NESTING:
            tok = self.peek()
            self.fail(f"nested more than {_MAX_NESTING} deep", tok.start, tok.end)
        piece = self.atom()
        while True:
            tok = self.peek()
            if tok.is_("["):
                piece = self.array(piece)
            elif tok.is_("("):
                piece = self.call(piece)
            else:
                self.depth -= 1
                return piece

    def atom(self):
        tok = self.take()
        if tok.kind == "name":
            return self.name(tok)
        if tok.kind == "int":
            return _Piece(_INT, int(tok.text), tok.start, tok.end)
        if tok.kind == "str":
            return _Piece(_STR, tok.text[1:-1], tok.start, tok.end)
        if tok.is_("(") or tok.is_("["):
            closer = ")" if tok.text == "(" else "]"
            items, comma = self.sequence(closer, tok)
            end = self.take().end
            if tok.text == "(" and len(items) == 1 and not comma:
                return items[0]                    # (float32): grouping, as in Python
            return _Piece(_TUPLE if closer == ")" else _LIST, items, tok.start, end)
        self.fail(f"expected a type name, got {tok.describe()}", tok.start, tok.end)

    def name(self, tok):
        name = tok.text
        if self.peek().is_("."):
            self.fail_attribute(tok)
        if name in _CONSTRUCTORS:
            if not self.peek().is_("("):
                self.fail(f"{name} takes arguments, as in {_CONSTRUCTORS[name][1]}", tok.start,
                          tok.end)
            return self.construct(tok)
        if name in SCALARS:
            return _Piece(_TYPE, SCALARS[name], tok.start, tok.end)
        if name in ("True", "False"):
            return _Piece(_BOOL, name == "True", tok.start, tok.end)
        self.fail(_unknown_name(name), tok.start, tok.end)

    def fail_attribute(self, tok):
        """``numba.types.float32``: refused (a signature names types, it looks nothing up),
        naming the last name as what to write when it is a type."""
        j, dotted = self.i, tok.text
        while (self.tokens[j].is_(".") and j + 1 < len(self.tokens)
               and self.tokens[j + 1].kind == "name"):
            dotted += "." + self.tokens[j + 1].text
            j += 2
        last = dotted.rsplit(".", 1)[1] if "." in dotted else ""
        instead = (f"write {last!r} instead of {dotted!r}" if last in SCALARS or
                   last in _CONSTRUCTORS else "write a type's own name, such as 'float32'")
        self.fail(f"attribute access is not part of a signature; {instead}", tok.start,
                  self.tokens[j - 1].end if j > self.i else self.peek().end)

    # -- arrays: dtype[:, ::1] --------------------------------------------------------------------
    def array(self, piece):
        opener = self.take()
        dtype = self.need_type(piece, "an array's element type")
        if isinstance(dtype, types.Array):
            self.fail(f"an array's elements cannot be arrays; write one subscript with a ':' per "
                      f"dimension, such as '{dtype.dtype}[:, :]'", opener.start, opener.end)
        if isinstance(dtype, types.NoneType):
            self.fail(f"an array's element type cannot be {self.span(piece)}", piece.start,
                      piece.end)
        contiguous, comma = [], False
        while True:
            contiguous.append(self.dimension())
            tok = self.peek()
            if tok.is_(","):
                self.take()
                comma = True
                if self.peek().is_("]"):
                    break
            elif tok.is_("]"):
                break
            else:
                self.expect_close("]", opener)
        end = self.take().end
        # Numba's rule (Type.__getitem__): with several dimensions (or a trailing comma), '::1'
        # first is Fortran order, else '::1' last is C order; one ':' alone is C order with '::1'
        if comma:
            layout = "F" if contiguous[0] else "C" if contiguous[-1] else "A"
        else:
            layout = "C" if contiguous[0] else "A"
        return _Piece(_TYPE, types.Array(dtype, len(contiguous), layout), piece.start, end)

    def dimension(self):
        """One dimension of an array subscript, ':' or '::1' (or '::'); True for '::1'."""
        tok = self.peek()
        if not tok.is_(":"):
            self.fail(f"array layout must be ':' or '::1' for each dimension, got "
                      f"{tok.describe()}", tok.start, tok.end)
        self.take()
        if self.peek().is_(":"):
            self.take()
            if self.peek().kind == "int":
                step = self.take()
                if step.text != "1":
                    self.fail("array layout must be ':' or '::1' (a step other than 1 is not a "
                              "layout)", step.start, step.end)
                return True
        tok = self.peek()
        if tok.kind == "int":
            self.fail("array layout must be ':' or '::1' (a dimension has no bounds in a "
                      "signature)", tok.start, tok.end)
        return False

    # -- ret(args): a signature -------------------------------------------------------------------
    def call(self, piece):
        opener = self.take()
        if piece.kind is _SIGNATURE:
            self.fail("a signature has one list of argument types", opener.start, opener.end)
        ret = self.need_type(piece, "a return type")
        items, _ = self.sequence(")", opener)
        end = self.take().end
        args = []
        for p in items:
            if p.kind is _SIGNATURE:
                self.fail("a signature cannot be an argument type", p.start, p.end)
            args.append(self.need_type(p, "an argument type"))
        return _Piece(_SIGNATURE, (tuple(args), ret), piece.start, end)

    # -- Array(...), Tuple(...), UniTuple(...), CPointer(...) -------------------------------------
    def construct(self, name_tok):
        opener = self.take()
        positional, keywords = [], {}
        while not self.peek().is_(")"):
            tok = self.peek()
            if tok.kind == "name" and self.peek(1).is_("="):
                self.take()
                self.take()
                if tok.text in keywords:
                    self.fail(f"{tok.text}= given twice", tok.start, tok.end)
                keywords[tok.text] = (tok, self.expr())
            elif keywords:
                self.fail("a positional argument cannot follow a keyword argument", tok.start,
                          tok.end)
            else:
                positional.append(self.expr())
            if self.peek().is_(","):
                self.take()
            elif not self.peek().is_(")"):
                self.expect_close(")", opener)
        end = self.take().end
        build, example = _CONSTRUCTORS[name_tok.text]
        return _Piece(_TYPE, build(self, name_tok, positional, keywords, example),
                      name_tok.start, end)

    def bind(self, name_tok, positional, keywords, example, required, optional=()):
        """Pieces by parameter name, as Python binds a call; errors say how to call it."""
        params = required + optional
        usage = f"write {example}"
        if len(positional) > len(params):
            extra = positional[len(params)]
            self.fail(f"{name_tok.text} takes at most {len(params)} arguments; {usage}",
                      extra.start, extra.end)
        bound = dict(zip(params, positional))
        for key, (tok, piece) in keywords.items():
            if key not in params:
                self.fail(f"{name_tok.text} has no argument {key!r} (it takes "
                          f"{', '.join(params)}); {usage}", tok.start, tok.end)
            if key in bound:
                self.fail(f"{name_tok.text} got {key} twice; {usage}", tok.start, tok.end)
            bound[key] = piece
        missing = [p for p in required if p not in bound]
        if missing:
            self.fail(f"{name_tok.text} needs {', '.join(missing)}; {usage}", name_tok.start,
                      name_tok.end)
        return bound

    def need_type(self, piece, role):
        if piece.kind is not _TYPE:
            self.fail(f"{role} must be a type, not {piece.kind} ({self.span(piece)})",
                      piece.start, piece.end)
        return piece.value

    def need(self, piece, kind, role):
        if piece.kind is not kind:
            self.fail(f"{role} must be {kind}, not {piece.kind} ({self.span(piece)})",
                      piece.start, piece.end)
        return piece.value

    def build_array(self, name_tok, positional, keywords, example):
        bound = self.bind(name_tok, positional, keywords, example, ("dtype", "ndim", "layout"),
                          ("readonly", "aligned"))
        dtype = self.need_type(bound["dtype"], "Array's dtype")
        if isinstance(dtype, (types.Array, types.NoneType)):
            self.fail(f"an array's element type cannot be {dtype}", bound["dtype"].start,
                      bound["dtype"].end)
        ndim = self.need(bound["ndim"], _INT, "Array's ndim")
        layout = self.need(bound["layout"], _STR, "Array's layout")
        if layout not in ("C", "F", "A"):
            self.fail("Array's layout must be 'C', 'F' or 'A'", bound["layout"].start,
                      bound["layout"].end)
        flags = {key: self.need(bound[key], _BOOL, f"Array's {key}")
                 for key in ("readonly", "aligned") if key in bound}
        return types.Array(dtype, ndim, layout, **flags)

    def build_tuple(self, name_tok, positional, keywords, example):
        if keywords:
            tok, _ = next(iter(keywords.values()))
            self.fail(f"Tuple takes its member types only; write {example}", tok.start, tok.end)
        members = positional
        if len(positional) == 1 and positional[0].kind in (_TUPLE, _LIST):
            members = positional[0].value          # Numba's spelling: Tuple((int32, float32))
        # Numba's Tuple gives a UniTuple when the members are all one type
        return types.Tuple(tuple(self.need_type(p, "a Tuple member") for p in members))

    def build_unituple(self, name_tok, positional, keywords, example):
        bound = self.bind(name_tok, positional, keywords, example, ("dtype", "count"))
        return types.UniTuple(self.need_type(bound["dtype"], "UniTuple's dtype"),
                              self.need(bound["count"], _INT, "UniTuple's count"))

    def build_pointer(self, name_tok, positional, keywords, example):
        bound = self.bind(name_tok, positional, keywords, example, ("dtype",))
        return types.CPointer(self.need_type(bound["dtype"], "CPointer's dtype"))


#: constructor name -> (how to build it, an example for error messages)
_CONSTRUCTORS = {
    "Array": (_Parser.build_array, "Array(float32, 2, 'C') (or float32[:, ::1])"),
    "Tuple": (_Parser.build_tuple, "Tuple((int32, float32))"),
    "UniTuple": (_Parser.build_unituple, "UniTuple(float32, 3)"),
    "CPointer": (_Parser.build_pointer, "CPointer(int32)"),
}


def _unknown_name(name):
    if name.startswith("__"):
        return (f"{name!r} is not a type name (a signature names Numba types; nothing in it is "
                f"run or imported)")
    if name in _HINTS:
        return f"{name!r} is not a Numba type name: {_HINTS[name]}"
    if _is_vector_type(name):
        return (f"{name!r} is a CUDA vector type, which a signature string cannot name; give a "
                f"tuple of Numba types instead, with cuda.{name}.vector_type for the vector")
    known = [n for n in (*SCALARS, *_CONSTRUCTORS) if not n.startswith(("np_", "c_", "py_"))]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if not close:
        close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.6)
    if close:
        return f"unknown type name {name!r}; did you mean {close[0]!r}?"
    value = vars(types).get(name)
    if isinstance(value, types.Type) or isinstance(value, type) and issubclass(value, types.Type):
        return (f"{name!r} cannot be named in a signature string (they name scalar types, "
                f"arrays, Tuple, UniTuple and CPointer); give a tuple of Numba type objects "
                f"instead")
    return (f"unknown type name {name!r}; signatures name Numba types such as int32, float32, "
            f"float64[:], Tuple((int32, float32)) or CPointer(int32)")


def _is_vector_type(name):
    from .intrinsics.vectors import constructors
    return name in constructors


# -- entry points --------------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _parse_cached(text):
    return _Parser(text, None).signature()


def parse_signature(text, what=None):
    """``(argument types, return type or None)`` for a signature string; ``what`` (such as
    ``"declare_device('mul')"``) starts any error message."""
    try:
        return _parse_cached(text)
    except SignatureParseError as e:
        if what is None:
            raise
        raise SignatureParseError(e.signature, e.position, e.end, e.reason, what) from None


def normalize_signature(sig, what=None):
    """``(argument types, return type or None)`` from any signature form gpureplace accepts:
    a string (parsed, never evaluated), a tuple or list of Numba types, or a ``Signature``."""
    if isinstance(sig, str):
        return parse_signature(sig, what)
    head = f"{what}: " if what else ""
    if isinstance(sig, typing.Signature):
        args, ret = tuple(sig.args), sig.return_type
    elif isinstance(sig, (tuple, list)):
        args, ret = tuple(sig), None
    else:
        raise SignatureTypeError(f"{head}a signature is a string such as 'void(float32[:], "
                                 f"int32)', a tuple of Numba types or a Signature, not "
                                 f"{type(sig).__name__} ({sig!r})")
    for i, ty in enumerate(args):
        if not isinstance(ty, types.Type):
            raise SignatureTypeError(f"{head}argument type {i} of the signature {sig!r} is "
                                     f"{type(ty).__name__} {ty!r}, not a Numba type (such as "
                                     f"numba.types.float32[:])")
    if ret is not None and not isinstance(ret, types.Type):
        raise SignatureTypeError(f"{head}the return type of the signature {sig!r} is {ret!r}, "
                                 f"not a Numba type")
    return args, ret
