"""Every finding's message is one short sentence, as ruff's are: at most
``MESSAGE_LIMIT`` characters as rendered. The why and the how go to the fix's title
(the ``help:`` line) and the rule's documentation (``xlalint rule XLAnnn``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlalint.engine.config import Settings
from xlalint.engine.lint import lint_source
from xlalint.rules._messages import MESSAGE_LIMIT

ROOT = Path(__file__).resolve().parent.parent
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


# -- the messages built from tables and lists, at their longest ---------------------------
LONG_NAME = "a_twenty_char_name_x"  # a realistic long name (20 characters)


def test_every_cuda_api_row_spelled_at_its_longest_is_short():
    """XLA104's table: each row's message, with its placeholders spelled as a fix writes
    them (`xm`, `xr`: the aliases `ctx.reference` prefers) at the latest version, and the
    longest name of the rows that share the message."""
    from xlalint.rules._cuda_api import ACCELERATOR_API, CUDA_API

    spelled = {
        "{xm}": "xm",
        "{xr}": "xr",
        "{torch_xla}": "torch_xla",
        "{device}": "torch_xla.device()",
        "{manual_seed}": "torch_xla.manual_seed",
        "{sync}": "torch_xla.sync",
    }
    for table in (CUDA_API, ACCELERATOR_API):
        for name, row in table.items():
            longest = max((other for other, shared in table.items() if shared is row), key=len)
            message = row.message.replace("{name}", longest)
            for key, value in spelled.items():
                message = message.replace(key, value)
            # The longest note a stream or context finding adds when it has no fix.
            message += " (no fix: line 1234 has a use the fix cannot rewrite)" if row.action == "stream" else ""
            assert len(message) <= MESSAGE_LIMIT, (name, message)


def test_lists_of_names_are_capped():
    """XLA103 names one carried tensor and counts the others."""
    from xlalint.rules.xla103.carried_state import MESSAGE, RANK_MESSAGE, carried_names

    names = carried_names([LONG_NAME, "b", "c", "d"])
    assert names == f"`{LONG_NAME}` and 3 more"
    assert max(len(MESSAGE.format(names=names)), len(RANK_MESSAGE.format(names=names))) <= MESSAGE_LIMIT


def test_long_names_and_many_lines_stay_short():
    """A 20-character name where the rules interpolate one, many lines of kept tests
    (XLA104), many calls on the way to a move and many models (XLA501)."""
    name = LONG_NAME
    tests = "\n".join(f'if "cuda" in {name}:\n    x = x.pin_memory()' for _ in range(5))
    sources = {
        "XLA104": f'import torch\n{name} = "cuda"\nmodel.to({name})\n{tests}\n',
        "XLA501": (
            "import torch\nimport torch_xla\n"
            f"{name} = Net()\nopt = torch.optim.SGD([*{name}.parameters(), *b.parameters(), *c.parameters()])\n"
            f"{name}.to(torch_xla.device())\n"
        ),
    }
    for code, source in sources.items():
        found = [f for f in lint_source(source, "f.py", Settings(), select=[code]) if f.code == code]
        assert found, code
        for finding in found:
            assert len(finding.message) <= MESSAGE_LIMIT, finding.message
