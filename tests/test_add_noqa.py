"""`check --add-noqa`: every finding suppressed where the suppression is honoured."""

from __future__ import annotations

import json
import textwrap

from support import CUDA_SCRIPT, run_cli

from xlalint.engine.lint import lint_source
from xlalint.engine.noqa import add_noqa


def adds(source: str) -> str:
    source = textwrap.dedent(source)
    new, _ = add_noqa(source, lint_source(source, "t.py"))
    assert lint_source(new, "t.py") == [], new  # every finding is now suppressed
    assert add_noqa(new, lint_source(new, "t.py")) == (new, 0)  # and a second run changes nothing
    return new


def test_adds_a_comment_per_line_and_merges_codes():
    new = adds(
        """\
        import torch
        x = torch.ones(2).cuda()
        y = torch.ones(2).cuda(); z = y.cuda()
        w = x.cuda()  # keep on device
        v = x.cuda()  # noqa: E501
        """
    )
    assert new.splitlines()[1:] == [
        "x = torch.ones(2).cuda()  # noqa: XLA104",
        "y = torch.ones(2).cuda(); z = y.cuda()  # noqa: XLA104",
        "w = x.cuda()  # keep on device  # noqa: XLA104",
        "v = x.cuda()  # noqa: E501, XLA104",
    ]


def test_a_finding_in_a_multi_line_string_statement_goes_to_a_line_that_can_hold_a_comment():
    new = adds(
        '''\
        import torch
        x = torch.ones(2).cuda(
        ), f"""
        text
        """
        y = torch.ones(2) + \\
            torch.ones(2).cuda()
        z = torch.ones(2).cuda() + \\
            1
        '''
    )
    lines = new.splitlines()
    assert lines[1] == "x = torch.ones(2).cuda(  # noqa: XLA104"
    assert lines[3] == "text" and lines[4] == '"""'  # the string is untouched
    assert lines[5].endswith("\\") and lines[6].endswith("torch.ones(2).cuda()  # noqa: XLA104")
    # The first line ends in a backslash: the comment goes on the statement's last line.
    assert lines[7].endswith("\\") and lines[8] == "    1  # noqa: XLA104"


def test_a_line_where_a_multi_line_string_ends_can_hold_the_comment():
    new = adds(
        '''\
        import torch
        s = """
        """; m = torch.nn.Linear(2, 2).cuda(
        )
        '''
    )
    assert new.splitlines()[2] == '"""; m = torch.nn.Linear(2, 2).cuda(  # noqa: XLA104'


def test_a_statement_that_ends_where_a_multi_line_string_starts_gets_the_comment_after_the_string():
    # As ruff: the statement's only lines are inside the string, so the comment goes
    # after the closing quotes, where it is a comment and check honours it.
    source = textwrap.dedent(
        '''\
        import torch
        m = torch.nn.Linear(2, 2).cuda(); doc = """
        # noqa: XLA104 is text here
        """
        y = torch.ones(2).cuda(); z = 1 + \\
            2
        '''
    )
    new = adds(source)
    assert new.splitlines()[1:] == [
        'm = torch.nn.Linear(2, 2).cuda(); doc = """',
        "# noqa: XLA104 is text here",
        '"""  # noqa: XLA104',
        "y = torch.ones(2).cuda(); z = 1 + \\",
        "    2  # noqa: XLA104",
    ]
    assert new.replace('"""  # noqa: XLA104', '"""').replace("2  # noqa: XLA104", "2") == source


def test_a_noqa_after_a_multi_line_string_suppresses_only_the_lines_that_run_into_it():
    source = textwrap.dedent(
        '''\
        import torch
        a = torch.ones(2).cuda()
        b = torch.ones(2).cuda(); s = """
        """  # noqa: XLA104
        c = torch.ones(2).cuda()
        '''
    )
    assert [f.span.line for f in lint_source(source, "t.py")] == [2, 5]


