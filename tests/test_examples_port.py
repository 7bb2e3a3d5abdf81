"""`xlalint fix --unsafe-fixes` ports every example: the result parses, a second fix
changes nothing, no finding with a fix is left, and the CUDA script runs on torch_xla."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import run_cli

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py"))


def test_there_are_examples_for_every_card_rule():
    from xlalint.engine.api import lint_source

    codes = {f.code for name in SCRIPTS for f in lint_source((EXAMPLES / name).read_text(), str(EXAMPLES / name))}
    assert {"XLA101", "XLA102", "XLA103", "XLA104", "XLA105", "XLA106"} <= codes


@pytest.mark.parametrize("name", SCRIPTS)
def test_unsafe_fix_parses_and_is_idempotent(tmp_path, name):
    shutil.copy(EXAMPLES / "xlalint.toml", tmp_path / "xlalint.toml")
    script = tmp_path / name
    shutil.copy(EXAMPLES / name, script)
    first = run_cli("fix", "--unsafe-fixes", "--no-cache", name, cwd=tmp_path)
    assert first.returncode in (0, 1), first.stderr.decode()
    fixed = script.read_text()
    ast.parse(fixed)
    assert fixed != (EXAMPLES / name).read_text()
    again = run_cli("fix", "--unsafe-fixes", "--no-cache", "--output-format", "json", name, cwd=tmp_path)
    assert script.read_text() == fixed
    import json

    remaining = json.loads(again.stdout)
    assert [f for f in remaining if f["fix"] is not None] == []


@pytest.mark.slow
def test_ported_cuda_script_runs_on_torch_xla_cpu(tmp_path):
    pytest.importorskip("torch_xla")
    script = tmp_path / "cuda_port.py"
    shutil.copy(EXAMPLES / "cuda_port.py", script)
    assert run_cli("check", "--select", "XLA103,XLA104", "cuda_port.py", cwd=tmp_path).returncode == 1
    assert run_cli("fix", "--unsafe-fixes", "cuda_port.py", cwd=tmp_path).returncode == 0
    assert run_cli("check", "--select", "XLA103,XLA104", "cuda_port.py", cwd=tmp_path).returncode == 0
    env = {**os.environ, "PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "1"}
    run = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "loss" in run.stdout
