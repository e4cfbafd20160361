"""numba-cuda's dispatcher and host API where ported code meets them without a GPU: the simulator's
memory information, ``detect()`` and cooperative grid size, a device function called on the host,
and the dispatcher's reflection (``inspect_types`` printing, ``inspect_sass_cfg``, a device
function's overloads from the kernels that call it, ``configure``, ``targetoptions``,
``nopython_signatures``, ``get_metadata``, the resource properties of ``overloads[sig]``)."""

import io

import numpy as np
import pytest
from numba.core import types

from conftest import PTXAS
from gpureplace import cuda
from gpureplace.compiler import toolchain
from gpureplace.config import settings
from gpureplace.errors import DeviceFunctionError, LaunchError, NoDeviceError
from gpureplace.runtime import launch

needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="needs ptxas (nvidia-cuda-nvcc)")
needs_nvdisasm = pytest.mark.skipif(
    PTXAS is None or toolchain.find_tool("nvdisasm") is None,
    reason="needs ptxas and nvdisasm (nvidia-cuda-nvcc, nvidia-cuda-nvdisasm)")

SIG = "void(float32[::1])"


@pytest.fixture
def simulated(monkeypatch):
    monkeypatch.setattr(settings, "backend", "simulator")


@cuda.jit(device=True)
def twice(v):
    return 2 * v


