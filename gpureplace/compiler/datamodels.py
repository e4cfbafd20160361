"""The device's data models and debug-information builder, for the target context (target.py).

* **Data models**: Numba's, in a fresh layer (Numba's own manager, which the CPU target uses, is
  not modified), where float16 is a real ``half`` (NVPTX selects f16 arithmetic from sm_53),
  bfloat16 LLVM's ``bfloat`` and an 8-bit float its byte; a type registered nowhere takes the
  model of its nearest registered base class.
* **Debug information** (``debug=True``): Numba's builder, as NVPTX and ptxas take it.
"""

from __future__ import annotations

import collections

from llvmlite import ir
from numba.core import datamodel, debuginfo, types

from .bfloat16 import BFloat16, BFloatType
from .fp8 import FP8

__all__ = ["data_models", "NARROW_FLOATS", "GPUDIBuilder"]

class _FloatModel(datamodel.models.PrimitiveModel):
    """float16 is a real ``half`` on the device (NVPTX selects f16 arithmetic from sm_53),
    bfloat16 LLVM's ``bfloat`` (compiler/bfloat16.py)."""

    _BE = {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}

    def __init__(self, dmm, fe_type):
        be = BFloatType() if isinstance(fe_type, BFloat16) else self._BE[fe_type.bitwidth]
        super().__init__(dmm, fe_type, be)


class GPUDataModels(datamodel.DataModelManager):
    """Numba's lookup by the type's exact class, falling back to its nearest registered base
    class: a ``types.Dummy`` of the kernel language (``cuda.threadIdx``'s type) is opaque.  Every
    value then has a model, also where ``debug=True`` describes each variable to the debugger."""

    def registered(self, cls):
        """The model registered for exactly the type class ``cls`` (not a base), or None."""
        return self._handlers.get(cls)

    def lookup(self, fetype):
        try:
            return super().lookup(fetype)
        except KeyError:
            for base in type(fetype).__mro__[1:]:
                handler = self._handlers.get(base)
                if handler is not None:
                    model = self._cache[fetype] = handler(self, fetype)
                    return model
            raise


def user_value_size(fetype):
    """Bytes of one ``fetype`` in memory when it is a type of the extension API whose registered
    data model holds the value in place (a ``StructModel`` of its members, a
    ``PrimitiveModel``): such types are array elements, as in numba-cuda.  None otherwise."""
    handler = data_models.registered(type(fetype))
    if handler is None:
        return None
    model = data_models.lookup(fetype)
    if not isinstance(model, (datamodel.models.StructModel, datamodel.models.PrimitiveModel)) \
            or isinstance(model, datamodel.models.OpaqueModel):
        return None
    from .backend import target_data
    return model.get_data_type().get_abi_size(target_data())


#: Numba's default data models, plus the device's (a fresh layer in front: Numba's own manager,
#: which the CPU target uses, is not modified).
data_models = GPUDataModels(collections.ChainMap({}, datamodel.default_manager._handlers))
data_models.register(types.Float, _FloatModel)
data_models.register(BFloat16, _FloatModel)
data_models.register(FP8, lambda dmm, fe: datamodel.models.PrimitiveModel(dmm, fe, ir.IntType(8)))


NARROW_FLOATS = (ir.HalfType, BFloatType)


class GPUDIBuilder(debuginfo.DIBuilder):
    """Numba's debug information (``debug=True``: variables and their types, for cuda-gdb), as
    NVPTX and ptxas take it: no name tables (one ``.debug_pubnames`` per compile unit would
    overlap when the kernel's modules are linked, which ptxas refuses); booleans are DWARF
    booleans, float16 and bfloat16 16-bit floats."""

    def _var_type(self, lltype, size, datamodel=None):
        fe = getattr(datamodel, "fe_type", None)
        if isinstance(fe, types.Boolean):
            name, encoding = "bool", "DW_ATE_boolean"
        elif isinstance(lltype, NARROW_FLOATS):
            name, encoding = str(fe or lltype), "DW_ATE_float"
        else:
            return super()._var_type(lltype, size, datamodel)
        return self.module.add_debug_info("DIBasicType", {
            "name": name, "size": 8 * size, "encoding": ir.DIToken(encoding)})

    def _di_compile_unit(self):
        unit = super()._di_compile_unit()
        unit.operands = tuple(unit.operands) + (("nameTableKind", ir.DIToken("None")),)
        return unit
