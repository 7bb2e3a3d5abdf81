"""What a ruff user reads: an unsafe fix marked as ruff marks it, the compact rule list,
"did you mean" for near misses, one style for every user error, and ruff's JSON fields
(`name`, `severity`, `url`)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import CUDA_SCRIPT, run_cli

from xlalint.rules import all_rules

ROOT = Path(__file__).resolve().parents[1]
PLAIN = {"NO_COLOR": "", "FORCE_COLOR": ""}
# XLA301's only fix is unsafe (drop_last=True changes the batches the model sees).
UNSAFE_ONLY = """\
import torch
import torch_xla
from torch.utils.data import DataLoader

loader = DataLoader(ds, batch_size=8)
for x, y in loader:
    model(x).backward()
    opt.step()
    torch_xla.sync()
"""
UNSAFE_NOTE = "note: This is an unsafe fix and may change runtime behavior"
HIDDEN = "1 unsafe fix available with `xlalint fix --unsafe-fixes`."


def error_lines(result) -> list[str]:
    return result.stderr.decode().splitlines()


def test_an_unsafe_only_finding_is_marked_as_ruff_marks_it(tmp_path):
    (tmp_path / "t.py").write_text(UNSAFE_ONLY)
    full = run_cli("check", "--no-cache", "--output-format", "full", "t.py", cwd=tmp_path, env=PLAIN)
    lines = full.stdout.decode().splitlines()
    assert lines[0].startswith("XLA301 ") and "[*]" not in lines[0]
    help_at = next(i for i, line in enumerate(lines) if line.startswith("help: "))
    assert lines[help_at + 1] == UNSAFE_NOTE  # said without --show-fixes too
    assert lines[-2:] == ["Found 1 error.", HIDDEN]

    concise = run_cli("check", "--no-cache", "--output-format", "concise", "t.py", cwd=tmp_path).stdout.decode()
    assert concise.splitlines()[0].startswith("t.py:5:10: XLA301 ") and "[*]" not in concise
    assert concise.splitlines()[-1] == HIDDEN

    both = tmp_path / "both.py"
    both.write_text(UNSAFE_ONLY + "torch.cuda.synchronize()\n")
    text = run_cli("check", "--no-cache", "--output-format", "concise", "both.py", cwd=tmp_path).stdout.decode()
    assert text.splitlines()[-1] == f"[*] 1 fixable with `xlalint fix` ({HIDDEN[:-1]})."

    # Applied with --unsafe-fixes: `[*]`, and the note stays (the fix is still unsafe).
    forced = run_cli("check", "--no-cache", "--unsafe-fixes", "--output-format", "full", "t.py", cwd=tmp_path)
    lines = forced.stdout.decode().splitlines()
    assert lines[0].startswith("XLA301 [*] ") and UNSAFE_NOTE in lines
    assert lines[-1] == "[*] 1 fixable with `xlalint fix --unsafe-fixes`."


def test_a_safe_fix_has_no_unsafe_note(tmp_path):
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    text = run_cli("check", "--no-cache", "--output-format", "full", "train.py", cwd=tmp_path, env=PLAIN)
    assert "unsafe" not in text.stdout.decode()


def test_the_compact_rule_list(tmp_path):
    result = run_cli("rule", "--all", "--output-format", "concise", cwd=tmp_path)
    assert result.returncode == 0
    lines = result.stdout.decode().splitlines()
    rules = list(all_rules())
    assert len(lines) == len(rules)
    for line, rule in zip(lines, rules):
        code, name, fix, summary = re.fullmatch(r"(\S+)  (\S+) +fix: (\S+) +(.+)", line).groups()
        assert (code, name, fix, summary) == (rule.code, rule.name, rule.fix_availability, rule.summary)
    one = run_cli("rule", "xla104", "--output-format", "concise", cwd=tmp_path).stdout.decode()
    assert one.startswith("XLA104  cuda-device  fix: sometimes  ")


@pytest.mark.parametrize(
    ("args", "config", "expected"),
    [
        (("rule", "XLA1O4"), None, "unknown rule `XLA1O4` (did you mean `XLA104`?)"),
        (("rule", "xla1o4"), None, "unknown rule `XLA1O4` (did you mean `XLA104`?)"),
        (
            ("check", "--select", "XLA1O4", "t.py"),
            None,
            "--select: unknown rule selector `XLA1O4` (did you mean `XLA104`?)",
        ),
        (("check", "t.py"), 'select = ["XLA1O4"]', "select: unknown rule selector `XLA1O4` (did you mean `XLA104`?)"),
        (("check", "--ignore", "XLA9", "t.py"), None, "--ignore: unknown rule selector `XLA9`;"),
    ],
)
def test_an_unknown_code_points_at_the_rule_list(tmp_path, args, config, expected):
    _, line = _the_error_line(tmp_path, args, config)
    assert line.startswith("xlalint: error: ") and expected in line
    assert line.endswith("; `xlalint rule --all --output-format concise` lists the rules")


@pytest.mark.parametrize(
    ("args", "config", "expected"),
    [
        (("check", "--selec", "XLA104", "t.py"), None, "unknown option `--selec` (did you mean `--select`?)"),
        (("chek", "t.py"), None, "unknown command `chek` (did you mean `check`?)"),
        (
            ("check", "--output-format", "fulll", "t.py"),
            None,
            "invalid value for '--output-format': 'fulll' is not one of 'full', 'concise', 'text', 'grouped', "
            "'pylint', 'json', 'json-lines', 'github', 'sarif', 'junit' (did you mean `full`?)",
        ),
        (("check", "t.py", "--target-version"), None, "option '--target-version' requires an argument"),
        (("rule",), None, "give a rule code or --all (`xlalint rule --all --output-format concise` lists the rules)"),
        (("check", "t.py"), "selct = []", "unknown key `selct` in xlalint settings (did you mean `select`?)"),
        (
            ("check", "t.py"),
            "[tool.xlalint.rules.XLA101]\nmax-lenght = 3",
            "unknown option `max-lenght` for rule XLA101 (did you mean `max-length`?)",
        ),
        (("check", "--target-version", "two", "t.py"), None, "--target-version"),
    ],
)
def test_every_user_error_is_one_line_in_one_style(tmp_path, args, config, expected):
    """Click's usage errors ("Usage: ... Error: ...") and xlalint's own: the same one line."""
    result, line = _the_error_line(tmp_path, args, config)
    assert line.startswith("xlalint: error: ") and expected in line, line
    assert result.stdout == b""


def test_help_and_a_bare_command_still_print_the_help(tmp_path):
    assert run_cli("check", "--help", cwd=tmp_path).stdout.startswith(b"Usage: ")
    bare = run_cli(cwd=tmp_path)
    assert bare.returncode == 2 and b"Commands:" in bare.stdout + bare.stderr
    assert run_cli("--version", cwd=tmp_path).returncode == 0


def test_check_help_says_what_a_pipe_gets(tmp_path):
    text = " ".join(run_cli("check", "--help", cwd=tmp_path).stdout.decode().split())
    assert "concise (one line each) when piped" in text
    assert "FORCE_COLOR" in text and "NO_COLOR" in text


def test_json_has_ruffs_name_severity_and_url(tmp_path):
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    result = run_cli("check", "--no-cache", "--output-format", "json", "train.py", cwd=tmp_path)
    first = json.loads(result.stdout)[0]
    assert (first["code"], first["name"], first["severity"]) == ("XLA104", "cuda-device", "error")
    page, anchor = first["url"].split("#")
    assert page == (ROOT / "docs" / "rules.md").as_uri()
    # The anchor is GitHub's for the rule's heading in docs/rules.md.
    assert "\n## cuda-device (XLA104)\n" in (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert anchor == "cuda-device-xla104"
    # The same URL in `rule --output-format json`; SARIF, uploaded to code scanning, has
    # no helpUri for a `file:` URL of this machine (its `help` has the whole text).
    rule = json.loads(run_cli("rule", "XLA104", "--output-format", "json", cwd=tmp_path).stdout)
    assert rule["url"] == first["url"]
    sarif = json.loads(run_cli("check", "--no-cache", "--output-format", "sarif", "train.py", cwd=tmp_path).stdout)
    rules = {r["id"]: r for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert "helpUri" not in rules["XLA104"] and rules["XLA104"]["help"]["text"].strip()
    lines = run_cli("check", "--no-cache", "--output-format", "json-lines", "train.py", cwd=tmp_path).stdout
    assert json.loads(lines.splitlines()[0]) == first


def _ruff() -> str | None:
    found = shutil.which("ruff") or str(Path(__import__("sys").executable).parent / "ruff")
    return found if Path(found).is_file() else None


def test_json_fields_are_exactly_ruffs(tmp_path):
    """The README and docs/output.md say so: the same keys as ruff's JSON (a finding
    that follows from the port, or whose fix was withheld, adds one field)."""
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    ours = json.loads(run_cli("check", "--no-cache", "--output-format", "json", "train.py", cwd=tmp_path).stdout)[0]
    expected = {
        "cell", "code", "end_location", "filename", "fix", "location", "message", "name", "noqa_row", "severity", "url"
    }  # fmt: skip
    assert set(ours) == expected
    assert set(ours["fix"]) == {"applicability", "edits", "message"}
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed: compared with the fields of ruff 0.17")
    (tmp_path / "u.py").write_text("import os\n")
    theirs = subprocess.run(
        [ruff, "check", "--no-cache", "--isolated", "--select", "F401", "--output-format", "json", "u.py"],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    first = json.loads(theirs.stdout)[0]
    assert set(first) == set(ours)
    assert set(first["fix"]) == set(ours["fix"]) and set(first["fix"]["edits"][0]) == set(ours["fix"]["edits"][0])
    assert first["severity"] == ours["severity"]


def _the_error_line(tmp_path, args, config):
    """Run the command on a CUDA script (with ``config`` as its settings): it fails with
    exit 2 and one error line, returned with the result."""
    (tmp_path / "t.py").write_text(CUDA_SCRIPT)
    if config is not None:
        (tmp_path / "pyproject.toml").write_text(f"[tool.xlalint]\n{config}\n")
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2
    [line] = error_lines(result)
    return result, line


@pytest.mark.parametrize("code", ["XLA11", "XLA10", "XLA1", "XLA3O1", "XLA2"])
def test_rule_suggests_only_codes_it_accepts(tmp_path, code):
    """Issue 41: `rule XLA11` said `did you mean XLA10?`, and `rule XLA10` then said
    `unknown rule XLA10 (did you mean XLA10?)`. `rule` takes whole codes: it suggests
    whole codes, never the code given, and what it suggests is a rule it explains."""
    result = run_cli("rule", code, cwd=tmp_path)
    assert result.returncode == 2
    suggested = re.findall(r"did you mean `([^`]+)`", result.stderr.decode())
    assert suggested != [code]
    for near in suggested:
        assert run_cli("rule", near, cwd=tmp_path).returncode == 0, near


def test_a_selector_suggests_a_prefix_and_never_itself():
    from xlalint.engine.config import unknown_rule

    known = [r.code for r in all_rules()]
    assert "(did you mean `XLA10`?)" in unknown_rule("unknown rule selector", "XLA1O", known)
    assert "(did you mean `XLA100`?)" in unknown_rule("unknown rule", "XLA10", known, prefixes=False)


def test_sarif_help_uri_is_the_installs_public_url(monkeypatch):
    """A git install from GitHub has a public page for the rules: SARIF points there."""
    from xlalint.engine import reporters, rule_docs

    monkeypatch.setattr(rule_docs, "_rules_page", lambda: "https://github.com/o/xlalint/blob/abc/docs/rules.md")
    sarif = json.loads(reporters.render("sarif", []))
    rules = {r["id"]: r for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["XLA104"]["helpUri"] == "https://github.com/o/xlalint/blob/abc/docs/rules.md#cuda-device-xla104"
