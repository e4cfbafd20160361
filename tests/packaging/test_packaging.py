"""Packaging: the Jupyter kernelspec, the demo, and the CI entry point."""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import assemble, has_gpu

ROOT = Path(__file__).resolve().parents[2]
KERNEL_JSON = ROOT / "jupyter-config" / "kernels" / "gpureplace" / "kernel.json"
CI_RUN = ROOT / ".ci" / "run"
DEMO = ROOT / "examples" / "demo.py"
TEST_INSTALL = "pip install -e '.[test]'"


def _env_with_repo_on_path():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in
                                         env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


# -- (a) the kernelspec --------------------------------------------------------------------------

def test_kernelspec_starts_ipykernel_with_the_extension():
    spec = json.loads(KERNEL_JSON.read_text())
    assert spec["display_name"] == "Python 3 (gpureplace)"
    assert spec["language"] == "python"
    # "python" is replaced by the interpreter running Jupyter, as in ipykernel's own kernelspec.
    assert spec["argv"] == ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}",
                            "--ext=gpureplace"]


def test_pyproject_ships_the_kernelspec_as_shared_data():
    tomllib = pytest.importorskip("tomllib")         # Python >= 3.11
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data_files = project["tool"]["setuptools"]["data-files"]
    assert data_files["share/jupyter/kernels/gpureplace"] == [
        "jupyter-config/kernels/gpureplace/kernel.json"]
    extras = project["project"]["optional-dependencies"]
    assert any(r.startswith("ipykernel") for r in extras["test"])
    assert any(r.startswith("nvidia-nvvm") for r in extras["cuda13"])
    # setup.py makes editable installs (pip install -e .) install data files too.
    assert "install_data" in (ROOT / "setup.py").read_text()


def _installed_distribution():
    """The pip-installed gpureplace (pip writes INSTALLER), not a gpureplace.egg-info that a build
    left in the source tree (which comes first on sys.path when tests run from the repo root)."""
    from importlib import metadata
    for dist in metadata.distributions(name="gpureplace"):
        if dist.read_text("INSTALLER") is not None:
            return dist
    return None


def test_installed_package_provides_the_jupyter_kernel():
    """After `pip install .` or `pip install -e .` Jupyter finds "Python 3 (gpureplace)"."""
    dist = _installed_distribution()
    if dist is None:
        pytest.skip("gpureplace is not pip-installed here (tests run from the source tree)")
    files = [str(f) for f in (dist.files or [])]
    hits = [f for f in files if f.replace("\\", "/").endswith(
        "share/jupyter/kernels/gpureplace/kernel.json")]
    assert hits, (f"the installed gpureplace ({dist.version}) has no "
                  f"share/jupyter/kernels/gpureplace/kernel.json; its files: {files}")
    installed = Path(dist.locate_file(hits[0])).resolve()
    assert installed.is_file(), f"{installed} is listed in RECORD but missing"
    assert json.loads(installed.read_text()) == json.loads(KERNEL_JSON.read_text())

    kernelspec = pytest.importorskip("jupyter_client.kernelspec")
    spec = kernelspec.KernelSpecManager().get_kernel_spec("gpureplace")
    assert spec.display_name == "Python 3 (gpureplace)"
    assert "--ext=gpureplace" in spec.argv


def test_kernel_from_the_kernelspec_loads_the_extension(tmp_path):
    """Start a real kernel from kernel.json and ask it whether the extension is loaded."""
    pytest.importorskip("ipykernel")
    pytest.importorskip("jupyter_client")
    if importlib.util.find_spec("gpureplace.ipython.extension") is None:
        pytest.skip("gpureplace.ipython.extension does not exist yet")
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    kdir = tmp_path / "kernels" / "gpureplace"
    kdir.mkdir(parents=True)
    (kdir / "kernel.json").write_text(KERNEL_JSON.read_text())
    ksm = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])
    km = KernelManager(kernel_name="gpureplace", kernel_spec_manager=ksm)
    env = _env_with_repo_on_path()
    env["IPYTHONDIR"] = str(tmp_path / "ipython")      # no user profile config leaks in
    km.start_kernel(env=env, cwd=str(tmp_path))
    kc = km.client()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        reply = kc.execute_interactive(
            "import sys", timeout=120,
            user_expressions={"loaded": "'gpureplace' in get_ipython().extension_manager.loaded",
                              "argv": "sys.argv"})
        content = reply["content"]
        assert content["status"] == "ok", content
        expr = content["user_expressions"]
        assert expr["loaded"]["data"]["text/plain"] == "True", expr
        assert "--ext=gpureplace" in expr["argv"]["data"]["text/plain"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# -- (b) the demo ----------------------------------------------------------------------------------

def test_demo_compiles_saxpy_and_reports_the_gpu():
    proc = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True,
                          env=_env_with_repo_on_path(), cwd=str(ROOT), timeout=600,
                          stdin=subprocess.DEVNULL)
    out = proc.stdout
    assert proc.returncode == 0, f"demo failed:\n{out}\n{proc.stderr}"
    assert ".entry saxpy" in out
    # The printed PTX is real PTX: ptxas accepts it.
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("//"))
    end = max(i for i, l in enumerate(lines) if l.strip() == "}")
    assemble("\n".join(lines[start:end + 1]))
    if has_gpu():
        assert lines[-1].endswith(": ok"), out[-2000:]
    else:
        assert "no gpu was found" in out.lower(), out[-2000:]
        assert "not launched" in out


