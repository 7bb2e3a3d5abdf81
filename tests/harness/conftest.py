"""Fixtures for the harness tests: run `xlalint run` in this process or as a command.

Tests that need torch_xla use the `torch_xla_required` fixture: skipped only when
torch_xla is not installed (CI installs it). The check uses find_spec, so the test
process itself never imports torch. (Helpers are fixtures, not imports: `tests/` has
another conftest module.)
"""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from xlalint.harness.session import RunOptions, run, run_harness

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SCRIPTS = Path(__file__).resolve().parent / "scripts"


@pytest.fixture
def torch_xla_required() -> None:
    if importlib.util.find_spec("torch_xla") is None:
        pytest.skip("torch_xla is not installed")


@pytest.fixture
def examples_dir() -> Path:
    return EXAMPLES


@pytest.fixture
def scripts_dir() -> Path:
    return SCRIPTS


@dataclass
class Outcome:
    status: int
    stdout: str
    stderr: str


@pytest.fixture
def run_xlalint():
    """``run_xlalint(script, **RunOptions fields) -> Outcome``, in this process."""

    def run_it(script: Path, **options) -> Outcome:
        stdout, stderr = io.StringIO(), io.StringIO()
        status = run(RunOptions(script=Path(script), **options), stdout=stdout, stderr=stderr)
        return Outcome(status, stdout.getvalue(), stderr.getvalue())

    return run_it


@pytest.fixture
def harness_report():
    """``harness_report(script, **RunOptions fields) -> HarnessReport``, in this process."""

    def report_for(script: Path, **options):
        return run_harness(RunOptions(script=Path(script), **options), io.StringIO())

    return report_for


@pytest.fixture
def xlalint_command():
    """``xlalint_command(*args, env=None)``: the real command line, as a user runs it."""
    return _xlalint_command


@pytest.fixture
def wait_until_gone():
    """``wait_until_gone(pid) -> bool``: the process has ended (within 10 s)."""
    return _wait_until_gone


def _xlalint_command(*args: str, env: dict | None = None, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", "xlalint.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _process_alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_until_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _process_alive(pid):
            return True
        time.sleep(0.1)
    return False
