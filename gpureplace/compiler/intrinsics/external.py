"""``cuda.declare_device``: device functions written in CUDA C (or PTX) and linked in.

    mul = cuda.declare_device("mul_f32", "float32(float32, float32)", link="functions.cu")

    @cuda.jit            # or @cuda.jit(link=["functions.cu"]) with a declaration without link=
    def k(x, y, out):
        i = cuda.grid(1)
        out[i] = mul(x[i], y[i])

The external function follows numba-cuda's ABI: ``extern "C" __device__ int mul_f32(float *ret,
float a, float b)`` stores its result through the first argument and returns 0 (``abi="c"``: a
plain ``extern "C" __device__ float mul_f32(float a, float b)``).  The kernel's PTX declares the
symbol; the runtime links the files at load time (runtime/linking.py).
"""

from __future__ import annotations

import os

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.imputils import Registry as LoweringRegistry
from numba.core.typing.templates import ConcreteTemplate, Registry

from ..signature import normalize_signature

typing = Registry()
lowering = LoweringRegistry()

__all__ = ["declare_device", "CUSource", "PTXSource", "Cubin", "Fatbin", "Object", "Archive",
           "LTOIR", "LinkableCode"]

#: symbol -> the link files its declarations named (the runtime adds them to any kernel whose PTX
#: calls the symbol)
LINKS = {}
#: symbols declared with declare_device (calls to them are resolved when the kernel is loaded)
DECLARED = set()


class DeclaredDevice:
    """A device function of another language, callable from kernels (``declare_device``)."""

    def __init__(self, name, sig, link, abi):
        self.__name__ = self.symbol = self.name = name
        self.__qualname__ = f"declare_device({name!r})"
        self.sig = sig
        self.link = link
        self.abi = abi
        self._type = None

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.symbol} is a device function declared with "
                           f"cuda.declare_device: it can only be called from kernels on the GPU")

    def __repr__(self):
        return f"<declared device function {self.symbol}{self.sig}>"

    def __fingerprint_parts__(self):
        """What a kernel calling it depends on (tracking/fingerprint.py): the symbol, the
        signature and ABI the call is compiled for, and the code linked for it (a file by its
        path -- read when the kernel loads -- in-memory code by its bytes)."""
        links = tuple(os.fspath(f) if isinstance(f, (str, os.PathLike)) else
                      (type(f).__name__, _digest(f.data)) for f in (self.link or ()))
        return (self.symbol, str(self.sig), self.abi, links)

    def numba_type(self):
        if self._type is None:
            self._type = _make_type(self)
        return self._type


def _digest(data):
    import hashlib
    return hashlib.sha256(data.encode() if isinstance(data, str) else bytes(data)).hexdigest()


def _make_type(decl):
    sig = decl.sig

    class _Template(ConcreteTemplate):
        key = decl
        cases = [sig]

    def impl(context, builder, sig, args):
        if decl.abi == "numba":
            # numba-cuda's ABI is Numba's calling convention: int f(ret *out, args...), an
            # array argument as Numba's array structure flattened (meminfo, parent, nitems,
            # itemsize, data, shape..., strides...).
            fnty = context.call_conv.get_function_type(sig.return_type, sig.args)
            fn = cgutils.get_or_insert_function(builder.module, fnty, decl.symbol)
            _, res = context.call_conv.call_function(builder, fn, sig.return_type, sig.args,
                                                     list(args))
            return context.get_dummy_value() if sig.return_type == types.void else res
        # the C ABI: the arguments and the result as C passes them
        argtys = [context.get_value_type(a) for a in sig.args]
        ret = ir.VoidType() if sig.return_type == types.void else \
            context.get_value_type(sig.return_type)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, argtys),
                                            decl.symbol)
        res = builder.call(fn, list(args))
        return context.get_dummy_value() if sig.return_type == types.void else res
    lowering.lower(decl, *sig.args)(impl)
    return types.Function(_Template)


_SCALARS = (types.Integer, types.Float, types.Boolean, types.CPointer, types.NoneType)


