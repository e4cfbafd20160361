"""The disk cache across processes: hits, never stale, corruption detected, private directory.

Damaged entries and directories, clear(), info() and the cost at scale: test_cache_robustness.py."""

import glob
import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from gpureplace.compiler import diskcache, kernel_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROGRAM = textwrap.dedent("""
    import sys, json
    sys.path.insert(0, {moddir!r})
    import gpureplace
    from gpureplace import cuda
    import cachemod
    spec = cachemod.kern.compile("void(float64[:])")
    print(json.dumps({{"stats": gpureplace.stats(), "ptx": spec.ptx,
                      "from_disk": spec.from_disk}}))
""")


def write_module(tmp_path, factor, offset="1.0"):
    (tmp_path / "cachemod.py").write_text(textwrap.dedent(f"""
        from gpureplace import cuda
        OFFSET = {offset}
        def helper(v):
            return v * {factor} + OFFSET
        @cuda.jit
        def kern(out):
            out[0] = helper(out[0])
    """))


def run_process(tmp_path, cache_dir, llvm_options=""):
    # No .pyc: the module is rewritten within one second with the same size, which Python's
    # bytecode cache (mtime + size) would not notice.
    env = dict(os.environ, GPUREPLACE_CACHE_DIR=str(cache_dir), PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               GPUREPLACE_LLVM_OPTIONS=llvm_options)
    proc = subprocess.run([sys.executable, "-c", PROGRAM.format(moddir=str(tmp_path))],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_second_process_hits_and_a_redefined_callee_misses(tmp_path):
    cache_dir = tmp_path / "cache"
    write_module(tmp_path, "2.0")
    first = run_process(tmp_path, cache_dir)
    assert first["stats"]["kernel_compiles"] == 1 and not first["from_disk"]
    second = run_process(tmp_path, cache_dir)
    assert second["from_disk"] and second["stats"]["kernel_compiles"] == 0
    assert second["stats"]["disk_hits"] == 1
    assert second["ptx"] == first["ptx"]
    # the kernel's source is unchanged, its callee is not: the old binary must not be served
    write_module(tmp_path, "5.0")
    third = run_process(tmp_path, cache_dir)
    assert not third["from_disk"] and third["stats"]["kernel_compiles"] == 1
    assert "0d4014000000000000" in third["ptx"]
    # a frozen global changed
    write_module(tmp_path, "5.0", offset="7.0")
    fourth = run_process(tmp_path, cache_dir)
    assert not fourth["from_disk"]
    assert "0D401C000000000000" in fourth["ptx"].upper()      # 7.0


def test_llvm_options_are_part_of_the_key(tmp_path):
    """GPUREPLACE_LLVM_OPTIONS changes the generated code: a process with other options must not
    be served the PTX of the defaults, and the same options hit again."""
    cache_dir = tmp_path / "cache"
    write_module(tmp_path, "2.0")
    assert not run_process(tmp_path, cache_dir)["from_disk"]
    other = run_process(tmp_path, cache_dir, llvm_options="-unroll-threshold=100")
    assert not other["from_disk"]
    assert run_process(tmp_path, cache_dir, llvm_options="-unroll-threshold=100")["from_disk"]
    assert run_process(tmp_path, cache_dir)["from_disk"]


def test_llvm_options_override_by_name_and_refuse_junk(monkeypatch):
    from gpureplace.compiler import backend
    monkeypatch.setenv("GPUREPLACE_LLVM_OPTIONS", "-unroll-threshold=100 -simplifycfg-sink-common")
    backend.llvm_options.cache_clear()
    try:
        opts = backend.llvm_options()
        assert "-unroll-threshold=100" in opts and "-simplifycfg-sink-common" in opts
        assert not any(o.startswith("-unroll-threshold=3000") for o in opts)
        assert not any(o == "-simplifycfg-sink-common=false" for o in opts)
        assert len(opts) == len(backend.LLVM_OPTIONS)           # replaced, not added twice
        monkeypatch.setenv("GPUREPLACE_LLVM_OPTIONS", "-O3 unroll")
        backend.llvm_options.cache_clear()
        with pytest.raises(ValueError, match="GPUREPLACE_LLVM_OPTIONS: 'unroll'"):
            backend.llvm_options()
    finally:
        monkeypatch.delenv("GPUREPLACE_LLVM_OPTIONS")
        backend.llvm_options.cache_clear()


def test_a_new_codegen_revision_is_a_new_key(monkeypatch):
    """Code compiled by a gpureplace whose code generation differed is never served."""
    from gpureplace.compiler import backend
    from gpureplace.dispatch.context import current_default

    def default_context():
        return current_default()

    def kern(x):
        x[0] = 1

    key = kernel_cache.kernel_key(kern, ("float64[:]",), {}, default_context(), 80)
    assert key == kernel_cache.kernel_key(kern, ("float64[:]",), {}, default_context(), 80)
    monkeypatch.setattr(backend, "CODEGEN_REVISION", backend.CODEGEN_REVISION + 1)
    assert key != kernel_cache.kernel_key(kern, ("float64[:]",), {}, default_context(), 80)


def test_corrupted_entry_is_detected_removed_and_recompiled(tmp_path):
    cache_dir = tmp_path / "cache"
    write_module(tmp_path, "2.0")
    run_process(tmp_path, cache_dir)
    ptx_files = glob.glob(str(cache_dir / "kernels" / "*" / "*.ptx"))
    assert len(ptx_files) == 1
    path = ptx_files[0]
    with open(path, "rb") as fh:
        data = fh.read()
    with open(path, "wb") as fh:
        fh.write(data[:-40])                            # truncated
    again = run_process(tmp_path, cache_dir)
    assert not again["from_disk"] and again["stats"]["kernel_compiles"] == 1
    assert run_process(tmp_path, cache_dir)["from_disk"]  # rewritten, good again
    meta = glob.glob(str(cache_dir / "kernels" / "*" / "*.json"))[0]
    with open(meta, "w") as fh:
        fh.write("{not json")
    assert not run_process(tmp_path, cache_dir)["from_disk"]


def test_entries_are_json_and_ptx_never_pickles(tmp_path):
    cache_dir = tmp_path / "cache"
    write_module(tmp_path, "2.0")
    run_process(tmp_path, cache_dir)
    assert {"CACHEDIR.TAG", "usage", "kernels"} <= set(os.listdir(cache_dir)) <= {
        "CACHEDIR.TAG", "usage", "kernels", "libdevice"}
    (key,) = os.listdir(cache_dir / "kernels")
    names = os.listdir(cache_dir / "kernels" / key)
    assert {os.path.splitext(n)[1] for n in names} == {".ptx", ".json"}
    meta = json.loads((cache_dir / "kernels" / key / [n for n in names
                                                      if n.endswith(".json")][0]).read_text())
    assert meta["nodes"][0]["function"] == ["cachemod", "kern"]
    assert stat.S_IMODE(os.stat(cache_dir).st_mode) == 0o700


def test_directory_writable_by_others_is_refused(tmp_path):
    """Refused with a warning (never read nor written), not with an error out of a compile."""
    bad = tmp_path / "shared"
    bad.mkdir()
    os.chmod(bad, 0o777)
    old = diskcache._explicit_dir
    diskcache.set_directory(bad)
    try:
        with pytest.warns(UserWarning, match="other users can write"):
            assert diskcache.ensure_dir() is None
        assert os.listdir(bad) == []
    finally:
        diskcache.set_directory(old)


def test_clear_and_size_cap(tmp_path):
    old_dir, old_cap = diskcache._explicit_dir, diskcache.max_bytes
    diskcache.set_directory(tmp_path / "c")
    try:
        d = diskcache.ensure_dir()
        for i in range(5):
            folder = os.path.join(d, "kernels", f"{i:040x}")
            os.makedirs(folder)
            with open(os.path.join(folder, f"{i:012x}.ptx"), "wb") as fh:
                fh.write(b"x" * 1000)
            with open(os.path.join(folder, f"{i:012x}.json"), "wb") as fh:
                fh.write(b"{}")
            os.utime(os.path.join(folder, f"{i:012x}.json"), (i, i))
        diskcache.max_bytes = int(4 * 1002 / diskcache.LOW_WATER)
        diskcache._scan(d)                                         # 5 entries: over the low water
        left = sorted(os.listdir(os.path.join(d, "kernels")))
        assert left == [f"{i:040x}" for i in (1, 2, 3, 4)]     # least recently used went first
        assert diskcache.info()["entries"] == 4
        assert diskcache.clear() == 4 and os.listdir(os.path.join(d, "kernels")) == []
    finally:
        diskcache.set_directory(old_dir)
        diskcache.max_bytes = old_cap


def test_disabled_cache_writes_nothing(tmp_path):
    cache_dir = tmp_path / "cache"
    write_module(tmp_path, "2.0")
    env_prog = PROGRAM
    env = dict(os.environ, GPUREPLACE_CACHE_DIR=str(cache_dir), GPUREPLACE_CACHE="0",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", env_prog.format(moddir=str(tmp_path))],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert not cache_dir.exists() or os.listdir(cache_dir) == []


def disk_helper(v):
    return v * 2.0


def test_disk_loaded_kernel_is_invalidated_by_a_new_override(tmp_path):
    import gpureplace
    from gpureplace import cuda
    old = diskcache._explicit_dir
    diskcache.set_directory(tmp_path / "inproc")
    try:
        def body(out):
            out[0] = disk_helper(out[0])
        body.__qualname__ = "disk_override_kernel"
        cuda.jit(body).compile("void(float64[:])")              # compiled and stored
        again = cuda.jit(body)                                   # a fresh object: loads from disk
        spec = again.compile("void(float64[:])")
        assert spec.from_disk
        before = gpureplace.stats()["kernel_compiles"]

        def quadruple(v):
            return v * 4.0
        gpureplace.override(disk_helper, quadruple)
        try:
            spec2 = again.compile("void(float64[:])")
            assert not spec2.from_disk
            assert gpureplace.stats()["kernel_compiles"] == before + 1
            assert "0d4010000000000000" in spec2.ptx               # 4.0: the override's code
        finally:
            gpureplace.default_context.remove_override(disk_helper)
    finally:
        diskcache.set_directory(old)


def test_pruned_libdevice_is_kept_on_disk_and_rebuilt_when_corrupt(tmp_path):
    import llvmlite.binding as llvm

    from gpureplace.compiler import libdevice_link as libdevice
    old = diskcache._explicit_dir
    diskcache.set_directory(tmp_path / "ld")
    try:
        names, reflect = {"__nv_expf"}, {"__CUDA_FTZ": 0}
        libdevice._pruned.clear()
        data = libdevice.pruned_bitcode(names, reflect)
        files = [f for f in os.listdir(tmp_path / "ld" / "libdevice")
                 if f.startswith("pruned-") and f.endswith(".bc")]
        assert len(files) == 1
        libdevice._pruned.clear()
        assert libdevice.pruned_bitcode(names, reflect) == data          # read back from disk
        path = tmp_path / "ld" / "libdevice" / files[0]
        path.write_bytes(path.read_bytes()[:100])                       # truncated
        libdevice._pruned.clear()
        again = libdevice.pruned_bitcode(names, reflect)
        assert again == data
        assert [f.name for f in llvm.parse_bitcode(again).functions
                if not f.is_declaration] == ["__nv_expf"]
    finally:
        diskcache.set_directory(old)
        libdevice._pruned.clear()


def test_libdevice_text_is_read_back_without_parsing_the_bitcode(tmp_path, monkeypatch):
    from gpureplace.compiler import libdevice_bitcode
    from gpureplace.compiler import libdevice_link as libdevice
    old = diskcache._explicit_dir, libdevice._index, libdevice._table
    diskcache.set_directory(tmp_path / "ld")
    try:
        libdevice._index = libdevice._table = None
        first = libdevice._text_index()
        ld = tmp_path / "ld" / "libdevice"
        texts = [f for f in os.listdir(ld) if f.endswith(".ll")]
        assert len(texts) == 1 and texts[0].startswith("text-")
        path = ld / texts[0]
        assert path.stat().st_size > 1_000_000                  # the whole of libdevice

        def no_parse():
            raise AssertionError("libdevice's bitcode was parsed again")
        monkeypatch.setattr(libdevice_bitcode, "_load", no_parse)
        libdevice._index = libdevice._table = None
        again = libdevice._text_index()
        assert again is not first and again.defines == first.defines
        assert libdevice.function_table()["__nv_powf"] == ("float", ("float", "float"))
        module = libdevice.llvm.parse_assembly(again.module_text({"__nv_sinf"}))
        assert "__nv_sinf" in [f.name for f in module.functions if not f.is_declaration]

        monkeypatch.undo()
        path.write_bytes(path.read_bytes()[:-10])                 # truncated: printed again
        libdevice._index = libdevice._table = None
        assert libdevice._text_index().defines == first.defines
        assert path.stat().st_size > 1_000_000

        for n in range(4):                                       # texts of other files are pruned
            (ld / f"text-{n:040x}.ll").write_text("old")
            os.utime(ld / f"text-{n:040x}.ll", (n, n))
        path.unlink()
        libdevice._index = libdevice._table = None
        libdevice._text_index()
        left = sorted(f for f in os.listdir(ld) if f.endswith(".ll"))
        assert len(left) == 3 and texts[0] in left
        assert f"text-{3:040x}.ll" in left                             # the newest others stay
        diskcache.clear()
        assert not [f for f in os.listdir(ld) if f.endswith(".ll")]
    finally:
        diskcache.set_directory(old[0])
        libdevice._index, libdevice._table = old[1], old[2]


def test_alternating_callee_definitions_both_stay_cached(tmp_path):
    cache_dir = tmp_path / "cache"
    write_module(tmp_path, "2.0")
    assert not run_process(tmp_path, cache_dir)["from_disk"]
    write_module(tmp_path, "5.0")
    assert not run_process(tmp_path, cache_dir)["from_disk"]
    write_module(tmp_path, "2.0")
    back = run_process(tmp_path, cache_dir)
    assert back["from_disk"] and "0d4000000000000000" in back["ptx"]      # 2.0, the first one


def test_a_kernels_stats_count_disk_hits_and_misses_by_signature(own_disk_cache, tmp_path,
                                                                 monkeypatch):
    # numba's Dispatcher.stats, as numba-cuda code reads it (its caching tests import a module
    # of cached kernels twice)
    import importlib

    from numba.core import types as nbt
    (tmp_path / "statsmod.py").write_text(
        "from gpureplace import cuda\n@cuda.jit\ndef kern(out, v):\n    out[0] = v * 2.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "statsmod", raising=False)
    first = importlib.import_module("statsmod").kern
    assert first.stats.cache_path == str(own_disk_cache)
    assert not first.stats.cache_hits and not first.stats.cache_misses
    f64 = (nbt.float64[::1], nbt.float64)
    f32 = (nbt.float32[::1], nbt.float32)
    first.compile(f64)
    first.compile(f32)
    first.compile(f64)                          # (from memory: neither a hit nor a miss)
    assert first.stats.cache_misses == {f64: 1, f32: 1} and not first.stats.cache_hits
    del sys.modules["statsmod"]
    again = importlib.import_module("statsmod").kern       # imported anew
    assert again is not first
    again.compile(f64)
    assert again.stats.cache_hits == {f64: 1} and not again.stats.cache_misses
    # a copy, not the kernel's own counters
    again.stats.cache_hits.clear()
    assert sum(again.stats.cache_hits.values()) == 1


def test_stats_cache_path_is_none_with_the_disk_cache_off(monkeypatch):
    from gpureplace import cuda
    monkeypatch.setattr(diskcache, "enabled", False)

    @cuda.jit
    def kern(out):
        out[0] = 1.0
    kern.compile("void(float64[::1])")
    assert kern.stats.cache_path is None
    assert not kern.stats.cache_hits and not kern.stats.cache_misses


def test_a_notebooks_many_redefinitions_keep_a_bounded_number_of_variants(own_disk_cache,
                                                                          tmp_path, monkeypatch):
    """A helper redefined again and again: each definition's compile is one variant of the
    kernel's key; only the MAX_VARIANTS most recently used stay, each variant is read from disk
    once per process (a recompile looks at every variant of its key before it compiles), and a
    definition gone back to is served from disk while it is among them."""
    import importlib

    import gpureplace

    (tmp_path / "variantmod.py").write_text(textwrap.dedent("""
        from gpureplace import cuda
        def helper(v):
            return v * 1.0
        @cuda.jit
        def kern(out):
            out[0] = helper(out[0])
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "variantmod", raising=False)
    mod = importlib.import_module("variantmod")
    sig = "void(float64[:])"

    def define(factor):
        ns = {}
        exec(f"def helper(v):\n    return v * {factor}.0\n", ns)
        ns["helper"].__module__, ns["helper"].__qualname__ = "variantmod", "helper"
        mod.helper = ns["helper"]
        gpureplace.refresh()

    reads = []
    real_unseal = kernel_cache._unseal
    monkeypatch.setattr(kernel_cache, "_unseal", lambda raw: reads.append(1) or real_unseal(raw))
    mod.kern.compile(sig)
    for factor in range(2, 14):
        define(factor)
        reads.clear()
        spec = mod.kern.compile(sig)
        assert not spec.from_disk
        assert len(reads) <= 1          # only the variant stored since the last look is new
    folder, = glob.glob(str(own_disk_cache / "kernels" / "*"))
    variants = sorted(f for f in os.listdir(folder) if f.endswith(".json"))
    assert len(variants) == kernel_cache.MAX_VARIANTS
    assert len([f for f in os.listdir(folder) if f.endswith(".ptx")]) == len(variants)
    define(9)                           # among the 8 most recent: from disk
    spec = mod.kern.compile(sig)
    assert spec.from_disk and "0d4022000000000000" in spec.ptx.lower()      # 9.0
    define(3)                           # trimmed long ago: compiled again
    spec = mod.kern.compile(sig)
    assert not spec.from_disk and "0d4008000000000000" in spec.ptx.lower()  # 3.0


def test_an_entry_damaged_after_this_process_read_it_is_a_miss(own_disk_cache):
    """Entries read once are remembered by their files' identity: one replaced or rewritten
    since (damaged here) is read again, found damaged, removed and recompiled."""
    from gpureplace import cuda

    @cuda.jit
    def kern(out):
        out[0] = out[0] * 3.0

    sig = "void(float64[:])"
    kern.compile(sig)
    key_folder, = glob.glob(str(own_disk_cache / "kernels" / "*"))
    meta_path, = glob.glob(os.path.join(key_folder, "*.json"))
    variant = os.path.basename(meta_path)[:-5]
    assert kernel_cache._read_entry(key_folder, variant) is not None       # read, remembered
    with open(meta_path, "r+b") as fh:                                     # same inode and size
        raw = fh.read()
        fh.seek(0)
        fh.write(raw.replace(b'"format"', b'"formax"'))
    assert kernel_cache._read_entry(key_folder, variant) is None
    assert not os.path.exists(meta_path)
