"""A failed write is an error (issue 40 §3): `xlalint check c.py > /dev/full` was a
traceback and exit 1 ("findings") even for a clean file; a report written to a file
on a full disk was left empty."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from xlalint import output
from xlalint.harness import report as harness_report

FULL_DISK = "xlalint: error: cannot write to standard output: No space left on device\n"


def xlalint_to_dev_full(*args: str, cwd) -> subprocess.CompletedProcess:
    with open("/dev/full", "w") as full:
        return subprocess.run(
            [sys.executable, "-m", "xlalint.cli", *args],
            cwd=cwd,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )


@pytest.mark.parametrize(
    "args",
    [
        ["check", "clean.py"],
        ["check", "port.py"],
        ["check", "port.py", "--output-format", "json"],
        ["check", "port.py", "--output-format", "sarif"],
        ["check", "clean.py", "--output-format", "sarif"],
        ["check", "port.py", "--statistics"],
        ["fix", "port.py", "--diff"],
        ["rule", "XLA104"],
        ["--help"],
    ],
)
def test_a_failed_write_to_standard_output_is_one_line_and_exit_2(tmp_path, args):
    (tmp_path / "clean.py").write_text("x = 1\n")
    (tmp_path / "port.py").write_text("import torch\n\nx = torch.ones(3).cuda()\n")
    done = xlalint_to_dev_full(*args, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.endswith(FULL_DISK)  # `fix` says what it would fix first
    assert "Traceback" not in done.stderr and done.stderr.count("xlalint: error:") == 1
    assert (tmp_path / "port.py").read_text().endswith(".cuda()\n")  # --diff writes nothing


def full_disk(fd):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_report_file_on_a_full_disk_keeps_the_old_report(tmp_path, monkeypatch):
    path = tmp_path / "report.json"
    path.write_text('{"old": true}\n')
    os.chmod(path, 0o640)

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        output.write_report(path, '{"new": true}\n')
    assert path.read_text() == '{"old": true}\n'
    assert os.listdir(tmp_path) == ["report.json"]  # no temporary file left
    monkeypatch.undo()
    output.write_report(path, '{"new": true}\n')
    assert path.read_text() == '{"new": true}\n' and (os.stat(path).st_mode & 0o777) == 0o640


def test_run_json_on_a_full_disk_keeps_the_old_report(tmp_path, monkeypatch):
    path = tmp_path / "run.json"
    path.write_text('{"old": true}\n')
    monkeypatch.setattr(harness_report, "to_json", lambda report: {"new": True})
    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        harness_report.write_json(None, path)
    assert path.read_text() == '{"old": true}\n'


def test_a_report_to_dev_full_fails_rather_than_passing_for_written():
    with pytest.raises(OSError, match="No space left"):
        output.write_report("/dev/full", "{}\n")
