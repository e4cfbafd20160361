"""What an ``@overload`` generator reads is a dependency of the code compiled with its answer.

A generator picks the implementation from what it reads when it is called -- a global flag, a
module-level implementation by name -- so a change to either recompiles exactly the kernels that
call the overloaded function (in one process, and after a warm start from the disk cache); an
``overload_method`` / ``overload_attribute`` defined again recompiles exactly the kernels that
used it; an exception raised inside a generator is said with its type, the generator's line and
the kernel's call.  The programs that register overloads run in processes of their own: Numba's
registry is process-wide.
"""

import inspect
import json
import textwrap

from conftest import python_process

import gpureplace
from gpureplace import CompileError, cuda
from gpureplace.cuda import extending

_PRELUDE = textwrap.dedent("""
    import json, os
    import numpy as np
    import gpureplace
    from gpureplace import cuda
    from gpureplace.cuda.extending import overload, overload_attribute, overload_method
    from numba import extending as numba_extending
    from numba.core import types

    SIG = (types.float64[::1],)

    def ops(kernel):
        ir = kernel.inspect_llvm(SIG)
        return [line.split("=", 1)[1].strip() for line in ir.splitlines()
                if " fadd " in line or " fmul " in line or " fsub " in line]

    def count(name):
        return gpureplace.stats()[name]
""")

_GENERATORS = _PRELUDE + textwrap.dedent("""
    MODE = os.environ.get("MODE0", "plus")

    def impl_plus(x):
        return x + 1.0

    def impl_times(x):
        return x * 10.0

    def f(x):
        pass

    def g(x):
        pass

    def h(x):
        pass

    @overload(f)
    def ov_f(x):
        return impl_plus if MODE == "plus" else impl_times

    @overload(g)
    def ov_g(x):
        return lambda x: x - 3.0

    @numba_extending.overload(h, target="cuda")      # Numba's own, reaching kernels
    def ov_h(x):
        return impl_plus if MODE == "plus" else impl_times

    @cuda.jit
    def kf(a):
        a[0] = f(a[0])

    @cuda.jit
    def kg(a):
        a[0] = g(a[0])

    @cuda.jit
    def kh(a):
        a[0] = h(a[0])
""")


def test_a_global_the_generator_reads_recompiles_exactly_its_callers():
    out = python_process(_GENERATORS + textwrap.dedent("""
        first = {name: k.compile(SIG) for name, k in (("f", kf), ("g", kg), ("h", kh))}
        seen = {"start": {"f": ops(kf), "h": ops(kh)}}

        MODE = "times"
        gpureplace.refresh()
        again = {name: k.compile(SIG) for name, k in (("f", kf), ("g", kg), ("h", kh))}
        seen["mode"] = {"f": ops(kf), "h": ops(kh),
                        "same": {n: again[n] is first[n] for n in again}}

        @cuda.jit
        def kf_new(a):                  # compiled only now: Numba's kept answer is not used
            a[0] = f(a[0])
        seen["new"] = ops(kf_new)

        def impl_times(x):              # the implementation it returns, defined again
            return x * 100.0
        gpureplace.refresh()
        third = {name: k.compile(SIG) for name, k in (("f", kf), ("g", kg), ("h", kh))}
        seen["impl"] = {"f": ops(kf), "h": ops(kh),
                        "same": {n: third[n] is again[n] for n in third}}
        a = np.array([2.0]); kf[1, 1](a); seen["simulated"] = a[0]

        kf_new.compile(SIG)             # (it calls f too: the new impl_times)
        seen["new_impl"] = ops(kf_new)
        UNRELATED = 1
        before = count("kernel_compiles")
        gpureplace.refresh()
        for k in (kf, kg, kh, kf_new):
            k.compile(SIG)
        seen["unrelated_compiles"] = count("kernel_compiles") - before
        print(json.dumps(seen))
    """), GPUREPLACE_CACHE="0", GPUREPLACE_BACKEND="simulator")
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["start"] == {"f": [seen["start"]["f"][0]], "h": [seen["start"]["h"][0]]}
    assert all("fadd" in op and "1.000000e+00" in op for op in seen["start"]["f"])
    for step, constant in (("mode", "1.000000e+01"), ("impl", "1.000000e+02")):
        for name in ("f", "h"):
            assert len(seen[step][name]) == 1, seen
            assert "fmul" in seen[step][name][0] and constant in seen[step][name][0], seen
        assert seen[step]["same"] == {"f": False, "g": True, "h": False}, seen
    assert len(seen["new"]) == 1 and "1.000000e+01" in seen["new"][0]
    assert seen["new_impl"] == seen["impl"]["f"]
    assert seen["simulated"] == 200.0
    assert seen["unrelated_compiles"] == 0


