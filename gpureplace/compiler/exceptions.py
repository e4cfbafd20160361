"""Exceptions raised in device code, as ``cuda.jit(debug=True)`` reports them to the host.

Numba lowers ``raise ValueError("...")`` (and the errors its own code raises: a tuple index out
of range, a division by zero under Python's error model) to a return of a status code from the
device function, which every caller passes on.  The codes come from one registry per process
(``register``), so that the device functions of one kernel, compiled separately, never give one
code two meanings; each compiled function keeps the codes its lowering returned
(``CompiledFunction.exception_codes``), and a kernel the map of its call graph's codes.

A debug kernel's entry (``record_status``) writes the first failing thread's code and its
thread and block indices into the module global ``EXCEPTION_GLOBAL`` (a compare-and-swap from
zero, so the first exception wins); the launch then synchronises, reads it and raises the
exception with numba-cuda's prefix (``raise_from_record``).  Without ``debug`` the codes stop
the thread and nothing else, as in numba-cuda.  A debug kernel is never put in the disk cache:
its codes mean something only in the process that compiled it.
"""

from __future__ import annotations

import os
import threading

from llvmlite import ir
from numba.core import callconv

#: The module global of a debug kernel: [code, tid.x, tid.y, tid.z, ctaid.x, ctaid.y, ctaid.z].
EXCEPTION_GLOBAL = "__gpureplace_exception"
EXCEPTION_WORDS = 7

_lock = threading.Lock()
_by_code = {}                 # code -> (exception class, args, (function, file, line) or None)
_by_info = {}                 # the same, the other way (hashable ones), so recompiles reuse codes


def register(exc, exc_args, locinfo):
    """The status code that means raising ``exc(*exc_args)`` at ``locinfo``."""
    info = (exc, exc_args, locinfo)
    try:
        hash(info)
    except TypeError:
        info_key = None
    else:
        info_key = info
    with _lock:
        code = _by_info.get(info_key) if info_key is not None else None
        if code is None:
            code = callconv.FIRST_USEREXC + len(_by_code)
            _by_code[code] = info
            if info_key is not None:
                _by_info[info_key] = code
    return code


def lookup(code):
    return _by_code.get(code)


class GPUCallConv(callconv.MinimalCallConv):
    """Numba's minimal calling convention (a status code returned, the value through a
    pointer), with exception codes from the process-wide registry."""

    def return_user_exc(self, builder, exc, exc_args=None, loc=None, func_name=None):
        if exc is not None and not (isinstance(exc, type) and issubclass(exc, BaseException)):
            raise TypeError(f"exc should be None or an exception class, got {exc!r}")
        if exc_args is not None and not isinstance(exc_args, tuple):
            raise TypeError(f"exc_args should be None or a tuple, got {exc_args!r}")
        locinfo = None
        if loc is not None:
            fname = loc._raw_function_name() or func_name
            if fname is not None and loc.filename is not None and loc.line is not None:
                locinfo = (fname, loc.filename, loc.line)
        from .frontend import current_compiled, lowering_location
        if locinfo is None:
            # Numba's own raises (a tuple index, a division by zero) carry no location: the
            # statement being lowered is the user's line
            locinfo = lowering_location()
        code = register(exc, exc_args, locinfo)
        cf = current_compiled()
        if cf is not None:
            cf.exception_codes.add(code)
        self._return_errcode_raw(builder, ir.Constant(ir.IntType(32), code))


def record_status(builder, status):
    """In a debug kernel's entry, after the call of its body: a failing thread records its code
    and position in ``EXCEPTION_GLOBAL`` (the first one only) and returns."""
    mod = builder.module
    i32 = ir.IntType(32)
    gv = mod.globals.get(EXCEPTION_GLOBAL)
    if gv is None:
        gv = ir.GlobalVariable(mod, ir.ArrayType(i32, EXCEPTION_WORDS), EXCEPTION_GLOBAL,
                               addrspace=1)
        gv.initializer = ir.Constant(gv.value_type, None)
        gv.align = 4
    with builder.if_then(status.is_error, likely=False):
        slot = builder.gep(gv, [i32(0), i32(0)], inbounds=True)
        first = builder.cmpxchg(slot, i32(0), status.code, "monotonic", "monotonic")
        won = builder.icmp_unsigned("==", builder.extract_value(first, 0), i32(0))
        with builder.if_then(won):
            regs = [f"llvm.nvvm.read.ptx.sreg.{r}.{a}" for r in ("tid", "ctaid") for a in "xyz"]
            for i, name in enumerate(regs, start=1):
                fn = mod.globals.get(name) or ir.Function(mod, ir.FunctionType(i32, []), name)
                builder.store(builder.call(fn, []),
                              builder.gep(gv, [i32(0), i32(i)], inbounds=True))


def exceptions_of(cf):
    """{code: (class, args, locinfo)} of every exception ``cf``'s call graph may raise."""
    out = {}
    for each in cf.closure():
        for code in each.exception_codes:
            info = lookup(code)
            if info is not None:
                out[code] = info
    return out


def raise_from_record(name, exceptions, words):
    """Raise what a debug kernel recorded (``words``: the global's seven ints), as numba-cuda
    words it: ``In function 'f', file /path.py, line 12, tid=[0, 0, 0] ctaid=[0, 0, 0]: msg``."""
    code = int(words[0])
    tid = [int(v) for v in words[1:4]]
    ctaid = [int(v) for v in words[4:7]]
    info = exceptions.get(code)
    if info is None:
        exc, args, loc = SystemError, (f"kernel {name}: unknown error code {code}",), None
    else:
        exc, args, loc = info
    where = ""
    if loc is not None:
        func, path, line = loc
        where = f"In function {func!r}, file {os.path.abspath(path)}, line {line}, "
    prefix = f"{where}tid={tid} ctaid={ctaid}"
    args = (f"{prefix}: {args[0]}",) + tuple(args[1:]) if args else (prefix,)
    raise (exc or SystemError)(*args)
