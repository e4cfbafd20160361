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
function whose source cannot be found or no longer matches the code Python loaded (the file was
edited since, and the module not reloaded: ``_same_code``) runs as it is, so that the simulator
always runs what Python loaded.
"""

from __future__ import annotations

import __future__
import ast
import dis
import functools
import inspect
import operator
import re
import sys
import threading
import types as pytypes
import weakref

import numpy as np
from numba.core import types as nbtypes

from ..compiler.constructs import source_lines
from .arrays import DEVICE_VALUE_TYPES, wrap_int
from .valuetypes import class_numba_type, converter, resolved_signature, value_class

#: the global name the rewritten code reads this module under
NAME = "__gpureplace_ops__"

_I64, _U64 = np.dtype(np.int64), np.dtype(np.uint64)
_INT64_MIN = -(1 << 63)
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


_INTS, _COMPLEX = (int, np.integer, bool, np.bool_), frozenset((complex, np.complex64, np.complex128))
#: Numba's messages (numba/cpython/numbers.py): zero divisor (integers, other operands); 0 ** -n
_ZERO = {"truediv": ("division by zero",) * 2, "divmod": ("integer divmod by zero", "modulo by "
         "zero"), "floordiv": ("integer division by zero", "division by zero"),
         "mod": ("integer modulo by zero", "modulo by zero")}
_NEGATIVE_POWER = "0 cannot be raised to a negative power"


def _check_zero(name, a, b):
    """The ZeroDivisionError of Numba's compiled code for ``a <name> b`` by zero: under Python's
    error model (debug=True); for a complex division (CPython's algorithm) under either."""
    if name == "truediv" and (type(a) in _COMPLEX or type(b) in _COMPLEX):
        if b == 0:
            raise ZeroDivisionError("complex division by zero")
    elif python_error_model and b == 0:
        raise ZeroDivisionError(_ZERO[name][not (isinstance(a, _INTS) and isinstance(b, _INTS))])


def _checked(op, name):
    """``op`` raising Numba's ZeroDivisionError for a zero divisor (``_check_zero``)."""
    def apply(a, b):
        if python_error_model or type(a) in _COMPLEX or type(b) in _COMPLEX:
            _check_zero(name, a, b)
        return op(a, b)
    apply.__name__ = op.__name__.strip("_")
    return apply


def _complex_div(a, b):
    """``a / b`` with a complex operand, as Numba's ``complex_div_impl`` (CPython's
    ``_Py_c_quot``) computes it in the operands' type (complex64: in float32), where NumPy's
    division (Smith's, multiplying by a reciprocal) rounds differently: ``cmath.log(z) /
    math.log(2.0)`` would be an ulp off.  A zero divisor has raised already (``_check_zero``)."""
    if type(a) not in _COMPLEX:
        a = np.complex128(a) if type(b) is not np.complex64 or type(a) is not np.float32 \
            else np.complex64(a)
    if type(b) not in _COMPLEX:
        b = np.complex128(b) if type(a) is not np.complex64 or type(b) is not np.float32 \
            else np.complex64(b)
    ctype = np.complex64 if type(a) is np.complex64 and type(b) is np.complex64 else \
        np.complex128
    ftype = np.float32 if ctype is np.complex64 else np.float64
    ar, ai, br, bi = ftype(a.real), ftype(a.imag), ftype(b.real), ftype(b.imag)
    with np.errstate(all="ignore"):
        if abs(br) >= abs(bi):
            ratio = bi / br
            denom = br + bi * ratio
            re, im = (ar + ai * ratio) / denom, (ai - ar * ratio) / denom
        elif abs(bi) >= abs(br):
            ratio = br / bi
            denom = br * ratio + bi
            re, im = (ar * ratio + ai) / denom, (ai * ratio - ar) / denom
        else:                                      # a NaN in b
            re = im = ftype(np.nan)
    return ctype(complex(float(re), float(im)))


def _truediv(a, b):
    if type(a) in _COMPLEX or type(b) in _COMPLEX:
        return _complex_div(a, b)
    return a / b


truediv = _checked(_binary(_truediv), "truediv")
floordiv = _checked(_binary(operator.floordiv), "floordiv")
mod = _checked(_binary(operator.mod), "mod")
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
    """``a ** n`` for a float ``a`` and an integer ``n`` as the compiled code computes it.  A
    float64 follows Numba's int_power: repeated squaring, ``1.0 / r`` for a negative exponent,
    ``math.pow`` beyond 2**16, and Numba's OverflowError for an exponent of INT64_MIN (whose
    negation overflows: the thread stops).  A float32 follows gpureplace's own lowering
    (``compiler/intrinsics/devicemath._make_float_int_power``), which stays in float32: ``1 / r``
    in float32 (the same value as Numba's through float64: a quotient of two float32 rounded
    twice is rounded once), and beyond 2**16 ``powf(a, float32(n))``, the exponent rounded to
    float32 first (an exponent of INT64_MIN, which that lowering's negation leaves negative,
    never ends its loop on the device; here it is powf's value).  Under Python's error model
    (debug=True) the inversion of a zero raises ZeroDivisionError, as the compiled ``1.0 / r``
    does."""
    ft = type(a)
    if ft is np.float32:
        if abs(n) > 0x10000:
            from .hostmath import host_pow
            return host_pow(a, np.float32(n))
    elif n == _INT64_MIN:
        from .raises import device_error
        raise device_error(OverflowError())
    elif abs(n) > 0x10000:
        from .hostmath import host_pow
        return ft(host_pow(np.float64(a), np.float64(n)))
    r = ft(1)
    e = -n if n < 0 else n
    while e:
        if e & 1:
            r = r * a
        e >>= 1
        a = a * a
    if n < 0:
        if python_error_model and r == 0:
            raise ZeroDivisionError(_ZERO["truediv"][1])
        with np.errstate(divide="ignore"):
            return ft(np.float64(1.0) / np.float64(r))
    return r


_cpow = []
_cpow_lock = threading.Lock()


def complex_power(a, b):
    """``a ** b`` of complex numbers as the compiled code computes it (Numba's
    ``complex_power_impl``): an exponent of exactly 2 is ``a * a`` (in a's type); any other
    calls ``numba_cpow`` / ``numba_cpowf``, which gpureplace implements as
    ``compiler/runtime_helpers.complex_pow`` (CPython's ``_Py_c_pow``, in double precision
    for complex64 too) -- not NumPy's complex power, which differs at exact integer powers
    (``1j ** 3``), zero to a complex or NaN power, and infinities.  That function runs here as
    Numba's own CPU compile of it, so that an overflow or a zero is C's inf or NaN as on the
    device, where Python's ``math`` would raise.  The result is a's type for an exponent of 2,
    else a complex128 (the caller converts it to the operation's type)."""
    if b.real == 2 and b.imag == 0:
        return a * a
    if not _cpow:
        import numba
        from numba.core import types as nbt

        from ..compiler.runtime_helpers import complex_pow
        with _cpow_lock:
            if not _cpow:
                _cpow.append(numba.njit(error_model="numpy")(complex_pow).compile(
                    (nbt.complex128, nbt.complex128)))
    return np.complex128(_cpow[0](complex(a), complex(b)))


def pow(a, b):                              # noqa: A001 (the operator's name)
    if type(a) not in DEVICE_VALUE_TYPES or type(b) not in DEVICE_VALUE_TYPES:
        a, b = _operand(a, b), _operand(b, a)
    if type(a) in (np.float32, np.float64) and isinstance(b, np.integer):
        return _float_int_power(a, int(b))
    if type(a) in _COMPLEX or type(b) in _COMPLEX:
        # (without Numba's typing of the operation: complex64 when neither operand is wider,
        # as hostmath's math.pow of complex numbers)
        narrow = all(isinstance(x, (np.complex64, np.float32, np.float16)) for x in (a, b))
        ctype = np.complex64 if narrow else np.complex128
        return ctype(complex_power(ctype(a), ctype(b)))
    if isinstance(a, np.floating) or isinstance(b, np.floating):
        from .hostmath import host_pow
        return host_pow(a, b)                # C's pow, as math.pow and np.power are simulated
    if python_error_model and isinstance(a, np.integer) and isinstance(b, np.integer) and \
            a == 0 and b < 0 and b != _INT64_MIN:   # (Numba's int_power; device integers:
        raise ZeroDivisionError(_NEGATIVE_POWER)    # INT_MIN; INT64_MIN: OverflowError)
    return a ** b


#: ``a ** n`` with an integer literal ``n``: the same computation.  Numba types the literal as
#: an int64 (its ``static_power_impl`` for literal exponents is never chosen), so the compiled
#: code is ``int_power``'s: ``a ** -2`` is 0 unless a is -1, 0 or 1, never the inverse of a
#: wrapped ``a * a``
pow_static = pow


def augitem(name, obj, index, value):
    """``obj[index] <op>= value`` (``name`` the operator's function here), as compiled."""
    obj[index] = globals()[name](obj[index], value)


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
# Numba's typing of each operation (per typing context, per operand classes)

def _neg_core(x):
    return -int(x) if type(x) is bool else -x


def _pos_core(x):
    return int(x) if type(x) is bool else +x


def _invert_core(x):
    return (not x) if type(x) is bool else ~x


def _divmod_core(a, b):
    _check_zero("divmod", a, b)
    return (a // b, a % b)


def _legacy_divmod(a, b):
    return divmod(_operand(a, b), _operand(b, a))


#: name -> (Numba's function, the device computation on operands of the signature's types,
#: the rule for operands Numba's typing does not cover, whether the core is a plain operator)
_BINARY = {
    "add": (operator.add, operator.add, add, True),
    "sub": (operator.sub, operator.sub, sub, True),
    "mul": (operator.mul, operator.mul, mul, True),
    "truediv": (operator.truediv, _checked(_truediv, "truediv"), truediv, False),
    "floordiv": (operator.floordiv, _checked(operator.floordiv, "floordiv"), floordiv, False),
    "mod": (operator.mod, _checked(operator.mod, "mod"), mod, False),
    "lshift": (operator.lshift, operator.lshift, lshift, True),
    "rshift": (operator.rshift, operator.rshift, rshift, True),
    "and_": (operator.and_, operator.and_, and_, True),
    "or_": (operator.or_, operator.or_, or_, True),
    "xor": (operator.xor, operator.xor, xor, True),
    "pow": (operator.pow, pow, pow, False),
    "pow_static": (operator.pow, pow_static, pow_static, False),
    "divmod": (divmod, _divmod_core, _legacy_divmod, False),
}
_UNARY_OPS = {
    "neg": (operator.neg, _neg_core, neg),
    "pos": (operator.pos, _pos_core, pos),
    "invert": (operator.invert, _invert_core, invert),
}


def _result(sig):
    """(class, converter) of the signature's result: each element's for a tuple."""
    ret = sig.return_type
    if isinstance(ret, nbtypes.BaseTuple):
        convs = tuple(converter(t) for t in ret.types)
        return tuple, (lambda r: tuple(c(x) for c, x in zip(convs, r)))
    return value_class(ret), converter(ret)


def _binary_plan(typingctx, fn, core, legacy, plain, a, b):
    """The computation of ``fn(a, b)`` for operands of these classes: both converted to the
    argument types of Numba's signature for their types, computed, the result made its type."""
    ta, tb = class_numba_type(type(a)), class_numba_type(type(b))
    sig = None if ta is None or tb is None else resolved_signature(typingctx, fn, (ta, tb))
    if sig is None:
        return legacy
    ca = None if type(a) is value_class(sig.args[0]) else converter(sig.args[0])
    cb = None if type(b) is value_class(sig.args[1]) else converter(sig.args[1])
    rcls, rconv = _result(sig)
    if plain and ca is None and cb is None:
        try:
            if type(core(a, b)) is rcls:
                return core                   # the operands' own operator computes it
        except Exception:                     # noqa: BLE001 (decided at the call)
            pass

    def typed(x, y):
        if ca is not None:
            x = ca(x)
        if cb is not None:
            y = cb(y)
        r = core(x, y)
        return r if type(r) is rcls else rconv(r)
    return typed


def _unary_plan(typingctx, fn, core, legacy, x):
    t = class_numba_type(type(x))
    sig = None if t is None else resolved_signature(typingctx, fn, (t,))
    if sig is None:
        return legacy
    c = None if type(x) is value_class(sig.args[0]) else converter(sig.args[0])
    rcls, rconv = _result(sig)

    def typed(v):
        if c is not None:
            v = c(v)
        r = core(v)
        return r if type(r) is rcls else rconv(r)
    return typed


def _typed_binary(typingctx, name):
    fn, core, legacy, plain = _BINARY[name]
    plans = {}

    def apply(a, b):
        impl = plans.get((type(a), type(b)))
        if impl is None:
            impl = plans[(type(a), type(b))] = _binary_plan(typingctx, fn, core, legacy, plain,
                                                            a, b)
        return impl(a, b)
    apply.__name__ = name
    return apply


def _typed_unary(typingctx, name):
    fn, core, legacy = _UNARY_OPS[name]
    plans = {}

    def apply(x):
        impl = plans.get(type(x))
        if impl is None:
            impl = plans[type(x)] = _unary_plan(typingctx, fn, core, legacy, x)
        return impl(x)
    apply.__name__ = name
    return apply


def _cast(ty):
    """The conversion of a simulated value to Numba type ``ty`` (``devicecode.convertible``), as
    the compiled code converts it: a number to ``ty`` (an integer wraps), a tuple item by item;
    any other value (a vector, an array in a tuple, the None of an optional) as it is."""
    if isinstance(ty, nbtypes.Optional):
        inner = _cast(ty.type)

        def cast(x):
            return x if x is None else inner(x)
    elif isinstance(ty, nbtypes.BaseTuple):
        from .devicecode import convertible
        items = tuple(_cast(t) if convertible(t) else None for t in ty.types)

        def cast(x):
            if type(x) is not tuple or len(x) != len(items):
                return x
            return tuple(v if c is None else c(v) for c, v in zip(items, x))
    else:
        conv = converter(ty)

        def cast(x):
            return conv(x) if class_numba_type(type(x)) is not None else x
    cast.__name__ = cast_name(ty)
    return cast


#: the names of the conversions to types that are no scalar (a tuple: ``as_Tuple_float64__int64_``)
_CAST_TYPES, _CAST_NAMES = {}, {}
_cast_lock = threading.Lock()


def cast_name(ty):
    """The name, on an ``Ops``, of the conversion to Numba type ``ty`` (``_cast``)."""
    if str(ty) in _SCALAR_TYPES:
        return f"as_{ty}"
    name = _CAST_NAMES.get(ty)
    if name is None:
        with _cast_lock:
            name = "as_" + re.sub(r"\W", "_", str(ty))
            while _CAST_TYPES.get(name, ty) != ty:
                name += "_"
            _CAST_TYPES[name] = ty
            _CAST_NAMES[ty] = name
    return name


class Ops:
    """The operators of simulated device code compiled in one typing context (the object the
    rewritten code reads as ``__gpureplace_ops__``): each takes its result type from Numba's
    typing of the operation for its operands' types, decided once per operand classes."""

    def __init__(self, typingctx):
        for name in _BINARY:
            setattr(self, name, _typed_binary(typingctx, name))
        for name in _UNARY_OPS:
            setattr(self, name, _typed_unary(typingctx, name))
        self.matmul = operator.matmul

    def augitem(self, name, obj, index, value):
        """``obj[index] <op>= value`` (``name`` the operator's attribute), as compiled."""
        obj[index] = getattr(self, name)(obj[index], value)

    def __getattr__(self, name):            # as_float64...: a variable read as Numba types it
        if name.startswith("as_"):
            ty = _SCALAR_TYPES.get(name[3:])
            if ty is None:
                ty = _CAST_TYPES.get(name)
            if ty is not None:
                fn = _cast(ty)
                setattr(self, name, fn)
                return fn
        raise AttributeError(name)


_SCALAR_TYPES = {str(t): t for t in (nbtypes.boolean, nbtypes.float16, *nbtypes.number_domain)}
_ops = weakref.WeakKeyDictionary()
_ops_lock = threading.Lock()


def ops_for(typingctx):
    """The ``Ops`` of ``typingctx`` (made once; None: Python's own rules, as before)."""
    if typingctx is None:
        return sys.modules[__name__]
    with _ops_lock:
        ops = _ops.get(typingctx)
        if ops is None:
            from ..compiler import frontend
            with frontend._lock:
                typingctx.refresh()
            ops = _ops[typingctx] = Ops(typingctx)
    return ops


# ---------------------------------------------------------------------------------------------
# The rewrite

#: the augmented assignments to an element (``a[i] **= v``) computed by this module's function:
#: those whose result a device value's own operator does not always give as compiled
_AUG_ITEM = frozenset(("pow", "truediv", "floordiv", "mod"))
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
    owner = ast.copy_location(ast.Name(id=NAME, ctx=ast.Load()), like)
    func = ast.copy_location(ast.Attribute(value=owner, attr=name, ctx=ast.Load()), like)
    return ast.copy_location(ast.Call(func=func, args=args, keywords=[]), like)


class _Rewriter(ast.NodeTransformer):
    """Operators to calls; an operation on constants only is left alone: CPython folds it when
    it compiles the function (``~True`` is -2 there, a constant Numba types as an int).

    ``plan`` (``devicecode.typing_plan``): ``{(name, line): Numba type}``, the reads of a local
    variable that Numba types otherwise than the value last stored in it may be (``t = x32``,
    then ``t = 0.5`` on one path: t is a float64 where the paths meet), converted to that type;
    ``("<return>", 0)``: the type every return converts its value to; ``("<join>", offset)``:
    the type of the value of a conditional expression or an ``and`` / ``or`` whose paths meet
    at that offset of ``code`` (the function's code as Python loaded it), which Numba converts
    the value of either path to (``a if c else 0.5``: a float64 for an int64 ``a``)."""

    def __init__(self, plan=None, code=None):
        self.plan = plan or {}
        self.joins = {key[1]: ty for key, ty in self.plan.items() if key[0] == "<join>"}
        self.code = code
        self.depth = 0                 # > 0 inside a nested function, lambda or comprehension
        self._positions = None

    def _read(self, node):
        ty = self.plan.get((node.id, node.lineno)) if self.depth == 0 else None
        if ty is None:
            return node
        return _call(cast_name(ty), [node], node)

    def visit_Name(self, node):
        return self._read(node) if isinstance(node.ctx, ast.Load) else node

    def _nested(self, node):
        self.depth += 1
        try:
            return self.generic_visit(node)
        finally:
            self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ListComp = _nested
    visit_SetComp = visit_DictComp = visit_GeneratorExp = _nested

    def visit_Return(self, node):
        self.generic_visit(node)
        ty = self.plan.get(("<return>", 0))
        if ty is not None and node.value is not None and self.depth == 0:
            node.value = _call(cast_name(ty), [node.value], node.value)
        return node

    def _joined(self, node):
        """A conditional expression or an ``and`` / ``or``, converted to the type Numba gives
        the value where its paths meet (where the plan has one for them all: ``_merges``)."""
        self.generic_visit(node)
        if not self.joins or self.depth != 0:
            return node
        tys = {self.joins.get(offset) for offset in self._merges(node)}
        tys.discard(None)
        if len(tys) != 1:
            return node
        return _call(cast_name(tys.pop()), [node], node)

    visit_IfExp = visit_BoolOp = _joined

    def _merges(self, node):
        """The offsets in ``self.code`` where the paths of ``node`` may meet: of each
        instruction that follows one of node's own (its source position inside node's) and is
        not node's own.  (A conditional expression's last instruction is its ``else`` value's,
        an ``and`` / ``or``'s its last operand's: the next takes the value; a condition's
        paths meet nowhere, as no value is left.)  None before Python 3.11, whose code has no
        column positions."""
        if self._positions is None:
            self._positions = [(ins.offset, _span(getattr(ins, "positions", None)))
                               for ins in dis.get_instructions(self.code)]
        lo = (node.lineno, node.col_offset)
        hi = (node.end_lineno, node.end_col_offset)

        def own(span):
            return span is not None and span[0] >= lo and span[1] <= hi
        found = set()
        for (_, span), (offset, after) in zip(self._positions, self._positions[1:]):
            if own(span) and after is not None and not own(after):
                found.add(offset)
        return found

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
        name = _BINOPS[type(node.op)]
        target = node.target
        if isinstance(target, ast.Subscript) and name in _AUG_ITEM and not any(
                isinstance(n, ast.Slice) for n in ast.walk(target.slice)):
            # a[i] **= v: the element is a device value, but a float's or complex number's
            # own ** (and / // % by zero) is NumPy's, not the compiled code's
            call = _call("augitem", [ast.copy_location(ast.Constant(value=name), node),
                                     target.value, target.slice, node.value], node)
            return ast.copy_location(ast.Expr(value=call), node)
        if not isinstance(target, ast.Name):
            return node                           # a[i] += v: the element is a device value
        target = self._read(ast.copy_location(ast.Name(id=node.target.id, ctx=ast.Load()),
                                              node.target))
        value = _call(name, [target, node.value], node)
        return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)


def _span(positions):
    """``((line, column), (end line, end column))`` of an instruction's source positions, or
    None where it has none."""
    if positions is None or None in positions:
        return None
    return (positions.lineno, positions.col_offset), (positions.end_lineno,
                                                      positions.end_col_offset)


_rewritten = {}


def rewrite(pyfunc, plan=None):
    """The code of ``pyfunc`` with its operators calling this module (cached per code object
    and plan, see ``_Rewriter``), or its own code when its source is not available or no longer
    matches it."""
    code = pyfunc.__code__
    # (by file too: code objects compare equal across files, and one exec'd from a string --
    # whose source cannot be read -- must not stand for the same code of a file)
    key = (code, code.co_filename, tuple(sorted(plan.items(), key=str)) if plan else ())
    hit = _rewritten.get(key)
    if hit is None:
        try:
            hit = _rewrite(pyfunc, code, plan)
        except Exception:                        # noqa: BLE001 (any failure: run it as it is)
            hit = None
        hit = _rewritten[key] = hit or code
    return hit


def _rewrite(pyfunc, code, plan):
    if code.co_name == "<lambda>":
        return _rewrite_lambda(code, plan)
    lines, first = source_lines(code)
    fdef = _parse_def(lines, first)
    if not isinstance(fdef, ast.FunctionDef) or fdef.name != code.co_name:
        return None
    original = _compile_nested(fdef, code, first)
    if not _same_code(original, code):
        return None                              # the source changed since it was compiled
    fdef = _parse_def(lines, first)
    rewriter = _Rewriter(plan, code)
    rewriter.depth = -1                          # (the function itself is no nested scope)
    return _compile_nested(rewriter.visit(fdef), code, first)


def _parse_def(lines, first):
    """The one statement of ``lines`` (a function's source, from line ``first`` of its file) as
    an AST with the file's line numbers, or None.  Its text is parsed as it is: an indented
    definition (a method, a function defined in a function) is parsed inside an ``if 1:``
    rather than dedented, which would take the indentation out of its multi-line strings too
    (another constant, and the compiled code no longer the loaded code)."""
    text = "".join(lines)
    indented = text[:1] in (" ", "\t")
    tree = ast.parse("if 1:\n" + text if indented else text)
    body = tree.body[0].body if indented else tree.body
    if len(body) != 1:
        return None
    ast.increment_lineno(tree, first - 1 - indented)
    return body[0]


#: what ``compile`` takes of a code object's flags: its ``from __future__`` imports
_FUTURE_FLAGS = functools.reduce(operator.or_, (
    getattr(__future__, name).compiler_flag for name in __future__.all_feature_names))


def _same_code(compiled, code):
    """Whether ``compiled`` (the function's source as its file reads now, compiled again) is the
    code Python loaded, ``code``: the same bytecode, names, constants (compared by type and
    value, floats to the bit, nested functions', lambdas' and comprehensions' code alike),
    arguments, local, cell and free variables, flags and exception table -- all but the line
    numbers, which an edit elsewhere in the file moves without changing what runs, and the
    flag saying it was compiled inside a function (``_compile_nested`` compiles it in one).
    A file edited since its module was loaded fails this, and the function then runs as
    Python loaded it."""
    if compiled is None or not isinstance(code, pytypes.CodeType):
        return False
    fields = ("co_code", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_name",
              "co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_nlocals",
              "co_exceptiontable")
    if any(getattr(compiled, f, None) != getattr(code, f, None) for f in fields):
        return False
    if compiled.co_flags & ~inspect.CO_NESTED != code.co_flags & ~inspect.CO_NESTED:
        return False
    return len(compiled.co_consts) == len(code.co_consts) and all(
        map(_same_constant, compiled.co_consts, code.co_consts))


def _same_constant(a, b):
    if isinstance(a, pytypes.CodeType) or isinstance(b, pytypes.CodeType):
        return _same_code(a, b)
    if type(a) is tuple and type(b) is tuple:
        return len(a) == len(b) and all(map(_same_constant, a, b))
    return _constant_key(a) == _constant_key(b)


def _constant_key(value):
    """``value`` (a constant of compiled code) as a key equal only for the same constant: by
    type (``1``, ``1.0`` and ``True`` are equal in Python) and, for floats and complex numbers,
    by ``repr`` (``0.0`` and ``-0.0`` are equal, a NaN is not itself)."""
    if isinstance(value, (float, complex)):
        return type(value), repr(value)
    if isinstance(value, (tuple, frozenset)):
        return type(value), type(value)(map(_constant_key, value))
    return type(value), value


def _rewrite_lambda(code, plan):
    """A lambda's code rewritten: the lambda on its first line of its file whose code this is."""
    import linecache
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return None
    tree = ast.parse("".join(lines))
    first = code.co_firstlineno
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and n.lineno == first]
    for i, node in enumerate(found):
        if not _same_code(_compile_nested(node, code, first), code):
            continue
        again = [n for n in ast.walk(ast.parse("".join(lines)))
                 if isinstance(n, ast.Lambda) and n.lineno == first][i]
        rewriter = _Rewriter(plan, code)
        rewriter.depth = -1                      # (the lambda itself is no nested scope)
        again = rewriter.visit(again)
        return _compile_nested(again, code, first)
    return None


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
    if isinstance(fdef, ast.Lambda):
        fdef = ast.Expr(value=fdef)
    else:
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
    # (with the future imports the code was compiled under, and none of this module's)
    compiled = compile(module, code.co_filename, "exec", flags=code.co_flags & _FUTURE_FLAGS,
                       dont_inherit=True)
    outer_code = next(c for c in compiled.co_consts if isinstance(c, pytypes.CodeType))
    for c in outer_code.co_consts:
        if isinstance(c, pytypes.CodeType) and c.co_name == code.co_name:
            if c.co_freevars != code.co_freevars:
                return None
            return c
    return None
