"""``%cuda_timeit kernel[blocks, threads](args)``: ``gpureplace.benchmark`` from a notebook line.

    %cuda_timeit saxpy[blocks, 256](2.0, x, y, out)
    %cuda_timeit --flops 2 * n --bytes 3 * x.nbytes saxpy[blocks, 256](2.0, x, y, out)
    r = %cuda_timeit -o saxpy[blocks, 256](2.0, x, y, out)

Options (before the launch): ``--flops EXPR`` and ``--bytes EXPR`` (Python expressions in the
notebook's namespace: the FLOP count and bytes a run moves), ``--warm`` (no L2 flush between
runs), ``--runs N`` (at least N timed runs), ``--max-runs N``, ``--min-time SECONDS``, ``-o``
(return the ``BenchmarkResult`` instead of only showing it).  Every value is a Python expression,
spaces allowed: it is the shortest one after which the rest of the line still reads as options
and a launch (``--flops 2 * n k[g, b](x)``; ``--flops 2 -o k[g, b](x)`` is 2 and ``-o``), and it
never runs over a following ``--option``; a value in quotes is the expression inside them
(``--bytes "sum(a.nbytes for a in (x, out))"``).  The launch's arguments are written as in
Python: ``k[g, b](*args)``, keywords where the callee takes them (a GPU ufunc's ``out=``; a
kernel's launch takes positional ones only); a trailing ``;`` is ignored.  A call that is no
launch (a built-in, a class, a kernel without ``[blocks, threads]``, a device function) is a
usage error; a function of the user's is timed as a whole (it may launch several kernels).  The
launch runs once untimed, then once per timed run (``gpureplace.benchmark``'s docstring).
"""

from __future__ import annotations

import ast
import dis
import functools
import re
import sys
import types

import numpy as np

from IPython.core.error import UsageError

USAGE = ("usage: %cuda_timeit [--flops EXPR] [--bytes EXPR] [--warm] [--runs N] [--max-runs N] "
         "[--min-time SECONDS] [-o] kernel[blocks, threads](args)\n"
         "(EXPR, N, SECONDS: Python expressions, spaces allowed, or quoted: "
         "--flops 2 * x.size, --bytes \"sum(a.nbytes for a in (x, out))\")")

_VALUED = {"--flops": "flops", "--bytes": "bytes", "--runs": "min_repeat",
           "--max-runs": "max_repeat", "--min-time": "min_time"}
_OPTION_OF = {key: word for word, key in _VALUED.items()}
_FLAGS = ("--warm", "-o")
#: Where a value may end: before a run of spaces; and where it must, before a long option
_GAP = re.compile(r"\s+")
_LONG_OPTION = re.compile(r"--[A-Za-z]")
#: An option word after a space, where the launch should have ended
_OPTION_WORD = re.compile(r"\s(--[A-Za-z][\w-]*|-o)(?=\s|$)")


def parse(line):
    """(options as source text, flags, the launch call) of a ``%cuda_timeit`` line; a
    ``UsageError`` saying what is wrong otherwise.  An option's value is the shortest Python
    expression after which the rest of the line parses (see the module's docstring)."""
    # (a trailing ";", which silences a cell's value, is no part of the launch)
    options, flags, call = _parse(line.strip().removesuffix(";").rstrip(), {})
    return dict(options), set(flags), call


def _parse(text, memo):
    """``parse`` of the (stripped) rest of a line; ``memo`` remembers each rest tried, as the
    values' search may read one rest several times."""
    if text not in memo:
        try:
            memo[text] = _parse_uncached(text, memo)
        except UsageError as exc:
            memo[text] = exc
    result = memo[text]
    if isinstance(result, UsageError):
        raise result
    return result


def _parse_uncached(text, memo):
    if not text:
        raise UsageError(f"%cuda_timeit: no launch to time\n{USAGE}")
    if not text.startswith("-"):
        return {}, frozenset(), _launch_call(text)
    word, tail = (_GAP.split(text, maxsplit=1) + [""])[:2]
    if word in _FLAGS:
        options, flags, call = _parse(tail, memo)
        return options, flags | {word}, call
    if word not in _VALUED:
        raise UsageError(f"%cuda_timeit: unknown option {word!r}\n{USAGE}")
    if not tail:
        raise UsageError(f"%cuda_timeit: {word} needs a value\n{USAGE}")
    values, span = _values(word, tail)
    failed = None
    for source, rest in values:
        try:
            options, flags, call = _parse(rest, memo)
        except UsageError as exc:
            failed = exc                    # (the longest value's: the likeliest reading)
            continue
        return {_VALUED[word]: source, **options}, flags, call
    if getattr(failed, "misplaced_option", None):
        raise failed                        # (the value read, an option follows the launch)
    if span is not None and (not values or values[-1][1] != span[1]):
        # the text before the next option is the value, and it is no expression
        raise UsageError(f"%cuda_timeit: {word} {span[0]!r} is not a Python expression\n"
                         f"{USAGE}")
    if failed is None:
        first = _GAP.split(tail, maxsplit=1)[0]
        raise UsageError(f"%cuda_timeit: {word} {first!r} is not a Python expression\n{USAGE}")
    raise failed


