"""Python's arithmetic operators in simulated device code, with the meaning Numba gives them.

The simulator runs a kernel's own Python code.  Its values are mostly device values already (array
elements and literals are device integers or NumPy floats, see ``arrays``), but booleans, and the
plain ints and floats that reach a kernel other ways, follow Python's or NumPy's rules where
Numba's differ:

* ``~True`` is -2 in Python and False in Numba; ``-(a < b)`` raises in NumPy and is -1 in Numba;
  ``(a < b) + (c < d)`` is a logical or for NumPy's booleans and 2 in Numba; ``x / False``
  raises in Python and is inf (or NaN) on the device; ``True + x32`` is a float32;
* a plain int or float is "weak" for NumPy 2: ``x32 * 1.5`` would stay a float32 where Numba
  computes in float64 (the 1.5 is a float64), and a plain int never wraps;
* ``float ** int`` multiplies in the float's type (repeated squaring, ``1.0 / r`` in float64 for
  a negative exponent: Numba's ``int_power``), where NumPy would compute ``pow`` in float64;
  ``int ** negative literal`` has Numba's literal-exponent meaning.

So each function the simulator runs is compiled again from its source (``rewrite``) with every
arithmetic operator -- binary operators, unary ``-``, ``+`` and ``~``, augmented assignments to
names -- replaced by a call to the function of the same name below.  These take the fast path
when both operands are device values and otherwise give each operand Numba's type first.  A
function whose source cannot be found or no longer matches its bytecode (the file changed since)
runs as it is.
"""

from __future__ import annotations

import ast
import operator
import textwrap
import types as pytypes

import numpy as np

from ..compiler.constructs import source_lines
from .arrays import DEVICE_VALUE_TYPES, wrap_int

#: the global name the rewritten code reads this module under
NAME = "__gpureplace_ops__"

_I64, _U64 = np.dtype(np.int64), np.dtype(np.uint64)
_BOOLS = (bool, np.bool_)
_FLOAT_TYPES = frozenset((np.float16, np.float32, np.float64))


def _operand(x, other):
    """``x`` as Numba types it in arithmetic with ``other``."""
    t = type(x)
    if t is bool or t is np.bool_:
        ot = type(other)
        if ot in _FLOAT_TYPES:
            return ot(x)                     # bool with a float: that float (True + x32: f32)
        if ot is float:
            return np.float64(x)
        if ot is complex or isinstance(other, np.complexfloating):
            return x
        return wrap_int(1 if x else 0, _I64)
    if t is int:
        return wrap_int(x, _I64) if -(1 << 63) <= x < (1 << 63) else x
    if t is float:
        return np.float64(x)
    if t is complex:
        return np.complex128(x)
    if isinstance(x, np.integer) and t not in DEVICE_VALUE_TYPES:
        return wrap_int(x, x.dtype)
    return x


def _binary(op):
    def apply(a, b):
        if type(a) in DEVICE_VALUE_TYPES and type(b) in DEVICE_VALUE_TYPES:
            return op(a, b)
        return op(_operand(a, b), _operand(b, a))
    apply.__name__ = op.__name__.strip("_")
    return apply


add = _binary(operator.add)
sub = _binary(operator.sub)
mul = _binary(operator.mul)
#: True while a ``debug=True`` kernel runs: Python's error model, in which a division by zero
#: raises ZeroDivisionError (as the compiled debug kernel does) instead of giving inf or NaN.
python_error_model = False


def _dividing(op):
    plain = _binary(op)

    def apply(a, b):
        if python_error_model and b == 0:
            raise ZeroDivisionError("division by zero")
        return plain(a, b)
    apply.__name__ = plain.__name__
    return apply


truediv = _dividing(operator.truediv)
floordiv = _dividing(operator.floordiv)
mod = _dividing(operator.mod)
lshift = _binary(operator.lshift)
rshift = _binary(operator.rshift)
matmul = operator.matmul


