"""The fix controls ruff users reach for: ``unsafe-fixes``, ``fixable``/``unfixable``,
``extend-safe-fixes``/``extend-unsafe-fixes`` in the config, ``--unsafe-fixes`` /
``--no-unsafe-fixes``, ``--extend-exclude``/``extend-exclude``, ``--show-files`` and
``--exit-non-zero-on-fix``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from xlalint.cli import app
from xlalint.engine.config import ConfigError, Settings, settings_from_table
from xlalint.rules import rules_by_code

# Line 2: XLA104's safe fix; line 3: XLA104's unsafe fix (the autocast); line 5: XLA201's safe fix.
SCRIPT = "import torch\nx = torch.ones(2).cuda()\nwith torch.cuda.amp.autocast():\n    pass\ntorch.save(x, 'x.pt')\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text(SCRIPT)

    def config(text: str) -> None:
        (tmp_path / "pyproject.toml").write_text("[tool.xlalint]\n" + text)

    config.root = tmp_path
    return config


def run(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def fixes(*args: str) -> dict[int, str | None]:
    """Line -> the applicability of the finding's fix as JSON shows it (None: no fix)."""
    result = run("check", "--no-cache", "--output-format", "json", *args, "a.py")
    found = json.loads(result.stdout)
    return {d["location"]["row"]: (d["fix"] or {}).get("applicability") for d in found}


def test_defaults_offer_every_fix_with_its_own_applicability(project):
    assert fixes() == {2: "safe", 3: "unsafe", 5: "safe"}


def test_unfixable_rule_offers_no_fix_and_no_marker(project):
    project('unfixable = ["XLA104"]\n')
    assert fixes() == {2: None, 3: None, 5: "safe"}
    text = run("check", "--no-cache", "--output-format", "concise", "a.py").stdout
    assert "a.py:2:5: XLA104 `.cuda()`" in text  # no [*]
    assert "[*] 1 fixable with `xlalint fix`." in text
    assert "--unsafe-fixes" not in text  # an unfixable rule's unsafe fix is not hinted at either


def test_fixable_limits_fixes_to_the_rules_it_names(project):
    project('fixable = ["XLA2"]\n')
    assert fixes() == {2: None, 3: None, 5: "safe"}


def test_the_more_specific_selector_wins_and_unfixable_wins_a_tie(project):
    project('fixable = ["XLA104"]\nunfixable = ["XLA1"]\n')
    assert fixes() == {2: "safe", 3: "unsafe", 5: None}
    project('fixable = ["XLA104"]\nunfixable = ["XLA104"]\n')
    assert fixes() == {2: None, 3: None, 5: None}


def test_extend_safe_and_unsafe_fixes_change_the_applicability(project):
    project('extend-safe-fixes = ["XLA104"]\nextend-unsafe-fixes = ["XLA201"]\n')
    assert fixes() == {2: "safe", 3: "safe", 5: "unsafe"}
    project('extend-safe-fixes = ["XLA104"]\nextend-unsafe-fixes = ["XLA104"]\n')  # a tie: unsafe
    assert fixes() == {2: "unsafe", 3: "unsafe", 5: "safe"}
    project('extend-safe-fixes = ["XLA104"]\nextend-unsafe-fixes = ["ALL"]\n')  # the more specific: safe
    assert fixes() == {2: "safe", 3: "safe", 5: "unsafe"}


def test_fix_applies_what_the_controls_make_safe_and_leaves_the_unfixable(project):
    project('extend-safe-fixes = ["XLA104"]\nunfixable = ["XLA201"]\n')
    run("fix", "--no-cache", "a.py")
    fixed = (project.root / "a.py").read_text()
    assert "torch.autocast" in fixed and ".cuda()" not in fixed  # the unsafe fix, made safe
    assert "torch.save(x, 'x.pt')" in fixed  # XLA201 is unfixable


