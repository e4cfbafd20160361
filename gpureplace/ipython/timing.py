"""``%cuda_timeit kernel[blocks, threads](args)``: ``gpureplace.benchmark`` from a notebook line.

    %cuda_timeit saxpy[blocks, 256](2.0, x, y, out)
    %cuda_timeit --flops 2*n --bytes 3*x.nbytes saxpy[blocks, 256](2.0, x, y, out)
    r = %cuda_timeit -o saxpy[blocks, 256](2.0, x, y, out)

Options (before the launch): ``--flops EXPR`` and ``--bytes EXPR`` (Python expressions in the
notebook's namespace: the FLOP count and bytes a run moves), ``--warm`` (no L2 flush between
runs), ``--runs N`` (at least N timed runs), ``--max-runs N``, ``--min-time SECONDS``, ``-o``
(return the ``BenchmarkResult`` instead of only showing it).  A call that is no launch (a
built-in, a class, a kernel without ``[blocks, threads]``, a device function) is a usage error;
a function of the user's is timed as a whole (it may launch several kernels).
"""

from __future__ import annotations

import ast
import types

import numpy as np

from IPython.core.error import UsageError

USAGE = ("usage: %cuda_timeit [--flops EXPR] [--bytes EXPR] [--warm] [--runs N] [--max-runs N] "
         "[--min-time SECONDS] [-o] kernel[blocks, threads](args)")

_VALUED = {"--flops": "flops", "--bytes": "bytes", "--runs": "min_repeat",
           "--max-runs": "max_repeat", "--min-time": "min_time"}


def parse(line):
    """(options as source text, flags, the launch statement) of a ``%cuda_timeit`` line."""
    rest = line.strip()
    options, flags = {}, set()
    while rest.startswith("-"):
        word, _, tail = rest.partition(" ")
        if word in ("--warm", "-o"):
            flags.add(word)
            rest = tail.lstrip()
            continue
        if word not in _VALUED:
            raise UsageError(f"%cuda_timeit: unknown option {word!r}\n{USAGE}")
        value, _, rest = tail.lstrip().partition(" ")
        if not value:
            raise UsageError(f"%cuda_timeit: {word} needs a value\n{USAGE}")
        options[_VALUED[word]] = value
        rest = rest.lstrip()
    if not rest:
        raise UsageError(f"%cuda_timeit: no launch to time\n{USAGE}")
    try:
        tree = ast.parse(rest, mode="eval")
    except SyntaxError as exc:
        raise UsageError(f"%cuda_timeit: {rest!r} is not a Python expression ({exc.msg})\n"
                         f"{USAGE}") from None
    call = tree.body
    if not isinstance(call, ast.Call) or call.keywords:
        raise UsageError(f"%cuda_timeit: {rest!r} is not a launch: write "
                         f"kernel[blocks, threads](args) (positional arguments)\n{USAGE}")
    return options, flags, call


def refuse_non_launch(launch, call):
    """A ``UsageError`` where the call ``call`` (its callee evaluated: ``launch``) is no launch:
    a built-in function or a class, or a ``cuda.jit`` function without its launch
    configuration.  Launch objects, GPU ufuncs, ``graph.launch``, the user's own functions (which
    may launch several kernels) and other callable objects are timed (``gpureplace.benchmark``
    takes any callable that launches GPU work)."""
    from ..jit import GPUFunction
    name = ast.unparse(call.func)
    if isinstance(launch, GPUFunction):
        if launch.device:
            why = (f"{name} is a device function, which only kernels call: time a kernel "
                   f"that calls it")
        else:
            why = (f"{name} is a kernel without its launch configuration: write "
                   f"{name}[blocks, threads]({', '.join(map(ast.unparse, call.args))})")
    elif isinstance(launch, (types.BuiltinFunctionType, type)) or type(launch) is np.ufunc:
        # (a Python function of the user's is timed as a whole: it may launch several kernels)
        what = "a Python class" if isinstance(launch, type) else \
            "a NumPy ufunc" if type(launch) is np.ufunc else "a built-in function"
        why = (f"{name} is {what}, which runs on the host: write kernel[blocks, threads](args), "
               f"or call a function of yours that launches GPU work")
    else:
        return
    raise UsageError(f"%cuda_timeit: {ast.unparse(call)!r} is not a launch: {why}\n{USAGE}")


def cuda_timeit(shell, line):
    """Run the magic in ``shell``: the result is displayed (and returned with ``-o``)."""
    from IPython.display import display

    from ..benchmarking import benchmark
    options, flags, call = parse(line)
    ns = shell.user_ns

    def value(node, what):
        source = ast.unparse(node)
        try:
            return eval(compile(ast.Expression(node), "<cuda_timeit>", "eval"), ns)  # noqa: S307
        except Exception as exc:
            raise UsageError(f"%cuda_timeit: {what} {source!r}: {type(exc).__name__}: "
                             f"{exc}") from None

    launch = value(call.func, "the launch")
    refuse_non_launch(launch, call)
    args = tuple(value(a, "argument") for a in call.args)
    kwargs = {}
    for key, source in options.items():
        try:
            node = ast.parse(source, mode="eval").body
        except SyntaxError:
            raise UsageError(f"%cuda_timeit: {source!r} is not a Python expression") from None
        kwargs[key] = value(node, f"--{key.replace('_', '-')}")
    for key in ("min_repeat", "max_repeat"):
        if key in kwargs and not isinstance(kwargs[key], int):
            raise UsageError(f"%cuda_timeit: --{'runs' if key == 'min_repeat' else 'max-runs'} "
                             f"takes an int, got {kwargs[key]!r}")
    if "--warm" in flags:
        kwargs["flush_l2"] = False
    try:
        result = benchmark(launch, *args, name=ast.unparse(call.func), **kwargs)
    except (TypeError, ValueError) as exc:
        if getattr(exc, "_render_traceback_", None) is not None or not _raised_by_benchmark(exc):
            raise           # gpureplace's own (rendered as it is), or the user's code's own error
        raise UsageError(f"%cuda_timeit: {exc}") from None
    display(result)
    return result if "-o" in flags else None


def _raised_by_benchmark(exc):
    """Whether ``exc`` was raised by ``benchmark``'s own checks of its options, not by the code it
    times (a function of the user's failing is its error, with its traceback, as in %timeit)."""
    from .. import benchmarking
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename == benchmarking.__file__
