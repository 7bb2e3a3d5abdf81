"""XLA106 amp-clip-order on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, findings_of, fixture_positions
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA106"
CODE = "XLA106"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # AMP loop with gradient accumulation: clip before unscale_ (safe insert).
    "amp_loop": [(32, 9, CODE)],
    # Multi-process XLA, no scaler: clip before xm.optimizer_step (unsafe rewrite).
    "xla_multiprocess": [(20, 9, CODE)],
    # A late all-reduce in a helper (no fix: the backward is in another function),
    # and a clip after xm.optimizer_step on the non-AMP branch (moved, then rewritten).
    "amp_late_allreduce": [(27, 13, CODE), (33, 13, CODE)],
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


def test_fixed_files_are_clean_of_fixable_findings():
    for case in EXPECTED:
        fixed = (FIXTURES / f"{case}.fixed.py").read_text()
        assert not [f for f in findings(fixed, "f.py") if f.fix is not None and f.fix.applicability == "safe"]


def test_clip_outside_the_step_is_not_reported():
    # amp_loop.py clips with clip_grad_value_ after each epoch, outside the step loop.
    source = (FIXTURES / "amp_loop.py").read_text()
    lines = {f.span.line for f in findings(source, "amp_loop.py")}
    clip_value_line = next(i for i, line in enumerate(source.splitlines(), 1) if "clip_grad_value_" in line)
    assert clip_value_line not in lines


def test_reported_once_for_several_paths():
    source = """
import torch
scaler = torch.cuda.amp.GradScaler()
for x in loader:
    scaler.scale(model(x)).backward()
    if a:
        log(1)
    if b:
        log(2)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
"""
    assert len(findings(source, "t.py")) == 1


def test_helper_called_from_two_loops_reported_once():
    source = """
import torch
scaler = torch.cuda.amp.GradScaler()
def step(x):
    scaler.scale(model(x)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
for x in train:
    step(x)
for x in extra:
    step(x)
"""
    assert len(findings(source, "t.py")) == 1


def test_no_torch_no_findings():
    source = """
scaler = GradScaler()
for x in loader:
    scaler.scale(model(x)).backward()
    clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
"""
    assert findings(source, "t.py") == []


def test_no_fix_when_scaler_step_is_elsewhere():
    # The scaler.step(opt) call is in another function: its names may not exist here.
    source = """
import torch
scaler = torch.cuda.amp.GradScaler()
def finish(s, o):
    s.step(o)
    s.update()
for x in loader:
    scaler.scale(model(x)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    finish(scaler, opt)
"""
    found = findings(source, "t.py")
    assert len(found) == 1 and found[0].fix is None


def test_xm_optimizer_step_with_barrier_keeps_a_sync():
    # Replacing it with opt.step() alone would drop the sync the barrier gives.
    source = """
import torch
import torch_xla.core.xla_model as xm
def _mp_fn(index):
    for x in loader:
        model(x).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        xm.optimizer_step(opt, barrier=True)
"""
    found = findings(source, "t.py")
    assert len(found) == 1 and found[0].fix is not None
    fixed = fix_source(source, "t.py", Settings(), unsafe=True).source
    assert "        opt.step()\n        torch_xla.sync()\n" in fixed
    assert "barrier" not in fixed
    old = fix_source(source, "t.py", Settings(target_version=(2, 3)), unsafe=True).source
    assert "        opt.step()\n        xm.mark_step()\n" in old


def test_xm_optimizer_step_with_variable_barrier_has_no_fix():
    source = """
import torch
import torch_xla.core.xla_model as xm
def _mp_fn(index):
    for x in loader:
        model(x).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        xm.optimizer_step(opt, barrier=flag)
"""
    found = findings(source, "t.py")
    assert len(found) == 1 and found[0].fix is None


def test_optimizer_args_are_kept():
    source = """
import torch
import torch_xla.core.xla_model as xm
def _mp_fn(index):
    for x in loader:
        model(x).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        xm.optimizer_step(opt, optimizer_args={"closure": None})
"""
    result = fix_source(source, "t.py", Settings(), unsafe=True, select=[CODE])
    assert 'opt.step(**{"closure": None})' in result.source
    assert "xm.reduce_gradients(opt)" in result.source


def test_noqa():
    source = """
import torch
scaler = torch.cuda.amp.GradScaler()
for x in loader:
    scaler.scale(model(x)).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # noqa: XLA106
    scaler.step(opt)
    scaler.update()
"""
    assert findings(source, "t.py") == []


def test_statements_sharing_a_line_are_not_split():
    # The fixes act on whole lines: `a(); clip()` and `if c: clip()` after the step
    # get no fix; a one-line `if c: clip()` before the step gets the unscale_ before it.
    source = """
import torch
scaler = torch.cuda.amp.GradScaler()
for x in loader:
    scaler.scale(model(x)).backward(); torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
for x in loader:
    scaler.scale(model(x)).backward()
    scaler.step(opt)
    if clip: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
for x in loader:
    scaler.scale(model(x)).backward()
    if clip: torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
"""
    found = findings(source, "t.py")
    assert [(f.span.line, f.fix is not None) for f in found] == [(5, False), (11, False), (14, True)]
    fixed = fix_source(source, "t.py", Settings(), unsafe=True, select=[CODE]).source
    assert "    scaler.unscale_(opt)\n    if clip: torch.nn.utils.clip_grad_norm_" in fixed
    assert fixed.count("unscale_") == 1


# Clip-then-`xm.optimizer_step` in a multi-process script gets the unsafe fix
# `xm.reduce_gradients(opt)`; clip; `opt.step()`. Under torch_xla's FSDP (the wrapper
# reduced the gradients already) or SPMD (they are global) that reduce would be wrong:
# no finding and no fix there (the `xm.optimizer_step` is XLA209's or XLA210's).
CLIP_THEN_OPTIMIZER_STEP = """\
import torch
import torch_xla.core.xla_model as xm
{imports}
def _mp_fn(index):
    model = {model}
    for x in loader:
        model(x).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        xm.optimizer_step(opt)
"""


def test_clip_before_optimizer_step_gets_the_reduce_first_fix():
    source = CLIP_THEN_OPTIMIZER_STEP.format(imports="", model="Net()")
    assert [f.span.line for f in findings(source, "t.py")] == [8]
    assert "xm.reduce_gradients(opt)" in fix_source(source, "t.py", Settings(), unsafe=True, select=[CODE]).source


@pytest.mark.parametrize(
    "imports, model",
    [
        ("from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP", "FSDP(Net())"),
        ("import torch_xla.runtime as xr\nxr.use_spmd()", "Net()"),
    ],
    ids=["xla-fsdp", "spmd"],
)
def test_no_reduce_gradients_fix_under_fsdp_or_spmd(imports, model):
    source = CLIP_THEN_OPTIMIZER_STEP.format(imports=imports, model=model)
    assert findings(source, "t.py") == []
    fixed = fix_source(source, "t.py", Settings(), unsafe=True, select=[CODE]).source
    assert "reduce_gradients" not in fixed