def test_a_generator_change_after_a_warm_start_from_the_disk_cache(tmp_path):
    cache = str(tmp_path / "cache")
    program = _GENERATORS + textwrap.dedent("""
        seen = {}
        kf.compile(SIG)
        seen["first"] = {"ops": ops(kf), "disk": count("disk_hits"),
                         "compiles": count("kernel_compiles")}
        if os.environ.get("CHANGE"):
            MODE = "times"
            gpureplace.refresh()
            kf.compile(SIG)
            seen["mode"] = {"ops": ops(kf), "compiles": count("kernel_compiles")}

            def impl_times(x):
                return x * 100.0
            gpureplace.refresh()
            kf.compile(SIG)
            seen["impl"] = {"ops": ops(kf), "compiles": count("kernel_compiles")}
        print(json.dumps(seen))
    """)

    def run(**env):
        return json.loads(python_process(program, GPUREPLACE_CACHE_DIR=cache,
                                         GPUREPLACE_BACKEND="simulator", **env)
                          .strip().splitlines()[-1])

    cold = run()
    assert cold["first"]["compiles"] == 1 and "1.000000e+00" in cold["first"]["ops"][0]
    warm = run(CHANGE="1")
    assert warm["first"]["disk"] == 1 and warm["first"]["compiles"] == 0, warm
    assert warm["mode"]["compiles"] == 1 and "1.000000e+01" in warm["mode"]["ops"][0], warm
    assert warm["impl"]["compiles"] == 2 and "1.000000e+02" in warm["impl"]["ops"][0], warm
    # another choice in a new process is another entry (never the one stored for "plus")
    other = run(MODE0="times")
    assert "fmul" in other["first"]["ops"][0] and "1.000000e+01" in other["first"]["ops"][0]


def test_a_generator_reading_a_global_in_a_notebook_cell():
    out = python_process(textwrap.dedent("""
        from IPython.core.interactiveshell import InteractiveShell
        ip = InteractiveShell.instance(colors="NoColor")
        def run(cell):
            result = ip.run_cell(cell)
            assert not result.error_in_exec and not result.error_before_exec, cell
        run("%load_ext gpureplace")
        run('''
        import numpy as np, gpureplace
        from gpureplace import cuda
        from gpureplace.cuda.extending import overload
        from numba.core import types
        MODE = "plus"
        def impl_plus(x):
            return x + 1
        def impl_times(x):
            return x * 10
        def f(x):
            pass
        @overload(f)
        def ov_f(x):
            if MODE == "plus":
                return impl_plus
            return impl_times
        @cuda.jit
        def k(a):
            a[0] = f(a[0])
        @cuda.jit
        def other(a):
            a[0] = a[0] - 1
        SIG = (types.float64[::1],)
        first, unrelated = k.compile(SIG), other.compile(SIG)
        ''')
        run('MODE = "times"')
        run('''
        assert k.compile(SIG) is not first and other.compile(SIG) is unrelated
        assert "1.000000e+01" in k.inspect_llvm(SIG)
        a = np.array([2.0]); k[1, 1](a); assert a[0] == 20.0
        second = k.compile(SIG)
        ''')
        run('''
        def impl_times(x):
            return x * 100
        ''')
        run('''
        assert k.compile(SIG) is not second and other.compile(SIG) is unrelated
        assert "1.000000e+02" in k.inspect_llvm(SIG)
        print("ok")
        ''')
    """), GPUREPLACE_CACHE="0", GPUREPLACE_BACKEND="simulator")
    assert out.strip().splitlines()[-1] == "ok"


