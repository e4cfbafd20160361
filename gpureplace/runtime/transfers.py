"""Host arrays around one launch: copied into device memory before it and back after it.

Two ways in: numba-cuda's hints (``cuda.In`` / ``Out`` / ``InOut``, ``runtime/hints.py``) and a
plain host NumPy array given to a kernel, which numba-cuda treats as ``InOut`` with a performance
warning (``settings.host_arrays`` says whether to warn, copy quietly or refuse).  The device copy
is raw device memory described by ``__cuda_array_interface__`` (a ``DeviceCopy``), not a CuPy
array, so every dtype a kernel takes travels, records included; the copies and the kernel go on
the launch's stream and the launch waits for the copies back.  Only the general launch path
comes here: the generated fast path never sees a host array.
"""

from __future__ import annotations

import warnings

import numpy as np
from numba.core.errors import NumbaPerformanceWarning

from .. import probe
from ..compiler.abi import contiguous_strides
from ..compiler.bfloat16 import is_bfloat16_dtype, register_dtype
from ..errors import PerformanceWarning, user_stacklevel
from . import arguments
from .hints import ArgHint


class HostArrayWarning(PerformanceWarning, NumbaPerformanceWarning):
    """A host NumPy array was copied to the device and back around a launch."""


class DeviceCopy:
    """Device memory holding one host array for one launch.  ``readonly``: the kernel gets it as
    a read-only array (a read-only host array given as it is: a kernel that writes it does not
    compile, as in the simulator, and nothing is copied back)."""

    __slots__ = ("host", "staging", "mem", "copy_out", "readonly")

    def __init__(self, host, copy_in, copy_out, stream, readonly=False):
        # One memcpy each way needs contiguous host memory: a strided view goes through a
        # contiguous staging copy (written back into the view afterwards).
        contiguous = host.flags.c_contiguous or host.flags.f_contiguous
        staging = host if contiguous else np.ascontiguousarray(host)
        self.host, self.staging, self.copy_out = host, staging, copy_out and not readonly
        self.readonly = readonly
        cp = probe.cupy_module()
        self.mem = cp.cuda.alloc(staging.nbytes) if staging.nbytes else None
        if copy_in and self.mem is not None:
            rt = cp.cuda.runtime
            rt.memcpyAsync(self.mem.ptr, staging.ctypes.data, staging.nbytes,
                           rt.memcpyHostToDevice, stream)

    @property
    def ptr(self):
        return 0 if self.mem is None else self.mem.ptr

    @property
    def __cuda_array_interface__(self):
        s = self.staging
        return {"shape": s.shape, "typestr": s.dtype.str, "descr": s.dtype.descr,
                "data": (self.ptr, self.readonly), "version": 3,
                "strides": None if s.flags.c_contiguous else s.strides}


def _device_copy_argument(c):
    s = c.staging
    return arguments.array_argument(s.dtype, c.ptr, s.shape, s.strides, c.readonly)


arguments.register_handler(DeviceCopy, _device_copy_argument)


def host_array_argument(a, readonly=None):
    """(key, values) a host array will launch with once copied: its layout as the copy has it
    (a strided view is copied into C order), at address 0; read-only as the array is (unless
    ``readonly`` says otherwise: a ``cuda.In`` copy is the kernel's to write)."""
    if readonly is None:
        readonly = not a.flags.writeable
    if a.flags.c_contiguous or a.flags.f_contiguous:
        return arguments.array_argument(a.dtype, 0, a.shape, a.strides, readonly)
    return arguments.array_argument(a.dtype, 0, a.shape,
                                    contiguous_strides(a.shape, a.dtype.itemsize), readonly)


def copy_back(copies, stream):
    """Write the device copies that go back into their host arrays; returns once they have
    (and so once the kernel before them on ``stream`` has finished)."""
    rt = probe.cupy_module().cuda.runtime
    for c in copies:
        if c.copy_out and c.mem is not None:
            rt.memcpyAsync(c.staging.ctypes.data, c.mem.ptr, c.staging.nbytes,
                           rt.memcpyDeviceToHost, stream)
    rt.streamSynchronize(stream)
    for c in copies:
        if c.copy_out and c.staging is not c.host:
            c.host[...] = c.staging


