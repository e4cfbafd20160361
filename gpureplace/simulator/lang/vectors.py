"""CUDA vector types in the simulator: ``SimVector`` (a ``cuda.float32x4(...)`` value), the
constructors, and ``SimVectorArray`` (``cuda.as_vectors``, and shared or local arrays of a
vector type)."""

from __future__ import annotations

import numpy as np

from ...compiler.intrinsics import vectors
from ..arrays import to_dtype_value
from .values import value_of


class SimVector:
    """A value of a CUDA vector type (``cuda.float32x4(...)``) in the simulator: its elements
    are the attributes ``x``, ``y``, ``z``, ``w``, of the element type; it cannot be changed."""

    __slots__ = ("vector_type", "_values")

    def __init__(self, vector_type, values):
        object.__setattr__(self, "vector_type", vector_type)
        object.__setattr__(self, "_values", tuple(values))

    def __getattr__(self, name):
        fields = vectors.FIELDS
        if name in fields and fields.index(name) < len(self._values):
            return self._values[fields.index(name)]
        raise AttributeError(f"{self.vector_type.name} has no attribute {name!r}")

    def __setattr__(self, name, value):
        raise AttributeError(f"{self.vector_type.name} values cannot be changed")

    def __repr__(self):
        return f"{self.vector_type.name}({', '.join(str(v) for v in self._values)})"


class SimVectorArray:
    """``cuda.as_vectors(a, n)`` in the simulator: the NumPy array seen as vectors of ``n``
    elements along its last axis (a view: stores reach the array)."""

    __slots__ = ("_a", "vector_type", "_launch", "_writable", "shape", "size", "ndim", "dtype")

    def __init__(self, grouped, vector_type, launch, writable=True):
        self._a = grouped                          # shape (..., n // count, count)
        self.vector_type, self._launch = vector_type, launch
        self._writable = writable and grouped.flags.writeable
        self.shape = grouped.shape[:-1]
        self.size = int(np.prod(self.shape))
        self.ndim = len(self.shape)
        self.dtype = vector_type

    def __len__(self):
        return self.shape[0]

    def _index(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != self.ndim or not all(isinstance(i, (int, np.integer)) for i in idx):
            self._fail(idx, f"index with {self.ndim} integer(s)")
        out = []
        for axis, (i, n) in enumerate(zip(idx, self.shape)):
            i = int(i)
            j = i + n if i < 0 else i
            if not 0 <= j < n:
                self._fail(idx, f"index {i} is out of bounds for axis {axis} with size {n}")
            out.append(j)
        return tuple(out)

    def _fail(self, idx, what):
        from ..arrays import current_place, index_text
        raise IndexError(f"{what}: index {index_text(idx)} of a {self.vector_type.name} array of shape "
                         f"{self.shape}, in {current_place()}, {self._launch.where()}")

    def __getitem__(self, idx):
        row = self._a[self._index(idx)]
        return SimVector(self.vector_type, [row.dtype.type(x) for x in row])

    def __setitem__(self, idx, value):
        if not isinstance(value, SimVector) or value.vector_type is not self.vector_type:
            raise TypeError(f"a {self.vector_type.name} array stores "
                            f"cuda.{self.vector_type.name}(...) values, got {value!r}")
        if not self._writable:
            self._fail(idx, "the array is read-only")
        self._a[self._index(idx)] = value._values


def _vector_constructor(vt):
    dtype = np.dtype(str(vt.element))

    def construct(*args):
        values = []
        for a in args:
            if isinstance(a, SimVector):
                values += a._values
            else:
                values.append(dtype.type(to_dtype_value(value_of(a), dtype)))
        if len(values) != vt.count:     # (the compiler refuses this first)
            raise TypeError(f"cuda.{vt.name}(): needs {vt.count} element(s), got {len(values)}")
        return SimVector(vt, values)
    construct.__name__ = vt.name
    construct.vector_type = vt                 # (also a dtype of shared and local arrays)
    return construct


def table(launch):
    """The vector constructors (new ones for each launch): ``{id(stub): value}``."""
    out = {}
    for stub in set(vectors.constructors.values()):
        out[id(stub)] = _vector_constructor(stub.vector_type)
    return out
