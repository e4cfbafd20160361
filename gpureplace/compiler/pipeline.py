"""The pipeline, end to end: a Python function and argument types in a context -> a kernel's PTX.

    compile_kernel(pyfunc, argtypes, context, options)
      -> frontend.compile_device          (front end + lowering, cached per function; a function
                                           whose callees alone changed is relinked)
      -> wrapper                          (flat ABI parameters -> Numba values -> call)
      -> link                             (every callee's module + pruned libdevice)
      -> backend.optimize / validate / emit_ptx
      -> KernelSpecialization             (what the runtime loads; kernel_cache keeps it on disk)

Device functions on their own (``compile_ptx(device=True)``, ``abi="c"``) take the same steps
without the kernel wrapper: ``device_ptx`` and ``device_ptx_c_abi``.
"""

from __future__ import annotations

import inspect
import re
import struct
import time

import llvmlite.binding as llvm
from llvmlite import ir
from numba.core import types

from ..arch import arch_number
from ..errors import CompileError, KernelReturnsValue
from . import abi, backend, constructs, frontend, trig_slowpath
from .constructs import instructions_with_lines
from .diagnostics import type_in_words
from .exceptions import exceptions_of, record_status
from .records import resident_arrays
from .target import ADDRSPACE_GLOBAL, RESIDENT_ALIGN, compilers
from .validate import check_linked


class KernelSpecialization:
    """A kernel compiled for one argument-type tuple in one context with one option set."""

    def __init__(self, compiled, name, argtypes, ptx, llvm_ir, options, compile_seconds):
        self.compiled = compiled            # compiled.CompiledFunction of the kernel body
        self.name = name                    # plain PTX entry name
        self.argtypes = tuple(argtypes)
        self.ptx = ptx
        self.llvm_ir = llvm_ir              # optimised LLVM IR of the whole linked module
        self.options = options
        self.compile_seconds = compile_seconds
        self.param_format = abi.struct_format(argtypes)
        self.uses_printf = "vprintf" in ptx
        #: debug kernels: {status code: (exception class, args, location)} (exceptions.py)
        self.exceptions = {}
        #: ``[(symbol, host copy)]``: the global arrays the code reads from device memory,
        #: copied into the module's globals of those names when it loads (runtime/launch.py)
        self.device_arrays = resident_arrays(compiled)
        self.world = -1                     # world age at which it was last known valid
        self.from_disk = False
        #: a kernel loaded from the disk cache: what gives the same kernel through the front end
        #: (whose results, as the type annotation, the disk does not keep)
        self.front_end = None
        #: compiled from its launch's configuration (jit/launchconfig.py)
        self.launch_config_sensitive = False

    @property
    def context(self):
        return self.compiled.context

    # numba-cuda's names on an overload (``kernel.overloads[argtypes]``)
    def inspect_llvm(self):
        """The optimised LLVM IR of the whole linked module."""
        return self.llvm_ir

    def inspect_asm(self, cc=None):
        """The PTX (for the architecture it was compiled for)."""
        return self.ptx

    @property
    def _type_annotation(self):
        """numba-cuda's: Numba's type annotation of the kernel's body (``.typemap`` ...)."""
        spec = self.front_end() if self.from_disk and self.front_end is not None else self
        return spec.compiled.type_annotation

    def inspect_sass(self):
        """The SASS listing (ptxas and nvdisasm from NVIDIA's wheels; no GPU needed)."""
        from .toolchain import sass_of_ptx
        return sass_of_ptx(self.ptx, self.options.arch, line_info=self.options.lineinfo)

    @property
    def cooperative(self):
        """Whether the kernel syncs the grid (``cuda.cg.this_grid().sync()``): it is then
        launched cooperatively."""
        from .intrinsics.cg import BARRIER
        return BARRIER in self.ptx

    def dependencies(self):
        """Global reads, overrides and callees of the whole call graph below this kernel."""
        from ..tracking.deps import describe
        return describe(self.compiled)

    def __repr__(self):
        args = ", ".join(map(str, self.argtypes))
        return f"<KernelSpecialization {self.name}({args}) context={self.context.name!r}>"


def plain_name(pyfunc):
    return re.sub(r"[^A-Za-z0-9_]", "_", pyfunc.__name__) or "kernel"


