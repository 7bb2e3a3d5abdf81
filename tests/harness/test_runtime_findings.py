"""Runtime findings (issue 24, item 4) read from the child's records, without torch:
placed on the user's line, joined to the finding there, a flat loss said plainly."""

from __future__ import annotations

import json
from pathlib import Path

from xlalint.harness.prepare import LineMap, ScriptVersion
from xlalint.harness.report import format_run
from xlalint.harness.results import RunResult
from xlalint.harness.runtime_findings import collect
from xlalint.harness.runtime_watch import RUNTIME_PREFIX
from xlalint.model import Finding, Span

SCRIPT = "import torch\nmodel = Net()\nopt = SGD(model.parameters())\nmodel.to(dev)\n"


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


def _write(out: Path, pid: int, findings: list[dict], values=(), calls=0) -> None:
    out.mkdir(exist_ok=True)
    record = {"findings": findings, "losses": {"backward_calls": calls, "values": list(values)}}
    (out / f"{RUNTIME_PREFIX}{pid}.json").write_text(json.dumps(record))


def test_findings_are_joined_to_the_static_finding_and_not_repeated_per_process(tmp_path):
    finding = Finding(code="XLA501", name="x", message="m", path="train.py", span=Span(3, 6, 3, 30))
    version = _version(tmp_path, findings=[finding])
    raw = {"code": "XLA501", "file": str(version.run_path), "line": 3, "message": "steps CPU parameters"}
    _write(tmp_path / "out", 1, [raw])
    _write(tmp_path / "out", 2, [raw])
    found, warnings = collect(tmp_path / "out", version, "train.py")
    assert [(f.code, f.file, f.line, f.joined) for f in found] == [("XLA501", "train.py", 3, "XLA501")]
    assert warnings == []
    assert found[0].to_json() == {"code": "XLA501", "file": "train.py", "line": 3, "message": "steps CPU parameters"}

    run = RunResult("original", "original", 0, 1.0, None, [], runtime_findings=found)
    text = "\n".join(format_run(run))
    assert "train.py:3 [XLA501]: steps CPU parameters; confirms the XLA501 finding on that line" in text
    assert run.to_json()["runtime_findings"] == [found[0].to_json()]


def test_a_fixed_copy_line_maps_back_to_the_users_line(tmp_path):
    fixed = "import torch\nmodel = Net()\nmodel.to(dev)\nopt = SGD(model.parameters())\n"
    version = _version(tmp_path, fixed, original=SCRIPT)
    raw = {"code": "XLA501", "file": str(version.run_path), "line": 4, "message": "m"}
    _write(tmp_path / "out", 1, [raw])
    (found,), _ = collect(tmp_path / "out", version, "train.py")
    assert (found.line, found.joined) == (3, None)


def test_a_flat_loss_is_said_plainly_and_a_falling_one_is_not(tmp_path):
    version = _version(tmp_path)
    _write(tmp_path / "flat", 1, [], values=[1.7868, 1.7868, 1.7868, 1.7868], calls=5)
    _write(tmp_path / "falling", 1, [], values=[1.7868, 1.5, 1.2, 0.3], calls=5)
    _write(tmp_path / "short", 1, [], values=[2.0, 2.0], calls=2)
    assert collect(tmp_path / "flat", version, "train.py")[1] == [
        "the loss never changed: 1.7868 at the first 3 and the last of 5 backward calls (the model is not training)"
    ]
    assert collect(tmp_path / "falling", version, "train.py")[1] == []
    assert collect(tmp_path / "short", version, "train.py")[1] == []


def test_unreadable_records_are_skipped(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{RUNTIME_PREFIX}1.json").write_text("{not json")
    (out / f"{RUNTIME_PREFIX}2.json").write_text(json.dumps({"findings": [{"code": "XLA502"}]}))
    assert collect(out, _version(tmp_path), "train.py") == ([], [])
    assert "runtime_findings" not in RunResult("fixed", "fixed", 0, 1.0, None, []).to_json()
