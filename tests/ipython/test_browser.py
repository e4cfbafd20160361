"""The notebooks in a real browser: JupyterLab, driven by Playwright in Debian's Chromium.

Each notebook (notebooks/*.ipynb, copied to a temporary root) is opened in JupyterLab on the
"Python 3 (gpureplace)" kernel (picked in the kernel dialog if JupyterLab asks), run with
Run All Cells, and then checked as the user sees it:

* every code cell ran, once and in order (execution counts 1..N, in the notebook's model, in the
  prompts on the page, and in the notebook file saved afterwards);
* no cell shows an error or anything on stderr (a traceback, a warning);
* every PTX listing (``%cuda_ptx``) is a ``<details>`` whose ``<summary>`` names the kernel and its
  signature and the listing's true line count, the PTX inside is that kernel's, and a long one is
  folded: its code hidden until the summary is clicked (gpureplace/ipython/render.py).

A full-page screenshot of each notebook (the viewport stretched to the whole notebook), the
executed notebook and the server's log go to $GPUREPLACE_ARTIFACTS (default:
browser-artifacts/ in the repository, git-ignored); CI keeps them.

Needs Debian's Chromium (``apt-get install chromium``: /usr/bin/chromium, or
$GPUREPLACE_CHROMIUM) and the Python packages ``playwright`` and ``jupyterlab`` (both in the test
extra); Playwright never downloads a browser here.  Without them the test is skipped, unless
GPUREPLACE_REQUIRE_BROWSER=1 (set by .ci/run), which makes it fail instead.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
KERNEL_NAME = "gpureplace"
KERNEL_DISPLAY = "Python 3 (gpureplace)"
REQUIRED = os.environ.get("GPUREPLACE_REQUIRE_BROWSER", "") not in ("", "0")
HOW = ("to run it, install Debian's Chromium (apt-get install chromium, or point "
       "GPUREPLACE_CHROMIUM at a Chromium binary) and the test extra (pip install -e '.[test]': "
       "playwright, jupyterlab); .ci/run does both")
#: the flags Chromium runs with on these machines (no GPU, no network beyond loopback)
CHROMIUM_FLAGS = ["--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-sandbox"]
#: a listing longer than this starts folded (gpureplace.ipython.render.FOLD_LINES)
FOLD_LINES = 40
#: listings a notebook must show, by their summary's title (name and signature)
EXPECTED_LISTINGS = {
    "quickstart.ipynb": {"saxpy(float32, float32[:], float32[:], float32[:])",   # SIG
                         "saxpy(float64, float32[::1], float32[::1], float32[::1])"},  # launched
}
RUN_TIMEOUT_S = 300
ARTIFACTS = Path(os.environ.get("GPUREPLACE_ARTIFACTS") or ROOT / "browser-artifacts")


def _unavailable(why):
    if REQUIRED:
        pytest.fail(f"{why}; GPUREPLACE_REQUIRE_BROWSER=1 says this test must run ({HOW})",
                    pytrace=False)
    pytest.skip(f"{why}: {HOW}")


def _chromium():
    path = os.environ.get("GPUREPLACE_CHROMIUM") or "/usr/bin/chromium"
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the JupyterLab server ------------------------------------------------------------------------

class Lab:
    def __init__(self, url, token, root, log):
        self.url, self.token, self.root, self.log = url, token, root, log

    def api(self, path):
        req = urllib.request.Request(f"{self.url}{path}",
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def log_tail(self, n=4000):
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


def _isolated_env(base):
    env = dict(os.environ)
    for var in ("JUPYTER_PATH", "JUPYTER_CONFIG_PATH", "JUPYTER_PREFER_ENV_PATH",
                "JUPYTER_TOKEN", "PYTHONSTARTUP"):
        env.pop(var, None)
    dirs = {"JUPYTER_CONFIG_DIR": "config", "JUPYTER_DATA_DIR": "data",
            "JUPYTER_RUNTIME_DIR": "runtime", "IPYTHONDIR": "ipython",
            "JUPYTERLAB_SETTINGS_DIR": "lab-settings", "JUPYTERLAB_WORKSPACES_DIR": "workspaces",
            "GPUREPLACE_CACHE_DIR": "gpureplace-cache"}
    for var, sub in dirs.items():
        (base / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(base / sub)
    env["GPUREPLACE_BACKEND"] = "simulator"
    env["PYTHONUNBUFFERED"] = "1"
    # JupyterLab's user settings: every cell attached to the page (no windowing, so that all
    # outputs are in the DOM and in the screenshot); no news or update checks (no network).
    settings = base / "lab-settings" / "@jupyterlab"
    for plugin, values in {
            "notebook-extension/tracker": {"windowingMode": "none"},
            "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    }.items():
        path = settings / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    return env


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """``jupyter lab`` on a free port of 127.0.0.1, a random token, a temporary copy of
    notebooks/ as its root, the Jupyter, IPython and gpureplace folders isolated."""
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        _unavailable("the Python package jupyterlab is not installed")
    from jupyter_client.kernelspec import KernelSpecManager
    base = tmp_path_factory.mktemp("jupyterlab")
    env = _isolated_env(base)
    root = base / "notebooks"
    root.mkdir()
    for name in NOTEBOOKS:
        shutil.copy(ROOT / "notebooks" / name, root / name)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = ARTIFACTS / "jupyterlab.log"
    token = secrets.token_hex(24)
    proc = None
    for _attempt in range(3):              # another process may take the free port first
        port = _free_port()
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
                 f"--IdentityProvider.token={token}", "--ServerApp.ip=127.0.0.1", f"--port={port}",
                 "--ServerApp.port_retries=0", f"--ServerApp.root_dir={root}",
                 "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
                 "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                env=env, cwd=str(root), stdout=fh, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
        server = Lab(f"http://127.0.0.1:{port}", token, root, log)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                server.api("/api/status")
                break
            except (urllib.error.URLError, OSError, ValueError):
                time.sleep(0.25)
        if proc.poll() is None:
            break
        if "already in use" not in server.log_tail():
            break
    if proc.poll() is not None:
        pytest.fail(f"jupyter lab exited with code {proc.returncode}:\n{server.log_tail()}")
    try:
        try:
            server.api("/api/status")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            pytest.fail(f"jupyter lab did not answer in 120 s ({exc}):\n{server.log_tail()}")
        specs = server.api("/api/kernelspecs")["kernelspecs"]
        if KERNEL_NAME not in specs:
            known = KernelSpecManager().find_kernel_specs()
            pytest.fail(f"JupyterLab does not list the {KERNEL_NAME} kernel ({sorted(specs)}; "
                        f"this Python sees {sorted(known)}): pip install -e . installs it")
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser():
    chromium = _chromium()
    if chromium is None:
        _unavailable("Chromium not found at $GPUREPLACE_CHROMIUM or /usr/bin/chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the Python package playwright is not installed")
    with sync_playwright() as pw:
        try:
            b = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_FLAGS)
        except Exception as exc:   # Playwright's own Error: a browser that does not start
            pytest.fail(f"Chromium ({chromium}) did not start under Playwright: {exc}")
        try:
            yield b
        finally:
            b.close()


# -- what the page is asked ------------------------------------------------------------------------

#: the notebook panel of ``path`` in JupyterLab's main area (window.jupyterapp is exposed by
#: --LabApp.expose_app_in_browser)
PANEL = """(path) => {
  const app = window.jupyterapp;
  if (!app || !app.shell) return null;
  return Array.from(app.shell.widgets('main')).find(w => w.context && w.context.path === path)
      || null;
}"""

KERNEL_STATE = f"""(path) => {{
  const panel = ({PANEL})(path);
  const dialog = document.querySelector('.jp-Dialog');
  const state = {{app: !!window.jupyterapp, panel: !!panel,
                 dialog: dialog ? dialog.innerText : null}};
  if (panel) {{
    const sc = panel.sessionContext;
    const kernel = sc.session && sc.session.kernel;
    state.display = sc.kernelDisplayName;
    state.kernel = kernel ? kernel.name : null;
    state.status = kernel ? kernel.status : null;
    state.connection = kernel ? kernel.connectionStatus : null;
    state.cells = panel.content.widgets.length;
    state.windowing = panel.content.notebookConfig.windowingMode;
  }}
  return state;
}}"""

RUN_ALL = f"""async ([path, ms]) => {{
  const app = window.jupyterapp;
  const panel = ({PANEL})(path);
  app.shell.activateById(panel.id);
  const ran = app.commands.execute('notebook:run-all-cells');
  const timeout = new Promise(resolve => setTimeout(() => resolve('timeout'), ms));
  return await Promise.race([ran, timeout]);
}}"""

NOTEBOOK_STATE = f"""(path) => {{
  const panel = ({PANEL})(path);
  const model = panel.content.model;
  const cells = [];
  for (let i = 0; i < model.cells.length; i++) {{
    const json = model.cells.get(i).toJSON();
    const source = Array.isArray(json.source) ? json.source.join('') : json.source;
    cells.push({{type: json.cell_type, source: source,
                count: json.execution_count === undefined ? null : json.execution_count,
                outputs: json.outputs || []}});
  }}
  const dom = panel.content.widgets.map(w => {{
    const prompt = w.node.querySelector('.jp-InputArea-prompt');
    return {{code: w.node.classList.contains('jp-CodeCell'),
             prompt: prompt ? prompt.innerText.trim() : null,
             stderr: Array.from(w.node.querySelectorAll(
                 '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'))
                 .map(o => o.innerText)}};
  }});
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return {{cells: cells, dom: dom, status: kernel ? kernel.status : null,
           dirty: panel.context.model.dirty}};
}}"""

#: each rendered listing: its cell, the summary's text, open or not, the code's text
LISTINGS = f"""(path) => {{
  const panel = ({PANEL})(path);
  const found = [];
  panel.content.widgets.forEach((w, cell) => {{
    w.node.querySelectorAll('details.gpureplace-listing').forEach((d, k) => {{
      const summary = d.querySelector(':scope > summary');
      const code = d.querySelector(':scope > div pre');
      found.push({{cell: cell, index: k, summary: summary ? summary.textContent : null,
                  open: d.open, body: code ? code.textContent : null}});
    }});
  }});
  return found;
}}"""

#: the height of the notebook's content, and how much of it the viewport shows now
NOTEBOOK_HEIGHT = f"""(path) => {{
  const panel = ({PANEL})(path);
  let node = panel.content.node;
  const outer = node.querySelector('.jp-WindowedPanel-outer') || node;
  return [outer.scrollHeight, outer.clientHeight];
}}"""

#: the left sidebar folded away, the notebook scrolled to its top
SCROLL_TOP = f"""(path) => {{
  window.jupyterapp.shell.collapseLeft();
  const panel = ({PANEL})(path);
  const outer = panel.content.node.querySelector('.jp-WindowedPanel-outer') || panel.content.node;
  outer.scrollTop = 0;
}}"""

SUMMARY = re.compile(r"^(?P<name>\w+)\((?P<args>[^()]*)\) — (?P<what>PTX|SASS|LLVM IR|typed IR), "
                     r"(?P<lines>\d+) lines?(?:, (?P<regs>\d+) registers, \d+ B shared memory)?$")


def _wait(page, script, arg, until, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    state = None
    while time.monotonic() < deadline:
        state = page.evaluate(script, arg)
        if until(state):
            return state
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; last state: "
                         f"{json.dumps(state)[:3000]}")


def _open_on_gpureplace_kernel(page, name):
    """Wait for the notebook's kernel to be the gpureplace one and idle, answering JupyterLab's
    kernel dialog with it if one comes up."""
    deadline = time.monotonic() + 180
    state = None
    while time.monotonic() < deadline:
        state = page.evaluate(KERNEL_STATE, name)
        if state["dialog"] is not None:
            select = page.locator(".jp-Dialog select")
            if select.count():
                select.select_option(label=KERNEL_DISPLAY)
            page.locator(".jp-Dialog .jp-mod-accept").click()
        elif (state["panel"] and state.get("kernel") == KERNEL_NAME
              and state.get("status") == "idle" and state.get("connection") == "connected"):
            return state
        time.sleep(0.25)
    raise AssertionError(f"{name}: the {KERNEL_NAME} kernel did not become idle in JupyterLab; "
                         f"last state: {state}")


def _screenshot(page, name):
    """The whole notebook in one picture: the viewport stretched to the notebook's height (the
    notebook scrolls inside JupyterLab's fixed-size page, so a plain full-page shot would show
    only its top)."""
    full, shown = page.evaluate(NOTEBOOK_HEIGHT, name)
    size = page.viewport_size
    height = min(size["height"] + max(full - shown, 0) + 40, 16000)
    page.set_viewport_size({"width": size["width"], "height": height})
    page.wait_for_timeout(500)              # let JupyterLab lay the taller page out
    page.evaluate(SCROLL_TOP, name)
    page.wait_for_timeout(200)
    path = ARTIFACTS / f"{Path(name).stem}.png"
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(size)
    return path


def _check_listings(page, name, state):
    """Every rendered listing is labelled with its kernel and signature, holds that kernel's
    code, and is folded when long; the summary unfolds and folds it in the browser."""
    listings = page.evaluate(LISTINGS, name)
    problems = []
    titles = set()
    for item in listings:
        where = f"cell {item['cell'] + 1}, listing {item['index'] + 1}"
        source = state["cells"][item["cell"]]["source"]
        m = SUMMARY.match((item["summary"] or "").strip())
        if m is None:
            problems.append(f"{where}: summary {item['summary']!r} does not name a signature")
            continue
        titles.add(f"{m['name']}({m['args']})")
        magic = re.search(r"^%cuda_(ptx|sass|llvm|types)\s+(\w+)", source, re.M)
        if magic is None or magic.group(2) != m["name"]:
            problems.append(f"{where}: listing of {m['name']!r} in a cell that asked for "
                            f"{magic.group(0) if magic else source!r}")
        if not m["args"]:
            problems.append(f"{where}: no argument types in {item['summary']!r}")
        body = item["body"] or ""
        lines = len(body.splitlines())
        if lines != int(m["lines"]):
            problems.append(f"{where}: summary says {m['lines']} lines, the listing has {lines}")
        if m["what"] == "PTX" and not re.search(rf"\.entry\s+{re.escape(m['name'])}\b", body):
            problems.append(f"{where}: the PTX under {item['summary']!r} has no "
                            f".entry {m['name']}")
        long = int(m["lines"]) > FOLD_LINES
        if item["open"] == long:
            problems.append(f"{where}: a {m['lines']}-line listing is "
                            f"{'open' if item['open'] else 'folded'} "
                            f"(listings over {FOLD_LINES} lines start folded)")
    assert not problems, f"{name}: listings:\n" + "\n".join(problems)

    # Folded means hidden on the page; the summary unfolds it, and folds it again.
    details = page.locator(".jp-NotebookPanel details.gpureplace-listing")
    for k, item in enumerate(listings):
        d = details.nth(k)
        code = d.locator(":scope > div")
        if item["open"]:
            assert code.is_visible(), f"{name}: open listing {item['summary']!r} is not shown"
            continue
        assert not code.is_visible(), f"{name}: folded listing {item['summary']!r} is shown"
        d.locator(":scope > summary").click()
        code.wait_for(state="visible", timeout=5000)
        assert code.inner_text().strip(), f"{name}: unfolded listing {item['summary']!r} is empty"
        d.locator(":scope > summary").click()
        code.wait_for(state="hidden", timeout=5000)
    return titles, listings


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_in_jupyterlab(name, browser, lab):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    console = []
    page.on("pageerror", lambda exc: console.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}")
            if msg.type in ("error", "warning") else None)
    page.set_default_timeout(60_000)
    stem = Path(name).stem
    try:
        page.goto(f"{lab.url}/lab/tree/{name}?reset&token={lab.token}")
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
        before = _open_on_gpureplace_kernel(page, name)
        assert before["display"] == KERNEL_DISPLAY, before
        assert before["windowing"] == "none", before     # the isolated settings were read

        started = time.monotonic()
        ran = page.evaluate(RUN_ALL, [name, RUN_TIMEOUT_S * 1000])
        assert ran != "timeout", f"{name}: Run All did not finish in {RUN_TIMEOUT_S} s"
        # The command resolves when the last cell finished (or the first failed); then the
        # kernel goes back to idle and no prompt shows a cell waiting ([*]).
        state = _wait(
            page, NOTEBOOK_STATE, name, timeout_s=60, what="the kernel to be idle after Run All",
            until=lambda s: s["status"] == "idle" and not any(
                d["prompt"] == "[*]:" for d in s["dom"]))
        elapsed = time.monotonic() - started
        print(f"{name}: Run All took {elapsed:.1f} s")

        code = [c for c in state["cells"] if c["type"] == "code"]
        errors = [(i + 1, o.get("ename"), o.get("evalue")) for i, c in enumerate(state["cells"])
                  for o in c["outputs"] if o.get("output_type") == "error"]
        stderr = [(i + 1, o.get("text")) for i, c in enumerate(state["cells"])
                  for o in c["outputs"]
                  if o.get("output_type") == "stream" and o.get("name") == "stderr"]
        shown_stderr = [(i + 1, text) for i, d in enumerate(state["dom"]) for text in d["stderr"]]
        prompts = [d["prompt"] for d in state["dom"] if d["code"]]

        titles, listings = _check_listings(page, name, state) if not errors else (set(), [])

        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function(f"() => !({PANEL})({json.dumps(name)}).context.model.dirty",
                               timeout=30_000)
    finally:
        shot = None           # a failed screenshot must not hide why the test failed
        try:
            _screenshot(page, name)
        except Exception as exc:   # Playwright's Error, or a page that lost its notebook
            shot = f"{type(exc).__name__}: {exc}"
        (ARTIFACTS / f"{stem}.console.txt").write_text("\n".join(console) + "\n")
        context.close()
    shutil.copy(lab.root / name, ARTIFACTS / f"{stem}.executed.ipynb")
    assert shot is None, f"{name}: no screenshot: {shot}"

    assert not errors, f"{name}: error outputs (cell, name, value): {errors}"
    assert ran is True, f"{name}: Run All Cells returned {ran!r} (false: a cell failed)"
    assert not stderr and not shown_stderr, \
        f"{name}: stderr in the notebook (cell, text): {stderr or shown_stderr}"
    assert [c["count"] for c in code] == list(range(1, len(code) + 1)), \
        f"{name}: execution counts {[c['count'] for c in code]}: not every cell ran once, in order"
    assert prompts == [f"[{n}]:" for n in range(1, len(code) + 1)], \
        f"{name}: the page's prompts {prompts}"

    # The notebook as saved from the browser agrees.
    saved = json.loads((lab.root / name).read_text())
    saved_code = [c for c in saved["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in saved_code] == list(range(1, len(code) + 1))
    assert not [o for c in saved_code for o in c["outputs"] if o["output_type"] == "error"]

    # PTX listings: each %cuda_ptx cell shows at least one; the expected ones are there.
    asked = [i for i, c in enumerate(state["cells"])
             if c["type"] == "code" and re.search(r"^%cuda_ptx\b", c["source"], re.M)]
    assert asked or name not in EXPECTED_LISTINGS, f"{name}: no %cuda_ptx cell"
    for i in asked:
        assert any(item["cell"] == i for item in listings), \
            f"{name}: cell {i + 1} ({state['cells'][i]['source']!r}) shows no listing"
    missing = EXPECTED_LISTINGS.get(name, set()) - titles
    assert not missing, f"{name}: listings {sorted(missing)} not shown (shown: {sorted(titles)})"
    if name in EXPECTED_LISTINGS:
        assert any(not item["open"] for item in listings), f"{name}: no folded listing"
