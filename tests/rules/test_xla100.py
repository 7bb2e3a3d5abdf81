"""XLA100 unused-noqa on whole scripts, with every rule at work (a noqa is used only
when another rule's finding is there to hide): findings, the fix, and the engine's
part (suppressions recorded, fix controls, the check path's JSON edits)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from support import run_cli

from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA100"
CODE = "XLA100"


def unused(source: str, settings: Settings | None = None) -> list[tuple[int, int, str]]:
    return [
        (f.span.line, f.span.col + 1, f.message)
        for f in lint_source(source, "t.py", settings or Settings())
        if f.code == CODE
    ]


def test_findings_on_a_script_with_stale_comments():
    source = (FIXTURES / "stale_comments.py").read_text()
    assert unused(source) == [
        (7, 43, "Unused `noqa` directive (unused: `XLA104`)"),
        (11, 28, "Unused `noqa` directive (unused: `XLA102`)"),
        (12, 41, "Unused `noqa` directive (unused: `XLA104`)"),
        (13, 58, "Unused `noqa` directive (unknown: `XLA999`)"),
    ]


def test_fix_removes_the_unused_codes_and_a_second_fix_changes_nothing():
    path = FIXTURES / "stale_comments.py"
    result = fix_source(path.read_text(), str(path), Settings())
    assert result.error is None
    assert result.source == (FIXTURES / "stale_comments.fixed.py").read_text()
    ast.parse(result.source)
    assert fix_source(result.source, str(path), Settings()).source == result.source
    # The suppressions that hid findings are still there, and still hide them.
    assert {f.code for f in lint_source(result.source, str(path), Settings())} == set()


def test_a_code_whose_rule_is_not_checked_here_is_not_called_unused():
    source = "import torch\nx = torch.ones(2).cuda()  # noqa: XLA104\n"
    assert unused(source, Settings(select=("XLA100",))) == []
    assert unused(source, Settings(per_file_ignores=(("t.py", ("XLA104",)),))) == []
    assert unused(source, Settings(ignore=("XLA100",))) == []
    # With the rule at work the code is used.
    assert unused(source) == []
    assert unused("import torch\nx = torch.ones(2)  # noqa: XLA104\n", Settings(select=("XLA100",))) == []


def test_one_finding_per_comment_naming_each_unused_code_once():
    source = "import torch\nx = torch.ones(2)  # noqa: XLA104, XLA201, xla104\n"
    assert unused(source) == [(2, 20, "Unused `noqa` directive (unused: `XLA104`, `XLA201`)")]
    fixed = fix_source(source, "t.py", Settings()).source
    assert fixed == "import torch\nx = torch.ones(2)\n"


def test_a_comment_that_stands_for_the_lines_continuing_onto_it_is_used():
    source = 'import torch\nx = torch.ones(2).cuda() + \\\n    1  # noqa: XLA104\ny = f"""\n"""  # noqa: XLA104\n'
    assert unused(source) == [(5, 6, "Unused `noqa` directive (unused: `XLA104`)")]


def test_unfixable_turns_the_fix_off():
    source = "import torch\nx = torch.ones(2)  # noqa: XLA104\n"
    findings = lint_source(source, "t.py", Settings(unfixable=("XLA100",)))
    assert [(f.code, f.fix) for f in findings] == [(CODE, None)]


def test_json_gives_the_fix_as_an_edit_of_the_comment(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("import torch\nx = torch.ones(2)  # type: int  # noqa: E501, XLA104  # ok\n")
    result = run_cli("check", "--no-cache", "--output-format", "json", str(path))
    (finding,) = json.loads(result.stdout)
    assert finding["code"] == CODE and finding["fix"]["applicability"] == "safe"
    assert finding["fix"]["edits"] == [
        {
            "content": "# type: int  # noqa: E501  # ok",
            "location": {"row": 2, "column": 20},
            "end_location": {"row": 2, "column": 59},
        }
    ]


def test_a_malformed_code_is_a_warning_not_a_finding(tmp_path):
    path = tmp_path / "a.py"
    path.write_text("import torch\nx = torch.ones(2).cuda()  # noqa: XLA1O4, XLA104\n")
    result = run_cli("check", "--no-cache", "--output-format", "concise", str(path))
    assert result.returncode == 0, result.stdout
    assert result.stderr.decode().splitlines() == [
        f"warning: {path}:2: malformed code `XLA1O4` in `# noqa` (a code is letters then digits, e.g. `XLA104`):"
        " it suppresses nothing"
    ]


def test_a_long_code_list_is_read_once():
    """A comment's codes are worked out once, not per finding that asks (a line with many
    findings under a long list would otherwise cost their product)."""
    from xlalint.engine.noqa import directives, without_codes

    codes = [f"XLA{n:03d}" for n in range(1000)]
    line = "x = 1  # noqa: " + ", ".join(["E501", *codes, "W291"])
    (directive,) = directives(line + "\n")
    assert directive.codes is directive.codes
    start, end, text = without_codes(directive, set(codes), line)
    assert line[:start] + text + line[end:] == "x = 1  # noqa: E501, W291"
