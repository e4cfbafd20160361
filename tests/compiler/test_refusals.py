"""Every refusal says what to do: Python that device code cannot run is named, at the user's line,
with what to write instead, never in the front end's terms ('MinimalCallConv', 'list(undefined)',
'Raised from None', a RecursionError, an IndexError from a bad ``cc``)."""

import contextlib
import inspect
import math
import sys
import warnings

import numpy as np
import pytest

from gpureplace import CompileError, LaunchError, cuda
from gpureplace.config import settings

SIG = "void(float64[:])"

#: Words of the front end's own messages that must never reach the user.
INTERNALS = ("MinimalCallConv", "undefined)", "Raised from", "Unknown attribute", "ol_",
             "site-packages", "$", "opcode", "Illegal IR", "<locals>", "interactiveshell")


def _refused(func, sig=SIG):
    with pytest.raises(CompileError) as info:
        cuda.jit(func).compile(sig)
    err = info.value
    text = str(err)
    assert len(text.splitlines()) <= 2, text
    for word in INTERNALS:
        assert word not in err.reason, (word, text)
    return err


def _refused_at(func, marker, words):
    """The refusal of ``func``: at the line holding ``marker``, its reason holding ``words``."""
    err = _refused(func)
    _assert_at(err, func, marker)
    for word in words:
        assert word in err.reason
    return err


def _assert_at(err, func, marker):
    assert err.filename == func.__code__.co_filename, str(err)
    assert err.lineno == _line_of(func, marker), str(err)
    assert err.function == func.__qualname__, str(err)


