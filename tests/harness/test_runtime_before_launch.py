"""XLA208 for real: on torch_xla CPU, a script that starts the runtime in the parent
before `torch_xla.launch` fails in the worker; the same script with the calls moved
into the worker, as the finding advises, runs. Two short torch_xla runs (~25 s)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from xlalint.engine.config import Settings
from xlalint.engine.lint import lint_source

pytestmark = pytest.mark.usefixtures("torch_xla_required")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "XLA208"


def run_script(path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "1"}
    return subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def xla208(path: Path) -> list:
    return [f for f in lint_source(path.read_text(), str(path), Settings(), select=["XLA208"])]


def test_the_runtime_started_in_the_parent_kills_the_worker():
    script = FIXTURES / "device_in_parent.py"
    assert xla208(script)
    result = run_script(script)
    assert result.returncode != 0
    assert "Runtime is already initialized" in result.stderr
    assert "worker 0 sum" not in result.stdout


@pytest.mark.slow
def test_the_script_runs_once_the_calls_are_in_the_worker():
    script = FIXTURES / "device_in_worker.py"
    assert xla208(script) == []
    result = run_script(script)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "worker 0 of 1" in result.stdout
    assert "worker 0 sum 8.0" in result.stdout
