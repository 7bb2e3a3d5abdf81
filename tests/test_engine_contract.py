"""The engine against SPEC.md: suppressions, positions, scope, robustness, selection
resolution and fixing details, with cases not covered by test_engine.py."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

from xlalint.engine import lint as engine
from xlalint.engine import noqa
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source
from xlalint.model import split_lines


def found(source: str, settings: Settings | None = None) -> list[tuple[int, int, str]]:
    return [(f.span.line, f.span.col + 1, f.code) for f in lint_source(source, "t.py", settings or Settings())]


# -- noqa ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "comment, suppressed",
    [
        ("# noqa: E501", False),
        ("# noqa:E501,W291", False),
        ("# noqa:XLA104", True),
        ("# NOQA", True),
        ("# NoQA: xla104", True),
        ("#noqa:XLA104", True),
        ("# noqa: E501 XLA104", True),
        ("# noqa:XLA104,E501", True),
        ("# noqa: XLA104 -- moved by hand", True),
        ("# noqa: XLA102, XLA103", False),
        ("# ruff: noqa: E501", False),
        ("# flake8: noqa: E501", False),
        ("# type: ignore[attr-defined]  # noqa: XLA104", True),
    ],
)
def test_noqa_forms(comment, suppressed):
    assert (found(f"import torch\nx = torch.ones(1).cuda()  {comment}\n") == []) is suppressed


def test_noqa_on_the_last_line_of_a_multiline_statement():
    source = "import torch\nx = torch.ones(\n    1,\n).cuda(\n)  # noqa: XLA104\n"
    assert found(source) == []
    # ...but not on a line in between, nor on the next statement.
    # (and XLA100 then says that the comment in between suppresses nothing)
    assert found("import torch\nx = torch.ones(\n    1,  # noqa: XLA104\n).cuda(\n)\n") == [
        (2, 5, "XLA104"),
        (3, 9, "XLA100"),
    ]
    assert found("import torch\nx = torch.ones(1).cuda()\ny = 1  # noqa\n") == [(2, 5, "XLA104")]


def test_noqa_on_the_colon_line_of_a_compound_header():
    source = "import torch\nfor x in (\n    torch.ones(2).cuda()\n):  # noqa: XLA104\n    pass\n"
    assert found(source) == []
    source = "import torch\nwith (\n    torch.ones(2).cuda() as t,\n):  # noqa: XLA104\n    pass\n"
    assert found(source) == []
    # A noqa in the body does not hide the header's finding.
    source = "import torch\nfor x in (\n    torch.ones(2).cuda()\n):\n    pass  # noqa: XLA104\n"
    assert found(source) == [(3, 5, "XLA104"), (5, 11, "XLA100")]


def test_noqa_in_strings_and_docstrings_does_not_count():
    assert found('import torch\nx = torch.ones(1).cuda(); s = "# noqa: XLA104"\n') == [(2, 5, "XLA104")]
    source = 'import torch\nx = torch.ones(1).cuda(f"""\n# noqa\n""")\n'
    assert found(source) == [(2, 5, "XLA104")]


def test_disable_file_only_in_the_first_ten_lines():
    assert found("import torch\n" + "\n" * 8 + "# xlalint: disable-file\nx = torch.ones(1).cuda()\n") == []
    late = "import torch\n" + "\n" * 9 + "# xlalint: disable-file\nx = torch.ones(1).cuda()\n"
    assert found(late) == [(12, 5, "XLA104")]
    # Form feeds are not line breaks for Python, so they must not count as lines.
    ff = "import torch\n" + "\x0c" * 20 + "\n" * 8 + "# xlalint: disable-file\nx = torch.ones(1).cuda()\n"
    assert found(ff) == []


def test_noqa_map_reads_other_tools_codes_past():
    assert noqa.noqa_map("x = 1  # noqa: E501, XLA104\n") == {1: frozenset({"E501", "XLA104"})}


