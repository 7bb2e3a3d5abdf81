"""What every rule's whole-file fixture tests check: the fixed code is the expected
file, parses, and a second fix leaves it unchanged."""

from __future__ import annotations

import ast
from pathlib import Path

from xlalint.linter.config import Settings
from xlalint.linter.fixing import fix_source


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
