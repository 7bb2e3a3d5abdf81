"""XLA208 runtime-before-launch on whole scripts (no fix: the message says where the
call belongs). tests/harness/test_runtime_before_launch.py runs the first two cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import findings_of
from xlalint.rules.xla208_runtime_before_launch import RuntimeBeforeLaunch

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA208"
CODE = "XLA208"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # The device at module level and the world size on the __main__ path before the launch.
    "device_in_parent": [(10, 10, CODE), (19, 27, CODE)],
    # The same script as the message advises: nothing in the parent starts the runtime.
    "device_in_worker": [],
    # The launch is in main(): a helper it calls first, and `.to("xla")`; not the
    # worker's own calls, not what main does after the workers are done.
    "spawn_from_main": [(15, 15, CODE), (32, 13, CODE)],
}


def findings(source: str, path: str):
    return findings_of(CODE, source, path)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    path = FIXTURES / f"{case}.py"
    found = findings(path.read_text(), str(path))
    assert [(f.span.line, f.span.col + 1, f.code) for f in found] == EXPECTED[case]
    assert all(f.fix is None for f in found)


def test_message_names_the_launch_and_the_remedy():
    path = FIXTURES / "spawn_from_main.py"
    messages = [f.message for f in findings(path.read_text(), str(path))]
    assert messages[1].startswith(
        '`torch.zeros(1).to("xla")` starts the XLA runtime before `xmp.spawn(...)` (line 33): the workers fail'
    )
    assert all(m.endswith(": the workers fail") for m in messages)
    # The error the workers fail with, and the remedy, are the explanation's.
    assert "Runtime is already initialized" in RuntimeBeforeLaunch.explanation
