"""What a ``cuda.jit`` function says about its compiled code: PTX, LLVM IR, types, SASS, the
dispatch report, dependencies, and the driver's attributes of a loaded kernel (numba-cuda's
``inspect_*`` and ``get_*`` methods).  A mixin of ``GPUFunction``.

A function may hold several specialisations of the same argument types, compiled under other
options (``%config GPUReplace.fastmath``, ``arch``, ``kernel.compile(sig, arch=...)``).  The
``{argtypes: ...}`` answers give, for each argument types, the specialisation of the options a
launch uses now where there is one (``_launch_options``), the most recently compiled otherwise;
``inspect_all`` lists every one with its options.

A device function's answers include what the kernels calling it compiled of it; so do a
kernel's where kernels call it as a device function (a ``%%cuda`` cell's helper is a kernel
and a device function both): its compiles as a device function are listed with its own, and a
signature with a return type asks for them (a kernel that nothing calls refuses one, as
numba-cuda's kernels do).  What only a kernel has (SASS, the driver's attributes) leaves them
out."""

from __future__ import annotations

import sys
from typing import NamedTuple

from numba.core import types
from numba.core.typing import signature as numba_signature

from .. import probe
from ..compiler import frontend
from ..compiler.compiled import CompiledFunction, Options
from ..compiler.dispatch_report import DispatchReports, dispatch_report
from ..compiler.pipeline import device_ptx
from ..compiler.signature import SignatureParseError, normalize_signature
from ..config import settings
from ..errors import CompileError, DeviceFunctionError
from ..runtime import launch
from ..tracking.deps import describe
from . import definitions


class Variant(NamedTuple):
    """One compiled specialisation as ``inspect_all`` lists it."""
    argtypes: tuple
    options: Options
    #: compiled with the options a launch uses now: what a launch of these types runs
    current: bool
    #: the specialisation (``_compiled_variants``), or its code (``inspect_all``)
    value: object

    @property
    def text(self):
        """The code ``inspect_all`` listed (``value``), under the name its documentation and
        the README give it."""
        return self.value


