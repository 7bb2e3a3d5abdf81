"""Mapping a fixed copy's lines back to the user's script, and joining findings."""

from __future__ import annotations

from pathlib import Path

from xlalint.harness.prepare import LineMap, ScriptVersion
from xlalint.linter.model import Finding, Span

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