def is_host_array(a):
    """A NumPy array in host memory that the GPU cannot address (a mapped array can: it has a
    ``__cuda_array_interface__``; so can the simulator's device arrays, which have
    ``copy_to_host``)."""
    return isinstance(a, np.ndarray) and not hasattr(a, "__cuda_array_interface__") and \
        not hasattr(a, "copy_to_host")


def holds_host_array(a):
    """A host array, or a tuple holding one (at any depth)."""
    if isinstance(a, tuple):
        return any(holds_host_array(x) for x in a)
    return is_host_array(a)


def buffer_key(host):
    """Host arrays with the same key are the same memory seen the same way (address, dtype,
    shape, strides): one launch stages them as one copy."""
    return host.__array_interface__["data"][0], host.dtype, host.shape, host.strides


def transfer_of(host, hint):
    """(buffer key, copy in, copy out) of host array ``host`` given as ``hint`` (None: as it
    is).  The key says whether the copy is read-only: a read-only host array given as it is
    (``cuda.Out`` / ``InOut`` of one are refused before this)."""
    readonly = hint is None and not host.flags.writeable
    return (buffer_key(host) + (readonly,), hint is None or hint.copy_in,
            (hint is None or hint.copy_out) and host.flags.writeable)


def host_leaves(args, tuples=True):
    """(argument index, host array, hint or None) for each host array among ``args``: given as
    it is, in a cuda.In / Out / InOut, or (with ``tuples``) inside a tuple, at any depth."""
    for i, a in enumerate(args):
        if isinstance(a, ArgHint):
            if is_host_array(a.value):
                yield i, a.value, a
        elif is_host_array(a):
            yield i, a, None
        elif tuples and isinstance(a, tuple):
            for leaf in _tuple_leaves(a):
                yield i, leaf, None


def _tuple_leaves(tup):
    for x in tup:
        if isinstance(x, tuple):
            yield from _tuple_leaves(x)
        elif is_host_array(x):
            yield x


def _overlap(a, b):
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=1 << 16))
    except Exception:                       # (too hard to tell: taken as overlapping)
        return True


def dtype_problem(dt, a="a"):
    """Why an array of dtype ``dt`` (called ``a``) has no form a kernel can use, with what to
    pass instead: a byte order other than the machine's (fields included), long double; None
    when it has none of these."""
    swapped = [f"{field}: {f[0].str}" for field, f in (dt.fields or {}).items()
               if not f[0].isnative]
    if swapped:
        return (f"has a structured dtype with fields in another byte order than this machine's "
                f"({', '.join(swapped)}); pass {a}.astype({a}.dtype.newbyteorder('='))")
    if not dt.isnative:
        order = "big" if dt.byteorder == ">" else "little"
        return (f"has dtype {dt.str} ({order}-endian, not this machine's byte order); pass "
                f"{a}.astype({dt.newbyteorder('=').str!r})")
    return arguments.long_double(dt, lambda wide: f"{a}.astype({wide})")


def refuse_untyped(kernel, args, names):
    """Refuse, naming it, a host array that has no device form: a masked array, Python objects,
    a byte order other than the machine's, long double, raw bytes (Numba would fail deep inside
    the launch, naming neither the argument nor its dtype)."""
    from numba import typeof
    for i, host, _ in host_leaves(args):
        dt = host.dtype
        direct = i < len(names) and args[i] is host
        name = f"{i} ({names[i]!r})" if i < len(names) else str(i)
        what = f"argument {name} " + ("" if direct else "holds an array that ")
        a = names[i] if direct else "a"
        if isinstance(host, np.ma.MaskedArray):
            why = (f"is a NumPy masked array, which kernels cannot take as one: pass its data "
                   f"and its mask as two arrays (np.ma.getdata({a}), np.ma.getmaskarray({a})), "
                   f"or {a}.filled(value)")
        elif dt.hasobject:
            why = f"has dtype {dt}, whose Python objects have no device form; pass numbers"
        elif (why := dtype_problem(dt, a)) is not None:
            pass
        else:
            if is_bfloat16_dtype(dt):
                register_dtype()       # (ml_dtypes' bfloat16: Numba knows it once registered)
            try:
                typeof(host)
                continue
            except Exception as exc:                     # (raw bytes 'V4', ...)
                why = f"has dtype {dt}, which kernels cannot take ({exc})"
        raise arguments.ArgumentError(f"{kernel}: {what}{why}")


