"""Every finding's message is one short sentence, as ruff's are: at most
``MESSAGE_LIMIT`` characters as rendered. The why and the how go to the fix's title
(the ``help:`` line) and the rule's documentation (``xlalint rule XLAnnn``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlalint.engine.config import Settings
from xlalint.engine.lint import lint_source

ROOT = Path(__file__).resolve().parent.parent
MESSAGE_LIMIT = 120
SCRIPTS = sorted(
    p
    for folder in (ROOT / "tests" / "fixtures", ROOT / "examples", ROOT / "tests" / "harness" / "scripts")
    for p in folder.rglob("*.py")
)


def long_messages(paths) -> list[str]:
    found = []
    for path in paths:
        for finding in lint_source(path.read_text(), str(path), Settings(), select=["ALL"]):
            if len(finding.message) > MESSAGE_LIMIT:
                found.append(
                    f"{path.relative_to(ROOT)}:{finding.span.line} {finding.code} ({len(finding.message)}) {finding.message}"
                )
    return found


@pytest.mark.parametrize("folder", sorted({p.parent for p in SCRIPTS}), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_message_on_the_fixtures_and_examples_is_short(folder):
    assert SCRIPTS, "no scripts found"
    assert long_messages([p for p in SCRIPTS if p.parent == folder]) == []