def compile_kernel(pyfunc, argtypes, context, options, make=KernelSpecialization):
    """``pyfunc`` compiled as a kernel for ``argtypes``: a ``make`` (KernelSpecialization, or the
    runtime's subclass that can also ask the GPU about it)."""
    t0 = time.perf_counter()
    constructs.refuse_as_kernel(pyfunc, pyfunc.__qualname__)
    _check_parameter_space(pyfunc, argtypes, options)
    cf = frontend.compile_device(pyfunc, context, {}, argtypes, options.for_device())
    if not isinstance(cf.restype, types.NoneType):
        raise KernelReturnsValue(
            f"a kernel must have void return type (it returns {type_in_words(cf.restype)}); "
            f"kernels return nothing: write results into an array argument, or declare it with "
            f"cuda.jit(device=True) to call it from kernels",
            function=pyfunc.__qualname__, filename=pyfunc.__code__.co_filename,
            lineno=_return_line(pyfunc), chain=(pyfunc.__qualname__,))
    name = plain_name(pyfunc)
    arrays = resident_arrays(cf)
    mod, ptx = _finish(cf, _wrapper_module(cf, name, arrays), name,
                       keep={symbol for symbol, _ in arrays})
    ptx = entry_directives(ptx, name, options)
    spec = make(cf, name, argtypes, ptx, str(mod), options, time.perf_counter() - t0)
    if options.debug:
        spec.exceptions = exceptions_of(cf)
    return spec


#: The bytes of parameters a kernel may take (ptxas's limit): 4,352 up to PTX ISA 8.0, 32,764
#: from PTX 8.1 on sm_70 and newer.
PARAMETER_BYTES = 4352
PARAMETER_BYTES_PTX81 = 32764


def _check_parameter_space(pyfunc, argtypes, options):
    """Refuse, naming the largest parameters, arguments whose values take more bytes than a
    kernel's parameters may (a tuple of hundreds of numbers): ptxas would refuse the PTX, and
    the simulator would run what no GPU can."""
    total = struct.calcsize(abi.struct_format(argtypes))
    if total <= PARAMETER_BYTES:
        return
    isa = backend.compile_ptx_isa(options.arch)
    newer = isa >= 81 and arch_number(options.arch) >= 70
    most = PARAMETER_BYTES_PTX81 if newer else PARAMETER_BYTES
    if total <= most:
        return
    try:
        names = list(inspect.signature(pyfunc).parameters)
    except (TypeError, ValueError):
        names = []
    sizes = [struct.calcsize(abi.struct_format((ty,))) for ty in argtypes]
    largest = sorted(range(len(sizes)), key=lambda i: -sizes[i])[:3]
    shown = ", ".join(f"{names[i] if i < len(names) else i!r} ({argtypes[i]}: {sizes[i]:,} "
                      f"bytes)" for i in largest)
    later = "" if newer else (f"; {PARAMETER_BYTES_PTX81:,} from PTX ISA 8.1 (a CUDA 12.1 "
                              f"driver) on sm_70 and newer")
    raise CompileError(
        f"the kernel's arguments take {total:,} bytes of parameters, more than the {most:,} a "
        f"kernel may have ({options.arch}, PTX ISA {isa / 10}"
        f"{later}); the largest: {shown}: pass that many values in an array instead",
        function=pyfunc.__qualname__, filename=pyfunc.__code__.co_filename,
        lineno=pyfunc.__code__.co_firstlineno, chain=(pyfunc.__qualname__,))


