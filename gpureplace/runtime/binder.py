"""Per-specialisation binders: the launch hot path, generated once per argument-type signature.

A binder checks that the arguments still have the types of the specialisation it was built for
(class, dtype, rank, layout) and returns the flat parameter values, or None when anything differs
(then the general path in ``arguments`` decides).  Generated source keeps each check inline: no
per-argument function calls, dictionaries or loops on the path of a cached launch.
"""

from __future__ import annotations

from .. import probe
from ..compiler.abi import element_alignment, leaves
from ..tracking import world
from . import arguments, launch, placement
from .launch import param_offsets


def _layout_check(v, ndim, layout, itemsize):
    """Inline expression that is true when array shape ``{v}_sh`` / strides ``{v}_st`` fit ``layout``."""
    if layout == "A":
        return "True"
    terms, expect = [], str(itemsize)
    axes = range(ndim - 1, -1, -1) if layout == "C" else range(ndim)
    for ax in axes:
        terms.append(f"({v}_st[{ax}] == {expect} or {v}_sh[{ax}] == 1)")
        expect = f"{expect} * {v}_sh[{ax}]"
    # Any axis whose check fails makes the general path recompute the key (rare: e.g. 'F' arrays
    # with a length-1 axis that are also 'C').
    return " and ".join(terms) or "True"


def _pointer(v, read, align):
    """Lines that read argument ``v``'s data pointer into ``{v}_p`` (``read``: how) and hand over
    to the general path -- which refuses it by name -- unless it is a multiple of ``align``."""
    return [f"{v}_p = {read}"] + ([f"if {v}_p % {align}: return None"] if align > 1 else [])


def _strides_aligned(v, ndim, align):
    """A line that hands over to the general path (which refuses the array by name, or finds
    the odd stride on an axis of length 1, which is never used) unless every stride of
    ``{v}_st`` is a multiple of ``align`` (a power of two: their bitwise or says it at once)."""
    strides = " | ".join(f"{v}_st[{k}]" for k in range(ndim)) or "0"
    return f"if ({strides}) % {align}: return None"


def _nothing():
    return None


