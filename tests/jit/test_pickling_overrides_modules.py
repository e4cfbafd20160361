"""An override that the user's own module registers in the default context as it is imported
(``gpureplace.override(math.sin, my_sin)`` at its top level) goes with a kernel to another
process, which need not import that module for anything else: only the overrides the main
program or notebook made travelled, and a kernel whose globals never name the module ran the
real ``math.sin`` there.  It travels by reference: unpickling imports the module, whose own
registration the pickle's entry then leaves as it is."""

import textwrap

from conftest import python_process

MODULE = '''
import math
import gpureplace
from gpureplace.cuda import extending

def my_sin(x):
    return 1000.0

gpureplace.override(math.sin, my_sin)

@extending.overload(math.cos)
def my_cos(x):
    return lambda x: 20.0
'''

PROGRAM = '''
import math, pickle, subprocess, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
sys.path.insert(0, {folder!r})
import {module}                               # registers math.sin's override as it is imported
from gpureplace import cuda
from dask.base import tokenize

@cuda.jit
def k(a):
    a[0] = math.sin(a[0]) + math.cos(a[0])

def remote(script):
    """``script``'s output in a new process that finds the module but never imported it."""
    code = ("import math, pickle, sys, warnings, numpy as np\\n"
            "warnings.simplefilter('ignore')\\n"
            f"sys.path.insert(0, {folder!r})\\n"
            "from dask.base import tokenize\\n"
            "from gpureplace.dispatch.context import default_context as default\\n" + script)
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(k),
                          capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().split()

a = np.ones(1)
k[1, 1](a)
assert a[0] == 1020.0
'''


def _run(tmp_path, program):
    module = f"user_overrides_{tmp_path.name}".replace("-", "_")
    (tmp_path / f"{module}.py").write_text(MODULE)
    head = PROGRAM.format(folder=str(tmp_path), module=module)
    return python_process(head + textwrap.dedent(program).replace("MODULE", module),
                          GPUREPLACE_BACKEND="simulator")


def test_a_modules_override_goes_with_a_kernel_that_never_names_the_module(tmp_path):
    out = _run(tmp_path, '''
        got = remote("imported = 'MODULE' in sys.modules\\n"
                     "f = pickle.loads(sys.stdin.buffer.read())\\n"
                     "a = np.ones(1); f[1, 1](a)\\n"
                     "print(imported, 'MODULE' in sys.modules, a[0], tokenize(f))\\n")
        assert got == ["False", "True", "1020.0", tokenize(k)], got
        print("ok")
        ''')
    assert out.split() == ["ok"]


def test_a_process_that_imported_the_module_keeps_its_own_registration(tmp_path):
    """Unpickled where the module registered its overrides already, and unpickled again: one
    entry for each, the module's own, and nothing moved (what was compiled with them stays
    valid) -- the function arrives as the module's own object, the overload as an equal one."""
    out = _run(tmp_path, '''
        got = remote("import MODULE\\n"
                     "entry, version = default.overrides(), default.version\\n"
                     "data = sys.stdin.buffer.read()\\n"
                     "f = pickle.loads(data)\\n"
                     "a = np.ones(1); f[1, 1](a)\\n"
                     "f = pickle.loads(data)\\n"
                     "print(default.overrides() == entry, default.version == version,\\n"
                     "      entry[0].impl is MODULE.my_sin, a[0], tokenize(f))\\n")
        assert got == ["True", "True", "True", "1020.0", tokenize(k)], got
        print("ok")
        ''')
    assert out.split() == ["ok"]


BULKY_MODULE = '''
import math, threading
import numpy as np
import gpureplace

TABLE = np.zeros(1_000_000)
_guard = threading.Lock()

def my_cos(x):
    return TABLE[0] + 20.0

def guarded_tan(x):
    if _guard is None:                # (reads the lock: a global of the module it needs)
        return 0.0
    return 3.0

gpureplace.override(math.cos, my_cos)
gpureplace.override(math.tan, guarded_tan)
'''


def test_a_modules_override_travels_as_a_reference_not_with_the_modules_data(tmp_path):
    """The module's function goes by name: its module's 8 MB table (read by the override) and
    its lock (which does not pickle) stay home; the other process imports the module.  They
    made every kernel's pickle 8 MB, or made it fail on the lock with a bare TypeError."""
    (tmp_path / "bulky_overrides.py").write_text(BULKY_MODULE)
    out = python_process(textwrap.dedent(f'''
        import math, pickle, subprocess, sys, warnings
        import numpy as np
        warnings.simplefilter("ignore")
        sys.path.insert(0, {str(tmp_path)!r})
        import bulky_overrides
        from gpureplace import cuda
        from dask.base import tokenize

        @cuda.jit
        def k(a):                      # (tan's override, unused here, still travels)
            a[0] = math.cos(a[0])

        data = pickle.dumps(k)
        code = ("import pickle, sys, numpy as np\\n"
                "sys.path.insert(0, {str(tmp_path)!r})\\n"
                "from dask.base import tokenize\\n"
                "f = pickle.loads(sys.stdin.buffer.read())\\n"
                "a = np.zeros(1); f[1, 1](a)\\n"
                "print(a[0], tokenize(f))\\n")
        done = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True)
        assert done.returncode == 0, done.stderr.decode()
        print(len(data) < 20_000, done.stdout.decode().split() == ["20.0", tokenize(k)])
    '''), GPUREPLACE_BACKEND="simulator")
    assert out.split() == ["True", "True"]
