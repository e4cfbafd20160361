"""``gpureplace.cuda.types``: numba-cuda's ``numba.cuda.types``, so that ``from numba.cuda import
types`` (and ``import numba.cuda.types``) ports by changing the import.

It holds Numba's types, as numba-cuda's module does (``types.float32``, ``types.int64[:]``,
``types.Array``, ``types.void(...)``, ``types.UniTuple`` ...; they are the same objects the
compiler types with), with the GPU's own: ``bfloat16`` and the cooperative-group type
``grid_group`` / ``GridGroup``."""

# ruff: noqa: F401, F403  (this module is a namespace: every import is an export)

from numba.core import types as _numba_types
from numba.core.types import *
from numba.core.types import bool as bool  # noqa: PLC0414 (numba-cuda's ``types.bool``)

# every public name of Numba's module, not only those its ``__all__`` exports (``signed_domain``,
# ``number_domain``, ``integer_domain`` ... that numba-cuda's module has too)
globals().update({_k: _v for _k, _v in vars(_numba_types).items()
                  if not _k.startswith("_") and _k not in globals()})
from numba.core.types import (Array, Boolean, Complex, Float, Integer, NoneType, Number, Record,
                              Tuple, Type, UniTuple, float16, none, void)

from .compiler.bfloat16 import BFloat16, bfloat16
from .compiler.intrinsics.cg import GridGroupType as GridGroup
from .compiler.intrinsics.cg import grid_group

import sys as _sys

# ``import gpureplace.cuda.types`` and ``from gpureplace.cuda.types import float32``, as numba-cuda's
_sys.modules.setdefault("gpureplace.cuda.types", _sys.modules[__name__])
