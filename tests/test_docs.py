"""The shipped documentation: docs/rules.md and the README's rule table are generated
from the rule modules and current; the README's commands run as written."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import CUDA_SCRIPT

from xlalint import docs
from xlalint.rules import all_rules

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_generated_docs_are_current():
    stale = docs.stale()
    assert stale == [], f"{', '.join(stale)} out of date: run `python -m xlalint.docs`"


def test_every_rule_is_documented_and_in_the_readme_table():
    rules_md = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    for rule in all_rules():
        assert f"## {rule.name} ({rule.code})" in rules_md
        assert f"| [{rule.code}](docs/rules.md#{rule.name}-{rule.code.lower()}) | {rule.name} |" in README


def test_a_new_rule_makes_the_docs_stale(monkeypatch):
    class Fake:
        code, name, summary, fix_availability = "XLA999", "fake-rule", "a fake", "none"
        explanation, options, INVALID = "## Why\nBecause.", {}, []

    monkeypatch.setattr("xlalint.rules.all_rules", lambda: (*all_rules(), Fake))
    assert "| [XLA999](docs/rules.md#fake-rule-xla999) | fake-rule | a fake | none |" in docs.table("docs/rules.md")
    assert set(docs.stale()) == {"docs/rules.md", "README.md", "xlalint/rules/catalog.py"}
    assert '"XLA999": "test_docs",' in docs.catalog_source()


def test_no_reference_to_documents_that_do_not_ship():
    for path in [ROOT / "README.md", *(ROOT / "xlalint").rglob("*.py")]:
        assert "RULES.md" not in path.read_text(encoding="utf-8"), path


def test_help_shows_no_type_placeholders(cli):
    for command in ([], ["check"], ["fix"], ["rule"], ["server"]):
        result = cli(*command, "--help")
        assert result.returncode == 0
        assert "<bool>" not in result.stdout.decode(), command


def readme_commands() -> list[str]:
    """Every `xlalint` command in the README's bash and YAML snippets (the harness's
    `xlalint run` and `xlalint server` have their own tests)."""
    commands = []
    for body in re.findall(r"```(?:bash|yaml)\n(.*?)```", README, re.S):
        for line in body.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            line = re.sub(r"^- run:\s*", "", line)
            line = line.split("&& ", 1)[1] if line.startswith("pip ") and "&& xlalint" in line else line
            if line.startswith("xlalint ") and not line.startswith(("xlalint run", "xlalint server")):
                commands.append(line)
    return commands


def test_the_readme_has_the_commands_it_should():
    commands = readme_commands()
    assert "xlalint check --output-format github ." in commands
    assert "xlalint check --add-noqa ." in commands
    assert len(commands) >= 10


@pytest.mark.parametrize("command", readme_commands())
def test_readme_command_runs(command, tmp_path):
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    env = {**os.environ, "FILE": "train.py", "PYTHONPATH": str(ROOT)}
    shell = f'xlalint() {{ "{sys.executable}" -m xlalint.cli "$@"; }}\n{command}'
    result = subprocess.run(["bash", "-c", shell], cwd=tmp_path, env=env, capture_output=True, timeout=300)
    stderr = result.stderr.decode()
    assert result.returncode in (0, 1), stderr
    assert "error:" not in stderr.lower() and "usage:" not in stderr.lower(), stderr
