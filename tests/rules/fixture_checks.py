"""What every rule's whole-file fixture tests check: where the findings are, that the
fixed code is the expected file, parses, and a second fix leaves it unchanged."""

from __future__ import annotations

import ast
from pathlib import Path

from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source
from xlalint.model import Finding


def findings_of(code: str, source: str, path: str, settings: Settings | None = None) -> list[Finding]:
    """The findings of rule ``code`` alone on ``source``."""
    return [f for f in lint_source(source, path, settings or Settings(), select=[code]) if f.code == code]


def fixture_positions(code: str, fixtures: Path, case: str) -> list[tuple[int, int, str]]:
    """The (line, column, code) of every finding of ``code`` on ``<case>.py``, columns
    1-based as reported."""
    path = fixtures / f"{case}.py"
    return [(f.span.line, f.span.col + 1, f.code) for f in findings_of(code, path.read_text(), str(path))]


def assert_fixture_fixes(code: str, fixtures: Path, case: str, unsafe: bool) -> None:
    """``<case>.py`` fixes to its expected file (``expected_fixed``)."""
    path = fixtures / f"{case}.py"
    assert_fixes_to(code, path.read_text(), str(path), expected_fixed(fixtures, case, unsafe), unsafe=unsafe)


def assert_unsafe_fixes_leave_nothing_fixable(code: str, fixtures: Path, cases) -> None:
    for case in cases:
        fixed = expected_fixed(fixtures, case, unsafe=True)
        assert not [f for f in findings_of(code, fixed, "f.py") if f.fix is not None], case


def expected_fixed(fixtures: Path, case: str, unsafe: bool) -> str:
    """``<case>.unsafe.py`` for unsafe fixes when it exists, else ``<case>.fixed.py``,
    else ``<case>.py`` itself (nothing to fix)."""
    candidates = [f"{case}.unsafe.py"] if unsafe else []
    candidates += [f"{case}.fixed.py", f"{case}.py"]
    return next((fixtures / name).read_text() for name in candidates if (fixtures / name).exists())


def assert_fixes_to(
    code: str, source: str, path: str, expected: str, *, unsafe: bool, settings: Settings | None = None
) -> str:
    settings = settings or Settings()
    result = fix_source(source, path, settings, unsafe=unsafe, select=[code])
    assert result.error is None, result.error
    assert result.source == expected
    ast.parse(result.source)
    again = fix_source(result.source, path, settings, unsafe=unsafe, select=[code])
    assert again.source == result.source, "a second fix changed the code"
    return result.source
