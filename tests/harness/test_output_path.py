"""`xlalint run --json PATH` never writes the report over the program it runs: the
script or one of its local modules, under any name, is refused before anything runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SCRIPT = "import helpers\nopen('ran', 'w').close()\n"
HELPERS = "VALUE = 1\n"


@pytest.fixture
def program(tmp_path, monkeypatch) -> Path:
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "helpers.py").write_text(HELPERS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refused(outcome, program: Path) -> str:
    assert outcome.status == 2, outcome.stderr
    assert outcome.stdout == ""
    assert (program / "train.py").read_text() == SCRIPT
    assert (program / "helpers.py").read_text() == HELPERS
    assert not (program / "ran").exists()  # refused before the script ran
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("xlalint: error: --json "), outcome.stderr
    return lines[0]


@pytest.mark.parametrize("output", ["train.py", "./train.py", "sub/../train.py"])
def test_the_script_itself(program, run_xlalint, output):
    (program / "sub").mkdir()
    line = refused(run_xlalint(Path("train.py"), fix=False, json_path=Path(output)), program)
    assert "is the script;" in line


def test_a_symlink_and_a_hard_link_to_the_script(program, run_xlalint):
    (program / "link.json").symlink_to(program / "train.py")
    os.link(program / "train.py", program / "hard.json")
    for output in ("link.json", "hard.json"):
        assert "is the script;" in refused(run_xlalint(Path("train.py"), json_path=Path(output)), program)


def test_a_local_module_of_the_script(program, run_xlalint):
    line = refused(run_xlalint(Path("train.py"), json_path=program / "helpers.py"), program)
    assert "local module" in line and "helpers.py" in line


def test_a_local_module_that_cannot_be_read_is_still_the_programs(program, run_xlalint):
    broken = b"\xff\xfe not utf-8\n"
    (program / "helpers.py").write_bytes(broken)
    outcome = run_xlalint(Path("train.py"), json_path=Path("helpers.py"))
    assert outcome.status == 2 and "local module" in outcome.stderr
    assert (program / "helpers.py").read_bytes() == broken


def test_the_command_line_as_a_user_types_it(program, xlalint_command):
    result = xlalint_command("run", "train.py", "--json", "train.py")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "xlalint: error: --json train.py is the script; write the report to another file"
    ]
    assert (program / "train.py").read_text() == SCRIPT and not (program / "ran").exists()
