"""The crash run (bench/crash_run.py) on a sample: check and fix --unsafe-fixes, on
copies, files of the installed torch, torch_xla and transformers packages, plus the
examples and fixtures (which do get fixed): no crash, every fix parses and is
idempotent. The full run (every file, about 5,000) is for `python bench/crash_run.py`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_on_terminal

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = 300
# The xlalint of this checkout, whatever is installed.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@pytest.mark.slow
def test_crash_run_on_a_sample():
    pytest.importorskip("torch_xla")
    pytest.importorskip("transformers")
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "crash_run.py"), "--sample", str(SAMPLE), "--seed", "11"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=ENV,
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"files: {SAMPLE}" in result.stdout and "crash: 0" in result.stdout


@pytest.mark.slow
def test_crash_run_on_examples_and_fixtures():
    folders = [ROOT / "examples", ROOT / "tests" / "fixtures"]
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "crash_run.py"), *map(str, folders)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=ENV,
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    fixed = int(result.stdout.split("fixed: ")[1].split()[0])
    assert fixed >= 10  # the run did exercise the fixers


def test_crash_run_shows_progress_on_a_terminal_only(tmp_path):
    for i in range(3):
        (tmp_path / f"m{i}.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    argv = [sys.executable, str(ROOT / "bench" / "crash_run.py"), str(tmp_path)]
    piped = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=600)
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == "" and piped.stdout.startswith("files: 3  checked: 3")
    status, shown = run_on_terminal(argv, cwd=ROOT, env=ENV)
    assert status == 0
    assert "crash run" in shown and "3/3" in shown and "files: 3  checked: 3" in shown
