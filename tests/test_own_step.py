"""The one `xm.optimizer_step(opt)` -> `opt.step()` fix that XLA209 (FSDP) and XLA210
(SPMD) share (xlalint/analysis/own_step.py): which calls it rewrites, and that both
rules make the same edit from it."""

from __future__ import annotations

import ast

import pytest

from xlalint.analysis.own_step import own_step_fix, plain_optimizer_step, stepped_optimizer
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source
from xlalint.model import ReplaceExpr, Span


def call_of(code: str) -> ast.Call:
    node = ast.parse(code).body[0].value  # type: ignore[attr-defined]
    assert isinstance(node, ast.Call)
    return node


@pytest.mark.parametrize(
    ("code", "template", "parts"),
    [
        ("xm.optimizer_step(opt)", "{opt}.step()", ["opt"]),
        ("xm.optimizer_step(optimizer=self.opt)", "{opt}.step()", ["self.opt"]),
        ("xm.optimizer_step(opt, False)", "{opt}.step()", ["opt"]),
        ("xm.optimizer_step(opt, barrier=False, optimizer_args=kw)", "{opt}.step(**{args})", ["opt", "kw"]),
        ("xm.optimizer_step(opt, False, {'closure': c})", "{opt}.step(**{args})", ["opt", "{'closure': c}"]),
    ],
)
def test_calls_that_become_a_plain_step(code, template, parts):
    plain = plain_optimizer_step(call_of(code))
    assert plain is not None
    assert plain[0] == template
    assert [ast.unparse(node) for _, node in plain[1]] == [ast.unparse(ast.parse(p).body[0].value) for p in parts]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "code",
    [
        "xm.optimizer_step(opt, barrier=True)",  # also a sync point
        "xm.optimizer_step(opt, flag)",  # a barrier that may be true
        "xm.optimizer_step(opt, groups=[[0, 1]])",
        "xm.optimizer_step(opt, pin_layout=False)",
        "xm.optimizer_step(*args)",
        "xm.optimizer_step(opt, optimizer=opt)",
        "xm.optimizer_step(barrier=False)",  # no optimizer to step
        "xm.optimizer_step(opt, False, {}, None)",
    ],
)
def test_calls_that_ask_for_more_than_a_step(code):
    call = call_of(code)
    assert plain_optimizer_step(call) is None
    assert own_step_fix(call, lambda node: Span(1, 0, 1, 1), "any reason") is None


def test_the_fix_is_safe_and_says_why():
    call = call_of("xm.optimizer_step(opt, optimizer_args=kw)")
    fix = own_step_fix(call, lambda node: Span(1, node.col_offset, 1, node.end_col_offset), "the gradients are global")
    assert fix is not None
    assert fix.applicability == "safe"
    assert fix.message == "step the optimizer itself: the gradients are global"
    [replace] = fix.operations
    assert isinstance(replace, ReplaceExpr)
    assert replace.template == "{opt}.step(**{args})"
    assert [name for name, _ in replace.parts] == ["opt", "args"]


def test_stepped_optimizer():
    assert ast.unparse(stepped_optimizer(call_of("xm.optimizer_step(opt, True)"))) == "opt"  # type: ignore[arg-type]
    assert ast.unparse(stepped_optimizer(call_of("xm.optimizer_step(optimizer=o)"))) == "o"  # type: ignore[arg-type]
    assert stepped_optimizer(call_of("xm.optimizer_step()")) is None


STEP = "    xm.optimizer_step(opt, optimizer_args={'closure': None})\n"
FSDP_SCRIPT = (
    "import torch\nimport torch_xla.core.xla_model as xm\n"
    "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
    "model = FSDP(Net())\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for x in loader:\n    model(x).backward()\n" + STEP
)
SPMD_SCRIPT = (
    "import torch\nimport torch_xla.core.xla_model as xm\nimport torch_xla.runtime as xr\n"
    "xr.use_spmd()\nmodel = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for x in loader:\n    model(x).backward()\n" + STEP
)


@pytest.mark.parametrize(("code", "source"), [("XLA209", FSDP_SCRIPT), ("XLA210", SPMD_SCRIPT)])
def test_both_rules_make_the_same_edit(code, source):
    [finding] = [f for f in lint_source(source, "f.py", Settings(), select=[code]) if f.code == code]
    assert finding.fix is not None and finding.fix.applicability == "safe"
    fixed = fix_source(source, "f.py", Settings(), select=[code]).source
    assert fixed == source.replace(STEP, "    opt.step(**{'closure': None})\n")
