"""The code library of one compiled function: its LLVM IR modules and the libraries it calls into.

Numba's lowering asks its library for an empty module, lowers into it, hands it back with
``add_ir_module``, and announces callees with ``add_linking_library``.  A kernel is finalised by
walking these links (see ``pipeline.compile_kernel``).
"""

from __future__ import annotations


class GPULibrary:
    def __init__(self, codegen, name):
        self.codegen = codegen
        self.name = name
        self.modules = []           # llvmlite.ir.Module, as lowered
        self.linked = []            # GPULibrary of each callee
        self._reload_init = set()   # Numba's lowering touches this; unused here

    def create_ir_module(self, name):
        return self.codegen._create_empty_module(name)

    def add_ir_module(self, mod):
        self.modules.append(mod)

    def add_linking_library(self, lib):
        if lib is not self and all(lib is not seen for seen in self.linked):
            self.linked.append(lib)

    def enable_object_caching(self):
        pass
