"""What a ``cuda.jit`` function says about its compiled code: PTX, LLVM IR, types, SASS, the
dispatch report, dependencies, and the driver's attributes of a loaded kernel (numba-cuda's
``inspect_*`` and ``get_*`` methods).  A mixin of ``GPUFunction``."""

from __future__ import annotations

from numba.core import types

from .. import probe
from ..compiler import toolchain
from ..compiler.dispatch_report import dispatch_report
from ..compiler.pipeline import device_ptx
from ..compiler.signature import SignatureParseError, normalize_signature
from ..errors import DeviceFunctionError
from ..runtime import launch
from ..tracking.deps import describe


class Reflection:
    """``inspect_ptx``, ``inspect_llvm``, ``inspect_types``, ``inspect_sass``, ``overloads``,
    ``get_regs_per_thread`` and the rest, over the specialisations ``_select`` gives."""

    def inspect_ptx(self, sig=None):
        """PTX of the specialisation for ``sig``, or ``{argtypes: ptx}`` of all compiled so far
        (for a device function: its PTX on its own, as ``compile_ptx(..., device=True)``)."""
        if self.device:
            return self._reflect(sig, device_ptx)
        return self._reflect(sig, lambda s: s.ptx)

    def inspect_llvm(self, sig=None, *, signature=None):
        sig = signature if signature is not None else sig      # (numba-cuda's keyword)
        if self.device:
            return self._reflect(sig, lambda cf: "\n".join(cf.ir_texts()))
        return self._reflect(sig, lambda s: s.llvm_ir)

    def inspect_types(self, sig=None, file=None, *, signature=None, pretty=False,
                      style="default"):
        """The typed Numba IR of each function of the call graph: returned (a string, or
        ``{argtypes: text}``), or written to ``file``.  numba-cuda's call forms work too:
        ``inspect_types(file)`` (a file as the first argument) and ``signature=``; ``pretty``
        and ``style`` (its HTML rendering) are accepted and give the plain text."""
        if hasattr(sig, "write") and file is None:
            sig, file = None, sig
        if signature is not None:
            sig = signature

        def annotate(s):
            cf = s if self.device else s.compiled
            return "\n".join(f"{each.qualname}{each.argtypes} -> {each.restype}\n"
                             f"{each.type_annotation}" for each in cf.closure())
        out = self._reflect(sig, annotate, disk=False)
        if file is not None:
            print(out if isinstance(out, str) else "\n".join(out.values()), file=file)
            return None
        return out

    def dispatch_report(self, sig=None):
        """Each callable the call graph uses: function, line, context layer, implementation."""
        return self._reflect(sig, lambda s: dispatch_report(s if self.device else s.compiled),
                             disk=False)

    def dependencies(self, sig=None):
        return self._reflect(sig, lambda s: describe(s if self.device else s.compiled))

    def inspect_asm(self, signature=None):
        """numba-cuda's name for the kernel's assembly: its PTX."""
        return self.inspect_ptx(signature)

    def inspect_sass(self, signature=None):
        """The machine code (SASS) of the specialisation for ``signature``, or ``{argtypes:
        sass}`` of all compiled so far: the PTX assembled by ptxas for the specialisation's
        architecture and listed by nvdisasm (from the ``nvidia-cuda-nvcc`` and
        ``nvidia-cuda-nvdisasm`` wheels; no GPU needed)."""
        self._require_kernel("inspect_sass")
        return self._reflect(signature, lambda s: s.inspect_sass())

    @property
    def signatures(self):
        """The argument-type tuples compiled so far (numba-cuda's ``kernel.signatures``)."""
        return list(self.overloads)

    @property
    def overloads(self):
        """``{argument types: specialisation}`` of everything compiled so far (numba-cuda's
        ``kernel.overloads``)."""
        return {argtypes: spec for (argtypes, _), spec in self._specs.items()}

    # The driver's view of a specialisation loaded on the current device (numba-cuda's
    # ``get_regs_per_thread`` and friends): ``signature`` or all compiled ones as a dict.
    def get_regs_per_thread(self, signature=None):
        return self._function_attribute(signature, "num_regs")

    def get_shared_mem_per_block(self, signature=None):
        return self._function_attribute(signature, "shared_size_bytes")

    def get_local_mem_per_thread(self, signature=None):
        return self._function_attribute(signature, "local_size_bytes")

    def get_const_mem_size(self, signature=None):
        return self._function_attribute(signature, "const_size_bytes")

    def get_max_threads_per_block(self, signature=None):
        return self._function_attribute(signature, "max_threads_per_block")

    def _function_attribute(self, signature, name):
        self._require_kernel(f"get_{name}")
        if not probe.available():
            # no GPU (the simulator): what ptxas says of the PTX, for its architecture
            return self._reflect(signature, lambda spec: _assembled(spec, name), single=True)
        launch.require_device()
        dev = probe.current_device()
        launch.ensure_context(dev)

        def read(spec):
            loaded = next((e for (_, d), e in self._launch_cache.items()
                           if d == dev and e.spec is spec), None)
            if loaded is None:
                loaded = launch.LoadedKernel(spec, dev, self._link, self._carveout)
            return int(loaded.attribute(name))
        return self._reflect(signature, read, single=True)

    def _reflect(self, sig, fn, disk=True, single=False):
        specs = self._select(sig, disk)
        if sig is not None or (single and self.specialized and len(specs) == 1):
            # (``single``: a kernel of one signature -- given to cuda.jit, or made by
            # specialize -- answers the driver's questions for it, not with a dict, as
            # numba-cuda's get_regs_per_thread() ...; its inspect_*() give dicts)
            return fn(specs[0])
        return {s.argtypes: fn(s) for s in specs}

    def _require_kernel(self, what):
        if self.device:
            what_of = "Cannot inspect SASS of a device function" if what == "inspect_sass" else \
                f"Cannot ask {what}() of a device function"
            raise DeviceFunctionError(f"{what_of}: {what}() is for kernels; {self.__qualname__} "
                                      f"is a device function (use inspect_llvm)")


def _assembled(spec, name):
    """The driver attribute ``name`` of ``spec`` as ptxas reports it (``toolchain.resources``)."""
    found = toolchain.resources(spec.ptx, spec.name)
    if found is None:
        launch.require_device(
            f"get_{name}", then="; without a GPU these numbers come from NVIDIA's ptxas: pip "
                               "install nvidia-cuda-nvcc")
        raise AssertionError("unreachable")
    return found[name]


def argument_types(fn, sig):
    """The argument types of ``sig``, a signature of ``fn``.  A kernel returns nothing: a
    return type other than void is refused (numba-cuda's "CUDA kernel must have void return
    type"), where a device function's may be any."""
    argtypes, ret = normalize_signature(sig)
    if ret is None or ret == types.none or fn.device:
        return argtypes
    text = sig if isinstance(sig, str) else f"{ret}({', '.join(map(str, argtypes))})"
    start, depth, opening = len(text) - len(text.lstrip()), 0, len(text)
    for i in range(len(text.rstrip()) - 1, -1, -1):      # the "(" of the argument list
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            opening = i
            break
    args = text[opening + 1:len(text.rstrip()) - 1].strip()
    raise SignatureParseError(
        text, start, opening, f"{fn.__qualname__} is a kernel, which returns nothing: its "
        f"signature's return type must be void, not {text[start:opening].strip()}: write "
        f"void({args})")
