"""XLA209 fsdp-misuse on whole scripts: findings, the safe and the unsafe fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, findings_of, fixture_positions
from xlalint.analysis.optimizer_place import BUILD_AFTER_WRAP

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
    # Issue 38: built after the move but before the wrap: XLA209's, with XLA501's unsafe
    # fix (built after the wrap, from the wrapped model); xm.optimizer_step (safe fix).
    "fsdp_optimizer_after_move": [(18, 17, CODE), (27, 9, CODE)],
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


def test_built_before_the_wrap_only_gets_xla501_s_fix_unsafe():
    path = FIXTURES / "fsdp_optimizer_after_move.py"
    built, _step = findings(path.read_text(), str(path))
    assert (built.fix.applicability, built.fix.message) == ("unsafe", BUILD_AFTER_WRAP)
    # The same edit as XLA501's when the move too comes after the optimizer.
    moved_late = path.read_text().replace(
        "nn.Linear(16, 1)).to(device)\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)\n",
        "nn.Linear(16, 1))\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)\n    model = model.to(device)\n",
    )
    [late] = findings_of("XLA501", moved_late, "f.py")
    assert late.fix.message == BUILD_AFTER_WRAP


HEADER = """\
import torch
import torch_xla
from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP
"""


@pytest.mark.parametrize(
    "body",
    [
        # A scheduler uses the optimizer between: it would be built from a name not yet bound.
        """
        model = Net().to(torch_xla.device())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(opt, 10)
        model = FSDP(model)
        """,
        # Another block: the optimizer under a test, the wrap after it.
        """
        model = Net().to(torch_xla.device())
        if args.sgd:
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model = FSDP(model)
        """,
        # The wrapped model gets another name: the optimizer would take the unwrapped one's.
        """
        model = Net().to(torch_xla.device())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        sharded = FSDP(model)
        """,
        # Something between reads what the statement that builds it binds.
        """
        model = Net().to(torch_xla.device())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        print(opt)
        model = FSDP(model)
        """,
    ],
    ids=["scheduler-between", "other-block", "other-name", "used-between"],
)
def test_no_fix_where_moving_the_optimizer_is_not_provably_right(body):
    [finding] = findings(HEADER + textwrap.dedent(body), "f.py")
    assert "built before the `XlaFullyShardedDataParallel` wrap" in finding.message
    assert finding.fix is None


def test_the_fixed_script_trains_and_its_optimizer_holds_the_flat_shards(tmp_path):
    """On one CPU device: the original's optimizer steps parameters FSDP replaced (the
    loss never changes); after the unsafe fix it holds FSDP's flat parameters and the
    loss falls. One process runs both (torch_xla is imported once)."""
    for name in ("fsdp_optimizer_after_move.py", "fsdp_optimizer_after_move.unsafe.py"):
        (tmp_path / name.replace(".unsafe", "_unsafe")).write_text((FIXTURES / name).read_text())
    driver = textwrap.dedent(
        """
        import json
        import fsdp_optimizer_after_move as original, fsdp_optimizer_after_move_unsafe as fixed
        for script in (original, fixed):
            model, optimizer, losses = script.main()
            held = {id(p) for group in optimizer.param_groups for p in group["params"]}
            print(json.dumps([losses, held == {id(p) for p in model.parameters()}]))
        """
    )
    env = {**os.environ, "PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "1"}
    result = subprocess.run(
        [sys.executable, "-c", driver], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (original, original_holds), (fixed, fixed_holds) = [json.loads(line) for line in result.stdout.splitlines()[-2:]]
    assert len(set(original)) == 1 and not original_holds  # steps nothing: the loss never changes
    assert fixed_holds and fixed[-1] < fixed[0] / 1.5 and fixed == sorted(fixed, reverse=True)
