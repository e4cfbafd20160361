"""A Numba pass run before typing: constant array shapes written as arithmetic become literals."""

from __future__ import annotations

import operator

from numba.core.compiler_machinery import FunctionPass, register_pass

#: The operators whose integer results a constant shape may use
_INT_OPS = frozenset({operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod,
                      operator.pow, operator.lshift, operator.rshift, operator.and_, operator.or_,
                      operator.xor, operator.neg, operator.pos})


@register_pass(mutates_CFG=False, analysis_only=False)
class FoldArrayShapes(FunctionPass):
    """Shapes of ``cuda.shared.array`` / ``cuda.local.array`` that are constant expressions
    (``(TILE, TILE + 1)``, ``N * 2`` of global constants) become literals before typing.

    Numba types ``TILE + 1`` as a plain int64 even when ``TILE`` is a frozen global (and
    numba-cuda then refuses the shape), while the array needs its shape at compile time.  This
    pass evaluates such an argument (literals, globals, integer operators, tuples of those) and
    replaces it with literals built the way a literal shape is.  Anything it cannot evaluate is
    left for the typing error that explains what a shape must be."""

    _name = "gpureplace_fold_array_shapes"

    def __init__(self):
        FunctionPass.__init__(self)

    @staticmethod
    def _static(func_ir, var, depth=0):
        """The object ``var`` always holds when it is a global (or a chain of attributes of
        one), else None."""
        from numba.core import ir
        try:
            defn = func_ir.get_definition(var)
        except Exception:
            return None
        if isinstance(defn, (ir.Global, ir.FreeVar)):
            return defn.value
        if isinstance(defn, ir.Expr) and defn.op == "getattr" and depth < 8:
            base = FoldArrayShapes._static(func_ir, defn.value, depth + 1)
            return None if base is None else getattr(base, defn.attr, None)
        return None

    @classmethod
    def _constant(cls, func_ir, var, depth=0):
        """The int (or tuple of ints) ``var`` always holds: literals, global constants and the
        integer arithmetic of those; None for anything else.  (Numba's own constant inference
        does not evaluate binary operators.)"""
        from numba.core import ir
        if depth > 32:
            return None
        try:
            defn = func_ir.get_definition(var)
        except Exception:
            return None
        if isinstance(defn, (ir.Const, ir.Global, ir.FreeVar)):
            v = defn.value
            if isinstance(v, tuple) and all(isinstance(x, int) and not isinstance(x, bool)
                                            for x in v):
                return v
            return v if isinstance(v, int) and not isinstance(v, bool) else None
        if not isinstance(defn, ir.Expr):
            return None
        if defn.op == "build_tuple":
            items = [cls._constant(func_ir, item, depth + 1) for item in defn.items]
            return None if any(not isinstance(i, int) for i in items) else tuple(items)
        if defn.op in ("binop", "inplace_binop") and defn.fn in _INT_OPS:
            fn = defn.fn
            lhs = cls._constant(func_ir, defn.lhs, depth + 1)
            rhs = cls._constant(func_ir, defn.rhs, depth + 1)
            if isinstance(lhs, int) and isinstance(rhs, int):
                try:
                    out = fn(lhs, rhs)
                except (ArithmeticError, ValueError):
                    return None
                return out if isinstance(out, int) else None
            return None
        if defn.op == "unary" and defn.fn in _INT_OPS:
            val = cls._constant(func_ir, defn.value, depth + 1)
            return defn.fn(val) if isinstance(val, int) else None
        return None

    def run_pass(self, state):
        from numba.core import ir

        from .intrinsics.memory import ARRAY_STUBS
        func_ir = state.func_ir
        changed = False
        for block in func_ir.blocks.values():
            for stmt in list(block.body):
                if not (isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Expr)
                        and stmt.value.op == "call"):
                    continue
                call = stmt.value
                callee = self._static(func_ir, call.func)
                if not any(callee is stub for stub in ARRAY_STUBS):
                    continue
                shape_var = call.args[0] if call.args else dict(call.kws).get("shape")
                if shape_var is None:
                    continue
                try:
                    if isinstance(func_ir.get_definition(shape_var), ir.Const):
                        continue
                except Exception:
                    continue
                value = self._constant(func_ir, shape_var)
                if not (isinstance(value, int) or isinstance(value, tuple) and value and all(
                        isinstance(v, int) and not isinstance(v, bool) for v in value)) or \
                        isinstance(value, bool):
                    continue
                # Literal ints (a tuple of them built from literals): what Numba types as
                # IntegerLiteral, as it does for a shape written with literals.
                at = block.body.index(stmt)
                new = []

                def assign(name, value_expr):
                    var = ir.Var(block.scope, f"$folded_shape.{id(stmt)}.{name}", stmt.loc)
                    new.append(ir.Assign(value_expr, var, stmt.loc))
                    func_ir._definitions[var.name] = [value_expr]
                    return var

                if isinstance(value, tuple):
                    items = [assign(str(k), ir.Const(v, stmt.loc)) for k, v in enumerate(value)]
                    const = assign("tuple", ir.Expr.build_tuple(items, stmt.loc))
                else:
                    const = assign("int", ir.Const(value, stmt.loc))
                block.body[at:at] = new
                if call.args:
                    call.args = [const] + list(call.args[1:])
                else:
                    call.kws = [(k, const if k == "shape" else v) for k, v in call.kws]
                changed = True
        return changed