def read_only_note(kernel, pysig, exc, args):
    """``exc`` (a compile error of a launch of ``kernel``, whose signature is ``pysig``), where
    it is a write into a read-only array and read-only host arrays are among ``args`` as they
    are, said with the arguments that hold them (the kernel was typed with them read-only: a
    read-only NumPy array's device copy is not copied back); None otherwise."""
    reason = getattr(exc, "reason", "")
    if "Cannot modify readonly array" not in reason and \
            "the array is read-only" not in reason:
        return None
    names = list(pysig.parameters)
    said = []
    for i, a in enumerate(args):
        name = names[i] if i < len(names) else str(i)
        places = [] if isinstance(a, ArgHint) else _read_only_places(a, name)
        if places == [name]:
            said.append(f"argument {i} ({name!r}) is a read-only NumPy array")
        elif places:
            said.append(f"argument {i} ({name!r}) holds a read-only NumPy array in "
                        f"{', '.join(places)}")
    if not said:
        return None
    advice = "" if "a.copy()" in reason else (       # (already advised: compiler/resolve.py)
        ": what the kernel writes could not be copied back into it; pass a writable array "
        "(a.copy()), or cuda.In(a) for a copy the kernel may write")
    noted = type(exc)(f"{reason} ({kernel}: {'; '.join(said)}, typed read-only{advice})",
                      function=exc.function, filename=exc.filename, lineno=exc.lineno,
                      chain=exc.chain, detail=exc.detail)
    noted.__dict__.update({k: v for k, v in exc.__dict__.items()     # (typing, lowering)
                           if k not in noted.__dict__})
    return noted


def _read_only_places(a, name):
    """Where argument ``a``, called ``name``, holds read-only host arrays (given as they are):
    ``a``; ``p.x`` (a namedtuple's field); ``t[0]`` (a tuple's item)."""
    if isinstance(a, tuple):
        fields = getattr(type(a), "_fields", None)
        places = []
        for i, x in enumerate(a):
            places.extend(_read_only_places(x, f"{name}.{fields[i]}" if fields else
                                            f"{name}[{i}]"))
        return places
    return [name] if is_host_array(a) and not a.flags.writeable else []


def is_host_record(a):
    """A structured scalar (``recs[i]``: ``np.void``, or ``np.record`` of a recarray) given to a
    launch: copied to the device and back on its own, as numba-cuda does (unless its array is
    read-only: ``arguments.record_handler``), on both backends."""
    return isinstance(a, np.void) and a.dtype.names is not None


def holds_host_record(a):
    """A host record, or a tuple holding one (at any depth)."""
    if isinstance(a, tuple):
        return any(holds_host_record(x) for x in a)
    return is_host_record(a)


def _copied_back(args):
    """(argument index, host memory, is a record) for each host array and host record among
    ``args`` (as they are, in a cuda.In / Out / InOut, or inside a tuple at any depth) that is
    copied back after the launch; a record as the 0-d array of its bytes in its array."""
    def leaves(a, top):
        if top and isinstance(a, ArgHint):
            if is_host_array(a.value) and transfer_of(a.value, a)[2]:
                yield a.value, False
        elif is_host_array(a):
            if transfer_of(a, None)[2]:
                yield a, False
        elif is_host_record(a):
            if a.flags.writeable:         # (a read-only array's record is not written back)
                yield np.asarray(a), True
        elif isinstance(a, tuple):
            for x in a:
                yield from leaves(x, False)
    for i, a in enumerate(args):
        for host, record in leaves(a, True):
            yield i, host, record


