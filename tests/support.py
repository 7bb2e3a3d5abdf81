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


def run_on_terminal(argv: list[str], cwd: Path | None = None, env: dict | None = None) -> tuple[int, str]:
    """Run ``argv`` with its stdout and stderr on a pseudo-terminal (as a user at a
    terminal would): its status and what the terminal got (\\r\\n read as \\n).
    An env value None removes that variable."""
    import pty

    environment = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
    master, slave = pty.openpty()
    process = subprocess.Popen(argv, cwd=cwd, stdout=slave, stderr=slave, env=environment)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    process.wait(timeout=600)
    return process.returncode, b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
