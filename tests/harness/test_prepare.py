"""Mapping a fixed copy's lines back to the user's script, and joining findings."""

from __future__ import annotations

from pathlib import Path

from xlalint.harness.prepare import LineMap, ScriptVersion
from xlalint.model import Finding, Span

ORIGINAL = """\
import torch
for x in data:
    loss = step(x)
    print(loss.item())
print("done")
"""

FIXED = """\
import torch
import torch_xla
import torch_xla.core.xla_model as xm
for x in data:
    loss = step(x)
    xm.add_step_closure(lambda loss=loss: print(loss.item()))
    torch_xla.sync()
print("done")
"""


def test_line_map_follows_inserted_and_rewritten_lines():
    line_map = LineMap(ORIGINAL, FIXED)
    assert line_map.original_line(1) == 1
    assert line_map.original_line(4) == 2  # `for` moved down by two inserted imports
    assert line_map.original_line(5) == 3
    assert line_map.original_line(6) == 4  # the rewritten print is the user's line 4
    assert line_map.is_from_fix(6) and line_map.is_from_fix(2)
    assert line_map.original_line(7) == 4  # the inserted sync: just after line 4
    assert line_map.is_from_fix(7)
    assert line_map.original_line(8) == 5 and not line_map.is_from_fix(8)


def _finding(code: str, line: int, end_line: int | None = None) -> Finding:
    span = Span(line, 4, end_line or line, 20)
    return Finding(code=code, name=code.lower(), message="m", path="t.py", span=span)


def test_code_at_joins_the_finding_on_the_line_not_the_enclosing_loop():
    version = ScriptVersion(
        label="original",
        run_path=Path("t.py"),
        source=ORIGINAL,
        findings=[_finding("XLA103", 2, 40), _finding("XLA102", 4), _finding("XLA101", 7, 9)],
    )
    assert version.code_at(4) == "XLA102"
    assert version.code_at(2) == "XLA103"  # a block joins its first line only
    assert version.code_at(3) is None
    assert version.code_at(8) == "XLA101"  # a multi-line call joins each of its lines
    assert version.source_line(4) == "print(loss.item())"


def test_a_line_the_fix_added_in_a_rewritten_block_is_inserted_not_the_users_line():
    """Issue 30: the sync added after a rewritten print mapped to the print's line, so
    the report named the user's line 4 for code that is not there."""
    line_map = LineMap(ORIGINAL, FIXED)
    assert not line_map.is_inserted(6)  # the print, rewritten: the user's line 4
    assert line_map.is_inserted(7)  # torch_xla.sync(): the fix's, after line 4


def test_a_line_inserted_before_a_rewritten_one_does_not_take_its_place():
    original = "a = 1\nmodel = Net().cuda()\nb = 2\n"
    fixed = "a = 1\ndevice = torch_xla.device()\nmodel = Net().to(device)\nb = 2\n"
    line_map = LineMap(original, fixed)
    assert line_map.is_inserted(2) and line_map.original_line(2) == 1
    assert not line_map.is_inserted(3) and line_map.original_line(3) == 2
    assert line_map.is_from_fix(3) and line_map.original_line(4) == 3