def _bitwise(op):
    def apply(a, b):
        if type(a) in _BOOLS and type(b) in _BOOLS:
            return bool(op(bool(a), bool(b)))          # bool & bool is a bool
        if type(a) in DEVICE_VALUE_TYPES and type(b) in DEVICE_VALUE_TYPES:
            return op(a, b)
        return op(_operand(a, b), _operand(b, a))
    apply.__name__ = op.__name__.strip("_")
    return apply


and_ = _bitwise(operator.and_)
or_ = _bitwise(operator.or_)
xor = _bitwise(operator.xor)


def _float_int_power(a, n):
    """``a ** n`` for a float ``a`` and an integer ``n``: Numba's int_power (repeated squaring
    in a's type; 1.0 / r computed in float64 for a negative exponent; math.pow beyond 2**16)."""
    ft = type(a)
    if abs(n) > 0x10000:
        return ft(np.power(np.float64(a), np.float64(n)))
    r = ft(1)
    e = -n if n < 0 else n
    while e:
        if e & 1:
            r = r * a
        e >>= 1
        a = a * a
    if n < 0:
        return ft(np.float64(1.0) / np.float64(r))
    return r


def pow(a, b):                              # noqa: A001 (the operator's name)
    if type(a) not in DEVICE_VALUE_TYPES or type(b) not in DEVICE_VALUE_TYPES:
        a, b = _operand(a, b), _operand(b, a)
    if type(a) in (np.float32, np.float64) and isinstance(b, np.integer):
        return _float_int_power(a, int(b))
    if isinstance(a, np.floating) or isinstance(b, np.floating):
        from .hostmath import host_pow
        return host_pow(a, b)                # C's pow, as math.pow and np.power are simulated
    return a ** b


def pow_static(a, b):
    """``a ** n`` with an integer literal ``n`` (Numba's static_power_impl): for integers, a
    negative exponent inverts ``a ** -n`` as computed (wrapped): 0 gives the numpy error
    model's INT_MIN, 1 and -1 themselves, anything else 0."""
    if type(a) not in DEVICE_VALUE_TYPES or type(b) not in DEVICE_VALUE_TYPES:
        a, b = _operand(a, b), _operand(b, a)
    if isinstance(a, np.integer) and isinstance(b, np.integer) and b < 0:
        r = pow(a, -b)
        dtype, bits = r.dtype, r.dtype.itemsize * 8
        if r == 0:
            return wrap_int(-(1 << (bits - 1)), dtype)
        ones = (1, -1) if dtype.kind == "i" else (1, (1 << bits) - 1)
        return r if int(r) in ones else wrap_int(0, dtype)
    return pow(a, b)


def neg(x):
    t = type(x)
    if t is bool or t is np.bool_ or t is int:
        return wrap_int(-int(x), _I64)
    return -x


def pos(x):
    t = type(x)
    if t is bool or t is np.bool_ or t is int:
        return wrap_int(int(x), _I64)
    return +x


def invert(x):
    t = type(x)
    if t is bool or t is np.bool_:
        return not x                           # Numba (and NumPy): ~ of a bool is "not"
    if t is int:
        return wrap_int(~x, _I64)
    return ~x


# ---------------------------------------------------------------------------------------------
# The rewrite

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
           ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.LShift: "lshift",
           ast.RShift: "rshift", ast.BitAnd: "and_", ast.BitOr: "or_", ast.BitXor: "xor",
           ast.MatMult: "matmul"}
_UNARY = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert"}


def _int_literal(node):
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return (isinstance(node, ast.Constant) and type(node.value) is int)


def _call(name, args, like):
    func = ast.Attribute(value=ast.Name(id=NAME, ctx=ast.Load()), attr=name, ctx=ast.Load())
    return ast.copy_location(ast.Call(func=func, args=args, keywords=[]), like)


