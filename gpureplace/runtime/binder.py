"""Per-specialisation binders: the launch hot path, generated once per argument-type signature.

A binder checks that the arguments still have the types of the specialisation it was built for
(class, dtype, rank, layout) and returns the flat parameter values, or None when anything differs
(then the general path in ``arguments`` decides).  Generated source keeps each check inline: no
per-argument function calls, dictionaries or loops on the path of a cached launch.
"""

from __future__ import annotations

from . import arguments


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


def _nothing():
    return None


def _checks(args, keys, remember=False):
    """Source lines that return ``fail`` unless the arguments match, and the value expressions.

    With ``remember``, contiguous CuPy arrays are remembered between calls (see
    ``_remembered_array``): the list ``_S`` in the returned environment holds one entry per
    argument.
    """
    lines, env, outs = [], {"_value_key": arguments.value_key}, []
    remembered = []
    for i, (arg, key) in enumerate(zip(args, keys)):
        v = f"a{i}"
        handler = arguments.handler_of(arg)
        env[f"C{i}"] = type(arg)
        if handler is arguments._cupy_handler:
            _, dt, ndim, layout = key
            env[f"D{i}"] = dt
            flag = {"C": "_c_contiguous", "F": "_f_contiguous"}.get(layout)
            if flag is not None and not isinstance(getattr(arg, flag, None), bool):
                flag = None                       # a CuPy without the flag: compare strides
            dtype_differs = f"({v}.dtype is not D{i} and {v}.dtype != D{i})"
            if flag is not None and remember and _weakrefable(arg):
                remembered.append(i)
                body, out = _remembered_array(v, i, ndim, flag, dtype_differs)
                lines += body
                outs.append(out)
                continue
            if flag is not None and ndim <= 1:
                # The common case, in one test: a contiguous vector (or 0-d array), whose size is
                # its only shape field; contiguous arrays pass no strides.
                lines.append(f"if type({v}) is not C{i} or {dtype_differs} or not {v}.{flag} "
                             f"or {v}.ndim != {ndim}: return None")
                outs += [f"{v}.data.ptr"] + ([f"{v}.size"] if ndim else [])
                continue
            lines += [f"if type({v}) is not C{i} or {dtype_differs}: return None",
                      f"{v}_sh = {v}.shape",
                      f"if len({v}_sh) != {ndim}: return None"]
            if flag is not None:
                lines.append(f"if not {v}.{flag}: return None")
            elif layout != "A":
                lines += [f"{v}_st = {v}.strides",
                          f"if not ({_layout_check(v, ndim, layout, dt.itemsize)}): return None"]
            else:
                lines.append(f"{v}_st = {v}.strides")
            outs += [f"{v}.data.ptr"] + [f"{v}_sh[{k}]" for k in range(ndim)]
            if layout == "A":
                outs += [f"{v}_st[{k}]" for k in range(ndim)]
        elif handler is arguments._torch_handler:
            _, dt, ndim, layout = key
            env[f"T{i}"] = arg.dtype
            isz = dt.itemsize
            lines += [f"if type({v}) is not C{i} or {v}.dtype is not T{i} or not {v}.is_cuda: "
                      f"return None",
                      f"{v}_sh = {v}.shape",
                      f"if len({v}_sh) != {ndim}: return None"]
            if layout == "C":
                lines.append(f"if not {v}.is_contiguous(): return None")
            else:
                lines.append(f"{v}_st = tuple(s * {isz} for s in {v}.stride())" if ndim > 1 else
                             f"{v}_st = ({v}.stride(0) * {isz},)")
                if layout == "F":
                    lines.append(f"if not ({_layout_check(v, ndim, layout, isz)}): return None")
            outs += [f"{v}.data_ptr()"] + [f"{v}_sh[{k}]" for k in range(ndim)]
            if layout == "A":
                outs += [f"{v}_st[{k}]" for k in range(ndim)]
        elif handler in (arguments._int_handler, arguments._float_handler,
                         arguments._bool_handler):
            lines.append(f"if type({v}) is not C{i}: return None")
            outs.append(v)
        elif handler is arguments._np_scalar_handler and key[1].kind != "c":
            lines.append(f"if type({v}) is not C{i}: return None")
            outs.append(v)
        else:
            # Tuples, constants, CAI / DLPack objects, complex: the general handler, then compare.
            env[f"K{i}"] = key
            lines += [f"{v}_k, {v}_v = _value_key({v})",
                      f"if {v}_k != K{i}: return None"]
            outs.append(f"*{v}_v")
    if remember:
        import weakref
        env.update(_S=[(_nothing, (), ())] * len(args), _ref=weakref.ref)
    return lines, env, outs


def _weakrefable(arg):
    import weakref
    try:
        weakref.ref(arg)
    except TypeError:
        return False
    return True