def entry_directives(ptx, name, options):
    """``ptx`` with the performance-tuning directives of ``options`` on entry ``name``:
    ``.maxnreg`` (max_registers) and ``.maxntid`` / ``.minnctapersm`` / ``.maxclusterrank``
    (launch_bounds), placed between the parameter list and the body as PTX wants them."""
    lines = []
    if options.max_registers:
        lines.append(f".maxnreg {options.max_registers}")
    bounds = options.launch_bounds
    if bounds:
        lines.append(f".maxntid {bounds[0]}, 1, 1")
        if len(bounds) > 1 and bounds[1]:
            lines.append(f".minnctapersm {bounds[1]}")
        if len(bounds) > 2 and bounds[2]:
            lines.append(f".maxclusterrank {bounds[2]}")
    if not lines:
        return ptx
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\(.*?\)\s*\{", ptx, re.S)
    if m is None:
        raise CompileError(f"internal error: entry {name} not found in the PTX")
    at = ptx.rindex("{", m.start(), m.end())
    return ptx[:at] + "\n".join(lines) + "\n" + ptx[at:]


def device_ptx(cf) -> str:
    """PTX of a device function on its own (``compile_ptx(..., device=True)``)."""
    _, targetctx = compilers(cf.context)
    return _finish(cf, str(targetctx.create_module("device")), cf.mangled_name)[1]


def device_ptx_c_abi(cf, name) -> str:
    """PTX of a device function under the C ABI: ``.visible .func`` named ``name`` that takes
    its scalar arguments and returns its value as a C function would (for CUDA C callers)."""
    _, targetctx = compilers(cf.context)
    if not (isinstance(name, str) and name.isidentifier() and name.isascii()):
        raise CompileError(f"compile(abi='c'): the function name {name!r} is not a C identifier")
    for i, ty in enumerate(cf.argtypes):
        if not isinstance(ty, (types.Integer, types.Float, types.Boolean)):
            raise CompileError(f"compile(abi='c'): argument {i} of {cf.pyfunc.__qualname__} is "
                               f"{ty}; the C ABI takes integers, floats and booleans")
    if cf.restype != types.void and not isinstance(cf.restype, (types.Integer, types.Float,
                                                                types.Boolean)):
        raise CompileError(f"compile(abi='c'): {cf.pyfunc.__qualname__} returns {cf.restype}; "
                           f"the C ABI returns an integer, a float, a boolean or nothing")
    return _finish(cf, _c_abi_entry(targetctx, cf, name), name)[1]


def _c_abi_entry(targetctx, cf, name):
    """IR text of a C-ABI function ``name`` (its arguments and return value as a C function
    has them) that calls the compiled function ``cf`` through Numba's calling convention."""
    mod = targetctx.create_module(f"{name}.c_abi")
    void = cf.restype == types.void
    restype = ir.VoidType() if void else targetctx.get_value_type(cf.restype)
    fn = ir.Function(mod, ir.FunctionType(restype, [targetctx.get_value_type(t)
                                                    for t in cf.argtypes]), name=name)
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    callee = ir.Function(mod, targetctx.call_conv.get_function_type(cf.restype, cf.argtypes),
                         name=cf.mangled_name)
    _, value = targetctx.call_conv.call_function(builder, callee, cf.restype, cf.argtypes,
                                                 list(fn.args))
    if void:
        builder.ret_void()
    else:
        builder.ret(value)
    return str(mod)


def _finish(cf, wrapper_ir, entry, keep=(), separate=None):
    """Link, internalize all but ``entry`` (and the globals named in ``keep``), optimise,
    validate, emit: (module, PTX).  ``separate``: whether libdevice's trigonometric reduction
    is compiled on its own (trig_slowpath.py); None: decided by ``_link``."""
    isa = backend.compile_ptx_isa(cf.options.arch)
    mod, separate = _link(cf, wrapper_ir, separate)
    backend.internalize_except(mod, {entry, *keep})
    from numba.core import config
    if config.DUMP_LLVM:
        _dump(f"LLVM DUMP {entry}", mod)
    backend.optimize(mod, cf.options.arch, isa, cf.options.opt,
                     constant_loops=any(trips >= backend.CONSTANT_RANGE_MIN_TRIPS
                                        for each in cf.closure()
                                        for trips in each.constant_range_trips))
    if config.DUMP_OPTIMIZED:
        _dump(f"OPTIMIZED DUMP {entry}", mod)
    check_linked(mod, cf, provided={trig_slowpath.SLOWPATH} if separate else ())
    ptx = backend.emit_ptx(mod, cf.options.arch, isa)
    if separate:
        arch = cf.options.arch
        ptx = trig_slowpath.splice(
            ptx, trig_slowpath.body(arch, isa, backend.reflect_values(arch, cf.options.fastmath)))
        if ptx is None:           # it cannot be placed: the kernel again, the reduction inlined
            return _finish(cf, wrapper_ir, entry, keep, separate=False)
    if config.DUMP_ASSEMBLY:
        _dump(f"ASSEMBLY {entry}", ptx)
    return mod, ptx


def _dump(title, text):
    """Numba's DUMP_* output (as numba-cuda prints it): a titled rule, the text, a rule."""
    print(title.center(80, "-"))
    print(text)
    print("=" * 80)


def _return_line(pyfunc):
    """Line of the last ``return`` with a value (where a kernel returns something)."""
    last = pyfunc.__code__.co_firstlineno
    for ins, line in instructions_with_lines(pyfunc):
        if ins.opname == "RETURN_VALUE":
            last = line
    return last


#: Names the kernel entry and the function it calls have in a wrapper kept for its types.
_ENTRY, _CALLEE = "gpureplace.kept.wrapper.entry", "gpureplace.kept.wrapper.callee"


def _wrapper_module(cf, name, device_arrays=()):
    """IR text of the kernel entry ``name``: its flat PTX parameters rebuilt into ``cf``'s
    arguments, and the call of ``cf``.  The common wrapper (no line information, no debug
    status, no device arrays, no grid barrier) depends only on the argument and return types:
    built once per target context and types with stand-in names, and given the two names by
    replacing the stand-ins' references (1 ms of a small kernel's compile otherwise)."""
    from .intrinsics.cg import BARRIER
    barrier = any(BARRIER in text for each in cf.closure() for text in each.ir_texts())
    if device_arrays or barrier or cf.options.lineinfo or cf.options.debug:
        return _build_wrapper(cf, name, cf.mangled_name, device_arrays, barrier)
    _, targetctx = compilers(cf.context)
    kept = targetctx.__dict__.setdefault("_kept_wrappers", {})
    key = (tuple(cf.argtypes), cf.restype)
    text = kept.get(key)
    if text is None:
        text = kept[key] = _build_wrapper(cf, _ENTRY, _CALLEE, (), False)
    return (text.replace(f'"{_ENTRY}.wrapper"', f'"{name}.wrapper"')
            .replace(f"{_reference(_ENTRY)}(", f"{_reference(name)}(")
            .replace(f"{_reference(_CALLEE)}(", f"{_reference(cf.mangled_name)}("))


def _reference(name):
    """How LLVM IR text refers to the global ``name`` (``@name``, or quoted and escaped)."""
    return ir.GlobalVariable(ir.Module(), ir.IntType(8), name).get_reference()


def _build_wrapper(cf, name, callee_name, device_arrays, barrier):
    _, targetctx = compilers(cf.context)
    mod = targetctx.create_module(f"{name}.wrapper")
    params = abi.llvm_param_types(cf.argtypes)
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), params), name=name)
    fn.calling_convention = "ptx_kernel"
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    if cf.options.lineinfo:
        _line_info_for_wrapper(mod, fn, builder, cf)
    flat = list(fn.args)
    values = [abi.rebuild(targetctx, builder, ty, flat) for ty in cf.argtypes]
    callee = ir.Function(mod, targetctx.call_conv.get_function_type(cf.restype, cf.argtypes),
                         name=callee_name)
    status, _ = targetctx.call_conv.call_function(builder, callee, cf.restype, cf.argtypes,
                                                  values)
    if cf.options.debug:
        record_status(builder, status)           # raised on the host after the launch
    builder.ret_void()
    if barrier:
        from .intrinsics.cg import BARRIER
        # the grid barrier's counter: one per loaded module, zero at load
        gv = ir.GlobalVariable(mod, ir.IntType(32), BARRIER, addrspace=1)
        gv.initializer = ir.Constant(ir.IntType(32), 0)
        gv.align = 4
    for symbol, array in device_arrays:
        # Global arrays read from device memory: defined here once (the functions that read
        # one declare it), external so that LLVM assumes nothing of their contents, which the
        # runtime copies in when the module loads; zero-initialised, so the PTX holds no data.
        gv = ir.GlobalVariable(mod, ir.ArrayType(ir.IntType(8), array.nbytes), symbol,
                               addrspace=ADDRSPACE_GLOBAL)
        gv.initializer = ir.Constant(gv.value_type, None)
        gv.align = RESIDENT_ALIGN
    return str(mod)


