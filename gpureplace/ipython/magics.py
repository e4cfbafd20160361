"""The magics: ``%%cuda`` cells and the reflection line magics."""

from __future__ import annotations

import math
import shlex
import types as pytypes

import numpy as np
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring


def _show(text, language):
    """Highlighted in notebooks (IPython.display.Code), plain text in a terminal."""
    from IPython.display import Code, display
    display(Code(text, language=language))


@magics_class
class GPUReplaceMagics(Magics):

    # -- %%cuda ---------------------------------------------------------------------------------
    @magic_arguments()
    @argument("--context", default=None, help="name of the Context to compile in")
    @argument("--fastmath", action="store_true", help="fast math for these functions")
    @argument("--arch", default=None, help="sm_XX to compile for")
    @argument("--show", choices=("ptx", "llvm", "types"), default=None,
              help="show the code of each specialisation these functions compile")
    @argument("--verbose", action="store_true", help="list the functions the cell defined")
    @cell_magic
    def cuda(self, line, cell):
        """Run the cell as Python; every top-level function it defines becomes a gpureplace
        function: a kernel (``f[blocks, threads](...)``) and a device function for other kernels.
        ``cuda``, ``math`` and ``np`` are available in the cell."""
        from .. import cuda as cuda_ns
        from ..dispatch.context import Context
        from ..kernel import GPUFunction
        args = parse_argstring(self.cuda, line)
        context = Context.named(args.context) if args.context else None
        if args.arch:
            from ..compiler.backend import arch_number
            arch_number(args.arch)
        ns = self.shell.user_ns
        for name, value in (("cuda", cuda_ns), ("math", math), ("np", np)):
            ns.setdefault(name, value)
        before = {k: id(v) for k, v in ns.items()}
        from . import extension
        extension._state["inside_cuda_cell"] = True
        try:
            result = self.shell.run_cell(cell, store_history=False, silent=False)
        finally:
            extension._state.pop("inside_cuda_cell", None)
        if result.error_before_exec or result.error_in_exec:
            return None
        defined = []
        for name, value in list(ns.items()):
            if not isinstance(value, pytypes.FunctionType) or before.get(name) == id(value):
                continue
            if value.__qualname__ != name:
                continue          # nested or aliased: only functions the cell defines at top level
            ns[name] = GPUFunction(value, context=context, fastmath=args.fastmath,
                                   arch=args.arch)
            defined.append(name)
        if args.verbose and defined:
            print(f"gpureplace: defined {', '.join(defined)}")
        if args.show:
            # Each function shows its code whenever it compiles a specialisation (at its first
            # launch with new argument types, or kernel.compile(sig)).
            what = args.show
            for name in defined:
                ns[name].on_compile = (lambda spec, what=what:
                                       _show(_REFLECTORS[what](spec), _LANGUAGE[what]))
        return None

    # -- reflection -----------------------------------------------------------------------------
    def _kernel_and_sig(self, line):
        parts = shlex.split(line)
        if not parts:
            raise ValueError("usage: %cuda_ptx KERNEL [SIGNATURE]")
        obj = self.shell.ev(parts[0])
        sig = " ".join(parts[1:]) or None
        return obj, sig

    def _reflect(self, line, what):
        kernel, sig = self._kernel_and_sig(line)
        method = {"ptx": kernel.inspect_ptx, "llvm": kernel.inspect_llvm,
                  "types": kernel.inspect_types, "sass": kernel.inspect_sass}[what]
        out = method(sig)
        texts = [out] if isinstance(out, str) else list(out.values())
        if not texts:
            print(f"{kernel.__qualname__} has not been compiled yet: launch it, or give a "
                  f"signature such as %cuda_{what} {line.split()[0]} \"void(float32[:])\"")
        for text in texts:
            _show(text, _LANGUAGE[what])

    @line_magic
    def cuda_ptx(self, line):
        """``%cuda_ptx KERNEL [SIGNATURE]``: PTX of the kernel's specialisations."""
        self._reflect(line, "ptx")

    @line_magic
    def cuda_sass(self, line):
        """``%cuda_sass KERNEL [SIGNATURE]``: machine code (ptxas + nvdisasm, no GPU needed)."""
        self._reflect(line, "sass")

    @line_magic
    def cuda_llvm(self, line):
        """``%cuda_llvm KERNEL [SIGNATURE]``: optimised LLVM IR."""
        self._reflect(line, "llvm")

    @line_magic
    def cuda_types(self, line):
        """``%cuda_types KERNEL [SIGNATURE]``: Numba's typed IR of the whole call graph."""
        self._reflect(line, "types")

    @line_magic
    def cuda_deps(self, line):
        """``%cuda_deps KERNEL [SIGNATURE]``: what the kernel depends on, and what changed."""
        kernel, sig = self._kernel_and_sig(line)
        deps = kernel.dependencies(sig)
        tables = [deps] if sig is not None else list(deps.values())
        if not tables:
            print(f"{kernel.__qualname__} has not been compiled yet")
        for table in tables:
            print("functions: " + ", ".join(f.rsplit(".", 1)[-1] for f in table["functions"]))
            for g in table["globals"]:
                state = " (deleted)" if g["deleted"] else " (changed)" if g["changed"] else ""
                print(f"  {g['function'].rsplit('.', 1)[-1]}, line {g['line']}: {g['name']}"
                      f"{state}")
            for o in table["overrides"]:
                print(f"  override: {o['host']} -> {o['impl']} in context {o['context']!r}")

    @line_magic
    def cuda_cache(self, line):
        """``%cuda_cache [stats|clear]``: compile and cache counters, or empty the disk cache."""
        import gpureplace
        from ..tracking import cache
        action = line.strip() or "stats"
        if action == "clear":
            n = cache.clear()
            print(f"gpureplace: removed {n} cached kernel(s) from {cache.directory()}")
        elif action == "stats":
            info = cache.info()
            stats = gpureplace.stats()
            print(", ".join(f"{k} {v}" for k, v in stats.items()))
            print(f"disk cache: {info['entries']} kernel(s), {info['bytes']} bytes in "
                  f"{info['directory']} ({'on' if info['enabled'] else 'off'})")
        else:
            print("usage: %cuda_cache [stats|clear]")


_REFLECTORS = {"ptx": lambda s: s.ptx, "llvm": lambda s: s.llvm_ir,
               "types": lambda s: str(s.compiled.type_annotation)}
_LANGUAGE = {"ptx": "text", "llvm": "llvm", "types": "python", "sass": "text"}
