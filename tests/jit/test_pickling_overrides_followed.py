"""An override follows its implementation's name: the cell defining ``my_sin`` run again, and
not the one that registered it, makes the kernels using the override run the new body.  A
pickle of such a kernel (a Dask task) and its token see the new body too, before any launch
here: they carried the old one (the table follows the name only at its next lookup) -- a
worker ran the old code, and Dask's token was unchanged -- and getting it right leaves the
table as it is."""

import textwrap

from conftest import REMOTE_UNPICKLE, python_process

#: (in the program of each test) ``remote`` (conftest), ``launched`` and ``RUN``
REMOTE = REMOTE_UNPICKLE + '''

def launched(k):
    a = np.ones(1)
    k[1, 1](a)
    return a[0]

RUN = "a = np.ones(1); f[1, 1](a); print(a[0], tokenize(f))\\n"
'''


def _run(program):
    return python_process(REMOTE + textwrap.dedent(program), GPUREPLACE_BACKEND="simulator")


def test_a_default_override_defined_again_travels_and_changes_the_token():
    out = _run('''
        def my_sin(x):
            return 1000.0
        gpureplace.override(math.sin, my_sin)

        @cuda.jit
        def k(a):
            a[0] = math.sin(a[0])

        assert launched(k) == 1000.0
        first = tokenize(k)
        assert remote(k, RUN) == ["1000.0", first]

        def my_sin(x):                  # the cell defining it, run again
            return 2000.0

        version, entry = default_context.version, default_context.overrides()
        second = tokenize(k)
        assert second != first
        assert remote(k, RUN) == ["2000.0", second]
        # (pickling and tokenizing left the table to the next lookup)
        assert default_context.version == version and default_context.overrides() == entry
        assert entry[0].impl is not my_sin
        assert launched(k) == 2000.0 and tokenize(k) == second
        print("ok")
        ''')
    assert out.split() == ["ok"]


def test_a_layer_of_a_context_stack_defined_again_travels_with_a_kernel_of_the_top_one():
    """The implementation redefined is the parent layer's (``fast``), the kernel compiled in
    the layer stacked on it (``top``): the parent travels as the pickle's context's parent,
    and the top context's token is made of every layer's."""
    out = _run('''
        def my_cos(x):
            return -5.0
        def my_tan(x):
            return 3.0
        fast = Context("fast")
        fast.override(math.cos, my_cos)
        top = Context("top", parent=fast)
        top.override(math.tan, my_tan)

        @cuda.jit
        def k(a):
            a[0] = math.cos(a[0]) + math.tan(a[0])

        kt = k.with_context(top)
        assert launched(kt) == -2.0
        first, top_first, fast_first = tokenize(kt), tokenize(top), tokenize(fast)

        def my_cos(x):                  # the cell defining it, run again
            return -7.0

        second = tokenize(kt)
        assert second != first and tokenize(top) != top_first and tokenize(fast) != fast_first
        assert remote(kt, RUN) == ["-4.0", second]
        assert remote(top, "print(f.lookup(math.cos).impl(0.0), tokenize(f))\\n") == \
            ["-7.0", tokenize(top)]
        assert launched(kt) == -4.0 and tokenize(kt) == second
        print("ok")
        ''')
    assert out.split() == ["ok"]



def test_in_a_notebook_the_cell_defining_the_implementation_again_reaches_the_workers():
    """The same through IPython with the extension loaded, cell by cell (its hooks run after
    each): a task submitted after the cell runs the new body elsewhere, under a new token."""
    cells = [REMOTE + textwrap.dedent('''
        def my_sin(x):
            return 1000.0
        gpureplace.override(math.sin, my_sin)

        @cuda.jit
        def k(a):
            a[0] = math.sin(a[0])

        first = tokenize(k)
        assert remote(k, RUN) == ["1000.0", first]
        '''), "def my_sin(x):\n    return 2000.0\n", textwrap.dedent('''
        second = tokenize(k)
        assert second != first
        assert remote(k, RUN) == ["2000.0", second]
        print("ok")
        ''')]
    out = python_process(textwrap.dedent(f'''
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        shell.run_line_magic("load_ext", "gpureplace")
        for cell in {cells!r}:
            shell.run_cell(cell).raise_error()
        '''), GPUREPLACE_BACKEND="simulator")
    assert out.split()[-1] == "ok"
