"""XLA103 missing-sync on whole files: findings, fixes, idempotence."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixes_to, expected_fixed
from xlalint.linter.config import Settings
from xlalint.linter.engine import lint_source
from xlalint.linter.fixing import fix_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "XLA103"
CODE = "XLA103"

# (line, 1-based column, fix applicability) of every finding, per fixture.
EXPECTED = {
    "cuda_train": [(44, 9, "safe")],  # the batch loop; train_step() calls backward
    "grad_accum": [(11, 9, "safe")],  # the only sync is under `if (step + 1) % k == 0 or ...`
    "class_trainer": [(26, 9, "safe")],  # self.extra_loader is a plain loader
    "not_flagged": [],
}


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def findings(source: str, settings: Settings | None = None):
    return [f for f in lint_source(source, "train.py", settings or Settings()) if f.code == CODE]


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    got = [(f.span.line, f.span.col + 1, f.fix.applicability if f.fix else None) for f in findings(read(f"{case}.py"))]
    assert got == EXPECTED[case]


@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_fix(case, unsafe):
    fixed = assert_fixes_to(
        CODE, read(f"{case}.py"), f"{case}.py", expected_fixed(FIXTURES, case, unsafe), unsafe=unsafe
    )
    assert findings(fixed) == []


def test_reported_at_the_loop_header():
    (finding,) = findings(read("cuda_train.py"))
    assert (finding.span.line, finding.span.end_line) == (44, 44)
    assert read("cuda_train.py").splitlines()[43][finding.span.col : finding.span.end_col] == "for x, y in loader"


def test_continue_is_mentioned():
    (finding,) = findings(read("grad_accum.py"))
    assert "only every few iterations" in finding.message
    assert "`continue` on line 13" in finding.message


def test_old_target_appends_mark_step():
    result = fix_source(read("cuda_train.py"), "train.py", Settings(target_version=(2, 3)), select=[CODE])
    assert result.error is None
    assert "            xm.mark_step()\n" in result.source
    assert "import torch_xla.core.xla_model as xm\n" in result.source
    assert "torch_xla.sync" not in result.source


def test_hf_trainer_and_accelerate_scripts_are_not_reported():
    loop = "for batch in loader:\n    model(**batch).loss.backward()\n"
    assert findings("import torch\n" + loop)
    assert findings("import torch\nfrom accelerate import Accelerator\nacc = Accelerator()\n" + loop) == []
    subclass = "import torch\nimport transformers\nclass MyTrainer(transformers.Trainer):\n    pass\n"
    assert findings(subclass + loop) == []


def test_step_context_around_the_whole_loop_is_not_enough():
    # One torch_xla.step() around all iterations is one graph for the epoch.
    source = "import torch_xla\nwith torch_xla.step():\n    for x in loader:\n        model(x).backward()\n"
    assert [f.span.line for f in findings(source)] == [3]


def test_micro_batch_loop_in_a_step_context_inside_an_outer_loop():
    source = (
        "import torch_xla\n"
        "for batch in loader:\n"
        "    with torch_xla.step():\n"
        "        for chunk in batch.split(4):\n"
        "            model(chunk).backward()\n"
        "        opt.step()\n"
    )
    assert findings(source) == []


def test_noqa_on_the_loop_header():
    source = "import torch\nfor x in data:  # noqa: XLA103\n    model(x).backward()\n"
    assert findings(source) == []


def test_one_line_loop_body():
    source = "import torch\nfor x in data: model(x).backward()\n"
    result = fix_source(source, "t.py", Settings(), select=[CODE])
    assert result.error is None
    assert result.source.endswith("for x in data:\n    model(x).backward()\n    torch_xla.sync()\n")
