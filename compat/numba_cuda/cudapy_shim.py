"""What numba-cuda's own ``tests/cudapy`` files import, answered by gpureplace.

Installed by the ``conftest.py`` that ``run.py`` writes next to the fetched tests: ``numba.cuda`` is
``gpureplace.cuda`` (the one-import port the README promises), the modules numba-cuda merely
re-exports from Numba are Numba's own (``numba.cuda.types`` is ``numba.core.types``), and
``numba.cuda.testing`` / ``numba.cuda.tests.support`` are written here against gpureplace: the
skip decorators ask gpureplace's backend and device, and ``CUDATestCase`` builds on Numba's own
``numba.tests.support.TestCase`` (``assertPreciseEqual``).

What is neither is told apart by numba-cuda's own source tree (``run.py`` lists its modules in
the file ``GPUREPLACE_NUMBA_CUDA_MODULES`` names):

- a ``numba.cuda.*`` module of numba-cuda that is not its API (its NVVM pipeline, driver
  bindings, compiler passes) imports as a stand-in whose every name raises ``InternalModule``
  when used, so only the tests that use it are "not applicable" (``run.py`` counts a test whose
  failure is ``InternalModule`` as such), naming what they used;
- a name that is numba-cuda API but missing from gpureplace (``from numba.cuda import
  vectorize`` where numba-cuda has no module of that name, ``numba.cuda.extending``, ...)
  imports as a stand-in that raises ``MissingAPI`` when used: those tests fail, against
  gpureplace.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import unittest

#: numba-cuda modules that are Numba's own under another name.
ALIASES = {
    "numba.cuda.types": "numba.core.types",
    "numba.cuda.core.errors": "numba.core.errors",
    "numba.cuda.np": "numba.np",
    "numba.cuda.np.numpy_support": "numba.np.numpy_support",
    "numba.cuda.typing": "numba.core.typing",
    "numba.cuda.typing.typeof": "numba.core.typing.typeof",
    "numba.cuda.utils": "numba.core.utils",
    "numba.cuda.misc": "numba.misc",
    "numba.cuda.misc.special": "numba.misc.special",
    "numba.cuda.tests.support": "numba.tests.support",
    "numba.cuda.random": "gpureplace.cuda_random",
    "numba.cuda.libdevice": "gpureplace.libdevice",
    "numba.cuda.vectorizers": "gpureplace.cuda_vectorize",   # numba.vectorize(target="cuda")
    "numba.cuda.extending": "gpureplace.extending",
    "numba.cuda.cudaimpl": "gpureplace.extending.cudaimpl",  # where extensions register lowering
    "numba.cuda.cudadecl": "gpureplace.extending.cudadecl",  # ... and typing
    "numba.cuda.cgutils": "numba.core.cgutils",
    "numba.cuda.core.imputils": "numba.core.imputils",       # Registry, lower_builtin
    "numba.cuda.args": "gpureplace.runtime.hints",           # In, Out, InOut, wrap_arg
    "numba.cuda.errors": "numba.core.errors",
    "numba.cuda.bf16": "gpureplace.cuda.bf16",
    "numba.cuda.kernels": "gpureplace.cuda.kernels",          # transpose, reduction
    # the driver's errors numba-cuda code catches (CudaDriverError, CudaSupportError)
    "numba.cuda.cudadrv.error": "gpureplace.cuda.cudadrv.error",
    # numba-cuda's generated bindings that numba.cuda.bf16 re-exports (the same names)
    "numba.cuda._internal.cuda_bf16": "gpureplace.cuda.bf16",
    "numba.cuda._internal.cuda_fp8": "gpureplace.cuda.fp8",     # the fp8 types and cvt_*
    "numba.cuda.api": "gpureplace.cuda",                        # (is_fp8_supported...)
}

#: numba-cuda API modules that gpureplace does not offer yet: what a test uses of one fails
#: (it counts against gpureplace), it is not "not applicable".
MISSING_API = ("numba.cuda.cudadrv.devicearray",
               "numba.cuda.fp8", "numba.cuda.launchconfig")

#: Packages that only hold the aliases above (importing them must work).
PACKAGES = ("numba.cuda.core", "numba.cuda.tests", "numba.cuda.tests.cudapy")


class InternalModule(ImportError):
    """A numba-cuda module that tests numba-cuda's implementation, not its API."""


class MissingAPI(NotImplementedError):
    """numba-cuda API that gpureplace does not offer (yet)."""


