"""Input limits (issue 22 item 7): stdin is read up to the size limit and one byte
more, and a coding declaration Python refuses is reported, not read as something else."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from xlalint.cli import app
from xlalint.linter import source as sourcefile


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str, input: bytes | str | None = None):
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


def _limit_memory() -> None:
    # Reading all of /dev/zero must fail fast here rather than take the machine's memory.
    resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))


@pytest.mark.parametrize("command", ["check", "fix"])
def test_endless_stdin_is_one_line_and_exit_2(tmp_path, command):
    with open("/dev/zero", "rb") as zero:
        done = subprocess.run(
            [sys.executable, "-m", "xlalint", command, "-"],
            stdin=zero,
            capture_output=True,
            cwd=tmp_path,
            timeout=120,
            preexec_fn=_limit_memory,
        )
    assert done.returncode == 2, done.stderr[-500:]
    [line] = done.stderr.decode().strip().splitlines()
    assert line.startswith("xlalint: error: stdin: ") and "too large" in line
    assert done.stdout == b""  # `fix -` echoes nothing it did not read whole


def test_stdin_at_the_limit_is_read_and_one_byte_more_is_not(project):
    at_limit = "x = 1\n" + "#" * (sourcefile.MAX_BYTES - 7) + "\n"
    assert len(at_limit) == sourcefile.MAX_BYTES
    assert run("check", "-", input=at_limit).exit_code == 0
    over = run("fix", "-", input=at_limit + "\n")
    assert (over.exit_code, over.stdout) == (2, "")
    assert "MiB limit" in over.stderr


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-16-be", "rot13", "hex"])
def test_a_coding_declaration_python_refuses_is_reported(project, encoding):
    source = f"# -*- coding: {encoding} -*-\nimport torch\nx = torch.ones(2).cuda()\n"
    (project / "a.py").write_text(source, encoding="ascii")
    result = run("check", "--no-cache", "--output-format", "concise", "a.py")
    assert result.exit_code == 2
    [line] = [line for line in result.stdout.splitlines() if line.startswith("a.py:")]
    assert "XLA000" in line and f"encoding problem: {encoding}" in line
    refused = subprocess.run([sys.executable, "a.py"], capture_output=True, text=True, timeout=60)
    assert "encoding problem" in refused.stderr  # as Python says


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252", "utf-8", "euc-jp", "idna"])
def test_coding_declarations_python_reads_are_read(project, encoding):
    (project / "a.py").write_text(f"# coding: {encoding}\nimport torch\nx = torch.ones(2).cuda()\n")
    result = run("check", "--no-cache", "--output-format", "concise", "a.py")
    assert result.exit_code == 1 and "XLA104" in result.stdout
