"""XLA503 upstream-checkpoint on whole scripts: findings and fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixes_to, assert_fixture_fixes, findings_of, fixture_positions

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA503"
CODE = "XLA503"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # `checkpoint_sequential` (no fix) and `checkpoint(..., use_reentrant=False)` (unsafe:
    # torch_xla's checkpoint is reentrant only; the keyword is dropped).
    "checkpointed_mlp": [(17, 17, CODE), (20, 21, CODE)],
}


def findings(source: str, path: str):
    return findings_of(CODE, source, path)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    assert fixture_positions(CODE, FIXTURES, case) == EXPECTED[case]


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    assert_fixture_fixes(CODE, FIXTURES, case, unsafe)


def test_an_existing_import_of_the_xla_module_is_reused():
    source = (
        "import torch.utils.checkpoint\n"
        "import torch_xla.utils.checkpoint\n"
        "y = torch.utils.checkpoint.checkpoint(f, x, preserve_rng_state=False)\n"
    )
    expected = (
        "import torch.utils.checkpoint\n"
        "import torch_xla.utils.checkpoint\n"
        "y = torch_xla.utils.checkpoint.checkpoint(f, x, preserve_rng_state=False)\n"
    )
    assert_fixes_to(CODE, source, "f.py", expected, unsafe=False)
