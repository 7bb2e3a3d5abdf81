"""The pre-commit hooks, installed and run by real `pre-commit try-repo` on a scratch repo."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import CUDA_SCRIPT

ROOT = Path(__file__).resolve().parents[1]


def precommit() -> list[str]:
    exe = shutil.which("pre-commit") or str(Path(sys.executable).with_name("pre-commit"))
    if not Path(exe).exists():
        pytest.fail("pre-commit is not installed (it is in the test extra)")
    return [exe]


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def scratch_repo(tmp_path) -> Path:
    repo = tmp_path / "project"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    git("config", "user.email", "t@example.com", cwd=repo)
    git("config", "user.name", "t", cwd=repo)
    (repo / "train.py").write_text(CUDA_SCRIPT)
    (repo / "-rf.py").write_text(CUDA_SCRIPT)  # a name like an option: still a file (issue 29)
    (repo / "notes.txt").write_text("x.cuda()\n")
    git("add", ".", cwd=repo)
    return repo


def run_hook(hook: str, repo: Path, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    return subprocess.run(
        [*precommit(), "try-repo", str(ROOT), hook, "--all-files", "--verbose"],
        cwd=repo,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


@pytest.mark.slow  # installs the hook into a fresh environment (minutes); CI runs it
def test_hooks_check_then_fix(scratch_repo, tmp_path):
    home = tmp_path / "pre-commit-home"
    check = run_hook("xlalint", scratch_repo, home)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "train.py:3:9: XLA104" in check.stdout
    assert "-rf.py:3:9: XLA104" in check.stdout

    fix = run_hook("xlalint-fix", scratch_repo, home)
    # pre-commit fails a hook that modified files, as with any fixer.
    assert fix.returncode == 1, fix.stdout + fix.stderr
    fixed = (scratch_repo / "train.py").read_text()
    assert ".cuda()" not in fixed and "torch_xla.device()" in fixed
    assert (scratch_repo / "-rf.py").read_text() == fixed
    assert (scratch_repo / "notes.txt").read_text() == "x.cuda()\n"

    git("add", ".", cwd=scratch_repo)
    again = run_hook("xlalint", scratch_repo, home)
    assert again.returncode == 0, again.stdout + again.stderr
