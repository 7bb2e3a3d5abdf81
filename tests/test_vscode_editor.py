"""The VS Code extension in a real editor: code-server (VS Code in a browser) with the
.vsix installed, driven by headless Chromium (Debian's ``chromium`` and
``chromium-driver``, through selenium). A training script and a notebook are opened,
their diagnostics waited for, fixes applied from the editor's own menus, and the files
read back from disk.

Marked ``editor``: skipped unless ``pytest --run-editor tests/test_vscode_editor.py``.
Needs node and ``editors/vscode/node_modules`` (``npm ci`` there), code-server (on the
PATH, or ``XLALINT_CODE_SERVER``: its executable or its ``out/node/entry.js``; see
editors/vscode/README.md for an install that works with node 20), chromium, chromedriver
and selenium. Screenshots go to ``XLALINT_EDITOR_SHOTS`` (default: the test's tmp dir).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.editor

ROOT = Path(__file__).resolve().parent.parent
EXTENSION = ROOT / "editors" / "vscode"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: The example's `torch.save` (XLA201, a safe fix to `xm.save`), 1-based as the editor says.
SAVE_LINE, SAVE_COLUMN = 48, 9
#: Its training `DataLoader`: XLA202 and XLA301 start here, both with unsafe fixes only.
LOADER_LINE, LOADER_COLUMN = 33, 14
SCRIPTS = ("train.py", "docs.py", "unsafe.py")


def code_server_command() -> list[str] | None:
    given = os.environ.get("XLALINT_CODE_SERVER") or shutil.which("code-server")
    if not given or not Path(given).exists():
        return None
    return ["node", given] if given.endswith(".js") else [given]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vsix(tmp_path_factory) -> Path:
    if shutil.which("npm") is None or not (EXTENSION / "node_modules").is_dir():
        pytest.skip("needs node and editors/vscode/node_modules (npm ci)")
    out = tmp_path_factory.mktemp("vsix") / "xlalint.vsix"
    subprocess.run(["sh", "package.sh", str(out)], cwd=EXTENSION, check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("workspace")
    for name in SCRIPTS:  # one copy per test: each one's fixes stay its own
        shutil.copy(ROOT / "examples" / "checkpoint_each_epoch.py", folder / name)
    cells = [
        "import torch\nimport torch_xla\nimport torch_xla.core.xla_model as xm",
        "device = torch_xla.device()\nmodel = torch.nn.Linear(4, 2).to(device)",
        'torch.save(model.state_dict(), "model.pt")',
    ]
    notebook = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [], "source": src}
            for i, src in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (folder / "train.ipynb").write_text(json.dumps(notebook, indent=1) + "\n")
    return folder


@dataclass
class CodeServer:
    url: str
    settings: Path  # the user's settings.json, which code-server watches


@pytest.fixture(scope="module")
def code_server(vsix, workspace, tmp_path_factory):
    command = code_server_command()
    if command is None:
        pytest.skip("needs code-server (on the PATH, or XLALINT_CODE_SERVER)")
    for need in (CHROMIUM, CHROMEDRIVER):
        if not Path(need).exists():
            pytest.skip(f"needs {need}")
    pytest.importorskip("selenium")
    home = tmp_path_factory.mktemp("code-server")
    port = free_port()
    (home / "config.yaml").write_text(f"bind-addr: 127.0.0.1:{port}\nauth: none\ncert: false\n")
    (home / "data" / "User").mkdir(parents=True)
    settings = {
        # The server from this checkout, run by this test's interpreter.
        "xlalint.interpreter": sys.executable,
        "workbench.startupEditor": "none",
        "security.workspace.trust.enabled": False,
        "extensions.ignoreRecommendations": True,
        "telemetry.telemetryLevel": "off",
        "update.mode": "none",
    }
    (home / "data" / "User" / "settings.json").write_text(json.dumps(settings))
    base = [*command, "--config", str(home / "config.yaml"), "--user-data-dir", str(home / "data")]
    base += ["--extensions-dir", str(home / "extensions")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(home), "XDG_DATA_HOME": str(home)}
    installed = subprocess.run(
        [*base, "--install-extension", str(vsix)], env=env, capture_output=True, text=True, timeout=120
    )
    assert installed.returncode == 0 and "successfully installed" in installed.stdout, installed
    log = (home / "server.log").open("w")
    process = subprocess.Popen(
        [*base, "--disable-telemetry", "--disable-update-check", str(workspace)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, (home / "server.log").read_text()
                time.sleep(0.5)
        yield CodeServer(f"http://127.0.0.1:{port}/?folder={workspace}", home / "data" / "User" / "settings.json")
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("XLALINT_EDITOR_SHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Editor:
    """The workbench in headless Chromium, driven as a user would: clicks and keys."""

    def __init__(self, url: str, shots: Path) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900"):
            options.add_argument(argument)
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.shots = shots
        self.driver.get(url)
        self.wait_for(
            lambda: self.find(".monaco-workbench .explorer-folders-view .monaco-list-row"), 90, "the workbench"
        )

    def quit(self) -> None:
        self.driver.quit()

    def find(self, selector: str) -> list:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def wait_for(self, condition, seconds: float, what: str, shot: bool = True):
        """``condition()``'s first truthy answer; a screenshot on timeout unless the caller retries."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                found = condition()
            except Exception:  # the DOM changed under us: ask again
                found = None
            if found:
                return found
            time.sleep(0.5)
        if shot:
            self.shot(f"timeout-{what.replace(' ', '-')}")
        raise AssertionError(f"no {what} after {seconds} s")

    def shot(self, name: str) -> None:
        self.driver.save_screenshot(str(self.shots / f"{name}.png"))

    def keys(self, *keys: str, control: bool = False, shift: bool = False) -> None:
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys

        chain = ActionChains(self.driver)
        if control:
            chain.key_down(Keys.CONTROL)
        if shift:
            chain.key_down(Keys.SHIFT)
        chain.send_keys(*keys)
        if shift:
            chain.key_up(Keys.SHIFT)
        if control:
            chain.key_up(Keys.CONTROL)
        chain.perform()
        time.sleep(0.5)

    def open_file(self, name: str) -> None:
        rows = self.wait_for(
            lambda: [r for r in self.find(".explorer-folders-view .monaco-list-row") if r.text.strip() == name],
            30,
            f"{name} in the explorer",
        )
        rows[0].click()
        self.wait_for(lambda: [t for t in self.find(".tab.active") if name in t.text], 30, f"{name}'s tab")

    def open_notebook(self, name: str) -> None:
        """Opens a notebook in the notebook editor: clicked before the built-in ipynb
        extension has registered it, it opens as JSON text; then closed and clicked again."""
        deadline = time.monotonic() + 90
        while True:
            self.open_file(name)
            try:
                self.wait_for(
                    lambda: self.find(".notebook-editor .cell-list-container"), 10, "the notebook editor", shot=False
                )
                return
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                self.keys("w", control=True)

    def squiggles(self) -> list:
        return self.find(".squiggly-error, .squiggly-warning")

    def problems(self) -> int:
        """The status bar's count of errors and warnings."""
        item = self.find("#status\\.problems")
        return sum(int(n) for n in item[0].text.split()) if item else 0

    def run_command(self, title: str) -> None:
        from selenium.webdriver.common.keys import Keys

        self.keys(Keys.F1)
        self.wait_for(
            lambda: [i for i in self.find(".quick-input-widget .quick-input-box input") if i.is_displayed()],
            10,
            "the command palette",
        )
        self.keys(title)
        self.wait_for(
            lambda: [r for r in self.find(".quick-input-list .monaco-list-row") if title in r.text], 10, title
        )
        self.keys(Keys.ENTER)

    def go_to(self, line: int, column: int) -> None:
        from selenium.webdriver.common.keys import Keys

        self.keys("g", control=True)
        self.keys(f"{line}:{column}", Keys.ENTER)
        self.wait_for(
            lambda: [s for s in self.find("#status\\.editor\\.selection") if f"Ln {line}, Col {column}" in s.text],
            10,
            f"the cursor at {line}:{column}",
        )

    def quick_fix_titles(self, shot: bool = True) -> list[str]:
        """The quick fix menu's titles at the cursor (the menu closed again)."""
        from selenium.webdriver.common.keys import Keys

        self.keys(".", control=True)
        rows = self.wait_for(
            lambda: self.find(".action-widget .monaco-list-row.action"), 20, "the quick fix menu", shot=shot
        )
        titles = [r.get_attribute("aria-label") for r in rows]
        self.keys(Keys.ESCAPE)
        return titles

    def quick_fix(self, contains: str) -> list[str]:
        """Opens the quick fix menu at the cursor and picks the action whose title has ``contains``."""
        from selenium.webdriver.common.keys import Keys

        self.keys(".", control=True)
        rows = self.wait_for(lambda: self.find(".action-widget .monaco-list-row.action"), 20, "the quick fix menu")
        titles = [r.get_attribute("aria-label") for r in rows]
        self.shot("quick-fix-menu")
        # By keys: the menu's pointer block takes clicks.
        target = next(i for i, title in enumerate(titles) if contains in title)
        focused = next(i for i, r in enumerate(rows) if "focused" in r.get_attribute("class").split())
        step = Keys.DOWN if target > focused else Keys.UP
        for _ in range(abs(target - focused)):
            self.keys(step)
        self.keys(Keys.ENTER)
        return titles