class _StandIn:
    """A name imported from a stand-in module: any use raises ``error(message)``."""

    def __init__(self, name, error, message):
        self.__dict__.update(_name=name, _error=error, _message=message)

    def _fail(self, *args, **kwargs):
        raise self._error(self._message.format(name=self._name))

    __call__ = __iter__ = __getitem__ = __enter__ = __len__ = __bool__ = _fail

    def __getattr__(self, attr):
        if attr.startswith("__") or "_name" not in self.__dict__:
            raise AttributeError(attr)        # (also while copy or pickle builds one)
        return _StandIn(f"{self._name}.{attr}", self._error, self._message)

    def __mro_entries__(self, bases):
        self._fail()

    def __repr__(self):
        return f"<stand-in for {self._name}>"


_INTERNAL = "{name} is numba-cuda's internals (not part of its API)"
_MISSING = "gpureplace has no {name} (numba-cuda API)"


class _StandInModule(types.ModuleType):
    """A module whose names are stand-ins (``from M import x`` works; using ``x`` raises)."""

    def __init__(self, name, error, message):
        super().__init__(name)
        self.__path__ = []
        self.__dict__.update(_error=error, _message=message)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _StandIn(f"{self.__name__}.{attr}", self._error, self._message)

    def __call__(self, *args, **kwargs):
        raise self._error(self._message.format(name=self.__name__))


@functools.cache
def _numba_cuda_modules():
    """The dotted names of numba-cuda's modules and packages (from its source tree)."""
    import os
    path = os.environ.get("GPUREPLACE_NUMBA_CUDA_MODULES")
    if not path:
        return None
    with open(path) as f:
        return frozenset(line.strip() for line in f if line.strip())


def _is_numba_cuda_module(name):
    modules = _numba_cuda_modules()
    return modules is None or name in modules


def _simulated():
    """Whether numba-cuda's tests see a simulator (``ENABLE_CUDASIM``): gpureplace's backend, or
    ``GPUREPLACE_CUDAPY_CUDASIM=0`` to run the GPU's tests on gpureplace's simulator (for
    debugging the harness on a machine without a GPU)."""
    import os
    forced = os.environ.get("GPUREPLACE_CUDAPY_CUDASIM")
    if forced is not None:
        return forced == "1"
    from gpureplace.jit.backends import simulated
    return simulated()


def _device_cc():
    from gpureplace.jit.backends import simulated
    if simulated():
        return (9, 0)
    from gpureplace import cuda
    return cuda.get_current_device().compute_capability


