"""XLA304 cpu-fallback-op on whole scripts, and its table (data, with its versions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import findings_of
from xlalint.rules.xla304_cpu_fallback_op import CpuFallbackOp, fallback_table

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA304"
CODE = "XLA304"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # The FFT of a helper the step calls (with `dim=`: not measured, falls back as the
    # plain call does), a CTC loss module built in `__init__`, `bincount`, a tensor's
    # `.median()`; not the `histc` under an every-100-steps guard, the `bincount` after
    # the loop, or `F.ctc_loss` outside any step.
    "speech_step": [(16, 20, CODE), (23, 20, CODE), (24, 22, CODE), (25, 22, CODE)],
    # F.interpolate in the step (its default mode, nearest): lowered forward, its backward
    # falls back; not in a module's forward the step cannot see into, nor in sampling.
    "upsample_step": [(23, 13, CODE)],
}


def findings(source: str, path: str):
    return findings_of(CODE, source, path)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    path = FIXTURES / f"{case}.py"
    found = findings(path.read_text(), str(path))
    assert [(f.span.line, f.span.col + 1, f.code) for f in found] == EXPECTED[case]
    assert all(f.fix is None for f in found)


def test_the_table_is_measured_data_with_its_versions():
    table = fallback_table()
    assert table["torch_xla"] == "2.9.0" and table["torch"] == "2.9.0" and table["device"] == "CPU"
    assert table["candidates"] >= 300 and table["calls_that_ran"] >= 300
    fallbacks = table["fallbacks"]
    # The six of issue 24, measured; `torch.unique` stays XLA302's.
    assert fallbacks["torch.bincount"]["plain"] == ["aten::bincount"]
    assert fallbacks["torch.histc"]["plain"] == ["aten::histc"]
    assert fallbacks["torch.searchsorted"]["plain"] == ["aten::searchsorted.Tensor"]
    assert fallbacks["torch.median"]["plain"] == ["aten::median"]
    assert fallbacks["torch.nn.functional.ctc_loss"]["plain"] == ["aten::_ctc_loss.Tensor"]
    assert fallbacks["torch.fft.rfft"]["plain"] == ["aten::_fft_r2c"]
    assert "torch.unique" not in fallbacks
    # Lowered ops are not in it.
    assert not {"torch.matmul", "torch.nn.functional.cross_entropy", "torch.sort"} & set(fallbacks)


def test_the_table_records_the_backward_fallbacks():
    # Issue 28: `F.interpolate(mode="nearest")`'s backward fell back 30 times in 30 steps.
    backward = fallback_table()["backward_fallbacks"]
    assert backward["torch.nn.functional.interpolate"]["nearest"] == ["aten::upsample_nearest2d_backward"]
    assert fallback_table()["fallbacks"].get("torch.nn.functional.interpolate") is None  # lowered forward
    assert backward["torch.nn.functional.ctc_loss"]["plain"] == ["aten::_ctc_loss_backward.Tensor"]


def test_a_backward_fallback_names_the_backward():
    path = FIXTURES / "upsample_step.py"
    (finding,) = findings(path.read_text(), str(path))
    assert finding.message.startswith(
        "`F.interpolate`'s backward runs on the CPU in every step on torch_xla 2.9.0 (aten::upsample_nearest2d_backward)"
    )


def test_the_documentation_lists_the_table():
    assert "| `torch.bincount` | plain | `aten::bincount` |" in CpuFallbackOp.explanation
    assert "torch_xla 2.9.0" in CpuFallbackOp.explanation