# -- (c) the CI entry point ---------------------------------------------------------------------

def test_ci_run_is_an_executable_bash_script():
    mode = CI_RUN.stat().st_mode
    assert mode & stat.S_IXUSR, ".ci/run is not executable (chmod +x .ci/run)"
    text = CI_RUN.read_text()
    assert text.startswith("#!/usr/bin/env bash") or text.startswith("#!/bin/bash")
    # CI installs exactly as README's test command says.
    assert TEST_INSTALL in text
    assert TEST_INSTALL in (ROOT / "README.md").read_text()


def _ci(tmp_path, *pytest_args):
    env = dict(os.environ)
    env["GPUREPLACE_CI_PYTHON"] = sys.executable       # no venv, no install: just the verdict
    for var in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        env.pop(var, None)
    return subprocess.run(["bash", str(CI_RUN), "-p", "no:cacheprovider", *map(str, pytest_args)],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path),
                          timeout=300, stdin=subprocess.DEVNULL)


def test_ci_run_fails_when_pytest_collects_no_tests(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "test_nothing.py").write_text("# no tests here\n")
    proc = _ci(tmp_path, empty)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "collected no tests" in proc.stderr


def test_ci_run_fails_when_a_test_fails(tmp_path):
    (tmp_path / "test_bad.py").write_text("def test_bad():\n    assert 1 == 2\n")
    proc = _ci(tmp_path, tmp_path / "test_bad.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 failed" in proc.stdout


def test_ci_run_passes_and_prints_the_summary(tmp_path):
    (tmp_path / "test_good.py").write_text("def test_good():\n    assert 1 + 1 == 2\n")
    proc = _ci(tmp_path, tmp_path / "test_good.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_cuda_start_at_import_is_opt_in(monkeypatch):
    from gpureplace.runtime import warmup
    monkeypatch.delenv("GPUREPLACE_EAGER_INIT", raising=False)
    monkeypatch.delenv("GPUREPLACE_BACKEND", raising=False)
    assert not warmup.enabled()                  # nothing touches the GPU at import by default
    monkeypatch.setenv("GPUREPLACE_EAGER_INIT", "1")
    assert warmup.enabled()
    monkeypatch.setenv("GPUREPLACE_BACKEND", "simulator")
    assert not warmup.enabled()


def _imports_of(path, package):
    """(line, module, names) of every import of gpureplace in ``path``, function bodies
    included (deferred imports are not checked by importing the module that holds them)."""
    import ast
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "gpureplace":
                yield node.lineno, target, [a.name for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "gpureplace":
                    yield node.lineno, alias.name, []


def test_every_import_of_gpureplace_resolves():
    """A module moved or renamed leaves no import behind that names its old place, also not one
    inside a function that only a GPU run, an option or an error path would reach."""
    import importlib
    broken = []
    for top in ("gpureplace", "tests", "bench", "examples"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            package = ".".join(parts if rel.name == "__init__" else parts[:-1])
            for line, target, names in _imports_of(path, package):
                try:
                    module = importlib.import_module(target)
                except ImportError as exc:
                    broken.append(f"{path.relative_to(ROOT)}:{line}: {target} ({exc})")
                    continue
                for name in names:
                    if not hasattr(module, name):
                        try:
                            importlib.import_module(f"{target}.{name}")
                        except ImportError:
                            broken.append(f"{path.relative_to(ROOT)}:{line}: {target} has no "
                                          f"{name}")
    assert not broken, "\n".join(broken)


def test_the_cuda_namespace_lists_every_name_of_the_language_and_host_api():
    """gpureplace.cuda imports each name explicitly (greppable); none of an intrinsics module's
    or the host API's exports is left out, and each is the object defined there."""
    from gpureplace import cuda, hostapi
    from gpureplace.compiler.intrinsics import registry
    missing = []
    for module in [*registry.language_modules(), hostapi]:
        for name in module.__all__:
            if getattr(cuda, name, None) is not getattr(module, name):
                missing.append(f"{module.__name__}.{name}")
    assert not missing, missing
    assert cuda.random.create_xoroshiro128p_states and cuda.libdevice.sinf