def declare_device(name, sig, link=None, use_cooperative=False, abi="numba"):
    """Declare ``name``, a device function written in CUDA C or PTX with signature ``sig``
    (``"float32(float32, int32)"``), for kernels to call.  ``link``: the file(s) (``.cu``,
    ``.ptx``, ``.cubin``, ``.fatbin``, ``.o``, ``.a``) that define it, linked into every kernel
    that calls it."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"declare_device: name must be a C identifier, got {name!r}")
    if abi not in ("numba", "c"):
        raise ValueError(f"declare_device: abi must be 'numba' or 'c', got {abi!r}")
    if use_cooperative:
        raise ValueError("declare_device(use_cooperative=True): cooperative launches are not "
                         "supported")
    args, ret = normalize_signature(sig, f"declare_device({name!r})")
    if ret is None:
        raise TypeError(f"declare_device({name!r}): Return type must be provided for device "
                        f"declarations (write 'void(...)' for a function that returns nothing)")
    if ret != types.void and not isinstance(ret, _SCALARS):
        raise TypeError(f"declare_device({name!r}): return type {ret} is not a scalar or "
                        f"pointer type")
    for i, ty in enumerate(args):
        if isinstance(ty, _SCALARS) or abi == "numba" and isinstance(ty, types.Array):
            continue
        raise TypeError(f"declare_device({name!r}): argument {i} {ty} is not a scalar or pointer "
                        f"type (external device functions take scalars and pointers, and "
                        f"arrays under abi='numba')")
    files = link_files(link, f"declare_device({name!r}, link=...)")
    from numba.core.typing import signature
    decl = DeclaredDevice(name, signature(ret, *args), files, abi)
    DECLARED.add(name)
    if files:
        LINKS[name] = files
    else:
        LINKS.pop(name, None)
    return decl


#: what a link file may be: CUDA C++ (compiled by NVRTC), PTX, and the linker's binary inputs
#: (LTO-IR is refused when linking, with the reason)
LINKABLE_SUFFIXES = (".cu", ".ptx", ".cubin", ".fatbin", ".o", ".a", ".ltoir")


def link_files(link, what):
    """The link items of ``link``: absolute paths of files, and ``LinkableCode`` objects (code
    held in memory) as they are."""
    if link is None:
        return ()
    files = (link,) if isinstance(link, (str, os.PathLike, LinkableCode)) else tuple(link)
    out = []
    for f in files:
        if isinstance(f, LinkableCode):
            out.append(f)
            continue
        if not isinstance(f, (str, os.PathLike)):
            raise TypeError(f"{what}: {f!r} is neither a file path nor linkable code "
                            f"(cuda.CUSource, PTXSource, Cubin, Fatbin, Object, Archive)")
        path = os.path.abspath(os.fspath(f))
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{what}: no file {path}")
        if os.path.splitext(path)[1].lower() not in LINKABLE_SUFFIXES:
            raise ValueError(f"{what}: {path} is not a file device code links with: its name "
                             f"must end in {', '.join(LINKABLE_SUFFIXES)}")
        out.append(path)
    return tuple(out)


class LinkableCode:
    """Device code held in memory, to link like a file (numba-cuda's ``cuda.CUSource(...)``,
    ``PTXSource``, ``Cubin``, ``Fatbin``, ``Object``, ``Archive``): ``data`` is the source text
    or the bytes, ``name`` what error messages call it.  ``setup_callback(module)`` runs once a
    module linked with it is loaded (the CuPy module), ``teardown_callback(module)`` when that
    module is released."""

    kind = None
    suffix = ""

    def __init__(self, data, name=None, setup_callback=None, teardown_callback=None):
        if not isinstance(data, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"cuda.{type(self).__name__}(data): data must be the code as str or "
                            f"bytes, got {type(data).__name__}")
        for what, cb in (("setup_callback", setup_callback),
                         ("teardown_callback", teardown_callback)):
            if cb is not None and not callable(cb):
                raise TypeError(f"cuda.{type(self).__name__}: {what} must be callable")
        self.data = data
        self.name = name or f"<unnamed-{type(self).__name__}>{self.suffix}"
        self.setup_callback = setup_callback
        self.teardown_callback = teardown_callback

    @classmethod
    def from_path(cls, path):
        mode = "r" if cls is CUSource or cls is PTXSource else "rb"
        with open(path, mode) as fh:
            return cls(fh.read(), name=os.path.basename(path))

    def __repr__(self):
        return f"cuda.{type(self).__name__}(name={self.name!r})"


class CUSource(LinkableCode):
    """CUDA C++ source, compiled with NVRTC for the device at link time."""
    kind, suffix = "cu", ".cu"


class PTXSource(LinkableCode):
    kind, suffix = "ptx", ".ptx"


class Cubin(LinkableCode):
    kind, suffix = "cubin", ".cubin"


class Fatbin(LinkableCode):
    kind, suffix = "fatbin", ".fatbin"


class Object(LinkableCode):
    kind, suffix = "object", ".o"


class Archive(LinkableCode):
    kind, suffix = "archive", ".a"


class LTOIR(LinkableCode):
    """NVVM's link-time-optimisation IR: gpureplace links with the driver's linker, which does
    not take it (linking one is a clear error)."""
    kind, suffix = "ltoir", ".ltoir"
