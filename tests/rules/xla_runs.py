"""Run small scripts on torch_xla CPU in one child process (one torch_xla start-up
for all of them): what each printed last, or the error it raised."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_RUNNER = r"""
import contextlib, io, json, runpy, sys
outcomes = {}
for path in sys.argv[1:]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        lines = out.getvalue().strip().splitlines()
        outcomes[path] = "ok: " + (lines[-1] if lines else "")
    except Exception as error:
        outcomes[path] = f"{type(error).__name__}: {error}"
print(json.dumps(outcomes))
"""


def run_on_xla_cpu(tmp_path: Path, scripts: dict[str, str]) -> dict[str, str]:
    """``scripts``: file name -> source. Returns file name -> ``"ok: <last line printed>"``
    or ``"<Error>: <message>"``."""
    paths = []
    for name, source in scripts.items():
        (tmp_path / name).write_text(source)
        paths.append(str(tmp_path / name))
    env = {**os.environ, "PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "1"}
    run = subprocess.run(
        [sys.executable, "-c", _RUNNER, *paths], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    outcomes = json.loads(run.stdout.strip().splitlines()[-1])
    return {Path(path).name: outcome for path, outcome in outcomes.items()}