def test_cli_add_noqa_then_check_passes_and_a_second_run_changes_nothing(tmp_path):
    (tmp_path / "train.py").write_text(CUDA_SCRIPT + 'm = torch.nn.Linear(2, 2).cuda(); doc = """\nText.\n"""\n')
    first = run_cli("check", "--add-noqa", ".", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stderr.decode().strip() == "Added 3 noqa directives."
    text = (tmp_path / "train.py").read_text()
    assert text.count("# noqa: XLA104") == 3 and text.endswith('doc = """\nText.\n"""  # noqa: XLA104\n')
    assert run_cli("check", "--no-cache", ".", cwd=tmp_path).returncode == 0
    second = run_cli("check", "--add-noqa", ".", cwd=tmp_path)
    assert second.stderr.decode().strip() == "Added 0 noqa directives."
    assert (tmp_path / "train.py").read_text() == text


def test_cli_add_noqa_refuses_stdin_and_fix(tmp_path):
    result = run_cli("check", "--add-noqa", "--fix", ".", cwd=tmp_path)
    assert result.returncode == 2 and "--add-noqa" in result.stderr.decode()


def test_an_existing_comment_keeps_every_code_and_its_text_byte_for_byte():
    """`# noqa: XLA1O4, E501` (a malformed code) once became `# noqa: XLA1, XLA104O4, E501`:
    the new code goes after the whole list, and nothing else of the comment changes."""
    source = textwrap.dedent(
        """\
        import torch
        a = torch.ones(2).cuda()  # noqa: XLA1O4, E501
        b = torch.ones(2).cuda()  # noqa:E501,W291   trailing words
        c = torch.ones(2).cuda()  # type: ignore  # NOQA : e501 # why
        """
    )
    new, count = add_noqa(source, lint_source(source, "t.py"))
    assert count == 3
    assert new.splitlines()[1:] == [
        "a = torch.ones(2).cuda()  # noqa: XLA1O4, E501, XLA104",
        "b = torch.ones(2).cuda()  # noqa:E501,W291, XLA104   trailing words",
        "c = torch.ones(2).cuda()  # type: ignore  # NOQA : e501, XLA104 # why",
    ]
    assert lint_source(new, "t.py") == []
    assert add_noqa(new, lint_source(new, "t.py")) == (new, 0)


def test_the_codes_after_a_malformed_code_still_suppress():
    source = "import torch\nx = torch.ones(2).cuda()  # noqa: XLA1O4, XLA104\n"
    assert lint_source(source, "t.py") == []


def test_add_noqa_leaves_out_the_findings_that_exist_only_after_the_port(tmp_path):
    """Issue 41: suppressing XLA104 means no port, so XLA201 (`torch.save` "after the
    port") is not there either: a `# noqa: XLA201` would be unused (XLA100), and a
    second run wrote `# noqa: XLA201, XLA100`. Now `check` passes after one run, on a
    notebook too, and a second run changes nothing."""
    script = CUDA_SCRIPT + 'torch.save(model.state_dict(), "m.pt")\n'
    (tmp_path / "train.py").write_text(script)
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": script}]
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "nb.ipynb").write_text(json.dumps(notebook))
    before = run_cli("check", "--no-cache", "--output-format", "json", ".", cwd=tmp_path)
    assert "XLA201" in {f["code"] for f in json.loads(before.stdout)}
    first = run_cli("check", "--add-noqa", ".", cwd=tmp_path)
    assert first.stderr.decode().strip() == "Added 4 noqa directives.", first.stderr
    text = (tmp_path / "train.py").read_text()
    assert "XLA201" not in text and text.count("# noqa: XLA104") == 2
    check = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    assert check.returncode == 0, check.stdout
    second = run_cli("check", "--add-noqa", ".", cwd=tmp_path)
    assert second.stderr.decode().strip() == "Added 0 noqa directives."
    assert (tmp_path / "train.py").read_text() == text
