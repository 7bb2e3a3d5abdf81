"""Config that means what it says (issue 22 item 9, issue 20 item 3): `select = []`
selects nothing, an empty selector is an error, a walk that finds nothing says so,
many `exclude` globs cost one resolve per path and one compile, and config does not
know the rule catalog."""

from __future__ import annotations

import ast
import fnmatch
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import xlalint.engine.config as config_module
from xlalint.cli import app
from xlalint.engine.config import ConfigFinder, Settings
from xlalint.engine.files import discover
from xlalint.rules import rules_by_code

CUDA = "import torch\nx = torch.ones(2).cuda()\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_an_empty_select_selects_no_rule_and_says_so(project):
    """Issue 29 item 12: not "All checks passed!" (CI would pass unchecked), but the
    line the command line gives for a selection of nothing."""
    (project / "pyproject.toml").write_text("[tool.xlalint]\nselect = []\n")
    (project / "a.py").write_text(CUDA)
    result = run("check", "--no-cache", "a.py")
    assert (result.exit_code, "XLA104" in result.stdout, result.stdout) == (2, False, "")
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("xlalint: error: no rule selected (by ") and "pyproject.toml" in line
    assert line.endswith(": select `ALL` for every rule")


@pytest.mark.parametrize("args", [["--ignore", "ALL"], ["--select", "XLA2", "--ignore", "XLA2"]])
def test_a_command_line_that_selects_no_rule_says_the_same(project, args):
    (project / "a.py").write_text(CUDA)
    result = run("check", "--no-cache", *args, "a.py")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line == "xlalint: error: no rule selected (by the command line): select `ALL` for every rule"


def test_no_rule_selected_holds_for_stdin_and_fix(project):
    (project / "xlalint.toml").write_text("select = []\n")
    for args in (["check", "-"], ["fix", "-"], ["fix", "--no-cache", "."]):
        (project / "a.py").write_text(CUDA)
        result = CliRunner().invoke(app, args, input=CUDA, catch_exceptions=False)
        assert result.exit_code == 2 and "no rule selected" in result.stderr, args
        assert (project / "a.py").read_text() == CUDA


def test_show_settings_still_shows_an_empty_selection(project):
    (project / "xlalint.toml").write_text("select = []\n")
    (project / "a.py").write_text(CUDA)
    result = run("check", "--show-settings", "a.py")
    assert result.exit_code == 0 and "xlalint.toml" in result.stdout


def test_an_empty_select_with_extend_select_selects_only_those(project):
    (project / "pyproject.toml").write_text('[tool.xlalint]\nselect = []\nextend-select = ["XLA104"]\n')
    (project / "a.py").write_text(CUDA + "xm.mark_step()\n")
    result = run("check", "--no-cache", "--output-format", "concise", "a.py")
    assert {line.split()[1] for line in result.stdout.splitlines() if ": XLA" in line} == {"XLA104"}


@pytest.mark.parametrize("key", ["select", "ignore", "extend-select"])
@pytest.mark.parametrize("selector", ["", " "])
def test_an_empty_selector_is_a_one_line_error(project, key, selector):
    (project / "pyproject.toml").write_text(f'[tool.xlalint]\n{key} = ["{selector}"]\n')
    (project / "a.py").write_text(CUDA)
    result = run("check", "--no-cache", "a.py")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("xlalint: error: ") and "empty rule selector" in line and key in line


@pytest.mark.parametrize(
    ("option", "value"),
    [
        *((option, value) for option in ("--ignore", "--extend-select") for value in ("", " ", "XLA104,")),
        ("--select", "XLA104,"),
    ],
)
def test_an_empty_selector_on_the_command_line_is_a_one_line_error(project, option, value):
    (project / "a.py").write_text(CUDA)
    result = run("check", "--no-cache", option, value, "a.py")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"xlalint: error: {option}: ") and "empty rule selector" in line


@pytest.mark.parametrize("value", ["", " "])
def test_select_nothing_on_the_command_line_says_what_select_nothing_in_the_config_does(project, value):
    """Issue 40 §7: `--select ''` and `select = []` said the same in different words."""
    (project / "a.py").write_text(CUDA)
    result = run("check", "--no-cache", "--select", value, "a.py")
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert line == "xlalint: error: no rule selected (by the command line): select `ALL` for every rule"


def test_a_walk_that_finds_no_python_file_says_so(project):
    (project / "src").mkdir()
    (project / "src" / "notes.txt").write_text("nothing to check\n")
    result = run("check", "--no-cache", "src")
    assert result.exit_code == 0
    assert "All checks passed" not in result.stdout
    assert "No Python files found" in result.stderr


