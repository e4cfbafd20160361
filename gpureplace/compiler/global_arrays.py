"""Device arrays read as globals: the Numba type a kernel sees for a CuPy / PyTorch / mapped array
that a kernel names as a global instead of taking as an argument (``target.resolve_value_type``
asks ``device_array_type``); the code reads it where it lives, as numba-cuda does."""

from __future__ import annotations

import numpy as np
from numba.core import types

from . import abi
from .datamodels import data_models


def cai_dtype(cai):
    """The NumPy dtype a ``__cuda_array_interface__`` describes (a record's from its descr)."""
    descr = cai.get("descr")
    if descr and len(descr) > 1 or descr and descr[0][0]:
        return np.dtype(descr)
    return np.dtype(cai["typestr"])


def device_array_type(val):
    """The Numba type of a device array captured as a global (read-only if its interface says
    so); its layout from its strides."""
    from numba.np import numpy_support
    cai = val.__cuda_array_interface__
    dt = cai_dtype(cai)
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    layout = "C" if strides is None else abi.layout_of(shape, strides, dt.itemsize)
    readonly = bool(cai["data"][1])
    return DeviceGlobalArray(numpy_support.from_dtype(dt), len(shape), layout, readonly=readonly)


class DeviceGlobalArray(types.Array):
    """A device array read as a global: writable unless its interface says it is read-only
    (Numba makes every global array read-only, as a host array's contents are compiled in;
    a device array is used where it is, as numba-cuda does)."""

    def __init__(self, dtype, ndim, layout, readonly=False, **kwargs):
        self.device_readonly = readonly
        super().__init__(dtype, ndim, layout, readonly=readonly, **kwargs)
        self.name = f"device global {self.name}"

    def copy(self, dtype=None, ndim=None, layout=None, readonly=None, **kwargs):
        if readonly is not None and readonly != self.device_readonly and not \
                (dtype is None and ndim is None and layout is None and not kwargs):
            return super().copy(dtype, ndim, layout, readonly, **kwargs)
        return DeviceGlobalArray(self.dtype if dtype is None else dtype,
                                 self.ndim if ndim is None else ndim,
                                 self.layout if layout is None else layout,
                                 readonly=self.device_readonly)


def _register_device_global_arrays():
    from numba.core.datamodel import models
    data_models.register(DeviceGlobalArray, models.ArrayModel)


_register_device_global_arrays()