def _line_info_for_wrapper(mod, fn, builder, cf):
    """Give the kernel entry a subprogram at the Python function's first line, and the call to
    the body a location there: NVPTX writes line directives (.file / .loc) only in functions
    that have one, and the body's lines are inlined into this function."""
    import os
    code = cf.pyfunc.__code__
    path = os.path.abspath(code.co_filename)
    line = code.co_firstlineno
    difile = mod.add_debug_info("DIFile", {"directory": os.path.dirname(path),
                                           "filename": os.path.basename(path)})
    unit = mod.add_debug_info("DICompileUnit", {
        "language": ir.DIToken("DW_LANG_C_plus_plus"), "file": difile,
        "producer": "gpureplace", "runtimeVersion": 0, "isOptimized": True,
        "emissionKind": ir.DIToken("FullDebug" if cf.options.debug else
                                   "DebugDirectivesOnly"),
        "nameTableKind": ir.DIToken("None")}, is_distinct=True)
    mod.add_named_metadata("llvm.dbg.cu", unit)
    flags = mod.add_named_metadata("llvm.module.flags")
    for key, value in (("Dwarf Version", 4), ("Debug Info Version", 3)):
        flags.add(mod.add_metadata([ir.IntType(32)(2), key, ir.IntType(32)(value)]))
    sub = mod.add_debug_info("DISubprogram", {
        "name": fn.name, "scope": difile, "file": difile, "line": line,
        "type": mod.add_debug_info("DISubroutineType", {"types": mod.add_metadata([])}),
        "isLocal": False, "isDefinition": True, "scopeLine": line, "isOptimized": True,
        "unit": unit}, is_distinct=True)
    fn.set_metadata("dbg", sub)
    builder.debug_metadata = mod.add_debug_info("DILocation", {"line": line, "column": 1,
                                                               "scope": sub})


