"""Reflection of a kernel compiled for the same argument types under several options
(``%config GPUReplace.fastmath`` / ``arch`` changed between launches): ``inspect_*()`` and
``overloads`` give the code a launch runs now, the magics list every specialisation labelled with
its options; and ``%%cuda --show`` shows what a ``@cuda.jit("sig")`` kernel compiled when it was
defined."""

import re

import pytest

IPython = pytest.importorskip("IPython")

from IPython.utils.capture import capture_output  # noqa: E402

from gpureplace.compiler.toolchain import find_tool  # noqa: E402
from gpureplace.config import settings  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SQRT = ("import numpy as np, math\n"
        "from gpureplace import cuda\n"
        "@cuda.jit\n"
        "def k(out):\n"
        "    i = cuda.grid(1)\n"
        "    out[i] = math.sqrt(np.float32(i) / np.float32(3.0))\n"
        "out = np.zeros(4, np.float32)\n")
FAST, EXACT = "sqrt.approx.ftz.f32", "sqrt.rn.f32"
ARGS = "k(float32[::1])"


@pytest.fixture
def ip(monkeypatch, shell):
    """conftest.py's shell, launching in the simulator (which compiles each launch's PTX)."""
    monkeypatch.setattr(settings, "backend", "simulator")
    return shell


def ok(ip, src):
    """Run ``src`` as a cell: (what it printed, the plain text of each object it displayed)."""
    with capture_output() as cap:
        res = ip.run_cell(src, store_history=True)
    shown = ANSI.sub("", cap.stdout + cap.stderr)
    assert res.success, shown
    return shown, [o.data["text/plain"] for o in cap.outputs]


def launched_fast_then_exact(ip):
    """``k`` launched with fast math, then without: two specialisations of one argument types,
    the current options' (no fast math) compiled first."""
    ok(ip, SQRT + "k[1, 4](out)")
    ok(ip, "%config GPUReplace.fastmath = True")
    ok(ip, "k[1, 4](out)")
    ok(ip, "%config GPUReplace.fastmath = False")
    ok(ip, "k[1, 4](out)")
    k = ip.user_ns["k"]
    assert len(k._specs) == 2 and not k.options().fastmath
    return k


def test_inspect_gives_the_code_of_the_current_options(ip):
    k = launched_fast_then_exact(ip)
    (argtypes,) = k.signatures
    ptx = k.inspect_ptx()
    assert list(ptx) == [argtypes]                        # numba-cuda's shape: {argtypes: ptx}
    assert EXACT in ptx[argtypes] and FAST not in ptx[argtypes]
    assert EXACT in k.inspect_ptx("void(float32[::1])")
    assert k.overloads[argtypes].ptx == ptx[argtypes]
    llvm = k.inspect_llvm()[argtypes]
    assert "@llvm.sqrt.f32" in llvm and "sqrt.approx" not in llvm
    assert k.inspect_asm()[argtypes] == ptx[argtypes]
    types = k.inspect_types()[argtypes]
    assert types == k.inspect_all("types")[0].value and "math.sqrt" in types
    if find_tool("nvdisasm") is not None and find_tool("ptxas") is not None:
        exact, fast = (v.value for v in k.inspect_all("sass"))
        assert k.inspect_sass()[argtypes] == exact != fast
    # the other way round: fast math now, its code wins
    ok(ip, "%config GPUReplace.fastmath = True")
    assert FAST in k.inspect_ptx()[argtypes]
    assert FAST in k.inspect_ptx("void(float32[::1])")
    assert "sqrt.approx" in k.inspect_llvm()[argtypes]
    assert FAST in k.overloads[argtypes].ptx and len(k._specs) == 2


def test_inspect_all_lists_every_options_specialisation(ip):
    k = launched_fast_then_exact(ip)
    variants = k.inspect_all("ptx")
    assert [(v.options.fastmath, v.current) for v in variants] == [(False, True), (True, False)]
    assert EXACT in variants[0].value and FAST in variants[1].value
    assert {v.argtypes for v in variants} == set(k.signatures)
    assert [v.current for v in k.inspect_all("llvm", "void(float32[::1])")] == [True, False]
    with pytest.raises(ValueError, match="'ptx', 'llvm', 'types', 'sass' or 'sass_cfg'"):
        k.inspect_all("nothing")


