"""The memory budget (issue 40 §2): `fix` needed about 40 KB per fixed line and a file
under the 8 MiB input limit grew past 10 GB. Input limits now follow a stated budget
(4 GiB by default, XLALINT_MEMORY_BUDGET): a file over it is refused with one line
before any work (a file too large to fix is still checked when its check fits), two
trees of a file are never held at once, and no more workers run than the budget holds.
The figures behind the limits are measured by bench/fix_memory.py."""

from __future__ import annotations

import libcst
import pytest
from support import run_cli
from typer.testing import CliRunner

from xlalint.cli import app
from xlalint.engine import lint, memory
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.fixers import apply as fixers_apply

HEAD = "import torch\n\nm = torch.nn.Linear(2, 2).cuda()\n"


@pytest.fixture
def budget(monkeypatch):
    """Sets XLALINT_MEMORY_BUDGET for the test (the budget is read once per process)."""

    def set_budget(value: str) -> None:
        monkeypatch.setenv(memory.BUDGET_ENV, value)
        memory.budget.cache_clear()

    yield set_budget
    monkeypatch.delenv(memory.BUDGET_ENV, raising=False)
    memory.budget.cache_clear()


def no_libcst(monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("libcst parsed a file over the fix limit")

    monkeypatch.setattr(fixers_apply.cst, "parse_module", refused)


def test_the_default_budget_and_its_limits():
    assert memory.budget() == 4 * 2**30
    assert 0.95 * 2**20 < memory.fix_limit() < 2**20 < 4 * 2**20 < memory.check_limit() < 5 * 2**20


def test_a_file_over_the_fix_limit_is_refused_before_any_work_and_still_checked(tmp_path, monkeypatch, budget):
    budget("200M")  # fix up to 13 KB, check up to 65 KB
    text = HEAD + "x = 1\n" * 5000  # 30 KB
    (tmp_path / "big.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    no_libcst(monkeypatch)
    result = CliRunner().invoke(app, ["fix", "big.py", "--output-format", "concise"], catch_exceptions=False)
    assert result.exit_code == 2 and (tmp_path / "big.py").read_text() == text
    assert "big.py:3:5: XLA104" in result.stdout  # checked
    assert result.stderr.splitlines()[-1] == (
        "xlalint: error: big.py: cannot fix: the file (29 KiB) is over the 12 KiB a fix takes within the "
        "memory budget of 200 MiB (XLALINT_MEMORY_BUDGET); file left unchanged"
    )


def test_a_file_over_the_check_limit_is_one_finding_and_no_tree(monkeypatch, budget):
    budget("200M")
    monkeypatch.setattr(lint, "parse", lambda *args: pytest.fail("parsed a file over the check limit"))
    [finding] = lint.lint_source(HEAD + "x = 1\n" * 20000, "big.py", Settings())
    assert finding.code == "XLA000" and finding.message.startswith(
        "cannot check: the file (117 KiB) is over the 64 KiB"
    )
    result = fix_source(HEAD + "x = 1\n" * 20000, "big.py", Settings())
    assert result.error.startswith("cannot fix:") and [f.code for f in result.remaining] == ["XLA000"]


@pytest.mark.parametrize("args", [["check", "a.py"], ["fix", "a.py"], ["run", "a.py"]])
def test_a_bad_budget_is_one_line(tmp_path, args):
    (tmp_path / "a.py").write_text(HEAD)
    done = run_cli(*args, cwd=tmp_path, env={memory.BUDGET_ENV: "lots"})
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "xlalint: error: XLALINT_MEMORY_BUDGET='lots' is not a size (write 4G, 512M or a number of bytes)\n"
    )
    assert (tmp_path / "a.py").read_text() == HEAD


def test_fix_never_holds_the_ast_tree_while_libcst_parses(monkeypatch):
    parse = libcst.parse_module
    held = []

    def watched(source, *args, **kwargs):
        held.append(lint._last_parsed is not None)
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(fixers_apply.cst, "parse_module", watched)
    result = fix_source(HEAD + "y = torch.ones(2).cuda()\n", "a.py", Settings())
    assert result.error is None and len(result.applied) == 2
    assert held and not any(held)


@pytest.mark.parametrize(
    ("cores", "largest", "fix", "workers"),
    [
        (8, 10_000, True, 8),  # small files: every core
        (8, 100_000, True, 7),  # 100 KB to fix: 550 MB each
        (8, 900_000, True, 1),  # near the fix limit: one at a time
        (8, 900_000, False, 4),  # the same to check: 870 MB each
        (2, 0, False, 2),
    ],
)
def test_no_more_workers_than_the_budget_holds(cores, largest, fix, workers):
    assert memory.workers(cores, largest, fix=fix) == workers
