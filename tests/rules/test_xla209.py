"""XLA209 fsdp-misuse on whole scripts: findings, the safe and the unsafe fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, findings_of, fixture_positions

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA209"
CODE = "XLA209"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # The model reaches the loop as a parameter: torch's clip of the shard (unsafe fix),
    # xm.optimizer_step of its optimizer (safe fix), an optimizer built before the wrap.
    "fsdp_train": [(32, 9, CODE), (33, 9, CODE), (43, 14, CODE)],
    # FSDPv2 under SPMD, in a class: xm.optimizer_step of self.optimizer; torch's clip is
    # right there (global parameters).
    "fsdpv2_trainer": [(32, 9, CODE)],
    # Correlated branches: under the second `if args.use_fsdp:` the model is FSDP (torch's
    # clip reported, FSDP's own clip the unsafe fix); in its `else` it is not (issue 33, 2.3).
    "fsdp_flag": [(26, 13, CODE)],
    # Call order: `__init__` wraps (in a helper defined below it) before it builds the
    # optimizer; the second class builds the optimizer first.
    "fsdp_wrap_helper": [(33, 26, CODE)],
    # Issue 38: `self.model` wrapped under `if args.use_fsdp:` in `__init__`; torch's clip
    # in the `else` of the same test in another method is not of an FSDP model.
    "fsdp_flag_class": [],
    # Issue 38: built before the move and the wrap, the optimizer is still stepped by
    # `xm.optimizer_step` on the FSDP model (reported again, safe fix); its place is
    # XLA501's (built before the move too), with the fix that builds it after the wrap.
    "fsdp_step_before_wrap": [(19, 9, CODE)],
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


def test_messages_cite_the_wrap():
    path = FIXTURES / "fsdp_train.py"
    messages = [f.message for f in findings(path.read_text(), str(path))]
    assert "FSDP-wrapped `model` clips by the norm of this process's shard only" in messages[0]
    assert "`XlaFullyShardedDataParallel` (line 44) already reduced and sharded" in messages[1]
    assert "built before the `XlaFullyShardedDataParallel` wrap (line 44)" in messages[2]


@pytest.mark.parametrize(
    "step",
    ["xm.optimizer_step(opt, barrier=True)", "xm.optimizer_step(opt, True)", "xm.optimizer_step(opt, groups=[[0, 1]])"],
)
def test_no_fix_when_the_call_asks_for_more(step):
    source = (
        "import torch\nimport torch_xla.core.xla_model as xm\n"
        "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
        "model = FSDP(Net())\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        f"for x in loader:\n    model(x).backward()\n    {step}\n"
    )
    [finding] = findings(source, "f.py")
    assert finding.fix is None


def test_an_optimizer_of_another_model_is_not_reported():
    source = (
        "import torch\nimport torch_xla.core.xla_model as xm\n"
        "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
        "model = FSDP(Net())\nhead = Head()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nhead_opt = torch.optim.SGD(head.parameters(), lr=0.1)\n"
        "for x in loader:\n    head(model(x)).backward()\n    opt.step()\n    xm.optimizer_step(head_opt)\n"
    )
    assert findings(source, "f.py") == []


def test_an_optimizer_built_before_the_move_and_the_wrap_is_one_finding():
    """XLA501 reports it with the fix "build it after the wrap, from the wrapped model"."""
    path = FIXTURES / "fsdp_step_before_wrap.py"
    found = findings_of("XLA501", path.read_text(), str(path))
    assert [(f.span.line, f.fix.message if f.fix else None) for f in found] == [
        (13, "build the optimizer after the FSDP wrap, from the wrapped model")
    ]
