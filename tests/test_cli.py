"""The command line end to end: exit codes, formats, stdin, fix, diff, rule."""

from __future__ import annotations

import json
import os
import stat

from support import CUDA_SCRIPT


def write(tmp_path, name, text, mode="w"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def out(result) -> str:
    return result.stdout.decode()


def test_check_reports_and_exits_1(tmp_path, cli):
    write(tmp_path, "train.py", CUDA_SCRIPT)
    result = cli("check", "train.py", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    lines = out(result).splitlines()
    assert lines[0] == "train.py:3:9: XLA104 [*] " + lines[0].split(" [*] ", 1)[1]
    assert any(line.startswith("train.py:5:11: XLA104 [*]") for line in lines)
    assert "Found 2 errors." in out(result)


def test_clean_file_exits_0(tmp_path, cli):
    write(tmp_path, "ok.py", "import torch\nx = torch.ones(2)\n")
    result = cli("check", ".", cwd=tmp_path)
    assert result.returncode == 0
    assert "All checks passed!" in out(result)


def test_exit_zero_and_quiet(tmp_path, cli):
    write(tmp_path, "train.py", CUDA_SCRIPT)
    result = cli("check", "--exit-zero", "--quiet", "train.py", cwd=tmp_path)
    assert result.returncode == 0
    assert "Found" not in out(result)
    assert out(result).count("XLA104") == 2


def test_syntax_error_is_xla000_and_others_still_checked(tmp_path, cli):
    write(tmp_path, "broken.py", "import torch\ndef f(:\n")
    write(tmp_path, "train.py", CUDA_SCRIPT)
    result = cli("check", ".", cwd=tmp_path)
    assert result.returncode == 2
    text = out(result)
    assert "broken.py:2:7: XLA000 SyntaxError:" in text
    assert "train.py:3:9: XLA104" in text


def test_unreadable_inputs_are_one_line_each(tmp_path, cli):
    write(tmp_path, "latin.py", b"import torch\nname = '\xe9'\n")
    write(tmp_path, "nb.ipynb", '{"cells": [')
    result = cli("check", "latin.py", "nb.ipynb", "missing.py", cwd=tmp_path)
    assert result.returncode == 2
    lines = out(result).splitlines()
    assert any(line.startswith("latin.py:2:9: XLA000") and "UTF-8" in line for line in lines)
    assert any(line.startswith("nb.ipynb:1:1: XLA000") and "notebook" in line for line in lines)
    assert any(line.startswith("missing.py:1:1: XLA000") and "does not exist" in line for line in lines)


def test_json_fields_match_ruff(tmp_path, cli):
    write(tmp_path, "train.py", CUDA_SCRIPT)
    result = cli("check", "--output-format", "json", "train.py", cwd=tmp_path)
    assert result.returncode == 1
    data = json.loads(out(result))
    first = data[0]
    assert set(first) >= {"code", "message", "filename", "location", "end_location", "fix", "url", "noqa_row"}
    assert first["code"] == "XLA104"
    assert first["location"] == {"row": 3, "column": 9}
    assert first["end_location"]["row"] == 3
    assert first["filename"] == str(tmp_path / "train.py")
    assert first["fix"]["applicability"] == "safe"
    edits = first["fix"]["edits"]
    assert edits and all(set(e) == {"content", "location", "end_location"} for e in edits)
    assert any("torch_xla.device()" in e["content"] for e in edits)
    assert first["noqa_row"] == 3


def test_json_lines_and_concise(tmp_path, cli):
    write(tmp_path, "train.py", CUDA_SCRIPT)
    lines = out(cli("check", "--output-format", "json-lines", "train.py", cwd=tmp_path)).splitlines()
    assert len(lines) == 2 and all(json.loads(line)["code"] == "XLA104" for line in lines)
    concise = out(cli("check", "--output-format", "concise", "train.py", cwd=tmp_path)).splitlines()
    # As ruff's concise: one line a finding, then the summary (which -q leaves out).
    assert len(concise) == 4 and concise[0].startswith("train.py:3:9: XLA104") and concise[2] == "Found 2 errors."
    quiet = out(cli("check", "-q", "--output-format", "concise", "train.py", cwd=tmp_path)).splitlines()
    assert quiet == concise[:2]
    assert out(cli("check", "--output-format", "text", "train.py", cwd=tmp_path)).splitlines() == concise


def test_github_annotations(tmp_path, cli):
    write(tmp_path, "train.py", CUDA_SCRIPT)
    lines = out(cli("check", "--output-format", "github", "train.py", cwd=tmp_path)).splitlines()
    assert lines[0].startswith("::error title=xlalint (XLA104),file=train.py,line=3,col=9,endLine=3,endColumn=")
    assert "::train.py:3:9: XLA104 " in lines[0]


def test_junit(tmp_path, cli):
    import xml.etree.ElementTree as ET

    write(tmp_path, "train.py", CUDA_SCRIPT)
    root = ET.fromstring(out(cli("check", "--output-format", "junit", "train.py", cwd=tmp_path)))
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 2
    assert cases[0].get("name") == "org.xlalint.XLA104"
    assert cases[0].find("failure") is not None


def test_statistics(tmp_path, cli):
    write(tmp_path, "train.py", CUDA_SCRIPT)
    result = cli("check", "--statistics", "train.py", cwd=tmp_path)
    # As ruff's: the counts, then the summary.
    assert out(result).splitlines()[0].split() == ["2", "XLA104", "[*]", "cuda-device"]
    assert out(result).splitlines()[1:] == ["Found 2 errors.", "[*] 2 fixable with `xlalint fix`."]


def test_select_and_ignore(tmp_path, cli):
    write(tmp_path, "train.py", CUDA_SCRIPT)
    assert cli("check", "--ignore", "XLA104", "train.py", cwd=tmp_path).returncode == 0
    assert cli("check", "--select", "XLA1", "train.py", cwd=tmp_path).returncode == 1
    assert cli("check", "--select", "XLA101", "--extend-select", "XLA104", "train.py", cwd=tmp_path).returncode == 1
    bad = cli("check", "--select", "NOPE1", "train.py", cwd=tmp_path)
    assert bad.returncode == 2 and b"unknown rule selector `NOPE1`" in bad.stderr


def test_stdin(tmp_path, cli):
    result = cli("check", "-", stdin=CUDA_SCRIPT, cwd=tmp_path)
    assert result.returncode == 1
    assert out(result).startswith("-:3:9: XLA104")
    named = cli("check", "--stdin-filename", "src/train.py", stdin=CUDA_SCRIPT, cwd=tmp_path)
    assert out(named).startswith("src/train.py:3:9: XLA104")


def test_fix_stdin_writes_code_to_stdout(tmp_path, cli):
    result = cli("fix", "--stdin-filename", "train.py", stdin=CUDA_SCRIPT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    fixed = out(result)
    assert ".cuda()" not in fixed and "torch_xla.device()" in fixed
    assert "import torch_xla" in fixed


def test_fix_in_place_idempotent_and_keeps_file_properties(tmp_path, cli):
    crlf = ("# -*- coding: utf-8 -*-\n" + CUDA_SCRIPT).replace("\n", "\r\n").encode()
    path = write(tmp_path, "train.py", b"\xef\xbb\xbf" + crlf)
    os.chmod(path, 0o751)
    result = cli("fix", "--show-fixes", "train.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    assert b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert b".cuda()" not in data
    assert stat.S_IMODE(path.stat().st_mode) == 0o751
    assert "2 x XLA104 (cuda-device)" in out(result)
    again = cli("fix", "train.py", cwd=tmp_path)
    assert again.returncode == 0
    assert path.read_bytes() == data


def test_fix_diff_writes_nothing(tmp_path, cli):
    path = write(tmp_path, "train.py", CUDA_SCRIPT)
    result = cli("fix", "--diff", "train.py", cwd=tmp_path)
    assert result.returncode == 1
    assert "-model = torch.nn.Linear(4, 2).cuda()" in out(result)
    assert "+model = torch.nn.Linear(4, 2).to(torch_xla.device())" in out(result)
    assert path.read_text() == CUDA_SCRIPT


def test_check_fix_flag_is_fix(tmp_path, cli):
    path = write(tmp_path, "train.py", CUDA_SCRIPT)
    assert cli("check", "--fix", "train.py", cwd=tmp_path).returncode == 0
    assert ".cuda()" not in path.read_text()


def test_rule_command(cli):
    result = cli("rule", "XLA104")
    assert result.returncode == 0
    assert out(result).startswith("# cuda-device (XLA104)")
    everything = cli("rule", "--all")
    assert everything.returncode == 0 and "(XLA104)" in out(everything)
    as_json = json.loads(out(cli("rule", "XLA104", "--output-format", "json")))
    assert as_json["name"] == "cuda-device"
    unknown = cli("rule", "XLA999")
    assert unknown.returncode == 2 and b"unknown rule" in unknown.stderr


def test_gitignore_and_exclude(tmp_path, cli):
    write(tmp_path, ".gitignore", "generated/\n")
    write(tmp_path, "generated/train.py", CUDA_SCRIPT)
    write(tmp_path, "vendor/train.py", CUDA_SCRIPT)
    write(tmp_path, "pyproject.toml", '[tool.xlalint]\nexclude = ["vendor"]\n')
    (tmp_path / ".git").mkdir()
    assert cli("check", ".", cwd=tmp_path).returncode == 0
    # Named explicitly: checked, unless --force-exclude (what the pre-commit hook passes).
    assert cli("check", "vendor/train.py", cwd=tmp_path).returncode == 1
    assert cli("check", "--force-exclude", "vendor/train.py", cwd=tmp_path).returncode == 0


def test_files_without_torch_are_not_parsed(tmp_path, cli):
    write(tmp_path, "other.py", "x = 1\nthis is not python\n")
    assert cli("check", ".", cwd=tmp_path).returncode == 0


def test_check_does_not_import_heavy_modules(tmp_path):
    import subprocess
    import sys

    write(tmp_path, "train.py", CUDA_SCRIPT)
    code = (
        "import sys\n"
        "from xlalint.cli import main\n"
        "sys.argv = ['xlalint', 'check', '--exit-zero', '--no-cache', 'train.py']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torch_xla', 'libcst', 'transformers'))\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert "HEAVY []" in result.stdout, result.stdout + result.stderr


def test_cache_is_used_and_no_cache_skips_it(tmp_path, cli):
    write(tmp_path, "train.py", CUDA_SCRIPT)
    first = cli("check", "train.py", cwd=tmp_path)
    assert (tmp_path / ".xlalint_cache").is_dir()
    second = cli("check", "train.py", cwd=tmp_path)
    assert out(first) == out(second)
    # The cache is keyed by content: an edit is seen.
    write(tmp_path, "train.py", CUDA_SCRIPT.replace("x.cuda()", "x"))
    assert out(cli("check", "train.py", cwd=tmp_path)).count("XLA104") == 1
    assert cli("check", "--no-cache", "train.py", cwd=tmp_path).returncode == 1


def test_python_dash_m_runs_the_same_command_line(tmp_path):
    import subprocess
    import sys

    write(tmp_path, "train.py", CUDA_SCRIPT)
    result = subprocess.run(
        [sys.executable, "-m", "xlalint", "check", "--no-cache", "--output-format", "concise", "train.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stderr
    assert "train.py:3:" in result.stdout and "XLA104" in result.stdout


# -- help text (as ruff's) ----------------------------------------------------------------------
def help_of(cli, *command: str) -> str:
    result = cli(*command, "--help")
    assert result.returncode == 0, result.stderr
    return out(result)


def test_command_list_shows_whole_descriptions(cli):
    commands = help_of(cli).split("Commands:", 1)[1]
    assert "..." not in commands
    text = " ".join(commands.split())
    assert "fix Apply fixes in place (safe ones; --unsafe-fixes adds the rest), then report what remains." in text
    assert "run Run SCRIPT on torch_xla and report compilations, executions, syncs, host transfers" in text


def test_argument_names_and_timeout_help(cli):
    for command in ("check", "fix"):
        text = help_of(cli, command)
        assert text.splitlines()[0].endswith(f" {command} [OPTIONS] [FILES]...")
        assert "\n  [FILES]...  " in text
    assert help_of(cli, "rule").splitlines()[0].endswith(" rule [OPTIONS] [CODE]")
    run_help = help_of(cli, "run")
    assert run_help.splitlines()[0].endswith(" run [OPTIONS] SCRIPT [SCRIPT_ARGS]")
    assert "{" not in run_help and "float range" not in run_help and "x>=" not in run_help
    assert "no timeout" in " ".join(run_help.split())
    assert "--timeout SECONDS" in run_help and "--json FILE" in run_help
    assert "The default, 600," in " ".join(run_help.split())
    bad = cli("run", "--timeout", "-1", "x.py")
    assert bad.returncode == 2 and b"must be 0 (no timeout) or more seconds" in bad.stderr


def test_rule_xla000_explains_the_syntax_error_pseudo_rule(cli):
    result = cli("rule", "xla000")
    assert result.returncode == 0
    assert out(result).startswith("# syntax-error (XLA000)\n\nThe file cannot be read or parsed as Python.")
    assert json.loads(out(cli("rule", "XLA000", "--output-format", "json")))["name"] == "syntax-error"


def test_each_rule_doc_has_one_example():
    from xlalint.docs import explain
    from xlalint.rules import all_rules

    for rule in all_rules():
        text = explain(rule, level=2)
        assert len([line for line in text.splitlines() if line.lstrip("#") == " Example"]) == 1, rule.code


def test_quiet_diff_prints_the_diff_only(tmp_path, cli):
    write(tmp_path, "train.py", CUDA_SCRIPT)
    result = cli("fix", "--diff", "-q", "train.py", cwd=tmp_path)
    assert result.returncode == 1
    assert out(result).startswith("--- a/train.py\n+++ b/train.py\n")
    assert result.stderr == b""
    loud = cli("fix", "--diff", "train.py", cwd=tmp_path)
    assert b"Would fix 2 errors in 1 file." in loud.stderr