def _link(cf, wrapper_ir, separate=None):
    """The kernel's module linked: (module, whether libdevice's trigonometric reduction is left
    declared, to be compiled on its own: trig_slowpath.py).  ``separate``: decide that (None),
    or as given."""
    backend.initialize_llvm()
    mod = llvm.parse_assembly(wrapper_ir)
    texts = [wrapper_ir]
    for each in cf.closure():
        for text in each.ir_texts():
            texts.append(text)
            mod.link_in(llvm.parse_assembly(text))
    _link_runtime_helpers(cf, mod)
    needed = {fn.name for fn in mod.functions if fn.is_declaration and fn.name.startswith("__nv_")}
    if separate is None:
        separate = bool(needed) and trig_slowpath.wanted(needed, cf.options) and \
            not trig_slowpath.has_loop(texts + [str(mod)] if _has_helpers(mod) else texts)
    backend.link_libdevice(mod, needed, cf.options.arch, cf.options.fastmath, separate)
    if cf.options.fastmath:
        mod = llvm.parse_assembly(backend.flush_denormals(str(mod)))
    return mod, separate


def _has_helpers(mod):
    """Whether Numba's runtime helpers were linked in (their loops are in ``mod`` only)."""
    from .runtime_helpers import SYMBOLS
    names = {fn.name for fn in mod.functions if not fn.is_declaration}
    return any(symbol in names for symbol in SYMBOLS)


def _link_runtime_helpers(cf, mod):
    """Numba's lowering calls a few C helpers of its runtime (``array.reshape``, complex
    ``**``): link the device versions (compiler/runtime_helpers.py) of those this module calls,
    each behind a C-ABI entry of the helper's name."""
    from .runtime_helpers import SYMBOLS, helpers
    wanted = []
    for symbol in SYMBOLS:
        try:
            fn = mod.get_function(symbol)
        except NameError:
            continue
        if fn.is_declaration:
            wanted.append(symbol)
    if not wanted:
        return
    table = helpers()
    _, targetctx = compilers(cf.context)
    linked = set()                        # helpers share device functions (cpow and cpowf)
    for symbol in wanted:
        pyfunc, argtypes = table[symbol]
        helper = frontend.compile_device(pyfunc, cf.context, {}, argtypes, cf.options.for_device())
        for each in helper.closure():
            if each.mangled_name in linked:
                continue
            linked.add(each.mangled_name)
            for text in each.ir_texts():
                mod.link_in(llvm.parse_assembly(text))
        mod.link_in(llvm.parse_assembly(_c_abi_entry(targetctx, helper, symbol)))