def test_what_a_generator_of_another_module_reads(tmp_path):
    (tmp_path / "ovl_settings.py").write_text('MODE = "plus"\n')
    (tmp_path / "ovl_library.py").write_text(textwrap.dedent("""
        import ovl_settings
        from gpureplace.cuda.extending import overload

        SCALE = 10.0

        def f(x):
            pass

        def impl_scale(x):
            return x * SCALE

        @overload(f)
        def ov_f(x):
            if ovl_settings.MODE == "plus":         # an attribute of the user's module
                return lambda x: x + 1.0
            return impl_scale                       # a global of the generator's module
    """))
    out = python_process(_PRELUDE + textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import ovl_library, ovl_settings

        @cuda.jit
        def k(a):
            a[0] = ovl_library.f(a[0])

        @cuda.jit
        def other(a):
            a[0] = a[0] - 1.0

        seen, first, unrelated = {{}}, k.compile(SIG), other.compile(SIG)
        seen["start"] = ops(k)
        ovl_settings.MODE = "times"
        gpureplace.refresh()
        second = k.compile(SIG)
        seen["mode"] = [second is not first, other.compile(SIG) is unrelated, ops(k)]

        def impl_scale(x):
            return x * 1000.0
        ovl_library.impl_scale = impl_scale         # (its module's name bound anew)
        gpureplace.refresh()
        seen["impl"] = [k.compile(SIG) is not second, other.compile(SIG) is unrelated, ops(k)]
        print(json.dumps(seen))
    """), GPUREPLACE_CACHE="0", GPUREPLACE_BACKEND="simulator")
    seen = json.loads(out.strip().splitlines()[-1])
    assert "fadd" in seen["start"][0] and "1.000000e+00" in seen["start"][0], seen
    assert seen["mode"][:2] == [True, True] and "1.000000e+01" in seen["mode"][2][0], seen
    assert seen["impl"][:2] == [True, True] and "1.000000e+03" in seen["impl"][2][0], seen


def test_a_method_or_attribute_defined_again_recompiles_exactly_its_users():
    out = python_process(_PRELUDE + textwrap.dedent("""
        @overload_method(types.Array, "scaled")
        def ov_scaled(a):
            return lambda a: a[0] * 2.0

        @overload_attribute(types.Array, "bumped")
        def ov_bumped(a):
            return lambda a: a[0] + 7.0

        @cuda.jit
        def km(a):
            a[0] = a.scaled()

        @cuda.jit
        def ka(a):
            a[0] = a.bumped

        @cuda.jit
        def kplain(a):
            a[0] = a[0] * 3.0

        kernels = {"m": km, "a": ka, "plain": kplain}
        def compiled():
            return {name: k.compile(SIG) for name, k in kernels.items()}
        seen, first = {"start": {"m": ops(km), "a": ops(ka)}}, compiled()

        @overload_method(types.Array, "scaled")      # the cell run again, a new body
        def ov_scaled(a):
            return lambda a: a[0] * 5.0
        gpureplace.refresh()

        @cuda.jit
        def km_new(a):                               # compiled only now
            a[0] = a.scaled()
        now = compiled()
        seen["method"] = {"m": ops(km), "new": ops(km_new),
                          "same": {n: now[n] is first[n] for n in now}}

        @overload_attribute(types.Array, "bumped")
        def ov_bumped(a):
            return lambda a: a[0] + 9.0
        gpureplace.refresh()
        then = compiled()
        seen["attribute"] = {"a": ops(ka), "same": {n: then[n] is now[n] for n in then}}

        @overload_method(types.Array, "unrelated")   # another name: nothing recompiles
        def ov_unrelated(a):
            return lambda a: a[0]
        gpureplace.refresh()
        last = compiled()
        seen["unrelated"] = {n: last[n] is then[n] for n in last}
        print(json.dumps(seen))
    """), GPUREPLACE_CACHE="0", GPUREPLACE_BACKEND="simulator")
    seen = json.loads(out.strip().splitlines()[-1])
    assert "2.000000e+00" in seen["start"]["m"][0] and "7.000000e+00" in seen["start"]["a"][0]
    assert len(seen["method"]["m"]) == 1 and "5.000000e+00" in seen["method"]["m"][0], seen
    assert seen["method"]["m"] == seen["method"]["new"]
    assert seen["method"]["same"] == {"m": False, "a": True, "plain": True}, seen
    assert len(seen["attribute"]["a"]) == 1 and "9.000000e+00" in seen["attribute"]["a"][0]
    assert seen["attribute"]["same"] == {"m": True, "a": False, "plain": True}, seen
    assert seen["unrelated"] == {"m": True, "a": True, "plain": True}, seen


def _line(fn, marker):
    """The line of ``fn``'s source that holds ``marker``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(lines) if marker in text)


def test_an_exception_inside_a_generator_names_its_type_its_line_and_the_call():
    def host(x):
        raise NotImplementedError

    def pick(name):
        return {"float64": 1}[name]                     # HELPER

    @extending.overload(host)
    def ov_host(x):
        table = {"float64": 1}
        if table[x.name + "_typo"]:                     # RAISES
            return lambda x: x

    @cuda.jit
    def k(a):
        i = cuda.grid(1)
        a[i] = host(a[i])                               # CALL

    sig = (extending.types.float64[::1],)

    def error():
        try:
            k.compile(sig)
        except CompileError as exc:
            return exc
        raise AssertionError("no CompileError")

    try:
        err = error()
        message = str(err)
        assert "KeyError: 'float64_typo' raised by ov_host, the @overload generator of " \
               "host (" in message, message
        assert f"line {_line(ov_host, '# RAISES')})" in message, message
        assert err.lineno == _line(k.py_func, "# CALL") and err.filename == __file__, message
        assert "Traceback" in err.detail and "ov_host" in err.detail

        @extending.overload(host)                       # a name that is not defined
        def ov_host2(x):
            if not_defined_anywhere:  # noqa: F821      # RAISES
                return lambda x: x

        message = str(error())
        assert "NameError: name 'not_defined_anywhere' is not defined raised by ov_host2" \
            in message, message
        assert f"line {_line(ov_host2, '# RAISES')})" in message, message

        @extending.overload(host)                       # raised in a helper it calls
        def ov_host3(x):
            factor = pick(x.name + "!")                 # RAISES
            return lambda x: x * factor

        message = str(error())
        assert "KeyError: 'float64!' raised by ov_host3" in message, message
        assert f"line {_line(ov_host3, '# RAISES')}), in pick (" in message, message
        assert f"line {_line(pick, '# HELPER')})" in message, message
    finally:
        gpureplace.default_context.remove_override(host)


def test_an_exception_inside_a_method_generator_names_it():
    program = _PRELUDE + textwrap.dedent("""
        @overload_method(types.Array, "twice")
        def ov_twice(a):
            return {"a": 1}[a.dtype.name]               # RAISES

        @cuda.jit
        def k(a):
            a[0] = a.twice()                            # CALL

        try:
            k.compile(SIG)
        except gpureplace.CompileError as exc:
            print(json.dumps([str(exc), exc.lineno]))
    """)
    out = python_process(program, GPUREPLACE_CACHE="0", GPUREPLACE_BACKEND="simulator")
    message, lineno = json.loads(out.strip().splitlines()[-1])
    lines = program.splitlines()
    raises = 1 + next(i for i, text in enumerate(lines) if "# RAISES" in text)
    call = 1 + next(i for i, text in enumerate(lines) if "# CALL" in text)
    assert message.startswith(f"in k (<string>, line {call}): KeyError: 'float64' raised by "
                              f"ov_twice, the @overload_method generator of Array.twice "
                              f"(<string>, line {raises})"), message
    assert lineno == call


def test_a_method_defined_again_with_another_return_type_types_as_it_lowers(tmp_path):
    """Numba types a method's call with the first template that answers and lowers it with the
    latest: an ``overload_method`` defined again (its cell run again) returning another type
    failed to compile ("cannot store i64 to double*").  The new definition replaces the old one
    for typing too."""
    out = python_process("""
import numpy as np
import gpureplace
from gpureplace import cuda
from gpureplace.cuda.extending import overload_method
from numba import types

@overload_method(types.Array, "pair_or_num")
def ov(a):
    return lambda a: a[0] * 2.0

@cuda.jit
def k(a, out):
    out[0] = a.pair_or_num()

a, out = np.array([3.0]), np.zeros(1)
k[1, 1](a, out)
print(out[0])

@overload_method(types.Array, "pair_or_num")
def ov(a):
    return lambda a: int(a[0]) * 7

gpureplace.refresh()
k[1, 1](a, out)
ir = k.inspect_llvm((types.float64[::1], types.float64[::1]))
print(out[0], "mul nsw i64" in ir and ", 7" in ir)
""", GPUREPLACE_CACHE_DIR=str(tmp_path))
    assert out.split() == ["6.0", "21.0", "True"]
