"""Recompile ahead (gpureplace/jit/ahead.py) through a real IPython InteractiveShell: after a
cell redefines what a launched kernel depends on, or the kernel itself, the new code is compiled
(for real, to PTX) and handed to the module loader in the background; a cell started meanwhile
stops the round; errors stay for the launch to report.

No GPU here: the launch entries are what ``_prepare`` makes, with the module load replaced by a
record of the specialisation it would load (the GPU tests launch for real:
tests/jit/test_ahead_gpu.py).
"""

import time

import numpy as np
import pytest

IPython = pytest.importorskip("IPython")

import gpureplace  # noqa: E402
from gpureplace import probe  # noqa: E402
from gpureplace.jit import ahead, backends, live_functions  # noqa: E402
from gpureplace.runtime import arguments, launch, transfers  # noqa: E402
from gpureplace.tracking import world  # noqa: E402


class FakeLoaded:
    """What LoadedKernel would be: the specialisation, on a device."""

    def __init__(self, spec, device_id, link=(), carveout=None):
        self.spec, self.device_id = spec, device_id
        FakeLoaded.loads.append((spec.name, device_id))


@pytest.fixture
def gpu(monkeypatch):
    FakeLoaded.loads = []
    monkeypatch.setattr(probe, "available", lambda: True)
    monkeypatch.setattr(backends, "simulated", lambda: False)
    monkeypatch.setattr(probe, "arch_of", lambda dev: "sm_90")
    monkeypatch.setattr(probe, "driver_version", lambda: None)     # (the newest PTX ISA)
    monkeypatch.setattr(launch, "ensure_context", lambda dev: None)
    monkeypatch.setattr(launch, "LoadedKernel", FakeLoaded)
    yield
    ahead.wait(30)
    from gpureplace.jit import guesses
    guesses.forget()                     # (no launch of this test guesses another's kernels)
    for fn in live_functions():          # no fake launch entry outlives the test
        for key, entry in list(fn._launch_cache.items()):
            if isinstance(entry, FakeLoaded):
                del fn._launch_cache[key]
        fn._ahead_hints = ()


@pytest.fixture
def shell(gpu, shell):
    """conftest.py's shell, with the rounds a test started finished before it is unloaded."""
    yield shell
    ahead.wait(30)


def helper_cell(body="x[0] = helper(x[0])"):
    """A cell defining ``helper`` (v + 1.5) and a kernel ``uses(x)`` whose ``body`` calls it."""
    return ("\nfrom gpureplace import cuda\ndef helper(v):\n    return v + 1.5\n@cuda.jit\n"
            f"def uses(x):\n    {body}\n")


def run(ip, src):
    res = ip.run_cell(src, store_history=True)
    if res.error_in_exec is not None:
        raise res.error_in_exec
    return res


def keys_for(*args):
    """The argument type keys a launch with ``args`` caches its entry under."""
    return tuple(transfers.host_array_argument(a)[0] if isinstance(a, np.ndarray)
                 else arguments.value_key(a)[0] for a in args)


def launched(kernel, *args, dev=0):
    """What a first launch with ``args`` on ``dev`` leaves: the kernel compiled, loaded, cached."""
    keys = keys_for(*args)
    return kernel._prepare(keys, dev, (keys, dev), None)


def compiles():
    """Kernel specialisations made: compiled, or loaded from the disk cache (a rerun's)."""
    stats = gpureplace.stats()
    return stats["kernel_compiles"] + stats["disk_hits"]


def settle(ip):
    """The user typing: wait for the round the last cell scheduled."""
    assert ahead.wait(60)


X = np.zeros(8, np.float32)


def test_a_redefined_helper_recompiles_its_kernels_before_their_launch(shell):
    run(shell, """
from gpureplace import cuda
def helper(v):
    return v + 1.5
@cuda.jit
def uses(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = helper(x[i])
@cuda.jit
def other(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * 2.0
""")
    ns = shell.user_ns
    first = launched(ns["uses"], X)
    kept = launched(ns["other"], X, dev=1)
    before, rounds = compiles(), ahead.report()["rounds"]
    run(shell, "def helper(v):\n    return v + 2.75")
    settle(shell)
    assert ahead.report()["rounds"] == rounds + 1
    assert compiles() == before + 1                       # only the dependent, once
    entry = ns["uses"]._launch_cache[(keys_for(X), 0)]
    assert entry is not first and entry.spec.world == world.age
    assert "0f40300000" in entry.spec.ptx                 # 2.75: the new helper's code
    assert ns["other"]._launch_cache[(keys_for(X), 1)] is kept
    # the launch that follows finds it ready: nothing compiles, the same entry is used
    assert launched(ns["uses"], X) is entry
    assert compiles() == before + 1