@pytest.fixture
def editor(code_server, shots):
    editor = Editor(code_server.url, shots)
    yield editor
    editor.quit()


def test_script_diagnostics_and_quick_fix(editor, workspace):
    editor.open_file("train.py")
    editor.wait_for(editor.squiggles, 90, "xlalint's squiggles")
    # XLA201, XLA202, XLA204, XLA301, as `xlalint check examples/checkpoint_each_epoch.py` finds.
    editor.wait_for(lambda: editor.problems() == 4, 30, "four problems")
    editor.shot("script-diagnostics")
    editor.go_to(SAVE_LINE, SAVE_COLUMN)
    titles = editor.quick_fix("XLA201")
    assert any(t.startswith("xlalint (XLA201)") for t in titles), titles
    assert "xlalint: show docs for XLA201" in titles, titles
    editor.wait_for(lambda: editor.problems() == 3, 30, "the XLA201 finding gone")
    editor.keys("s", control=True)
    path = workspace / "train.py"
    editor.wait_for(lambda: "xm.save(" in path.read_text(), 20, "the fix saved")
    lines = path.read_text().splitlines()
    original = (ROOT / "examples" / "checkpoint_each_epoch.py").read_text().splitlines()
    assert original[SAVE_LINE - 1].strip().startswith("torch.save(")
    assert lines[SAVE_LINE - 1] == original[SAVE_LINE - 1].replace("torch.save(", "xm.save(")
    assert lines[: SAVE_LINE - 1] + lines[SAVE_LINE:] == original[: SAVE_LINE - 1] + original[SAVE_LINE:]
    editor.shot("script-fixed")


