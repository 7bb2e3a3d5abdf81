"""XLA203 missing-gradient-allreduce on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import (
    assert_fixture_fixes,
    assert_unsafe_fixes_leave_nothing_fixable,
    findings_of,
    fixture_positions,
)
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA203"
CODE = "XLA203"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # A step helper: the AMP path (unsafe all-reduce after the backward) and the plain path (safe xm.optimizer_step).
    "mp_train_step": [(21, 9, CODE), (26, 9, CODE)],
    # A trainer class under a gradient-accumulation guard; the scheduler step is not an optimizer step.
    "trainer_class": [(24, 17, CODE)],
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


def test_unsafe_fixes_leave_nothing_fixable():
    assert_unsafe_fixes_leave_nothing_fixable(CODE, FIXTURES, EXPECTED)


def test_reduction_by_hand_is_trusted():
    source = (
        "import torch.distributed as dist\nimport torch_xla\n"
        "def _mp_fn(index):\n"
        "    for x in loader:\n"
        "        model(x).backward()\n"
        "        for p in model.parameters():\n"
        "            dist.all_reduce(p.grad)\n"
        "        opt.step()\n"
    )
    assert findings(source, "f.py") == []


def test_metric_all_reduce_is_not_a_gradient_reduction():
    source = (
        "import torch.distributed as dist\nimport torch_xla\n"
        "def _mp_fn(index):\n"
        "    for x in loader:\n"
        "        loss = model(x)\n"
        "        loss.backward()\n"
        "        dist.all_reduce(loss)\n"
        "        opt.step()\n"
    )
    assert [(f.span.line, f.code) for f in findings(source, "f.py")] == [(8, CODE)]


# Under torch_xla's FSDP the wrapper reduce-scatters the gradients in backward, and under
# SPMD they are global: `xm.optimizer_step` would be wrong there (XLA209, XLA210), so
# XLA203 neither reports `opt.step()` nor offers its fix.
UNREDUCED_STEP = """\
import torch
import torch_xla.core.xla_model as xm
{imports}
def _mp_fn(index):
    model = {model}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        opt.zero_grad()
        model(x, y).backward()
        opt.step()
"""


def test_the_plain_script_is_reported_with_the_fix():
    found = findings(UNREDUCED_STEP.format(imports="", model="Net()"), "f.py")
    assert [(f.span.line, f.fix is not None) for f in found] == [(10, True)]


@pytest.mark.parametrize(
    "imports, model",
    [
        ("from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP", "FSDP(Net())"),
        ("import torch_xla.distributed.fsdp as fsdp", "fsdp.XlaFullyShardedDataParallel(Net())"),
        (
            "from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel\n"
            "import torch_xla.runtime as xr\nxr.use_spmd()",
            "SpmdFullyShardedDataParallel(Net())",
        ),
        ("import torch_xla.runtime as xr\nxr.use_spmd()", "Net()"),
    ],
    ids=["xla-fsdp", "xla-fsdp-module", "fsdp-v2", "spmd"],
)
def test_silent_under_fsdp_and_spmd(imports, model):
    source = UNREDUCED_STEP.format(imports=imports, model=model)
    assert findings(source, "f.py") == []
    assert fix_source(source, "f.py", Settings(), unsafe=True, select=[CODE]).source == source