def test_cuda_ptx_lists_each_specialisation_labelled_with_its_options(ip):
    launched_fast_then_exact(ip)
    for line in ("%cuda_ptx k", '%cuda_ptx k "void(float32[::1])"'):
        _, listings = ok(ip, line)
        assert len(listings) == 2, listings
        first, second = listings
        assert first.startswith(f"{ARGS} [no fastmath, sm_90; current options] — PTX, ")
        assert EXACT in first and FAST not in first
        assert second.startswith(f"{ARGS} [fastmath, sm_90] — PTX, ")
        assert FAST in second
    # the other options now: the fast one first, marked current
    ok(ip, "%config GPUReplace.fastmath = True")
    _, listings = ok(ip, "%cuda_ptx k")
    assert listings[0].startswith(f"{ARGS} [fastmath, sm_90; current options]")
    assert FAST in listings[0] and EXACT in listings[1]


def test_other_architectures_are_listed_and_labelled_too(ip):
    ok(ip, SQRT + "k[1, 4](out)")
    ok(ip, "%config GPUReplace.arch = 'sm_80'")
    ok(ip, "k[1, 4](out)")
    k = ip.user_ns["k"]
    (argtypes,) = k.signatures
    assert ".target sm_80" in k.inspect_ptx()[argtypes]
    for magic, word in (("cuda_ptx", "PTX"), ("cuda_llvm", "LLVM IR"), ("cuda_types", "typed IR")):
        _, listings = ok(ip, f"%{magic} k")
        assert [text.split(" — ")[0] for text in listings] == [
            f"{ARGS} [no fastmath, sm_80; current options]", f"{ARGS} [no fastmath, sm_90]"], \
            magic
        assert all(f" — {word}, " in text for text in listings)
    if find_tool("nvdisasm") is not None and find_tool("ptxas") is not None:
        _, listings = ok(ip, "%cuda_sass k")
        assert [text.split(" — ")[0] for text in listings] == [
            f"{ARGS} [no fastmath, sm_80; current options]", f"{ARGS} [no fastmath, sm_90]"]
        assert ".target sm_80" in k.inspect_ptx()[argtypes]
    ok(ip, "%config GPUReplace.arch = ''")
    assert ".target sm_90" in k.inspect_ptx()[argtypes]


def test_the_arch_option_takes_numba_cudas_tuple_too(ip, caplog):
    """(README and the option's own refusal name (major, minor) as a form; the trait was a
    string and refused the tuple.)"""
    ok(ip, "%config GPUReplace.arch = (8, 0)")
    assert settings.arch == "sm_80"
    ok(ip, SQRT + "k[1, 4](out)")
    (argtypes,) = ip.user_ns["k"].signatures
    assert ".target sm_80" in ip.user_ns["k"].inspect_ptx()[argtypes]
    ip.run_cell("%config GPUReplace.arch = (8,)")         # (refused: said through logging)
    assert "did you mean (8, 0)?" in caplog.text and settings.arch == "sm_80"
    ok(ip, "%config GPUReplace.arch = ''")
    assert settings.arch is None


def test_a_lone_specialisation_of_other_options_says_so(ip):
    ok(ip, "%config GPUReplace.fastmath = True")
    ok(ip, SQRT + "k[1, 4](out)")
    ok(ip, "%config GPUReplace.fastmath = False")
    k = ip.user_ns["k"]
    _, (listing,) = ok(ip, "%cuda_ptx k")
    assert listing.startswith(f"{ARGS} [fastmath, sm_90; not the current options] — PTX")
    assert FAST in k.inspect_ptx()[k.signatures[0]]     # (the only one compiled: still given)
    # one specialisation of the current options: labelled by its signature alone, as before
    ok(ip, "k[1, 4](out)")
    ok(ip, "%cuda_ptx k")
    ok(ip, SQRT.replace("def k", "def k1") + "k1[1, 4](out)")
    _, (listing,) = ok(ip, "%cuda_ptx k1")
    assert listing.startswith("k1(float32[::1]) — PTX, ")


