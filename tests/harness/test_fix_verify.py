"""`xlalint fix --verify` (issue 37, §5): fix, run the fixed copy, withdraw the fix that
broke it, write the others; the withdrawn one is listed as withheld."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from xlalint.harness import prepare
from xlalint.harness.prepare import AppliedFix
from xlalint.harness.verify import fix_without

REASON = "the fixed script crashed: AssertionError: epoch 0 saw 16 of 18 samples at broken_fix.py:31"


def test_a_withdrawn_fix_is_left_out_and_marked_withheld(scripts_dir, tmp_path):
    script = tmp_path / "broken_fix.py"
    shutil.copy(scripts_dir / "broken_fix.py", script)
    user_file = prepare.read_user_file(script, "broken_fix.py", Path("broken_fix.py"))
    withdrawn = frozenset({AppliedFix("broken_fix.py", "XLA301", 17)})
    fixed = fix_without(user_file, withdrawn, True, REASON)
    assert fixed.applied == 2  # the device port and the sync
    assert "device = torch_xla.device()" in fixed.text and "torch_xla.sync()" in fixed.text
    assert "drop_last=True)" not in fixed.text
    (held,) = [finding for finding in fixed.findings if finding.fix_withheld]
    assert (held.code, held.fix_withheld, held.fix) == ("XLA301", REASON, None)
    assert fixed.notes == [f"note: broken_fix.py:{held.span.line}:{held.span.col + 1}: XLA301 fix {REASON}"]


@pytest.mark.slow
@pytest.mark.usefixtures("torch_xla_required")
def test_fix_verify_writes_the_fixes_that_ran_and_withholds_the_one_that_crashed(
    scripts_dir, tmp_path, xlalint_command
):
    script = tmp_path / "broken_fix.py"
    shutil.copy(scripts_dir / "broken_fix.py", script)
    done = xlalint_command(
        "fix", "--verify", "--unsafe-fixes", "--steps", "4", "--output-format", "json", str(script), timeout=900
    )
    assert done.returncode == 0, done.stderr
    written = script.read_text()
    assert "device = torch_xla.device()" in written and "torch_xla.sync()" in written
    assert "drop_last=True)" not in written
    (held,) = [f for f in json.loads(done.stdout) if "fix_withheld" in f]
    assert held["code"] == "XLA301"
    assert held["fix_withheld"].startswith("the fixed script crashed: AssertionError: epoch 0 saw 16 of 18 samples at ")