def test_rule_docs(editor):
    editor.open_file("docs.py")
    editor.wait_for(editor.squiggles, 90, "xlalint's squiggles")
    editor.go_to(LOADER_LINE, LOADER_COLUMN)
    editor.run_command("xlalint: Show rule docs")
    picks = editor.wait_for(
        lambda: [r.text for r in editor.find(".quick-input-list .monaco-list-row") if r.text.startswith("XLA")],
        10,
        "the rule pick",
    )
    assert sorted(picks) == ["XLA202", "XLA301"], picks
    from selenium.webdriver.common.keys import Keys

    editor.keys("XLA301", Keys.ENTER)
    editor.wait_for(lambda: [t for t in editor.find(".tab.active") if "XLA301.md" in t.text], 30, "the docs tab")
    editor.wait_for(
        lambda: [line for line in editor.find(".view-line") if "(XLA301)" in line.text], 30, "the rule's heading"
    )
    editor.shot("rule-docs")


def test_notebook_diagnostics_and_fix_all(editor, workspace):
    editor.open_notebook("train.ipynb")
    editor.wait_for(editor.squiggles, 90, "xlalint's squiggles in a cell")
    editor.wait_for(lambda: editor.problems() == 1, 30, "the notebook's one problem")
    # On the third cell (the `torch.save`), not on the others.
    cells = editor.find(".notebook-editor .cell-list-container .monaco-list-row.code-cell-row")
    marked = [bool(c.find_elements("css selector", ".squiggly-error, .squiggly-warning")) for c in cells]
    assert marked == [False, False, True], marked
    editor.shot("notebook-diagnostics")
    # Into the last cell's editor, then the extension's command.
    editor.find(".notebook-editor .cell-list-container .monaco-list-row .monaco-editor")[-1].click()
    editor.run_command("xlalint: Fix all auto-fixable problems")
    editor.wait_for(lambda: editor.problems() == 0, 30, "no problems left")
    editor.keys("s", control=True)
    path = workspace / "train.ipynb"
    editor.wait_for(lambda: "xm.save(" in path.read_text(), 20, "the fixed notebook saved")
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    assert cells[2] == 'xm.save(model.state_dict(), "model.pt")', cells
    assert [c["id"] for c in json.loads(path.read_text())["cells"]] == ["c0", "c1", "c2"]
    editor.shot("notebook-fixed")