def _values(word, tail):
    """The ways the option ``word``'s value can end in ``tail``, shortest first: a list of
    (value's source, rest of the line), one for each prefix that is a Python expression, up to
    the next long option; a prefix that is a string in quotes gives the expression inside.  And
    (text, rest) before that next option, or None where there is none."""
    values = []
    for gap in [*_GAP.finditer(tail), None]:
        end = gap.start() if gap else len(tail)
        source, rest = tail[:end], tail[end:].lstrip()
        try:
            node = ast.parse(source, mode="eval").body
        except SyntaxError:
            node = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            inside = node.value.strip()
            try:
                ast.parse(inside, mode="eval")
            except SyntaxError as exc:
                raise UsageError(f"%cuda_timeit: {word} {source}: {inside!r} is not a Python "
                                 f"expression ({exc.msg})\n{USAGE}") from None
            values.append((inside, rest))
        elif node is not None:
            values.append((source, rest))
        if _LONG_OPTION.match(rest):
            return values, (source, rest)   # (a value never runs over the next option)
    return values, None


def _launch_call(text):
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        _refuse_options_after(text)
        raise UsageError(f"%cuda_timeit: {text!r} is not a Python expression ({exc.msg})\n"
                         f"{USAGE}") from None
    call = tree.body
    if not isinstance(call, ast.Call):
        _refuse_options_after(text)
        raise UsageError(f"%cuda_timeit: {text!r} is not a launch: write "
                         f"kernel[blocks, threads](args)\n{USAGE}")
    return call


def _refuse_options_after(text):
    """A ``UsageError`` where ``text``, which is no launch, is a launch followed by one of the
    options (``k[1, 32](x) --flops 2``, ``k[1, 32](x) -o``); its ``misplaced_option`` names
    it.  (A UsageError itself: IPython shows that class alone as one line, no traceback.)"""
    for found in _OPTION_WORD.finditer(text):
        word = found.group(1)
        if word not in _VALUED and word not in _FLAGS:
            continue
        launch = text[:found.start()].rstrip()
        try:
            call = ast.parse(launch, mode="eval").body
        except SyntaxError:
            continue
        if isinstance(call, ast.Call):
            error = UsageError(f"%cuda_timeit: options go before the launch: {word} is "
                               f"written after {launch!r}\n{USAGE}")
            error.misplaced_option = word
            raise error