def test_a_kernel_redefined_in_a_cuda_cell_compiles_for_the_old_ones_launches(shell):
    run(shell, "%%cuda\ndef scale(a, x):\n    i = cuda.grid(1)\n    if i < x.size:\n"
               "        x[i] = a * x[i]\n")
    launched(shell.user_ns["scale"], np.float32(2.0), X)
    launched(shell.user_ns["scale"], np.float32(2.0), X, dev=1)
    before = compiles()
    run(shell, "%%cuda\ndef scale(a, x):\n    i = cuda.grid(1)\n    if i < x.size:\n"
               "        x[i] = a * x[i] + 0.5\n")
    settle(shell)
    new = shell.user_ns["scale"]
    assert compiles() == before + 1                       # one arch: one compile, two loads
    for dev in (0, 1):
        entry = new._launch_cache[(keys_for(np.float32(2.0), X), dev)]
        assert "0f3F000000" in entry.spec.ptx            # + 0.5
    assert launched(new, np.float32(2.0), X) is new._launch_cache[(keys_for(np.float32(2.0), X),
                                                                    0)]
    assert compiles() == before + 1


def test_a_redefinition_with_other_parameters_guesses_nothing(shell):
    run(shell, "%%cuda\ndef k(x):\n    x[0] = 1.0\n")
    launched(shell.user_ns["k"], X)
    before = compiles()
    run(shell, "%%cuda\ndef k(x, y):\n    x[0] = y[0]\n")
    settle(shell)
    assert compiles() == before
    assert shell.user_ns["k"]._launch_cache == {}


def test_a_guess_that_does_not_compile_is_left_for_the_launch_to_report(shell):
    run(shell, "%%cuda\ndef k(a, x):\n    x[0] = a\n")
    launched(shell.user_ns["k"], np.float32(1.0), X)
    failed = ahead.report()["failed"]
    run(shell, "%%cuda\ndef k(a, x):\n    x[0] = a[0]\n")     # now a must be an array
    settle(shell)
    assert ahead.report()["failed"] == failed + 1
    new = shell.user_ns["k"]
    assert new._launch_cache == {}
    # the cell printed nothing; the launch with the old types says what is wrong, as before
    with pytest.raises(gpureplace.errors.CompileError):
        launched(new, np.float32(1.0), X)


def test_a_cell_started_before_the_round_stops_it(shell):
    run(shell, helper_cell())
    stale = launched(shell.user_ns["uses"], X)
    before = compiles()
    # Run All: the next cell starts at once; the round finds it started and compiles nothing
    run(shell, "def helper(v):\n    return v + 2.75")
    run(shell, "y = 1")
    settle(shell)
    assert compiles() == before
    assert shell.user_ns["uses"]._launch_cache[(keys_for(X), 0)] is stale
    # ... and the launch compiles as it always did
    entry = launched(shell.user_ns["uses"], X)
    assert compiles() == before + 1 and "0f40300000" in entry.spec.ptx


def test_verbose_recompile_lines_are_shown_at_the_next_cell(shell, capsys):
    run(shell, helper_cell())
    launched(shell.user_ns["uses"], X)
    run(shell, "%config GPUReplace.verbose = True")
    capsys.readouterr()
    run(shell, "def helper(v):\n    return v + 2.75")
    settle(shell)
    assert "recompiled" not in capsys.readouterr().out     # nothing printed from the thread
    run(shell, "z = 2")
    out = capsys.readouterr().out
    assert "uses(float32[::1]) recompiled ahead in" in out and "helper" in out


def test_turned_off_nothing_runs_in_the_background(shell):
    run(shell, helper_cell())
    launched(shell.user_ns["uses"], X)
    run(shell, "%config GPUReplace.recompile_ahead = False")
    before, rounds = compiles(), ahead.report()["rounds"]
    run(shell, "def helper(v):\n    return v + 2.75")
    time.sleep(2 * ahead.DELAY)
    settle(shell)
    assert compiles() == before and ahead.report()["rounds"] == rounds


RACE_OFFSET = 1.5


def race_helper(v):
    return v + RACE_OFFSET


def test_a_launch_during_the_round_takes_its_result(gpu, monkeypatch):
    """The launch path and a round prepare one entry at a time: a launch that comes while the
    round loads the new code waits for it and uses it (one compile, one load)."""
    import threading
    global RACE_OFFSET
    from gpureplace import cuda

    @cuda.jit
    def race(x):
        x[0] = race_helper(x[0])

    launched(race, X)
    loading, release = threading.Event(), threading.Event()

    class SlowLoad(FakeLoaded):
        def __init__(self, *args):
            if threading.current_thread().name == "gpureplace-ahead":
                loading.set()
                release.wait(30)
            super().__init__(*args)

    monkeypatch.setattr(launch, "LoadedKernel", SlowLoad)
    RACE_OFFSET = 2.75
    try:
        gpureplace.refresh()
        loads, before = len(FakeLoaded.loads), compiles()
        thread = ahead.schedule(lambda: True, delay=0)
        assert loading.wait(60)                   # the round is loading the new code
        threading.Timer(0.2, release.set).start()
        entry = launched(race, X)                 # the user's launch meanwhile
        thread.join(60)
        assert entry.spec.world == world.age and "0f40300000" in entry.spec.ptx
        assert race._launch_cache[(keys_for(X), 0)] is entry
        assert compiles() == before + 1 and len(FakeLoaded.loads) == loads + 1
    finally:
        RACE_OFFSET = 1.5
        release.set()


