"""``cuda.jit`` and numba-cuda's compile-only entry points (``compile_ptx``, ``cuda.compile`` and
their ``*_for_current_device`` forms)."""

from __future__ import annotations

import contextlib
import re

from numba.core import types

from .. import probe
from ..arch import normalize_arch
from ..compiler import diagnostics, frontend
from ..compiler.pipeline import device_ptx, device_ptx_c_abi
from ..compiler.signature import normalize_signature
from ..errors import CompileError, render_as_one_block
from .function import GPUFunction
from .options import check_fastmath, check_flag
from .reflection import argument_types


def jit(func=None, *, device=False, context=None, fastmath=False, opt=3, lineinfo=False,
        debug=None, cache=False, inline=False, forceinline=False, link=None,
        max_registers=None, launch_bounds=None, lto=False, shared_memory_carveout=None,
        boundscheck=None, extensions=None, nopython=True, **unknown):
    """``@cuda.jit`` / ``@cuda.jit(device=True)`` / ``@cuda.jit("void(float32[:])")``.

    numba-cuda's ``lto`` is accepted: device functions and libdevice are already linked and
    optimised together at the LLVM level, which is what link-time optimisation buys there;
    ``inline`` and ``forceinline`` likewise, LLVM's inliner seeing every device function.
    ``boundscheck=True`` is refused as numba-cuda refuses it (the simulator checks bounds), and
    argument ``extensions`` are numba-cuda's (``kernel.extensions``).  A mistake at the
    decorator (an unknown option, a class decorated) shows in IPython as one block naming the
    user's line, as a bad signature does."""
    with _one_block():
        return _jit(func, device, context, fastmath, opt, lineinfo, debug, boundscheck,
                    extensions, nopython, unknown, max_registers, launch_bounds, link,
                    shared_memory_carveout)


@contextlib.contextmanager
def _one_block():
    """Errors of the user's making raised in here render in IPython as one block (the message
    and the user's line), not as a traceback through this package's files; their class stays."""
    try:
        yield
    except (TypeError, ValueError, NotImplementedError) as exc:
        render_as_one_block(exc)
        raise


def _jit(func, device, context, fastmath, opt, lineinfo, debug, boundscheck, extensions,
         nopython, unknown, max_registers, launch_bounds, link, shared_memory_carveout):
    if unknown:
        hint = ""
        if "arch" in unknown or "cc" in unknown:
            hint = ("; choose the architecture with kernel.compile(sig, arch='sm_90'), "
                    "cuda.compile_ptx(..., cc=(9, 0)), or gpureplace.config.settings.arch / "
                    "%config GPUReplace.arch (default: the current GPU's)")
        raise TypeError(f"cuda.jit() got unsupported option(s): {', '.join(sorted(unknown))}"
                        f"{hint}")
    if boundscheck:
        raise NotImplementedError("cuda.jit(boundscheck=True): compiled kernels do not check "
                                  "array bounds (nor do numba-cuda's); run the kernel in the "
                                  "simulator (GPUREPLACE_BACKEND=simulator) to have out-of-bounds "
                                  "accesses reported with the thread, block and line")
    if extensions is not None and not isinstance(extensions, (list, tuple)):
        raise TypeError(f"cuda.jit(extensions=...) takes a list of objects with a "
                        f"prepare_args(ty, val, stream, retr) method, got {extensions!r}")
    for ext in extensions or ():
        if not callable(getattr(ext, "prepare_args", None)):
            raise TypeError(f"cuda.jit(extensions=...): {ext!r} has no prepare_args(ty, val, "
                            f"stream, retr) method")
    if not nopython:
        raise TypeError("cuda.jit(nopython=False): device code has no object mode")
    fastmath = check_fastmath(fastmath)
    lineinfo = check_flag("lineinfo", lineinfo)
    debug = check_flag("debug", debug, none=True)
    if debug is None:
        # numba-cuda's default: NUMBA_CUDA_DEBUGINFO=1 makes every kernel a debug one
        from numba.core import config as numba_config
        debug = bool(getattr(numba_config, "CUDA_DEBUGINFO_DEFAULT", 0))
    sigs = None
    if func is not None and not callable(func):
        sigs, func = func, None
    elif isinstance(func, str):
        sigs, func = func, None

    def wrap(fn):
        with _one_block():
            return _made(fn)

    def _made(fn):
        gf = GPUFunction(fn, device=device, context=context, fastmath=fastmath, opt=3 if opt is True
                         else (0 if opt is False else opt), lineinfo=lineinfo,
                         max_registers=max_registers, launch_bounds=launch_bounds, link=link,
                         shared_memory_carveout=shared_memory_carveout, debug=debug)
        gf.extensions.extend(extensions or ())
        if sigs is not None:
            # (compiled before the decorator binds its name: a use of the name in the body, a
            # call of itself, means the function being defined)
            # Declared before any compiles: a recursive call reads the function, whose
            # fingerprint holds its declared signatures (a disk-cache entry compares it).
            listed = sigs if isinstance(sigs, list) else [sigs]
            parsed = [normalize_signature(sig) for sig in listed]
            for args, ret in parsed:
                if device and ret is not None:
                    gf.declared_returns[args] = ret
            gf.declared_signatures = tuple(args for args, _ in parsed)
            with frontend.defining(fn, gf):
                for sig in listed:
                    gf.compile(sig)
        return gf

    return wrap if func is None else wrap(func)


