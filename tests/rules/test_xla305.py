"""XLA305 inductor-on-xla on whole scripts: findings and fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, fixture_positions
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA305"
CODE = "XLA305"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # The bare decorator and the flag-chosen compile; not the compile whose backend
    # comes from the command line.
    "compiled_xla": [(15, 2, CODE), (24, 17, CODE)],
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    assert fixture_positions(CODE, FIXTURES, case) == EXPECTED[case]


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    assert_fixture_fixes(CODE, FIXTURES, case, unsafe)


def test_a_cuda_script_is_reported_after_the_port_and_ported_with_the_xla_backend():
    path = FIXTURES / "cuda_compile.py"
    source = path.read_text()
    (finding,) = [f for f in lint_source(source, str(path), Settings(), select=["ALL"]) if f.code == CODE]
    assert (finding.span.line, finding.after_port, finding.fix.applicability) == (10, True, "unsafe")
    fixed = fix_source(source, str(path), Settings(), unsafe=True).source
    assert "device = torch_xla.device()" in fixed
    assert 'model = torch.compile(model, backend="openxla")' in fixed
    assert not [f for f in lint_source(fixed, str(path), Settings(), select=["ALL"]) if f.code == CODE]