def _checks(args, keys, remember=False, placed=False):
    """Per argument: (source lines that ``return None`` unless it matches, its value expressions,
    whether those values are remembered), and the environment the lines read.

    With ``remember``, contiguous CuPy arrays are remembered between calls (see
    ``_remembered_array``): their lines refer to globals ``R{i}`` (a weak reference to the array
    of the last call), ``V{i}`` (its parameter values) and ``H{i}`` (its shape), which start as a
    reference to nothing, and set ``fresh = True`` when they take another array.

    With ``placed`` (a process with several GPUs), each device array must be on device ``DEV``
    (placement.py; a remembered array is checked when it is taken, its device cannot change).
    """
    env, per_arg = {"_value_key": arguments.value_key}, []
    for i, (arg, key) in enumerate(zip(args, keys)):
        v = f"a{i}"
        handler = arguments.handler_of(arg)
        env[f"C{i}"] = type(arg)
        lines, outs, kept = [], [], False
        away = placement.fast_check(v, handler) if placed else None
        if handler is arguments.cupy_handler:
            _, dt, ndim, layout = key
            env[f"D{i}"] = dt
            align = element_alignment(dt)
            flag = {"C": "_c_contiguous", "F": "_f_contiguous"}.get(layout)
            if flag is not None and not isinstance(getattr(arg, flag, None), bool):
                flag = None                       # a CuPy without the flag: compare strides
            dtype_differs = f"({v}.dtype is not D{i} and {v}.dtype != D{i})"
            if flag is not None and remember and _weakrefable(arg):
                lines, outs, kept = _remembered_array(v, i, ndim, flag, dtype_differs, away,
                                                      align), [f"*V{i}"], True
                env.update({f"R{i}": _nothing, f"V{i}": (), f"H{i}": None})
            elif flag is not None and ndim <= 1:
                # The common case, in one test: a contiguous vector (or 0-d array), whose size is
                # its only shape field; contiguous arrays pass no strides.
                lines.append(f"if type({v}) is not C{i} or {dtype_differs} or not {v}.{flag} "
                              f"or {v}.ndim != {ndim}{f' or {away}' if away else ''}: "
                              f"return None")
                lines += _pointer(v, f"{v}.data.ptr", align)
                outs += [f"{v}_p"] + ([f"{v}.size"] if ndim else [])
            else:
                lines += [f"if type({v}) is not C{i} or {dtype_differs}"
                          f"{f' or {away}' if away else ''}: return None",
                          f"{v}_sh = {v}.shape",
                          f"if len({v}_sh) != {ndim}: return None"]
                if flag is not None:
                    lines.append(f"if not {v}.{flag}: return None")
                elif layout != "A":
                    lines += [f"{v}_st = {v}.strides",
                              f"if not ({_layout_check(v, ndim, layout, dt.itemsize)}): "
                              f"return None"]
                else:
                    lines.append(f"{v}_st = {v}.strides")
                    if align > 1:
                        lines.append(_strides_aligned(v, ndim, align))
                lines += _pointer(v, f"{v}.data.ptr", align)
                outs += [f"{v}_p"] + [f"{v}_sh[{k}]" for k in range(ndim)]
                if layout == "A":
                    outs += [f"{v}_st[{k}]" for k in range(ndim)]
        elif handler is arguments.torch_handler:
            _, dt, ndim, layout = key
            env[f"T{i}"] = arg.dtype
            isz = dt.itemsize
            lines += [f"if type({v}) is not C{i} or {v}.dtype is not T{i} or not {v}.is_cuda"
                      f"{f' or {away}' if away else ''}: return None",
                      f"{v}_sh = {v}.shape",
                      f"if len({v}_sh) != {ndim}: return None"]
            align = element_alignment(dt)
            if layout == "C":
                lines.append(f"if not {v}.is_contiguous(): return None")
            else:
                lines.append(f"{v}_st = tuple(s * {isz} for s in {v}.stride())" if ndim > 1 else
                             f"{v}_st = ({v}.stride(0) * {isz},)")
                if layout == "F":
                    lines.append(f"if not ({_layout_check(v, ndim, layout, isz)}): return None")
                elif align > 1:
                    lines.append(_strides_aligned(v, ndim, align))
            lines += _pointer(v, f"{v}.data_ptr()", align)
            outs += [f"{v}_p"] + [f"{v}_sh[{k}]" for k in range(ndim)]
            if layout == "A":
                outs += [f"{v}_st[{k}]" for k in range(ndim)]
        elif handler in (arguments.int_handler, arguments.float_handler,
                         arguments.bool_handler):
            lines.append(f"if type({v}) is not C{i}: return None")
            if key[0] == "scalar":             # an int of 2**63 or more: uint64 (not smaller)
                lines.append(f"if {v} < {1 << 63}: return None")
            elif key[0] == "pointer":          # negative: the general path refuses
                lines.append(f"if {v} < 0: return None")
            outs.append(v)
        elif handler is arguments.np_scalar_handler and len(key) > 1 and key[1].kind != "c":
            # (a NumPy scalar of a NumPy dtype; complex and ml_dtypes' bfloat16, keyed by kind
            # alone, go to the general handler below)
            lines.append(f"if type({v}) is not C{i}: return None")
            if key[0] == "pointer":
                lines.append(f"if {v} < 0: return None")
            outs.append(v)
        elif handler is arguments.record_handler:
            lines.append("return None")      # copied to the device and back: the general path
        else:
            # Tuples, constants, CAI / DLPack objects, complex: the general handler, then compare.
            env[f"K{i}"] = key
            lines += [f"{v}_k, {v}_v = _value_key({v})",
                      f"if {v}_k != K{i}: return None"]
            if placed:
                env["_elsewhere"] = placement.elsewhere
                lines.append(f"if _elsewhere({v}, DEV) is not None: return None")
            outs.append(f"*{v}_v")
        per_arg.append((lines, outs, kept))
    if remember:
        import weakref
        env["_ref"] = weakref.ref
    return per_arg, env


def _weakrefable(arg):
    import weakref
    try:
        weakref.ref(arg)
    except TypeError:
        return False
    return True


