"""bench/harness.py writes its table where it is asked (--output), never over the
table tracked in the repository unless that is the file named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("torch_xla_required")

REPO = Path(__file__).resolve().parents[2]
TRACKED = REPO / "bench" / "harness_results.md"


def test_results_go_to_the_output_file_only(tmp_path):
    script = tmp_path / "tiny.py"
    script.write_text('"""XLA103 in name only."""\nimport torch\n\nprint(torch.ones(2).sum())\n')
    before = TRACKED.read_bytes()
    output = tmp_path / "results.md"
    env = {
        **os.environ,
        "PJRT_DEVICE": "CPU",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    command = [
        sys.executable,
        str(REPO / "bench" / "harness.py"),
        "--timeout",
        "300",
        "--output",
        str(output),
        str(script),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    table = output.read_text(encoding="utf-8")
    assert table.startswith("# xlalint run --compare --unsafe-fixes on the examples\n")
    assert "| tiny.py | XLA103 | " in table and table in done.stdout + "\n"
    assert TRACKED.read_bytes() == before
    assert not list(tmp_path.glob(".*.tmp"))