def test_a_walk_that_finds_files_still_passes(project):
    (project / "a.py").write_text("x = 1\n")
    result = run("check", "--no-cache", ".")
    assert "All checks passed!" in result.stdout and "No Python files" not in result.stderr


def test_many_exclude_globs_resolve_each_path_once_and_compile_once(project, monkeypatch):
    globs = [f"generated_{i}_*.py" for i in range(10_000)] + ["skip_*.py"]
    (project / "pyproject.toml").write_text(f"[tool.xlalint]\nexclude = {globs!r}\n".replace("'", '"'))
    for i in range(20):
        (project / f"m{i}.py").write_text("x = 1\n")
    (project / "skip_me.py").write_text("x = 1\n")
    resolves, compiles = [], []
    real_resolve, real_compile = Path.resolve, re.compile
    monkeypatch.setattr(Path, "resolve", lambda self, *a, **k: resolves.append(self) or real_resolve(self, *a, **k))
    monkeypatch.setattr(re, "compile", lambda *a, **k: compiles.append(a) or real_compile(*a, **k))
    monkeypatch.setattr(fnmatch, "fnmatch", lambda *a: pytest.fail("a glob matched one path at a time"))
    config_module._globs.cache_clear()
    finder = ConfigFinder(None, rules_by_code())
    found = sorted(p.name for p in discover([Path(".")], finder))
    assert found == sorted(f"m{i}.py" for i in range(20))
    compiled = [a for a in compiles if "generated_" in str(a[0])]
    assert len(compiled) <= 2  # the set of globs, once (as whole names and as folders)
    assert len(resolves) <= 4 * 21, len(resolves)  # per path, not per glob


def test_exclude_globs_match_as_before():
    settings = Settings(exclude=("vendor", "gen_*.py", "legacy/*"), root=str(Path.cwd()))
    assert settings.is_excluded(Path("vendor"))
    assert settings.is_excluded(Path("src/vendor/a.py"))  # a folder on the way
    assert settings.is_excluded(Path("pkg/gen_model.py"))  # the file name
    assert settings.is_excluded(Path("legacy/deep/a.py"))  # relative to the config's folder
    assert not settings.is_excluded(Path("src/train.py"))
    assert not Settings().is_excluded(Path("vendor"))


def test_one_file_check_does_not_import_the_ignore_matcher(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.xlalint]\nexclude = ["vendor/*"]\n')
    (tmp_path / "a.py").write_text(CUDA)
    code = (
        "import sys\nfrom xlalint.cli import main\nsys.argv = ['xlalint', 'check', '--no-cache', 'a.py']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\nsys.stdout.flush()\n"
        "sys.stderr.write('PATHSPEC:' + str('xlalint.engine.gitignore' in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "XLA104" in result.stdout
    assert result.stderr.strip().endswith("PATHSPEC:False"), result.stderr


def test_config_does_not_import_the_rule_catalog():
    """Config is told the known rules; importing the catalog from it made a circle
    (config -> rules -> rule -> ... ), even from inside a function."""
    tree = ast.parse(Path(config_module.__file__).read_text(encoding="utf-8"))
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert not [name for name in imported if name and name.startswith("xlalint")], imported


def test_config_checks_codes_against_the_rules_it_is_given(tmp_path):
    class Declares:
        options: dict = {}

    (tmp_path / "pyproject.toml").write_text('[tool.xlalint]\nselect = ["XLA9"]\n')
    settings = ConfigFinder(None, {"XLA901": Declares}).for_path(tmp_path / "a.py")
    assert settings.select == ("XLA9",)
    with pytest.raises(config_module.ConfigError, match="unknown rule selector `XLA9`"):
        ConfigFinder(None, rules_by_code()).for_path(tmp_path / "a.py")


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (lambda path: path.mkdir(), "a folder"),
        (lambda path: os.mkfifo(path), "a FIFO (named pipe)"),
        (None, "a character device"),
    ],
)
def test_a_config_that_exists_but_is_no_file_says_what_it_is(project, make, what):
    """Issue 40 §7: `--config` naming a FIFO, /dev/zero or a folder said "config file not
    found" although it exists (and a FIFO must not hang the check)."""
    (project / "a.py").write_text(CUDA)
    config = "/dev/zero" if make is None else "cfg.toml"
    if make is not None:
        make(project / config)
    result = run("check", "--no-cache", "--config", config, "a.py")
    assert result.exit_code == 2
    assert result.stderr == f"xlalint: error: {config}: {what}, not a config file (give a TOML file)\n"
    missing = run("check", "--no-cache", "--config", "missing.toml", "a.py")
    assert missing.stderr == "xlalint: error: missing.toml: config file not found\n"
