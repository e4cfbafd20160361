"""CUDA's vector types, as numba-cuda offers them: ``cuda.float32x4(1, 2, 3, 4).w`` in device code.

Ten element types (``int8`` ... ``uint64``, ``float32``, ``float64``) with 1 to 4 elements named
``x``, ``y``, ``z``, ``w``: ``cuda.int32x2``, ``cuda.float64x3`` and so on, also under CUDA C's
names (``cuda.float4``, ``cuda.int2``, ``cuda.double3``, ``cuda.uchar4``...).  A constructor takes
scalars and smaller vectors of the same element type in any combination that adds up to its
length (``float32x4(float32x2(a, b), c, d)``); scalars convert to the element type.  The elements
are read as attributes; values are immutable, and pass to and return from device functions.
"""

from __future__ import annotations

import itertools

import numpy as np
from numba.core import cgutils, types
from numba.core.datamodel import models, register_default
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import AbstractTemplate, AttributeTemplate, Registry, signature

from .stubs import IntrinsicArgumentError, Stub

typing = Registry()
lowering = LoweringRegistry()

ELEMENT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float32", "float64")
FIELDS = ("x", "y", "z", "w")
#: CUDA C's names, for this platform's C types (numba-cuda's rule: long is NumPy's int_)
C_NAMES = {"char": np.byte, "short": np.short, "int": np.intc, "long": np.int_,
           "longlong": np.longlong, "uchar": np.ubyte, "ushort": np.ushort, "uint": np.uintc,
           "ulong": np.uint, "ulonglong": np.ulonglong, "float": np.single, "double": np.double}


class VectorType(types.Type):
    """The Numba type of one vector type, such as ``float32x4``."""

    def __init__(self, element, count):
        self.element = element
        self.count = count
        self.fields = FIELDS[:count]
        super().__init__(name=f"{element}x{count}")

    @property
    def alignment(self):
        """Bytes an array of these vectors is aligned to (what the launch checks and the
        compiler assumes): the vector's size when that is a power of two, at most 16 (CUDA C's
        float4 rule); else (3 elements) the element's."""
        item = self.element.bitwidth // 8
        size = item * self.count
        return min(size, 16) if size & (size - 1) == 0 else item

    # numba-cuda's attribute names for the same things
    @property
    def base_type(self):
        return self.element

    @property
    def attr_names(self):
        return self.fields

    @property
    def num_elements(self):
        return self.count


@register_default(VectorType)
class _VectorModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [(f, fe_type.element) for f in fe_type.fields])


class VectorStub(Stub):
    """``cuda.float32x4`` and its kind: a constructor in device code."""

    def __init__(self, vtype):
        super().__init__(vtype.name, f"{vtype.name}({', '.join(vtype.fields)}): a vector of "
                                     f"{vtype.count} {vtype.element} (in device code)")
        self.vector_type = vtype
        self.aliases = []

    # numba-cuda's: vector_types[name].user_facing_object
    @property
    def user_facing_object(self):
        return self


#: name -> VectorType, for every element type and length
vector_types = {}
#: name (and CUDA C name) -> the constructor stub
constructors = {}

for _element, _count in itertools.product(ELEMENT_TYPES, range(1, 5)):
    _vt = VectorType(getattr(types, _element), _count)
    _vt.user_facing_object = VectorStub(_vt)
    vector_types[_vt.name] = _vt
    constructors[_vt.name] = _vt.user_facing_object
for _c_name, _np_type in C_NAMES.items():
    _element = np.dtype(_np_type).name
    for _count in range(1, 5):
        _stub = constructors[f"{_element}x{_count}"]
        _stub.aliases.append(f"{_c_name}{_count}")
        constructors[f"{_c_name}{_count}"] = _stub

__all__ = sorted(constructors)
globals().update(constructors)


def _fail(vt, msg):
    raise IntrinsicArgumentError(f"cuda.{vt.name}(): {msg}")


def _constructor_template(vt):
    class _Constructor(AbstractTemplate):
        key = vt.user_facing_object

        def generic(self, args, kws):
            if kws:
                _fail(vt, f"takes positional arguments only, got {', '.join(kws)}=")
            n = 0
            for a in args:
                a = types.unliteral(a)
                if isinstance(a, VectorType):
                    if a.element != vt.element:
                        _fail(vt, f"a vector argument must have {vt.element} elements, got {a}")
                    n += a.count
                elif isinstance(a, (types.Integer, types.Float, types.Boolean)):
                    n += 1
                else:
                    _fail(vt, f"takes {vt.element} scalars and {vt.element} vectors, got {a}")
            if n != vt.count:
                _fail(vt, f"needs {vt.count} element(s) in all, got {n} from "
                          f"({', '.join(str(types.unliteral(a)) for a in args)})")
            return signature(vt, *[types.unliteral(a) for a in args])
    _Constructor.__name__ = f"_Construct_{vt.name}"
    return _Constructor


@typing.register_attr
class _VectorAttributes(AttributeTemplate):
    key = VectorType

    def generic_resolve(self, vt, attr):
        if attr in vt.fields:
            return vt.element
        return None


for _vt in vector_types.values():
    typing.register_global(_vt.user_facing_object,
                           types.Function(_constructor_template(_vt)))


def _construct(context, builder, sig, args):
    vt = sig.return_type
    values = []
    for ty, value in zip(sig.args, args):
        if isinstance(ty, VectorType):
            part = cgutils.create_struct_proxy(ty)(context, builder, value=value)
            values += [getattr(part, f) for f in ty.fields]
        else:
            values.append(context.cast(builder, value, ty, vt.element))
    out = cgutils.create_struct_proxy(vt)(context, builder)
    for field, value in zip(vt.fields, values):
        setattr(out, field, value)
    return out._getvalue()


for _vt in vector_types.values():
    lowering.lower(_vt.user_facing_object, types.VarArg(types.Any))(_construct)


@lowering.lower_getattr_generic(VectorType)
def _field(context, builder, vt, value, attr):
    return getattr(cgutils.create_struct_proxy(vt)(context, builder, value=value), attr)


@lowering.lower_setattr_generic(VectorType)
def _no_store(context, builder, sig, args, attr):
    vt = sig.args[0]
    raise IntrinsicArgumentError(
        f"{vt.name} values cannot be changed (v.{attr} = ...): build a new one, such as "
        f"cuda.{vt.name}({', '.join('new' if f == attr else 'v.' + f for f in vt.fields)})")


del _element, _count, _vt, _c_name, _np_type, _stub