# -- positions ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "source, expected",
    [
        ("import torch\ns = 'é'; x = torch.ones(1).cuda()\n", (2, 14)),
        ("import torch\ns = '😀'; x = torch.ones(1).cuda()\n", (2, 14)),
        ("import torch\nif 1:\n\tx = torch.ones(1).cuda()\n", (3, 6)),
        ("import torch\n# a\u2028b \x0c c\nz = 'é'; y = torch.ones(1).cuda()\n", (3, 14)),
        ("import torch\rx = torch.ones(1).cuda()\r", (2, 5)),
        ("\ufeffimport torch\nx = torch.ones(1).cuda()\n", (2, 5)),
        ("import torch\nx = torch.ones(1).cuda()", (2, 5)),
    ],
)
def test_columns_are_characters(source, expected):
    assert [(line, col) for line, col, _ in found(source)] == [expected]


def test_end_position_is_exclusive_and_multiline():
    [finding] = lint_source("import torch\nx = (torch.ones(2)\n     .cuda())\n", "t.py")
    assert (finding.span.line, finding.span.col, finding.span.end_line, finding.span.end_col) == (2, 5, 3, 12)


def test_syntax_error_positions_are_characters():
    [finding] = lint_source('import torch\ns = "éé" )\n', "t.py")
    assert finding.code == "XLA000" and (finding.span.line, finding.span.col) == (2, 9)


def test_split_lines_is_pythons_idea_of_lines():
    assert split_lines("a\r\nb\rc\nd\x0ce\u2028f") == ["a", "b", "c", "d\x0ce\u2028f"]
    assert split_lines("a\n\nb\n", keepends=True) == ["a\n", "\n", "b\n"]
    assert split_lines("") == []


# -- scope, aliases -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "source",
    [
        "from torch import cuda\ncuda.synchronize()\n",
        "import torch as T\nT.cuda.empty_cache()\n",
        "import torch.cuda\ntorch.cuda.synchronize()\n",
        "from torch.cuda import synchronize as sync\nsync()\n",
    ],
)
def test_aliases_resolve(source):
    assert [code for _, _, code in found(source)] == ["XLA104"]


