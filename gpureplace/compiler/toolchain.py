"""NVIDIA's command-line tools that reflection uses (``inspect_sass``): found in the wheels
(``nvidia-cuda-nvcc`` ships ptxas, ``nvidia-cuda-nvdisasm`` nvdisasm), then ``GPUREPLACE_<TOOL>``,
``CUDA_HOME/bin`` and ``PATH``.  Compiling and launching never need them.  Also what a module's
PTX leaves for a linker to provide (``external_symbols``)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

#: tool -> the PyPI package that provides it
PACKAGES = {"ptxas": "nvidia-cuda-nvcc", "nvdisasm": "nvidia-cuda-nvdisasm"}


_EXTERN = re.compile(r"^\.extern\s+\.func\s+(?:\([^)]*\)\s*)?(\w+)\s*\(", re.M)


#: PTX "system calls": declared extern in PTX, provided by the driver
_SYSTEM = frozenset(("vprintf", "malloc", "free", "__assertfail"))


def external_symbols(ptx):
    """Names of the functions ``ptx`` calls, does not define, and the driver does not provide."""
    return set(_EXTERN.findall(ptx)) - _SYSTEM


def find_tool(name):
    """Path of the NVIDIA tool ``name`` (``ptxas``, ``nvdisasm``), or None."""
    explicit = os.environ.get(f"GPUREPLACE_{name.upper()}")
    if explicit:
        return explicit if os.path.isfile(explicit) else None
    for base in sys.path:
        for pattern in (("nvidia", "cu*", "bin", name), ("nvidia", "cuda_*", "bin", name)):
            hits = sorted(glob.glob(os.path.join(base or ".", *pattern)))
            if hits:
                return hits[-1]
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "bin", name)):
            return os.path.join(root, "bin", name)
    return shutil.which(name)


def require_tool(name, what):
    path = find_tool(name)
    if path is None:
        raise RuntimeError(f"{what} needs NVIDIA's {name}: pip install {PACKAGES[name]} (or set "
                           f"GPUREPLACE_{name.upper()} to its path)")
    return path


def _assemble(ptxas, ptx, arch, tmp, *flags, timeout=None):
    """``ptxas`` run on ``ptx`` for ``arch`` in folder ``tmp``: (the finished process, the
    path of the cubin).  PTX that calls declared device functions is assembled relocatable,
    to be linked later."""
    src, obj = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
    with open(src, "w") as fh:
        fh.write(ptx)
    args = [ptxas, *flags, f"-arch={arch}", *(["-c"] if external_symbols(ptx) else []),
            "-o", obj, src]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout), obj


def sass_of_ptx(ptx, arch, what="inspect_sass", line_info=False, cfg=False):
    """The SASS (nvdisasm's listing) of ``ptx`` assembled for ``arch`` (``sm_90``); with
    ``line_info``, each instruction's source line is noted (PTX with .loc directives); with
    ``cfg``, its control-flow graph in DOT instead (``nvdisasm -cfg``, numba-cuda's
    ``inspect_sass_cfg``)."""
    ptxas = require_tool("ptxas", what)
    nvdisasm = require_tool("nvdisasm", what)
    with tempfile.TemporaryDirectory() as tmp:
        done, obj = _assemble(ptxas, ptx, arch, tmp, *(["-lineinfo"] if line_info else []))
        if done.returncode:
            raise RuntimeError(f"{what}: ptxas rejected the PTX:\n{done.stderr.strip()}")
        flags = ["-cfg"] if cfg else ["-c", *(["-g"] if line_info else [])]
        done = subprocess.run([nvdisasm, *flags, obj], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{what}: nvdisasm failed:\n{done.stderr.strip()}")
        return done.stdout


_CONST = re.compile(r"^\s*\.const\s+(?:\.align\s+(\d+)\s+)?\.(?:b|u|s|f)(\d+)\s+\w+(?:\[(\d+)\])?",
                    re.M)


#: a ``.shared`` variable of PTX: (extern?, alignment, element bits, element count)
_SHARED = re.compile(r"^\s*(\.extern\s+)?\.shared\s+(?:\.align\s+(\d+)\s+)?"
                     r"\.[busf](\d+)\s+\w+(?:\[(\d*)\])?", re.M)


def ptx_static_shared(ptx):
    """The static shared bytes of ``ptx`` (a module of one kernel): its ``.shared`` variables
    one after the other in the order declared, each at its alignment, and the whole rounded up
    to 16 bytes (or the dynamic array's alignment) when there is dynamic shared memory after
    it, as ptxas reports them."""
    offset, after = 0, 0
    for extern, align, bits, count in _SHARED.findall(ptx):
        size = int(bits) // 8
        align = int(align) if align else size
        if extern:
            after = max(after, 16, align)
            continue
        offset = -(-offset // align) * align + size * int(count or 1)
    return -(-offset // after) * after if after else offset


def resources(ptx, entry=None):
    """What the driver would report of kernel ``entry`` of ``ptx`` (the first one by default),
    from ``ptxas -v`` for the PTX's target: ``num_regs``, ``shared_size_bytes`` (static),
    ``local_size_bytes`` (stack frame), ``const_size_bytes`` (the module's ``.const`` data) and
    ``max_threads_per_block`` (as registers allow: 64 K a block, allocated 256 a warp).  None
    when ptxas cannot be found or refuses the PTX."""
    ptxas = find_tool("ptxas")
    target = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
    if ptxas is None or target is None:
        return None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            done, _ = _assemble(ptxas, ptx, target.group(1), tmp, "-v", timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode:
        return None
    report = done.stdout + done.stderr
    start = report.find(f"Compiling entry function '{entry}'" if entry else
                        "Compiling entry function")
    if start < 0:
        return None
    section = report[start:]
    following = section.find("Compiling entry function", 1)
    section = section if following < 0 else section[:following]
    used = re.search(r"Used (\d+) registers", section)
    if used is None:
        return None
    regs = int(used.group(1))

    def number(pattern):
        found = re.search(pattern, section)
        return int(found.group(1)) if found else 0
    const = sum(int(bits) // 8 * int(count or 1) for _, bits, count in _CONST.findall(ptx))
    ntid = re.search(r"\.maxntid\s+(\d+)(?:,\s*(\d+))?(?:,\s*(\d+))?", ptx)
    limit = 1024
    if ntid:
        limit = 1
        for n in ntid.groups():
            limit *= int(n or 1)
    per_warp = max(256, -(-regs * 32 // 256) * 256)
    return {"num_regs": regs, "shared_size_bytes": number(r"(\d+) bytes smem"),
            "local_size_bytes": number(r"(\d+) bytes stack frame"), "const_size_bytes": const,
            "max_threads_per_block": min(limit, 65536 // per_warp * 32)}