@cuda.jit
def doubles(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = twice(x[i])


@cuda.jit
def grid_synced(x):
    g = cuda.cg.this_grid()
    i = cuda.grid(1)
    if i < x.size:
        x[i] = 1
    g.sync()


@cuda.jit
def with_shared(x):
    tile = cuda.shared.array(64, np.float32)
    i = cuda.grid(1)
    tile[cuda.threadIdx.x % 64] = 1.0
    cuda.syncthreads()
    if i < x.size:
        x[i] = tile[0]


# --- the simulator's device --------------------------------------------------------------------

def test_simulator_memory_info_is_the_hosts(simulated):
    """Code that sizes its batches from free memory works in the simulator: the host's memory,
    where its device arrays live (it was (0, 0): a division by zero)."""
    info = cuda.current_context().get_memory_info()
    assert info.free == info[0] and info.total == info[1]        # (numba-cuda's namedtuple)
    assert 0 < info.free <= info.total
    try:
        with open("/proc/meminfo") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
        assert info.total <= int(fields["MemTotal"].split()[0]) * 1024
    except FileNotFoundError:
        pass
    data = np.arange(1000, dtype=np.float32)
    batch = min(data.size, int(info.free // (2 * data.itemsize)))
    assert batch == data.size


def test_simulator_detect_prints_numba_cudas_lines_and_is_true(simulated, capsys):
    assert cuda.detect() is True
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Found 1 CUDA devices"
    assert lines[1] == "id %d    %20s %40s" % (0, "SIMULATOR", "[SUPPORTED]")
    assert lines[2] == "%40s: 9.0" % "compute capability"
    assert lines[3] == "%40s: No" % "FP8 Hardware Acceleration"


def test_max_cooperative_grid_blocks_in_the_simulator(simulated):
    """What the simulator's cooperative launch takes: every thread at once, up to its limit
    (it raised NoDeviceError telling the user to use the simulator they were in)."""
    from gpureplace.simulator import runner
    grid_synced[1, 32](cuda.to_device(np.zeros(32, np.int32)))
    spec = grid_synced.overloads[next(iter(grid_synced.overloads))]
    assert runner.GRID_MODE_MAX_THREADS == launch.SIMULATED_GRID_THREADS
    for block in (32, 128, (16, 8), 1024):
        threads = int(np.prod(block))
        limit = spec.max_cooperative_grid_blocks(block)
        assert limit * threads <= launch.SIMULATED_GRID_THREADS < (limit + 1) * threads
    limit = spec.max_cooperative_grid_blocks(1024)
    x = cuda.to_device(np.zeros((limit + 1) * 1024, np.int32))
    with pytest.raises(LaunchError, match="synchronises the grid"):
        grid_synced[limit + 1, 1024](x)
    # more dynamic shared memory than a block can have: no block fits
    assert spec.max_cooperative_grid_blocks(32, 1 << 20) == 0


def test_cooperative_launch_of_max_blocks_runs_in_the_simulator(simulated, monkeypatch):
    """At the limit the launch runs, one block more is refused (a smaller limit, so that the
    test starts few threads)."""
    from gpureplace.simulator import runner
    monkeypatch.setattr(launch, "SIMULATED_GRID_THREADS", 96)
    monkeypatch.setattr(runner, "GRID_MODE_MAX_THREADS", 96)
    spec = grid_synced.compile("void(int32[::1])")
    limit = spec.max_cooperative_grid_blocks(32)
    assert limit == 3
    x = cuda.to_device(np.zeros(32 * limit, np.int32))
    grid_synced[limit, 32](x)
    assert x.copy_to_host().sum() == 32 * limit
    with pytest.raises(LaunchError, match="over its limit of 96"):
        grid_synced[limit + 1, 32](cuda.to_device(np.zeros(32 * (limit + 1), np.int32)))


def test_resources_without_ptxas_say_what_is_missing(simulated, monkeypatch):
    """Not the no-GPU story (run in the simulator: we are), nor an internal name."""
    doubles.compile(SIG)
    spec = doubles.compile(SIG)
    monkeypatch.setattr(toolchain, "find_tool", lambda name: None)
    with pytest.raises(NoDeviceError) as err:
        doubles.get_regs_per_thread(SIG)
    message = str(err.value)
    assert message.startswith("get_regs_per_thread(): without a GPU")
    assert "ptxas, which was not found: pip install nvidia-cuda-nvcc" in message
    assert "get_num_regs" not in message and "simulator instead" not in message
    with pytest.raises(NoDeviceError, match=r"^shared_mem_per_block\(\): .*ptxas"):
        spec.shared_mem_per_block
    with pytest.raises(DeviceFunctionError, match=r"get_regs_per_thread\(\) is for kernels"):
        twice.get_regs_per_thread()


# --- calling a device function on the host -----------------------------------------------------

def test_device_function_called_on_the_host():
    """numba-cuda raises ValueError; gpureplace's RuntimeError stays; the hint leads somewhere."""
    with pytest.raises(ValueError) as err:
        twice(1.0)
    assert isinstance(err.value, RuntimeError) and isinstance(err.value, DeviceFunctionError)
    assert "twice.py_func(...)" in str(err.value) and "simulator" not in str(err.value)
    assert twice.py_func(1.0) == 2.0


# --- reflection --------------------------------------------------------------------------------

def test_inspect_types_prints_and_returns_what_the_readme_documents(simulated, capsys):
    doubles.compile(SIG)
    (argtypes,) = [a for a in doubles.overloads if a == (types.float32[::1],)]
    every = doubles.inspect_types()
    printed = capsys.readouterr().out
    assert every[argtypes] in printed and "twice" in printed     # the callee's IR too
    assert every[argtypes] == doubles.inspect_all("types", SIG)[0].value
    assert hasattr(every, "_ipython_display_")                   # (not shown twice in IPython)
    one = doubles.inspect_types(SIG)
    assert capsys.readouterr().out.strip() == one.strip() and one == every[argtypes]
    buf = io.StringIO()
    assert doubles.inspect_types(file=buf) is None and capsys.readouterr().out == ""
    assert every[argtypes] in buf.getvalue()
    # numba-cuda's overloads[sig].inspect_types(): printed, headed by the entry and its types
    assert doubles.overloads[argtypes].inspect_types() is None
    out = capsys.readouterr().out
    assert out.startswith(f"doubles {argtypes}\n{'-' * 80}\n") and "=" * 80 in out


@needs_nvdisasm
def test_inspect_sass_cfg_is_nvdisasms_graph(simulated):
    spec = doubles.compile(SIG)
    cfg = doubles.inspect_sass_cfg(SIG)
    assert cfg.startswith("digraph") and "doubles" in cfg and "EXIT" in cfg
    assert doubles.inspect_sass_cfg()[spec.argtypes] == cfg == spec.inspect_sass_cfg()
    assert [v.value for v in doubles.inspect_all("sass_cfg", SIG)][0] == cfg
    with pytest.raises(DeviceFunctionError, match="Cannot get the CFG of a device function"):
        twice.inspect_sass_cfg()


def test_inspect_sass_cfg_without_nvdisasm_says_what_is_missing(simulated, monkeypatch):
    doubles.compile(SIG)
    real = toolchain.find_tool
    monkeypatch.setattr(toolchain, "find_tool",
                        lambda name: None if name == "nvdisasm" else real(name))
    with pytest.raises(RuntimeError, match="inspect_sass_cfg needs NVIDIA's nvdisasm: pip "
                                           "install nvidia-cuda-nvdisasm"):
        doubles.inspect_sass_cfg(SIG)


def test_device_function_overloads_include_what_kernels_compiled(simulated):
    @cuda.jit(device=True)
    def plus_one(v):
        return v + 1

    @cuda.jit
    def bumps(x, y):
        x[0] = plus_one(x[0])
        y[0] = plus_one(y[0])

    assert plus_one.overloads == {} and plus_one.inspect_asm() == {}
    bumps.compile("void(float32[::1], int64[::1])")
    found = plus_one.overloads
    assert set(found) == {(types.float32,), (types.int64,)}
    assert plus_one.signatures == list(found)
    for argtypes in found:
        assert ".func" in plus_one.inspect_asm()[argtypes]
        assert "define" in plus_one.inspect_llvm()[argtypes]
    assert {str(s) for s in plus_one.nopython_signatures} == {
        str(found[a].restype(*a)) for a in found}


def test_device_function_overloads_from_a_kernel_loaded_from_disk(simulated, own_disk_cache):
    """A kernel loaded from the disk cache keeps no code: its front end runs again to list what
    it compiled of the device function."""
    import gc
    first = cuda.jit(_disk_body)
    first.compile("void(float64[::1])")
    del first
    gc.collect()
    again = cuda.jit(_disk_body)
    again.compile("void(float64[::1])")
    assert [spec.from_disk for spec in again._specs.values()] == [True]
    assert (types.float64,) in _disk_twice.overloads
    assert [spec.from_disk for spec in again._specs.values()] == [False]     # (front-ended)
    assert ".func" in _disk_twice.inspect_asm((types.float64,))


@cuda.jit(device=True)
def _disk_twice(v):
    return v * 2.0


def _disk_body(x):
    x[0] = _disk_twice(x[0])


def test_configure_targetoptions_nopython_signatures_and_metadata(simulated):
    @cuda.jit(fastmath=True, max_registers=40, lineinfo=True)
    def fill(x, v):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = v

    assert fill.configure(1, 4) is fill[1, 4] and fill.configure(1, 4, 0, 0) is fill[1, 4]
    d = cuda.to_device(np.zeros(8, np.float32))
    fill.configure(2, 4)(d, np.float32(3))
    assert d.copy_to_host().tolist() == [3.0] * 8
    s = cuda.stream()
    fill.configure(1, 8, s, 16)(d, np.float32(4))
    assert d.copy_to_host().tolist() == [4.0] * 8
    options = fill.targetoptions
    assert options["device"] is False and options["fastmath"] is True
    assert options["lineinfo"] is True and options["max_registers"] == 40
    assert options["opt"] is True and options["extensions"] == [] and options["link"] == []
    assert twice.targetoptions["device"] is True
    (argtypes,) = fill.overloads
    assert fill.nopython_signatures == [types.none(*argtypes)]
    meta = fill.get_metadata(argtypes)
    assert meta["options"].fastmath and meta["options"].max_registers == 40
    assert meta == fill.overloads[argtypes].metadata
    assert fill.get_metadata() == {argtypes: meta}
    doubles.compile(SIG)
    assert twice.get_metadata()[(types.float32,)]["options"] is not None


@needs_ptxas
def test_overload_resource_properties_agree_with_the_kernel_methods(simulated):
    sig = "void(float32[::1])"
    spec = with_shared.compile(sig)
    names = {"regs_per_thread": "get_regs_per_thread",
             "shared_mem_per_block": "get_shared_mem_per_block",
             "local_mem_per_thread": "get_local_mem_per_thread",
             "const_mem_size": "get_const_mem_size",
             "max_threads_per_block": "get_max_threads_per_block"}
    got = {prop: getattr(with_shared.overloads[spec.argtypes], prop) for prop in names}
    assert got == {prop: getattr(with_shared, method)(sig) for prop, method in names.items()}
    assert 0 < got["regs_per_thread"] <= 255 and got["shared_mem_per_block"] == 256
    assert 0 < got["max_threads_per_block"] <= 1024
