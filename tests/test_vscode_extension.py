"""The VS Code extension (editors/vscode/) without an editor: its node unit tests, and
the .vsix its packaging script builds. Skipped where node or the extension's
node_modules (``npm ci`` in editors/vscode) are missing, as in CI."""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

EXTENSION = Path(__file__).resolve().parent.parent / "editors" / "vscode"

pytestmark = pytest.mark.skipif(
    shutil.which("npm") is None or not (EXTENSION / "node_modules").is_dir(),
    reason="needs node and editors/vscode/node_modules (npm ci)",
)


def test_node_unit_tests():
    run = subprocess.run(["npm", "test"], cwd=EXTENSION, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "# fail 0" in run.stdout and "# pass 0" not in run.stdout, run.stdout


def test_package_builds_a_vsix_with_the_bundle(tmp_path):
    out = tmp_path / "xlalint.vsix"
    run = subprocess.run(["sh", "package.sh", str(out)], cwd=EXTENSION, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    with zipfile.ZipFile(out) as vsix:
        names = set(vsix.namelist())
        manifest = json.loads(vsix.read("extension/package.json"))
        bundle = vsix.read("extension/dist/extension.js").decode()
    # The bundle carries the language client (no node_modules in the package) and only the bundle.
    assert not any(name.startswith("extension/node_modules/") for name in names), names
    assert not any(name.startswith("extension/src/") for name in names), names
    assert "textDocument/publishDiagnostics" in bundle  # vscode-languageclient, bundled
    assert manifest["main"] == "./dist/extension.js"
    assert {c["command"] for c in manifest["contributes"]["commands"]} == {
        "xlalint.fixAll",
        "xlalint.showRuleDocs",
        "xlalint.restart",
    }
