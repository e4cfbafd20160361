"""Fills the built-in context: math, NumPy ufuncs and builtins -> device math (libdevice).

Importing this module is what makes ``builtin_context`` mean something; the compiler's pipeline
imports it, so no compile can see an empty table.
"""

from ..dispatch.context import builtin_context
from .intrinsics.devicemath import builtin_table

from .intrinsics.ufunc_scalars import (array_table, complex_table, numeric_table,  # noqa: E402
                                       numeric_untyped)

builtin_context.preload({**builtin_table(), **array_table(), **numeric_untyped()},
                        typed={**complex_table(), **numeric_table()})