def _testing_module():
    import numpy as np
    from numba.tests.support import TestCase

    from gpureplace.compiler.toolchain import find_tool

    mod = types.ModuleType("numba.cuda.testing")
    mod.unittest = unittest

    class CUDATestCase(TestCase):
        """numba-cuda's CUDATestCase: ``assertPreciseEqual`` and friends from Numba's TestCase;
        FileCheck assertions on NVVM's output do not apply to gpureplace's (LLVM) code."""

        FLOAT16_RTOL = np.finfo(np.float16).eps

        def setUp(self):
            # as numba-cuda's: no low-occupancy or host-array warnings in its suite
            config = _config_module()
            self._low_occupancy_warnings = config.CUDA_LOW_OCCUPANCY_WARNINGS
            self._warn_on_implicit_copy = config.CUDA_WARN_ON_IMPLICIT_COPY
            config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
            config.CUDA_WARN_ON_IMPLICIT_COPY = 0

        def tearDown(self):
            config = _config_module()
            config.CUDA_LOW_OCCUPANCY_WARNINGS = self._low_occupancy_warnings
            config.CUDA_WARN_ON_IMPLICIT_COPY = self._warn_on_implicit_copy

        def _filecheck(self, *args, **kwargs):
            self.skipTest("FileCheck patterns of numba-cuda's NVVM output (not applicable)")

        assertFileCheckAsm = assertFileCheckLLVM = assertFileCheckMatches = _filecheck

    mod.CUDATestCase = CUDATestCase

    def skip_on_cudasim(reason):
        return unittest.skipIf(_simulated(), reason)

    def skip_unless_cudasim(reason):
        return unittest.skipUnless(_simulated(), reason)

    def cc_X_or_above(major, minor):
        return _device_cc() >= (major, minor)

    def _cc(major, minor):
        return lambda fn: unittest.skipUnless(cc_X_or_above(major, minor),
                                              f"requires cc >= {major}.{minor}")(fn)

    def _never(reason_or_fn):
        if callable(reason_or_fn):
            return reason_or_fn
        return lambda fn: fn

    def _always(reason):
        text = reason if isinstance(reason, str) else "not applicable to gpureplace"
        decorate = unittest.skip(text)
        return decorate(reason) if callable(reason) else decorate

    mod.skip_on_cudasim = skip_on_cudasim
    mod.skip_unless_cudasim = skip_unless_cudasim
    mod.xfail_unless_cudasim = lambda fn: fn if _simulated() else unittest.expectedFailure(fn)
    mod.cc_X_or_above = cc_X_or_above
    for major, minor in ((5, 0), (5, 3), (6, 0), (7, 5), (9, 0)):
        setattr(mod, f"skip_unless_cc_{major}{minor}", _cc(major, minor))
    mod.skip_on_standalone_numba_cuda = lambda fn: fn       # Numba is installed
    mod.skip_without_nvdisasm = lambda reason: unittest.skipIf(find_tool("nvdisasm") is None,
                                                               reason)
    mod.skip_with_nvdisasm = lambda reason: unittest.skipIf(find_tool("nvdisasm") is not None,
                                                            reason)
    for name in ("skip_on_arm", "skip_on_wsl2", "skip_under_cuda_memcheck",
                 "skip_if_external_memmgr", "skip_unless_conda_cudatoolkit"):
        setattr(mod, name, _never)
    # grid-wide sync needs no cudadevrt in gpureplace (its cooperative launch is the driver's)
    mod.skip_if_cudadevrt_missing = _never
    # curand's headers, nvJitLink: numba-cuda's toolchain, not gpureplace's
    for name in ("skip_if_curand_kernel_missing",
                 "skip_if_nvjitlink_missing", "skip_on_nvjitlink_13_1_sm_120",
                 "skip_if_cuda_includes_missing"):
        setattr(mod, name, _always)

    class ForeignArray:
        """A device array seen only through its ``__cuda_array_interface__``."""

        def __init__(self, arr):
            self._arr = arr
            self.__cuda_array_interface__ = arr.__cuda_array_interface__

    mod.ForeignArray = ForeignArray
    # the suite's data files, copied beside its tests by run.py (numba-cuda's tests/data)
    import pathlib
    data = pathlib.Path(_cudapy_dir()).parent / "data" if _cudapy_dir() else None
    mod.test_data_dir = data if data is not None and data.is_dir() else None
    return mod


def _cudapy_dir():
    """The folder ``run.py`` copied the test files into (this conftest's ``cudapy``)."""
    import os
    return os.environ.get("GPUREPLACE_CUDAPY_DIR", "")


@functools.cache
def _config_module():
    """numba-cuda's config (``numba.cuda.config`` and ``numba.cuda.core.config`` alike): ``ENABLE_CUDASIM`` says whether gpureplace simulates; anything else
    is Numba's own setting of that name."""
    import os

    from numba.core import config as numba_config

    # numba-cuda's own settings that Numba's config does not have, at numba-cuda's defaults
    defaults = {"CUDA_DEBUG_POLY": 0, "CUDA_DEBUG_POLY_USE_TYPED_CONST": 0,
                "CUDA_ENABLE_NRT": 0, "CUDA_DEBUGINFO_DEFAULT": 0,
                "CUDA_ARRAY_INTERFACE_SYNC": 1}

    # numba-cuda settings gpureplace has under its own name, kept on Numba's config (which the
    # suite's override_config sets) and applied to gpureplace's settings whenever set there
    mapped = ("CUDA_LOW_OCCUPANCY_WARNINGS", "CUDA_WARN_ON_IMPLICIT_COPY",
              "CUDA_NVRTC_EXTRA_SEARCH_PATHS")

    class NumbaConfig(type(numba_config)):
        def __setattr__(self, attr, value):
            if attr in mapped:
                from gpureplace.config import settings
                if attr == "CUDA_LOW_OCCUPANCY_WARNINGS":
                    settings.low_occupancy_warnings = bool(value)
                elif attr == "CUDA_NVRTC_EXTRA_SEARCH_PATHS":
                    settings.nvrtc_search_paths = value.replace(":", os.pathsep) if value else ()
                else:    # a host array given to a kernel: copied with a warning, or quietly
                    settings.host_arrays = "warn" if value else "copy"
            super().__setattr__(attr, value)

    if not isinstance(numba_config, NumbaConfig):
        numba_config.__class__ = NumbaConfig

    class Config(types.ModuleType):
        def __setattr__(self, attr, value):
            if attr in mapped:
                setattr(numba_config, attr, value)
                return
            super().__setattr__(attr, value)

        def __getattr__(self, attr):
            try:
                return getattr(numba_config, attr)
            except AttributeError:
                if attr in defaults:
                    return defaults[attr]
                raise

    if not hasattr(numba_config, "CUDA_NVRTC_EXTRA_SEARCH_PATHS"):
        numba_config.CUDA_NVRTC_EXTRA_SEARCH_PATHS = ""     # (numba-cuda's default)
    mod = Config("numba.cuda.config")
    mod.ENABLE_CUDASIM = _simulated()
    mod.CUDA_LOW_OCCUPANCY_WARNINGS = 0
    mod.CUDA_WARN_ON_IMPLICIT_COPY = 0
    return mod