class Reflection:
    """``inspect_ptx``, ``inspect_llvm``, ``inspect_types``, ``inspect_sass``, ``overloads``,
    ``get_regs_per_thread`` and the rest, over the specialisations ``_compiled_variants`` gives."""

    def inspect_ptx(self, sig=None):
        """PTX of the specialisation for ``sig``, or ``{argtypes: ptx}`` of all compiled so far
        (for a device function: its PTX on its own, as ``compile_ptx(..., device=True)``)."""
        return self._reflect(sig, *self._reader("ptx"))

    def inspect_llvm(self, sig=None, *, signature=None):
        sig = signature if signature is not None else sig      # (numba-cuda's keyword)
        return self._reflect(sig, *self._reader("llvm"))

    def inspect_types(self, sig=None, file=None, *, signature=None, pretty=False,
                      style="default"):
        """The typed Numba IR of each function of the call graph, written to ``file`` or, as
        numba-cuda's, to standard output; without ``file`` it is also returned (a string for
        ``sig``, else ``{argtypes: text}``, as the README documents), marked as shown so that
        IPython does not show it a second time.  numba-cuda's call forms work too:
        ``inspect_types(file)`` (a file as the first argument) and ``signature=``; ``pretty``
        and ``style`` (its HTML rendering) are accepted and give the plain text."""
        if hasattr(sig, "write") and file is None:
            sig, file = None, sig
        if signature is not None:
            sig = signature
        out = self._reflect(sig, *self._reader("types"))
        text = out if isinstance(out, str) else "\n".join(out.values())
        if text:                                  # (nothing compiled: nothing printed)
            print(text, file=sys.stdout if file is None else file)
        if file is not None:
            return None
        return _ShownText(out) if isinstance(out, str) else _Shown(out)

    def inspect_all(self, what="ptx", sig=None):
        """Every specialisation compiled so far (with ``sig``: those of its argument types, the
        one of the current options compiled if need be) as ``Variant(argtypes, options,
        current, text)``, ``what`` being ``"ptx"``, ``"llvm"``, ``"types"``, ``"sass"`` or
        ``"sass_cfg"``.
        Unlike the ``{argtypes: ...}`` of ``inspect_ptx()``, it keeps the specialisations of
        the same argument types compiled under other options (``fastmath``, ``arch``):
        ``current`` marks the one of the options a launch uses now, listed first among its
        argument types."""
        fn, disk = self._reader(what)
        return [v._replace(value=fn(self._front_ended(v, disk).value))
                for v in self._compiled_variants(sig, disk, calls=what not in _KERNEL_ONLY)]

    def _reader(self, what):
        """(the code ``what`` of one specialisation -- a kernel's, or a device function's
        compiled function --, whether a disk-loaded one has it)."""
        if what == "ptx":
            return _either(device_ptx, _ptx), True
        if what == "llvm":
            return _either(_device_llvm, _llvm), True
        if what == "types":
            return _either(_annotated, _annotated_kernel), False
        if what == "sass":
            self._require_kernel("inspect_sass")
            return _sass, True
        if what == "sass_cfg":
            self._require_kernel("inspect_sass_cfg")
            return _sass_cfg, True
        raise ValueError(f"inspect_all(what={what!r}): what is 'ptx', 'llvm', 'types', 'sass' "
                         f"or 'sass_cfg'")

    def dispatch_report(self, sig=None):
        """Each callable the call graph uses: function, line, context layer, implementation."""
        out = self._reflect(sig, lambda s: dispatch_report(_code(s)), disk=False)
        return out if sig is not None else DispatchReports(out)     # (shown as tables)

    def dependencies(self, sig=None):
        # (without a signature, what each specialisation compiled so far read, not revalidated
        # first: ``%cuda_deps`` marks what changed since, which its next launch recompiles for)
        return self._reflect(sig, lambda s: describe(_code(s)), current=False)

    def inspect_asm(self, signature=None):
        """numba-cuda's name for the kernel's assembly: its PTX."""
        return self.inspect_ptx(signature)

    def inspect_sass(self, signature=None):
        """The machine code (SASS) of the specialisation for ``signature``, or ``{argtypes:
        sass}`` of all compiled so far: the PTX assembled by ptxas for the specialisation's
        architecture and listed by nvdisasm (from the ``nvidia-cuda-nvcc`` and
        ``nvidia-cuda-nvdisasm`` wheels; no GPU needed)."""
        return self._reflect(signature, *self._reader("sass"), calls=False)

    def inspect_sass_cfg(self, signature=None):
        """The control-flow graph of the SASS of the specialisation for ``signature`` in DOT
        (``nvdisasm -cfg`` of the PTX assembled by ptxas, from NVIDIA's wheels; no GPU needed),
        or ``{argtypes: cfg}`` of all compiled so far, as numba-cuda's."""
        return self._reflect(signature, *self._reader("sass_cfg"), calls=False)

    @property
    def signatures(self):
        """The argument-type tuples compiled so far (numba-cuda's ``kernel.signatures``)."""
        return list(self.overloads)

    @property
    def nopython_signatures(self):
        """numba-cuda's: the Numba signature (``restype(argtypes)``) of each compiled
        specialisation: ``none(...)`` for a kernel, a device function's return type for it."""
        return [numba_signature(cf.restype if isinstance(cf, CompiledFunction) else types.none,
                                *argtypes)
                for argtypes, cf in self.overloads.items()]

    @property
    def targetoptions(self):
        """numba-cuda's ``targetoptions``: the options given to ``cuda.jit``, under its
        names (a copy: changing it changes nothing)."""
        return {"device": self.device, "debug": self._debug, "lineinfo": self._lineinfo,
                "link": list(self._link), "opt": self._opt > 0, "fastmath": self._fastmath,
                "extensions": list(self._extensions), "max_registers": self._max_registers,
                "launch_bounds": self._launch_bounds or None,
                "shared_memory_carveout": self._carveout}

    def get_metadata(self, signature=None):
        """numba-cuda's: what the compile of the specialisation for ``signature`` recorded
        (``{argtypes: metadata}`` of all compiled so far): its options, and for a kernel
        whether it came from the disk cache, its compile time and whether it was compiled for
        its launch's configuration."""
        return self._reflect(signature, _metadata)

    @property
    def overloads(self):
        """``{argument types: specialisation}`` of everything compiled so far (numba-cuda's
        ``kernel.overloads``): for argument types compiled under several options, the
        specialisation of the current ones (``_reflect``).  A device function's include what
        kernels and device functions calling it compiled (``_reached_variants``), and so do a
        kernel's that kernels call (its compiled functions as a device function)."""
        return self._by_argtypes(self._compiled_variants(), lambda v: v.value)

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
        what = launch.RESOURCE_METHODS.get(name, name)
        self._require_kernel(what)
        if not probe.available():
            return self._reflect(signature, lambda spec: spec.resource(name, what), single=True,
                                 calls=False)
        dev = probe.current_device()

        def read(spec):
            # (the module a launch on this device loaded answers: no second load of it)
            loaded = next((e for (_, d), e in list(self._launch_cache.items())
                           if d == dev and e.spec is spec), None)
            if loaded is None:
                return spec.resource(name, what)
            return int(loaded.attribute(name))
        return self._reflect(signature, read, single=True, calls=False)

    def _reflect(self, sig, fn, disk=True, single=False, calls=True, current=True):
        """``fn`` of the specialisation for ``sig``, or ``{argtypes: ...}`` of all compiled so
        far (``calls``: a kernel's compiles as a device function too; ``current``: see
        ``_compiled_variants``)."""
        if sig is not None:
            return fn(self._compiled_variants(sig, disk, calls)[0].value)
        out = self._by_argtypes(self._compiled_variants(None, disk, calls, current),
                                lambda v: fn(self._front_ended(v, disk).value))
        if single and self.specialized and len(out) == 1:
            # (a kernel of one signature -- given to cuda.jit, or made by specialize -- answers
            # the driver's questions for it, not with a dict, as numba-cuda's
            # get_regs_per_thread() ...; its inspect_*() give dicts)
            return next(iter(out.values()))
        return out

    @staticmethod
    def _by_argtypes(variants, fn):
        """``{argtypes: fn(variant)}``, of the variant of the current options where the
        argument types have one, else of the most recently compiled (the last listed)."""
        chosen = {}
        for v in variants:
            if v.argtypes not in chosen or not chosen[v.argtypes].current:
                chosen[v.argtypes] = v
        return {argtypes: fn(v) for argtypes, v in chosen.items()}

    def _front_ended(self, variant, disk):
        """``variant``, its specialisation compiled again where it was loaded from the disk
        cache and ``disk`` is False: what needs the front end's results (typed IR)."""
        if disk or not getattr(variant.value, "from_disk", False):
            return variant
        return variant._replace(value=self._specialize(variant.argtypes, variant.options,
                                                       disk=False))

    def _launch_options(self):
        """The options a launch compiles with now: ``options()``, for the GPU's architecture
        where launches go to a GPU (jit/launching.py's ``_prepare``)."""
        arch = None
        if settings.backend != "simulator" and probe.available():
            arch = probe.arch_of(probe.current_device())
        return self.options(arch)

    def _compiled_variants(self, sig=None, disk=True, calls=True, current=True):
        """``Variant(argtypes, options, current, specialisation)`` of each specialisation
        compiled so far, by argument types in the order first compiled, the current options'
        first and the others in the order compiled.  With ``sig``: those of its argument types,
        the current options' compiled (or revalidated) first, ``disk=False`` compiling it again
        if it was loaded from the disk cache (``_front_ended`` does the others).  ``calls``: a
        kernel's compiles as a device function, made by the kernels that call it, too (and a
        signature with a return type asks for those: ``_called_variants``); without it, its
        kernel specialisations alone.  Without ``sig``, those of the current options are
        revalidated first (recompiled if a dependency changed), as a launch would, unless
        ``current`` is false."""
        now = self._launch_options()
        if sig is not None:
            called = self._called_variants(sig, now) if calls and not self.device else None
            if called is not None:
                return called
            argtypes = argument_types(self, sig)
            first = self._specialize(argtypes, now, disk=disk)
            found = [((argtypes, now), first)] + [
                (key, spec) for key, spec in list(self._specs.items())
                if key[0] == argtypes and key[1] != now]
        else:
            # (the current options' specialisations revalidated first, as a launch would: after
            # a redefinition their listing is the new code, never the old one labelled current)
            order = {key: i for i, key in enumerate(list(self._specs))}
            for argtypes, options in list(order) if current else ():
                if options == now:
                    self._specialize(argtypes, now, disk=disk)
            found = sorted(self._specs.items(), key=lambda item: order.get(item[0], len(order)))
            if self.device or calls:
                found += self._reached_variants(found)
        return self._grouped(found, now)

    def _grouped(self, found, now):
        """``found``, ``[((argtypes, options), specialisation)]``, as ``Variant`` objects
        grouped by argument types, those of the options ``now`` first in each group."""
        groups = {}
        for (argtypes, options), spec in found:
            groups.setdefault(argtypes, []).append((options, spec))
        # (a kernel's compile as a device function has the device's options: without the
        # kernel entry's directives)
        device_now = now if self.device else now.for_device()

        def current(options, spec):
            return options == (device_now if isinstance(spec, CompiledFunction) else now)
        out = []
        for argtypes, group in groups.items():
            group.sort(key=lambda item: not current(*item))   # (stable: then as compiled)
            out += [Variant(argtypes, options, current(options, spec), spec)
                    for options, spec in group]
        return out

    def _called_variants(self, sig, now):
        """For a kernel that kernels call as a device function (a ``%%cuda`` cell's helper),
        asked about with a signature that has a return type: its compiles as a device function
        for those argument types (compiled now, as its callers would, where none has them); the
        return type is the caller's to give, as for a device function's reflection.  None for
        a signature without one, or where nothing calls the kernel (``argument_types`` refuses
        a return type then)."""
        argtypes, ret = normalize_signature(sig)
        if ret is None or ret == types.none:
            return None
        own = list(self._specs.items())
        reached = self._reached_variants(own)
        if not reached:
            return None
        found = [item for item in reached if item[0][0] == argtypes]
        if not found:
            options = now.for_device()
            found = [((argtypes, options), frontend.compile_device(
                self.py_func, self.context, {}, argtypes, options))]
        return self._grouped(found, now)

    def _reached_variants(self, own):
        """A device function's specialisations compiled for the calls of kernels and device
        functions (numba-cuda lists those in a device function's ``overloads`` too): each
        compiled function of their call graphs made from this function's code in its context
        (without a caller's override mask), as ``[((argtypes, options), compiled function)]``,
        but those ``own`` (its own compiles) already has.  A kernel loaded from the disk cache
        that reaches this function goes through the front end again (its records keep no
        code, as for ``inspect_types``); one that no longer compiles is left out (its launch
        says why)."""
        seen = {id(value) for _, value in own}
        # (a kernel's own specialisations: their kernel's compiled function is no call of it)
        seen |= {id(value.compiled) for _, value in own if hasattr(value, "compiled")}
        found = []
        for fn in definitions.live_functions():
            if fn is self:
                continue
            for (argtypes, options), spec in list(fn._specs.items()):
                cf = spec if fn.device else spec.compiled
                if not isinstance(cf, CompiledFunction):       # a disk-loaded kernel's records
                    if not any(c.pyfunc is self.py_func for c in cf.closure()):
                        continue
                    try:
                        cf = fn._specialize(argtypes, options, disk=False).compiled
                    except CompileError:
                        continue
                for each in cf.closure():
                    if each is cf and not fn.device and not self.device:
                        continue     # (a kernel of the same code, specialize()'s: no call)
                    if each.pyfunc is self.py_func and each.context is self.context and \
                            not each.mask and each.fndesc is not None and \
                            id(each) not in seen:
                        seen.add(id(each))
                        found.append(((each.argtypes, each.options), each))
        return found

    def _require_kernel(self, what):
        if self.device:
            what_of = {"inspect_sass": "Cannot inspect SASS of a device function",
                       "inspect_sass_cfg": "Cannot get the CFG of a device function"}.get(
                what, f"Cannot ask {what}() of a device function")
            raise DeviceFunctionError(f"{what_of}: {what}() is for kernels; {self.__qualname__} "
                                      f"is a device function (use inspect_llvm)")