class _Rewriter(ast.NodeTransformer):
    """Operators to calls; an operation on constants only is left alone: CPython folds it when
    it compiles the function (``~True`` is -2 there, a constant Numba types as an int)."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant):
            return node
        name = _BINOPS[type(node.op)]
        if name == "pow" and _int_literal(node.right):
            name = "pow_static"
        return _call(name, [node.left, node.right], node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        name = _UNARY.get(type(node.op))
        if name is None or isinstance(node.operand, ast.Constant):    # not: Python's own
            return node
        return _call(name, [node.operand], node)

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if not isinstance(node.target, ast.Name):
            return node                           # a[i] += v: the element is a device value
        name = _BINOPS[type(node.op)]
        value = _call(name, [ast.Name(id=node.target.id, ctx=ast.Load()), node.value], node)
        return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)


_rewritten = {}


def rewrite(pyfunc):
    """The code of ``pyfunc`` with its operators calling this module (cached per code object),
    or its own code when its source is not available or no longer matches it."""
    code = pyfunc.__code__
    hit = _rewritten.get(code)
    if hit is None:
        try:
            hit = _rewrite(pyfunc, code)
        except Exception:                        # noqa: BLE001 (any failure: run it as it is)
            hit = None
        hit = _rewritten[code] = hit or code
    return hit


def _rewrite(pyfunc, code):
    if code.co_name == "<lambda>":
        return None
    lines, first = source_lines(code)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef) or \
            tree.body[0].name != code.co_name:
        return None
    ast.increment_lineno(tree, first - 1)
    original = _compile_nested(tree.body[0], code, first)
    if original is None or original.co_code != code.co_code or \
            original.co_names != code.co_names or original.co_varnames != code.co_varnames:
        return None                              # the source changed since it was compiled
    fdef = _Rewriter().visit(ast.parse(textwrap.dedent("".join(lines))).body[0])
    ast.increment_lineno(fdef, first - 1)
    return _compile_nested(fdef, code, first)


def _imported_names(filename):
    """Names bound by import statements at the top level of the file (or notebook cell) that
    ``filename`` names: CPython compiles ``name.attr(...)`` differently for those."""
    import linecache
    tree = ast.parse("".join(linecache.getlines(filename)))
    names = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        todo.extend(ast.iter_child_nodes(node))
    return sorted(names)


def _compile_nested(fdef, code, first):
    """``fdef`` compiled as ``code`` was: inside a function whose locals are its free variables
    (so that they stay free variables, in the same order), without its decorators, in a module
    that imports the names its own file imports."""
    fdef.decorator_list = []
    prologue = [ast.Assign(targets=[ast.Name(id=v, ctx=ast.Store())],
                           value=ast.Constant(value=None)) for v in code.co_freevars]
    extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
    outer = ast.FunctionDef(name="__gpureplace_outer__",
                            args=ast.arguments(posonlyargs=[], args=[], vararg=None,
                                               kwonlyargs=[], kw_defaults=[], kwarg=None,
                                               defaults=[]),
                            body=prologue + [fdef, ast.Return(value=ast.Constant(value=None))],
                            decorator_list=[], returns=None, **extra)
    imports = [ast.Import(names=[ast.alias(name=n, asname=None)])
               for n in _imported_names(code.co_filename) if n != "*"]
    module = ast.Module(body=imports + [outer], type_ignores=[])
    for node in ast.walk(module):
        if "lineno" in node._attributes and not hasattr(node, "lineno"):
            node.lineno, node.col_offset = first, 0
            node.end_lineno, node.end_col_offset = first, 0
    ast.fix_missing_locations(module)
    compiled = compile(module, code.co_filename, "exec")
    outer_code = next(c for c in compiled.co_consts if isinstance(c, pytypes.CodeType))
    for c in outer_code.co_consts:
        if isinstance(c, pytypes.CodeType) and c.co_name == code.co_name:
            if c.co_freevars != code.co_freevars:
                return None
            return c
    return None
