"""Issue 21, items 4 and 5, on a whole script: pytorch/examples' VAE picks its loader
options by `use_cuda` and unpacks them (`**kwargs`). `check` shows the XLA301 that the
port brings (marked as following from it), `fix --unsafe-fixes` fixes exactly what
`check` showed, and the fixed script runs on torch_xla CPU with no more compiles than
the original (the partial last batch no longer adds a graph)."""

from __future__ import annotations

import pytest

from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

pytestmark = pytest.mark.usefixtures("torch_xla_required")


def test_vae_with_unpacked_loader_options_is_checked_and_fixed_as_the_port_needs(scripts_dir):
    script = scripts_dir / "port_vae_kwargs.py"
    source = script.read_text()
    checked = lint_source(source, str(script), Settings())
    assert [(f.code, f.span.line) for f in checked if f.after_port] == [("XLA301", 30)]
    assert not any(f.after_port for f in checked if f.code != "XLA301")

    result = fix_source(source, str(script), Settings(), unsafe=True)
    assert result.error is None
    assert "shuffle=True, drop_last=True, **kwargs" in result.source
    assert sorted(f.code for f in result.applied) == sorted(f.code for f in checked if f.fix is not None)
    assert sum(f.after_port for f in result.applied) == 1


# Slow: six runs (the compare, then a bisect: the dropped batch shifts the second epoch's
# losses), 72 s on a quiet 2-core machine. XLA301's run in the default command is
# test_program_facts' helper-module loader (one compile fewer at run time).
@pytest.mark.slow
def test_the_fixed_vae_drops_the_partial_batch_on_xla(scripts_dir, harness_report):
    script = scripts_dir / "port_vae_kwargs.py"
    report = harness_report(script, compare=True, unsafe_fixes=True, device="cpu")
    original, fixed = report.runs["port"], report.runs["fixed"]
    assert original.ok and fixed.ok, original.stderr_tail + fixed.stderr_tail
    assert "====> Epoch: 2 done" in fixed.stdout_tail
    assert fixed.metrics.executions >= 1  # the model ran on the XLA device
    assert fixed.metrics.compiles <= original.metrics.compiles
    # 240 samples, batches of 32: 7 full batches an epoch, the 16 left over are dropped.
    assert fixed.steps is not None and fixed.steps.steps == 14
