"""The disk cache never costs the user anything: a damaged entry is a miss, an unusable directory a
warning, clear() deletes only what gpureplace wrote, info() survives a changing directory, loading
and storing do not slow down with the number of entries, and a bad libdevice is an error that says
what to do (never a dead interpreter)."""

import glob
import json
import os
import random
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

from conftest import python_env
from gpureplace import cuda
from gpureplace.compiler import diskcache, kernel_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh cache directory for this test (and the process's settings put back after it)."""
    problems = getattr(diskcache, "_problems", {})       # directories already warned about
    old = diskcache._explicit_dir, diskcache.max_bytes, set(problems)
    diskcache.set_directory(tmp_path / "cache")
    try:
        yield tmp_path / "cache"
    finally:
        diskcache.set_directory(old[0])
        diskcache.max_bytes = old[1]
        for path in set(problems) - old[2]:
            del problems[path]


def robust_helper(v):
    return v * 3.0


def make_kernel():
    def body(out):
        out[0] = robust_helper(out[0])
    body.__qualname__ = "robust_kernel"
    return body


def compile_fresh(body):
    """Compile ``body`` with a new function object, so the disk cache is asked first."""
    return cuda.jit(body).compile("void(float64[:])")


def entry_files(d):
    (json_path,) = glob.glob(str(d / "kernels" / "*" / "*.json")) or glob.glob(str(d / "*.json"))
    return json_path, json_path[:-len(".json")] + ".ptx"


def rewrite(path, change):
    with open(path, "rb") as fh:
        data = fh.read()
    with open(path, "wb") as fh:
        fh.write(change(data))


def reseal(change):
    """Change the metadata and seal it again: a damaged entry whose digest still holds."""
    def apply(data):
        meta = json.loads(data)
        del meta["digest"]
        change(meta)
        return kernel_cache._seal(meta)
    return apply


DAMAGE = {
    "a key renamed": lambda j, p: rewrite(j, lambda d: d.replace(b'"reads"', b'"readr"')),
    "a flipped byte": lambda j, p: rewrite(j, lambda d: d[:40] + bytes([d[40] ^ 1]) + d[41:]),
    "JSON truncated": lambda j, p: rewrite(j, lambda d: d[:len(d) // 2]),
    "JSON empty": lambda j, p: rewrite(j, lambda d: b""),
    "not JSON": lambda j, p: rewrite(j, lambda d: b"{not json"),
    "not UTF-8": lambda j, p: rewrite(j, lambda d: b"\xff\xfe" + d),
    "a JSON list": lambda j, p: rewrite(j, lambda d: b"[1, 2]"),
    "PTX truncated": lambda j, p: rewrite(p, lambda d: d[:-40]),
    "PTX of another write": lambda j, p: rewrite(p, lambda d: d.replace(b"0d4008", b"0d4010")),
    "PTX missing": lambda j, p: os.unlink(p),
    "PTX is a folder": lambda j, p: (os.unlink(p), os.mkdir(p)),
    "sealed, nodes not a list": lambda j, p: rewrite(j, reseal(lambda m: m.update(nodes=5))),
    "sealed, a read of 4 fields": lambda j, p: rewrite(j, reseal(
        lambda m: m["nodes"][0].update(reads=[["global", "x", None, "ab"]]))),
    "sealed, function a string": lambda j, p: rewrite(j, reseal(
        lambda m: m["nodes"][0].update(function="robust_kernel"))),
    "sealed, no name": lambda j, p: rewrite(j, reseal(lambda m: m.pop("name"))),
    "sealed, a line number not an int": lambda j, p: rewrite(j, reseal(
        lambda m: m["nodes"][0].update(reads=[["global", "robust_helper", None, "f", "x"]]))),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_entry_is_a_miss_removed_and_rewritten(cache_dir, damage):
    body = make_kernel()
    first = compile_fresh(body)
    assert not first.from_disk and compile_fresh(body).from_disk
    json_path, ptx_path = entry_files(cache_dir)
    DAMAGE[damage](json_path, ptx_path)
    again = compile_fresh(body)                      # never an error
    assert not again.from_disk and again.ptx == first.ptx
    back = compile_fresh(body)                       # the entry was written again, whole
    assert back.ptx == first.ptx
    assert back.from_disk or damage == "PTX is a folder"   # (that folder cannot be replaced)


def test_a_sealed_entry_that_validation_cannot_read_is_a_miss(cache_dir, monkeypatch):
    """Even an error inside _validate (a field added without a check) costs a compile only."""
    body = make_kernel()
    compile_fresh(body)

    def broken(nodes, context, kernel_func):
        raise KeyError("reads")
    monkeypatch.setattr(kernel_cache, "_validate", broken)
    assert not compile_fresh(body).from_disk
    monkeypatch.undo()
    assert compile_fresh(body).from_disk


def test_a_damaged_entry_in_a_new_process_is_a_miss_there_too(tmp_path):
    """The reported case: one flipped byte ("reads" -> "readr") failed every later process's
    compile of that kernel with KeyError."""
    (tmp_path / "robustmod.py").write_text(textwrap.dedent("""
        from gpureplace import cuda
        def helper(v):
            return v * 2.0
        @cuda.jit
        def kern(out):
            out[0] = helper(out[0])
    """))
    program = textwrap.dedent(f"""
        import sys, json
        sys.path.insert(0, {str(tmp_path)!r})
        import robustmod
        print(json.dumps(robustmod.kern.compile("void(float64[:])").from_disk))
    """)
    env = python_env(GPUREPLACE_CACHE_DIR=str(tmp_path / "c"), PYTHONDONTWRITEBYTECODE="1")

    def run():
        proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])
    assert run() is False and run() is True
    json_path, _ = entry_files(tmp_path / "c")
    rewrite(json_path, lambda d: d.replace(b'"reads"', b'"readr"'))
    assert run() is False and run() is True


# ---------------------------------------------------------------------------------------------
# Directories that cannot be used


def compile_with_warnings(body):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = compile_fresh(body)
    return spec, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def check_unusable(path, reason, set_directory=True):
    """Compiling works, warns once naming the directory, the reason and what to do; no cache."""
    old = diskcache._explicit_dir
    if set_directory:
        diskcache.set_directory(path)
    try:
        body = make_kernel()
        spec, caught = compile_with_warnings(body)
        assert not spec.from_disk
        (message,) = caught
        assert str(path) in message and reason in message
        assert "GPUREPLACE_CACHE_DIR" in message and "GPUREPLACE_CACHE=0" in message
        spec, caught = compile_with_warnings(body)       # once per directory, and still no cache
        assert not spec.from_disk and caught == []
    finally:
        diskcache.set_directory(old)
        getattr(diskcache, "_problems", {}).pop(str(path), None)


def test_a_path_that_is_a_file(tmp_path):
    (tmp_path / "file").write_text("mine")
    check_unusable(tmp_path / "file", "is a file")
    assert (tmp_path / "file").read_text() == "mine"


def test_a_directory_that_cannot_be_created(tmp_path):
    (tmp_path / "file").write_text("mine")
    check_unusable(tmp_path / "file" / "cache", "cannot be created")
    check_unusable("/proc/gpureplace-no-such-dir/cache", "cannot be created")


def test_a_directory_writable_by_others_is_never_read_or_written(tmp_path):
    bad = tmp_path / "shared"
    bad.mkdir()
    os.chmod(bad, 0o777)
    check_unusable(bad, "other users can write to it")
    assert os.listdir(bad) == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_a_directory_of_another_user(tmp_path):
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    os.chown(other, 12345, 12345)
    check_unusable(other, "belongs to another user")
    assert os.listdir(other) == []


def test_another_programs_cache_directory(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    (theirs / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n# pip\n")
    check_unusable(theirs, "another program's CACHEDIR.TAG")
    assert os.listdir(theirs) == ["CACHEDIR.TAG"]


def test_no_home_directory(monkeypatch):
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("GPUREPLACE_CACHE_DIR", raising=False)
    monkeypatch.setattr(diskcache.os.path, "expanduser", lambda p: p)   # no passwd entry either
    assert diskcache.directory() == os.path.join("~", ".cache", "gpureplace")
    existed = os.path.exists("~")
    check_unusable(diskcache.directory(), "no home directory", set_directory=False)
    assert existed or not os.path.exists("~")            # no "~" in the working directory


def test_an_unwritable_home_in_a_new_process(tmp_path):
    """A container's HOME that cannot be written: the program runs, with one warning."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("GPUREPLACE_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(HOME="/proc/gpureplace-no-home", PYTHONPATH=ROOT)
    program = textwrap.dedent("""
        import math
        from gpureplace import cuda
        @cuda.jit
        def kern(out):
            out[0] = math.sin(out[0])           # libdevice too: its files follow the same rule
        kern.compile("void(float64[:])")
        kern.compile("void(float32[:])")
        print("compiled")
    """)
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "compiled"
    assert proc.stderr.count("UserWarning") == 1, proc.stderr
    assert "/proc/gpureplace-no-home/.cache/gpureplace" in proc.stderr
    assert os.listdir(tmp_path) == []


def test_libdevice_files_follow_the_same_rule(tmp_path):
    import math

    from gpureplace.compiler import libdevice_link as libdevice
    bad = tmp_path / "shared"
    bad.mkdir()
    os.chmod(bad, 0o777)
    old = diskcache._explicit_dir
    diskcache.set_directory(bad)
    try:
        def body(out):
            out[0] = math.exp(out[0]) + math.cos(out[1])
        body.__qualname__ = "robust_libdevice_kernel"
        libdevice._pruned.clear()
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            assert not compile_fresh(body).from_disk
            assert libdevice._disk_path((frozenset({"__nv_expf"}), ())) is None
            assert libdevice._text_path() is None
        assert os.listdir(bad) == []
    finally:
        diskcache.set_directory(old)
        getattr(diskcache, "_problems", {}).pop(str(bad), None)


def test_a_directory_removed_while_the_process_runs_is_made_again(cache_dir):
    import shutil
    body = make_kernel()
    compile_fresh(body)
    shutil.rmtree(cache_dir)                           # rm -rf by hand, the notebook still open
    assert not compile_fresh(body).from_disk
    assert (cache_dir / "CACHEDIR.TAG").exists() and os.stat(cache_dir).st_mode & 0o777 == 0o700
    assert compile_fresh(body).from_disk


# ---------------------------------------------------------------------------------------------
# clear() and info()


USER_FILES = ["settings.json", "package.json", "notes.ptx", "a.bc", "b.ll", "usage.txt",
              "libdevice-notes.bc", "deadbeef.json", "0" * 40 + ".json.bak"]


def make_user_files(d):
    os.makedirs(d, exist_ok=True)
    for name in USER_FILES:
        (d / name).write_text("the user's")


def test_clear_deletes_only_what_gpureplace_wrote(cache_dir):
    body = make_kernel()
    compile_fresh(body)                                 # makes the directory: marker + entry
    make_user_files(cache_dir)                          # the user's files put there later
    (key,) = os.listdir(cache_dir / "kernels")
    (cache_dir / "kernels" / key / "README.json").write_text("the user's")
    (cache_dir / "kernels" / "mine").mkdir()
    (cache_dir / "kernels" / "mine" / ("0" * 12 + ".json")).write_text("the user's")
    (cache_dir / "libdevice").mkdir(exist_ok=True)
    (cache_dir / "libdevice" / "pruned-notes.bc").write_text("the user's")
    (cache_dir / ".tmp-abcd1234").write_text("ours: a temp file")
    assert diskcache.info()["entries"] == 1
    assert diskcache.clear() == 1
    for name in USER_FILES:
        assert (cache_dir / name).read_text() == "the user's"
    assert (cache_dir / "kernels" / key / "README.json").exists()
    assert (cache_dir / "kernels" / "mine" / ("0" * 12 + ".json")).exists()
    assert (cache_dir / "libdevice" / "pruned-notes.bc").exists()
    assert not (cache_dir / ".tmp-abcd1234").exists()
    assert diskcache.info()["entries"] == 0 and not compile_fresh(body).from_disk


def test_clear_empties_nothing_without_the_marker(cache_dir):
    make_user_files(cache_dir)
    old_format = "1" * 40 + "-" + "2" * 12 + ".json"      # looks like ours, but who knows
    (cache_dir / old_format).write_text("{}")
    with pytest.warns(UserWarning, match="deleted nothing.*no CACHEDIR.TAG"):
        assert diskcache.clear() == 0
    assert sorted(os.listdir(cache_dir)) == sorted(USER_FILES + [old_format])
    empty = cache_dir / "empty"
    empty.mkdir()
    diskcache.set_directory(empty)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert diskcache.clear() == 0                          # nothing there: nothing to say


def test_clear_of_an_insecure_directory_deletes_nothing(cache_dir):
    compile_fresh(make_kernel())
    os.chmod(cache_dir, 0o777)
    try:
        with pytest.warns(UserWarning, match="deleted nothing.*other users can write"):
            assert diskcache.clear() == 0
        assert glob.glob(str(cache_dir / "kernels" / "*" / "*.json"))
    finally:
        os.chmod(cache_dir, 0o700)


def test_a_directory_holding_the_users_files_is_not_used_and_nothing_there_changes(tmp_path):
    """A directory that exists with anything in it is the user's: gpureplace does not mark it,
    so nothing there is ever overwritten (a file of theirs named ``usage``, the name of the
    cache's size counter) or deleted (names exactly like the flat entries of an older
    gpureplace, or like its libdevice files); the warning suggests a new folder inside."""
    theirs = tmp_path / "project"
    make_user_files(theirs)
    lookalikes = {"usage": b"my usage notes\n", "a" * 40 + ".json": b'{"mine": 1}',
                  "b" * 40 + "-" + "c" * 12 + ".ptx": b"// my ptx",
                  "libdevice-text-" + "d" * 40 + ".ll": b"; mine"}
    for name, data in lookalikes.items():
        (theirs / name).write_bytes(data)
    before = {p.name: p.read_bytes() for p in theirs.iterdir()}
    check_unusable(theirs, "already holds files that are not gpureplace's")
    assert {p.name: p.read_bytes() for p in theirs.iterdir()} == before
    old = diskcache._explicit_dir
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        diskcache.set_directory(theirs)
        try:
            compile_fresh(make_kernel())
        finally:
            diskcache.set_directory(old)
            getattr(diskcache, "_problems", {}).pop(str(theirs), None)
    (message,) = [str(w.message) for w in caught]
    assert os.path.join(str(theirs), "gpureplace-cache") in message
    assert {p.name: p.read_bytes() for p in theirs.iterdir()} == before


def test_an_empty_directory_the_user_made_is_used(tmp_path):
    made = tmp_path / "made-by-hand"
    made.mkdir(mode=0o700)
    old = diskcache._explicit_dir
    diskcache.set_directory(made)
    try:
        body = make_kernel()
        assert not compile_fresh(body).from_disk
        assert compile_fresh(body).from_disk
        assert "CACHEDIR.TAG" in os.listdir(made)
    finally:
        diskcache.set_directory(old)


def test_info_survives_a_dangling_symlink_and_a_file_removed_meanwhile(cache_dir, monkeypatch):
    compile_fresh(make_kernel())
    json_path, ptx_path = entry_files(cache_dir)
    folder = os.path.dirname(json_path)
    os.symlink(os.path.join(folder, "gone"), os.path.join(folder, "f" * 12 + ".json"))
    os.symlink(os.path.join(folder, "gone"), cache_dir / "settings.json")
    before = diskcache.info()
    assert before["entries"] == 1 and before["problem"] is None

    real_scandir = os.scandir

    class Listing:
        """os.scandir whose files vanish between the listing and the stat."""
        def __init__(self, path):
            self.entries = list(real_scandir(path))
            for entry in self.entries:
                if entry.name.endswith(".ptx"):
                    os.unlink(entry.path)

        def __enter__(self):
            return iter(self.entries)

        def __exit__(self, *exc):
            return False
    monkeypatch.setattr(diskcache.os, "scandir", Listing)
    info = diskcache.info()
    assert info["entries"] == 0 and info["bytes"] >= 0


# ---------------------------------------------------------------------------------------------
# Size: the running total, the amortised scan, leftovers


def fake_entry(d, i, size=4000, age=0.0):
    folder = d / "kernels" / f"{i:040x}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{i:012x}.ptx").write_bytes(b"x" * size)
    (folder / f"{i:012x}.json").write_bytes(b"{}")
    t = time.time() - age
    os.utime(folder / f"{i:012x}.json", (t, t))
    return folder


def test_leftovers_are_cleaned_and_counted_by_the_scan(cache_dir):
    d = diskcache.ensure_dir()
    stale = time.time() - diskcache.STALE_SECONDS - 60
    old_entry = fake_entry(cache_dir, 1)
    young = fake_entry(cache_dir, 2)
    os.unlink(young / f"{2:012x}.json")                     # half an entry, being written
    orphan = fake_entry(cache_dir, 3)
    os.unlink(orphan / f"{3:012x}.ptx")
    os.utime(orphan / f"{3:012x}.json", (stale, stale))      # half an entry, left by a crash
    for folder in (cache_dir, old_entry):
        (folder / ".tmp-old12345").write_bytes(b"t" * 100)
        os.utime(folder / ".tmp-old12345", (stale, stale))
        (folder / ".tmp-new12345").write_bytes(b"t" * 100)
    diskcache._scan(d)
    assert not (cache_dir / ".tmp-old12345").exists() and not (old_entry / ".tmp-old12345").exists()
    assert (cache_dir / ".tmp-new12345").exists() and (young / f"{2:012x}.ptx").exists()
    assert not orphan.exists()                               # its folder went with it
    total = os.stat(cache_dir / "usage").st_size * 1024      # the running total, reset
    assert 4000 + 4000 + 200 <= total <= 4000 + 4000 + 200 + 3 * 1024


def test_libdevice_files_count_and_are_evicted_least_recently_used(cache_dir):
    d = diskcache.ensure_dir()
    path = diskcache.libdevice_path("text-" + "a" * 40 + ".ll")
    assert diskcache.write_file(path, b"L" * 100_000)
    os.utime(path, (1, 1))
    for i in range(10):
        fake_entry(cache_dir, i, size=10_000, age=100 - i)
    assert diskcache.info()["bytes"] >= 200_000
    diskcache.max_bytes = 150_000
    diskcache._scan(d)
    assert not os.path.exists(path)                         # the oldest use went first
    assert diskcache.info()["bytes"] <= 150_000 * diskcache.LOW_WATER


def test_stores_scan_once_per_quarter_of_the_cap(cache_dir, monkeypatch):
    """A store appends to the running total and scans only past the cap; the scan trims to
    LOW_WATER, so scans come once per quarter-cap stored, however many entries there are."""
    body = make_kernel()
    spec = compile_fresh(body)
    scans = []
    real_scan = diskcache._scan
    monkeypatch.setattr(diskcache, "_scan", lambda d: (scans.append(d), real_scan(d)))
    diskcache.clear()
    kernel_cache.store("f" * 40, spec)
    entry = diskcache.info()["bytes"]
    diskcache.max_bytes = 40 * entry
    for i in range(200):
        kernel_cache.store(f"{i:040x}", spec)
    # after a scan the total is within an entry of LOW_WATER; it must pass the cap again
    quarter = diskcache.max_bytes * (1 - diskcache.LOW_WATER)
    assert (200 * entry - diskcache.max_bytes) / (quarter + 1024 + entry) <= len(scans)
    assert len(scans) <= 200 * (entry + 1024) / quarter + 2
    assert diskcache.info()["bytes"] <= diskcache.max_bytes


def test_load_and_store_list_only_the_keys_folder(cache_dir, monkeypatch):
    """O(1) in the number of entries: nothing lists the cache directory or kernels/."""
    body = make_kernel()
    spec = compile_fresh(body)
    for i in range(300):
        fake_entry(cache_dir, i + 10)
    listed = []
    real_listdir, real_scandir = os.listdir, os.scandir
    monkeypatch.setattr(diskcache.os, "listdir", lambda p=".": (listed.append(str(p)),
                                                            real_listdir(p))[1])
    monkeypatch.setattr(diskcache.os, "scandir", lambda p=".": (listed.append(str(p)),
                                                            real_scandir(p))[1])
    assert compile_fresh(body).from_disk
    kernel_cache.store("f" * 40, spec)
    kernels = str(cache_dir / "kernels")
    assert listed and all(os.path.dirname(p) == kernels for p in listed), listed


def test_concurrent_processes_share_a_small_cache(tmp_path):
    """Four processes storing and loading at once under a small cap: no error, and the cache
    stays near its cap (the running total loses no process's bytes)."""
    program = textwrap.dedent("""
        import os, sys
        from gpureplace import cuda
        from gpureplace.compiler import diskcache, kernel_cache
        diskcache.max_bytes = 200_000
        def kern(out):
            out[0] = 1.0
        spec = cuda.jit(kern).compile("void(float64[:])")
        for i in range(60):
            kernel_cache.store("%s%038x" % (sys.argv[1], i), spec)
            kernel_cache.load("%s%038x" % (sys.argv[1], i // 2), kern, spec.argtypes, spec.options,
                       spec.context)
        print("done")
    """)
    env = python_env(GPUREPLACE_CACHE_DIR=str(tmp_path / "c"))
    procs = [subprocess.Popen([sys.executable, "-c", program, f"{n}{n}"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in range(4)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.strip() == "done", err
    old = diskcache._explicit_dir
    diskcache.set_directory(tmp_path / "c")
    try:
        info = diskcache.info()
        assert 0 < info["bytes"] <= 200_000 * 1.2 and info["problem"] is None, info
    finally:
        diskcache.set_directory(old)


# ---------------------------------------------------------------------------------------------
# A bad libdevice: an error that says what to do, never a dead interpreter


LIBDEVICE_PROGRAM = textwrap.dedent("""
    import math, sys
    from gpureplace import cuda
    from gpureplace.errors import LibdeviceNotFound
    @cuda.jit
    def kern(out):
        out[0] = math.sin(out[0])
    try:
        kern.compile("void(float64[:])")
    except LibdeviceNotFound as exc:
        print("ERROR", type(exc).__name__, exc)
    else:
        print("COMPILED")
""")


def real_libdevice():
    from gpureplace.compiler.libdevice_bitcode import find_libdevice
    with open(find_libdevice(), "rb") as fh:
        return fh.read()


def run_with_libdevice(tmp_path, data, cache_on=False):
    path = tmp_path / "libdevice.10.bc"
    path.write_bytes(data)
    env = python_env(GPUREPLACE_LIBDEVICE=str(path), GPUREPLACE_CACHE_DIR=str(tmp_path / "c"),
                     GPUREPLACE_CACHE="1" if cache_on else "0")
    proc = subprocess.run([sys.executable, "-c", LIBDEVICE_PROGRAM], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, f"the interpreter died ({proc.returncode}): {proc.stderr[-2000:]}"
    return proc.stdout.strip().splitlines()[-1], str(path)


def truncated_unaligned():
    data = real_libdevice()
    return data[:len(data) // 2 + 1]


def damaged_header():
    # Eight bytes of the identification block overwritten: LLVM (as llvmlite ships it) aborts on
    # this with a failed assertion when it reads NVIDIA's 13.5 release so damaged.
    data = bytearray(real_libdevice())
    data[226:234] = bytes([126, 138, 130, 149, 37, 230, 155, 238])
    return bytes(data)


BAD_LIBDEVICE = {
    "empty": (lambda: b"", "it is empty"),
    "random bytes": (lambda: random.Random(0).randbytes(100_000), "not LLVM bitcode"),
    "a text file": (lambda: b"hello, this is not libdevice\n" * 5000, "it is a text file"),
    "LLVM IR text": (lambda: b"; ModuleID = 'x'\ntarget triple = \"nvptx64\"\n", "IR text"),
    "too small": (lambda: b"BC\xc0\xde" + bytes(60), "too small"),
    "truncated, not whole words": (truncated_unaligned, "truncated"),
    "truncated to whole words": (lambda: real_libdevice()[:len(real_libdevice()) // 8 * 4],
                                 "LLVM cannot read it"),
    "a wrapper promising more": (lambda: b"\xde\xc0\x17\x0b" + bytes(4) + (20).to_bytes(4, "little")
                                 + (10 ** 6).to_bytes(4, "little") + bytes(100_000), "truncated"),
    "damaged inside": (damaged_header, "LLVM"),
}


@pytest.mark.parametrize("kind", sorted(BAD_LIBDEVICE))
def test_a_bad_libdevice_is_an_error_naming_the_file(tmp_path, kind):
    make, reason = BAD_LIBDEVICE[kind]
    line, path = run_with_libdevice(tmp_path, make())
    assert line.startswith("ERROR LibdeviceInvalid"), line
    assert path in line and reason in line and "GPUREPLACE_LIBDEVICE" in line


def test_an_explicit_libdevice_that_is_missing_is_an_error(tmp_path):
    env = python_env(GPUREPLACE_LIBDEVICE=str(tmp_path / "nope.bc"), GPUREPLACE_CACHE="0")
    proc = subprocess.run([sys.executable, "-c", LIBDEVICE_PROGRAM], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "ERROR LibdeviceNotFound" in proc.stdout and "nope.bc" in proc.stdout


def test_a_good_copy_no_hash_vouches_for_compiles(tmp_path):
    """A libdevice no hash vouches for is parsed first in a child process, whose IR text is kept
    in the disk cache (where later processes read it, and know that the file parsed)."""
    line, _ = run_with_libdevice(tmp_path, real_libdevice(), cache_on=True)
    assert line == "COMPILED"
    assert glob.glob(str(tmp_path / "c" / "libdevice" / "text-*.ll"))
    for folder in glob.glob(str(tmp_path / "c" / "kernels" / "*")):
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
    assert run_with_libdevice(tmp_path, real_libdevice(), cache_on=True)[0] == "COMPILED"


def test_the_default_libdevice_needs_no_child_process(monkeypatch):
    """The wheel's file is vouched for by its hash: the cold path starts no process."""
    from gpureplace.compiler import libdevice_bitcode as libdevice
    if os.environ.get("GPUREPLACE_LIBDEVICE") or libdevice.explicit_path:
        pytest.skip("an explicit libdevice is set")

    def no_child(*args, **kwargs):
        raise AssertionError("a child process was started for the default libdevice")
    monkeypatch.setattr(libdevice.subprocess, "run", no_child)
    monkeypatch.setattr(libdevice, "_trusted", set())
    where, path, ident, data = libdevice._read_libdevice()
    assert libdevice._known_good(path, ident, data)


def test_bitcode_checks_accept_the_real_file():
    from gpureplace.compiler.libdevice_bitcode import bitcode_problem
    data = real_libdevice()
    assert bitcode_problem(data) is None
    wrapped = (b"\xde\xc0\x17\x0b" + bytes(4) + (20).to_bytes(4, "little")
               + len(data).to_bytes(4, "little") + bytes(4) + data)
    assert bitcode_problem(wrapped) is None


def test_damaged_libdevice_files_in_the_cache_are_misses(cache_dir):
    from gpureplace.compiler import libdevice_link as libdevice

    def defined(bitcode):          # (two prunings' bitcode may differ in bytes, not in content)
        module = libdevice.llvm.parse_bitcode(bitcode)
        return sorted(f.name for f in module.functions if not f.is_declaration)
    names, reflect = {"__nv_cosf"}, {"__CUDA_FTZ": 0}
    libdevice._pruned.clear()
    data = libdevice.pruned_bitcode(names, reflect)
    (path,) = glob.glob(str(cache_dir / "libdevice" / "pruned-*.bc"))
    for damage in (b"", b"x" * 19, b"\x00" * 20 + data, data):
        with open(path, "wb") as fh:
            fh.write(damage)
        libdevice._pruned.clear()
        assert defined(libdevice.pruned_bitcode(names, reflect)) == defined(data)
    os.unlink(path)
    os.mkdir(path)                                   # cannot be read nor written: still works
    libdevice._pruned.clear()
    assert defined(libdevice.pruned_bitcode(names, reflect)) == defined(data)
    libdevice._pruned.clear()


def test_the_cache_module_imports_by_the_name_the_readme_gives():
    proc = subprocess.run([sys.executable, "-c", "import gpureplace.cache as c, gpureplace; "
                           "assert c is gpureplace.cache and callable(c.clear); print('ok')"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT),
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
