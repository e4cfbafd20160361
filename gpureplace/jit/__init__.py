"""``cuda.jit`` objects: the function object (``GPUFunction``), its launch path, prepared launches,
CUDA graphs of launches, and the decorators.

    function.py     GPUFunction: specialisations, compile, revalidate; the two mixins below
    reflection.py   inspect_ptx / inspect_sass / overloads / get_regs_per_thread ...
    launching.py    kernel[grid, block](*args): keys, select, load, launch; transfers, records
    launcher.py     Launcher (a launch configuration), ForAll, PreparedLaunch
    graphs.py       gpureplace.graph / capture: CUDA graphs of kernel launches
    backends.py     the simulator backend, registered from above
    options.py      cuda.jit's options, checked where they are given
    decorators.py   cuda.jit, compile_ptx, cuda.compile
    launchconfig.py the configuration of the launch that is compiling (cuda.launchconfig)
    pickling.py     kernels and ufuncs pickled as their Python function and options
"""

from .decorators import (compile_all, compile_for_current_device, compile_ptx,  # noqa: F401
                         compile_ptx_for_current_device, cuda_compile, jit)
from .function import GPUFunction, live_functions  # noqa: F401
from .launcher import PreparedLaunch  # noqa: F401