def test_unsafe_fixes_in_the_config_applies_them_and_the_command_line_overrides_it(project):
    project("unsafe-fixes = true\n")
    text = run("check", "--no-cache", "--output-format", "concise", "a.py").stdout
    assert "a.py:3:6: XLA104 [*]" in text
    text = run("check", "--no-cache", "--output-format", "concise", "--no-unsafe-fixes", "a.py").stdout
    assert "a.py:3:6: XLA104 CUDA" in text
    assert "--unsafe-fixes" not in text  # turned off: not hinted at
    run("fix", "--no-cache", "--no-unsafe-fixes", "a.py")
    assert "torch.cuda.amp.autocast" in (project.root / "a.py").read_text()
    run("fix", "--no-cache", "a.py")
    assert "torch.cuda.amp.autocast" not in (project.root / "a.py").read_text()


def test_unsafe_fixes_false_hides_the_hint_and_unset_shows_it(project):
    text = run("check", "--no-cache", "--output-format", "concise", "a.py").stdout
    assert "[*] 2 fixable with `xlalint fix` (1 unsafe fix available with `xlalint fix --unsafe-fixes`)." in text
    project("unsafe-fixes = false\n")
    text = run("check", "--no-cache", "--output-format", "concise", "a.py").stdout
    assert "unsafe" not in text
    text = run("check", "--no-cache", "--output-format", "concise", "--unsafe-fixes", "a.py").stdout
    assert "a.py:3:6: XLA104 [*]" in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('unsafe-fixes = "yes"\n', "`unsafe-fixes` must be true or false"),
        ('fixable = "XLA104"\n', "`fixable` must be a list of strings"),
        ('unfixable = ["XLA999"]\n', "unfixable: unknown rule selector `XLA999`"),
        ('extend-safe-fixes = ["E501"]\n', "extend-safe-fixes: unknown rule selector `E501`"),
        ('extend-unsafe-fixes = [""]\n', "extend-unsafe-fixes: an empty rule selector"),
        ("extend-exclude = 3\n", "`extend-exclude` must be a list of strings"),
    ],
)
def test_bad_fix_controls_are_one_line_errors(text, message):
    import tomllib

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("`", "`")):
        settings_from_table(tomllib.loads(text), "pyproject.toml", None, rules_by_code())


def test_fix_policy_is_computed_per_code():
    settings = Settings(fixable=("XLA1", "XLA201"), unfixable=("XLA104",), extend_unsafe_fixes=("XLA2",))
    policy = settings.fix_policy(["XLA101", "XLA104", "XLA201", "XLA202"])
    assert policy == {"XLA101": "", "XLA104": None, "XLA201": "unsafe", "XLA202": None}


def test_show_settings_lists_the_fix_controls(project):
    project('unfixable = ["XLA104"]\nextend-exclude = ["gen"]\n')
    text = run("check", "--show-settings", "a.py").stdout
    assert 'unfixable = ["XLA104"]' in text
    assert 'extend-exclude = ["gen"]' in text
    assert "unsafe-fixes = hint (not set)" in text


# --- files ------------------------------------------------------------------------------------


def tree(root) -> None:
    for name in ("sub/b.py", "gen/c.py", "gen/deep/d.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(SCRIPT)


def test_show_files_lists_the_files_a_check_would_read_and_checks_nothing(project):
    tree(project.root)
    result = run("check", "--show-files", ".")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        str(project.root / name) for name in ("a.py", "gen/c.py", "gen/deep/d.py", "sub/b.py")
    ]


def test_extend_exclude_on_the_command_line_and_in_the_config(project):
    tree(project.root)
    result = run("check", "--show-files", "--extend-exclude", "gen,sub/b.py", ".")
    assert result.stdout.splitlines() == [str(project.root / "a.py")]
    project('exclude = ["sub"]\nextend-exclude = ["gen"]\n')
    assert run("check", "--show-files", ".").stdout.splitlines() == [str(project.root / "a.py")]
    found = json.loads(run("check", "--no-cache", "--output-format", "json", "--extend-exclude", "a.py", ".").stdout)
    assert found == []


def test_exit_non_zero_on_fix(project):
    (project.root / "a.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    assert run("fix", "--no-cache", "--exit-non-zero-on-fix", "a.py").exit_code == 1  # fixed, none left
    assert run("fix", "--no-cache", "--exit-non-zero-on-fix", "a.py").exit_code == 0  # nothing to fix
    (project.root / "a.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    assert run("fix", "--no-cache", "a.py").exit_code == 0
    (project.root / "a.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    assert run("check", "--fix", "--no-cache", "--exit-non-zero-on-fix", "--exit-zero", "a.py").exit_code == 0
