"""`xlalint run --compare` never changes the user's files (issue 40 §1): each run's copy
of the working directory linked to them, so a script that appended to a file or wrote
a checkpoint in place wrote into the user's, and the fixed run saw the original's writes."""

from __future__ import annotations

APPENDS_AND_RESUMES = """\
import torch
import torch_xla.core.xla_model as xm

with open("data.txt") as file:
    print("data", repr(file.read()))
with open("data.txt", "a") as file:
    file.write("appended\\n")
with open("run.log", "r+") as file:
    file.seek(0, 2)
    file.write("one more run\\n")
with open("model.pt", "rb") as file:
    print("model", file.read())
torch.save({"step": 1}, "model.pt")  # the checkpoint written in place, by torch's own writer
"""


def test_a_compare_run_leaves_the_users_files_byte_identical(tmp_path, harness_report, monkeypatch, torch_xla_required):
    work = tmp_path / "work"
    work.mkdir()
    (work / "data.txt").write_text("input\n")
    (work / "run.log").write_text("started\n")
    (work / "model.pt").write_bytes(b"no step yet")
    before = {path.name: path.read_bytes() for path in work.iterdir()}
    monkeypatch.chdir(work)
    script = tmp_path / "train.py"
    script.write_text(APPENDS_AND_RESUMES)
    report = harness_report(script, compare=True, device="cpu")
    # The reference is skipped: the script imports torch_xla, so it has no plain-CPU form.
    assert [(label, run.status) for label, run in report.runs.items()] == [
        ("reference", "skipped"),
        ("port", "ok"),
        ("fixed", "ok"),
    ]
    for run in (report.runs["port"], report.runs["fixed"]):
        assert run.ok, run.stderr_tail
        assert run.stdout_tail.splitlines()[-2:] == [
            "data 'input\\n'",
            "model b'no step yet'",
        ]  # each saw a fresh original
    assert {path.name: path.read_bytes() for path in work.iterdir()} == before
