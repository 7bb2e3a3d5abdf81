"""Input limits (issue 22 item 7): stdin is read up to the size limit and one byte
more, and a coding declaration Python refuses is reported, not read as something else."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from xlalint.cli import app
from xlalint.engine import memory
from xlalint.engine import source as sourcefile


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str, input: bytes | str | None = None):
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


def _limit_memory() -> None:
    # Reading all of /dev/zero must fail fast here rather than take the machine's memory.
    resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))


def test_endless_stdin_is_one_line_and_exit_2(tmp_path):
    with open("/dev/zero", "rb") as zero:
        done = subprocess.run(
            [sys.executable, "-m", "xlalint", "check", "-"],
            stdin=zero,
            capture_output=True,
            cwd=tmp_path,
            timeout=120,
            preexec_fn=_limit_memory,
        )
    assert done.returncode == 2, done.stderr[-500:]
    [line] = done.stderr.decode().strip().splitlines()
    assert line.startswith("xlalint: error: stdin: ") and "too large" in line
    assert done.stdout == b""


def test_fix_gives_stdin_over_the_limit_back_unchanged(tmp_path):
    """Issue 29 item 7: an editor using `fix -` as a filter gets its buffer back, not
    an empty one; the error goes to stderr."""
    data = b"import torch\nx = torch.ones(2).cuda()\n" + b"#" * (sourcefile.MAX_BYTES + 3 * 2**20) + b"\n"
    done = subprocess.run(
        [sys.executable, "-m", "xlalint", "fix", "-"], input=data, capture_output=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 2
    assert done.stdout == data
    [line] = done.stderr.decode().strip().splitlines()
    assert line.startswith("xlalint: error: stdin: ") and "too large" in line


def test_fix_streams_endless_stdin_back_in_bounded_memory(tmp_path):
    """Given back as it comes, not gathered first: 4x the limit of /dev/zero passes
    through under a 2 GiB address-space limit, and closing the pipe ends the run."""
    with open("/dev/zero", "rb") as zero:
        process = subprocess.Popen(
            [sys.executable, "-m", "xlalint", "fix", "-"],
            stdin=zero,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            preexec_fn=_limit_memory,
        )
    wanted, got = 4 * sourcefile.MAX_BYTES, 0
    while got < wanted:
        chunk = process.stdout.read(min(1 << 20, wanted - got))
        assert chunk and chunk.count(0) == len(chunk)
        got += len(chunk)
    process.stdout.close()
    assert process.wait(timeout=60) == 2
    stderr = process.stderr.read().decode()
    assert "too large" in stderr and "Traceback" not in stderr and "BrokenPipe" not in stderr


def test_fix_gives_stdin_back_on_a_config_error(project):
    (project / "xlalint.toml").write_text("select = [1]\n")
    result = run("fix", "-", input=b"x = torch.ones(2).cuda()\n")
    assert (result.exit_code, result.stdout_bytes) == (2, b"x = torch.ones(2).cuda()\n")
    assert "must be a list of strings" in result.stderr


def test_stdin_at_the_limit_is_read_and_one_byte_more_is_not(project, monkeypatch):
    at_limit = "x = 1\n" + "#" * (sourcefile.MAX_BYTES - 7) + "\n"
    assert len(at_limit) == sourcefile.MAX_BYTES
    # Its check takes more than the default memory budget holds (``engine/memory.py``).
    with monkeypatch.context() as patch:
        patch.setenv("XLALINT_MEMORY_BUDGET", "16G")
        memory.budget.cache_clear()
        try:
            assert run("check", "-", input=at_limit).exit_code == 0
        finally:
            memory.budget.cache_clear()
    over = run("fix", "-", input=at_limit + "\n")
    assert (over.exit_code, over.stdout) == (2, at_limit + "\n")
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
