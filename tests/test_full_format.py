"""The `full` output format: the default of `check` on a terminal, a code frame per
finding (source lines, caret span, `help:`), colour on a terminal only (NO_COLOR,
FORCE_COLOR), a diff preview with --show-fixes, cell-relative frames in notebooks; and
`concise`, the default when stdout is not a terminal."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import nbformat
from support import CUDA_SCRIPT, run_cli, run_on_terminal

ESC = "\x1b["
PLAIN = {"NO_COLOR": "", "FORCE_COLOR": ""}  # neither set: piped output has no colour
FRAME = textwrap.dedent(
    """\
    XLA104 [*] `.cuda()` moves to a CUDA device: use `.to(torch_xla.device())`
     --> train.py:3:9
      |
    1 | import torch
    2 |
    3 | model = torch.nn.Linear(4, 2).cuda()
      |         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^
    4 | x = torch.ones(3, 4)
    5 | y = model(x.cuda())
      |
    help: Use `.to(torch_xla.device())`

    XLA104 [*] `.cuda()` moves to a CUDA device: use `.to(torch_xla.device())`
     --> train.py:5:11
      |
    3 | model = torch.nn.Linear(4, 2).cuda()
    4 | x = torch.ones(3, 4)
    5 | y = model(x.cuda())
      |           ^^^^^^^^
      |
    help: Use `.to(torch_xla.device())`

    Found 2 errors.
    [*] 2 fixable with `xlalint fix`.
    """
)


def on_terminal(*args: str, cwd, env: dict | None = None) -> tuple[int, str]:
    """Run the command line with its stdout on a pseudo-terminal; what it printed."""
    return run_on_terminal([sys.executable, "-m", "xlalint", *args], cwd=cwd, env=env)


def test_full_frame_caret_and_help(tmp_path):
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    result = run_cli("check", "--no-cache", "--output-format", "full", "train.py", cwd=tmp_path, env=PLAIN)
    assert result.returncode == 1
    assert result.stdout.decode() == FRAME  # piped: no colour


def test_default_is_full_with_colour_on_a_terminal_and_concise_when_piped(tmp_path):
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    env = {"NO_COLOR": None, "FORCE_COLOR": None, "TERM": "xterm"}
    status, shown = on_terminal("check", "--no-cache", "train.py", cwd=tmp_path, env=env)
    assert status == 1
    assert ESC in shown and "--> " in shown and "^^^^" in shown
    plain = shown
    while ESC in plain:  # the same text once the colour codes are taken out
        start = plain.index(ESC)
        plain = plain[:start] + plain[plain.index("m", start) + 1 :]
    assert plain == FRAME

    piped = run_cli("check", "--no-cache", "train.py", cwd=tmp_path, env=PLAIN)
    assert piped.stdout.decode().splitlines()[:3] == [
        "train.py:3:9: XLA104 [*] `.cuda()` moves to a CUDA device: use `.to(torch_xla.device())`",
        "train.py:5:11: XLA104 [*] `.cuda()` moves to a CUDA device: use `.to(torch_xla.device())`",
        "Found 2 errors.",
    ]


def test_no_color_and_force_color(tmp_path):
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    status, shown = on_terminal("check", "--no-cache", "train.py", cwd=tmp_path, env={"NO_COLOR": "1"})
    assert status == 1
    assert ESC not in shown and shown == FRAME
    forced = run_cli(
        "check",
        "--no-cache",
        "--output-format",
        "full",
        "train.py",
        cwd=tmp_path,
        env={"NO_COLOR": "", "FORCE_COLOR": "1"},
    )
    assert ESC in forced.stdout.decode()
    both = {"FORCE_COLOR": "1", "NO_COLOR": "1"}  # NO_COLOR wins (no-color.org)
    assert (
        ESC
        not in run_cli(
            "check", "--no-cache", "--output-format", "full", "train.py", cwd=tmp_path, env=both
        ).stdout.decode()
    )
    # concise is coloured on a terminal, as ruff's (tests/test_ruff_controls.py), and
    # stays the exact one-line form without colour.
    _, shown = on_terminal("check", "--no-cache", "--output-format", "concise", "train.py", cwd=tmp_path)
    assert ESC in shown and re.sub(r"\x1b\[[0-9;]*m", "", shown).startswith("train.py:3:9: XLA104 [*] ")
    _, plain = on_terminal(
        "check", "--no-cache", "--output-format", "concise", "train.py", cwd=tmp_path, env={"NO_COLOR": "1"}
    )
    assert ESC not in plain and plain.startswith("train.py:3:9: XLA104 [*] ")


def test_show_fixes_previews_each_fix_as_a_diff(tmp_path):
    (tmp_path / "train.py").write_text(
        "import torch\nx = torch.ones(2).cuda()\nwith torch.cuda.amp.autocast():\n    pass\n"
    )
    args = ("check", "--no-cache", "--output-format", "full", "--show-fixes", "train.py")
    shown = run_cli(*args, cwd=tmp_path, env=PLAIN).stdout.decode()
    assert (
        textwrap.dedent(
            """\
        help: Use `.to(torch_xla.device())`
          |
        1 | import torch
        2 - x = torch.ones(2).cuda()
          + import torch_xla
          +
          + x = torch.ones(2).to(torch_xla.device())
        3 | with torch.cuda.amp.autocast():
          |
        """
        )
        in shown
    )
    # The unsafe fix is previewed too, with a note saying so; its finding has no [*].
    assert '  + with torch.autocast("xla", dtype=torch.bfloat16):\n' in shown
    assert shown.count("note: This is an unsafe fix and may change runtime behavior") == 1
    assert "XLA104 CUDA autocast" in shown


def test_multiline_span_is_marked_on_each_line(tmp_path):
    source = "import torch\n\nmodel = torch.nn.Sequential(\n    torch.nn.Linear(2, 2),\n).cuda()\nx = 1\n"
    (tmp_path / "m.py").write_text(source)
    shown = run_cli("check", "--no-cache", "--output-format", "full", "m.py", cwd=tmp_path, env=PLAIN).stdout.decode()
    assert (
        textwrap.dedent(
            """\
          |
        1 |   import torch
        2 |
        3 | / model = torch.nn.Sequential(
        4 | |     torch.nn.Linear(2, 2),
        5 | | ).cuda()
          | |________^
        6 |   x = 1
          |
        """
        )
        in shown
    )


def test_tabs_and_wide_characters_keep_the_caret_under_the_code(tmp_path):
    (tmp_path / "t.py").write_text("import torch\nif True:\n\tx = ('日本', torch.ones(2).cuda())\n")
    shown = run_cli("check", "--no-cache", "--output-format", "full", "t.py", cwd=tmp_path, env=PLAIN).stdout.decode()
    line = next(row for row in shown.splitlines() if row.startswith("3 |"))
    caret = next(row for row in shown.splitlines() if "^" in row)
    assert line == "3 |     x = ('日本', torch.ones(2).cuda())"
    # '日本' takes four columns on a terminal: the carets start under `torch`.
    assert caret == "  |" + " " * (len("     x = ('日本', ") + 2) + "^" * len("torch.ones(2).cuda()")


def test_notebook_frames_are_cell_relative(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# title"),
        nbformat.v4.new_code_cell("import torch"),
        nbformat.v4.new_code_cell("%matplotlib inline\nx = torch.ones(2)\ny = x.cuda()\nprint(y)"),
    ]
    nbformat.write(nb, str(tmp_path / "nb.ipynb"))
    args = ("check", "--no-cache", "--output-format", "full", "--show-fixes", "nb.ipynb")
    shown = run_cli(*args, cwd=tmp_path, env=PLAIN).stdout.decode()
    assert shown.startswith(
        textwrap.dedent(
            """\
            XLA104 [*] `.cuda()` moves to a CUDA device: use `.to(torch_xla.device())`
             --> nb.ipynb:cell 3:3:5
              |
            1 | %matplotlib inline
            2 | x = torch.ones(2)
            3 | y = x.cuda()
              |     ^^^^^^^^
            4 | print(y)
              |
            help: Use `.to(torch_xla.device())`
              |
              | cell 2
            1 | import torch
              + import torch_xla
              | cell 3
            2 | x = torch.ones(2)
            3 - y = x.cuda()
              + y = x.to(torch_xla.device())
            4 | print(y)
              |
            """
        )
    )
    assert "xlalint-notebook-cell" not in shown


def test_quiet_full_prints_the_findings_only(tmp_path):
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    shown = run_cli(
        "check", "-q", "--no-cache", "--output-format", "full", "train.py", cwd=tmp_path, env=PLAIN
    ).stdout.decode()
    assert shown == FRAME.split("Found")[0]


def test_concise_check_does_not_import_rich(tmp_path):
    (tmp_path / "a.py").write_text(CUDA_SCRIPT)
    code = (
        "import sys\nfrom xlalint.cli import main\nsys.argv = ['xlalint', 'check', '--no-cache', 'a.py']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\nsys.stdout.flush()\n"
        "sys.stderr.write('RICH:' + str(any(m == 'rich' or m.startswith('rich.') for m in sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "a.py:3:9: XLA104" in result.stdout
    assert result.stderr.strip().endswith("RICH:False"), result.stderr
