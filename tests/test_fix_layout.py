"""Fixes laid out as the user's formatter would (issue 23, item 2): a call a fix makes
too long is split one argument a line at the project's line length; a `def` a fix
inserts is set off by blank lines. Checked on whole files with `ruff format`."""

from __future__ import annotations

import ast
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.fixers.apply import apply_fixes
from xlalint.fixers.layout import DEFAULT_LINE_LENGTH, line_length_for
from xlalint.model import Fix, InsertStatement, MoveStatement, SetKeyword, Span

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def call_span(source: str, name: str) -> Span:
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == name:
            return Span.of(node, lines)
    raise AssertionError(name)


def with_keyword(source: str, value: str, line_length: int | None = 50) -> str:
    source = textwrap.dedent(source)
    op = SetKeyword(call_span(source, "DataLoader"), "drop_last", value)
    fixed, applied = apply_fixes(source, [Fix("unsafe", "test", (op,))], line_length)
    assert applied
    ast.parse(fixed)
    return fixed


def test_a_call_made_too_long_is_split_one_argument_a_line():
    source = "def f():\n    loader = DataLoader(ds, batch_size=8)\n"
    assert with_keyword(source, "True") == (
        "def f():\n    loader = DataLoader(\n        ds,\n        batch_size=8,\n        drop_last=True,\n    )\n"
    )
    # It still fits: left as it is.
    assert with_keyword(source, "True", line_length=88) == (
        "def f():\n    loader = DataLoader(ds, batch_size=8, drop_last=True)\n"
    )
    # No line length (as for JSON edits): never split.
    assert with_keyword(source, "True", line_length=None).count("\n") == 2


def test_an_argument_still_too_long_is_split_in_turn():
    fixed = with_keyword("loader = DataLoader(ds)\n", "Sampler(dataset, num_replicas=2, rank=0)", line_length=40)
    assert fixed == (
        "loader = DataLoader(\n"
        "    ds,\n"
        "    drop_last=Sampler(\n"
        "        dataset,\n"
        "        num_replicas=2,\n"
        "        rank=0,\n"
        "    ),\n"
        ")\n"
    )


def test_arguments_on_a_line_of_their_own_are_split_there():
    source = "loader = DataLoader(\n    ds, batch_size=8\n)\n"
    assert with_keyword(source, "True", line_length=20) == (
        "loader = DataLoader(\n    ds,\n    batch_size=8,\n    drop_last=True,\n)\n"
    )


def test_a_line_the_user_wrote_too_long_is_theirs():
    source = "loader = DataLoader(ds, batch_size=8)  # a comment that makes the line long already\n"
    fixed = with_keyword(source, "True", line_length=40)
    assert (
        fixed == "loader = DataLoader(ds, batch_size=8, drop_last=True)  # a comment that makes the line long already\n"
    )


def test_an_inserted_def_is_set_off_by_blank_lines():
    source = "for x in data:\n    a = 1\n    log(x)\n"
    op = InsertStatement(call_span(source, "log"), "def log_step(x):\n    print(x)\nadd(log_step)")
    fixed, _ = apply_fixes(source, [Fix("safe", "test", (op,))])
    assert (
        fixed
        == "for x in data:\n    a = 1\n\n    def log_step(x):\n        print(x)\n\n    add(log_step)\n    log(x)\n"
    )


def statement_span(source: str, start: str) -> Span:
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.stmt) and lines[node.lineno - 1].lstrip().startswith(start):
            return Span.of(node, lines)
    raise AssertionError(start)


def test_a_moved_statement_is_the_users_code_as_it_was():
    """It is not split where the user's formatter left it long."""
    source = "a = 1\nmodel = build(first_argument, second_argument, third_argument)\nb = 2\nc = 3\n"
    op = MoveStatement(statement_span(source, "model"), statement_span(source, "c = 3"), "after")
    fixed, applied = apply_fixes(source, [Fix("unsafe", "test", (op,))], 40)
    assert applied and fixed == "a = 1\nb = 2\nc = 3\nmodel = build(first_argument, second_argument, third_argument)\n"


def test_a_long_call_in_an_inserted_def_is_split_after_its_blank_lines_are_set():
    source = "for x in data:\n    a = 1\n    log(x)\n"
    code = "def log_step(x):\n    print(x, first_argument, second_argument)\nadd(log_step)"
    fixed, _ = apply_fixes(source, [Fix("safe", "test", (InsertStatement(call_span(source, "log"), code),))], 40)
    assert fixed == (
        "for x in data:\n    a = 1\n\n    def log_step(x):\n        print(\n            x,\n"
        "            first_argument,\n            second_argument,\n        )\n\n    add(log_step)\n    log(x)\n"
    )


def test_the_lines_to_wrap_come_from_the_fixes_not_from_a_diff_of_the_file(monkeypatch):
    """A whole-file diff is quadratic in a file of repeated lines (issue 33, section 3):
    the rewrite says which code the fixes wrote."""
    import difflib

    def no_diff(*args, **kwargs):
        raise AssertionError("the fix path diffed the file")

    monkeypatch.setattr(difflib, "SequenceMatcher", no_diff)
    source = "import torch\n" + "# the same comment\n" * 50 + "def f():\n    loader = DataLoader(ds, batch_size=8)\n"
    fixed = with_keyword(source, "True")
    assert fixed.endswith(
        "    loader = DataLoader(\n        ds,\n        batch_size=8,\n        drop_last=True,\n    )\n"
    )
    result = fix_source("import torch\n" + "x = torch.ones(2).cuda()\n" * 30, "t.py", Settings())
    assert result.error is None and len(result.applied) == 30


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"pyproject.toml": "[tool.ruff]\nline-length = 100\n"}, 100),
        ({"pyproject.toml": "[tool.black]\nline-length = 79\n"}, 79),
        ({"pyproject.toml": "[tool.ruff]\nline-length = 100\n[tool.black]\nline-length = 79\n"}, 100),
        ({"ruff.toml": "line-length = 110\n", "pyproject.toml": "[tool.ruff]\nline-length = 100\n"}, 110),
        ({"pyproject.toml": "[project]\nname = 'x'\n"}, DEFAULT_LINE_LENGTH),
        ({"pyproject.toml": "[tool.ruff]\nline-length = 'long'\n"}, DEFAULT_LINE_LENGTH),
        ({"pyproject.toml": "not toml ["}, DEFAULT_LINE_LENGTH),
    ],
)
def test_the_line_length_is_the_projects(tmp_path, files, expected):
    project = tmp_path / f"p{len(files)}{expected}"
    (project / "src").mkdir(parents=True)
    for name, text in files.items():
        (project / name).write_text(text)
    assert line_length_for(str(project / "src" / "train.py")) == expected


def test_fixed_examples_are_as_ruff_format_leaves_them(tmp_path):
    """Whole files: the examples are formatted (line length 120, the repository's);
    after `fix --unsafe-fixes` they still are: imports, wrapped calls, blank lines."""
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 120\n")
    for example in sorted(EXAMPLES.glob("*.py")):
        target = tmp_path / example.name
        target.write_text(example.read_text())
        result = fix_source(target.read_text(), str(target), Settings(), unsafe=True)
        assert result.error is None
        target.write_text(result.source)
    formatted = subprocess.run([ruff, "format", "--diff", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert formatted.returncode == 0, formatted.stdout
    # The DataLoader call of issue 23 is split, as its own layout would be.
    fixed = (tmp_path / "checkpoint_each_epoch.py").read_text()
    assert "    loader = DataLoader(\n        dataset,\n        batch_size=32,\n" in fixed
    assert "        drop_last=True,\n    )\n" in fixed