def _remembered_array(v, i, ndim, flag, dtype_differs, away=None, align=1):
    """Lines for a contiguous CuPy array that skip its checks when it is the array of the last
    call: global ``R{i}`` is a weak reference to that array, ``V{i}`` its parameter values and
    ``H{i}`` its shape.

    A CuPy array's dtype, data pointer, size and strides cannot be assigned; only ``shape`` can
    (an in-place reshape that keeps the size), so the same object with the same shape (for a
    vector: the same rank) has the same parameters.  The weak reference keeps nothing alive.
    ``away``: the condition that the array is on another device than the launch's (checked
    when the array is taken: its device cannot change either).
    """
    away = f" or {away}" if away else ""
    # (a contiguous array's elements are aligned where its first is: arguments.array_argument
    # refuses one that is not, before the GPU faults on it)
    taken = ["    " + line for line in _pointer(v, f"{v}.data.ptr", align)]
    if ndim <= 1:
        return [f"if R{i}() is not {v} or {v}.ndim != {ndim}:",
                f"    if type({v}) is not C{i} or {dtype_differs} or not {v}.{flag} or "
                f"{v}.ndim != {ndim}{away}: return None",
                *taken,
                f"    R{i}, V{i}, fresh = _ref({v}), ({v}_p, "
                f"{f'{v}.size' if ndim else ''}), True"]
    return [f"if R{i}() is not {v} or {v}.shape != H{i}:",
            f"    if type({v}) is not C{i} or {dtype_differs}{away}: return None",
            f"    {v}_sh = {v}.shape",
            f"    if len({v}_sh) != {ndim} or not {v}.{flag}: return None",
            *taken,
            f"    R{i}, V{i}, H{i}, fresh = _ref({v}), ({v}_p, *{v}_sh), {v}_sh, True"]


def _build(name, params, lines, env, tail, head=()):
    body = "\n    ".join(list(head) + lines + tail)
    src = f"def {name}({', '.join(params)}):\n    {body}\n"
    exec(compile(src, f"<gpureplace {name}>", "exec"), env)
    fn = env[name]
    fn.source = src
    return fn


def make_binder(args, keys):
    """Build ``bind(*args) -> values | None`` for arguments shaped like ``args`` with ``keys``."""
    per_arg, env = _checks(args, keys)
    lines = [line for lines, _, _ in per_arg for line in lines]
    result = ", ".join(out for _, outs, _ in per_arg for out in outs)
    n_outs = sum(len(outs) for _, outs, _ in per_arg)
    return _build("bind", [f"a{i}" for i in range(len(args))], lines, env,
                  [f"return ({result}{',' if n_outs == 1 else ''})"])


def _volatile_packers(keys, per_arg, fmt):
    """The parameters a launch must pack although the remembered arrays did not change: runs of
    consecutive values, each as (``pack_into`` of a struct with its padding, offset, value
    expressions)."""
    import struct
    offsets, letters = param_offsets(fmt)
    runs, pos = [], 0
    for key, (_, outs, kept) in zip(keys, per_arg):
        # the values the parameter's type passes (a contiguous array given for an 'A' parameter
        # passes its strides too: more than the array's own key has)
        count = len(leaves(arguments.numba_type_of_key(key)))
        if not kept and count:
            flat = list(range(pos, pos + count))
            if runs and runs[-1][0][-1] == pos - 1:
                runs[-1][0].extend(flat)
                runs[-1][1].extend(outs)
            else:
                runs.append((flat, list(outs)))
        pos += count
    if pos != len(letters):
        raise AssertionError(f"{pos} parameter values for the format {fmt!r}")
    packers = []
    for flat, outs in runs:
        start, layout = offsets[flat[0]], "="
        for k in flat:
            layout += "x" * (offsets[k] - start - struct.calcsize(layout)) + letters[k]
        packers.append((struct.Struct(layout).pack_into, start, outs))
    return packers


class _Miss(Exception):
    """An argument the fast launch was not built for (it hands over to the general path)."""