class _Alias(types.ModuleType):
    """A module of another name whose attributes are ``target``'s (the import system writes its
    own ``__spec__`` and ``__name__`` onto the module it loads, so the target itself cannot be
    handed out under a second name)."""

    def __init__(self, name, target):
        super().__init__(name, getattr(target, "__doc__", None))
        self.__dict__["_target"] = target

    def __getattr__(self, attr):
        return getattr(self.__dict__["_target"], attr)

    def __dir__(self):
        return dir(self.__dict__["_target"])


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name.startswith("numba.cuda.tests.cudapy."):
            # the suite's own helper modules (complex_usecases, ...), from the copied folder
            return importlib.machinery.PathFinder.find_spec(name, [_cudapy_dir()], target)
        if name == "numba.cuda" or name.startswith("numba.cuda."):
            return importlib.util.spec_from_loader(name, self, is_package=name in PACKAGES
                                                   or name == "numba.cuda")
        return None

    def create_module(self, spec):
        name = spec.name
        if name == "numba.cuda":
            cuda = _Alias(name, importlib.import_module("gpureplace.cuda"))
            cuda.HAS_NUMBA = True       # numba-cuda's packaging flag: Numba itself is installed
            return cuda
        if name == "numba.cuda.testing":
            return _testing_module()
        if name in ("numba.cuda.config", "numba.cuda.core.config"):
            return _config_module()
        if name in ALIASES:
            target = importlib.import_module(ALIASES[name])
            alias = _Alias(name, target)
            if name == "numba.cuda.types":       # numba-cuda's types add bfloat16 to Numba's
                from gpureplace.cuda import bfloat16
                alias.__dict__["bfloat16"] = bfloat16
            if hasattr(target, "__path__"):
                alias.__dict__["__path__"] = []
            return alias
        if name in PACKAGES:
            pkg = types.ModuleType(name)
            pkg.__path__ = [_cudapy_dir()] if name == "numba.cuda.tests.cudapy" else []
            return pkg
        if name in MISSING_API or name.startswith(tuple(m + "." for m in MISSING_API)):
            return _StandInModule(name, MissingAPI, _MISSING)
        parent, _, last = name.rpartition(".")
        if parent in ALIASES:
            # a module of an alias's target under numba-cuda's name (numba.cuda.typing.templates)
            try:
                target = importlib.import_module(f"{ALIASES[parent]}.{last}")
            except ImportError:
                target = None
            if target is not None:
                return _Alias(name, target)
        if (parent == "numba.cuda" or parent in ALIASES) and not _is_numba_cuda_module(name):
            # ``from numba.cuda import vectorize``: a name, not a module, of numba-cuda
            return _StandInModule(name, MissingAPI, _MISSING)
        return _StandInModule(name, InternalModule, _INTERNAL)

    def exec_module(self, module):
        pass


def install():
    """Answer ``numba.cuda`` and its modules from gpureplace in this process."""
    import numba
    import numba.core.entrypoints
    # Numba runs its extensions' entry points at the first compile; numba-cuda's (where it is
    # installed, as on the GPU host) would import numba-cuda's own modules through this shim.
    numba.core.entrypoints._already_initialized = True

    if any(type(f).__name__ == "_Finder" and type(f).__module__ == __name__
           for f in sys.meta_path):
        return                                   # (a sitecustomize installed it already)
    for name in [n for n in sys.modules if n == "numba.cuda" or n.startswith("numba.cuda.")]:
        del sys.modules[name]
    # numba-cuda's own import hook (its ``.pth`` file, where numba-cuda is installed, as on the
    # GPU host) sends every ``numba.cuda`` name to its package, and recurses without end on a
    # path it does not know (the copied test folder): gpureplace answers those names here.
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "NumbaCudaFinder"]
    sys.meta_path.insert(0, _Finder())
    numba.cuda = importlib.import_module("numba.cuda")     # from numba import cuda