#: What only a kernel has: its compiles as a device function are left out
_KERNEL_ONLY = ("sass", "sass_cfg")


def _either(device, kernel):
    """A reader of one specialisation: ``device`` of a device function's compiled function
    (a device function's, or a kernel's compile as one), ``kernel`` of a kernel's."""
    return lambda value: device(value) if isinstance(value, CompiledFunction) else kernel(value)


def _code(value):
    """The compiled function of a specialisation (a kernel's, or a compiled function)."""
    return value if isinstance(value, CompiledFunction) else value.compiled


def _ptx(spec):
    return spec.ptx


def _llvm(spec):
    return spec.llvm_ir


def _device_llvm(cf):
    return "\n".join(cf.ir_texts())


def _sass(spec):
    return spec.inspect_sass()


def _sass_cfg(spec):
    return spec.inspect_sass_cfg()


def _metadata(value):
    """``get_metadata``'s answer for a kernel's specialisation or a device function's compiled
    function."""
    if isinstance(value, CompiledFunction):
        return {"options": value.options, "from_disk": False, "compile_seconds": None,
                "launch_config_sensitive": False}
    return value.metadata


class _Shown(dict):
    """``inspect_types()``'s answer, already printed: IPython shows nothing more for it."""

    def _ipython_display_(self):
        return None


class _ShownText(str):
    """``inspect_types(sig)``'s answer, already printed: IPython shows nothing more for it."""

    def _ipython_display_(self):
        return None


def _annotated(cf):
    """The typed IR of ``cf`` and of each function it calls (``inspect_types``)."""
    return "\n".join(f"{each.qualname}{each.argtypes} -> {each.restype}\n"
                     f"{each.type_annotation}" for each in cf.closure())


def _annotated_kernel(spec):
    return _annotated(spec.compiled)


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
