"""gpureplace: Python GPU kernels that stay true to the notebook.

    from gpureplace import cuda, override, Context, default_context, libdevice
    gpureplace.graph(fn, *args) / with gpureplace.capture() as g: ...   (CUDA graphs)
    gpureplace.benchmark(kernel[blocks, threads], *args)   (timing: benchmarking.py)
"""

from .version import __version__  # noqa: F401

# CUDA start-up and the libdevice parse run in a background thread while Numba is imported below.
from .runtime import warmup as _warmup  # noqa: E402
_warmup.start()

from .dispatch import (Context, builtin_context, default_context, fastmath_context,  # noqa: F401,E402
                       override)
from .compiler import builtins as _builtins  # noqa: F401,E402  (fills the built-in table)
from .errors import CompileError, GPUReplaceError, LaunchError  # noqa: F401,E402
from . import cuda, libdevice  # noqa: F401,E402
import sys as _sys  # noqa: E402

from .compiler import diskcache as cache  # noqa: F401,E402  (gpureplace.cache)

_sys.modules.setdefault(__name__ + ".cache", cache)   # `import gpureplace.cache` too
from .jit.graphs import Graph, GraphCaptureError, GraphStaleError, capture, graph  # noqa: F401,E402
from .config import settings  # noqa: F401,E402
from .jit import backends as _backends  # noqa: E402


def _load_simulator():
    import importlib
    return importlib.import_module(".simulator", __name__)


# The simulator backend, above the layers that launch and allocate: imported on first use.
_backends.set_simulator(_load_simulator)


def refresh():
    """Revalidate every compiled kernel at its next launch (use after redefining plain helpers
    outside IPython; in IPython the extension's cell hook does this for you)."""
    from .compiler.overload_redefinitions import note_overload_redefinitions
    from .tracking import world
    note_overload_redefinitions()                 # (a numba.extending.overload defined again)
    world.bump()
    from .jit.collect import collect
    collect()                                     # (old definitions' code: let go)


def stats():
    """Counters: kernel and device compiles, memory/disk cache hits, invalidations."""
    from .tracking.stats import snapshot
    return snapshot()


def load_ipython_extension(ipython):
    from .ipython.extension import load_ipython_extension as _load
    _load(ipython)


def unload_ipython_extension(ipython):
    from .ipython.extension import unload_ipython_extension as _unload
    _unload(ipython)


def __getattr__(name):
    # ``gpureplace.simulator`` is imported on first use (most sessions never need it).
    if name in ("simulator", "dask", "prewarm"):   # (gpureplace.dask imports Dask)
        import importlib
        return importlib.import_module(f".{name}", __name__)
    if name in ("benchmark", "BenchmarkResult"):
        from . import benchmarking
        return getattr(benchmarking, name)
    raise AttributeError(f"module 'gpureplace' has no attribute {name!r}")
