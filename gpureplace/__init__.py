"""gpureplace: Python GPU kernels that stay true to the notebook.

    from gpureplace import cuda, override, Context, default_context, libdevice
"""

__version__ = "0.1.0"

from .dispatch import Context, builtin_context, default_context, override  # noqa: F401,E402
from .dispatch import builtin as _builtin  # noqa: F401,E402  (fills the built-in table)
from .errors import CompileError, GPUReplaceError, LaunchError  # noqa: F401,E402
from . import cuda, libdevice  # noqa: F401,E402


def load_ipython_extension(ipython):
    from .ipython.extension import load_ipython_extension as _load
    _load(ipython)


def unload_ipython_extension(ipython):
    from .ipython.extension import unload_ipython_extension as _unload
    _unload(ipython)