def compile_ptx(pyfunc, sig, device=False, fastmath=False, cc=None, opt=True, context=None,
                lineinfo=False, debug=False, abi="numba", abi_info=None, forceinline=False,
                launch_bounds=None):
    """numba-cuda's ``cuda.compile_ptx``: returns ``(ptx, return type)`` without needing a GPU.

    ``abi="c"`` (device functions of scalars) emits a ``.visible .func`` that CUDA C code can
    call as ``extern "C"``, named ``abi_info["abi_name"]`` or after the Python function."""
    if abi not in ("numba", "c"):
        raise NotImplementedError(f"Unsupported ABI: {abi} (compile_ptx takes abi='numba' or "
                                  f"'c')")
    if abi == "c" and not device:
        raise NotImplementedError("The C ABI is not supported for kernels: abi='c' is for "
                                  "device functions (device=True); kernels are entry points, "
                                  "whatever the ABI")
    arch = normalize_arch(cc, "compile_ptx(cc=...)") if cc is not None else None
    fn = pyfunc if isinstance(pyfunc, GPUFunction) else GPUFunction(
        pyfunc, device=device, context=context, fastmath=fastmath, opt=3 if opt else 0,
        lineinfo=lineinfo or bool(debug), arch=arch, launch_bounds=launch_bounds,
        debug=bool(debug))
    argtypes, restype = normalize_signature(sig)
    if not device and not fn.device:
        argtypes = argument_types(fn, sig)          # (a kernel's return type must be void)
    if device:
        try:
            cf = frontend.compile_device(fn.py_func, fn.context, {}, argtypes, fn.options(arch),
                                         restype)
        except CompileError as exc:                 # (also Numba's TypingError when typing)
            raise diagnostics.for_user(exc) from None
        if abi == "c":
            name = (abi_info or {}).get("abi_name")
            if name is not None and not (isinstance(name, str) and name.isidentifier()):
                raise ValueError(f"compile_ptx: abi_info['abi_name'] must be a C identifier, "
                                 f"got {name!r}")
            if name is None:       # after the Python function, made a C identifier (<lambda>)
                name = re.sub(r"[^0-9A-Za-z_]", "_", fn.py_func.__name__)
                name = name if name[:1].isalpha() or name[:1] == "_" else "_" + name
            return device_ptx_c_abi(cf, name), cf.restype
        return device_ptx(cf), cf.restype
    spec = fn._specialize(argtypes, fn.options(arch))
    return spec.ptx, types.void


def compile_ptx_for_current_device(pyfunc, sig, device=False, fastmath=False, opt=True,
                                   **kwargs):
    """``compile_ptx`` for the architecture of the current GPU (the default one without)."""
    return compile_ptx(pyfunc, sig, device=device, fastmath=fastmath, opt=opt,
                       cc=probe.default_arch(), **kwargs)


def cuda_compile(pyfunc, sig, debug=None, lineinfo=False, device=True, fastmath=False,
                 cc=None, opt=True, abi=None, abi_info=None, output="ptx", forceinline=False,
                 launch_bounds=None):
    """numba-cuda's ``cuda.compile`` (``gpureplace.cuda.compile``): ``(code, return type)``; a
    device function under the C ABI by default (a kernel under Numba's: the C ABI is refused for
    kernels when asked for).  Only ``output="ptx"``: gpureplace generates PTX with LLVM, not
    NVVM's LTO-IR."""
    _check_output(output)
    if forceinline:
        raise ValueError("Can only designate forced inlining in LTO-IR: cuda.compile("
                         "forceinline=True) asks NVVM to mark the function always-inline in the "
                         "LTO-IR it would link later; gpureplace emits PTX (output='ptx'), "
                         "in which LLVM's optimiser has already inlined device functions into "
                         "their callers where it pays")
    if cc is None:
        cc = probe.default_arch()
    if abi is None:
        abi = "c" if device else "numba"
    return compile_ptx(pyfunc, sig, device=device, fastmath=fastmath, cc=cc, opt=opt,
                       lineinfo=lineinfo, debug=bool(debug), abi=abi,
                       abi_info=abi_info, launch_bounds=launch_bounds)


def _check_output(output):
    if output != "ptx":
        raise NotImplementedError(f"Unsupported output type: {output} (gpureplace produces PTX, "
                                  f"output='ptx'; LTO-IR is NVVM's format)")


def compile_all(pyfunc, sig, debug=None, lineinfo=False, device=True, fastmath=False, cc=None,
                opt=True, abi=None, abi_info=None, output="ptx", forceinline=False,
                launch_bounds=None):
    """numba-cuda's ``cuda.compile_all``: ``([code, *linked code], return type)``: the PTX of
    ``pyfunc`` and what must be linked with it (the ``link=`` items of the functions it
    declares, as given: paths or ``cuda.CUSource``/``PTXSource``... objects).  libdevice needs
    no entry: gpureplace links it into the PTX."""
    from ..runtime.linking import files_for
    _check_output(output)
    ptx, restype = cuda_compile(pyfunc, sig, debug=debug, lineinfo=lineinfo, device=device,
                                fastmath=fastmath, cc=cc, opt=opt, abi=abi, abi_info=abi_info,
                                output=output, forceinline=forceinline,
                                launch_bounds=launch_bounds)
    link = getattr(pyfunc, "_link", ())
    return [ptx, *files_for(ptx, link)], restype


def compile_for_current_device(pyfunc, sig, debug=None, lineinfo=False, device=True,
                               fastmath=False, opt=True, abi=None, abi_info=None, output="ptx",
                               forceinline=False, launch_bounds=None):
    """numba-cuda's ``cuda.compile_for_current_device``: ``cuda.compile`` for the current GPU's
    architecture (the default one without a GPU)."""
    return cuda_compile(pyfunc, sig, debug=debug, lineinfo=lineinfo, device=device,
                        fastmath=fastmath, cc=None, opt=opt, abi=abi, abi_info=abi_info,
                        output=output, forceinline=forceinline, launch_bounds=launch_bounds)
