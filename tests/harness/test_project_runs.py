"""Whole projects through `xlalint run` on torch_xla (CPU): a script whose training loop
lives in the modules it imports, and a script that never uses the XLA device.

Four torch_xla runs (about half a minute on two shared cores), and one of a script whose
loop is in a package at the project root (minGPT's layout).
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

pytestmark = pytest.mark.usefixtures("torch_xla_required")


def snapshot(folder) -> dict:
    return {path.relative_to(folder): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


@pytest.mark.slow
def test_the_loop_in_imported_modules_is_fixed_and_trains_on_xla(scripts_dir, tmp_path, run_xlalint):
    """`main.py` imports `train_loop` (a sibling: its `.cuda()` calls, the loop without
    a sync, a per-step `.item()`) and `trainlib` (a package); both runs of --compare
    port the modules too, and read data files next to the user's files."""
    project = tmp_path / "project"
    shutil.copytree(scripts_dir / "project", project)
    before = snapshot(project)
    script = project / "main.py"
    report_path = tmp_path / "report.json"
    outcome = run_xlalint(script, compare=True, device="cpu", json_path=report_path)
    assert outcome.status == 0, outcome.stdout + outcome.stderr
    # The user's files are untouched (Python may add __pycache__ for the unchanged modules).
    after = {path: data for path, data in snapshot(project).items() if "__pycache__" not in path.parts}
    assert after == before

    text = outcome.stdout
    shown = f"{project}/"
    assert (
        f"local modules it imports: {shown}train_loop.py, {shown}trainlib/__init__.py, "
        f"{shown}trainlib/data.py, {shown}trainlib/model.py; findings in them: 4 ({shown}train_loop.py: XLA102 x1, XLA103 x1, XLA104 x2)"
    ) in text
    assert (
        f"port (the original with XLA104's safe fixes): fixes applied: 3 ({shown}main.py: XLA104 x1; {shown}train_loop.py: XLA104 x2);"
        in text
    )
    assert (
        f"fixed: fixes applied: 5 ({shown}main.py: XLA104 x1; {shown}train_loop.py: XLA102 x1, XLA103 x1, XLA104 x2);"
        in text
    )
    report = json.loads(report_path.read_text())
    assert report["local_modules"] == [
        f"{shown}{name}" for name in ("train_loop.py", "trainlib/__init__.py", "trainlib/data.py", "trainlib/model.py")
    ]
    assert {f["filename"] for f in report["findings"]} == {str(script), f"{shown}train_loop.py"}
    original, fixed = report["runs"]["port"], report["runs"]["fixed"]
    for run in (original, fixed):
        assert run["fixed_files"] == [str(script), f"{shown}train_loop.py"]
        assert run["executions"] > 0 and run["steps"] == 5
    assert "model on xla:0" in text and "loss " in text

    source = (project / "train_loop.py").read_text().splitlines()
    item_line = next(n for n, line in enumerate(source, 1) if "loss.item()" in line)
    # The baseline's `.item()` executes its graph each step: a cause at the user's line, joined to XLA102.
    at_item = [c for c in original["causes"] if c["line"] == item_line and c["kind"] == "execution"]
    assert len(at_item) == 5 and {(c["file"], c["code"]) for c in at_item} == {(f"{shown}train_loop.py", "XLA102")}
    # The fixed loop syncs at a line the fix inserted after the rewritten `.item()` print:
    # no line of the user's (issue 30: it was shown as the print's line), so it is named
    # by the user's line it follows and its line in the fixed copy.
    syncs = [c for c in fixed["causes"] if c["cause"] == "user torch_xla.sync" and c["kind"] == "execution"]
    assert len(syncs) == 5 and {(c["file"], c["line"]) for c in syncs} == {(f"{shown}train_loop.py", None)}
    [fixed_line] = {c["fixed_line"] for c in syncs}
    assert (
        f"    {shown}train_loop.py, after line {item_line} (line {fixed_line} of the fixed copy) [-]: "
        "1 compilation, 5 execution - user torch_xla.sync"
    ) in text
    assert "        | torch_xla.sync()   (inserted by the fix)" in text


@pytest.mark.slow
def test_a_script_that_never_uses_the_xla_device_is_told_so(scripts_dir, tmp_path, run_xlalint):
    """After the fix the script syncs every step, but its tensors stayed on the CPU:
    0 compilations, 0 executions; the report says that nothing ran on the XLA device."""
    report_path = tmp_path / "report.json"
    outcome = run_xlalint(scripts_dir / "cpu_regression.py", compare=True, device="cpu", json_path=report_path)
    assert outcome.status == 0, outcome.stderr
    runs = json.loads(report_path.read_text())["runs"]
    assert runs["port"]["warnings"] == ["no XLA computation ran: no process of the script imported torch_xla"]
    fixed = runs["fixed"]
    assert (fixed["syncs"], fixed["compiles"], fixed["executions"]) == (10, 0, 0)
    (warning,) = fixed["warnings"]
    assert warning.startswith("no XLA computation ran: 0 compilations and 0 executions: nothing ran on the XLA device;")
    assert "its model and data stayed on the CPU (and its 10 syncs had nothing to run)" in warning
    assert f"  warning: {warning}" in outcome.stdout
    assert f"warning: the fixed run: {warning}" in outcome.stderr
    assert "weight on cpu" in outcome.stdout


# minGPT's layout (issue 28): the script in projects/chargpt, its training loop in the
# package at the project root, importable as an editable install makes it (on the path).
MINGPT = {
    "pyproject.toml": "",
    "mingpt/__init__.py": "",
    "mingpt/trainer.py": """\
import torch


def train(model, opt, steps):
    device = torch.device("cuda")
    x = torch.ones(4, 2).to(device)
    for _step in range(steps):
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
    return loss
""",
    "projects/chargpt/chargpt.py": """\
import torch
import torch_xla
from mingpt.trainer import train

model = torch.nn.Linear(2, 1).to(torch_xla.device())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss = train(model, opt, 3)
print("trained on", loss.device)
""",
}


def test_the_loop_in_the_project_roots_package_is_fixed_and_runs_on_xla(tmp_path, xlalint_command):
    """`xlalint run` follows the imports as `check` does: the package at the project
    root (not in the script's folder) is fixed in the run's copy, runs in place of the
    user's module, and the report names the fixes per file."""
    repo = tmp_path / "repo"
    for name, text in MINGPT.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    before = snapshot(repo)
    script = repo / "projects" / "chargpt" / "chargpt.py"
    trainer = repo / "mingpt" / "trainer.py"
    out = tmp_path / "run.json"
    python_path = os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH", "")) if p)
    done = xlalint_command(
        "run", str(script), "--device", "cpu", "--json", str(out), env={"PYTHONPATH": python_path}, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"findings in them: 2 ({trainer}: XLA103 x1, XLA104 x1)" in done.stdout
    assert f"fixed: fixes applied: 2 ({trainer}: XLA103 x1, XLA104 x1); findings left: 0" in done.stdout
    record = json.loads(out.read_text())
    (run,) = record["runs"].values()
    assert run["fixed_files"] == [str(trainer)]
    assert "trained on xla:0" in done.stdout
    after = {path: data for path, data in snapshot(repo).items() if "__pycache__" not in path.parts}
    assert after == before