def make_fast_launch(args, keys, loaded, age, general, retry=(), label=None):
    """Build ``launch(config, *args)``: the whole cached launch in one generated function, made
    the ``__call__`` of the kernel's launch configurations.

    It checks the world age, the argument count and types, packs the parameters and calls
    ``cuLaunchKernel``.  When anything differs it launches nothing and returns
    ``general(config, args)``, the general path (which compiles, loads, and builds the next such
    function).  It also hands over when the launch raises one of ``retry``: a value that does not
    fit its parameter, or the driver refusing a function of another context -- a thread's first
    launch, or another current device -- which the general path sets right.

    The parameter buffer is the loaded kernel's and outlives each launch.  While it holds what
    this function packed (``loaded.packed_by``) and every remembered array is the one of the last
    launch, only the other values (scalars, ...) are packed again.
    """
    import struct

    n = len(args)
    placed = placement.multi_gpu()
    per_arg, env = _checks(args, keys, remember=True, placed=placed)
    kept = [i for i, (_, _, k) in enumerate(per_arg) if k]
    lines = [line.replace("return None", "raise _Miss") for lines, _, _ in per_arg
             for line in lines]
    token = object()
    env.update(_world=world, _general=general, _Miss=_Miss,
               # (an argument the general path refuses: it says so, naming the argument)
               _retry=(struct.error, _Miss, arguments.ArgumentError) + tuple(retry),
               _acquire=loaded.lock.acquire, _release=loaded.lock.release,
               _current_stream=launch.current_stream,
               # The device the module is loaded on: asking CuPy for that device's stream saves a
               # cudaGetDevice per launch.  (Were another device current, the launch fails and the
               # general path takes over; see retry above.)
               DEV=getattr(loaded, "device_id", -1),
               # dynamic shared bytes a launch may have without the function's limit raised (the
               # 48 KiB a block has, less its static arrays): more takes the general path
               FREE=getattr(loaded, "free_shared", 48 * 1024),
               _pack_into=loaded.packer.pack_into, _buf=loaded.buffer,
               _launch=loaded.launch_kernel, FN=loaded.fn_ptr, EXTRA=loaded.extra_ptr, AGE=age,
               # The loaded module, its parameter buffer and the ``extra`` array FN and EXTRA point
               # into live as long as this function: a launch running in another thread while a
               # redefinition replaces the specialisation never sees them freed.
               _loaded=loaded, _ME=token)
    head = [f"if len(args) != {n} or _world.age != AGE or cfg.shared > FREE: "
            f"return _general(cfg, args)"]
    if placed:
        # another device current: the general path loads the kernel there
        env["_current_device"] = probe.current_device
        head.append("if _current_device() != DEV: return _general(cfg, args)")
    if n:
        head.append(f"{', '.join(f'a{i}' for i in range(n))}{',' if n == 1 else ''} = args")
    head += ["stream = cfg._stream_ptr",
             "if stream is None: stream = _current_stream(DEV).ptr",
             "gx, gy, gz, bx, by, bz, shared = cfg.dims",
             # Checks, packing and launch under the lock: the remembered arrays and what the
             # buffer holds change together.
             "_acquire()",
             "try:"]
    everything = ", ".join(out for _, outs, _ in per_arg for out in outs)
    if kept:
        head.insert(0, "global " + ", ".join(f"R{i}, V{i}, H{i}" for i in kept))
        pack = ["if fresh:",
                "    _loaded.packed_by = None",
                f"    _pack_into(_buf, 0, {everything})",
                "    _loaded.packed_by = _ME"]
        volatile = _volatile_packers(keys, per_arg, loaded.packer.format)
        if volatile:
            pack.append("else:")
            for j, (pack_run, offset, outs) in enumerate(volatile):
                env[f"_P{j}"] = pack_run
                pack.append(f"    _P{j}(_buf, {offset}, {', '.join(outs)})")
        lines = ["fresh = _loaded.packed_by is not _ME"] + lines + pack
    elif everything:
        lines = lines + [f"_pack_into(_buf, 0, {everything})"]
    tail = ["_launch(FN, gx, gy, gz, bx, by, bz, shared, stream, 0, EXTRA)"]
    body = ["    " + line for line in lines + tail]
    body += ["except BaseException as exc:",
             # A failed pack may have written part of the buffer, a failed check refreshed
             # some remembered arrays: the next launch packs everything.
             "    _loaded.packed_by = None",
             "    _release()",
             "    if isinstance(exc, _retry): return _general(cfg, args)",
             "    raise",
             "_release()"]
    if getattr(getattr(loaded, "spec", None), "uses_printf", False):
        env["_note_printf"] = launch.note_printf   # the cell hook then flushes device output
        body.append("_note_printf()")
    fn = _build("launch", ["cfg", "*args"], body, env, [], head)
    if label:
        # what Python's own errors call it: "k[blocks, threads]() got an unexpected keyword
        # argument 'n'" (kernels take their arguments by position, as numba-cuda's)
        fn.__qualname__ = label
    return fn
