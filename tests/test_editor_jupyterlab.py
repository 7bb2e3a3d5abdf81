"""xlalint in JupyterLab, in a real browser: JupyterLab with jupyterlab-lsp, the server
registered by the config shipped in editors/jupyterlab/, driven by headless Chromium
(Debian's chromium and chromium-driver) through selenium.

A training notebook is opened; xlalint's diagnostics must be underlined in their cells
and listed in jupyterlab-lsp's diagnostics panel; a cell edited in the browser must get
its diagnostics again (here: none). jupyterlab-lsp 5.3 has no code actions (its client
does not advertise them), so quick fixes cannot be applied from JupyterLab's UI.

Marked ``editor``: skipped unless ``pytest --run-editor`` (it takes a minute or more).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("XLALINT_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("XLALINT_CHROMEDRIVER", "/usr/bin/chromedriver")
#: Where a screenshot of each run is copied for a reader (when the folder exists).
SHOTS = os.environ.get("XLALINT_EDITOR_SHOTS", "")

pytestmark = pytest.mark.editor

CELLS = (
    ("markdown", "# Fine-tune on a TPU"),
    ("code", "!pip install torch_xla\nimport torch"),
    ("code", "model = torch.nn.Linear(4, 2).cuda()\nx = torch.ones(3, 4)"),
    ("code", "for step in range(10):\n    loss = model(x).sum()\n    loss.backward()\n    torch.cuda.synchronize()"),
)


def missing() -> str | None:
    """Why the test cannot run here; None when it can."""
    for module in ("jupyterlab", "jupyter_lsp", "jupyterlab_lsp", "selenium"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install -e '.[editor-test]')"
    for program in (CHROMIUM, CHROMEDRIVER):
        if not os.access(program, os.X_OK):
            return f"{program} is missing (apt-get install chromium chromium-driver)"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_jupyterlab(tmp_path: Path, root: Path, port: int, token: str) -> subprocess.Popen:
    """JupyterLab on ``root``, its state in ``tmp_path``, xlalint from this tree on the PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "xlalint"  # the shipped config runs `xlalint server` from the PATH
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m xlalint "$@"\n')
    shim.chmod(0o755)
    state = tmp_path / "jupyter"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        # The config shipped in the repository, as the README tells users to use it.
        "JUPYTER_CONFIG_PATH": str(ROOT / "editors" / "jupyterlab"),
        "JUPYTER_CONFIG_DIR": str(state / "config"),
        "JUPYTER_DATA_DIR": str(state / "data"),
        "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(state / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(state / "workspaces"),
    }
    argv = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}"]
    argv += [f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--LabApp.news_url=None"]
    log = (tmp_path / "jupyterlab.log").open("wb")
    return subprocess.Popen(argv, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_until(check, timeout: float, what: str, log: Path):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        result = check()
        if result:
            return result
        time.sleep(1)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n--- JupyterLab's log:\n{tail}")


# Per cell of the notebook (markdown too): the text of each xlalint underline in it.
UNDERLINES = """
return Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-Cell')).map(
  cell => Array.from(cell.querySelectorAll('.cm-lintRange')).map(mark => mark.textContent));
"""
# The rows of jupyterlab-lsp's diagnostics panel: the text of each cell of each row.
PANEL_ROWS = """
return Array.from(document.querySelectorAll('.lsp-diagnostics-listing tbody tr')).map(
  row => Array.from(row.querySelectorAll('td')).map(td => td.textContent.trim()));
"""


def test_jupyterlab_shows_xlalint_diagnostics_on_their_cells(tmp_path):
    reason = missing()
    if reason is not None:
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    root = tmp_path / "project"
    root.mkdir()
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    for kind, text in CELLS:
        notebook.cells.append(
            nbformat.v4.new_code_cell(text) if kind == "code" else nbformat.v4.new_markdown_cell(text)
        )
    nbformat.write(notebook, root / "train.ipynb")
    port, token = free_port(), "xlalint-editor-test"
    log = tmp_path / "jupyterlab.log"
    lab = start_jupyterlab(tmp_path, root, port, token)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium'}")
    driver = None
    try:
        import urllib.request

        def serving() -> bool:
            assert lab.poll() is None, f"JupyterLab exited: {log.read_text(errors='replace')[-3000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lsp/status?token={token}", timeout=5) as answer:
                    return b'"xlalint"' in answer.read()  # the shipped spec is registered
            except OSError:
                return False

        wait_until(serving, 120, "JupyterLab to serve, with xlalint's spec", log)
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        driver.get(f"http://127.0.0.1:{port}/lab/tree/train.ipynb?token={token}")

        # Open: the findings are underlined in their cells (cell 3: XLA104 on `.cuda()`;
        # cell 4: XLA103 on the loop, XLA104 on `torch.cuda.synchronize()`).
        def underlined():
            marks = driver.execute_script(UNDERLINES)
            return marks if len(marks) == 4 and marks[3] and marks[2] else None

        marks = wait_until(underlined, 180, "xlalint's underlines in cells 3 and 4", log)
        assert marks[0] == [] and marks[1] == []
        # (An underline may be drawn in pieces: their text is joined.)
        assert "".join(marks[2]) == "torch.nn.Linear(4, 2).cuda()", marks
        assert "for step in range(10)" in "".join(marks[3]) and "torch.cuda.synchronize()" in "".join(marks[3]), marks

        # The diagnostics panel (the cell's context menu opens it) lists them with their
        # codes, source and cell.
        underline = driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Cell .cm-lintRange")[-1]
        ActionChains(driver).context_click(underline).perform()
        items = wait_until(
            lambda: [
                i
                for i in driver.find_elements(By.CSS_SELECTOR, ".lm-Menu-itemLabel")
                if i.text == "Show diagnostics panel"
            ],
            30,
            "the context menu's 'Show diagnostics panel'",
            log,
        )
        items[0].click()
        rows = wait_until(lambda: driver.execute_script(PANEL_ROWS), 60, "the diagnostics panel's rows", log)
        # Columns: message, code, severity, source, cell, line:character (0-based, in the cell).
        assert sorted((row[1], row[3], row[4], row[5]) for row in rows) == [
            ("XLA103", "xlalint", "4", "0:0"),
            ("XLA104", "xlalint", "3", "0:8"),
            ("XLA104", "xlalint", "4", "3:4"),
        ], rows
        for button in driver.find_elements(By.XPATH, "//button[normalize-space()='No']"):
            button.click()  # JupyterLab's question about news, over the panel in the screenshot
        shot = tmp_path / "jupyterlab-diagnostics.png"
        driver.save_screenshot(str(shot))
        if SHOTS and Path(SHOTS).is_dir():
            shutil.copy(shot, Path(SHOTS) / shot.name)

        # Edit cell 4 in the browser (the loop replaced by one forward pass): its
        # diagnostics go, cell 3's stay.
        editors = driver.find_elements(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Cell .cm-content")
        editors[3].click()
        ActionChains(driver).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).perform()
        ActionChains(driver).send_keys("loss = model(x).sum()").perform()

        def edited():
            marks = driver.execute_script(UNDERLINES)
            return marks if len(marks) == 4 and not marks[3] and marks[2] else None

        wait_until(edited, 120, "cell 4's diagnostics to go after the edit", log)
        text = driver.execute_script(
            "return document.querySelectorAll('.jp-NotebookPanel .jp-Cell .cm-content')[3].innerText"
        )
        assert text.strip() == "loss = model(x).sum()", text
        shot = tmp_path / "jupyterlab-after-edit.png"
        driver.save_screenshot(str(shot))
        if SHOTS and Path(SHOTS).is_dir():
            shutil.copy(shot, Path(SHOTS) / shot.name)
    except BaseException:
        if driver is not None:  # what the browser showed, for the failure
            driver.save_screenshot(str(tmp_path / "jupyterlab-failure.png"))
        raise
    finally:
        if driver is not None:
            driver.quit()
        os.killpg(lab.pid, signal.SIGTERM)  # its own session: JupyterLab, its kernels and language servers
        try:
            lab.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait()
