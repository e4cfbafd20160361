"""libdevice's Payne-Hanek argument reduction compiled once, for kernels without loops.

Double-precision ``sin``, ``cos``, ``tan``, ``sincos`` (and the Bessel functions built on them)
reduce an argument of magnitude 2^31 or more with ``__internal_trig_reduction_slowpathd``, a
rarely taken branch of ~180 lines of IR.  gpureplace inlines it (libdevice_tuning.tune_trig):
as an ABI call in a loop of calls it cost 0.957x of nvcc's code.  But it is most of what LLVM
does for such a kernel: of a small kernel's ~33 ms of O3 and NVPTX on the development machine,
21 ms.  Leaving it as an ordinary function in the same module saves nothing (LLVM compiles it
all the same), so for a kernel with no loop -- where the call sits on a branch taken for huge
arguments only, and measured on the H200 costs nothing (1.002x and 1.007x for one and two calls
per thread; 1.032x in a loop, which keeps the inlined form) -- the reduction is compiled once per
architecture, PTX ISA and libdevice options, kept (in memory and in the disk cache), and its PTX
``.func`` put in place of the declaration in the kernel's PTX.

Not for debug or line-information compiles (their PTX carries debug sections the separately
compiled function would lack) nor fast math (whose denormal mode every function must share).
"""

from __future__ import annotations

import re
import threading

import llvmlite.binding as llvm

SLOWPATH = "__internal_trig_reduction_slowpathd"

_lock = threading.Lock()
_stripped = {}         # pruned libdevice bitcode -> the same with the reduction only declared
_bodies = {}           # (arch, PTX ISA, reflect) -> PTX of the reduction's .func (and data), bytes

_DEFINE = re.compile(r"^define ", re.M)
_LABEL = re.compile(r"^([-\w.$]+|\"[^\"]*\"):", re.M)
_NUMBA_PART = re.compile(r"(B\d+)\.")       # a block Numba's lowering added inside B<offset>
_TARGETS = re.compile(r"label %([-\w.$]+|\"[^\"]*\")")


def has_loop(texts):
    """Whether any function in the LLVM IR ``texts`` has a loop: a branch back to a block laid
    out at or before the one it leaves.  Numba lays out its blocks (``B<offset>``) in bytecode
    order, a loop's latch after its header; the blocks its lowering adds for an if/else inside
    one of them (``B66.if``, ``B66.endif.else`` ...) are appended after all of them and stand,
    as sources, at their Numba block's place, and as targets for that block's own forward
    flow.  Loops the lowering builds itself (``for.cond`` ...) and other code are taken as they
    are laid out.  ``label %name`` is written only by branches and switches."""
    for text in texts:
        for body in _DEFINE.split(text)[1:]:
            order, here = {}, 0
            for line in body.splitlines():
                m = _LABEL.match(line)
                if m:
                    name = m.group(1).strip('"')
                    order[name] = len(order)
                    parent = _NUMBA_PART.match(name)
                    here = order.get(parent.group(1), order[name]) if parent else order[name]
                    continue
                if "label %" in line:
                    if "indirectbr " in line:
                        return True
                    for target in _TARGETS.findall(line):
                        target = target.strip('"')
                        if _NUMBA_PART.match(target):
                            continue            # within the block it belongs to: forward
                        at = order.get(target)
                        if at is not None and at <= here:
                            return True
    return False


def wanted(needed, options):
    """Whether a kernel needing the libdevice functions ``needed``, compiled with ``options``,
    gets the reduction compiled once (given that it has no loop)."""
    if options.fastmath or options.debug or options.lineinfo:
        return False
    from .libdevice_link import reaches
    return any(reaches(name, SLOWPATH) for name in needed)


def without_slowpath(bitcode: bytes) -> bytes:
    """Pruned libdevice ``bitcode`` with the reduction declared instead of defined."""
    hit = _stripped.get(bitcode)
    if hit is not None:
        return hit
    text = str(llvm.parse_bitcode(bitcode))
    m = re.search(r"^define [^\n]*@" + SLOWPATH + r"\(([^)]*)\)[^\n]*\{\n.*?^\}\n", text,
                  re.M | re.S)
    if m is None:
        return bitcode
    ret = re.match(r"define (?:internal |private )?(?:\w+ )*?(%[\w.]+|\{[^}]*\}) @",
                   m.group(0))
    params = ", ".join(p.strip().split(" ")[0] for p in m.group(1).split(",") if p.strip())
    declaration = f"declare {ret.group(1)} @{SLOWPATH}({params})\n"
    stripped = llvm.parse_assembly(text[:m.start()] + declaration + text[m.end():]).as_bitcode()
    with _lock:
        _stripped[bitcode] = stripped
    return stripped


def body(arch, isa, reflect) -> str:
    """PTX of the reduction as a ``.func`` (with the data it reads), compiled once per
    ``arch``, PTX ``isa`` and ``reflect`` values; kept in memory and in the disk cache."""
    from . import libdevice_link
    from .backend import CODEGEN_REVISION
    from .libdevice_bitcode import _cache_file
    key = (arch, isa, tuple(sorted(reflect.items())))
    return libdevice_link.derived(
        _bodies, key, lambda: _cache_file("slowpath-", (key, CODEGEN_REVISION), ".ptx"),
        lambda: _compile(arch, isa, reflect,
                         libdevice_link.pruned_bitcode({SLOWPATH}, reflect)).encode()).decode()


def _compile(arch, isa, reflect, bitcode):
    from . import backend
    mod = llvm.parse_bitcode(bitcode)
    mod.triple = backend.TRIPLE
    mod.data_layout = backend.data_layout()
    fn = mod.get_function(SLOWPATH)
    fn.linkage = "external"
    backend.internalize_except(mod, {SLOWPATH})
    backend.optimize(mod, arch, isa, 3)
    ptx = backend.emit_ptx(mod, arch, isa)
    lines = ptx.splitlines()
    keep = [line for line in lines
            if not line.startswith((".version", ".target", ".address_size", "//"))]
    out = "\n".join(keep).strip() + "\n"
    return re.sub(r"^\.visible \.func", ".func", out, flags=re.M)


_EXTERN = re.compile(r"^\.extern \.func[^;]*?\b" + SLOWPATH + r"\b[^;]*;\n?", re.M | re.S)
_GLOBAL_NAME = re.compile(r"^(?:\.(?:visible|weak|extern)\s+)?\.(?:global|const)\b[^\n]*?\s"
                          r"([A-Za-z_$][\w$]*)\s*(?:\[|=|;)", re.M)


def splice(ptx, func_text):
    """The kernel's ``ptx`` with the reduction's ``.func`` (``func_text``) where it declares
    it; None when it cannot be (no declaration, or a name both define)."""
    m = _EXTERN.search(ptx)
    if m is None:
        return None
    ours = set(_GLOBAL_NAME.findall(func_text))
    if ours & set(_GLOBAL_NAME.findall(ptx)):
        return None
    return ptx[:m.start()] + func_text + ptx[m.end():]
