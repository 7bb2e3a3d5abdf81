"""`xlalint run --bisect` (issue 37, §4): delta debugging over the applied fixes names the
one that broke the run."""

from __future__ import annotations

import json

import pytest

from xlalint.harness.blame import bisect
from xlalint.harness.prepare import AppliedFix
from xlalint.harness.results import RunResult

FIXES = [AppliedFix("train.py", "XLA104", line, f"fix {line}") for line in (3, 8, 13, 21, 34, 55)]


def _result(ok: bool) -> RunResult:
    return RunResult(label="fixed", description="trial", exit_code=0 if ok else 1, wall_s=1.0, metrics=None, causes=[])


@pytest.mark.parametrize("broken", [[FIXES[0]], [FIXES[4]], [FIXES[1], FIXES[5]]])
def test_bisect_names_the_fixes_without_which_the_run_is_good(broken):
    tried = []

    def trial(applied):
        tried.append(applied)
        return _result(ok=not any(fix in applied for fix in broken))

    blame = bisect(FIXES, [], trial, lambda result: not result.ok, "KeyError: 'memory' at train.py:40")
    assert sorted(blame.fixes, key=lambda f: f.line) == broken
    # ddmin: about 2 log2(n) trials for one fix to blame, more when two must go together.
    assert blame.trials == len(set(tried)) == len(tried) <= (6 if len(broken) == 1 else 16)
    assert blame.text().startswith(
        f"the crash comes from the fix at train.py:{broken[0].line} (XLA104: fix {broken[0].line})"
    )
    record = blame.to_json()
    assert (record["path"], record["line"], record["code"]) == ("train.py", broken[0].line, "XLA104")
    assert record["error"] == "KeyError: 'memory' at train.py:40"
    assert record["trials"] == blame.trials


def test_the_port_fixes_stay_in_every_trial_and_one_candidate_needs_no_trial():
    port_fix = AppliedFix("train.py", "XLA104", 1)

    def trial(applied):
        raise AssertionError("withdrawing the one candidate gives the port, which ran")

    blame = bisect([FIXES[2]], [port_fix], trial, lambda result: not result.ok, "boom")
    assert blame.fixes == [FIXES[2]] and blame.trials == 0

    seen = []
    bisect(FIXES[:2], [port_fix], lambda applied: seen.append(applied) or _result(True), lambda r: not r.ok, "boom")
    assert seen and all(port_fix in applied for applied in seen)


@pytest.mark.slow
@pytest.mark.usefixtures("torch_xla_required")
def test_bisect_names_the_unsafe_is_available_fix_that_breaks_a_format(run_xlalint, scripts_dir, tmp_path):
    """The fixed run crashes (the script's own check of the samples it saw) where the port
    runs: the blame is XLA301's `drop_last=True` at line 17, not the device or sync fixes."""
    out = tmp_path / "report.json"
    outcome = run_xlalint(scripts_dir / "broken_fix.py", bisect=True, unsafe_fixes=True, steps=4, json_path=out)
    assert outcome.status == 1
    record = json.loads(out.read_text())
    assert [run["status"] for run in record["runs"].values()] == ["ok", "ok", "failed"]
    blame = record["blame"]
    assert (blame["line"], blame["code"]) == (17, "XLA301")
    assert blame["path"].endswith("broken_fix.py")
    assert blame["error"].startswith("AssertionError: epoch 0 saw 16 of 18 samples at ")
    assert blame["error"].endswith("broken_fix.py:31")
    assert blame["trials"] == 1
    assert "the crash comes from the fix at " in outcome.stdout.splitlines()[1]