@pytest.mark.skipif(find_tool("ptxas") is None, reason="needs ptxas")
def test_driver_questions_of_a_declared_signature_answer_for_the_current_options(ip):
    ok(ip, SQRT.replace("@cuda.jit\n", "@cuda.jit('void(float32[::1])')\n"))
    ok(ip, "%config GPUReplace.fastmath = True")
    ok(ip, "k[1, 4](out)")
    k = ip.user_ns["k"]
    assert len(k._specs) == 2
    assert isinstance(k.get_regs_per_thread(), int)      # one signature: not a dict


def test_show_shows_what_a_declared_signature_compiled_when_defined(ip):
    ok(ip, "import numpy as np\nfrom gpureplace import cuda\nout = np.zeros(1)")
    _, listings = ok(ip, '%%cuda --show ptx\n@cuda.jit("void(float64[:])")\n'
                         'def k2(out):\n    out[0] = 8\n')
    assert len(listings) == 1 and listings[0].startswith("k2(float64[:]) — PTX, ")
    assert ".entry k2" in listings[0]
    shown, listings = ok(ip, "k2[1, 1](out); print(out)")
    assert listings == [] and "[8.]" in shown             # compiled nothing new: shown once
    # launched in the cell that defines it: shown once, where it compiled
    _, listings = ok(ip, "%%cuda --show ptx\n@cuda.jit\ndef k3(out):\n    out[0] = 3\n"
                         "k3[1, 1](out)\n")
    assert len(listings) == 1 and listings[0].startswith("k3(float64[::1]) — PTX, ")
    # options the cell gives rebuild the kernel: what is shown is the code it runs
    _, listings = ok(ip, '%%cuda --show ptx --fastmath\n@cuda.jit("void(float32[:])")\n'
                         'def k4(out):\n    out[0] = out[0] / out[1]\n')
    assert len(listings) == 1 and "div.approx" in listings[0]
    assert ip.user_ns["k4"]._fastmath
    shown, listings = ok(ip, "k4[1, 1](np.ones(2, np.float32))")
    assert listings == []


def test_show_labels_a_specialisation_of_other_options(ip):
    ok(ip, "import numpy as np\nimport math\nout = np.zeros(4, np.float32)")
    _, listings = ok(ip, "%%cuda --show ptx\ndef ks(out):\n    out[0] = math.sqrt(out[1])\n"
                         "ks[1, 1](out)\n")
    assert len(listings) == 1 and listings[0].startswith("ks(float32[::1]) — PTX, ")
    ok(ip, "%config GPUReplace.fastmath = True")
    _, listings = ok(ip, "ks[1, 1](out)")
    assert len(listings) == 1
    assert listings[0].startswith("ks(float32[::1]) [fastmath, sm_90; current options] — PTX")
    assert FAST in listings[0]


@pytest.mark.parametrize("body, title", [
    ('@cuda.jit("void(float64[:])")\ndef kt(out):\n    out[0] = 8\n', "kt(float64[:])"),
    ("def kt(out):\n    out[0] = 8\nkt[1, 1](out)\n", "kt(float64[::1])")])
def test_show_types_of_a_kernel_loaded_from_the_disk_cache(ip, own_disk_cache, body, title):
    """The disk cache keeps no typed IR: ``--show types`` compiles the front end of a kernel it
    loaded, and shows that once (the cell failed with an AttributeError)."""
    ok(ip, "import numpy as np\nfrom gpureplace import cuda\nout = np.zeros(1)")
    for hits in (0, 1):
        _, listings = ok(ip, "%%cuda --show types\n" + body)
        assert sum(ip.user_ns["kt"].stats.cache_hits.values()) == hits
        assert len(listings) == 1 and listings[0].startswith(f"{title} — typed IR, ")
        assert "out[0] = 8" in listings[0]
