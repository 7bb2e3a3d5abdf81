"""Issue 41: what a ruff user reaches for, and numbers that agree. Where the behaviour
is ruff's, the test runs ruff 0.17.6 (the shared venv's) on the same input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
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


# --- compared with ruff 0.17.6 ----------------------------------------------------------
RUFF = Path(sys.executable).parent / "ruff"
TWO_FILES = {"u.py": "import torch\nimport os\nx = torch.ones(1).cuda()\n", "v.py": "import os\n"}


def ruff(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """Real ruff on the same input (F401 stands in for an XLA rule)."""
    assert RUFF.is_file(), "the test venv has ruff 0.17.6"
    environment = {**os.environ, "NO_COLOR": "", "FORCE_COLOR": "", **(env or {})}
    return subprocess.run(
        [str(RUFF), "check", "--no-cache", "--isolated", "--select", "F401", *args],
        cwd=cwd,
        capture_output=True,
        env=environment,
        check=False,
    )


def ours(*args: str, cwd: Path, env: dict | None = None):
    return run_cli("check", "--no-cache", *args, cwd=cwd, env={"NO_COLOR": "", "FORCE_COLOR": "", **(env or {})})


def shape(text: str, code: str) -> list[str]:
    """The output with each finding's code and message made alike: the layout remains."""
    text = text.replace(code, "CODE").replace("`xlalint fix`", "`--fix`")
    message = re.compile(r"(CODE\]?(?:\x1b\[0m)?(?: \[\S*\])?) .*")
    return [message.sub(r"\1 MESSAGE", line) for line in text.splitlines()]