def test_after_reload_ext_and_from_the_disk_cache(shell):
    """The round works after ``%reload_ext``, and for a kernel whose code came from the disk
    cache (a re-run cell's kernel finds its predecessor's compile there)."""
    cell = helper_cell("i = cuda.grid(1)\n    if i < x.size:\n        x[i] = helper(x[i])")
    run(shell, cell)
    launched(shell.user_ns["uses"], X)
    run(shell, "%reload_ext gpureplace")
    hits = gpureplace.stats()["disk_hits"]
    run(shell, cell)                         # the same cell again: a new kernel of the same code
    settle(shell)
    rerun = shell.user_ns["uses"]
    assert gpureplace.stats()["disk_hits"] == hits + 1      # ready, from the disk cache
    entry = rerun._launch_cache[(keys_for(X), 0)]
    assert entry.spec.world == world.age and "0f3FC00000" in entry.spec.ptx     # 1.5
    before = compiles()
    run(shell, "def helper(v):\n    return v + 2.75")
    settle(shell)
    entry = rerun._launch_cache[(keys_for(X), 0)]
    assert compiles() == before + 1 and "0f40300000" in entry.spec.ptx           # 2.75
    assert launched(rerun, X) is entry


def test_a_kernel_replaced_by_a_later_definition_is_left_to_its_launch(shell):
    cell = helper_cell("x[0] = helper(x[0]) * 3.0")
    run(shell, cell)
    launched(shell.user_ns["uses"], X)
    run(shell, "old = uses")                  # the first definition, kept under another name
    run(shell, cell)
    settle(shell)                             # (the new one: ready for the old one's launch)
    old, new = shell.user_ns["old"], shell.user_ns["uses"]
    before = compiles()
    run(shell, "def helper(v):\n    return v + 2.75")
    settle(shell)
    assert compiles() == before + 1           # the new definition only
    assert new._launch_cache[(keys_for(X), 0)].spec.world == world.age
    assert old._launch_cache[(keys_for(X), 0)].spec.world != world.age
    entry = launched(old, X)                  # ... which recompiles at its launch, as ever
    assert compiles() == before + 2 and "0d4006000000000000" in entry.spec.ptx     # 2.75


def test_the_round_sends_redefinitions_to_dask_workers_first(shell, monkeypatch):
    """The round starts by sending changed kernels to Dask workers (gpureplace.dask.
    push_redefinitions, which does nothing without a ``distributed`` client:
    tests/dask/test_dask_workers.py); a cell started before the round sends nothing."""
    from gpureplace.ipython import magics
    sent = []
    monkeypatch.setattr(magics, "push_redefinitions", lambda: sent.append(1) or 1)
    run(shell, helper_cell("x[0] = helper(x[0]) - 1.0"))
    launched(shell.user_ns["uses"], X)
    settle(shell)
    sent.clear()
    run(shell, "def helper(v):\n    return v + 1.0")
    settle(shell)
    assert sent == [1]
    run(shell, "def helper(v):\n    return v + 2.0")
    run(shell, "z = 3")                       # Run All: the next cell already started
    settle(shell)
    assert sent == [1]


def test_a_stopped_round_keeps_a_redefined_kernels_guesses_for_the_next(shell):
    run(shell, "%%cuda\ndef k(x):\n    x[0] = 1.0\n")
    launched(shell.user_ns["k"], X)
    launched(shell.user_ns["k"], X, dev=1)
    run(shell, "%config GPUReplace.recompile_ahead = False")    # (rounds run by hand here)
    run(shell, "%%cuda\ndef k(x):\n    x[0] = 2.0\n")
    new = shell.user_ns["k"]
    assert len(new._ahead_hints) == 2
    answers = iter([True, False])         # a cell starts after the first guess
    assert ahead.run_round(lambda: next(answers, False)) == 1
    assert len(new._launch_cache) == 1 and new._ahead_hints
    assert ahead.run_round() >= 1         # the next round prepares the other device (and what
                                          # earlier tests' kernels left stale, if any)
    assert sorted(dev for _, dev in new._launch_cache) == [0, 1]
    assert new._ahead_hints == ()
    for entry in new._launch_cache.values():
        assert "1073741824" in entry.spec.ptx                      # 2.0f


