"""Recompilations explained: shapes recorded in the child, named and joined in the report.

No torch here: the child's record is written by hand (in the format the bootstrap
writes) or made by the bootstrap's `TransferLog` from real frames of this file.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from xlalint.harness import bootstrap
from xlalint.harness.prepare import LineMap, ScriptVersion
from xlalint.harness.report import HarnessReport, format_run, format_text, to_json
from xlalint.harness.results import Cause, Metrics, RunResult
from xlalint.harness.runner import explain_recompilations
from xlalint.harness.shapes import ShapeChange, explaining_findings, read_shape_changes
from xlalint.model import Finding, Span

SCRIPT = """\
import torch_xla
device = torch_xla.device()
for input_ids, (mask, labels) in loader:
    input_ids, mask = input_ids.to(device), mask.to(device)
    batch = {k: v.to(device) for k, v in raw.items()}
    torch_xla.sync()
"""


def _finding(code: str, line: int) -> Finding:
    return Finding(code=code, name=code.lower(), message="m", path="train.py", span=Span(line, 0, line, 10))


def _version(tmp_path: Path, source: str = SCRIPT, findings=(), original: str | None = None) -> ScriptVersion:
    run_path = tmp_path / "train.py"
    run_path.write_text(source)
    return ScriptVersion(
        label="original",
        run_path=run_path,
        source=source,
        findings=list(findings),
        line_map=LineMap(original, source) if original is not None else None,
    )


def _write_record(out_dir: Path, pid: int, sites: list[dict]) -> None:
    out_dir.mkdir(exist_ok=True)
    (out_dir / f"{bootstrap.TRANSFERS_PREFIX}{pid}.json").write_text(json.dumps({"sites": sites}))


def _site(file, line, col, runs, kind="to", slot=0, path=()):
    return {"kind": kind, "file": str(file), "line": line, "col": col, "slot": slot, "path": list(path), "runs": runs}


def test_transfers_are_named_from_the_code_and_only_changing_ones_are_kept(tmp_path):
    version = _version(tmp_path)
    script = version.run_path
    out = tmp_path / "out"
    _write_record(
        out,
        101,
        [
            # Two calls on line 4, told apart by their column.
            _site(script, 4, 22, [[[8, 23], 2], [[8, 19], 1], [[8, 23], 1]]),
            _site(script, 4, 44, [[[8, 23], 3], [[8, 19], 1]]),
            _site(script, 4, 44, [[[8], 4]], slot=1),  # never changed: not reported
            # The second transfer of each step in the dict comprehension.
            _site(script, 5, 13, [[[4, 7], 1], [[4, 9], 1]], slot=1),
            # A device loader's batch: (input_ids, (mask, labels)).
            _site(script, 3, 0, [[[8, 5], 1], [[8, 6], 1]], kind="loader", path=[1, 0]),
            _site(script, 3, 0, [[[8, 5], 1], [[8, 6], 1]], kind="loader", path=[0]),
        ],
    )
    changes = read_shape_changes(out, version, "train.py")
    assert [(c.line, c.name) for c in changes] == [
        (3, "input_ids"),
        (3, "mask"),
        (4, "input_ids"),
        (4, "mask"),
        (5, "v (#2 at this line)"),
    ]
    input_ids = changes[2]
    assert input_ids.shapes == ((8, 23), (8, 19), (8, 23))  # consecutive repeats collapsed
    assert input_ids.distinct == 2
    assert input_ids.to_json() == {
        "file": "train.py",
        "line": 4,
        "name": "input_ids",
        "shapes": [[8, 23], [8, 19], [8, 23]],
    }
    assert input_ids.describe() == "input_ids moved at train.py:4: (8, 23) -> (8, 19) -> (8, 23)"


def test_a_dict_batch_from_a_loader_is_named_by_its_key(tmp_path):
    source = "for batch in loader:\n    step(batch)\n"
    version = _version(tmp_path, source)
    out = tmp_path / "out"
    _write_record(
        out, 7, [_site(version.run_path, 1, 0, [[[2, 3], 1], [[2, 4], 1]], kind="loader", path=["input_ids"])]
    )
    (change,) = read_shape_changes(out, version, "train.py")
    assert change.name == "batch['input_ids']"


def test_a_transfer_made_by_library_code_is_shown_at_the_users_call(tmp_path):
    source = "trainer.train()\n"
    version = _version(tmp_path, source)
    out = tmp_path / "out"
    runs = [[[8, 5], 1], [[8, 6], 1]]
    _write_record(out, 3, [_site(version.run_path, 1, 0, runs, kind="library", slot=s) for s in (0, 1)])
    changes = read_shape_changes(out, version, "train.py")
    assert [c.describe() for c in changes] == [
        "tensor via a library call moved at train.py:1: (8, 5) -> (8, 6)",
        "tensor via a library call (#2 at this line) moved at train.py:1: (8, 5) -> (8, 6)",
    ]


def test_the_same_site_in_several_processes_is_reported_once(tmp_path):
    version = _version(tmp_path)
    out = tmp_path / "out"
    for pid, runs in ((1, [[[8, 1], 1], [[8, 2], 1]]), (2, [[[8, 1], 1], [[8, 2], 1], [[8, 3], 1]])):
        _write_record(out, pid, [_site(version.run_path, 4, 22, runs)])
    (change,) = read_shape_changes(out, version, "train.py")
    assert len(change.shapes) == 3


def test_unreadable_or_malformed_records_are_skipped(tmp_path):
    version = _version(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{bootstrap.TRANSFERS_PREFIX}1.json").write_text("{not json")
    _write_record(out, 2, [{"kind": "to", "file": 5}, _site(version.run_path, 4, 22, [[[1], 1], [[2], 1]])])
    _write_record(out, 3, [])
    (out / f"{bootstrap.TRANSFERS_PREFIX}4.json").write_text('{"sites": 3}')
    assert [c.name for c in read_shape_changes(out, version, "train.py")] == ["input_ids"]


def test_a_transfer_on_a_line_the_fix_inserted_has_no_user_line(tmp_path):
    original = "x = load()\nstep(x)\n"
    fixed = "x = load()\nx = x.to(device)\nstep(x)\n"
    version = _version(tmp_path, fixed, original=original)
    out = tmp_path / "out"
    _write_record(out, 1, [_site(version.run_path, 2, 4, [[[1], 1], [[2], 1]])])
    (change,) = read_shape_changes(out, version, "train.py")
    assert change.line is None
    assert "x moved at train.py (a line the fix wrote)" in change.describe()


def test_transfer_log_slots_follow_the_steps():
    log = bootstrap.TransferLog()

    def move(shape):
        log.record("to", sys._getframe(1), [], shape)

    for step_shapes in ([[8, 3], [8]], [[8, 5], [8]]):
        for shape in step_shapes:
            move(shape)  # one site: slot 0 then slot 1 in each step
        log.step += 1
    record = log.to_json()["sites"]
    assert [(site["slot"], site["runs"]) for site in record] == [
        (0, [[[8, 3], 1], [[8, 5], 1]]),
        (1, [[[8], 2]]),
    ]
    assert record[0]["file"] == __file__
    assert isinstance(record[0]["col"], int) or sys.version_info < (3, 11)


def test_transfer_log_bounds_what_it_keeps():
    log = bootstrap.TransferLog()
    frame = sys._getframe()
    for size in range(bootstrap.MAX_SHAPE_RUNS + 50):
        log.record("to", frame, [], [size])
        log.step += 1
    (runs,) = log.sites.values()
    assert len(runs) == bootstrap.MAX_SHAPE_RUNS
    # No sync at all (or `model.to(device)`: every parameter at one line): the k-th
    # transfer of the "step" gets a slot up to a limit, and the rest are not recorded,
    # so different tensors are never taken for one tensor that changed shape.
    unsynced = bootstrap.TransferLog()
    for size in range(100):
        unsynced.record("to", frame, [], [size])
    assert len(unsynced.sites) == bootstrap.MAX_SLOTS_PER_SITE
    assert all(len(runs) == 1 for runs in unsynced.sites.values())


CHANGE = ShapeChange("train.py", 4, "input_ids", ((8, 23), (8, 19)), 2)


def _cause(kind, line, code=None, fixed_line=None):
    return Cause(kind, "user torch_xla.sync", "train.py", line, code, text="torch_xla.sync()", fixed_line=fixed_line)


def test_a_site_that_compiles_several_graphs_is_joined_to_the_shape_finding():
    causes = [_cause("compilation", 6), _cause("compilation", 6), _cause("execution", 6), _cause("compilation", 9)]
    joined = explain_recompilations(causes, [CHANGE], [("XLA101", 2)])
    assert [(c.line, c.code, c.shape_changes) for c in joined] == [
        (6, "XLA101", (CHANGE,)),
        (6, "XLA101", (CHANGE,)),
        (6, "XLA101", ()),  # joined, but shapes are listed on compilations only
        (9, None, ()),  # compiled once: nothing to explain
    ]
    assert joined[0].to_json()["shape_changes"] == [CHANGE.to_json()]
    assert "shape_changes" not in joined[2].to_json()


def test_a_site_keeps_its_own_finding_and_nothing_is_joined_without_shape_changes():
    causes = [_cause("compilation", 6, "XLA102"), _cause("compilation", 6, "XLA102")]
    assert explain_recompilations(causes, [CHANGE], [("XLA101", 2)])[0].code == "XLA102"
    assert explain_recompilations(causes, [], [("XLA101", 2)]) == causes
    unexplained = explain_recompilations([_cause("compilation", 6)] * 2, [CHANGE], [])
    assert unexplained[0].code is None and unexplained[0].shape_changes == (CHANGE,)


def test_explaining_findings_are_xla101_xla301_xla302_in_user_lines(tmp_path):
    original = "a\nb\nc\n"
    fixed = "import x\na\nb\nc\n"
    findings = [_finding("XLA301", 4), _finding("XLA102", 3), _finding("XLA101", 2), _finding("XLA302", 1)]
    version = _version(tmp_path, fixed, findings, original=original)
    assert explaining_findings(version) == [("XLA302", None), ("XLA101", 1), ("XLA301", 3)]


def _run(causes, **fields) -> RunResult:
    values = {
        "label": "original",
        "description": "original",
        "exit_code": 0,
        "wall_s": 1.0,
        "metrics": Metrics(compiles=2, executions=2, processes=1),
        "causes": causes,
    }
    return RunResult(**{**values, **fields})


def test_the_text_report_lists_the_changing_inputs_under_the_site():
    causes = explain_recompilations([_cause("compilation", 6)] * 2, [CHANGE], [("XLA101", 2)])
    text = "\n".join(format_run(_run(causes)))
    assert "    train.py:6 [XLA101]: 2 compilation - user torch_xla.sync" in text
    assert "its graphs differ because input shapes changed (explained by XLA101 at line 2):" in text
    assert "          input_ids moved at train.py:4: (8, 23) -> (8, 19)" in text


def test_a_cause_on_a_line_the_fix_inserted_is_shown_on_that_line():
    cause = Cause(
        "execution", "user torch_xla.sync", "train.py", None, "XLA103", "torch_xla.sync()", True, 12, after_line=10
    )
    text = "\n".join(format_run(_run([cause])))
    # Named by the user's line it follows, never as the user's line 12 (issue 30).
    assert "train.py, after line 10 (line 12 of the fixed copy) [XLA103]: 1 execution" in text
    assert "train.py:12" not in text
    assert "| torch_xla.sync()   (inserted by the fix)" in text
    assert cause.to_json() == {
        "kind": "execution",
        "cause": "user torch_xla.sync",
        "file": "train.py",
        "line": None,
        "code": "XLA103",
        "fixed_line": 12,
    }


def test_warnings_are_in_the_text_and_the_json():
    run = _run([], warnings=["no XLA computation ran: 0 compilations and 0 executions"])
    report = HarnessReport("train.py", "CPU", "2.9.0", [], {"original": run})
    assert "  warning: no XLA computation ran: 0 compilations" in format_text(report)
    assert to_json(report)["runs"]["original"]["warnings"] == run.warnings


def test_a_killed_baseline_gets_no_ratios():
    original = _run([], exit_code=-9)
    fixed = _run([])
    fixed.label, fixed.description = "fixed", "fixed"
    report = HarnessReport("train.py", "CPU", "2.9.0", [], {"original": original, "fixed": fixed})
    text = format_text(report)
    assert "fewer" not in text and "same" not in text and "n/a" not in text
    assert (
        "comparison (original vs fixed): none: the original run was stopped (killed by SIGKILL), "
        "so its numbers cover part of a run (each run's numbers are below)\n"
    ) in text
    assert text.startswith("the original was killed by SIGKILL after 1.0 s; the fixed one took 1.0 s\n")
    original.exit_code = 0
    assert "compiles                   2         2  same" in format_text(report)


def test_the_import_hook_runs_once_after_the_module_runs_even_after_a_find_spec(tmp_path, monkeypatch):
    """transformers asks `find_spec("torch_xla")` before importing it: the hook must wait."""
    import importlib.util

    (tmp_path / "fake_xla_for_hook.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    finder = bootstrap._AfterImport({"fake_xla_for_hook": lambda module: seen.append(module.VALUE)})
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    monkeypatch.delitem(sys.modules, "fake_xla_for_hook", raising=False)
    assert importlib.util.find_spec("fake_xla_for_hook") is not None
    assert seen == []
    import fake_xla_for_hook

    assert seen == [1]
    monkeypatch.delitem(sys.modules, "fake_xla_for_hook")
    import fake_xla_for_hook  # noqa: F401, F811  (imported again: the hook ran already)

    assert seen == [1]


def test_validation_batches_are_not_the_training_batches():
    """Issue 37: the shape changes of the validation loop were attributed to the training
    loop's sync. Each change feeds the recompiling sites of the loop it ran in; a change
    in no such loop still explains every site."""
    train_change = ShapeChange("train.py", 71, "images", ((32, 3), (17, 3)), 2, loop=("/run/train.py", 70, 80))
    val_change = ShapeChange("train.py", 95, "images", ((64, 3), (5, 3)), 2, loop=("/run/train.py", 94, 99))
    loose = ShapeChange("train.py", 40, "mask", ((1,), (2,)), 2, loop=None)

    def cause(line):
        return replace(_cause("compilation", line), run_site=("/run/train.py", line))

    causes = [cause(78), cause(78), cause(97), cause(97)]
    joined = explain_recompilations(causes, [train_change, val_change, loose], [("XLA101", 2)])
    assert [tuple(c.name + f"@{c.line}" for c in cause.shape_changes) for cause in joined] == [
        ("images@71", "mask@40"),
        ("images@71", "mask@40"),
        ("images@95", "mask@40"),
        ("images@95", "mask@40"),
    ]


def test_a_transfer_knows_the_innermost_loop_it_ran_in(tmp_path):
    source = "for epoch in range(2):\n    for x in data:\n        x = x.to(d)\n    y = y.to(d)\nz = z.to(d)\n"
    path = tmp_path / "t.py"
    path.write_text(source)
    version = ScriptVersion(run_path=path, source=source, findings=[], label="original")
    site = {"kind": "to", "line": 3, "col": 12, "runs": [[[1], 1], [[2], 1]]}
    changes = {}
    for line in (3, 4, 5):
        record = {"sites": [{**site, "file": str(path), "line": line}]}
        (tmp_path / f"{bootstrap.TRANSFERS_PREFIX}{line}.json").write_text(json.dumps(record))
    for change in read_shape_changes(tmp_path, version, "t.py"):
        changes[change.line] = change.loop
    assert changes == {3: (str(path), 2, 3), 4: (str(path), 1, 4), 5: None}