def test_files_that_mention_no_scope_root_are_not_parsed(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("parsed")

    monkeypatch.setattr(engine.ast, "parse", boom)
    assert lint_source("import numpy\nx.cuda()\ndef broken(:\n", "t.py") == []


def test_a_mention_in_a_comment_only_is_not_in_scope():
    assert found("# uses torch\nx.cuda()\n") == []


def test_check_path_imports_neither_torch_nor_libcst(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    code = (
        "import sys\nfrom xlalint.cli import main\nsys.argv = ['xlalint', 'check', '--no-cache', '--output-format', "
        "'sarif', 'a.py']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stdout.flush()\nbad = [m for m in ('torch', 'libcst') if m in sys.modules]\n"
        "sys.stderr.write('IMPORTED:' + ','.join(bad))\n"
    )
    # SARIF and JSON carry fix edits, so they may import libcst; text must not.
    code = code.replace("'--output-format', 'sarif', ", "")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.stderr.strip().endswith("IMPORTED:"), result.stderr


# -- robustness -----------------------------------------------------------------------------------
def test_code_too_deep_to_parse_is_xla000():
    [finding] = lint_source("import torch\nx = " + "-" * 100_000 + "1\n", "t.py")
    assert finding.code == "XLA000" and "nested too deeply" in finding.message


def test_recursion_in_the_analysis_is_xla000(monkeypatch):
    def deep(nodes, rules):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(engine, "_dispatch", deep)
    [finding] = lint_source("import torch\nx = torch.ones(1).cuda()\n", "t.py")
    assert finding.code == "XLA000" and (finding.span.line, finding.span.col) == (1, 0)


def test_deep_but_parseable_code_is_checked_and_fixing_it_fails_cleanly():
    source = "import torch\nx = torch.ones(1).cuda()" + "+a" * 2000 + "\n"
    assert found(source) == [(2, 5, "XLA104")]
    result = fix_source(source, "t.py")
    assert result.source in (source, result.source)
    ast.parse(result.source)


def test_empty_and_whitespace_files():
    assert lint_source("", "t.py") == []
    assert lint_source("\n\n", "t.py") == []
    assert fix_source("", "t.py").source == ""


def test_very_long_line_is_fine():
    source = "import torch\nx = torch.ones(2).cuda(); s = '" + "é" * 200_000 + "'\n"
    assert found(source) == [(2, 5, "XLA104")]


# -- selection resolution -----------------------------------------------------------------------------
ALL_CODES = ["XLA101", "XLA102", "XLA103", "XLA104"]


@pytest.mark.parametrize(
    "file, cli, expected",
    [
        (dict(select=("XLA1",), ignore=("XLA104",)), None, {"XLA101", "XLA102", "XLA103"}),
        (dict(select=("XLA104",), ignore=("XLA1",)), None, {"XLA104"}),
        (dict(select=("XLA104",), ignore=("XLA104",)), None, set()),
        (dict(ignore=("XLA104",)), dict(ignore=("XLA102",)), {"XLA101", "XLA103"}),
        (dict(ignore=("XLA104",)), dict(select=("XLA104",)), {"XLA104"}),
        (dict(ignore=("XLA104",)), dict(extend_select=("XLA104",)), set(ALL_CODES)),
        (dict(extend_select=("XLA104",), select=("XLA101",)), dict(select=("XLA102",)), {"XLA102"}),
        (dict(), dict(select=("ALL",), ignore=("XLA10",)), set()),
    ],
)
def test_enabled_codes_layers(file, cli, expected):
    settings = Settings(**file)
    if cli:
        settings = settings.with_overrides(**cli)
    assert settings.enabled_codes(ALL_CODES) == expected


def test_per_file_ignores_win_over_the_command_line(tmp_path):
    settings = Settings(per_file_ignores=(("tests/*", ("XLA104",)),), root=str(tmp_path))
    settings = settings.with_overrides(select=("XLA104",))
    assert settings.enabled_codes(ALL_CODES, str(tmp_path / "tests" / "t.py")) == set()
    assert settings.enabled_codes(ALL_CODES, str(tmp_path / "t.py")) == {"XLA104"}


# -- fixing -----------------------------------------------------------------------------------------
def test_fix_is_idempotent_and_keeps_mac_newlines():
    source = "import torch\rx = torch.ones(2).cuda()\r"
    once = fix_source(source, "t.py").source
    assert once.endswith("device())\r") and "\n" not in once
    assert fix_source(once, "t.py").source == once


def test_text_edits_positions_with_unusual_newlines():
    from xlalint.fixers.apply import text_edits

    [edit] = text_edits("a\rbcd\r", "a\rbXd\r")
    assert (edit.content, edit.start, edit.end) == ("X", (2, 2), (2, 3))
    [edit] = text_edits("a\x0cb\nc\n", "a\x0cb\nd\n")
    assert (edit.start, edit.end) == ((2, 1), (2, 2))
    [edit] = text_edits("a\n", "a\nb\n")
    assert (edit.content, edit.start, edit.end) == ("b\n", (2, 1), (2, 1))


def test_write_atomic_writes_through_a_symlink(tmp_path):
    from xlalint.engine import source as sourcefile

    real = tmp_path / "real.py"
    real.write_text("x = 1\n")
    link = tmp_path / "link.py"
    os.symlink("real.py", link)
    sourcefile.write_atomic(link, sourcefile.read(link), "x = 2\n")
    assert link.is_symlink() and real.read_text() == "x = 2\n"


def test_a_bom_in_text_is_not_code():
    source = "\ufeffimport torch\nx = torch.ones(1).cuda()\n"
    fixed = fix_source(source, "t.py").source
    assert fixed.startswith("\ufeffimport torch\n") and fixed.count("\ufeff") == 1 and ".cuda()" not in fixed