def test_unsafe_fixes_setting(editor, code_server, workspace):
    editor.open_file("unsafe.py")
    editor.wait_for(lambda: editor.problems() == 4, 90, "four problems")
    editor.go_to(LOADER_LINE, LOADER_COLUMN)
    titles = editor.quick_fix_titles()
    assert "xlalint: show docs for XLA301" in titles, titles
    assert not any(t.startswith("xlalint (XLA301)") for t in titles), titles
    before = code_server.settings.read_text()
    try:
        # As a user does: the setting's checkbox in the Settings editor.
        editor.run_command("Preferences: Open User Settings")
        editor.wait_for(lambda: editor.find(".settings-editor .suggest-input-container"), 20, "the settings search")
        editor.keys("xlalint.unsafeFixes")
        editor.wait_for(lambda: editor.find(".setting-item-bool .setting-value-checkbox"), 20, "the checkbox")[
            0
        ].click()
        editor.wait_for(
            lambda: json.loads(code_server.settings.read_text()).get("xlalint.unsafeFixes") is True, 20, "the setting"
        )
        editor.shot("unsafe-setting")
        editor.open_file("unsafe.py")

        # The extension restarts the server with the new option; until it is up and has
        # linted the script again, the menu has no fix for XLA301.
        def offered() -> list[str] | None:
            editor.go_to(LOADER_LINE, LOADER_COLUMN)
            found = editor.quick_fix_titles(shot=False)
            return found if any(t.startswith("xlalint (XLA301)") for t in found) else None

        titles = editor.wait_for(offered, 90, "XLA301's unsafe fix offered")
        assert "xlalint (XLA301): drop the last, partial batch" in titles, titles
        editor.quick_fix("xlalint (XLA301)")
        editor.keys("s", control=True)
        path = workspace / "unsafe.py"
        editor.wait_for(lambda: "drop_last=True" in path.read_text(), 20, "the unsafe fix saved")
        assert path.read_text().splitlines()[LOADER_LINE - 1].strip() == (
            "loader = DataLoader(dataset, batch_size=32, shuffle=True, drop_last=True)"
        )
        editor.shot("unsafe-fix")
    finally:
        code_server.settings.write_text(before)
