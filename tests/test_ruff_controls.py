"""Issue 41: what a ruff user reaches for, and numbers that agree. Where the behaviour
is ruff's, the test runs ruff 0.17.6 (the shared venv's) on the same input."""

from __future__ import annotations

import re
from pathlib import Path

from support import run_cli

ROOT = Path(__file__).resolve().parents[1]
# XLA104's fixture whose `with torch.cuda.stream(s):` goes with the fix of `s = torch.cuda.Stream()`.
CUDA_API = (ROOT / "tests" / "fixtures" / "XLA104" / "cuda_api.py").read_text(encoding="utf-8")


def test_fix_says_why_its_count_is_not_checks(tmp_path):
    (tmp_path / "t.py").write_text(CUDA_API)
    check = run_cli("check", "--no-cache", "--output-format", "concise", "t.py", cwd=tmp_path).stdout.decode()
    [checked] = re.findall(r"^Found (\d+) errors\.$", check, re.M)
    fixed = run_cli("fix", "--output-format", "concise", "t.py", cwd=tmp_path).stdout.decode()
    [line] = [line for line in fixed.splitlines() if line.startswith("Found ")]
    total, done, left = map(int, re.match(r"Found (\d+) errors \((\d+) fixed, (\d+) remaining", line).groups())
    assert total == done + left and total < int(checked)
    assert line.endswith(f"; `check` found {checked}: {int(checked) - total} went with code a fix rewrote).")
    # The docs quote the line as printed.
    assert f"\n{line}\n" in (ROOT / "docs" / "output.md").read_text(encoding="utf-8")