def test_with_more_stale_than_a_round_takes_the_redefined_kernel_comes_first(shell, monkeypatch):
    """A round prepares at most LIMIT launches: the guess for the kernel just redefined (the
    launch most likely next) before stale ones, and newer kernels' stale launches before
    older ones'."""
    monkeypatch.setattr(ahead, "LIMIT", 3)
    kernels = "".join(f"@cuda.jit\ndef k{i}(x):\n    x[0] = helper(x[0]) + {i}\n" for i in range(4))
    run(shell, helper_cell() + kernels)
    for name in ("uses", "k0", "k1", "k2", "k3"):
        launched(shell.user_ns[name], X)
    run(shell, "%config GPUReplace.recompile_ahead = False")    # (the round run by hand here)
    run(shell, "def helper(v):\n    return v + 2.75\n@cuda.jit\ndef k0(x):\n    x[0] = 7.0\n")
    new = shell.user_ns["k0"]
    order = [(fn, dev) for fn, (_, dev) in ahead.pending()]
    assert order == [(new, 0), (shell.user_ns["k3"], 0), (shell.user_ns["k2"], 0)]
    assert ahead.run_round() == 3
    assert [name for name, _ in FakeLoaded.loads[-3:]] == \
        [fn._launch_cache[next(iter(fn._launch_cache))].spec.name for fn, _ in order]


@pytest.fixture
def launches(monkeypatch):
    """Launches through the kernel's own argument handling (``_resolve``) on device 0, with
    no parameter names seen before (jit/guesses.py)."""
    from gpureplace.jit import guesses
    from gpureplace.runtime import placement
    monkeypatch.setattr(probe, "current_device", lambda: 0)
    monkeypatch.setattr(placement, "multi_gpu", lambda: False)
    guesses.forget()


def test_a_kernel_defined_in_a_cell_is_compiled_for_the_types_its_parameter_names_had(
        shell, launches):
    # the notebook's "a further kernel": defined in one cell, launched in the next after the
    # user typed it; its parameters a, x, out had those types at the last launch
    x = np.ones(8, np.float32)
    run(shell, "from gpureplace import cuda\n@cuda.jit\ndef saxpy(a, x, y, out):\n"
               "    i = cuda.grid(1)\n    if i < out.size:\n        out[i] = a * x[i] + y[i]\n")
    shell.user_ns["saxpy"]._resolve((2.0, x, x, x), host_arrays_as_keys=True)   # a launch
    settle(shell)
    before = compiles()
    run(shell, "%%cuda\ndef scale(a, x, out):\n    i = cuda.grid(1)\n    if i < out.size:\n"
               "        out[i] = a * x[i]\n")
    settle(shell)                                         # (the user types the launch)
    scale = shell.user_ns["scale"]
    assert compiles() == before + 1
    assert list(scale._launch_cache) == [(keys_for(2.0, x, x), 0)]
    scale._resolve((3.0, x, x), host_arrays_as_keys=True)        # the launch: ready
    assert compiles() == before + 1
    # a parameter no launch had: nothing guessed; launched with other types: compiled then
    run(shell, "@cuda.jit\ndef fill(a, weights):\n    weights[0] = a\n")
    settle(shell)
    assert not shell.user_ns["fill"]._launch_cache and compiles() == before + 1
    # a wrong guess costs its compile, and the launch compiles what it is given
    run(shell, "@cuda.jit\ndef halve(x, out):\n    out[0] = x[0] / 2\n")
    settle(shell)
    assert compiles() == before + 2
    f64 = np.ones(4)
    shell.user_ns["halve"]._resolve((f64, f64), host_arrays_as_keys=True)
    assert compiles() == before + 3 and len(shell.user_ns["halve"]._launch_cache) == 2
    # each guessed once: the round a later kernel's cell starts compiles none of them again
    scale._launch_cache.clear()
    run(shell, "@cuda.jit\ndef later(q):\n    q[0] = 1\n")
    settle(shell)
    assert compiles() == before + 3 and not scale._launch_cache


def test_a_kernel_guess_that_does_not_compile_is_left_to_the_launch(shell, launches):
    x = np.ones(8, np.float32)
    run(shell, "from gpureplace import cuda\n@cuda.jit\ndef first(x, out):\n"
               "    out[0] = x[0]\n")
    shell.user_ns["first"]._resolve((x, x), host_arrays_as_keys=True)
    settle(shell)
    failed = ahead.report()["failed"]
    # x is a matrix to this kernel: the guess (1-D arrays) does not type; no error is shown
    res = shell.run_cell("@cuda.jit\ndef matrix(x, out):\n    out[0] = x[0, 1]\n")
    assert res.success
    settle(shell)
    assert ahead.report()["failed"] == failed + 1
    assert not shell.user_ns["matrix"]._launch_cache
