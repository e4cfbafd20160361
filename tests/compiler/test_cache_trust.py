"""What the disk cache can be trusted with: the libdevice a kernel was built from is part of its
key (found once per process, never read for a hit); a size setting gpureplace cannot read is a
warning, never a failed import; ``info()`` says why the directory is not used whenever the process
found it could not use it; a relative ``XDG_CACHE_HOME`` is ignored, as the XDG specification
asks; and a cache directory removed and replaced by a folder of the user's while the process runs
is never written to."""

import errno
import glob
import json
import os
import shutil
import sys
import textwrap
import warnings

import pytest
from conftest import python_process

from gpureplace import cuda
from gpureplace.compiler import diskcache, kernel_cache, libdevice_bitcode
from gpureplace.config import SIZE_FORMS, env_size, parse_size


@pytest.fixture
def cache_dir(tmp_path):
    """A fresh cache directory for this test, and the module's bookkeeping put back after it."""
    old = diskcache._explicit_dir
    problems, held, usable = dict(diskcache._problems), dict(diskcache._held), \
        dict(diskcache._usable)
    diskcache.set_directory(tmp_path / "cache")
    try:
        yield tmp_path / "cache"
    finally:
        diskcache.set_directory(old)
        for table, before in ((diskcache._problems, problems), (diskcache._held, held),
                              (diskcache._usable, usable)):
            table.clear()
            table.update(before)


def compile_fresh(body, sig="void(float64[:])"):
    """Compile ``body`` (a new kernel object: the disk cache is asked first); the specialisation
    and the UserWarnings said."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = cuda.jit(body).compile(sig)
    return spec, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def kernel(name, value):
    ns = {}
    exec(f"def {name}(out):\n    out[0] = {value}\n", ns)
    ns[name].__module__ = __name__
    return ns[name]


# ---------------------------------------------------------------------------------------------
# 1. The libdevice in use is part of the key


def a_wheel_libdevice():
    try:
        return libdevice_bitcode.find_libdevice()
    except Exception:
        pytest.skip("no libdevice here")


def test_the_key_names_the_libdevice_in_use(tmp_path, monkeypatch):
    import numba

    path = a_wheel_libdevice()
    copy = tmp_path / "other" / "libdevice.10.bc"
    copy.parent.mkdir()
    shutil.copy(path, copy)

    def key():
        return kernel_cache.kernel_key(kernel("trust_k", 1.0), (numba.float64[:],), None,
                                       cuda.jit(kernel("trust_k", 1.0)).context, "8.0")
    monkeypatch.setattr(libdevice_bitcode, "_key_identity", None)
    default = key()
    assert default is not None and key() == default
    monkeypatch.setenv("GPUREPLACE_LIBDEVICE", str(copy))
    other = key()
    assert other != default
    monkeypatch.setenv("GPUREPLACE_LIBDEVICE", path)
    assert key() == default                     # the same file: the same key
    monkeypatch.delenv("GPUREPLACE_LIBDEVICE")
    monkeypatch.setattr(libdevice_bitcode, "explicit_path", str(copy))
    assert key() == other
    monkeypatch.setattr(libdevice_bitcode, "explicit_path", str(tmp_path / "missing.bc"))
    assert key() not in (default, other)        # none found: a key all the same


def test_the_libdevice_is_found_once_per_process_and_never_read_for_a_key(monkeypatch):
    a_wheel_libdevice()
    found = []
    real_find = libdevice_bitcode._find

    def counting_find():
        found.append(1)
        return real_find()

    def no_read():
        raise AssertionError("the key read the libdevice file")
    monkeypatch.setattr(libdevice_bitcode, "_find", counting_find)
    monkeypatch.setattr(libdevice_bitcode, "_read_libdevice", no_read)
    monkeypatch.setattr(libdevice_bitcode, "_key_identity", None)
    first = [libdevice_bitcode.key_identity() for _ in range(5)]
    assert len(found) == 1 and len(set(first)) == 1
    assert first[0] == repr(libdevice_bitcode._identity())


def test_the_wheel_search_finds_what_the_globs_found(tmp_path, monkeypatch):
    """``_wheel_files`` lists folders where ``_candidates`` used glob: the same files, in order."""
    for folder in ("cu13", "cu12", "cu1-x", "cuda_nvcc", "", ".cu9", "other"):
        lib = tmp_path / "nvidia" / folder / "nvvm" / "libdevice"
        lib.mkdir(parents=True, exist_ok=True)
        for name in ("libdevice.10.bc", "libdevice.bc", "libdevice.10.ll", "notlibdevice.bc",
                     "libdevice-x.bc"):
            (lib / name).write_bytes(b"")
    (tmp_path / "nvidia" / "cu14").write_text("a file")
    (tmp_path / "nvidia" / "cu15" / "nvvm").mkdir(parents=True)
    (tmp_path / "nvidia" / "cu15" / "nvvm" / "libdevice").write_text("a file")
    expected = []
    for pattern in ("nvidia/cu*/nvvm/libdevice/libdevice*.bc",
                    "nvidia/cuda_nvcc/nvvm/libdevice/libdevice*.bc",
                    "nvidia/nvvm/libdevice/libdevice*.bc"):
        expected += sorted(glob.glob(os.path.join(str(tmp_path), pattern)))
    assert list(libdevice_bitcode._wheel_files(str(tmp_path))) == expected
    assert list(libdevice_bitcode._wheel_files(str(tmp_path / "other"))) == []


LIBDEVICE_PROGRAM = textwrap.dedent("""
    import math
    import gpureplace
    from gpureplace import cuda
    from gpureplace.compiler import libdevice_bitcode, libdevice_link

    read = []
    real_read, real_text = libdevice_bitcode._read_libdevice, libdevice_link._ir_text
    libdevice_bitcode._read_libdevice = lambda: (read.append(1), real_read())[1]
    libdevice_link._ir_text = lambda *a, **k: (read.append(1), real_text(*a, **k))[1]

    @cuda.jit
    def trust_libdevice_kernel(x):
        x[0] = math.sin(x[0]) + math.pow(x[0], x[1])

    ptx = trust_libdevice_kernel.compile("void(float32[:])").ptx
    print(gpureplace.stats()["disk_hits"], bool(read), "__nv_" not in ptx)