def _remembered_array(v, i, ndim, flag, dtype_differs):
    """Lines for a contiguous CuPy array that skip its checks when it is the array of the last
    call: ``_S[i]`` holds a weak reference to that array, its parameter values and its shape.

    A CuPy array's dtype, data pointer, size and strides cannot be assigned; only ``shape`` can
    (an in-place reshape that keeps the size), so the same object with the same shape (for a
    vector: the same rank) has the same parameters.  The weak reference keeps nothing alive;
    reading the entry in one step keeps it consistent when threads race.
    """
    if ndim <= 1:
        same = f"{v}.ndim != {ndim}"
        fresh = [f"    if type({v}) is not C{i} or {dtype_differs} or not {v}.{flag} or "
                 f"{v}.ndim != {ndim}: return None",
                 f"    {v}_vals = ({v}.data.ptr, {f'{v}.size' if ndim else ''})",
                 f"    _S[{i}] = (_ref({v}), {v}_vals, None)"]
    else:
        same = f"{v}.shape != {v}_sh"
        fresh = [f"    if type({v}) is not C{i} or {dtype_differs}: return None",
                 f"    {v}_sh = {v}.shape",
                 f"    if len({v}_sh) != {ndim} or not {v}.{flag}: return None",
                 f"    {v}_vals = ({v}.data.ptr, *{v}_sh)",
                 f"    _S[{i}] = (_ref({v}), {v}_vals, {v}_sh)"]
    return ([f"{v}_r, {v}_vals, {v}_sh = _S[{i}]",
             f"if {v}_r() is not {v} or {same}:", *fresh], f"*{v}_vals")


def _build(name, params, lines, env, tail):
    body = "\n    ".join(lines + tail)
    src = f"def {name}({', '.join(params)}):\n    {body}\n"
    exec(compile(src, f"<gpureplace {name}>", "exec"), env)
    fn = env[name]
    fn.source = src
    return fn


def make_binder(args, keys):
    """Build ``bind(*args) -> values | None`` for arguments shaped like ``args`` with ``keys``."""
    lines, env, outs = _checks(args, keys)
    params = [f"a{i}" for i in range(len(args))]
    result = ", ".join(outs)
    return _build("bind", params, lines, env,
                  [f"return ({result}{',' if len(outs) == 1 else ''})"])


def make_fast_launch(args, keys, loaded, age, general, retry=()):
    """Build ``launch(config, *args)``: the whole cached launch in one generated function, made
    the ``__call__`` of the kernel's launch configurations.

    It checks the world age, the argument count and types, packs the parameters and calls
    ``cuLaunchKernel``.  When anything differs it launches nothing and returns
    ``general(config, args)``, the general path (which compiles, loads, and builds the next such
    function).  It also hands over when the launch raises one of ``retry``: a value that does not
    fit its parameter, or the driver refusing a function of another context -- a thread's first
    launch, or another current device -- which the general path sets right.
    """
    import struct

    from ..tracking import world
    from . import launch
    n = len(args)
    lines, env, outs = _checks(args, keys, remember=True)
    lines = [line.replace("return None", "return _general(cfg, args)") for line in lines]
    env.update(_world=world, _general=general, _retry=(struct.error,) + tuple(retry),
               _acquire=loaded.lock.acquire, _release=loaded.lock.release,
               _current_stream=launch.current_stream,
               # The device the module is loaded on: asking CuPy for that device's stream saves a
               # cudaGetDevice per launch.  (Were another device current, the launch fails and the
               # general path takes over; see retry above.)
               DEV=getattr(loaded, "device_id", -1),
               _pack_into=loaded.packer.pack_into, _buf=loaded.buffer,
               _launch=loaded.launch_kernel, FN=loaded.fn_ptr, EXTRA=loaded.extra_ptr, AGE=age,
               # The loaded module, its parameter buffer and the ``extra`` array FN and EXTRA point
               # into live as long as this function: a launch running in another thread while a
               # redefinition replaces the specialisation never sees them freed.
               _loaded=loaded)
    head = [f"if len(args) != {n} or _world.age != AGE or cfg.big_shared: "
            f"return _general(cfg, args)"]
    if n:
        head.append(f"{', '.join(f'a{i}' for i in range(n))}{',' if n == 1 else ''} = args")
    tail = ["stream = cfg._stream_ptr",
            "if stream is None: stream = _current_stream(DEV).ptr",
            "gx, gy, gz, bx, by, bz, shared = cfg.dims",
            "_acquire()",
            "try:",
            f"    _pack_into(_buf, 0, {', '.join(outs)})" if outs else "    pass",
            "    _launch(FN, gx, gy, gz, bx, by, bz, shared, stream, 0, EXTRA)",
            "except BaseException as exc:",
            "    _release()",
            "    if isinstance(exc, _retry): return _general(cfg, args)",
            "    raise",
            "_release()"]
    if getattr(getattr(loaded, "spec", None), "uses_printf", False):
        env["_note_printf"] = launch.note_printf   # the cell hook then flushes device output
        tail.append("_note_printf()")
    return _build("launch", ["cfg", "*args"], head + lines, env, tail)
