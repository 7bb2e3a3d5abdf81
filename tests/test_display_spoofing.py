"""Display spoofing (issue 40 §5): `fix --diff` printed bidi controls raw and a lone CR
ended a diff line (the next one drawn over it); the `run` report copied raw escape
sequences from the script's output to its own. Escaped as the other formats do."""

from __future__ import annotations

from support import run_cli

from xlalint.engine.escaping import diff_line
from xlalint.harness.report import format_diff, format_run
from xlalint.harness.results import RunResult

# A `.cuda()` to fix, a string whose bidi override and isolates reorder the line on a
# terminal, and a lone CR in a comment: Python's line ends there, and on a terminal the
# next text is drawn over it.
SPOOFS = (
    "import torch\n"
    "\n"
    'access = "user\u202e \u2066# admin\u2069 \u2066"\n'
    "x = torch.ones(3).cuda()  # moved\rx = torch.ones(3)\n"
)
RAW = ("\u202e", "\u2066", "\u2069", "\x1b", "\x07")


def test_fix_diff_escapes_bidi_controls_and_a_lone_carriage_return(tmp_path):
    path = tmp_path / "spoof.py"
    path.write_bytes(SPOOFS.encode())
    done = run_cli("fix", "--diff", "--no-cache", str(path), cwd=tmp_path)
    out = done.stdout.decode()
    assert done.returncode == 1 and "+x = torch.ones(3).to(torch_xla.device())  # moved\\r\n" in out
    assert not any(raw in out for raw in RAW)
    assert "\r" not in out  # the file's lines end in \n: no carriage return is left to act
    assert ' access = "user\\u202e \\u2066# admin\\u2069 \\u2066"\n' in out  # a context line
    assert path.read_bytes() == SPOOFS.encode()


def test_a_crlf_diff_line_keeps_its_line_end_and_still_applies():
    assert diff_line("+x = 1\r\n") == "+x = 1\r\n"
    assert diff_line("+x = 1\n") == "+x = 1\n"
    assert diff_line("+old mac\r") == "+old mac\\r\n"


HOSTILE = "step 1\n\x1b]0;pwned\x07\x1b[2Jloss \x1b[31mNaN\x1b[0m\n\u202eevil\n"


def test_the_run_report_escapes_what_the_script_printed():
    run = RunResult("fixed", "fixed", 1, 1.0, None, [], stderr_tail=HOSTILE, stdout_tail=HOSTILE)
    text = "\n".join(format_run(run))
    assert not any(raw in text for raw in RAW)
    assert "    \\x1b]0;pwned\\x07\\x1b[2Jloss \\x1b[31mNaN\\x1b[0m" in text.splitlines()
    assert text.count("\\u202eevil") == 2


def test_the_run_reports_diff_of_the_fix_is_escaped():
    shown = format_diff('+access = "\u202e"\n-x = 1  # \x1b[2J\n', paint=lambda text, style: text)
    assert shown[1:] == ['  +access = "\\u202e"', "  -x = 1  # \\x1b[2J"]