@pytest.fixture
def simulator(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


# =============================================================================================
# 1. raise and assert


def raise_with_a_value(x):
    i = cuda.grid(1)
    if i > 100:
        raise ValueError("x", i)
    x[i] = 1


# pytest rewrites the asserts of test modules: kernels with assert come from source of their own
_ASSERTS = """
def assert_with_a_value(x):
    i = cuda.grid(1)
    assert x[i] >= 0, x[i]
    x[i] = 1

def asserts_positive(x, out):
    i = cuda.grid(1)
    if i < x.size:
        assert x[i] >= 0, "x must not be negative"
        out[i] = math.sqrt(x[i])
"""
_asserts = {"cuda": cuda, "math": math}
exec(compile(_ASSERTS, "<kernels with assert>", "exec"), _asserts)
assert_with_a_value = _asserts["assert_with_a_value"]
asserts_positive = cuda.jit(_asserts["asserts_positive"])


def _line_of(func, marker):
    """Line (in its file) of the first source line of ``func`` containing ``marker``."""
    func = getattr(func, "py_func", func)
    if func.__code__.co_filename == "<kernels with assert>":
        return 1 + next(k for k, line in enumerate(_ASSERTS.splitlines()) if marker in line)
    lines, first = inspect.getsourcelines(func)
    for k, line in enumerate(lines):
        if marker in line:
            return first + k
    raise AssertionError(f"{marker!r} not in {func.__name__}")


def raise_from_none(x):
    if x[0] < 0:
        raise ValueError("negative") from None
    x[0] = 1


@pytest.mark.parametrize("func, marker, words", [
    (raise_with_a_value, 'raise ValueError("x", i)', ("raise", "constant", "debug=True")),
    (assert_with_a_value, "assert x[i] >= 0", ("assert", "constant message")),
    (raise_from_none, "raise ValueError", ("raise ... from", "without from")),
])
def test_raise_forms_that_cannot_compile_are_named_at_their_line(func, marker, words):
    _refused_at(func, marker, words)


def raise_negative(v):
    if v < 0:
        raise ValueError("negative")
    return math.sqrt(v)


@cuda.jit
def stops_on_negative(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = raise_negative(x[i])


@cuda.jit
def stops_before_a_barrier(x, out):
    i = cuda.threadIdx.x
    s = cuda.shared.array(4, np.float64)
    s[i] = 0.0
    cuda.syncthreads()
    s[i] = raise_negative(x[i])
    cuda.syncthreads()
    out[i] = s[i] + 1.0


@pytest.mark.parametrize("kernel", [stops_on_negative, asserts_positive])
def test_constant_raise_and_assert_compile(kernel):
    kernel.compile("void(float64[::1], float64[::1])")


@pytest.mark.parametrize("kernel", [stops_on_negative, asserts_positive, stops_before_a_barrier])
def test_the_simulator_stops_a_raising_thread_as_the_gpu_does_and_says_so(simulator, kernel):
    from gpureplace.simulator.raises import KernelRaisedWarning
    x = np.array([4.0, -1.0, 9.0, -4.0])
    out = np.full(4, 7.0)
    with pytest.warns(KernelRaisedWarning) as record:
        kernel[1, 4](x, out)
    # the raising threads end there; the others run on (past the barrier, in threaded mode)
    expect = [3.0, 7.0, 4.0, 7.0] if kernel is stops_before_a_barrier else [2.0, 7.0, 3.0, 7.0]
    np.testing.assert_array_equal(out, expect)
    text = str(record[0].message)
    assert "2 threads raised" in text and "threadIdx=(1, 0, 0)" in text
    assert "debug=True" in text
    src = kernel.py_func if kernel is asserts_positive else raise_negative
    assert record[0].filename == src.__code__.co_filename
    assert record[0].lineno == _line_of(src, "must not be negative" if kernel is asserts_positive
                                        else "raise ValueError")


def test_other_simulator_errors_still_stop_the_launch(simulator):
    @cuda.jit
    def out_of_bounds(x):
        x[cuda.grid(1) + 10] = 1.0

    with pytest.raises(IndexError):
        out_of_bounds[1, 2](np.zeros(4))


# =============================================================================================
# 2. lists, dicts, sets and the builtins that make them


def list_comprehension(x):
    a = [i * 2.0 for i in range(3)]
    x[0] = a[0]


def set_comprehension(x):
    s = {i for i in range(3)}
    x[0] = len(s)


def dict_comprehension(x):
    d = {i: 2.0 * i for i in range(3)}
    x[0] = d[0]


def generator_expression(x):
    x[0] = sum(x[i] for i in range(3))


def list_appended(x):
    a = []
    a.append(1.0)
    x[0] = a[0]


def list_builtin(x):
    a = list(range(3))
    x[0] = a[0]


def dict_builtin(x):
    d = dict()
    x[0] = len(d)


def sorted_builtin(x):
    a = sorted((3.0, 1.0, 2.0))
    x[0] = a[0]


def str_builtin(x):
    s = str(x[0])
    x[1] = len(s)


@pytest.mark.parametrize("func, marker, words", [
    (list_comprehension, "a = [", ("list comprehension", "cuda.local.array")),
    (set_comprehension, "s = {", ("set comprehension", "cuda.local.array")),
    (dict_comprehension, "d = {", ("dict comprehension", "cuda.local.array")),
    (generator_expression, "sum(", ("generator expression", "for i in range")),
    (list_appended, "a = []", ("lists are not supported", "cuda.local.array")),
    (list_builtin, "list(range", ("list() builds a list", "cuda.local.array")),
    (dict_builtin, "dict()", ("dict() builds a dict",)),
    (sorted_builtin, "sorted(", ("sorted() builds a list",)),
    (str_builtin, "str(x[0])", ("str() builds a string",)),
])
def test_heap_containers_say_what_to_use_instead(func, marker, words):
    err = _refused_at(func, marker, words)
    assert err.chain == (func.__qualname__,)


# =============================================================================================
# 3. with, 5. try


_guard = contextlib.nullcontext()


def with_statement(x):
    x[1] = 2.0
    with _guard:
        x[0] = 1.0


def with_as(x):
    with _guard as g, _guard:                 # noqa: F841 (the form refused)
        x[0] = 1.0


def try_except(x):
    x[1] = 2.0
    try:
        x[0] = 1 / x[1]
    except ZeroDivisionError:
        x[0] = 0


def try_bare_except(x):
    try:
        x[0] = 1
    except:  # noqa: E722
        x[0] = 2


def try_except_as(x):
    try:
        x[0] = 1
    except Exception as e:  # noqa: F841
        x[1] = 1


def try_finally(x):
    try:
        x[0] = 1
    finally:
        x[1] = 2


def try_except_else_finally(x):
    try:
        x[0] = 1
    except ValueError:
        pass
    else:
        x[0] = 3
    finally:
        x[1] = 1


def _helper_with_try(v):
    try:
        return 1.0 / v
    except ZeroDivisionError:
        return 0.0


def calls_a_helper_with_try(x):
    x[0] = _helper_with_try(x[1])


@pytest.mark.parametrize("func, marker, words", [
    (with_statement, "with _guard:", ("with statement", "plain statements")),
    (with_as, "with _guard as g", ("with statement",)),
    (try_except, "try:", ("try/except is not", "if")),
    (try_bare_except, "try:", ("try/except is not",)),
    (try_except_as, "try:", ("try/except is not",)),
    (try_finally, "try:", ("try/finally", "after the try block")),
    (try_except_else_finally, "try:", ("try/except/finally",)),
])
def test_with_and_try_are_named_at_their_line(func, marker, words):
    _refused_at(func, marker, words)


def test_try_in_a_helper_is_named_in_the_helper():
    with pytest.raises(CompileError) as info:
        cuda.jit(calls_a_helper_with_try).compile(SIG)
    _assert_at(info.value, _helper_with_try, "try:")
    assert info.value.chain == ("calls_a_helper_with_try", "_helper_with_try")


def test_constructs_are_found_without_source():
    """Code made by exec (no source to read) is refused from its bytecode."""
    src = ("def f(x):\n"
           "    x[0] = 1.0\n"
           "    with g:\n"
           "        x[1] = 2.0\n"
           "def h(x):\n"
           "    a = [i for i in range(3)]\n"
           "    x[0] = a[0]\n"
           "def t(x):\n"
           "    x[0] = 1.0\n"
           "    try:\n"
           "        x[1] = 2.0\n"
           "    except Exception:\n"
           "        x[1] = 3.0\n")
    ns = {"g": _guard, "cuda": cuda}
    exec(compile(src, "<no source here>", "exec"), ns)
    for name, line, words in (("f", 3, "with statement"), ("h", 6, "list comprehension"),
                              ("t", 10, "try")):
        with pytest.raises(CompileError) as info:
            cuda.jit(ns[name]).compile(SIG)
        assert words in info.value.reason and "Raised from" not in str(info.value)
        assert info.value.lineno in (line, line + 1), (name, str(info.value))


# =============================================================================================
# 4. generators, 10. async


def test_generator_kernel_is_refused_when_compiled_or_launched(simulator):
    def gen_kernel(x):
        yield x[0]

    kernel = cuda.jit(gen_kernel)      # (numba-cuda: a cuda.jit function may be called by kernels)
    for attempt in (lambda: kernel.compile(SIG), lambda: kernel[1, 1](np.zeros(1))):
        with pytest.raises(CompileError, match="gen_kernel is a generator .* which a kernel "
                                               "cannot be") as info:
            attempt()
        assert info.value.lineno == gen_kernel.__code__.co_firstlineno
        assert "generator(func=" not in str(info.value)


def _evens(n):
    for i in range(n):
        yield 2.0 * i


def test_a_generator_helper_still_works(simulator):
    @cuda.jit
    def sums(x):
        s = 0.0
        for v in _evens(4):
            s += v
        x[0] = s

    sums.compile(SIG)
    x = np.zeros(1)
    sums[1, 1](x)
    assert x[0] == 12.0


def test_async_kernel_and_device_function_are_refused_where_defined():
    async def akernel(x):
        x[0] = 1

    async def agen(x):
        yield x

    for func, device, what in ((akernel, False, "an async def function"),
                               (akernel, True, "an async def function"),
                               (agen, False, "an async generator")):
        with pytest.raises(CompileError, match=what) as info:
            cuda.jit(func, device=device)
        assert "plain def" in str(info.value)
        assert info.value.lineno == func.__code__.co_firstlineno


async def _async_helper(v):
    return v


def test_an_async_helper_is_refused_at_compile():
    def calls_async(x):
        x[0] = _async_helper(x[0])

    with pytest.raises(CompileError, match="_async_helper is an async def function") as info:
        cuda.jit(calls_async).compile(SIG)
    assert info.value.chain == ("test_an_async_helper_is_refused_at_compile.<locals>."
                                "calls_async", "_async_helper")


def test_an_async_kernel_never_runs_silently_in_the_simulator(simulator):
    async def akernel(x):
        x[0] = 1

    with pytest.raises(CompileError):
        cuda.jit(akernel)[1, 1](np.zeros(1))


# =============================================================================================
# 6. host functions


def opens_a_file(x):
    f = open("data.txt")  # noqa: F841
    x[0] = 1


def asks_for_input(x):
    s = input()  # noqa: F841
    x[0] = 1


def prints_to_a_file(x):
    print("value", x[0], file=sys.stderr)


def prints_without_newline(x):
    print("value", x[0], end="")


@pytest.mark.parametrize("func, marker, words", [
    (opens_a_file, "open(", ("open() is a host function", "no device implementation")),
    (asks_for_input, "= input(", ("input() is a host function",)),
    (prints_to_a_file, "print(", ("print() in device code takes no keyword arguments",)),
    (prints_without_newline, "print(", ("no keyword arguments",)),
])
def test_host_functions_are_named(func, marker, words):
    _refused_at(func, marker, words)


def test_open_in_an_ipython_cell_names_the_cell_not_ipython():
    IPython = pytest.importorskip("IPython")   # noqa: F841
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpureplace")
    try:
        with capture_output():
            shell.run_cell("from gpureplace import cuda\n"
                           "@cuda.jit\n"
                           "def opens(x):\n"
                           "    f = open('data.txt')\n"
                           "    x[0] = 1\n", store_history=True)
            res = shell.run_cell("opens.compile('void(float64[:])')", store_history=True)
        err = res.error_in_exec
        assert isinstance(err, CompileError), err
        assert err.function == "opens" and err.lineno == 4
        assert "open() is a host function" in err.reason
        assert "interactiveshell" not in str(err) and "f-string" not in str(err)
        assert err.chain == ("opens",)
    finally:
        shell.run_line_magic("unload_ext", "gpureplace")
        shell.reset(new_session=True)
        settings.__init__()


# =============================================================================================
# 7. the architecture


def _plain(x):
    x[0] = 1.0


@pytest.mark.parametrize("cc, words", [
    ((9,), "did you mean (9, 0)"),
    ((9, 0, 1), "did you mean (9, 0)"),
    ("90", "did you mean 'sm_90'"),
    (90, "did you mean 'sm_90'"),
    ("compute_90", "did you mean 'sm_90'"),
    ((9, "0"), "(major, minor) tuple of ints"),
    ("sm_9", "unknown GPU architecture 'sm_9'"),
])
def test_a_bad_cc_shows_the_accepted_forms(cc, words):
    with pytest.raises(ValueError) as info:
        cuda.compile_ptx(_plain, SIG, cc=cc)
    assert words in str(info.value) and "compile_ptx(cc=...)" in str(info.value)
    with pytest.raises(ValueError) as info:
        cuda.jit(_plain).compile(SIG, arch=cc)
    assert words in str(info.value) and "compile(arch=...)" in str(info.value)


@pytest.mark.parametrize("cc", [(9, 0), "sm_90", (8, 6)])
def test_good_cc_forms_compile(cc):
    ptx, _ = cuda.compile_ptx(_plain, SIG, cc=cc)
    want = cc if isinstance(cc, str) else f"sm_{cc[0]}{cc[1]}"
    assert f".target {want}" in ptx


def test_jit_arch_option_says_where_the_arch_is_chosen():
    with pytest.raises(TypeError, match=r"unsupported option\(s\): arch; .*compile\(sig, "
                                        r"arch='sm_90'\).*settings.arch"):
        cuda.jit(arch="sm_90")(_plain)


def test_settings_arch_is_checked(monkeypatch):
    monkeypatch.setattr(settings, "_arch", None)
    settings.arch = (9, 0)
    assert settings.arch == "sm_90"
    with pytest.raises(ValueError, match="settings.arch must be"):
        settings.arch = 90
    assert settings.arch == "sm_90"


# =============================================================================================
# 8. deep chains of helpers


def _chain(n):
    src = [f"def h{i}(v):\n    return {'v' if i == n - 1 else f'h{i + 1}(v)'} + 1.0\n"
           for i in range(n)]
    src.append("def chain_kernel(x):\n    x[0] = h0(x[0])\n")
    ns = {}
    exec(compile("\n".join(src), f"<chain of {n}>", "exec"), ns)
    return ns


def test_a_chain_of_150_helpers_compiles_and_runs(simulator):
    limit = sys.getrecursionlimit()
    ns = _chain(150)       # ~20 Python frames a level: deeper than the default limit allows
    k = cuda.jit(ns["chain_kernel"])
    k.compile(SIG)
    x = np.zeros(1)
    k[1, 1](x)
    assert x[0] == 150.0
    assert sys.getrecursionlimit() == limit


def test_a_chain_deeper_than_the_limit_is_refused_with_its_start(monkeypatch):
    from gpureplace.compiler import frontend
    monkeypatch.setattr(frontend, "MAX_DEPTH", 20)
    ns = _chain(30)
    with pytest.raises(CompileError) as info:
        cuda.jit(ns["chain_kernel"]).compile(SIG)
    err = info.value
    assert "nest more than 20 calls deep" in err.reason
    assert "(chain_kernel -> h0 -> h1 -> h2 -> ... (14 more) -> h17 -> h18 -> h19)" in \
        err.reason
    assert err.function == "h18" and err.lineno == ns["h18"].__code__.co_firstlineno + 1


def test_a_module_that_compiles_eagerly_while_it_is_imported_does_not_hang(tmp_path):
    """An explicit signature compiles while the module is still being imported; Numba's front end
    looks the module up (importing it) during typing.  A compile that moved to another thread to
    get a deeper stack waited forever on the import lock the importing thread holds."""
    import subprocess
    import textwrap
    (tmp_path / "eager_mod.py").write_text(textwrap.dedent("""
        from gpureplace import cuda

        def helper(v):
            return v * 2.0

        @cuda.jit("void(float64[:])")
        def eager(x):
            i = cuda.grid(1)
            if i < x.size:
                x[i] = helper(x[i])
    """))
    code = ("import eager_mod, numpy as np\n"
            "x = np.arange(4.0)\n"
            "eager_mod.eager[1, 4](x)\n"
            "print(x.tolist())\n")
    env = dict(__import__("os").environ, GPUREPLACE_BACKEND="simulator", GPUREPLACE_CACHE="0",
               PYTHONPATH=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0.0, 2.0, 4.0, 6.0]"


# =============================================================================================
# 9. no GPU


def test_the_gpu_backend_without_a_gpu_says_so_before_anything_is_copied(monkeypatch):
    from gpureplace.errors import NoDeviceError
    from gpureplace import probe
    monkeypatch.setattr(settings, "backend", "gpu")
    monkeypatch.setattr(probe, "available", lambda: False)

    @cuda.jit
    def k(x, y):
        x[0] = y

    with warnings.catch_warnings():
        warnings.simplefilter("error")              # (no warning of copies that cannot happen)
        with pytest.raises(NoDeviceError) as info:
            k[1, 1](np.zeros(3), 1.0)
    text = str(info.value)
    assert text.index("no CUDA GPU was found") < text.index("GPUREPLACE_BACKEND=simulator")
    assert "gpureplace.config.settings.backend = 'simulator'" in text
    assert text.startswith(f"{k.__qualname__}:")     # the kernel that could not launch
    # timing it says the same (it asked CuPy, absent, for CUDA events: an AttributeError)
    import gpureplace
    with pytest.raises(NoDeviceError, match=r"timing .*k\[1, 1\]: no CUDA GPU was found"):
        gpureplace.benchmark(k[1, 1], np.zeros(3), 1.0)


# =============================================================================================
# 11. the rest of the family


G = 0.0


def assigns_a_global(x):
    global G
    G = x[0]


def deletes_a_name(x):
    a = x[0]
    del a
    x[0] = 1


def imports_inside(x):
    import math as m
    x[0] = m.sqrt(x[1])


def _kwargs_helper(a, **kw):
    return a


def calls_kwargs_helper(x):
    x[0] = _kwargs_helper(x[0], scale=2)


def _kwonly_helper(a, *, b=1.0):
    return a + b


def calls_kwonly_helper(x):
    x[0] = _kwonly_helper(x[0], b=2.0)


def walrus_in_condition(x):
    if (n := x[0]) > 0:
        x[1] = n


@pytest.mark.parametrize("func, marker, words", [
    (assigns_a_global, "G = x[0]", ("assigning the global 'G'", "array argument")),
    (deletes_a_name, "del a", ("del is not supported",)),
    (imports_inside, "import math", ("import is not supported", "top of the file")),
    (calls_kwargs_helper, "= _kwargs_helper(", ("_kwargs_helper takes **kw",)),
    (calls_kwonly_helper, "= _kwonly_helper(", ("keyword-only parameters (b)",
                                              "def _kwonly_helper(a, b=1.0)")),
    (walrus_in_condition, "if (n :=", ("split it into simpler statements", ":=")),
])
def test_other_constructs_are_named_at_their_line(func, marker, words):
    _refused_at(func, marker, words)


def test_kernel_parameters_a_launch_cannot_fill_are_refused_where_defined():
    def kwonly(x, *, y=1.0):
        x[0] = y

    def kwargs(x, **kw):
        x[0] = 1

    for func, words in ((kwonly, "keyword-only parameters (y)"),
                        (kwargs, "takes **kw, which a kernel cannot")):
        with pytest.raises(CompileError, match=words.replace("(", r"\(").replace(")", r"\)")
                           .replace("*", r"\*")):
            cuda.jit(func)


def test_star_args_kernel_is_refused_at_launch_but_serves_as_a_device_function(simulator):
    @cuda.jit
    def star(*xs):                   # numba-cuda's consumer(func, *args): a device function
        return xs[0] + xs[1]

    @cuda.jit
    def caller(out):
        out[0] = star(2.0, 3.5)

    out = np.zeros(1)
    caller[1, 1](out)
    assert out[0] == 5.5
    caller.compile("void(float64[::1])")
    for attempt in (lambda: star.compile("void(float64, float64)"),
                    lambda: star[1, 1](1.0, 2.0)):
        with pytest.raises(CompileError, match=r"star takes \*xs, which a kernel cannot .*"
                                               r"name the parameters") as info:
            attempt()
        assert info.value.lineno == star.py_func.__code__.co_firstlineno


def test_a_launch_that_leaves_out_a_defaulted_parameter_says_defaults_are_not_used(simulator):
    @cuda.jit
    def with_default(x, y=2.0):
        x[0] = y

    with pytest.raises(LaunchError, match=r"missing argument\(s\) 'y'.*default values are "
                                          r"not used"):
        with_default[1, 1](np.zeros(1))


def test_no_warning_or_change_for_supported_code(simulator):
    def fine(x):
        t = (1.0, 2.0)
        for v in t:
            x[0] += v
        f = lambda v: v + 1  # noqa: E731
        x[1] = f(x[1])

    k = cuda.jit(fine)
    k.compile(SIG)
    x = np.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k[1, 1](x)
    np.testing.assert_array_equal(x, [3.0, 1.0])


def _slice_from_slice(a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i, 1:3] = a[i, :2]                  # copy


def test_an_array_assigned_to_a_slice_is_named_with_what_to_write_instead():
    """Numba copies through a temporary when the two may overlap; device code has no heap:
    its "NRT required but not enabled" becomes a reason at the user's line."""
    err = _refused(_slice_from_slice, "void(float64[:, :])")
    _assert_at(err, _slice_from_slice, "# copy")
    assert "assigning an array to a slice" in err.reason and "a[i, :] = 0" in err.reason
    assert "NRT" not in err.reason

    def fill(a):
        i = cuda.grid(1)
        if i < a.shape[0]:
            a[i, :] = 0.0
            a[i, 3:] = 2.0

    cuda.jit(fill).compile("void(float64[:, :])")       # one number to a slice compiles


def _atomic_misspelt(x):
    i = cuda.grid(1)
    cuda.atomic.addd(x, 0, 1.0)
    x[i] = 0.0


def _module_misspelt(x):
    i = cuda.grid(1)
    x[i] = cuda.shfl_donw_sync(0xFFFFFFFF, x[i], 1)


@pytest.mark.parametrize("func, text", [
    (_atomic_misspelt, "cuda.atomic has no attribute 'addd' (did you mean add"),
    (_module_misspelt, "module 'gpureplace.cuda' has no attribute 'shfl_donw_sync' (did you "
                       "mean shfl_down_sync"),
])
def test_a_misspelt_member_of_cuda_is_named_at_its_line_with_close_names(func, text):
    """(a member of cuda.atomic, cuda.fp16, ... was "'Namespace' object has no attribute", at
    the function's first line)"""
    err = _refused(func)
    assert text in str(err)
    assert err.lineno == func.__code__.co_firstlineno + 2


def _recursive_closure(x):
    def inner(i):
        if i == 0:
            return 0
        return inner(i - 1) + 1
    x[0] = inner(5)


def test_a_recursive_closure_is_named_with_what_to_write():
    """(Numba's bare "Unsupported use of cell variable encountered", at the kernel's def line)"""
    err = _refused(_recursive_closure)
    assert "the function inner defined inside _recursive_closure calls itself" in err.reason
    assert "define inner at module level" in err.reason
    assert err.lineno == _recursive_closure.__code__.co_firstlineno + 1


def _stores_into(out):
    i = cuda.grid(1)
    out[i] = 1.0


def _reads_from(x, out):
    i = cuda.grid(1)
    out[i] = x[i]


@pytest.mark.parametrize("func, args, name", [
    (_stores_into, "void(float64)", "out"),
    (_reads_from, "void(float64, float64[:])", "x"),
])
def test_a_number_where_an_array_is_indexed_names_the_argument(func, args, name):
    """(was "cannot store float64 into float64 at index int64")"""
    err = _refused(func, args)
    assert f"argument {name!r} is a number (float64) where this line indexes an array" in \
        err.reason
    assert err.lineno == func.__code__.co_firstlineno + 2


REBOUND = None


def _calls_rebound(x):
    x[0] = REBOUND(1.0)


def test_a_global_rebound_to_a_number_is_named_where_it_is_called(monkeypatch):
    """(was Numba's "Invalid use of Literal[int](5) ... as a callable", naming no name)"""
    monkeypatch.setitem(globals(), "REBOUND", 5)
    err = _refused(_calls_rebound)
    assert "'REBOUND' is called here, but the global REBOUND is int 5, not a function" in \
        err.reason


# -- global arrays device code cannot read: named, at the line that reads them ------------------

BIG_ENDIAN = np.arange(4, dtype=">f8")
MASKED = np.ma.masked_array([1.0, 2.0], mask=[0, 1])
SWAPPED_FIELDS = np.zeros(2, dtype=[("a", ">i4"), ("b", "<f8")])


def _reads_big_endian(out):
    out[0] = BIG_ENDIAN[0] * 2.0                   # READS


def _reads_masked(out):
    out[0] = MASKED[0]                             # READS


def _reads_swapped_fields(out):
    out[0] = SWAPPED_FIELDS[0]["a"]                # READS


def _reads_module_attribute(out):
    out[0] = _ARRAYS_MODULE.G[0]                   # READS


_ARRAYS_MODULE = type(sys)("gr_refusals_arrays_mod")
_ARRAYS_MODULE.G = np.arange(3, dtype=">f4")
sys.modules[_ARRAYS_MODULE.__name__] = _ARRAYS_MODULE


@pytest.mark.parametrize("func, words", [
    (_reads_big_endian, "BIG_ENDIAN is an array of dtype >f8 (another byte order than this "
                        "machine's), which device code cannot read: bind the name to "
                        "BIG_ENDIAN.astype('<f8')"),
    (_reads_masked, "MASKED is a NumPy masked array, which device code cannot read as one: read "
                    "its data and its mask as two arrays (np.ma.getdata(MASKED), "
                    "np.ma.getmaskarray(MASKED)), or MASKED.filled(value)"),
    (_reads_swapped_fields, "SWAPPED_FIELDS is an array of a structured dtype with fields in "
                            "another byte order than this machine's (a: >i4)"),
    (_reads_module_attribute, "gr_refusals_arrays_mod.G is an array of dtype >f4 (another byte "
                              "order than this machine's), which device code cannot read: bind "
                              "the name to gr_refusals_arrays_mod.G.astype('<f4')"),
])
def test_a_global_array_device_code_cannot_read_is_named_at_its_line(func, words):
    """As a launch names an argument of another byte order (or a masked array), a global one
    is named at the line that reads it, not with Numba's bare "Unsupported array dtype: >f8"
    at the decorator's line."""
    with pytest.raises(CompileError) as info:
        cuda.jit(func).compile("void(float64[::1])")
    line = inspect.getsourcelines(func)[1] + 1
    assert words in str(info.value), str(info.value)
    assert f"line {line})" in str(info.value), str(info.value)