def refuse_non_launch(launch, call):
    """A ``UsageError`` where the call ``call`` (its callee evaluated: ``launch``) is no launch:
    a built-in function or a class, a ``cuda.jit`` function without its launch configuration,
    or a kernel's launch given keyword arguments.  Launch objects, GPU ufuncs (``out=`` too),
    ``graph.launch``, the user's own functions (which may launch several kernels) and other
    callable objects are timed (``gpureplace.benchmark`` takes any callable that launches GPU
    work)."""
    from ..jit import GPUFunction
    from ..jit.launcher import ForAll, Launcher, PreparedLaunch
    name = ast.unparse(call.func)
    if isinstance(launch, GPUFunction):
        if launch.device:
            why = (f"{name} is a device function, which only kernels call: time a kernel "
                   f"that calls it")
        else:
            why = (f"{name} is a kernel without its launch configuration: write "
                   f"{name}[blocks, threads]({', '.join(map(ast.unparse, call.args))})")
    elif call.keywords and isinstance(launch, (Launcher, ForAll, PreparedLaunch)):
        why = (f"a kernel takes its arguments by position, not "
               f"{ast.unparse(call.keywords[0])}")
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

    from ..benchmarking import benchmark, checked_option
    # (an error of the code timed -- a function of the user's -- shows the user's frames, as
    # %timeit's: IPython leaves out the frames that set this)
    __tracebackhide__ = True  # noqa: F841
    options, flags, call = parse(line)
    ns = shell.user_ns

    def value(node, what, source=None):
        source = source or ast.unparse(node)
        # (a node made here, ``(*args,)`` for ``*args``, has no place in the line of its own)
        expression = ast.fix_missing_locations(ast.Expression(node))
        try:
            return eval(compile(expression, "<cuda_timeit>", "eval"), ns)  # noqa: S307
        except Exception as exc:
            raise UsageError(f"%cuda_timeit: {what} {source!r}: {type(exc).__name__}: "
                             f"{exc}") from None

    launch = value(call.func, "the launch")
    refuse_non_launch(launch, call)
    args, keywords = _arguments(call, value)
    kwargs = {}
    for key, source in options.items():
        option = _OPTION_OF[key]
        try:
            node = ast.parse(source, mode="eval").body
        except SyntaxError:
            raise UsageError(f"%cuda_timeit: {option} {source!r} is not a Python "
                             f"expression") from None
        try:
            kwargs[key] = checked_option(key, value(node, option), label=option)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"%cuda_timeit: {exc}") from None
    runs, most = kwargs.get("min_repeat"), kwargs.get("max_repeat")
    if runs is not None and most is not None and runs > most:
        raise UsageError(f"%cuda_timeit: --runs {runs} is more than --max-runs {most}\n{USAGE}")
    if "--warm" in flags:
        kwargs["flush_l2"] = False
    # (a prepared launch is labelled by its kernel and configuration, ``k[1, 256]``, as
    # benchmark() labels it, not by the name it is held under)
    from ..jit.launcher import PreparedLaunch
    name = None if isinstance(launch, PreparedLaunch) else ast.unparse(call.func)
    # (benchmark counts the arrays a partial binds, as a prepared launch's)
    timed = functools.partial(launch, **keywords) if keywords else launch
    try:
        result = benchmark(timed, *args, name=name, **kwargs)
    except (TypeError, ValueError) as exc:
        if getattr(exc, "_render_traceback_", None) is not None or not _raised_by_benchmark(exc):
            raise           # gpureplace's own (rendered as it is), or the user's code's own error
        raise UsageError(f"%cuda_timeit: {exc}") from None
    if "-o" not in flags:
        display(result)
        return None
    if not _shown_as_value(shell):
        display(result)     # (``r = %cuda_timeit -o ...``: shown all the same, as %timeit's)
    return result


def _arguments(call, value):
    """The positional and keyword arguments of ``call``, each evaluated by ``value(node, what,
    source)``: ``*items`` and ``**mapping`` spliced in as Python splices them."""
    args, keywords = [], {}
    for node in call.args:
        if isinstance(node, ast.Starred):
            args.extend(value(ast.Tuple([node], ast.Load()), "argument", ast.unparse(node)))
        else:
            args.append(value(node, "argument"))
    for node in call.keywords:
        source = ast.unparse(node)
        given = {node.arg: value(node.value, "argument", source)} if node.arg else \
            value(ast.Dict([None], [node.value]), "argument", source)
        for key in given:
            if not isinstance(key, str) or key in keywords:
                why = "keywords must be strings" if not isinstance(key, str) else \
                    f"{key!r} is given twice"
                raise UsageError(f"%cuda_timeit: argument {source!r}: {why}")
        keywords.update(given)
    return tuple(args), keywords


def _shown_as_value(shell):
    """Whether the value the running line magic returns is shown as its cell's value (its
    ``Out[]``): the magic's line is an expression whose value the cell's code prints (IPython
    compiles the cell's last expression, or each one with ``ast_node_interactivity = 'all'``,
    to print it through the display hook) and no ``;`` silences it."""
    files = getattr(shell.compile, "_filename_map", None) or {}
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename not in files:
        frame = frame.f_back
    if frame is None or frame.f_code.co_name != "<module>":
        return False          # (a function of the user's calling the magic)
    if not any(ins.opname == "PRINT_EXPR" or (ins.opname == "CALL_INTRINSIC_1" and
                                              ins.argrepr == "INTRINSIC_PRINT")
               for ins in dis.get_instructions(frame.f_code)):
        return False
    try:
        return not shell.displayhook.quiet()
    except Exception:         # (a display hook of another shape: shown as its value)
        return True


def _raised_by_benchmark(exc):
    """Whether ``exc`` was raised by ``benchmark``'s own checks of its options, not by the code it
    times (a function of the user's failing is its error, with its traceback, as in %timeit)."""
    from .. import benchmarking
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename == benchmarking.__file__
