"""The versions of the script that get run: the user's file, a fixed copy, a CUDA baseline.

A copy is written to a temporary folder under the script's own file name; the user's
file is only read. Each version carries the lint findings of its own source (causes
are joined to findings by the line in the code that actually ran) and a map from its
lines back to the user's file, so every reported ``file:line`` points into the user's
script.
"""

from __future__ import annotations

import difflib
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xlalint.linter.model import Finding

# When a finding spans several lines (a multi-line call), a cause on any of them joins
# it; spans longer than this are whole blocks (a loop, a def) and join only their
# first line, or every cause inside a loop would take the loop's code.
_MAX_JOIN_SPAN_LINES = 10


def read_source(path: Path) -> tuple[str, str]:
    """The script's text and encoding, decoded as Python would (coding cookie, BOM)."""
    with tokenize.open(path) as file:
        return file.read(), file.encoding


class LineMap:
    """Lines of a changed copy -> lines of the user's file (both 1-based).

    Unchanged lines map exactly; a line of a rewritten statement maps to the same
    offset in the statement it replaced; a line the fix inserted maps to the user's
    line just before the insertion. Rewritten and inserted lines are marked as coming
    from the fix; inserted lines have no line of their own in the user's file (the
    report shows them as lines of the fixed copy, not as their neighbour).
    """

    def __init__(self, original: str, changed: str) -> None:
        self._to_original: dict[int, int] = {}
        self._from_fix: set[int] = set()
        self._inserted: set[int] = set()
        old, new = original.splitlines(), changed.splitlines()
        matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            for j in range(j1, j2):
                if tag == "equal":
                    self._to_original[j + 1] = i1 + (j - j1) + 1
                elif tag == "replace":
                    self._to_original[j + 1] = i1 + min(j - j1, i2 - i1 - 1) + 1
                    self._from_fix.add(j + 1)
                elif tag == "insert":
                    self._to_original[j + 1] = max(i1, 1)
                    self._from_fix.add(j + 1)
                    self._inserted.add(j + 1)

    def original_line(self, line: int) -> int:
        return self._to_original.get(line, line)

    def is_from_fix(self, line: int) -> bool:
        return line in self._from_fix

    def is_inserted(self, line: int) -> bool:
        return line in self._inserted


@dataclass
class ScriptVersion:
    """One thing the harness runs."""

    label: str  # "original" | "fixed": the key in the JSON report's "runs"
    run_path: Path  # the file the child executes
    source: str
    findings: list[Finding]  # lint findings of `source`, positions in `source`
    line_map: LineMap | None = None  # None: `run_path` is the user's own file
    description: str = ""  # e.g. "original + XLA104 device fixes"
    applied: list[Finding] = field(default_factory=list)
    fix_error: str | None = None
    #: Run as plain PyTorch on the GPU, without XLA (the baseline of --device cuda --compare).
    native: bool = False

    def user_line(self, line: int) -> int:
        return self.line_map.original_line(line) if self.line_map else line

    def is_fixed_line(self, line: int) -> bool:
        return bool(self.line_map and self.line_map.is_from_fix(line))

    def is_inserted_line(self, line: int) -> bool:
        """The fix added this line: no line of the user's file corresponds to it."""
        return bool(self.line_map and self.line_map.is_inserted(line))

    def code_at(self, line: int) -> str | None:
        """The code of the finding reported on ``line`` of this version's source."""
        best = None
        for finding in self.findings:
            span = finding.span
            extent = span.end_line - span.line
            on_line = span.line == line or (span.line <= line <= span.end_line and extent < _MAX_JOIN_SPAN_LINES)
            if on_line and (best is None or extent < best[0]):
                best = (extent, finding.code)
        return best[1] if best else None

    def source_line(self, line: int) -> str:
        lines = self.source.splitlines()
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def lint(source: str, display_path: str, select: list[str] | None = None) -> list[Finding]:
    from xlalint.linter.api import lint_source

    return list(lint_source(source, display_path, select=select))


def original_version(script: Path, source: str, display_path: str) -> ScriptVersion:
    return ScriptVersion(
        label="original",
        run_path=script.resolve(),
        source=source,
        findings=lint(source, display_path),
        description="original",
    )


def fixed_copy(
    script: Path,
    source: str,
    display_path: str,
    workdir: Path,
    *,
    encoding: str,
    label: str,
    folder: str,
    unsafe: bool,
    select: list[str] | None = None,
    description: str,
) -> ScriptVersion:
    """Fix ``source`` (config is found from the user's path) into ``workdir/folder``."""
    from xlalint.linter.api import fix_source

    result = fix_source(source, display_path, unsafe=unsafe, select=select)
    fixed = result.source if not result.error else source
    if fixed == source:
        # Nothing changed: run the user's own file (its real __file__ and path).
        run_path, line_map = script.resolve(), None
    else:
        run_path, line_map = workdir / folder / script.name, LineMap(source, fixed)
        run_path.parent.mkdir(parents=True, exist_ok=True)
        # The same encoding (a coding cookie must stay true) and newline style.
        run_path.write_text(fixed, encoding=encoding, newline="")
    return ScriptVersion(
        label=label,
        run_path=run_path,
        source=fixed,
        findings=lint(fixed, display_path),
        line_map=line_map,
        description=description,
        applied=list(result.applied) if not result.error else [],
        fix_error=result.error,
    )


def uses_cuda(findings: list[Finding]) -> bool:
    return any(f.code == "XLA104" for f in findings)
