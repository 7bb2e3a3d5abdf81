"""docs/output.md quotes what the tool prints: the quotes are checked against the real
output (a finding after the port, the fix summary, the leftover notes of a run)."""

from __future__ import annotations

import shutil
from pathlib import Path

from support import run_cli

from xlalint.engine import reporters
from xlalint.harness.cleanup import Leftovers
from xlalint.harness.results import RunResult

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "output.md").read_text(encoding="utf-8")
# The doc's quotes may wrap across lines: compare with white space folded.
FOLDED = " ".join(DOC.split())


def folded(text: str) -> str:
    return " ".join(text.split())


def test_the_readme_links_it():
    assert "(docs/output.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_after_port_marks_are_quoted_as_printed():
    assert f"`{reporters.AFTER_PORT}`" in DOC
    assert reporters.after_port_note(1).startswith("; 1 of them")
    assert folded(reporters.after_port_note(1).replace("1 of them", "K of them")[2:]) in FOLDED


def test_the_example_lines_are_what_check_and_fix_print(tmp_path):
    script = tmp_path / "cuda_port.py"
    shutil.copy(ROOT / "examples" / "cuda_port.py", script)
    check = run_cli("check", "--no-cache", "--output-format", "concise", "cuda_port.py", cwd=tmp_path)
    [after_port] = [line for line in check.stdout.decode().splitlines() if line.endswith(reporters.AFTER_PORT)]
    assert f"\n{after_port}\n" in DOC
    check_json = run_cli("check", "--no-cache", "--output-format", "json", "cuda_port.py", cwd=tmp_path)
    assert check_json.stdout.decode().count('"after_port": true') == 1
    assert "after_port" in check_json.stdout.decode() and '"after_port": false' not in check_json.stdout.decode()
    fix = run_cli("fix", "--no-cache", "--unsafe-fixes", "cuda_port.py", cwd=tmp_path)
    [summary] = [line for line in fix.stdout.decode().splitlines() if line.startswith("Found ")]
    assert f"\n{summary}\n" in DOC


def test_the_leftover_notes_are_quoted_as_printed():
    run = RunResult("fixed", "fixed", 0, 1.0, None, [], leftovers=Leftovers(killed=(4242,), not_killed=(4243,)))
    untracked = RunResult("fixed", "fixed", 0, 1.0, None, [], leftovers=Leftovers(tracked=False))
    for note in [*run.leftover_notes(), *untracked.leftover_notes()]:
        assert f"  note: {note}\n" in DOC
    assert '"leftovers": {"killed": [4242], "not_killed": [], "tracked": true}' in DOC
    assert set(run.to_json()["leftovers"]) == {"killed", "not_killed", "tracked"}


def test_the_unsafe_fix_marks_and_a_user_error_are_quoted_as_printed(tmp_path):
    from xlalint.engine.full_format import UNSAFE_FIX_NOTE

    assert f"`note: {UNSAFE_FIX_NOTE}`" in FOLDED
    assert "``H unsafe fixes available with `xlalint fix --unsafe-fixes`.``" in FOLDED
    (tmp_path / "a.py").write_text("import torch\n")
    error = run_cli("check", "--select", "XLA1O4", "a.py", cwd=tmp_path).stderr.decode().strip()
    assert f"```\n{error}\n```" in DOC
