"""Linking a kernel's PTX with external device code (``cuda.jit(link=...)``,
``cuda.declare_device(..., link=...)``) through the driver's JIT linker (cuLink*).

``.cu`` files are compiled with NVRTC to relocatable PTX for the device's architecture; ``.ptx``,
``.cubin``, ``.fatbin``, ``.o`` and ``.a`` files go to the linker as they are.
"""

from __future__ import annotations

import os

from .. import probe
from ..compiler.intrinsics.external import LINKS, LinkableCode
from ..compiler.toolchain import external_symbols
from ..errors import CompileError, LaunchError


def files_for(ptx, link):
    """The kernel's own link files plus those of the declared functions its PTX calls."""
    files = list(link)
    for name in sorted(external_symbols(ptx)):
        for f in LINKS.get(name, ()):
            if f not in files:
                files.append(f)
    return files


def _cuda_to_ptx(path, arch):
    with open(path) as fh:
        source = fh.read()
    return _cuda_source_to_ptx(source, path, arch, (f"-I{os.path.dirname(path)}",))


def _cuda_source_to_ptx(source, name, arch, extra=()):
    from cupy_backends.cuda.libs import nvrtc

    from ..config import settings
    cc = arch.split("_", 1)[1]
    opts = (f"-arch=compute_{cc}", "-rdc=true") + tuple(extra) + tuple(
        f"-I{path}" for path in settings.nvrtc_search_paths)
    prog = nvrtc.createProgram(source, os.path.basename(name), (), ())
    try:
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError:
            log = nvrtc.getProgramLog(prog)
            raise CompileError(f"NVRTC could not compile {name}:\n{log.strip()}") from None
        return nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)


def _add_linkable(driver, state, code, arch, kinds):
    """Give the linker one ``LinkableCode`` (source compiled first)."""
    if code.kind == "ltoir":
        raise LaunchError(f"cannot link {code.name}: LTO-IR is NVVM's link-time format, which "
                          f"the driver's linker gpureplace uses does not take; link its PTX or "
                          f"cubin instead")
    data = code.data
    if code.kind == "cu":
        text = data if isinstance(data, str) else bytes(data).decode()
        driver.linkAddData(state, driver.CU_JIT_INPUT_PTX,
                           _cuda_source_to_ptx(text, code.name, arch), code.name + ".ptx")
        return
    if isinstance(data, str):
        data = data.encode()
    driver.linkAddData(state, kinds[code.kind], bytes(data), code.name)


def link(ptx, files, arch):
    """A cubin of ``ptx`` linked with ``files``."""
    driver = probe.cupy_module().cuda.driver
    kinds = {".ptx": driver.CU_JIT_INPUT_PTX, ".cubin": driver.CU_JIT_INPUT_CUBIN,
             ".fatbin": driver.CU_JIT_INPUT_FATBINARY, ".o": driver.CU_JIT_INPUT_OBJECT,
             ".a": driver.CU_JIT_INPUT_LIBRARY}
    state = driver.linkCreate()
    try:
        driver.linkAddData(state, driver.CU_JIT_INPUT_PTX, ptx.encode(), "kernel.ptx")
        by_kind = {"ptx": kinds[".ptx"], "cubin": kinds[".cubin"], "fatbin": kinds[".fatbin"],
                   "object": kinds[".o"], "archive": kinds[".a"]}
        for path in files:
            if isinstance(path, LinkableCode):
                _add_linkable(driver, state, path, arch, by_kind)
                continue
            ext = os.path.splitext(path)[1].lower()
            if ext == ".cu":
                data = _cuda_to_ptx(path, arch)
                driver.linkAddData(state, driver.CU_JIT_INPUT_PTX, data,
                                   os.path.basename(path) + ".ptx")
            elif ext in kinds:
                with open(path, "rb") as fh:
                    driver.linkAddData(state, kinds[ext], fh.read(), os.path.basename(path))
            else:
                raise LaunchError(f"cannot link {path}: link files are .cu, .ptx, .cubin, "
                                  f".fatbin, .o or .a")
        try:
            return driver.linkComplete(state)
        except driver.CUDADriverError as exc:
            missing = sorted(external_symbols(ptx))
            shown = ", ".join(f if isinstance(f, str) else f.name for f in files)
            raise LaunchError(f"linking the kernel with {shown or 'nothing'} failed "
                              f"({exc}); the kernel calls external function(s) "
                              f"{', '.join(missing)}: each must be defined, extern \"C\", in a "
                              f"link file (cuda.jit(link=[...]) or "
                              f"cuda.declare_device(..., link=...))") from None
    finally:
        driver.linkDestroy(state)