""")


def test_another_libdevice_in_a_new_process_is_a_miss(tmp_path):
    path = a_wheel_libdevice()
    copy = tmp_path / "other" / "libdevice.10.bc"
    copy.parent.mkdir()
    shutil.copy(path, copy)
    cache = str(tmp_path / "cache")

    def run(**env):
        hits, read, linked = python_process(LIBDEVICE_PROGRAM, GPUREPLACE_CACHE_DIR=cache,
                                            **env).split()
        assert linked == "True"
        return int(hits), read == "True"
    assert run() == (0, True)
    assert run() == (1, False)                  # a hit: libdevice neither read nor parsed
    assert run(GPUREPLACE_LIBDEVICE=str(copy)) == (0, True)     # (was a hit: the old PTX)
    assert run(GPUREPLACE_LIBDEVICE=str(copy)) == (1, False)
    os.utime(copy, ns=(os.stat(copy).st_atime_ns, os.stat(copy).st_mtime_ns + 10 ** 9))
    assert run(GPUREPLACE_LIBDEVICE=str(copy)) == (0, True)     # replaced in place (a reinstall)
    assert run() == (1, False)


# ---------------------------------------------------------------------------------------------
# 2. Sizes in the environment


@pytest.mark.parametrize("text, value", [
    ("268435456", 268435456), (" 1024 ", 1024), ("0", 0), ("1_000", 1000), ("1e9", 10 ** 9),
    ("1E9", 10 ** 9), ("2.5e3", 2500), ("1G", 1 << 30), ("1g", 1 << 30), ("256M", 256 << 20),
    ("256MiB", 256 << 20), ("256mib", 256 << 20), ("8k", 8192), ("8 KiB", 8192),
    ("1.5GiB", 3 << 29), (".5K", 512), ("1T", 1 << 40), ("1GB", 10 ** 9), ("2kb", 2000),
    ("5B", 5), ("1e3K", 1024000)])
def test_sizes_that_are_read(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", " ", "G", "1.5", "0.3K", "-1", "+5", "1e-3", "1e99", "inf",
                                  "nan", "1X", "1 G B", "1,000", "0x100", "1GiBs", "8k2", "e9"])
def test_sizes_that_are_not(text):
    assert parse_size(text) is None


def test_a_size_not_understood_warns_once_and_gives_the_default(monkeypatch):
    monkeypatch.setenv("GPUREPLACE_TRUST_SIZE", "lots")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert env_size("GPUREPLACE_TRUST_SIZE", 4096) == 4096
        assert env_size("GPUREPLACE_TRUST_SIZE", 4096) == 4096
    (message,) = [str(w.message) for w in caught]
    assert "GPUREPLACE_TRUST_SIZE='lots'" in message and SIZE_FORMS in message
    assert "4 KiB" in message
    for empty in ("", "  "):
        monkeypatch.setenv("GPUREPLACE_TRUST_SIZE", empty)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert env_size("GPUREPLACE_TRUST_SIZE", 4096) == 4096
    monkeypatch.setenv("GPUREPLACE_TRUST_SIZE", "2K")
    assert env_size("GPUREPLACE_TRUST_SIZE", 4096) == 2048


SIZES_PROGRAM = textwrap.dedent("""
    import gpureplace
    from gpureplace.runtime import launch
    print(gpureplace.cache.max_bytes, launch.RECURSION_STACK_BYTES)