def refuse_overlaps(kernel, args, names):
    """Refuse, naming them, two host arrays or records of one launch that are different views
    of overlapping memory and are both copied back: each would get its own device copy, and the
    second copy-back would overwrite what the kernel wrote through the first (the same array,
    or the same view, given twice is one copy: see ``Staged``; a record, ``recs[i]``, always
    gets a copy of its own, so a record and its array, or the same record given twice, are
    refused).  Both backends refuse, though the simulator, whose device memory is the host's,
    could run two array views."""
    written = {}
    for i, host, record in _copied_back(args):
        key = buffer_key(host)
        if key in written and not record and not written[key][2]:
            continue                     # the same array or view again: one copy
        for j, other, other_record in written.values():
            if not _overlap(host, other):
                continue

            def said(k):
                return f"{k} ({names[k]!r})" if k < len(names) else str(k)
            which = f"argument {said(j)} and argument {said(i)} are" if i != j else \
                f"argument {said(i)} holds"
            if not record and not other_record:
                what, advice = "different views of overlapping host memory", \
                    "Pass the array once (or the same view)"
            elif record and other_record and buffer_key(other) == key:
                what, advice = "the same host record given twice", "Pass the record once"
            elif record and other_record:
                what, advice = "host records of overlapping memory", "Pass one of them"
            else:
                what = "a host record and the array it is part of" if other_record else \
                    "a host array and a record of it (a[i])"
                advice = "Pass the array alone (and index it in the kernel)"
            raise arguments.ArgumentError(
                f"{kernel}: {which} {what}, each copied to the device and back on its own: "
                f"one copy-back would overwrite what the kernel wrote through the other. "
                f"{advice}, or device arrays (cuda.to_device(a), cupy.asarray(a))")
        written[key] = (i, host, record)


class Staged:
    """The device copies of one launch's host arrays: one per distinct host buffer (the same
    array, or identical views of it, given twice -- as two arguments, in a tuple, as a hint
    and as it is -- is one copy, copied in if any of them asks, written back once if any of
    them asks)."""

    def __init__(self, args, stream):
        self.stream, self.copies, self.wants = stream, {}, {}
        for _, host, hint in host_leaves(args):
            key, copy_in, copy_out = transfer_of(host, hint)
            want = self.wants.setdefault(key, [False, False])
            want[0] |= copy_in
            want[1] |= copy_out

    def copy_of(self, host, hint=None):
        key = transfer_of(host, hint)[0]
        c = self.copies.get(key)
        if c is None:
            copy_in, copy_out = self.wants[key]
            c = self.copies[key] = DeviceCopy(host, copy_in, copy_out, self.stream, key[-1])
        return c

    def stage_tuple(self, tup):
        """``tup`` with each host array in it (at any depth) replaced by its device copy; a
        namedtuple keeps its class."""
        items = [self.stage_tuple(x) if isinstance(x, tuple) else
                 self.copy_of(x) if is_host_array(x) else x for x in tup]
        return type(tup)(*items) if hasattr(type(tup), "_fields") else tuple(items)

    def copy_back(self):
        copy_back(list(self.copies.values()), self.stream)


def host_array_names(args, names):
    """``"0 ('x'), 2 ('out')"``: the host arrays among ``args``."""
    return ", ".join(f"{i} ({names[i]!r})" if i < len(names) else str(i)
                     for i, a in enumerate(args) if holds_host_array(a))


def refuse_host_arrays(kernel, args, names, simulated):
    where = " (the simulator's device arrays come from cuda.to_device / cuda.device_array)" \
        if simulated else ""
    raise arguments.ArgumentError(
        f"{kernel}: argument {host_array_names(args, names)} is a host NumPy array, which "
        f"settings.host_arrays = 'error' refuses (GPUREPLACE_HOST_ARRAYS, or %config "
        f"GPUReplace.host_arrays): pass device arrays (cupy.asarray(a), or "
        f"cuda.to_device(a)){where}")


def warn_host_arrays(kernel, args, names):
    """numba-cuda's performance warning for host arrays given to a launch, naming them and the
    user's line that launched."""
    which = host_array_names(args, names)
    warnings.warn(HostArrayWarning(
        f"{kernel}: argument {which} is a host NumPy array. Host array used in CUDA kernel will "
        f"incur copy overhead to and from the device: it is copied before the launch and back "
        f"after it, and the launch waits for the kernel. Pass device arrays (cupy.asarray(a), "
        f"cuda.to_device(a)) to keep data on the GPU, or set GPUREPLACE_HOST_ARRAYS=copy to "
        f"copy without this warning (=error to refuse host arrays)."),
        stacklevel=user_stacklevel())


