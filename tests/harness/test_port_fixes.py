"""Issue 10: fixed ports of real training scripts must run, and run better.

Whole small scripts (tests/harness/scripts/port_*.py) go through `xlalint run` on
torch_xla CPU. Six torch_xla runs in all (a minute or two on two shared cores).
"""

from __future__ import annotations

import re

import pytest

from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

pytestmark = pytest.mark.usefixtures("torch_xla_required")


def fixed_text(path, unsafe: bool = False) -> str:
    result = fix_source(path.read_text(), str(path), Settings(), unsafe=unsafe)
    assert result.error is None
    return result.source


def test_dry_run_break_syncs_and_the_step_closure_prints(scripts_dir, harness_report):
    """Item 1: with `--dry-run` the loop breaks after one step; the fixed script syncs
    before the `break`, so the closure XLA102 made prints, and `torch.save` reads a
    synced model."""
    script = scripts_dir / "port_dry_run.py"
    assert "            torch_xla.sync()\n            break\n" in fixed_text(script)
    report = harness_report(script, device="cpu", script_args=["--dry-run"])
    # (XLA201 also flags its `torch.save`: `xm.save` writes the synced model just as well.)
    assert {"XLA102", "XLA103"} <= {f.code for f in report.findings}
    run = report.runs["fixed"]
    assert run.ok, run.stderr_tail
    assert re.search(r"^batch 0 loss \d+\.\d{4}$", run.stdout_tail, re.MULTILINE), run.stdout_tail
    assert "batch 1" not in run.stdout_tail
    assert "saved" in run.stdout_tail
    assert run.metrics.syncs >= 1
    assert run.metrics.executions >= 1  # the model ran on the XLA device


@pytest.mark.slow
def test_step_closure_binds_what_the_step_changes_under_a_free_alias(scripts_dir, harness_report):
    """Items 2 and 5: the long log line becomes a `def` bound to `loss`, `seen`, `step`
    only; the import is `xm_1` (the script's `xm` is a number); each step prints its own
    values, and no step executes its graph early any more."""
    script = scripts_dir / "port_step_closure.py"
    fixed = fixed_text(script)
    assert "import torch_xla.core.xla_model as xm_1\n" in fixed
    assert "        def log_step(loss, seen, step):\n" in fixed
    assert "        xm_1.add_step_closure(log_step, args=(loss, seen, step))\n" in fixed

    report = harness_report(script, compare=True, device="cpu")
    original, fixed_run = report.runs["port"], report.runs["fixed"]
    assert original.ok and fixed_run.ok, original.stderr_tail + fixed_run.stderr_tail
    # The harness keeps the last lines of output: the last two steps, each with its own
    # `seen` (not the value after `seen += len(x)`), and as the original printed them.
    line = r"^train epoch (\d) step (\d) seen (\d+) loss \d\.\d{4} lr (\S+)$"
    printed = re.findall(line, fixed_run.stdout_tail, re.M)
    assert [(e, s, n) for e, s, n, _ in printed] == [("1", "2", "32"), ("1", "3", "48")]
    assert printed == re.findall(line, original.stdout_tail, re.M)
    assert "xm is 5" in fixed_run.stdout_tail
    assert fixed_run.metrics.executions < original.metrics.executions  # no early execution per step
    assert fixed_run.metrics.host_transfers <= original.metrics.host_transfers


@pytest.mark.slow
def test_accumulator_fix_only_where_the_sum_is_not_read_every_step(scripts_dir, harness_report):
    """Item 3: only `total_loss` (read after the loop) becomes a device sum; `running`
    (read every step) and the attribute `state.tokens_seen` (written as JSON) keep their
    `.item()`. Host transfers go down, and the JSON still holds numbers."""
    script = scripts_dir / "port_accumulators.py"
    fixed = fixed_text(script, unsafe=True)
    assert "total_loss += loss.detach()\n" in fixed
    assert "running += loss.item()\n" in fixed
    assert "state.tokens_seen += (y >= 0).sum().item()\n" in fixed

    report = harness_report(script, compare=True, unsafe_fixes=True, device="cpu")
    original, fixed_run = report.runs["port"], report.runs["fixed"]
    assert original.ok and fixed_run.ok, original.stderr_tail + fixed_run.stderr_tail
    assert '"tokens_seen": 96' in fixed_run.stdout_tail
    mean = re.search(r"^mean loss (\d+\.\d{4})$", original.stdout_tail, re.M)
    assert mean and f"mean loss {mean.group(1)}" in fixed_run.stdout_tail
    assert fixed_run.metrics.host_transfers < original.metrics.host_transfers
    assert fixed_run.metrics.executions >= 1


def test_cuda_at_the_end_of_a_multiline_chain_is_fixed_when_marked_fixable(scripts_dir, harness_report):
    """Item 7: `.cuda(0)` closing a parenthesised method chain is marked fixable and the
    fix is really made: the ported script trains on the XLA device."""
    script = scripts_dir / "port_cuda_chain.py"
    findings = [f for f in lint_source(script.read_text(), str(script), Settings()) if f.code == "XLA104"]
    assert len(findings) == 2 and all(f.fix is not None for f in findings)
    fixed = fixed_text(script)
    assert ".cuda(" not in fixed
    report = harness_report(script, device="cpu")
    run = report.runs["fixed"]
    assert run.ok, run.stderr_tail
    assert "model on xla:0" in run.stdout_tail
    assert run.metrics.executions >= 1


@pytest.mark.slow
def test_lbfgs_closure_reduces_in_the_closure_and_the_port_trains(scripts_dir, harness_report):
    """A step given a closure: the all-reduce goes after the closure's backward (the
    optimizer runs the closure, so `xm.optimizer_step` would reduce stale gradients),
    and the compilations inside LBFGS's step are joined to its XLA102 finding."""
    script = scripts_dir / "port_lbfgs_closure.py"
    fixed = fixed_text(script, unsafe=True)
    assert "            loss.backward()\n            xm.reduce_gradients(optimizer)\n            return loss\n" in fixed
    assert "        optimizer.step(closure)\n        torch_xla.sync()\n" in fixed

    report = harness_report(script, unsafe_fixes=True, device="cpu")
    run = report.runs["fixed"]
    assert run.ok, run.stderr_tail
    assert "world 1 weight device xla:0" in run.stdout_tail
    assert run.metrics.syncs >= 2 and run.metrics.executions >= 2
    step_line = next(
        i for i, line in enumerate(script.read_text().splitlines(), 1) if "optimizer.step(closure)" in line
    )
    at_step = [c for c in run.causes if c.line == step_line and c.kind == "compilation"]
    assert at_step and all(c.code == "XLA102" for c in at_step)
