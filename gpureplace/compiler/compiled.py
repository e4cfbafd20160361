"""What the front end produces: ``CompiledFunction`` (one Python function typed and lowered for
one argument-type tuple in one context, with the records redefinition tracking reads) and the
``Options`` that change generated code."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from ..tracking import world
from .records import GlobalRead


@dataclass(frozen=True)
class Options:
    """Compile options that change generated code (part of every cache key)."""
    fastmath: bool = False
    arch: str = "sm_90"
    opt: int = 3
    lineinfo: bool = False
    #: ``cuda.jit(debug=True)``: exceptions raised in device code (``raise``, a division by
    #: zero, a tuple index out of range) stop the thread and are raised on the host after the
    #: launch, with the thread, block and line (``compiler/exceptions.py``).
    debug: bool = False
    #: Kernel entry directives (``cuda.jit(max_registers=, launch_bounds=)``): they change only
    #: the kernel's own PTX, so device functions compile without them (``for_device``).
    max_registers: int = 0
    launch_bounds: tuple = ()

    def for_device(self):
        if not (self.max_registers or self.launch_bounds):
            return self
        return dataclasses.replace(self, max_registers=0, launch_bounds=())


_serials = itertools.count()


class CompiledFunction:
    """One Python function compiled for one argument-type tuple in one context."""

    def __init__(self, pyfunc, context, argtypes, options):
        self.serial = next(_serials)       # never reused (an id() is, once it is freed)
        self.pyfunc = pyfunc
        self.context = context
        self.argtypes = tuple(argtypes)
        self.options = options
        self.restype = None
        self.declared_restype = None    # the return type a given signature declares
        self.fndesc = None
        self.library = None
        self.type_annotation = None
        self.global_reads: list[GlobalRead] = []
        self.overrides_used = []     # (host, Override) that lowering used
        self.resolutions = []        # (host, start layer, Override or None) looked up in typing
        self.born = world.age         # world age its compile started at
        self.checked_age = -1        # world age at which the records were last found valid
        self.world = -1              # same, for device functions used as specialisations
        self.callees: list[CompiledFunction] = []
        self.bad_calls = []        # (symbol, loc) left by lowering that the device cannot run
        self.mask = {}             # the override mask it was compiled under (resolve.Frame)
        self.self_call_restypes = []   # return types its calls of itself were typed with
        self.lowering_fndesc = None    # its descriptor while it is lowered (calls of itself)
        self.typing_self_call = False  # Numba is re-typing it to find a self-call's type
        self.exception_codes = set()   # status codes its lowering returns for raised exceptions
        self.constant_range_trips = []  # step counts of its loops over constant-bound ranges
        #: the parameters it writes, directly or through a callee: {index: (record field or
        #: None, line, functions down to the write)}; a caller may not pass them a host
        #: constant (compiler/constant_writes.py)
        self.written_params = {}
        self._ir_texts = None

    def ir_texts(self):
        """LLVM IR text of each lowered module (computed once; linking parses fresh copies).
        The lowered modules themselves (llvmlite's objects: some 240 KiB and 2,500 objects for
        a small kernel, three quarters of what a kept compile held) are let go once their text
        is taken: nothing reads them after."""
        if self._ir_texts is None:
            from .backend import exact_remainders
            self._ir_texts = [exact_remainders(str(m)) for m in self.library.modules]
            self.library.modules = []
        return self._ir_texts

    @property
    def mangled_name(self):
        return self.fndesc.mangled_name

    @property
    def qualname(self):
        return f"{self.pyfunc.__module__}.{self.pyfunc.__qualname__}"

    def closure(self):
        """This function and every device function it calls, transitively, each once."""
        out, seen, stack = [], set(), [self]
        while stack:
            cf = stack.pop()
            if id(cf) in seen:
                continue
            seen.add(id(cf))
            out.append(cf)
            stack.extend(cf.callees)
        return out

    def __repr__(self):
        args = ", ".join(str(a) for a in self.argtypes)
        return f"<CompiledFunction {self.qualname}({args}) in {self.context.name!r}>"