""")


@pytest.mark.parametrize("cap, stack, expected", [
    ("1G", "16k", (1 << 30, 16384)), ("256MiB", "16KiB", (256 << 20, 16384)),
    ("1e9", "32768", (10 ** 9, 32768)), ("", "", (256 << 20, 8192))])
def test_importing_with_sizes_in_any_form(cap, stack, expected):
    out = python_process(SIZES_PROGRAM, GPUREPLACE_CACHE_MAX_BYTES=cap,
                         GPUREPLACE_RECURSION_STACK=stack)
    assert tuple(map(int, out.split())) == expected


def test_importing_with_sizes_not_understood_warns_and_imports(tmp_path):
    import subprocess

    script = tmp_path / "script.py"
    script.write_text(SIZES_PROGRAM)
    env = dict(os.environ, GPUREPLACE_CACHE_MAX_BYTES="a lot", GPUREPLACE_RECURSION_STACK="8kb2",
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(
                   os.path.abspath(__file__)))))
    for flags in ([], ["-W", "error"]):         # (warnings as errors: said, and no error)
        proc = subprocess.run([sys.executable, *flags, str(script)], capture_output=True,
                              text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == [str(256 << 20), "8192"]
        assert proc.stderr.count("UserWarning") == 2, proc.stderr
        assert "GPUREPLACE_CACHE_MAX_BYTES='a lot'" in proc.stderr
        assert "GPUREPLACE_RECURSION_STACK='8kb2'" in proc.stderr
        assert "256 MiB" in proc.stderr and "8 KiB" in proc.stderr
        if not flags:
            assert proc.stderr.count(f"{script}:2: UserWarning") == 2   # at the user's import


# ---------------------------------------------------------------------------------------------
# 3. info() says why the directory is not used


def check_not_used(reason, shell=None):
    """A compile warns once with ``reason``; info() and %cuda_cache stats give it too."""
    spec, said = compile_fresh(kernel("trust_unused_kernel", 2.0))
    assert not spec.from_disk
    (message,) = said
    assert reason in message
    assert reason in diskcache.info()["problem"]
    spec, said = compile_fresh(kernel("trust_unused_kernel", 2.0))
    assert not spec.from_disk and said == []
    assert reason in diskcache.info()["problem"]
    if shell is not None:
        from IPython.utils.capture import capture_output
        with capture_output() as cap:
            shell.run_line_magic("cuda_cache", "stats")
        assert f"disk cache: not used: {diskcache.directory()}: " in cap.stdout, cap.stdout
        assert reason in cap.stdout and "(on)" not in cap.stdout


def test_a_directory_that_cannot_be_written_is_reported(cache_dir, monkeypatch, shell):
    """An empty directory on a read-only file system: made (it exists), but its marker cannot be
    written.  (The write fails as it would there; tests/ run as root, where chmod would not.)"""
    cache_dir.mkdir(mode=0o700)
    real_write = diskcache.atomic_write

    def read_only(path, data):
        if os.path.dirname(path) == str(cache_dir):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        return real_write(path, data)
    monkeypatch.setattr(diskcache, "atomic_write", read_only)
    check_not_used(f"it cannot be written ({os.strerror(errno.EROFS)})", shell)
    assert os.listdir(cache_dir) == []
    monkeypatch.setattr(diskcache, "atomic_write", real_write)      # writable again: used
    assert compile_fresh(kernel("trust_unused_kernel", 2.0))[1] == []
    assert diskcache.info()["problem"] is None


def test_a_directory_without_write_permission_is_reported(cache_dir, tmp_path):
    probe = tmp_path / "probe"
    probe.mkdir(mode=0o500)
    try:
        (probe / "file").write_text("")
    except PermissionError:
        pass
    else:
        pytest.skip("this user writes to a directory of mode 500 (root)")
    cache_dir.mkdir(mode=0o500)
    try:
        check_not_used("it cannot be written")
        assert os.listdir(cache_dir) == []
    finally:
        os.chmod(cache_dir, 0o700)


def test_a_dangling_symbolic_link_is_named_as_one(cache_dir, tmp_path):
    os.symlink(tmp_path / "nowhere", cache_dir)
    check_not_used(f"it is a symbolic link to a missing path ({tmp_path / 'nowhere'})")
    assert not (tmp_path / "nowhere").exists()


def test_a_dangling_symbolic_link_above_it_is_named(tmp_path):
    os.symlink(tmp_path / "nowhere", tmp_path / "link")
    reason = diskcache._prepare(str(tmp_path / "link" / "cache"))
    assert reason == (f"it cannot be created ({tmp_path / 'link'} is a symbolic link to a missing "
                      f"path ({tmp_path / 'nowhere'}))")
    assert not (tmp_path / "nowhere").exists()


# ---------------------------------------------------------------------------------------------
# 4. A relative XDG_CACHE_HOME


@pytest.fixture
def default_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("GPUREPLACE_CACHE_DIR", raising=False)
    monkeypatch.setattr(diskcache, "_explicit_dir", None)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def test_a_relative_xdg_cache_home_is_ignored(default_directory, monkeypatch):
    home = default_directory / "home"
    monkeypatch.setenv("XDG_CACHE_HOME", "relcache")
    assert diskcache.directory() == str(home / ".cache" / "gpureplace")
    assert diskcache.info()["problem"] is None
    monkeypatch.setenv("XDG_CACHE_HOME", "~/xdg")       # (not absolute either)
    assert diskcache.directory() == str(home / ".cache" / "gpureplace")
    monkeypatch.setenv("XDG_CACHE_HOME", str(default_directory / "xdg"))
    assert diskcache.directory() == str(default_directory / "xdg" / "gpureplace")


def test_a_relative_home_is_named(default_directory, monkeypatch):
    monkeypatch.setenv("HOME", "relhome")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    problem = diskcache.info()["problem"]
    assert "HOME is 'relhome'" in problem and "unset" not in problem
    monkeypatch.delenv("HOME")
    monkeypatch.setattr(diskcache.os.path, "expanduser", lambda p: p)   # no passwd entry either
    assert "HOME is unset" in diskcache.info()["problem"]


# ---------------------------------------------------------------------------------------------
# 5. A directory replaced while the process runs


def replace_with_users_folder(cache_dir):
    shutil.rmtree(cache_dir)
    (cache_dir / "libdevice").mkdir(parents=True)        # the user's, by chance named so
    (cache_dir / "my_notes.txt").write_text("mine")


def users_files(cache_dir):
    return sorted(os.path.relpath(os.path.join(d, f), cache_dir)
                  for d, dirs, files in os.walk(cache_dir) for f in files + dirs)


def test_a_directory_replaced_by_the_users_folder_is_not_written(cache_dir):
    spec, said = compile_fresh(kernel("trust_replaced_1", 1.0))
    assert said == [] and (cache_dir / "CACHEDIR.TAG").exists()
    pruned = diskcache.libdevice_path("pruned-" + "0" * 40 + ".bc")
    replace_with_users_folder(cache_dir)
    before = users_files(cache_dir)
    spec, said = compile_fresh(kernel("trust_replaced_2", 2.0))
    assert not spec.from_disk
    (message,) = said
    assert str(cache_dir) in message and "already holds files that are not gpureplace's" in message
    assert users_files(cache_dir) == before
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # (warned once already)
        assert diskcache.write_file(pruned, b"x" * 100) is False
        assert compile_fresh(kernel("trust_replaced_3", 3.0))[1] == []
    assert users_files(cache_dir) == before
    assert diskcache.info()["problem"].startswith("it already holds files")


def test_a_directory_replaced_while_a_libdevice_file_is_made_is_not_written(cache_dir):
    assert diskcache.ensure_dir() == str(cache_dir)
    pruned = diskcache.libdevice_path("pruned-" + "0" * 40 + ".bc")
    replace_with_users_folder(cache_dir)
    before = users_files(cache_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert diskcache.write_file(pruned, b"x" * 100) is False
    assert len(caught) == 1 and users_files(cache_dir) == before


def test_a_directory_removed_and_made_again_empty_is_used(cache_dir):
    compile_fresh(kernel("trust_again_1", 1.0))
    shutil.rmtree(cache_dir)
    cache_dir.mkdir(mode=0o700)                          # empty: gpureplace may take it again
    spec, said = compile_fresh(kernel("trust_again_2", 2.0))
    assert said == [] and (cache_dir / "CACHEDIR.TAG").exists()
    assert compile_fresh(kernel("trust_again_2", 2.0))[0].from_disk
    json_files = glob.glob(str(cache_dir / "kernels" / "*" / "*.json"))
    with open(json_files[0]) as fh:
        assert len(json_files) == 1 and json.load(fh)["name"]
