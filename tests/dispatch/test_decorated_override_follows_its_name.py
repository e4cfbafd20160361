"""An override registered with the decorator form follows its implementation's name, as one
registered by a call does: ``@fast.override(math.tan) def impl(x)`` and, later, ``def impl(x)``
again (its cell run again without the decorator) makes the kernels using the override run the
new body.  The decorator sees the function before its name is bound, so the override took no
name to follow, and kernels kept the first body."""

import math
import sys
import types

import numpy as np

from gpureplace import Context

FIRST = '''
import math
from gpureplace import cuda

@fast.override(math.tan)
def impl_b(x):
    return 30.0

@cuda.jit
def kb(o, x):
    o[0] = math.tan(x)
'''


def test_a_decorated_overrides_implementation_defined_again_is_followed():
    module = types.ModuleType("gpureplace_test_decorated_override")
    sys.modules[module.__name__] = module
    try:
        fast = Context("decorated-override-test")
        module.fast = fast
        exec(compile(FIRST, "<decorated-override>", "exec"), module.__dict__)
        kernel = module.kb.with_context(fast)
        o = np.zeros(1)
        kernel[1, 1](o, 1.0)
        assert o[0] == 30.0
        exec("def impl_b(x):\n    return 40.0\n", module.__dict__)    # the cell, again
        kernel[1, 1](o, 1.0)
        assert o[0] == 40.0
        module.kb[1, 1](o, 1.0)                                       # the default context:
        assert o[0] == math.tan(1.0)                                 # no override there
    finally:
        del sys.modules[module.__name__]


def test_a_function_of_an_exec_namespace_follows_no_module_name():
    """(A function whose globals are not its module's namespace was not defined there: a
    function of the same name in that module is another function.)"""
    ns = {"__name__": "__main__"}
    exec("def impl_c(x):\n    return 5.0\n", ns)
    from gpureplace.dispatch.context import _home_of
    assert _home_of(ns["impl_c"]) is None
    assert _home_of(np.sin) is None and _home_of(lambda x: x) is None