def write(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


# The same places in both: ruff's F401 at 1:8, 12:8 (u.py) and 2:8 (v.py), ours XLA104
# (no fix on a `;` line: ruff's is made unfixable).
RUFF_FILES = {"u.py": "import os\n" + "x = 1\n" * 10 + "import sys\n", "v.py": "x = 1\nimport os\n"}
SYNC = "x = 1; torch.cuda.synchronize()\n"
OUR_FILES = {"u.py": SYNC + "import torch\n" + "x = 1\n" * 9 + SYNC, "v.py": "import torch\n" + SYNC}


def both(tmp_path: Path, *args: str, env: dict | None = None) -> tuple[str, str]:
    (tmp_path / "ruff").mkdir()
    (tmp_path / "ours").mkdir()
    write(tmp_path / "ruff", RUFF_FILES)
    write(tmp_path / "ours", OUR_FILES)
    theirs = ruff("--unfixable", "F401", *args, "u.py", "v.py", cwd=tmp_path / "ruff", env=env)
    mine = ours("--select", "XLA104", *args, "u.py", "v.py", cwd=tmp_path / "ours", env=env)
    assert theirs.returncode == mine.returncode == 1, (theirs.stderr, mine.stderr)
    return shape(theirs.stdout.decode(), "F401"), shape(mine.stdout.decode(), "XLA104")


def test_grouped_is_ruffs(tmp_path):
    theirs, mine = both(tmp_path, "--output-format", "grouped")
    assert mine == theirs
    assert mine[:3] == ["u.py:", "   1:8 CODE MESSAGE", "  12:8 CODE MESSAGE"]


def test_pylint_is_ruffs(tmp_path):
    theirs, mine = both(tmp_path, "--output-format", "pylint")
    assert mine == theirs
    assert mine[0] == "u.py:1: [CODE] MESSAGE"


def test_concise_is_coloured_as_ruffs_when_forced(tmp_path):
    theirs, mine = both(tmp_path, "--output-format", "concise", env={"FORCE_COLOR": "1"})
    assert "\x1b[" in mine[0]
    assert mine == theirs


def test_statistics_ends_with_the_summary_as_ruffs(tmp_path):
    theirs, mine = both(tmp_path, "--statistics")
    assert theirs[-1] == "Found 3 errors."
    assert mine[-1] == theirs[-1]


def test_output_format_from_the_environment_as_ruffs(tmp_path):
    theirs, mine = both(tmp_path, env={"RUFF_OUTPUT_FORMAT": "grouped", "XLALINT_OUTPUT_FORMAT": "grouped"})
    assert mine == theirs and mine[0] == "u.py:"
    # The command line's option wins over the environment, as ruff's.
    result = ours("--select", "XLA104", "--output-format", "pylint", "v.py", cwd=tmp_path / "ours",
                  env={"XLALINT_OUTPUT_FORMAT": "grouped"})  # fmt: skip
    assert result.stdout.decode().startswith("v.py:2: [XLA104]")


# --- suppressions that stay suppressed ------------------------------------------------------
def test_a_file_level_noqa_is_ruffs(tmp_path):
    """`# xlalint: noqa` on a line of its own exempts the file, anywhere in it, as
    `# ruff: noqa`; `# xlalint: noqa: CODES` exempts those codes."""
    write(tmp_path, {"r.py": "import os\n# ruff: noqa\n"})
    assert ruff("r.py", cwd=tmp_path).returncode == 0
    write(tmp_path, {"a.py": "import torch\nx = torch.ones(1).cuda()\n# xlalint: noqa\n"})
    write(tmp_path, {"b.py": "# xlalint: noqa: XLA104\nimport torch\nx = torch.ones(1).cuda()\n"})
    assert ours("a.py", "b.py", cwd=tmp_path).returncode == 0
    write(tmp_path, {"c.py": "# xlalint: noqa: XLA201\nimport torch\nx = torch.ones(1).cuda()\n"})
    assert ours("c.py", cwd=tmp_path).returncode == 1


def test_an_unknown_file_level_directive_is_warned_about(tmp_path):
    write(tmp_path, {"d.py": "import torch\n# xlalint: disable\nx = torch.ones(1).cuda()\n"})
    result = ours("--output-format", "concise", "d.py", cwd=tmp_path)
    assert result.returncode == 1
    [warning] = result.stderr.decode().splitlines()
    assert warning.startswith("warning: d.py:2: unknown directive `# xlalint: disable`")
    assert warning.endswith("it suppresses nothing")


def test_show_settings_without_a_path_is_for_the_folder_as_ruffs(tmp_path):
    write(tmp_path, {"t.py": "import torch\n"})
    assert ruff("--show-settings", cwd=tmp_path).returncode == 0
    result = run_cli("check", "--show-settings", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().startswith("Resolved settings for: .")


# --- the controls ruff has --------------------------------------------------------------------
def test_exclude_replaces_the_configs_exclude_as_ruffs(tmp_path):
    for folder, files, config in (
        ("ruff", RUFF_FILES, '[tool.ruff]\nexclude = ["u.py"]\n'),
        ("ours", OUR_FILES, '[tool.xlalint]\nexclude = ["u.py"]\n'),
    ):
        (tmp_path / folder).mkdir()
        write(tmp_path / folder, {**files, "pyproject.toml": config})
    run_ruff = [str(RUFF), "check", "--no-cache", "--select", "F401", "--output-format", "concise"]

    def checked(args, folder):
        if folder == "ruff":
            out = subprocess.run([*run_ruff, *args, "."], cwd=tmp_path / folder, capture_output=True, check=False)
        else:
            out = ours("--select", "XLA104", "--output-format", "concise", *args, ".", cwd=tmp_path / folder)
        return sorted({line.split(":")[0] for line in out.stdout.decode().splitlines() if ".py:" in line})

    for args in ([], ["--exclude", "v.py"], ["--exclude", "v.py", "--extend-exclude", "u.py"]):
        assert checked(args, "ours") == checked(args, "ruff"), args
    assert checked(["--exclude", "v.py"], "ours") == ["u.py"]


def test_config_key_value_and_isolated_as_ruffs(tmp_path):
    """`--config KEY=VALUE` goes on top of the config file; `--isolated` reads none."""
    (tmp_path / "ruff").mkdir()
    (tmp_path / "ours").mkdir()
    write(tmp_path / "ruff", {**RUFF_FILES, "pyproject.toml": '[tool.ruff.lint]\nselect = ["E501"]\n'})
    write(tmp_path / "ours", {**OUR_FILES, "pyproject.toml": '[tool.xlalint]\nselect = ["XLA2"]\n'})

    def status(program, *args):
        if program == "ruff":
            command = [str(RUFF), "check", "--no-cache", *args, "u.py"]
            return subprocess.run(command, cwd=tmp_path / "ruff", capture_output=True, check=False).returncode
        return run_cli("check", "--no-cache", *args, "u.py", cwd=tmp_path / "ours").returncode

    assert status("ruff") == status("ours") == 0  # the config selects nothing that fires
    assert status("ruff", "--config", 'lint.select = ["F401"]') == 1
    assert status("ours", "--config", 'select = ["XLA104"]') == 1
    assert status("ruff", "--isolated") == status("ours", "--isolated") == 1  # the defaults
    bad = run_cli("check", "--config", "select = [", "u.py", cwd=tmp_path / "ours")
    assert bad.returncode == 2 and "neither a file nor a TOML `KEY = VALUE`" in bad.stderr.decode()
    both_ways = run_cli("check", "--isolated", "--config", "pyproject.toml", "u.py", cwd=tmp_path / "ours")
    assert both_ways.returncode == 2 and "--isolated" in both_ways.stderr.decode()
    unknown = run_cli("check", "--config", "selct = []", "u.py", cwd=tmp_path / "ours")
    assert unknown.returncode == 2 and "--config: unknown key `selct`" in unknown.stderr.decode()


def test_output_file_as_ruffs(tmp_path):
    """The report goes to the file (its folder made), nothing to stdout, the same status."""
    (tmp_path / "ruff").mkdir()
    (tmp_path / "ours").mkdir()
    write(tmp_path / "ruff", RUFF_FILES)
    write(tmp_path / "ours", OUR_FILES)
    theirs = ruff("--output-format", "json", "--output-file", "out/r.json", ".", cwd=tmp_path / "ruff")
    mine = ours("--select", "XLA104", "--output-format", "json", "--output-file", "out/r.json", ".",
                cwd=tmp_path / "ours")  # fmt: skip
    assert theirs.returncode == mine.returncode == 1
    assert theirs.stdout == mine.stdout == b""
    reports = [json.loads((tmp_path / d / "out" / "r.json").read_text()) for d in ("ruff", "ours")]
    assert [len(r) for r in reports] == [3, 3]
    assert not [p for p in (tmp_path / "ours" / "out").iterdir() if p.name != "r.json"]  # no temp file left


def test_check_diff_as_ruffs(tmp_path):
    """`check --diff`: the fixes as a diff, nothing written, exit 1 when there are some."""
    write(tmp_path, {"r.py": "import os\n", "t.py": "import torch\nx = torch.ones(1).cuda()\n"})
    theirs = ruff("--diff", "r.py", cwd=tmp_path)
    mine = run_cli("check", "--no-cache", "--diff", "t.py", cwd=tmp_path)
    assert theirs.returncode == mine.returncode == 1
    assert theirs.stdout.decode().splitlines()[0].endswith("r.py") and b"-import os" in theirs.stdout
    assert mine.stdout.decode().splitlines()[0].endswith("t.py") and b"+x = torch.ones(1).to(" in mine.stdout
    assert (tmp_path / "t.py").read_text() == "import torch\nx = torch.ones(1).cuda()\n"


def test_watch_runs_again_after_each_change_once_the_files_are_quiet():
    from xlalint.engine.watch import watch

    # Polls: unchanged, changed (a), still changing (b), quiet (b), unchanged, changed (c), quiet (c).
    snapshots = iter([{"f": (1, 1)}, {"f": (1, 1)}, {"f": (2, 2)}, {"f": (3, 3)}, {"f": (3, 3)},
                      {"f": (3, 3)}, {"f": (4, 4)}, {"f": (4, 4)}])  # fmt: skip
    runs, said = [], []
    made = watch(
        lambda: runs.append(1), lambda: next(snapshots), said.append, interval=0, rounds=3, sleep=lambda _: None
    )
    assert made == len(runs) == 3
    assert said[0].endswith("Starting linter in watch mode...")
    assert [line.split("] ")[1] for line in said[1:]] == ["File change detected..."] * 2


def test_watch_checks_again_when_a_file_changes(tmp_path):
    write(tmp_path, {"t.py": "import torch\nx = torch.ones(1)\n"})
    command = [sys.executable, "-m", "xlalint.cli", "check", "--no-cache", "--watch", "--output-format", "concise", "."]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "NO_COLOR": "1"})  # fmt: skip
    try:
        assert process.stdout.readline() == b"All checks passed!\n"
        (tmp_path / "t.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
        assert process.stdout.readline().startswith(b"t.py:2:5: XLA104")
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert b"File change detected..." in process.stderr.read()


def test_version_names_the_torch_and_torch_xla_it_targets(tmp_path):
    import tomllib

    from xlalint import __version__
    from xlalint.engine.targets import HARNESS_PINS

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["harness"]
    assert sorted(extra) == sorted(f"{name.replace('_', '-')}=={pin}" for name, pin in HARNESS_PINS.items())
    lines = run_cli("version", cwd=tmp_path).stdout.decode().splitlines()
    assert lines[0] == f"xlalint {__version__}"
    assert lines[1] == "rules target torch_xla 2.9 (target-version 1.5 to 2.9)"
    assert lines[2].startswith("harness (xlalint run): torch 2.9.0, torch_xla 2.9.0 (installed here: ")
    info = json.loads(run_cli("version", "--output-format", "json", cwd=tmp_path).stdout)
    assert info["harness"] == {"torch": "2.9.0", "torch_xla": "2.9.0"} and info["version"] == __version__


def test_a_bad_output_format_names_the_environment_variable_only_when_it_came_from_there(tmp_path):
    write(tmp_path, {"t.py": "import torch\n"})
    bad = run_cli("check", "t.py", cwd=tmp_path, env={"XLALINT_OUTPUT_FORMAT": "fulll"})
    assert bad.returncode == 2
    assert "'--output-format' (env var: 'XLALINT_OUTPUT_FORMAT'): 'fulll'" in bad.stderr.decode()
    given = run_cli("check", "--output-format", "fulll", "t.py", cwd=tmp_path, env={"XLALINT_OUTPUT_FORMAT": ""})
    assert "'--output-format': 'fulll'" in given.stderr.decode() and "env var" not in given.stderr.decode()
