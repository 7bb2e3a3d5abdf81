"""Helpers shared by the test modules (imported as `support`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

CUDA_SCRIPT = textwrap.dedent(
    """\
    import torch

    model = torch.nn.Linear(4, 2).cuda()
    x = torch.ones(3, 4)
    y = model(x.cuda())
    """
)


def run_cli(*args: str, cwd: Path | None = None, stdin: str | bytes | None = None, env: dict | None = None):
    """Run the real command line in a subprocess (as a user or a hook would)."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run(
        [sys.executable, "-m", "xlalint.cli", *args],
        cwd=cwd,
        input=data,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
